"""llm_contracts/vllm_models.py and the quantization table of llm_contracts/causal_lm.py are the
pinned vLLM's own (the CPU build of the same version in .venv-vllm)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from llm_contracts import vllm_models
from llm_contracts.causal_lm import QUANTIZATION_MIN_CAPABILITY
from local_aws.sagemaker.containers import VLLM_VENV
from tests.llm.registry_source import REGISTRY, registry


# Reads vLLM's own registry from .venv-vllm, which `make test` makes and `make test-fast` does not.
@pytest.mark.vllm
def test_the_architectures_are_the_installed_registrys() -> None:
    if not REGISTRY.is_file():
        pytest.fail(f"{REGISTRY} is missing: build the vLLM environment with `make .venv-vllm/.installed`")
    source = registry()
    assert sorted(vllm_models.TEXT_GENERATION) == source["text_generation"]
    ours = {arch: kind for kind, names in vllm_models.OTHER.items() for arch in names}
    assert dict(sorted(ours.items())) == source["other"]
    assert source["previously_supported"] == vllm_models.PREVIOUSLY_SUPPORTED
    assert source["out_of_tree"] == vllm_models.OUT_OF_TREE


def test_the_lists_are_the_engines_version() -> None:
    from project_config import VllmEngine

    assert VllmEngine().vllm_version == vllm_models.VLLM_VERSION
    assert "LlamaForCausalLM" in vllm_models.TEXT_GENERATION and "Qwen2ForCausalLM" in vllm_models.TEXT_GENERATION
    assert "GPTJForCausalLM" in vllm_models.TEXT_GENERATION


#: Each method's minimum compute capability, read from vLLM itself.
QUANTIZATION_PROBE = """
import json
from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS, get_quantization_config
found = {}
for method in QUANTIZATION_METHODS:
    try:
        found[method] = get_quantization_config(method).get_min_capability()
    except Exception:
        pass
print(json.dumps(found))
"""


@pytest.fixture(scope="session")
def vllm_quantization() -> dict[str, Any]:
    """vLLM's quantization methods and the compute capability each needs (imports vLLM: seconds)."""
    python = VLLM_VENV / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{python} is missing: build it with `make .venv-vllm/.installed`")
    done = subprocess.run([str(python), "-c", QUANTIZATION_PROBE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_the_quantizations_are_vllms(vllm_quantization: dict[str, Any]) -> None:
    """Every quantization a checkpoint's config names (not vLLM's online shorthands) with the
    capability vLLM's config class asks."""
    for method, capability in QUANTIZATION_MIN_CAPABILITY.items():
        assert vllm_quantization.get(method) == capability, method
    checkpoint_methods = {m for m, c in vllm_quantization.items() if m not in {"online", "deepseek_v4_fp8"}}
    online = {"fp8_per_tensor", "fp8_per_block", "fp8_per_channel", "int8_per_channel_weight_only", "nvfp4_per_token",
              "mxfp8", "auto_awq", "auto_gptq"}  # fmt: skip
    assert checkpoint_methods - online - set(QUANTIZATION_MIN_CAPABILITY) == set()
