"""GPT-J 6B fp16 on the Hugging Face inference container behind a SageMaker endpoint.

The payload (weights, tokenizer, ``code/inference.py``, manifest) is built by
``python -m artifacts_builder gptj``. By default its folder is shipped uncompressed under an S3
prefix (no extraction before the container starts); ``gptj.model_data`` pointing at a
``model.tar.gz`` ships that instead. The image is the Hugging Face PyTorch inference DLC of
the configured versions, resolved for the stack's region.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from stacks.config import ConfigError, GptjSettings
from stacks.images import huggingface_inference
from stacks.model_asset import ModelAsset
from stacks.model_image import ModelImage
from stacks.model_prefix import ModelPrefix
from stacks.sagemaker_endpoint import SageMakerEndpoint


class GptjStack(Stack):
    """:param settings: the ``gptj`` section of cdk.json, parsed."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: GptjSettings, **kwargs: Any) -> None:
        kwargs.setdefault("description", "GPT-J 6B fp16 on the Hugging Face inference container (SageMaker)")
        super().__init__(scope, construct_id, **kwargs)

        model_data: ModelAsset | ModelPrefix
        if not settings.model_data.exists():
            raise ConfigError(
                f"gptj.model_data={str(settings.model_data)!r} does not exist: build the payload folder with "
                "`python -m artifacts_builder gptj` (or --tiny), or point gptj.model_data at a payload folder "
                "or a model.tar.gz"
            )
        if settings.model_data.is_dir():
            model_data = ModelPrefix(self, "ModelFiles", folder=settings.model_data)
            model_data_url = model_data.s3_uri
        else:
            model_data = ModelAsset(self, "ModelData", path=settings.model_data)
            model_data_url = model_data.s3_object_url
        if settings.image_uri is not None:
            image = ModelImage.from_uri(self, "ImageRepository", settings.image_uri)
        else:
            hf = settings.hf_image
            dlc = huggingface_inference(
                transformers_version=hf.transformers_version,
                pytorch_version=hf.pytorch_version,
                py_version=hf.py_version,
            )
            image = ModelImage.from_dlc(self, "ImageRepository", dlc)

        self.endpoint = SageMakerEndpoint(
            self,
            "Endpoint",
            settings=settings.endpoint,
            image=image,
            model_data=model_data,
            environment=settings.container_environment(),
        )
        CfnOutput(self, "EndpointName", value=self.endpoint.endpoint_name)
        CfnOutput(self, "ModelDataUrl", value=model_data_url)
        CfnOutput(self, "ImageUri", value=image.uri)
