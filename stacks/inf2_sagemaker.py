"""Inf2Stack on ``inf2.platform=sagemaker``: the same bundle, served by the same LMI neuronx image,
on a SageMaker real-time or asynchronous endpoint of an ``ml.inf2`` type, through the construct
library's ``SageMakerEndpoint`` (autoscaling between ``min_capacity`` and ``max_capacity``,
updates guarded by the endpoint's alarms and rolled back on them, the alarm topic, the
dashboard, ``grant_invoke``), as the GPT-2 and GPT-J stacks serve theirs.

The bundle's files go uncompressed under an S3 prefix (``S3PrefixModelData``, listed by the
bundle's inner manifest), which SageMaker places in ``/opt/ml/model`` before the container
starts: the form LMI documents for SageMaker. The container reaches the network only when the
bundle makes it download the model from the hub; a bundle that ships its model runs isolated.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from aws_cdk import CfnOutput, Stack

from llm_contracts.inf2 import DTYPE_BYTES, ModelFacts
from llm_contracts.inf2_sagemaker import volume_parts, volume_problems
from llm_contracts.manifest import MANIFEST_NAME, read_manifest
from llm_inference_cdk import ContainerImage, S3PrefixModelData, SageMakerEndpoint, SageMakerEndpointProps
from llm_inference_cdk.dlc import djl_neuronx
from project_config import ConfigError, Inf2Settings
from stacks.endpoint import add_endpoint


@dataclass(frozen=True)
class _EndpointSection:
    """The inf2 section as stacks.endpoint.add_endpoint reads a SageMaker stack's section."""

    endpoint: SageMakerEndpointProps
    alarm_topic_arn: str | None
    alarm_email: str | None

    def container_environment(self) -> dict[str, str]:
        # serving.properties in the bundle holds every setting of the server.
        return {}


def bundle_bytes(folder: Mapping[str, Mapping[str, int]]) -> int:
    return sum(int(entry["size"]) for entry in folder.values())


def check_sagemaker_bundle(settings: Inf2Settings, facts: ModelFacts, *, model_id: str, ships_model: bool) -> None:
    """The ML storage volume holds what the start writes, and the container's network follows
    where the model comes from (each problem names its key)."""
    endpoint = settings.endpoint
    assert endpoint is not None
    inner = read_manifest(settings.bundle, fix="rebuild it with python -m artifacts_builder inf2")
    weights = facts.num_parameters * DTYPE_BYTES[settings.model_server.dtype]
    parts = volume_parts(
        weights_bytes=weights, bundle_bytes=bundle_bytes(inner["files"]), downloads_weights=not ships_model
    )
    problems = volume_problems(volume_size_gb=endpoint.volume_size or 0, model_id=model_id, parts=parts)
    if not ships_model and settings.enable_network_isolation:
        problems.append(
            "inf2.enable_network_isolation=True is invalid: allowed is false (or unset) with this bundle: it "
            f"makes the container download {model_id} from the Hugging Face hub; to serve the endpoint without "
            "network, build the bundle with --model-dir so that it ships the model"
        )
    if problems:
        raise ConfigError("; ".join(problems))


def add_sagemaker_endpoint(stack: Stack, settings: Inf2Settings, *, ships_model: bool) -> SageMakerEndpoint:
    """The endpoint and its extras; `ships_model`: the bundle holds the model (else the container
    downloads it from the hub, which needs the network)."""
    endpoint = settings.endpoint
    assert endpoint is not None
    isolated = ships_model if settings.enable_network_isolation is None else settings.enable_network_isolation
    model_data = S3PrefixModelData(stack, "BundleFiles", folder=settings.bundle, manifest_name=MANIFEST_NAME)
    ms = settings.model_server
    image = (
        ContainerImage.from_uri(ms.image_uri)
        if ms.image_uri is not None
        else ContainerImage.from_dlc(djl_neuronx(ms.image_version))
    )
    section = _EndpointSection(
        dataclasses.replace(endpoint, enable_network_isolation=isolated),
        settings.alarm_topic_arn,
        settings.alarm_email,
    )
    made = add_endpoint(stack, section, image, model_data)
    CfnOutput(stack, "ImageUri", value=made.image_uri)
    return made
