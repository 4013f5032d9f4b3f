"""The ``gptj`` section: GPT-J 6B on a SageMaker endpoint, the ``llm`` code path (project_config/llm.py)
with GPT-J's defaults, on one of two engines (``gptj.engine``): AWS's vLLM image for SageMaker
(``vllm``: continuous batching, the OpenAI completion and chat bodies on ``/invocations``) or the
Hugging Face inference image's toolkit (``hf-toolkit``: Multi Model Server and our
``code/inference.py``, the seed's recipe)."""

from __future__ import annotations

from pathlib import Path

from llm_contracts import instances
from project_config.llm import ENDPOINT_DEFAULTS, VLLM_AMI, LlmSettings, ModelProfile
from project_config.llm import read as read_llm
from project_config.reader import Section

#: GPU families with at least 16 GB per GPU: enough for GPT-J 6B in fp16 (12 GB).
GPTJ_FAMILIES = frozenset(name for name, gpu in instances.GPU_FAMILIES.items() if gpu.gpu_memory_gib >= 16)
#: The vllm engine's endpoint defaults where they differ. An A10G (24 GB): on a T4's 16 GB the
#: 11.3 GiB of fp16 weights and the engine's overhead leave about 1 GiB of KV cache, a single
#: sequence of 2048 tokens.
VLLM_ENDPOINT_DEFAULTS = {"instance_type": "ml.g5.xlarge", "inference_ami_version": VLLM_AMI}

GPTJ = ModelProfile(
    section="gptj",
    engines=("vllm", "hf-toolkit"),
    endpoint_defaults=ENDPOINT_DEFAULTS,
    engine_endpoint_defaults={"vllm": VLLM_ENDPOINT_DEFAULTS},
    # The payload is fp16 by design (artifacts_builder/gptj.py).
    engine_defaults={"vllm": {"dtype": "float16"}},
    families=GPTJ_FAMILIES,
    families_reason="GPUs with at least 16 GB for 12 GB of fp16 weights",
)

#: GPT-J's settings are a causal language model's.
GptjSettings = LlmSettings


def read(section: Section, artifacts: Path) -> LlmSettings:
    return read_llm(section, artifacts, GPTJ)
