"""GPT-2 query autocompletion on a SageMaker endpoint, served from our own container.

The container (serving/gpt2) runs nginx + gunicorn with a TensorRT engine (ONNX Runtime
where there is no GPU) built by ``python -m artifacts_builder gpt2``.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_ecr_assets as ecr_assets
from constructs import Construct

from artifacts_builder.manifest import read_manifest
from stacks.config import ConfigError, Gpt2Settings
from stacks.model_asset import ModelAsset
from stacks.model_image import ModelImage
from stacks.sagemaker_endpoint import SageMakerEndpoint


def _check_batch_size(settings: Gpt2Settings) -> None:
    """The ONNX graph and engine accept batches up to the size they were built for: a larger
    setting would only fail when the endpoint starts, minutes into the deploy."""
    built = read_manifest(settings.model_data.parent).get("generation", {}).get("max_batch_size")
    if built is not None and settings.max_batch_size > built:
        raise ConfigError(
            f"gpt2.max_batch_size={settings.max_batch_size} is invalid: {settings.model_data} was built for "
            f"batches of at most {built}; lower the setting or rebuild with "
            f"`python -m artifacts_builder gpt2 --max-batch-size {settings.max_batch_size}`"
        )


class Gpt2Stack(Stack):
    """:param settings: the ``gpt2`` section of cdk.json, parsed."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Gpt2Settings, **kwargs: Any) -> None:
        kwargs.setdefault("description", "GPT-2 autocompletion: TensorRT container on a SageMaker endpoint")
        super().__init__(scope, construct_id, **kwargs)

        model_data = ModelAsset(self, "ModelData", path=settings.model_data)
        _check_batch_size(settings)
        if settings.image_uri is not None:
            image = ModelImage.from_uri(self, "ImageRepository", settings.image_uri)
        else:
            image = ModelImage.from_asset(
                ecr_assets.DockerImageAsset(
                    self, "Image", directory=str(settings.container_dir), platform=ecr_assets.Platform.LINUX_AMD64
                )
            )

        self.endpoint = SageMakerEndpoint(
            self,
            "Endpoint",
            settings=settings.endpoint,
            image=image,
            model_data=model_data,
            environment=settings.container_environment(),
        )
        CfnOutput(self, "EndpointName", value=self.endpoint.endpoint_name)
        CfnOutput(self, "ModelDataUrl", value=model_data.s3_object_url)
