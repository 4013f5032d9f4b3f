"""LoRA adapters as the builder, the stacks and the serving engine share them: the files of a
PEFT adapter, the ranks and modules vLLM applies, and the environment that turns LoRA on in AWS's
vLLM image. A leaf: it imports nothing of the project.

Sources: vLLM 0.30.0 (the image's and ``.venv-vllm``'s): ``vllm/config/lora.py`` (``max_lora_rank``
is one of :data:`ALLOWED_RANKS`, default 16; ``max_cpu_loras`` at least ``max_loras``),
``vllm/lora/utils.py`` (a tensor's module is read from its name), each model's
``packed_modules_mapping`` (``vllm/model_executor/models/llama.py``: q/k/v_proj packed as
qkv_proj, gate/up_proj as gate_up_proj); AWS's vLLM image turns ``SM_VLLM_<FLAG>`` into
``--<flag>`` (deep-learning-containers' ``sagemaker_args.py``), and its runtime adapter routes
need ``VLLM_ALLOW_RUNTIME_LORA_UPDATING`` (aws/model-hosting-container-standards,
the LoRA adapter management page of its docs).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
#: The ranks vLLM's --max-lora-rank takes.
ALLOWED_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
DEFAULT_MAX_RANK = 16
#: The modules vLLM applies LoRA to, per architecture (config.json's model_type), packed modules
#: expanded. Embeddings and lm_head are left out here: they change the vocabulary's handling.
LORA_MODULES: dict[str, tuple[str, ...]] = {
    kind: ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    for kind in ("llama", "mistral", "qwen2", "qwen3")
}
#: A PEFT tensor name: base_model.model.model.layers.<i>.<block>.<module>.lora_<A|B>.weight.
TENSOR_NAME = re.compile(
    r"^base_model\.model\.model\.layers\.(?P<layer>\d+)\.(?:self_attn|mlp)\.(?P<module>\w+)\.lora_(?P<part>[AB])\.weight$"
)


def environment(*, max_loras: int, max_rank: int, max_cpu_loras: int) -> dict[str, str]:
    """What the base model's container gets to serve adapters: LoRA on, the most adapters in one
    batch, the largest rank, the adapters kept in CPU memory, and the runtime adapter routes."""
    return {
        "SM_VLLM_ENABLE_LORA": "true",
        "SM_VLLM_MAX_LORAS": str(max_loras),
        "SM_VLLM_MAX_LORA_RANK": str(max_rank),
        "SM_VLLM_MAX_CPU_LORAS": str(max_cpu_loras),
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "true",
    }


def smallest_allowed_rank(rank: int) -> int | None:
    """The smallest --max-lora-rank that takes an adapter of `rank` (None: none does)."""
    return next((r for r in ALLOWED_RANKS if r >= rank), None)


def module_shape(config: Mapping[str, Any], module: str) -> tuple[int, int]:
    """(in features, out features) of `module` in a base model of `config` (config.json)."""
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    head_dim = int(config.get("head_dim") or hidden // heads)
    kv = int(config.get("num_key_value_heads") or heads) * head_dim
    inter = int(config["intermediate_size"])
    shapes = {
        "q_proj": (hidden, heads * head_dim),
        "k_proj": (hidden, kv),
        "v_proj": (hidden, kv),
        "o_proj": (heads * head_dim, hidden),
        "gate_proj": (hidden, inter),
        "up_proj": (hidden, inter),
        "down_proj": (inter, hidden),
    }
    return shapes[module]


def lora_bytes(config: Mapping[str, Any], rank: int, bytes_per_value: int = 2) -> int:
    """What one adapter of `rank` over every LoRA module of every layer holds (A and B)."""
    layers = int(config["num_hidden_layers"])
    modules = LORA_MODULES.get(str(config.get("model_type")), ())
    per_layer = sum(rank * sum(module_shape(config, m)) for m in modules)
    return layers * per_layer * bytes_per_value
