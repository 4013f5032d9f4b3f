"""What the builders ask the Hugging Face hub, and which of a repository's files they take."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any, Protocol

_BIN_WEIGHTS = re.compile(r"^pytorch_model(-\d+-of-\d+)?\.bin$")


class HubApi(Protocol):
    """What the builders ask the Hugging Face hub (huggingface_hub's HfApi)."""

    def model_info(self, repo_id: str, *, revision: str | None = ..., files_metadata: bool = ...) -> Any: ...

    def hf_hub_download(self, repo_id: str, filename: str, *, revision: str | None = ...) -> str: ...


def hub_api() -> HubApi:
    from huggingface_hub import HfApi

    return HfApi()


def select_files(names: Collection[str], small_files: Collection[str]) -> list[str]:
    """The files of a hub repository a server needs: `small_files` (the config, the tokenizer's)
    and one format of weights (safetensors, else PyTorch's .bin), with its index; no TensorFlow,
    Flax or ONNX copies, no README. ValueError for a repository without config or weights."""
    top = {n for n in names if "/" not in n}
    weights = sorted(n for n in top if n.endswith(".safetensors"))
    index = "model.safetensors.index.json"
    if not weights:
        weights, index = sorted(n for n in top if _BIN_WEIGHTS.match(n)), "pytorch_model.bin.index.json"
    if "config.json" not in top or not weights:
        raise ValueError(
            f"the hub repository has {'no weights' if 'config.json' in top else 'no config.json'}: "
            "a Hugging Face transformers model is needed"
        )
    return sorted({*(n for n in small_files if n in top), *weights, *([index] if index in top else [])})


def lfs_entry(sibling: Any) -> dict[str, Any] | None:
    """The sha256 and size the hub gives for a file stored in Git LFS (None: a plain Git blob)."""
    lfs = sibling.lfs
    if lfs is None:
        return None
    sha256, size = (lfs["sha256"], lfs["size"]) if isinstance(lfs, dict) else (lfs.sha256, lfs.size)
    return {"sha256": sha256, "size": size}
