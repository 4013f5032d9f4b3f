"""vLLM's model registry read from the installed source (``vllm/model_executor/models/registry.py``
of ``.venv-vllm``'s vLLM) without importing vLLM: the dictionaries' keys, by what vLLM does with
them, in the shape of llm_contracts/vllm_models.py (which must equal it)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from local_aws.sagemaker.containers import VLLM_VENV

#: The registry file in the CPU build of the image's vLLM.
REGISTRY = VLLM_VENV / "lib" / "python3.11" / "site-packages" / "vllm" / "model_executor" / "models" / "registry.py"
#: Categories of architectures vLLM serves that this project does not (the registry's dicts).
#: The first that lists an architecture says what it is (a multimodal model is also an embedding one).
OTHER_DICTS = {
    "_MULTIMODAL_MODELS": "multimodal",
    "_EMBEDDING_MODELS": "pooling",
    "_LATE_INTERACTION_MODELS": "pooling",
    "_REWARD_MODELS": "pooling",
    "_TOKEN_CLASSIFICATION_MODELS": "pooling",
    "_SEQUENCE_CLASSIFICATION_MODELS": "pooling",
    "_SPECULATIVE_DECODING_MODELS": "draft",
}
#: The Transformers backend's classes for text generation (its multimodal ones are not).
TEXT_BACKENDS = {"TransformersForCausalLM", "TransformersMoEForCausalLM"}


def _dicts(path: Path) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Dict):
            try:
                entries = {
                    ast.literal_eval(k): ast.literal_eval(v)
                    for k, v in zip(node.value.keys, node.value.values, strict=True)
                    if k is not None
                }
            except ValueError:
                continue
            found[node.targets[0].id] = entries
    return found


def registry(path: Path = REGISTRY) -> dict[str, Any]:
    """``text_generation`` (served and generating text), ``other`` (served otherwise: what for),
    ``previously_supported`` (the last version that served it) and ``out_of_tree`` (the plugin)."""
    dicts = _dicts(path)
    text = set(dicts["_TEXT_GENERATION_MODELS"]) | {
        name for name, (_, cls) in dicts["_TRANSFORMERS_SUPPORTED_MODELS"].items() if cls in TEXT_BACKENDS
    }
    other: dict[str, str] = {}
    for name, kind in OTHER_DICTS.items():
        for arch in dicts[name]:
            if arch not in text:
                other.setdefault(arch, kind)
    for arch, (_, cls) in dicts["_TRANSFORMERS_SUPPORTED_MODELS"].items():
        if cls not in TEXT_BACKENDS:
            other.setdefault(arch, "multimodal")
    return {
        "text_generation": sorted(text),
        "other": dict(sorted(other.items())),
        "previously_supported": dict(sorted(dicts["_PREVIOUSLY_SUPPORTED_MODELS"].items())),
        "out_of_tree": dict(sorted(dicts["_OOT_SUPPORTED_MODELS"].items())),
    }
