"""Our reading of the sagemaker SDK's image JSON agrees with the SDK's own `retrieve`."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App, CfnMapping, Environment, Stack
from aws_cdk.assertions import Template

from llm_inference_cdk.dlc import ImageResolutionError, cuda_of, djl_neuronx, huggingface_inference, vllm_sagemaker
from project_config import ConfigError, load_config
from tests.infra.helpers import cdk_context

REGIONS = ["us-east-1", "eu-west-1", "ap-southeast-3", "af-south-1", "cn-north-1", "us-gov-west-1"]


def _resolved(uri: str, region: str) -> str:
    stack = Stack(App(), "S", env=Environment(account="111122223333", region=region))
    # A literal region leaves only AWS::URLSuffix unresolved.
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    parts = stack.resolve(uri)["Fn::Join"][1]
    return "".join(suffix if isinstance(p, dict) else p for p in parts)


def _image(region: str, image):  # type: ignore[no-untyped-def]
    stack = Stack(App(), "S", env=Environment(account="111122223333", region=region))
    return _resolved(image.uri(stack), region)


@pytest.mark.parametrize("region", REGIONS)
def test_huggingface_uri_matches_sdk_retrieve(region: str, sdk_image_uris: Any) -> None:
    expected = sdk_image_uris.retrieve(
        framework="huggingface",
        region=region,
        version="4.51.3",
        base_framework_version="pytorch2.6.0",
        py_version="py312",
        instance_type="ml.g4dn.xlarge",
        image_scope="inference",
    )
    image = huggingface_inference(transformers_version="4.51.3", pytorch_version="2.6.0", py_version="py312")
    assert _image(region, image) == expected


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1", "sa-east-1"])
def test_djl_neuronx_uri_matches_sdk_retrieve(region: str, sdk_image_uris: Any) -> None:
    expected = sdk_image_uris.retrieve(framework="djl-neuronx", region=region, version="0.29.0")
    assert _image(region, djl_neuronx("0.29.0")) == expected


@pytest.mark.parametrize("region", ["us-east-1", "eu-west-1", "ap-southeast-3", "af-south-1"])
@pytest.mark.parametrize("version", ["0.30.0", "0.30", "0.27.1"])
def test_vllm_uri_matches_sdk_retrieve(region: str, version: str, sdk_image_uris: Any) -> None:
    expected = sdk_image_uris.retrieve(
        framework="vllm", region=region, version=version, instance_type="ml.g5.xlarge", image_scope="inference"
    )
    assert _image(region, vllm_sagemaker(version)) == expected


def test_the_cuda_an_image_needs_comes_from_its_tag() -> None:
    assert cuda_of(vllm_sagemaker("0.30.0")) == "13.0"
    hf = huggingface_inference(transformers_version="4.51.3", pytorch_version="2.6.0", py_version="py312")
    assert cuda_of(hf) == "12.4"
    assert cuda_of(djl_neuronx("0.29.0")) is None


def test_unknown_versions_name_what_exists() -> None:
    with pytest.raises(ImageResolutionError, match=r"transformers_version='9.9.9' is invalid: .*4\.51\.3"):
        huggingface_inference(transformers_version="9.9.9", pytorch_version="2.6.0", py_version="py312")
    with pytest.raises(ImageResolutionError, match=r"pytorch_version='1.0.0' is invalid: .*: 2\.6\.0"):
        huggingface_inference(transformers_version="4.51.3", pytorch_version="1.0.0", py_version="py312")
    with pytest.raises(ImageResolutionError, match=r"image_version='0.1.0'"):
        djl_neuronx("0.1.0")
    with pytest.raises(ImageResolutionError, match=r"vllm_version='0.1.0' is invalid: allowed is one of .*0\.30\.0"):
        vllm_sagemaker("0.1.0")


@pytest.mark.parametrize(
    ("key", "value"),
    [("gptj.transformers_version", "9.9.9"), ("gptj.py_version", "py399"), ("inf2.image_version", "0.1.0")],
)
def test_the_app_names_the_setting_of_a_version_without_an_image(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{key}='{value}' is invalid: allowed is "):
        load_config(cdk_context(**{key: value}))


def test_a_region_without_the_image_is_refused() -> None:
    stack = Stack(App(), "S", env=Environment(account="111122223333", region="us-west-1"))
    with pytest.raises(ImageResolutionError, match=r"region='us-west-1' is invalid: allowed is a region where"):
        djl_neuronx("0.29.0").uri(stack)


def test_environment_agnostic_stack_gets_one_mapping_of_every_region() -> None:
    stack = Stack(App(), "S")
    image = huggingface_inference(transformers_version="4.51.3", pytorch_version="2.6.0", py_version="py312")
    image.uri(stack)
    image.repository_arn(stack)
    mappings = [c for c in stack.node.children if isinstance(c, CfnMapping)]
    assert len(mappings) == 1
    table = Template.from_stack(stack).find_mappings("*")[stack.resolve(mappings[0].logical_id)]
    assert {region: row["account"] for region, row in table.items()} == dict(image.registries)
    assert len(image.registries) > 20
