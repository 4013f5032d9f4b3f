"""GPT-2: ONNX export with a KV cache, TensorRT engine where a GPU is present, parity gate,
``model.tar.gz``.

Each graph serves both shapes: prefill (the padded prompt, an empty past) and decode (one
token on a past). ONNX Runtime gets an fp32 graph that updates its KV cache in place
(`gpt2_cpu_graph`), TensorRT an fp16 one (LayerNorm kept in fp32, as NVIDIA's GPT-2 demo did)
that concatenates it. ``--cpu-precision int8`` replaces the fp32 graph for
ONNX Runtime by a weight-only int8 one (twice as fast per token on a CPU, where a decode step
is bound by reading the weights); ``--cpu-precision int8-dynamic`` by one whose activations are
int8 too, which keeps that speed for a lone request and batches like fp32 on a CPU with int8
dot products (VNNI): 8-bit weights for a target CPU with one, 7-bit weights for one without
(``--target-instance-type``, by default the build host). Before anything deployable is written the parity gate runs
the serving backends themselves against PyTorch on fixed prompts; a failure exits non-zero
and leaves the output folder as it was.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from artifacts_builder.gpt2_cpu_graph import export_shared_kv, trace_to_onnx
from artifacts_builder.tarball import pack_directory
from llm_contracts import instances
from llm_contracts.manifest import library_versions, write_manifest

COMPONENT = "gpt2"
PARITY_PROMPTS = (
    "amazon",
    "patent search query",
    "lithium battery cathode",
    "neural network accelerator chip architecture for",
)
VERSIONED = ("torch", "transformers", "tokenizers", "onnx", "onnxruntime", "tensorrt")
OPSET = 17
CPU_PRECISIONS = ("fp32", "int8", "int8-dynamic")
#: Weight-only int8 for ONNX Runtime's MatMulNBits: one scale per 32 weights (block 128 was 8%
#: faster but 25% less accurate on the 124M model), symmetric, and accuracy level 4, i.e. the
#: activations are quantized to int8 per block too so that the product runs on int8 kernels
#: (levels 0-1 dequantize to fp32 and were 17-35x slower than fp32 here).
INT8_QUANTIZATION = {"method": "MatMulNBits", "bits": 8, "block_size": 32, "symmetric": True, "accuracy_level": 4}
#: ONNX Runtime's dynamic quantization of every linear layer and the LM head: int8 weights with
#: one scale per output column, uint8 activations with one scale per tensor computed at each call
#: (MatMulInteger, fused to DynamicQuantizeMatMul). The weights take 8 bits for a CPU with an int8
#: dot product and 7 (``reduce_range``) for one without: its kernels add pairs of uint8 x int8
#: products in int16 (VPMADDUBSW), and only |w| <= 64 keeps 2 x 255 x |w| below 2**15, so that a
#: 7-bit graph computes the same integers on every CPU (ONNX Runtime's quantization guide
#: recommends reduce_range on CPUs without VNNI). On 2 cores with VNNI a 16-row decode step
#: costs 2.2x a 1-row one, against 2.7x for MatMulNBits, whose per-block activation scales cost
#: arithmetic per row (bench/gpt2_bounds.py). One activation scale per tensor is what a model
#: with outlier channels quantizes worst, and it spans the batch, so a row's logits move a little
#: with its batch-mates: the int8 gate decides whether a model may ship this way, and checks
#: the prompts batched together as well as alone.
INT8_DYNAMIC_QUANTIZATION = {
    "method": "quantize_dynamic",
    "weights": "int8, symmetric, one scale per output column",
    "activations": "uint8, one scale per tensor, computed per call",
}


class TargetError(ValueError):
    """The int8-dynamic graph cannot be built for the target asked for on this host."""


@dataclass(frozen=True)
class Int8Target:
    """The CPU an int8-dynamic graph is built for, and so the width of its weights."""

    #: The SageMaker instance type (None: the build host).
    instance_type: str | None
    #: Whether the target's CPU sums uint8 x int8 products in int32 (`instances.CpuFamily`).
    int8_dot_product: bool

    @property
    def weight_bits(self) -> int:
        return 8 if self.int8_dot_product else 7

    def manifest(self, host_saturates: bool | None) -> dict[str, Any]:
        return {
            "file": "",  # filled in by the caller
            "precision": "int8-dynamic",
            "quantization": {**INT8_DYNAMIC_QUANTIZATION, "weight_bits": self.weight_bits},
            "target": {"instance_type": self.instance_type, "int8_dot_product": self.int8_dot_product},
            # The server refuses an 8-bit graph on a CPU whose products saturate.
            "needs_int8_dot_product": self.weight_bits == 8,
            # What the gate ran on (True: its products saturate; None: unknown).
            "gate_cpu_u8s8_saturates": host_saturates,
        }


def int8_target(instance_type: str | None, host_saturates: bool | None) -> Int8Target:
    """The target of an int8-dynamic build: `instance_type`'s CPU family, or the build host
    (`host_saturates` as `serving.gpt2.backends.u8s8_saturates` reads it; a host it cannot read
    counts as one whose products saturate). An 8-bit graph is gated only where the host sums
    exactly as the target does: on a host whose products saturate, its gate would check other
    numbers than the target computes."""
    if instance_type is None:
        return Int8Target(None, host_saturates is False)
    try:
        dot = instances.int8_dot_product(instance_type)
    except ValueError as exc:
        raise TargetError(f"--target-instance-type {exc}") from None
    if dot and host_saturates is not False:
        why = "has none" if host_saturates else "cannot be read"
        cpu = instances.CPU_FAMILIES[instances.family(instance_type)].processors
        raise TargetError(
            f"--target-instance-type {instance_type} sums int8 products exactly ({cpu}) and this build "
            f"host's int8 dot product {why}: "
            "the parity gate would check other numbers than the target computes; build on a host with "
            "avx512_vnni, avx_vnni or amx_int8 (or on Arm), or target a family without one such as "
            "ml.c5.xlarge (7-bit weights, the same numbers on every CPU)"
        )
    return Int8Target(instance_type, dot)


class ParityError(RuntimeError):
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--model", default="gpt2", help="hub id or local folder of a GPT-2 model (default: gpt2)")
    source.add_argument(
        "--tiny", action="store_true", help="tiny random-weight GPT-2 and a tokenizer trained offline (tests, demo)"
    )
    source.add_argument(
        "--random-weights",
        action="store_true",
        help="the 124M GPT-2 architecture (GPT2Config() defaults) with random weights, offline (benchmarks)",
    )
    parser.add_argument("--out", type=Path, default=Path("artifacts"), help="output folder (default: artifacts)")
    parser.add_argument(
        "--max-batch-size", type=_positive, default=10, help="largest batch the server runs (default: 10)"
    )
    parser.add_argument(
        "--max-length", type=_positive, default=42, help="largest prompt + completion, in tokens (default: 42)"
    )
    parser.add_argument(
        "--default-max-new-tokens", type=_positive, default=16, help="completion length when a request gives none"
    )
    parser.add_argument(
        "--fp32-tolerance", type=float, default=1e-3, help="parity: max |logit difference|, fp32 ONNX (default 1e-3)"
    )
    parser.add_argument(
        "--fp16-tolerance",
        type=float,
        default=2e-2,
        help="parity: max |logit difference| of the fp16 ONNX, relative to max |logit| (default 2e-2)",
    )
    parser.add_argument(
        "--cpu-precision",
        choices=CPU_PRECISIONS,
        default="fp32",
        help="the graph ONNX Runtime serves on a CPU: fp32 (model.onnx, default), weight-only int8 "
        "(model_int8.onnx instead, about 2x faster per token) or int8 weights and activations "
        "(model_int8_dynamic.onnx instead: as fast alone, and batches well on CPUs with VNNI); "
        "both int8 graphs are gated by --int8-tolerance",
    )
    parser.add_argument(
        "--int8-tolerance",
        type=float,
        default=0.25,
        help="parity: max |logit difference| of the int8 ONNX, relative to the standard deviation of "
        "PyTorch's logits (default 0.25)",
    )
    parser.add_argument(
        "--target-instance-type",
        metavar="ml.FAMILY.SIZE",
        help="with --cpu-precision int8-dynamic: the SageMaker CPU instance type the graph is for; its int8 "
        "instructions pick 8-bit weights (VNNI, AMX, Arm) or 7-bit ones that cannot saturate (default: this host)",
    )
    parser.add_argument("--parity-tokens", type=_positive, default=8, help="greedy tokens compared per prompt")
    parser.add_argument("--no-tensorrt", action="store_true", help="skip the engine build even on a GPU")
    parser.add_argument("--workspace-gb", type=_positive, default=4, help="TensorRT builder workspace (default: 4)")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not positive: give 1 or more")
    return value


def _step(message: str) -> None:
    print(f"[gpt2] {message}", file=sys.stderr, flush=True)


@contextmanager
def _timed(message: str) -> Iterator[None]:
    _step(message + " ...")
    started = time.monotonic()
    yield
    _step(f"{message}: done in {time.monotonic() - started:.1f} s")


def _load(args: argparse.Namespace, work: Path) -> tuple[Any, Any, str]:
    """The PyTorch model (fp32, eval) and its tokenizer; `work` receives a trained tokenizer."""
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    from artifacts_builder.tiny import train_tokenizer

    if args.tiny or args.random_weights:
        import torch

        tokenizer = train_tokenizer(work / "trained-tokenizer")
        torch.manual_seed(0)
        if args.tiny:
            # Wider initial weights than GPT-2's 0.02 give peaked logits, so that greedy
            # choices in the parity gate are decided by the model, not by rounding.
            config = GPT2Config(
                vocab_size=len(tokenizer),
                n_positions=128,
                n_embd=64,
                n_layer=2,
                n_head=4,
                initializer_range=0.2,
                bos_token_id=tokenizer.eos_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
            name = "tiny-random-gpt2"
        else:
            # The trained tokenizer covers the first 512 ids; the others decode to nothing,
            # which is all a benchmark of the 124M architecture needs.
            config = GPT2Config(bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id)
            name = "random-gpt2-124m"
        return GPT2LMHeadModel(config).eval(), tokenizer, name  # type: ignore[no-untyped-call]
    source = args.model
    _step(f"loading {source} (from the hub unless it is a local folder)")
    model = GPT2LMHeadModel.from_pretrained(source, dtype="float32").eval()  # type: ignore[no-untyped-call]
    return model, AutoTokenizer.from_pretrained(source), str(source)


def model_info(model: Any, tokenizer: Any, name: str, args: argparse.Namespace) -> Any:
    from serving.gpt2.generation import ModelInfo

    config = model.config
    if args.max_length > config.n_positions:
        raise ValueError(
            f"--max-length {args.max_length} exceeds the model's {config.n_positions} positions: "
            f"give at most {config.n_positions}"
        )
    if args.default_max_new_tokens >= args.max_length:
        raise ValueError(
            f"--default-max-new-tokens {args.default_max_new_tokens} leaves no room for a prompt within "
            f"--max-length {args.max_length}: give less than {args.max_length}"
        )
    return ModelInfo(
        model=name,
        n_layer=config.n_layer,
        n_head=config.n_head,
        head_dim=config.n_embd // config.n_head,
        vocab_size=config.vocab_size,
        n_positions=config.n_positions,
        eos_token_id=int(tokenizer.eos_token_id),
        max_batch_size=args.max_batch_size,
        max_total_length=args.max_length,
        default_max_new_tokens=args.default_max_new_tokens,
    )


def export_onnx(model: Any, info: Any, path: Path, *, fp16: bool) -> None:
    """Export the step graph with a concatenated KV cache: the fp16 graph TensorRT builds its
    engine from. (ONNX Runtime's CPU graph is `gpt2_cpu_graph.export_shared_kv`.) Past
    keys/values are plain tensors: a `DynamicCache` input cannot be exported, so a wrapper
    rebuilds one inside the traced function."""
    import copy
    import types

    import torch
    from transformers import DynamicCache

    from serving.gpt2.generation import input_names, output_names

    model = copy.deepcopy(model)
    model.config._attn_implementation = "eager"
    dtype = torch.float16 if fp16 else torch.float32
    if fp16:
        model = model.half()

        def layer_norm_fp32(self: torch.nn.LayerNorm, x: torch.Tensor) -> torch.Tensor:
            out = torch.nn.functional.layer_norm(x.float(), self.normalized_shape, self.weight, self.bias, self.eps)
            return out.to(x.dtype)

        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.float()
                module.forward = types.MethodType(layer_norm_fp32, module)  # type: ignore[method-assign]

    n_layer = info.n_layer

    class Step(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(
            self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor, *past: torch.Tensor
        ) -> tuple[torch.Tensor, ...]:
            cache = DynamicCache(ddp_cache_data=[(past[2 * i], past[2 * i + 1]) for i in range(n_layer)])
            out = self.model.transformer(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                past_key_values=cache,
                use_cache=True,
            )
            # Only the last position's logits are ever used: skipping the others spares the
            # vocabulary projection of every prompt token.
            logits = self.model.lm_head(out.last_hidden_state[:, -1, :]).float()
            present = [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
            return (logits, *present)

    batch, seq, past_len = 2, 3, 4
    sample = (
        torch.ones((batch, seq), dtype=torch.int64),
        torch.ones((batch, past_len + seq), dtype=torch.int64),
        torch.arange(past_len, past_len + seq).expand(batch, seq).contiguous(),
        *[torch.zeros((batch, info.n_head, past_len, info.head_dim), dtype=dtype) for _ in range(2 * n_layer)],
    )
    inputs, outputs = input_names(n_layer), output_names(n_layer)
    axes: dict[str, dict[int, str]] = {
        "input_ids": {0: "batch", 1: "sequence"},
        "attention_mask": {0: "batch", 1: "total"},
        "position_ids": {0: "batch", 1: "sequence"},
        "logits": {0: "batch"},
    }
    axes.update({name: {0: "batch", 2: "past"} for name in inputs[3:]})
    axes.update({name: {0: "batch", 2: "total"} for name in outputs[1:]})
    trace_to_onnx(Step(), sample, path, inputs=inputs, outputs=outputs, axes=axes, opset=OPSET)


def _linear_as_matmul(source: Path) -> Any:
    """The fp32 graph with each Gemm of a constant, untransposed weight written as MatMul + Add
    (the same arithmetic): the export writes GPT-2's Conv1D layers as Gemm, which the weight-only
    quantizer does not take. (The dynamic quantizer makes the same rewrite itself.)"""
    import onnx
    from onnx import helper

    model = onnx.load(str(source))
    constants = {t.name for t in model.graph.initializer}
    nodes = []
    for node in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        plain = attrs.get("transA", 0) == 0 and attrs.get("transB", 0) == 0
        unscaled = attrs.get("alpha", 1.0) == 1.0 and attrs.get("beta", 1.0) == 1.0
        if node.op_type == "Gemm" and plain and unscaled and node.input[1] in constants and len(node.input) == 3:
            product = node.output[0] + "/MatMul"
            nodes.append(helper.make_node("MatMul", node.input[:2], [product], name=node.name + "/MatMul"))
            nodes.append(helper.make_node("Add", [product, node.input[2]], list(node.output), name=node.name + "/Add"))
        else:
            nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model


def _fp32_weight_products(model: Any) -> list[str]:
    constants = {t.name for t in model.graph.initializer}
    return [n.name for n in model.graph.node if n.op_type in ("Gemm", "MatMul") and n.input[1] in constants]


@contextmanager
def _quiet_quantizer() -> Iterator[None]:
    """ONNX Runtime's quantizers log to the root logger: a line per layer, and a warning that
    suggests shape-inference pre-processing meant for CNNs."""
    import logging

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def quantize_int8(source: Path, target: Path) -> None:
    """Weight-only int8 of every linear layer and the LM head (`INT8_QUANTIZATION`). The
    embedding Gather stays fp32: it reads one row per token."""
    import logging

    import onnx
    from onnxruntime.quantization import matmul_nbits_quantizer as nbits

    nbits.logger.setLevel(logging.WARNING)
    model = _linear_as_matmul(source)
    quantizer = nbits.MatMulNBitsQuantizer(
        model,
        bits=INT8_QUANTIZATION["bits"],
        block_size=INT8_QUANTIZATION["block_size"],
        is_symmetric=INT8_QUANTIZATION["symmetric"],
        accuracy_level=INT8_QUANTIZATION["accuracy_level"],
    )
    with _quiet_quantizer():
        quantizer.process()
    quantized = quantizer.model.model
    if left := _fp32_weight_products(quantized):
        raise RuntimeError(f"int8 quantization left {len(left)} weight products in fp32 ({left[:3]} ...)")
    onnx.save(quantized, str(target))


def quantize_int8_dynamic(source: Path, target: Path, *, weight_bits: int = 8) -> None:
    """Int8 weights and activations for every linear layer and the LM head
    (`INT8_DYNAMIC_QUANTIZATION`), the weights in `weight_bits` (8, or 7: ``reduce_range``); the
    attention products of activations stay fp32. The quantizer writes the export's Gemm layers as
    MatMul itself, per column of their (in, out) weights."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    if weight_bits not in (7, 8):
        raise ValueError(f"weight_bits={weight_bits} is not 7 or 8")
    with _quiet_quantizer():
        quantize_dynamic(
            source,
            target,
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul", "Gemm"],
            per_channel=True,
            reduce_range=weight_bits == 7,
        )
    if left := _fp32_weight_products(onnx.load(str(target))):
        raise RuntimeError(f"int8 quantization left {len(left)} weight products in fp32 ({left[:3]} ...)")


@dataclass
class ParityReport:
    onnx: str
    max_abs_logit_diff: float
    tolerance: float
    greedy_identical: bool
    detail: str
    #: What `tolerance` is, for the manifest's reader.
    criterion: str = ""

    @property
    def passed(self) -> bool:
        return self.greedy_identical and self.max_abs_logit_diff <= self.tolerance


def _reference(model: Any, prompts: list[list[int]], new_tokens: int, eos: int) -> list[list[int]]:
    """Greedy tokens of PyTorch `generate`, one unpadded prompt at a time."""
    import torch

    out = []
    with torch.inference_mode():
        for prompt in prompts:
            ids = torch.tensor([prompt])
            gen = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=new_tokens,
                do_sample=False,
                pad_token_id=eos,
                eos_token_id=eos,
            )
            tokens = gen[0, len(prompt) :].tolist()
            out.append(tokens[: tokens.index(eos)] if eos in tokens else tokens)
    return out


def _teacher_forced(backend: Any, prompt: list[int], tokens: list[int]) -> Any:
    """The backend's logits at each step of PyTorch's sequence: prefill, then one token a step."""
    import numpy as np

    ids = np.array([prompt], dtype=np.int64)
    logits, past = backend.forward(ids, np.ones_like(ids), np.arange(len(prompt))[None], None)
    got = [logits[0]]
    for step, token in enumerate(tokens):
        pos = len(prompt) + step
        logits, past = backend.forward(
            np.array([[token]]), np.ones((1, pos + 1), dtype=np.int64), np.array([[pos]]), past
        )
        got.append(logits[0])
    return np.stack(got)


def _teacher_forced_batched(
    backend: Any, prompts: list[list[int]], tokens: list[list[int]], rows: int, pad_id: int
) -> list[Any]:
    """`_teacher_forced` for every prompt at once, in one left-padded batch of `rows` rows (the
    prompts repeated), as the server batches requests: a graph whose numbers depend on the other
    rows (one activation scale per tensor) is checked where it serves. Each prompt's logits, over
    the steps that all of PyTorch's sequences have."""
    import numpy as np

    from serving.gpt2.generation import left_pad

    steps = min(len(t) for t in tokens)
    order = [i % len(prompts) for i in range(max(rows, len(prompts)))]
    ids, mask, positions = left_pad([prompts[i] for i in order], pad_id)
    logits, past = backend.forward(ids, mask, positions, None)
    got = [logits]
    last = positions[:, -1:]
    for step in range(steps):
        mask = np.concatenate([mask, np.ones((len(order), 1), dtype=np.int64)], axis=1)
        last = last + 1
        step_ids = np.array([[tokens[i][step]] for i in order], dtype=np.int64)
        logits, past = backend.forward(step_ids, mask, last, past)
        got.append(logits)
    stacked = np.stack(got, axis=1)
    return [stacked[i] for i in range(len(prompts))]


def _top2_gap(logits: Any) -> Any:
    """How far PyTorch's best token is ahead of the second, per step."""
    import numpy as np

    top2 = np.sort(logits, axis=-1)[:, -2:]
    return top2[:, 1] - top2[:, 0]


# Complex on purpose: one gate, every prompt and check in sequence, each failure named; split, the
# steps would pass their state around.
def parity_gate(  # noqa: C901
    model: Any,
    tokenizer: Any,
    model_dir: Path,
    info: Any,
    *,
    new_tokens: int,
    tol32: float,
    tol16: float,
    tol8: float = 0.25,
    checks: Sequence[tuple[str, str]] | None = None,
) -> list[ParityReport]:
    """Compare the serving backend on each (ONNX file, precision) of `checks` (default: the
    fp32 and the fp16 graph) with PyTorch.

    fp32: free-running greedy tokens of the batched, left-padded server path must equal
    PyTorch's (each prompt alone), and teacher-forced logits must agree within `tol32`.
    fp16: teacher-forced logits within `tol16` x max |logit|, and the same argmax at every
    step except where PyTorch's own top two are closer than that tolerance (a tie in fp16).
    int8: teacher-forced logits, each prompt alone and all of them in one batch of the model's
    max_batch_size rows, within `tol8` x the standard deviation of PyTorch's logits,
    the same argmax at every step except where PyTorch's top two are closer than that, and
    the served greedy tokens equal to PyTorch's up to such a near-tie, if one comes. The
    scale is the spread of the logits, not their size: softmax and argmax ignore a shift of
    all logits, and random weights give logits near zero whose size says nothing. Rounding
    every weight moves every logit a little, so the served text may part from PyTorch's where
    two tokens were within that tolerance, never where PyTorch's choice was clear.
    """
    import numpy as np
    import torch

    from serving.gpt2.backends import OnnxRuntimeBackend
    from serving.gpt2.generation import ONNX_FP16, ONNX_FP32, SamplingParams

    checks = checks or [(ONNX_FP32, "fp32"), (ONNX_FP16, "fp16")]
    prompts = [tokenizer(p).input_ids for p in PARITY_PROMPTS]
    new_tokens = min(new_tokens, info.max_total_length - max(len(p) for p in prompts))
    expected = _reference(model, prompts, new_tokens, info.eos_token_id)
    refs = []
    for prompt, tokens in zip(prompts, expected, strict=True):
        sequence = [*prompt, *tokens]
        with torch.inference_mode():
            refs.append(model(torch.tensor([sequence])).logits[0].numpy()[len(prompt) - 1 : len(sequence)])
    every = np.concatenate(refs)
    magnitude = max(1.0, float(np.abs(every).max()))
    spread = float(every.std(axis=-1).mean())
    tolerances = {"fp32": tol32, "fp16": tol16 * magnitude, "int8": tol8 * spread}
    criteria = {
        "fp32": f"max |logit diff| <= {tol32:g}; served greedy tokens identical",
        "fp16": f"max |logit diff| <= {tol16:g} x max |PyTorch logit| ({magnitude:.3g}); same argmax where "
        "PyTorch's top two differ by more than that",
        "int8": f"max |logit diff| <= {tol8:g} x std of PyTorch logits ({spread:.3g}), alone and in a full batch; "
        "same argmax where PyTorch's "
        "top two differ by more than that; served greedy tokens the same up to the first step where they do not",
    }
    params = [SamplingParams(max_new_tokens=new_tokens)] * len(prompts)
    reports = []
    for onnx_file, precision in checks:
        if precision not in tolerances:
            raise ValueError(f"parity precision {precision!r} is unknown: use one of {', '.join(tolerances)}")
        tolerance = tolerances[precision]
        backend = OnnxRuntimeBackend(model_dir, info, onnx_file=onnx_file)
        worst, greedy_ok, detail = 0.0, True, "ok"
        runs = [(prompt, "alone", _teacher_forced(backend, prompt, tokens), ref)
                for prompt, tokens, ref in zip(prompts, expected, refs, strict=True)]  # fmt: skip
        if precision == "int8":
            rows = info.max_batch_size
            batched = _teacher_forced_batched(backend, prompts, expected, rows, info.eos_token_id)
            runs += [(prompt, f"in a batch of {max(rows, len(prompts))}", got, ref[: len(got)])
                     for prompt, got, ref in zip(prompts, batched, refs, strict=True)]  # fmt: skip
        for prompt, how, got, ref in runs:
            worst = max(worst, float(np.abs(got - ref).max()))
            if precision != "fp32":
                disagree = (got.argmax(-1) != ref.argmax(-1)) & (_top2_gap(ref) > tolerance)
                if disagree.any():
                    greedy_ok = False
                    steps = np.nonzero(disagree)[0].tolist()
                    detail = f"prompt {tokenizer.decode(prompt)!r} ({how}): argmax differs at steps {steps}"
        if precision != "fp16":
            served = [c.tokens for c in backend.generate(prompts, params)]
            ties = 0
            for prompt, want, have, ref in zip(prompts, expected, served, refs, strict=True):
                if want == have:
                    continue
                step = next((i for i, (a, b) in enumerate(zip(want, have, strict=False)) if a != b), None)
                step = min(len(want), len(have)) if step is None else step
                gap = float(_top2_gap(ref)[step])
                if precision == "int8" and gap <= tolerance:
                    ties += 1
                    continue
                greedy_ok = False
                detail = (
                    f"prompt {tokenizer.decode(prompt)!r}: PyTorch greedy {want}, served greedy {have} "
                    f"(they part at step {step}, where PyTorch's top two differ by {gap:.3g})"
                )
                break
            if greedy_ok and ties:
                detail = f"ok; served greedy parts from PyTorch at a near-tie for {ties} of {len(prompts)} prompts"
        reports.append(ParityReport(onnx_file, worst, tolerance, greedy_ok, detail, criteria[precision]))
    return reports


def _tensorrt_ready() -> bool:
    import importlib.util

    from serving.gpt2.backends import cuda_available

    return importlib.util.find_spec("tensorrt") is not None and cuda_available()


def _target(args: argparse.Namespace, host_saturates: bool | None) -> Int8Target | None:
    """The int8-dynamic build's target (None for another precision, which has no choice to make)."""
    if args.cpu_precision != "int8-dynamic":
        if args.target_instance_type is not None:
            raise TargetError(
                f"--target-instance-type {args.target_instance_type} picks the weights of --cpu-precision "
                f"int8-dynamic; --cpu-precision {args.cpu_precision} runs the same on every CPU: drop it"
            )
        return None
    return int8_target(args.target_instance_type, host_saturates)


def _package(staging: Path, tar_path: Path) -> None:
    """A reproducible tarball (see `artifacts_builder.tarball`): the same model gives the same
    sha256, so an unchanged rebuild keeps the S3 asset and the endpoint as they are. Level 1:
    ONNX weights barely compress, and the large models would take minutes at 9."""

    def progress(done: int, total: int) -> None:
        if total > 50 << 20:
            _step(f"packaging {done / total:4.0%} ({done >> 20} of {total >> 20} MiB)")

    pack_directory(staging, tar_path, compresslevel=1, progress=progress)


def run(args: argparse.Namespace) -> int:  # noqa: C901 (the CLI's sequence of build steps, each with its own message on failure)
    import torch

    from serving.gpt2.backends import u8s8_saturates
    from serving.gpt2.generation import (
        ENGINE_FILE,
        GENERATION_FILE,
        ONNX_FP16,
        ONNX_FP32,
        ONNX_INT8,
        ONNX_INT8_DYNAMIC,
        TOKENIZER_DIR,
        TORCH_DIR,
    )

    host_saturates = u8s8_saturates()
    try:
        target = _target(args, host_saturates)
    except TargetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out_dir: Path = args.out / COMPONENT
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".staging-", dir=out_dir) as tmp:
        work = Path(tmp)
        staging = work / "model"
        staging.mkdir()
        with _timed("loading the model"):
            model, tokenizer, name = _load(args, work)
        try:
            info = model_info(model, tokenizer, name, args)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        with _timed("exporting fp32 ONNX for ONNX Runtime (prefill + decode, KV cache updated in place)"):
            export_shared_kv(model, info, staging / ONNX_FP32, opset=OPSET)
        with _timed("exporting fp16 ONNX for TensorRT"):
            export_onnx(model, info, staging / ONNX_FP16, fp16=True)
        checks = [(ONNX_FP32, "fp32"), (ONNX_FP16, "fp16")]
        onnxruntime: dict[str, Any] = {"file": ONNX_FP32, "precision": "fp32"}
        if args.cpu_precision == "int8":
            with _timed("quantizing the fp32 ONNX to weight-only int8 for ONNX Runtime"):
                quantize_int8(staging / ONNX_FP32, staging / ONNX_INT8)
            checks.append((ONNX_INT8, "int8"))
            onnxruntime = {"file": ONNX_INT8, "precision": "int8", "quantization": INT8_QUANTIZATION}
        elif target is not None:
            where = target.instance_type or "this host"
            with _timed(
                f"quantizing the fp32 ONNX to int8 activations and {target.weight_bits}-bit weights for "
                f"ONNX Runtime ({where}: {'an' if target.int8_dot_product else 'no'} int8 dot product)"
            ):
                quantize_int8_dynamic(staging / ONNX_FP32, staging / ONNX_INT8_DYNAMIC, weight_bits=target.weight_bits)
            checks.append((ONNX_INT8_DYNAMIC, "int8"))
            onnxruntime = {**target.manifest(host_saturates), "file": ONNX_INT8_DYNAMIC}
        tokenizer.save_pretrained(staging / TOKENIZER_DIR)
        model.save_pretrained(staging / TORCH_DIR)
        (staging / GENERATION_FILE).write_text(json.dumps(info.to_json(), indent=2) + "\n")

        with _timed("parity gate: ONNX Runtime against PyTorch"):
            reports = parity_gate(
                model,
                tokenizer,
                staging,
                info,
                new_tokens=args.parity_tokens,
                tol32=args.fp32_tolerance,
                tol16=args.fp16_tolerance,
                tol8=args.int8_tolerance,
                checks=checks,
            )
        for r in reports:
            _step(
                f"parity {r.onnx}: max |logit diff| {r.max_abs_logit_diff:.2e} (tolerance {r.tolerance:.2e}), "
                f"greedy {'as required' if r.greedy_identical else 'DIFFERENT'}: {r.detail}"
            )
        if not all(r.passed for r in reports):
            failing = [r.onnx for r in reports if not r.passed]
            hint = ""
            if ONNX_INT8 in failing:
                hint = (
                    f"; int8 rounding moves this model's logits too far for --int8-tolerance "
                    f"{args.int8_tolerance:g}: build with --cpu-precision fp32"
                )
            elif ONNX_INT8_DYNAMIC in failing:
                hint = (
                    f"; int8 activations move this model's logits too far for --int8-tolerance "
                    f"{args.int8_tolerance:g} (one scale per tensor is what outlier channels quantize worst): "
                    "build with --cpu-precision int8 (weight-only) or fp32"
                )
            print(
                f"error: parity gate failed for {', '.join(failing)}: nothing was written to {out_dir}; the "
                f"export does not reproduce PyTorch (see the lines above for the prompt and step){hint}",
                file=sys.stderr,
            )
            return 1
        if args.cpu_precision != "fp32":
            # The fp32 graph was the int8 one's source and its gate's first step; ONNX Runtime
            # serves only the file the manifest names, so shipping both would only add 4 bytes
            # a weight to every download.
            (staging / ONNX_FP32).unlink()

        tensorrt: dict[str, Any] | None = None
        if args.no_tensorrt:
            _step("TensorRT engine skipped (--no-tensorrt)")
        elif _tensorrt_ready():
            from serving.gpt2.trt_engine import build_engine

            with _timed("building the TensorRT engine (two optimization profiles)"):
                tensorrt = build_engine(
                    staging / ONNX_FP16, staging / ENGINE_FILE, info, workspace_bytes=args.workspace_gb << 30
                )
        else:
            _step("TensorRT engine not built (no CUDA GPU or no tensorrt here); the container builds it at start")

        versions = library_versions(VERSIONED)
        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else None
        parity = [{**r.__dict__, "passed": r.passed} for r in reports]
        inner = {str(p.relative_to(staging)): p for p in sorted(staging.rglob("*")) if p.is_file()}
        built: dict[str, Any] = {
            "model": name,
            "versions": versions,
            "gpu": gpu,
            "tensorrt": tensorrt,
            "parity": parity,
            "onnxruntime": onnxruntime,
        }
        write_manifest(staging, COMPONENT, inner, **built)
        tar_path = out_dir / "model.tar.gz"
        with _timed(f"packaging {tar_path}"):
            _package(staging, tar_path)
        write_manifest(out_dir, COMPONENT, [tar_path], **built, generation=info.to_json())
        shutil.rmtree(staging)
    _step(f"wrote {tar_path} and {out_dir / 'manifest.json'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """This component alone (``python -m artifacts_builder.gpt2``), as the dispatcher runs it."""
    parser = argparse.ArgumentParser(prog="python -m artifacts_builder.gpt2", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
