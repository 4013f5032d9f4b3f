"""A causal language model's payload as the vLLM engine will load it, read from the payload itself:
its architecture and attention from ``config.json``, its weights from the safetensors headers
(each tensor's dtype and shape, not a formula per architecture), and what that takes of a GPU.

Shared by the artifacts builder (which refuses what the pinned vLLM cannot serve before it
downloads the weights) and synthesis (which refuses what the instance type cannot hold). Standard
library only; nothing here reads more than a file's header.

**The KV cache** of one token: 2 (a key and a value) x attention layers x key-value heads x head
size x the cache's bytes per element, as vLLM sizes it (``vllm/config/model.py`` and
``transformers_utils/model_arch_config_convertor.py``: the head size is ``head_dim`` where the
config has one, else hidden size / attention heads; the key-value heads ``num_key_value_heads`` or
its older names, else the attention heads). Split over tensor parallelism, each GPU holds
KV heads / degree of them, and at least one (vLLM copies a KV head onto several GPUs when the
degree exceeds the KV heads). Multi-head latent attention (DeepSeek V2/V3, Kimi K2, GLM-4.5 Air's
kind: ``kv_lora_rank`` in the config) caches one latent vector a token a layer,
``kv_lora_rank + qk_rope_head_dim`` elements, on every GPU. **Upper bounds**: a sliding-window
layer (Mistral v0.1, Gemma 2 and 3, GPT-OSS) is counted as if it kept every token, though vLLM
keeps only the window of it; where the config lists ``layer_types``, layers without attention
(linear attention, Mamba, convolutions) are left out, and their per-sequence state, which vLLM
also reserves, is not counted.

**The weights** are the bytes of every tensor in the payload's safetensors files, a floating-point
tensor at the bytes of the dtype vLLM loads it as (``--dtype``), any other (quantized weights
packed into integers, fp8) at its own; with tensor parallelism each GPU holds an equal share (the
norms vLLM copies onto each are a rounding error).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_contracts import instances, vllm_models

#: Bits of one element of each safetensors dtype (the format's codes).
SAFETENSORS_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64, "F64": 64,
    "C64": 64,
}  # fmt: skip
#: The floating-point dtypes vLLM casts to its ``--dtype`` as it loads them.
CAST_DTYPES = frozenset({"F16", "BF16", "F32", "F64"})
#: config.json's dtype names and their bytes per element.
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}
#: GiB of GPU memory vLLM takes beside the weights and the KV cache, per GPU: the CUDA context and
#: the libraries' workspaces (about 0.5 GiB), the activation peak of the forward pass vLLM profiles
#: at start over its largest batch of tokens (a few hundred MiB for a 7B model), and the CUDA graphs
#: it captures by default (up to about 1 GiB); rounded up.
ENGINE_OVERHEAD_GIB = 2.0
#: Layer types that keep a KV cache a token (config.json's ``layer_types``).
ATTENTION_LAYER_TYPES = frozenset({"full_attention", "sliding_attention", "attention", "chunked_attention"})
#: The minimum compute capability of each quantization vLLM 0.30.0 loads (each method's config
#: class's ``get_min_capability``, vllm/model_executor/layers/quantization/), by config.json's
#: ``quantization_config.quant_method``. tests/llm/test_vllm_models.py reads them from vLLM.
QUANTIZATION_MIN_CAPABILITY = {
    "awq": 75, "awq_marlin": 75, "gptq": 60, "gptq_marlin": 60, "fp8": 75, "fbgemm_fp8": 80, "fp_quant": 100,
    "modelopt": 80, "modelopt_fp4": 75, "modelopt_mxfp8": 80, "modelopt_mixed": 75, "humming": 75,
    "compressed-tensors": 70, "experts_int8": 80, "quark": 70, "moe_wna16": 70, "torchao": 75, "inc": 60,
    "mxfp4": 80, "gpt_oss_mxfp4": 80,
}  # fmt: skip
# Older names of the config keys, as transformers' attribute maps give them.
_LAYERS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers")
_HEADS = ("num_attention_heads", "n_head", "n_heads", "num_heads")
_HIDDEN = ("hidden_size", "n_embd", "d_model")
_KV_HEADS = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num", "num_attention_groups")
# vLLM's keys for the longest sequence, the smallest of those set counts (model_arch_config_convertor.py).
_MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                 "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")  # fmt: skip
# RoPE scalings whose max_position_embeddings is already scaled (vLLM does not apply their factor).
_PRESCALED_ROPE = frozenset({"su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling"})


class PayloadError(ValueError):
    """A payload that cannot be read as a causal language model; the message says why."""


def read_safetensors_header(path: Path) -> dict[str, Any]:
    """The tensors of a safetensors file: {name: {"dtype", "shape", "data_offsets"}}, from its
    header alone (8 bytes of length, then JSON)."""
    return safetensors_header(path)[1]


def safetensors_header(path: Path) -> tuple[int, dict[str, Any]]:
    """Where a safetensors file's data starts, and its tensors (:func:`read_safetensors_header`)."""
    try:
        with open(path, "rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            if length > 100_000_000:
                raise PayloadError(f"{path} is not a safetensors file (a header of {length} bytes)")
            header = json.loads(f.read(length))
    except (OSError, struct.error, ValueError) as exc:
        raise PayloadError(f"{path} is not a readable safetensors file ({exc})") from None
    if not isinstance(header, dict):
        raise PayloadError(f"{path} is not a safetensors file (its header is no JSON object)")
    header.pop("__metadata__", None)
    return 8 + length, header


def weight_elements(paths: Iterable[Path]) -> dict[str, int]:
    """Elements per safetensors dtype over every tensor of `paths`."""
    counts: dict[str, int] = {}
    for path in paths:
        for name, info in read_safetensors_header(path).items():
            dtype, shape = info.get("dtype"), info.get("shape")
            if dtype not in SAFETENSORS_BITS or not isinstance(shape, list):
                raise PayloadError(f"{path}: tensor {name} has dtype {dtype!r}, which this project cannot size")
            counts[dtype] = counts.get(dtype, 0) + math.prod(shape)
    return counts


def _first(config: Mapping[str, Any], keys: Iterable[str]) -> Any:
    return next((config[k] for k in keys if config.get(k) is not None), None)


@dataclass(frozen=True)
class ModelFacts:
    """What the checks need of one causal language model (see the module's docstring)."""

    architecture: str
    model_type: str
    layers: int
    attention_layers: int
    attention_heads: int
    kv_heads: int
    head_size: int
    #: Elements of the one latent a token a layer of multi-head latent attention (None: none).
    latent_size: int | None
    #: The longest sequence as vLLM derives it when --max-model-len is unset, and from which key.
    max_model_len: int
    max_len_key: str
    #: The checkpoint's dtype (config.json's ``dtype`` or ``torch_dtype``), None where it names none.
    config_dtype: str | None
    #: config.json's ``quantization_config.quant_method`` (None: not pre-quantized).
    quantization: str | None
    sliding_window: int | None
    #: Elements per safetensors dtype over the payload's weights.
    weights: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: Mapping[str, Any], *, weights: Mapping[str, int] | None = None,
                    tokenizer_config: Mapping[str, Any] | None = None) -> ModelFacts:  # fmt: skip
        """The facts of `config` (a config.json); PayloadError naming what is missing."""
        architectures = config.get("architectures") or []
        if not isinstance(architectures, list) or not architectures or not isinstance(architectures[0], str):
            raise PayloadError('config.json names no architecture (its "architectures" list)')
        nested = config.get("text_config")
        text: Mapping[str, Any] = nested if isinstance(nested, Mapping) else config
        layers, heads = _first(text, _LAYERS), _first(text, _HEADS)
        if not isinstance(layers, int) or not isinstance(heads, int) or layers < 1 or heads < 1:
            raise PayloadError(
                f"config.json gives no layer or attention-head count ({'/'.join(_LAYERS)}, {'/'.join(_HEADS)})"
            )
        head_size = text.get("head_dim") or text.get("hidden_size_per_head")
        if not isinstance(head_size, int) or head_size <= 0:
            hidden = _first(text, _HIDDEN)
            if not isinstance(hidden, int):
                raise PayloadError(f"config.json gives no head size (head_dim) or hidden size ({'/'.join(_HIDDEN)})")
            head_size = hidden // heads
        kv_heads = _first(text, _KV_HEADS)
        if text.get("multi_query") and not text.get("new_decoder_architecture"):
            kv_heads = 1  # Falcon's and GPTBigCode's multi-query attention
        layer_types = text.get("layer_types")
        attention_layers = (
            sum(1 for t in layer_types if t in ATTENTION_LAYER_TYPES) if isinstance(layer_types, list) else layers
        )
        latent = None
        if isinstance(text.get("kv_lora_rank"), int):
            latent = text["kv_lora_rank"] + int(text.get("qk_rope_head_dim") or 0)
        quantization = config.get("quantization_config")
        dtype = config.get("dtype") or config.get("torch_dtype") or text.get("dtype") or text.get("torch_dtype")
        max_len, key = derived_max_model_len(text, tokenizer_config)
        window = text.get("sliding_window")
        return cls(
            architecture=architectures[0],
            model_type=str(config.get("model_type", "")),
            layers=layers,
            attention_layers=attention_layers,
            attention_heads=heads,
            kv_heads=kv_heads if isinstance(kv_heads, int) and kv_heads > 0 else heads,
            head_size=head_size,
            latent_size=latent,
            max_model_len=max_len,
            max_len_key=key,
            config_dtype=dtype if dtype in DTYPE_BYTES else None,
            quantization=str(quantization.get("quant_method")) if isinstance(quantization, Mapping) else None,
            sliding_window=window if isinstance(window, int) else None,
            weights=dict(weights or {}),
        )

    @classmethod
    def from_payload(cls, folder: Path, files: Iterable[str]) -> ModelFacts:
        """The facts of the payload in `folder` whose files are `files` (its manifest's list)."""
        config = _json(folder / "config.json")
        tokenizer = folder / "tokenizer_config.json"
        shards = [folder / name for name in sorted(files) if name.endswith(".safetensors")]
        if not shards:
            raise PayloadError(f"{folder} has no safetensors weights")
        return cls.from_config(
            config, weights=weight_elements(shards), tokenizer_config=_json(tokenizer) if tokenizer.is_file() else None
        )

    def weight_bytes(self, dtype_bytes: int) -> int:
        """The weights' bytes once loaded as `dtype_bytes` floats (see the module's docstring)."""
        total = 0
        for dtype, count in self.weights.items():
            bits = dtype_bytes * 8 if dtype in CAST_DTYPES else SAFETENSORS_BITS[dtype]
            total += math.ceil(count * bits / 8)
        return total

    def parameters(self) -> int:
        return sum(self.weights.values())

    def kv_heads_per_gpu(self, degree: int) -> int:
        return max(1, self.kv_heads // degree)

    def kv_bytes_per_token(self, dtype_bytes: int, degree: int = 1) -> int:
        """One token's KV cache on each of `degree` GPUs (see the module's docstring)."""
        if self.latent_size is not None:
            return self.attention_layers * self.latent_size * dtype_bytes
        return 2 * self.attention_layers * self.kv_heads_per_gpu(degree) * self.head_size * dtype_bytes

    def kv_formula(self, dtype_bytes: int, degree: int = 1) -> str:
        """How :meth:`kv_bytes_per_token` counts, in words."""
        if self.latent_size is not None:
            return f"{self.attention_layers} layers x a latent of {self.latent_size} x {dtype_bytes} bytes"
        heads = self.kv_heads_per_gpu(degree)
        per_gpu = f" ({self.kv_heads} over {degree} GPUs)" if degree > 1 else ""
        return (
            f"2 x {self.attention_layers} layers x {heads} KV heads{per_gpu} x {self.head_size} x {dtype_bytes} bytes"
        )

    def parallel_problem(self, degree: int) -> str | None:
        """Why vLLM cannot split the model over `degree` GPUs (None: it can): the attention heads
        must divide evenly, and the KV heads too, unless the degree is a multiple of them (vLLM then
        copies each KV head; vllm/model_executor/layers/linear.py's QKVParallelLinear)."""
        if self.attention_heads % degree:
            return f"its {self.attention_heads} attention heads do not divide over {degree} GPUs"
        if self.latent_size is None and self.kv_heads % degree and degree % self.kv_heads:
            return (
                f"its {self.kv_heads} key-value heads neither divide over {degree} GPUs nor does {degree} divide "
                "into them"
            )
        return None

    def parallel_degrees(self, gpus: int) -> list[int]:
        """The degrees up to `gpus` that :meth:`parallel_problem` allows, largest first."""
        return [d for d in range(gpus, 0, -1) if self.parallel_problem(d) is None]


def _json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PayloadError(f"{path} is not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise PayloadError(f"{path} is not a JSON object")
    return data


def derived_max_model_len(config: Mapping[str, Any], tokenizer_config: Mapping[str, Any] | None) -> tuple[int, str]:
    """The longest sequence vLLM serves with --max-model-len unset, and the key it comes from, as
    vLLM 0.30.0 derives it (vllm/config/model.py ``_get_and_verify_max_len``): the smallest of the
    length keys set, the tokenizer's ``model_max_length`` if smaller, times the RoPE scaling factor
    of a scaling that has not scaled the config already; 2048 where no key is set."""
    found = [(config[k], k) for k in _MAX_LEN_KEYS if isinstance(config.get(k), int | float)]
    length, key = min(found) if found else (math.inf, "")
    tokenizer_max = (tokenizer_config or {}).get("model_max_length")
    if isinstance(tokenizer_max, int | float) and tokenizer_max < length:
        length, key = tokenizer_max, "model_max_length in tokenizer_config.json"
    if length == math.inf:
        return 2048, "vLLM's default (config.json sets no length)"
    rope = config.get("rope_parameters") or config.get("rope_scaling")
    if isinstance(rope, Mapping) and "gemma3" not in str(config.get("model_type", "")):
        kinds = rope.values() if all(isinstance(v, Mapping) for v in rope.values()) and rope else [rope]
        for params in kinds:
            kind = params.get("rope_type") or params.get("type")
            factor = params.get("factor")
            if kind not in _PRESCALED_ROPE and isinstance(factor, int | float) and kind not in (None, "default"):
                length, key = length * factor, f"{key} x RoPE factor {factor:g}"
    return int(length), key


def architecture_problem(architecture: str) -> str | None:
    """Why the pinned vLLM cannot serve `architecture` as a text generator (None: it can)."""
    version = vllm_models.VLLM_VERSION
    if architecture in vllm_models.TEXT_GENERATION:
        return None
    if architecture in vllm_models.PREVIOUSLY_SUPPORTED:
        return (
            f"vLLM served {architecture} until {vllm_models.PREVIOUSLY_SUPPORTED[architecture]} and {version} no "
            "longer does"
        )
    if architecture in vllm_models.OUT_OF_TREE:
        return f"vLLM {version} serves {architecture} only through a plugin ({vllm_models.OUT_OF_TREE[architecture]})"
    what = {
        "pooling": "an embedding, classification or reward model, not a text generator",
        "multimodal": "a multimodal model; this project builds and checks text-only causal language models",
        "draft": "a speculative-decoding draft head, not a model of its own",
    }
    for kind, names in vllm_models.OTHER.items():
        if architecture in names:
            return f"{architecture} is {what[kind]}"
    return f"{architecture} is not among vLLM {version}'s text-generation architectures ({vllm_models.SOURCE})"


def quantization_problem(method: str, capability: tuple[int, int], where: str) -> str | None:
    """Why a checkpoint pre-quantized with `method` cannot run on a GPU of `capability` (None: it can)."""
    needed = QUANTIZATION_MIN_CAPABILITY.get(method)
    if needed is None:
        return (
            f"its quantization {method!r} is not one vLLM {vllm_models.VLLM_VERSION} loads ("
            + ", ".join(sorted(QUANTIZATION_MIN_CAPABILITY))
            + ")"
        )
    have = capability[0] * 10 + capability[1]
    if have < needed:
        return (
            f"its {method} quantization needs a GPU of compute capability {needed // 10}.{needed % 10} or later, "
            f"and {where} has {capability[0]}.{capability[1]}"
        )
    return None


def resolved_dtype(setting: str, config_dtype: str | None, capability: tuple[int, int]) -> str:
    """The dtype vLLM runs for `setting` (``auto``: the checkpoint's; float32, or bfloat16 on a GPU
    without it, becomes bfloat16 where the GPU has it, else float16; vllm/config/model.py
    ``_resolve_auto_dtype``)."""
    if setting != "auto":
        return setting
    bf16 = capability >= (8, 0)
    preferred = "bfloat16" if bf16 else "float16"
    dtype = config_dtype or "float32"
    if dtype == "float32" or (dtype == "bfloat16" and not bf16):
        return preferred
    return dtype


@dataclass(frozen=True)
class MemoryPlan:
    """One GPU of an instance type holding its share of a model (see :func:`plan`)."""

    instance_type: str
    degree: int
    dtype: str
    budget: float
    weights: float
    overhead: float
    kv_per_token: int
    #: LoRA adapters on the GPU at once (vLLM's max_loras, each at max_lora_rank: it reserves them).
    lora: float = 0.0

    @property
    def tokens(self) -> int:
        """Tokens of KV cache that fit beside the weights, the overhead and the adapters."""
        return max(0, math.floor((self.budget - self.weights - self.overhead - self.lora) / self.kv_per_token))


def plan(
    facts: ModelFacts, instance_type: str, *, degree: int, dtype: str, utilization: float, lora_bytes: float = 0.0
) -> MemoryPlan:
    """What one GPU of `instance_type` holds: `utilization` of its memory for 1/`degree` of the
    weights (as `dtype`), the engine's overhead, 1/`degree` of the adapters' `lora_bytes` and the
    KV cache."""
    gpu = instances.InstanceType(instance_type).gpu
    assert gpu is not None, instance_type
    dtype_bytes = DTYPE_BYTES[dtype]
    gib = 2**30
    return MemoryPlan(
        instance_type=instance_type,
        degree=degree,
        dtype=dtype,
        budget=utilization * gpu.gpu_memory_gib * gib,
        weights=facts.weight_bytes(dtype_bytes) / degree,
        overhead=ENGINE_OVERHEAD_GIB * gib,
        kv_per_token=max(1, facts.kv_bytes_per_token(dtype_bytes, degree)),
        lora=lora_bytes / degree,
    )


def engine_problem(facts: ModelFacts, gpu: instances.GpuFamily, where: str) -> str | None:
    """Why the vllm image cannot serve the model on `gpu` at all: a GPU older than Turing (the
    image's CUDA 13 dropped them), or a quantization the GPU lacks."""
    if gpu.compute_capability < (7, 5):
        return f"{where}'s {gpu.gpu} is older than Turing, which the vllm image's CUDA 13 no longer runs"
    if facts.quantization is not None:
        return quantization_problem(facts.quantization, gpu.compute_capability, where)
    return None


def smallest_fit(
    facts: ModelFacts, *, dtype_setting: str, utilization: float, tokens: int
) -> tuple[str, MemoryPlan] | None:
    """The cheapest GPU instance type (by :data:`instances.PRICE_SOURCE`; types without a price
    after, by total GPU memory) whose GPUs hold the model and `tokens` tokens of KV cache at the
    largest tensor-parallel degree it allows, with the plan; None if none does."""
    fits: list[tuple[float, int, str, MemoryPlan]] = []
    for instance_type in instances.gpu_instance_types():
        instance = instances.InstanceType(instance_type)
        gpu = instance.gpu
        assert gpu is not None
        if engine_problem(facts, gpu, instance_type) is not None:
            continue
        dtype = resolved_dtype(dtype_setting, facts.config_dtype, gpu.compute_capability)
        if dtype == "bfloat16" and gpu.compute_capability < (8, 0):
            continue
        degrees = facts.parallel_degrees(instance.gpus)
        if not degrees:
            continue
        candidate = plan(facts, instance_type, degree=degrees[0], dtype=dtype, utilization=utilization)
        if candidate.tokens >= tokens:
            price = instance.price_per_hour
            total = instance.gpus * instance.gpu_memory_gib
            fits.append((price if price is not None else math.inf, total, instance_type, candidate))
    if not fits:
        return None
    _, _, instance_type, best = min(fits)
    return instance_type, best


def describe_price(instance_type: str) -> str:
    price = instances.InstanceType(instance_type).price_per_hour
    if price is None:
        return "its price is not in this project's table"
    return f"${price:.2f} an hour on demand in us-east-1"
