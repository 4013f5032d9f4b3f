"""GPT-2 query autocompletion on a SageMaker endpoint, served from our own container.

The container (serving/gpt2) runs nginx + gunicorn with a TensorRT engine (ONNX Runtime
where there is no GPU) built by ``python -m artifacts_builder gpt2``.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack
from constructs import Construct

from llm_contracts.manifest import read_manifest
from llm_inference_cdk import ContainerImage, ModelData
from project_config import ConfigError, Gpt2Settings
from stacks.endpoint import add_endpoint, check_volume, require_payload


def _check_batch_size(settings: Gpt2Settings) -> None:
    """The ONNX graph and engine accept batches up to the size they were built for: a larger
    setting would only fail when the endpoint starts, minutes into the deploy."""
    built = read_manifest(settings.model_data.parent).get("generation", {}).get("max_batch_size")
    wanted = settings.server.max_batch_size
    if built is not None and wanted > built:
        raise ConfigError(
            f"gpt2.max_batch_size={wanted} is invalid: {settings.model_data} was built for batches of at most "
            f"{built}; lower the setting or rebuild with `python -m artifacts_builder gpt2 --max-batch-size {wanted}`"
        )


class Gpt2Stack(Stack):
    """:param settings: the ``gpt2`` section of cdk.json, parsed."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Gpt2Settings, **kwargs: Any) -> None:
        kwargs.setdefault("description", "GPT-2 autocompletion: TensorRT container on a SageMaker endpoint")
        super().__init__(scope, construct_id, **kwargs)

        require_payload(settings.model_data, "gpt2.model_data", "gpt2")
        check_volume("gpt2", settings.endpoint, settings.model_data)
        _check_batch_size(settings)
        model_data = ModelData.from_asset(settings.model_data)
        image = (
            ContainerImage.from_uri(settings.image_uri)
            if settings.image_uri is not None
            else ContainerImage.from_asset(settings.container_dir)
        )
        self.endpoint = add_endpoint(self, settings, image, model_data)
