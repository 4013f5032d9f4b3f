"""A causal language model behind a SageMaker endpoint: ``LlmStack`` (the ``llm`` section: any
model the vLLM engine serves); ``GptjStack`` (stacks/sagemaker_gptj.py) is the same code path with
GPT-J's defaults.

The payload (safetensors shards, tokenizer, config, manifest; GPT-J's also ``code/inference.py``)
is built by ``python -m artifacts_builder llm`` (``gptj``). Its folder is shipped uncompressed
under an S3 prefix (no extraction before the container starts); ``gptj.model_data`` pointing at a
``model.tar.gz`` ships that instead. Synthesis reads the payload (its config.json and safetensors
headers) and refuses, in one line, a model the engine cannot serve on the instance type
(project_config/llm.py's ``check_payload``). The image is AWS's vLLM image for SageMaker of the
engine's ``vllm_version`` (or the Hugging Face PyTorch inference DLC of the toolkit's versions),
resolved for the stack's region.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import Annotations, CfnOutput, Stack
from constructs import Construct

from llm_contracts.manifest import ManifestError
from llm_inference_cdk import AdapterComponent, AdapterComponentProps, ContainerImage, ModelData, S3PrefixModelData
from project_config import LlmSettings
from project_config.engines import VllmEngine
from project_config.llm import check_adapters, check_built, check_payload, payload_facts
from stacks.endpoint import add_endpoint


class LlmStack(Stack):
    """:param settings: the ``llm`` (or ``gptj``) section of cdk.json, parsed."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: LlmSettings, **kwargs: Any) -> None:
        kwargs.setdefault("description", self.describe(settings))
        super().__init__(scope, construct_id, **kwargs)
        check_built(settings, self.builder(settings))
        check_adapters(settings)
        model_data: ModelData = (
            self._payload(settings.model_data, self.builder(settings))
            if settings.model_data.is_dir()
            else ModelData.from_asset(settings.model_data)
        )
        # After the payload's manifest is read: its error says how to rebuild the payload.
        check_payload(settings)
        if isinstance(settings.engine, VllmEngine) and settings.engine.chat_template is None:
            self._warn_without_chat_template(settings)
        image = (
            ContainerImage.from_uri(settings.image_uri)
            if settings.image_uri is not None
            else ContainerImage.from_dlc(settings.engine.image())
        )
        self.endpoint = add_endpoint(self, settings, image, model_data)
        CfnOutput(self, "ImageUri", value=self.endpoint.image_uri)
        #: The LoRA adapters served on the model's component (llm.adapters), by name.
        self.adapters: dict[str, AdapterComponent] = {}
        for name in settings.adapters:
            adapter = AdapterComponent(self, f"Adapter-{name}", endpoint=self.endpoint,
                                       props=AdapterComponentProps(archive=settings.adapter_archive(name)))  # fmt: skip
            self.adapters[name] = adapter
            CfnOutput(self, f"AdapterComponentName-{name}", value=adapter.component_name,
                      description=f"The inference component that serves adapter {name}: InvokeEndpoint's "
                      "InferenceComponentName")  # fmt: skip

    @staticmethod
    def describe(settings: LlmSettings) -> str:
        model = Path(settings.model).name if settings.model is not None else "a causal language model"
        return f"{model} on AWS's vLLM container (SageMaker)"

    @staticmethod
    def builder(settings: LlmSettings) -> str:
        """The artifacts builder's command line for this payload (after ``python -m artifacts_builder``)."""
        if settings.model is None:
            return f"{settings.section_name} --model <hub id or folder>"
        revision = f" --revision {settings.revision}" if settings.revision is not None else ""
        return f"{settings.section_name} --model {settings.model}{revision}"

    def _payload(self, folder: Path, builder: str) -> S3PrefixModelData:
        try:
            return S3PrefixModelData(self, "ModelFiles", folder=folder)
        except ManifestError as exc:
            # The library's error says what any folder needs; this app's payload has a builder.
            raise ManifestError(
                f"{exc} (this app's payload: rebuild it with `python -m artifacts_builder {builder}`, whose "
                "--shard-size-mb sets the weights' shard size)"
            ) from None

    def _warn_without_chat_template(self, settings: LlmSettings) -> None:
        """A model without a chat template answers OpenAI's messages body with vLLM's 400."""
        names = {"chat_template.jinja", "chat_template.json"}
        if any((settings.model_data / name).is_file() for name in names):
            return
        tokenizer = settings.model_data / "tokenizer_config.json"
        if tokenizer.is_file() and '"chat_template"' in tokenizer.read_text():
            return
        Annotations.of(self).add_warning_v2(
            "llm:NoChatTemplate",
            f"the model ({payload_facts(settings).architecture}) has no chat template: the endpoint answers the "
            f"chat body (messages) with vLLM's 400; set {settings.key('chat_template')} to give it one",
        )
