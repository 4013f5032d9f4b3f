"""The local AWS answers in AWS's own shapes: what a Describe call answers of a resource is what
AWS answers of it, member for member."""

from __future__ import annotations

from local_aws import LocalAws
from tests.local_aws.helpers import client, echo_config, echo_endpoint

CAPTURE = {
    "InitialSamplingPercentage": 20,
    "DestinationS3Uri": "s3://captured/echo",
    "CaptureOptions": [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}],
}


def test_an_endpoint_without_data_capture_describes_none(aws: LocalAws) -> None:
    aws.reset()
    echo_endpoint(aws, "echo")
    sm = client(aws, "sagemaker")
    assert "DataCaptureConfig" not in sm.describe_endpoint_config(EndpointConfigName="echo-config")
    assert "DataCaptureConfig" not in sm.describe_endpoint(EndpointName="echo")


def test_an_endpoint_with_data_capture_describes_its_summary(aws: LocalAws) -> None:
    aws.reset()
    echo_config(aws, "plain")
    sm = client(aws, "sagemaker")
    variants = sm.describe_endpoint_config(EndpointConfigName="plain")["ProductionVariants"]
    sm.create_endpoint_config(EndpointConfigName="captured", ProductionVariants=variants, DataCaptureConfig=CAPTURE)
    sm.create_endpoint(EndpointName="captured", EndpointConfigName="captured")
    assert sm.describe_endpoint_config(EndpointConfigName="captured")["DataCaptureConfig"] == CAPTURE
    assert sm.describe_endpoint(EndpointName="captured")["DataCaptureConfig"] == {
        "EnableCapture": True,
        "CaptureStatus": "Started",
        "CurrentSamplingPercentage": 20,
        "DestinationS3Uri": "s3://captured/echo",
        "KmsKeyId": "",
    }
