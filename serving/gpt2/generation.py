"""The model folder's contract and the decoding loop every step-wise backend shares.

A step-wise backend (ONNX Runtime, TensorRT) only knows how to run one forward pass of the
exported graph: ``input_ids`` (B, S), ``attention_mask`` (B, past + S), ``position_ids``
(B, S) and the past keys/values in, the last position's logits and the new keys/values
out. Prefill is the same graph with an empty past. (ONNX Runtime's CPU graph takes other
inputs and updates its cache in place; `backends.SharedKVStep` gives it this interface.)
Everything else (left padding, greedy or sampled token choice, EOS, stop strings, per-row
limits) lives here once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

GENERATION_FILE = "generation.json"
ONNX_FP32 = "model.onnx"
ONNX_FP16 = "model_fp16.onnx"
#: Weight-only int8 (``--cpu-precision int8``): replaces model.onnx for ONNX Runtime on the CPU.
ONNX_INT8 = "model_int8.onnx"
#: Int8 weights and activations (``--cpu-precision int8-dynamic``): replaces model.onnx likewise.
ONNX_INT8_DYNAMIC = "model_int8_dynamic.onnx"
MANIFEST_FILE = "manifest.json"
ENGINE_FILE = "model.engine"
ENGINE_INFO = "engine.json"
TOKENIZER_DIR = "tokenizer"
TORCH_DIR = "pytorch"

log = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]


def input_names(n_layer: int) -> list[str]:
    return [
        "input_ids",
        "attention_mask",
        "position_ids",
        *(f"past_key_values.{i}.{kv}" for i in range(n_layer) for kv in ("key", "value")),
    ]


def shared_kv_input_names(n_layer: int) -> list[str]:
    """Inputs of the CPU graph whose KV cache is updated in place
    (`artifacts_builder.gpt2_cpu_graph`); its outputs are `output_names`."""
    return [
        "input_ids",
        "position_ids",
        "seqlens_k",
        "total_sequence_length",
        *(f"past_key_values.{i}.{kv}" for i in range(n_layer) for kv in ("key", "value")),
    ]


def output_names(n_layer: int) -> list[str]:
    return ["logits", *(f"present.{i}.{kv}" for i in range(n_layer) for kv in ("key", "value"))]


@dataclass(frozen=True, kw_only=True)
class ModelInfo:
    """``generation.json``: what the builder exported, with the limits it was built for."""

    model: str
    n_layer: int
    n_head: int
    head_dim: int
    vocab_size: int
    n_positions: int
    eos_token_id: int
    #: The TensorRT profiles and the request validation both use these two.
    max_batch_size: int
    max_total_length: int
    default_max_new_tokens: int

    @classmethod
    def load(cls, model_dir: Path) -> ModelInfo:
        path = model_dir / GENERATION_FILE
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            raise FileNotFoundError(
                f"{path} does not exist: {model_dir} is not a GPT-2 model folder built by "
                "`python -m artifacts_builder gpt2`"
            ) from None
        return cls(**{k: raw[k] for k in cls.__dataclass_fields__})

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _manifest(model_dir: Path) -> dict[str, Any] | None:
    """The payload's manifest; None for a folder without one."""
    try:
        manifest = json.loads((model_dir / MANIFEST_FILE).read_text())
    except FileNotFoundError:
        return None
    return manifest if isinstance(manifest, dict) else {}


def onnxruntime_section(model_dir: Path) -> dict[str, Any]:
    """The manifest's ``onnxruntime`` section: the graph ONNX Runtime serves and how it was made."""
    section = (_manifest(model_dir) or {}).get("onnxruntime")
    return section if isinstance(section, dict) else {}


def onnxruntime_file(model_dir: Path) -> str:
    """The ONNX file the payload's manifest names for ONNX Runtime on the CPU (its
    ``onnxruntime.file``); ``model.onnx`` for a folder whose manifest names none (payloads built
    before the builder had ``--cpu-precision``, or a folder with no manifest)."""
    manifest = _manifest(model_dir)
    if manifest is None:
        return ONNX_FP32
    name = (manifest.get("onnxruntime") or {}).get("file", ONNX_FP32)
    if not isinstance(name, str) or name not in manifest.get("files", {}):
        raise FileNotFoundError(
            f"{model_dir / MANIFEST_FILE} names {name!r} as the ONNX Runtime graph but does not list that file: "
            "rebuild the payload with `python -m artifacts_builder gpt2`"
        )
    return name


@dataclass(frozen=True, kw_only=True)
class SamplingParams:
    max_new_tokens: int
    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0

    def key(self) -> tuple[bool, float, int, float]:
        """Rows with equal keys can share one `generate` call of a whole-sequence backend."""
        return (self.do_sample, self.temperature, self.top_k, self.top_p)


@dataclass
class Completion:
    tokens: list[int] = field(default_factory=list)
    #: "length" (max_new_tokens reached), "eos" (end-of-text token) or "stop" (a stop string).
    finish_reason: str = "length"


#: Called with (row, tokens so far); True ends that row (a stop string was produced).
StopCheck = Callable[[int, list[int]], bool]


class Backend(Protocol):
    """What the batcher and the predictor need from any backend."""

    name: str
    info: ModelInfo

    def generate(
        self, prompts: Sequence[Sequence[int]], params: Sequence[SamplingParams], stop: StopCheck | None = None
    ) -> list[Completion]: ...


def left_pad(prompts: Sequence[Sequence[int]], pad_id: int) -> tuple[IntArray, IntArray, IntArray]:
    """Left padding keeps every row's last real token at the last position, so one
    "last position" logits output serves the whole batch; positions count real tokens only."""
    width = max(len(p) for p in prompts)
    ids = np.full((len(prompts), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(prompts), width), dtype=np.int64)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt) :] = prompt
        mask[row, width - len(prompt) :] = 1
    positions = np.clip(np.cumsum(mask, axis=1) - 1, 0, None)
    return ids, mask, positions


def _greedy(logits: FloatArray) -> IntArray:
    """Argmax per row; a NaN never wins (np.argmax would pick the first NaN). The masked copy is
    made only when a NaN is there: for 16 rows it cost 1 ms a step, 4% of a batched request."""
    if np.isnan(logits).any():
        logits = np.where(np.isnan(logits), -np.inf, logits)
    chosen: IntArray = np.argmax(logits, axis=-1).astype(np.int64)
    return chosen


def sampling_distribution(logits: FloatArray, p: SamplingParams) -> npt.NDArray[np.float64] | None:
    """The probabilities one sampled row draws from, or None when they cannot be formed
    (NaN or infinite logits): the caller then takes that row's argmax.

    The row's maximum is subtracted before the division by the temperature, so that large
    logits over a small temperature cannot overflow: the best token scores 0 and every other
    a finite negative number or -inf, and the sum of the exponentials is at least 1.
    """
    scores: npt.NDArray[np.float64] = logits.astype(np.float64)
    if not np.isfinite(scores).all():
        return None
    with np.errstate(over="ignore", under="ignore"):  # a tiny temperature sends the others to -inf
        scores = (scores - scores.max()) / p.temperature
    if 0 < p.top_k < scores.shape[0]:
        kth = np.partition(scores, -p.top_k)[-p.top_k]
        scores = np.where(scores < kth, -np.inf, scores)
    probs = np.exp(scores)
    probs /= probs.sum()
    if p.top_p < 1.0:
        order = np.argsort(-probs, kind="stable")
        cumulative = np.cumsum(probs[order])
        # Keep the smallest prefix whose mass reaches top_p (at least one token).
        keep = order[: int(np.searchsorted(cumulative, p.top_p)) + 1]
        trimmed = np.zeros_like(probs)
        trimmed[keep] = probs[keep]
        probs = trimmed / trimmed.sum()
    total = probs.sum()
    if not np.isfinite(probs).all() or not abs(total - 1.0) < 1e-6:
        return None
    return probs


def choose_tokens(logits: FloatArray, params: Sequence[SamplingParams], rng: np.random.Generator) -> IntArray:
    """Greedy rows take the argmax; sampled rows apply temperature, top-k and top-p (nucleus).
    A sampled row whose distribution is degenerate falls back to its argmax: one odd row
    never fails the batch it shares with other requests."""
    chosen = _greedy(logits)
    for row, p in enumerate(params):
        if not p.do_sample:
            continue
        probs = sampling_distribution(logits[row], p)
        if probs is None:
            log.warning("row %d: logits are not finite; taking the argmax instead of sampling", row)
            continue
        chosen[row] = int(rng.choice(probs.shape[0], p=probs))
    return chosen


class StepModel(Protocol):
    def forward(
        self, input_ids: IntArray, attention_mask: IntArray, position_ids: IntArray, past: Any | None
    ) -> tuple[FloatArray, Any]:
        """Logits of the last position (B, vocab) as float32, and the new past."""
        ...


def decode_loop(
    model: StepModel,
    prompts: Sequence[Sequence[int]],
    params: Sequence[SamplingParams],
    *,
    eos_token_id: int,
    rng: np.random.Generator,
    stop: StopCheck | None = None,
) -> list[Completion]:
    """Prefill once, then one token per step for the whole batch until every row is done."""
    if len(prompts) != len(params) or not prompts:
        raise ValueError(f"{len(prompts)} prompts and {len(params)} parameter sets: need one per prompt, at least one")
    ids, mask, positions = left_pad(prompts, eos_token_id)
    logits, past = model.forward(ids, mask, positions, None)
    results = [Completion() for _ in prompts]
    done = np.zeros(len(prompts), dtype=bool)
    last_pos = positions[:, -1:]
    for _ in range(max(p.max_new_tokens for p in params)):
        tokens = choose_tokens(logits, params, rng)
        for row, token in enumerate(tokens.tolist()):
            if done[row]:
                continue
            result = results[row]
            if token == eos_token_id:
                result.finish_reason, done[row] = "eos", True
                continue
            result.tokens.append(token)
            if stop is not None and stop(row, result.tokens):
                result.finish_reason, done[row] = "stop", True
            elif len(result.tokens) >= params[row].max_new_tokens:
                result.finish_reason, done[row] = "length", True
        if done.all():
            break
        # Finished rows keep stepping (the batch shape is fixed); their tokens are ignored.
        step_ids = np.where(done, eos_token_id, tokens)[:, None].astype(np.int64)
        mask = np.concatenate([mask, np.ones((len(prompts), 1), dtype=np.int64)], axis=1)
        last_pos = last_pos + 1
        logits, past = model.forward(step_ids, mask, last_pos, past)
    return results
