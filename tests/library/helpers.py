"""A SageMakerEndpoint in a bare Stack(), as a user of the library writes one."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Template

from llm_inference_cdk import ContainerImage, EndpointProps, ModelData, SageMakerEndpoint

IMAGE_URI = "111122223333.dkr.ecr.eu-west-1.amazonaws.com/my-model:1.0"


def endpoint(
    stack: Stack, *, image_uri: str = IMAGE_URI, model_data: str = "s3://my-models/gpt2/model.tar.gz", **props: Any
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
        props=EndpointProps(**{"instance_type": "ml.g5.xlarge", **props}),
    )


def built(**props: Any) -> tuple[Stack, SageMakerEndpoint]:
    stack = Stack()
    return stack, endpoint(stack, **props)


def synthesized(**props: Any) -> tuple[Stack, SageMakerEndpoint, Template]:
    stack, made = built(**props)
    return stack, made, Template.from_stack(stack)
