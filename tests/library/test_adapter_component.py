"""AdapterComponent in a bare ``Stack()``: a LoRA adapter's archive served on an endpoint's
inference component, named by its own component, invoked and measured by it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from llm_contracts.manifest import PAYLOAD_MANIFEST, write_manifest
from llm_inference_cdk import AdapterComponent, AdapterComponentProps, InferenceComponentProps, PropError
from tests.library import helpers


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    """An archive as the builder leaves it: in a folder whose payload manifest lists it alone."""
    path = tmp_path / "support" / "support.tar.gz"
    path.parent.mkdir()
    path.write_bytes(gzip.compress(b"not read at synthesis"))
    write_manifest(path.parent, "payload", {path.name: path}, name=PAYLOAD_MANIFEST)
    return path


def _components(template: Template) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template.find_resources("AWS::SageMaker::InferenceComponent").items()}


def test_an_adapter_names_the_endpoint_s_component_as_its_base(archive: Path) -> None:
    stack, endpoint = helpers.built(
        instance_type="ml.g5.2xlarge",
        inference_component=InferenceComponentProps(max_copies=2, accelerators=1, target_invocations_per_copy=10),
    )
    adapter = AdapterComponent(stack, "Support", endpoint=endpoint, props=AdapterComponentProps(archive=archive))
    caller = iam.Role(stack, "Caller", assumed_by=iam.AccountRootPrincipal())
    adapter.grant_invoke(caller)
    template = Template.from_stack(stack)
    components = _components(template)
    (base_id,) = [
        k for k, v in components.items() if "BaseInferenceComponentName" not in v["Properties"]["Specification"]
    ]
    (adapter_id,) = [k for k in components if k != base_id]
    spec = components[adapter_id]["Properties"]["Specification"]
    assert spec["BaseInferenceComponentName"] == endpoint.component_name
    assert "ComputeResourceRequirements" not in spec and "ModelName" not in spec  # the base's compute
    assert "RuntimeConfig" not in components[adapter_id]["Properties"]
    assert base_id in components[adapter_id]["DependsOn"]
    # Under a key that keeps the archive's name: SageMaker takes only a .tar.gz.
    url = json.dumps(stack.resolve(spec["Container"]["ArtifactUrl"]))
    assert url.endswith('/support.tar.gz"]]}'), url
    # The caller may invoke the endpoint through this adapter alone, not the base component.
    policies = template.find_resources("AWS::IAM::Policy").values()
    every = [s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]]
    (invoke,) = [s for s in every if s["Action"] == "sagemaker:InvokeEndpoint"]
    assert len(invoke["Resource"]) == 2 and stack.resolve(adapter.component_arn) in invoke["Resource"]
    metric = adapter.metric("Invocations")
    assert metric.dimensions == {"InferenceComponentName": adapter.component_name}


def test_an_adapter_needs_an_endpoint_of_inference_components_and_a_tar_gz(archive: Path, tmp_path: Path) -> None:
    stack, endpoint = helpers.built(instance_type="ml.g5.2xlarge")
    with pytest.raises(PropError, match="an endpoint in inference-component mode"):
        AdapterComponent(stack, "Support", endpoint=endpoint, props=AdapterComponentProps(archive=archive))
    with pytest.raises(PropError, match=r"archive.*a \.tar\.gz of the adapter's files"):
        AdapterComponentProps(archive=tmp_path / "adapter")
