"""GPT-2 query autocompletion on a SageMaker endpoint, served from our own container.

The container (serving/gpt2) runs nginx + gunicorn with a TensorRT engine (ONNX Runtime
where there is no GPU) built by ``python -m artifacts_builder gpt2``.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack
from constructs import Construct

from llm_inference_cdk import ContainerImage, ModelData
from project_config import Gpt2Settings
from project_config.gpt2 import check_payload
from stacks.endpoint import add_endpoint


class Gpt2Stack(Stack):
    """:param settings: the ``gpt2`` section of cdk.json, parsed."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Gpt2Settings, **kwargs: Any) -> None:
        kwargs.setdefault("description", "GPT-2 autocompletion: TensorRT container on a SageMaker endpoint")
        super().__init__(scope, construct_id, **kwargs)

        check_payload(settings)
        model_data = ModelData.from_asset(settings.model_data)
        image = (
            ContainerImage.from_uri(settings.image_uri)
            if settings.image_uri is not None
            else ContainerImage.from_asset(settings.container_dir)
        )
        self.endpoint = add_endpoint(self, settings, image, model_data)
