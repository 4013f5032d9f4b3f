"""GPT-J 6B fp16 behind a SageMaker endpoint (the ``gptj`` section): the seed's recipe, on the
code path of ``LlmStack`` (stacks/sagemaker_llm.py) with GPT-J's defaults, on AWS's vLLM container
or, with ``gptj.engine=hf-toolkit``, the Hugging Face inference container's toolkit. Its payload is
built by ``python -m artifacts_builder gptj``."""

from __future__ import annotations

from project_config import LlmSettings
from project_config.engines import VllmEngine
from stacks.sagemaker_llm import LlmStack


class GptjStack(LlmStack):
    """:param settings: the ``gptj`` section of cdk.json, parsed."""

    @staticmethod
    def describe(settings: LlmSettings) -> str:
        engine = "the vLLM" if isinstance(settings.engine, VllmEngine) else "the Hugging Face inference"
        return f"GPT-J 6B fp16 on {engine} container (SageMaker)"

    @staticmethod
    def builder(settings: LlmSettings) -> str:
        return "gptj"
