"""GPT-J 6B fp16 behind a SageMaker endpoint, on the Hugging Face inference container's toolkit
or on AWS's vLLM container (``gptj.engine``).

The payload (weights, tokenizer, ``code/inference.py``, manifest) is built by
``python -m artifacts_builder gptj``. By default its folder is shipped uncompressed under an S3
prefix (no extraction before the container starts); ``gptj.model_data`` pointing at a
``model.tar.gz`` ships that instead. The image is the Hugging Face PyTorch inference DLC of
the configured versions (or, with ``gptj.engine=vllm``, AWS's vLLM image for SageMaker of
``gptj.vllm_version``), resolved for the stack's region.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from llm_contracts.manifest import ManifestError
from llm_inference_cdk import ContainerImage, ModelData, S3PrefixModelData, huggingface_inference, vllm_sagemaker
from project_config import GptjSettings
from project_config.gptj import check_vllm_payload
from stacks.endpoint import add_endpoint, check_volume, require_payload


class GptjStack(Stack):
    """:param settings: the ``gptj`` section of cdk.json, parsed."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: GptjSettings, **kwargs: Any) -> None:
        engine = "the vLLM" if settings.vllm is not None else "the Hugging Face inference"
        kwargs.setdefault("description", f"GPT-J 6B fp16 on {engine} container (SageMaker)")
        super().__init__(scope, construct_id, **kwargs)

        require_payload(settings.model_data, "gptj.model_data", "gptj")
        check_volume("gptj", settings.endpoint, settings.model_data)
        model_data: ModelData = (
            self._payload(settings.model_data)
            if settings.model_data.is_dir()
            else ModelData.from_asset(settings.model_data)
        )
        # After the payload's manifest is read: its error says how to rebuild the payload.
        check_vllm_payload(settings)
        if settings.image_uri is not None:
            image = ContainerImage.from_uri(settings.image_uri)
        elif settings.vllm is not None:
            image = ContainerImage.from_dlc(vllm_sagemaker(settings.vllm.vllm_version))
        else:
            hf = settings.hf_image
            assert hf is not None
            image = ContainerImage.from_dlc(
                huggingface_inference(
                    transformers_version=hf.transformers_version,
                    pytorch_version=hf.pytorch_version,
                    py_version=hf.py_version,
                )
            )
        self.endpoint = add_endpoint(self, settings, image, model_data)
        CfnOutput(self, "ImageUri", value=self.endpoint.image_uri)

    def _payload(self, folder: Path) -> S3PrefixModelData:
        try:
            return S3PrefixModelData(self, "ModelFiles", folder=folder)
        except ManifestError as exc:
            # The library's error says what any folder needs; this app's payload has a builder.
            raise ManifestError(
                f"{exc} (this app's payload: rebuild it with `python -m artifacts_builder gptj`, whose "
                "--shard-size-mb sets the weights' shard size)"
            ) from None
