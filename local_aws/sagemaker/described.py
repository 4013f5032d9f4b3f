"""What SageMaker's Describe calls answer of a hosting resource where moto's own description
differs from AWS's shape (botocore's sagemaker model, the API reference): the description moto
made, rewritten member by member."""

from __future__ import annotations

from typing import Any


def data_capture_summary(capture: dict[str, Any]) -> dict[str, Any]:
    """DescribeEndpoint's DataCaptureConfigSummary of the config's DataCaptureConfig ("the
    currently active data capture configuration used by your Endpoint", API reference): its five
    members are required. KmsKeyId is the config's key, or empty where it names none (the
    model allows a length of 0; AWS documents no other value)."""
    enabled = bool(capture.get("EnableCapture", True))
    return {
        "EnableCapture": enabled,
        "CaptureStatus": "Started" if enabled else "Stopped",
        "CurrentSamplingPercentage": int(capture["InitialSamplingPercentage"]),
        "DestinationS3Uri": str(capture["DestinationS3Uri"]),
        "KmsKeyId": str(capture.get("KmsKeyId", "")),
    }


#: The configs DescribeEndpointConfig answers only where the endpoint config has them (moto answers
#: an empty one for a config CloudFormation created without, which lacks their required members:
#: DataCaptureConfig's InitialSamplingPercentage, DestinationS3Uri and CaptureOptions,
#: AsyncInferenceConfig's OutputConfig).
OPTIONAL_CONFIGS = ("DataCaptureConfig", "AsyncInferenceConfig")


def endpoint_config(described: dict[str, Any]) -> dict[str, Any]:
    """DescribeEndpointConfig: each of its OPTIONAL_CONFIGS only where the config has one."""
    return {k: v for k, v in described.items() if v or k not in OPTIONAL_CONFIGS}


def endpoint(described: dict[str, Any], capture: dict[str, Any] | None) -> dict[str, Any]:
    """DescribeEndpoint, whose endpoint runs a config with the DataCaptureConfig `capture`: its
    summary where there is one, else no member (moto answers the config's own, or an empty one)."""
    answer = {k: v for k, v in described.items() if k != "DataCaptureConfig"}
    if capture:
        answer["DataCaptureConfig"] = data_capture_summary(capture)
    return answer


def model(described: dict[str, Any]) -> dict[str, Any]:
    """DescribeModel: a VpcConfig only where the model has one (moto answers an empty one for a
    model CloudFormation created without, which lacks the members the model requires)."""
    if described.get("VpcConfig"):
        return described
    return {k: v for k, v in described.items() if k != "VpcConfig"}
