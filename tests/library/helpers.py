"""A SageMakerEndpoint in a bare Stack(), as a user of the library writes one."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from llm_inference_cdk import ContainerImage, ModelData, SageMakerEndpoint, SageMakerEndpointProps

IMAGE_URI = "111122223333.dkr.ecr.eu-west-1.amazonaws.com/my-model:1.0"
#: (method, namespace, metric, statistic) of each metric SageMaker publishes for a variant.
VARIANT_METRICS = [
    ("metric_invocations", "AWS/SageMaker", "Invocations", "Sum"),
    ("metric_invocations_per_instance", "AWS/SageMaker", "InvocationsPerInstance", "Sum"),
    ("metric_model_latency", "AWS/SageMaker", "ModelLatency", "Average"),
    ("metric_overhead_latency", "AWS/SageMaker", "OverheadLatency", "Average"),
    ("metric_invocation_4xx_errors", "AWS/SageMaker", "Invocation4XXErrors", "Sum"),
    ("metric_invocation_5xx_errors", "AWS/SageMaker", "Invocation5XXErrors", "Sum"),
    ("metric_invocation_model_errors", "AWS/SageMaker", "InvocationModelErrors", "Sum"),
    ("metric_model_setup_time", "AWS/SageMaker", "ModelSetupTime", "Average"),
    ("metric_cpu_utilization", "/aws/sagemaker/Endpoints", "CPUUtilization", "Average"),
    ("metric_memory_utilization", "/aws/sagemaker/Endpoints", "MemoryUtilization", "Average"),
    ("metric_gpu_utilization", "/aws/sagemaker/Endpoints", "GPUUtilization", "Average"),
    ("metric_gpu_memory_utilization", "/aws/sagemaker/Endpoints", "GPUMemoryUtilization", "Average"),
    ("metric_disk_utilization", "/aws/sagemaker/Endpoints", "DiskUtilization", "Average"),
]


def endpoint(
    stack: Stack,
    props_class: type[SageMakerEndpointProps] = SageMakerEndpointProps,
    *,
    image_uri: str = IMAGE_URI,
    model_data: str = "s3://my-models/gpt2/model.tar.gz",
    **props: Any,
) -> SageMakerEndpoint:
    """The endpoint of `props` (on ml.g5.xlarge unless they say otherwise), its image by URI and
    its model data in the caller's bucket."""
    bucket_name, key = model_data.removeprefix("s3://").split("/", 1)
    bucket = s3.Bucket.from_bucket_name(stack, "Models", bucket_name)
    return SageMakerEndpoint(
        stack,
        "Endpoint",
        image=ContainerImage.from_uri(image_uri),
        model_data=ModelData.from_bucket(bucket, key),
        props=props_class(**{"instance_type": "ml.g5.xlarge", **props}),
    )


def built(**props: Any) -> tuple[Stack, SageMakerEndpoint]:
    stack = Stack()
    return stack, endpoint(stack, **props)


def synthesized(**props: Any) -> tuple[Stack, SageMakerEndpoint, Template]:
    stack, made = built(**props)
    return stack, made, Template.from_stack(stack)
