"""The four backends behind one interface, and the choice of the best one available.

Preference at start (``GPT2_BACKEND=auto``): TensorRT on a GPU, else PyTorch fp16 with a
static KV cache and CUDA graphs on a GPU, else ONNX Runtime on the CPU. PyTorch eager
(Hugging Face ``generate``, the seed's original deployment) is the baseline the
benchmark compares against; it is chosen only by name.
"""

from __future__ import annotations

import importlib.util
import logging
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from serving.gpt2.generation import (
    ONNX_INT8_DYNAMIC,
    TORCH_DIR,
    Backend,
    Completion,
    FloatArray,
    IntArray,
    ModelInfo,
    SamplingParams,
    StopCheck,
    decode_loop,
    input_names,
    onnxruntime_file,
    onnxruntime_section,
    output_names,
    shared_kv_input_names,
)

log = logging.getLogger(__name__)

BACKENDS = ("tensorrt", "torch-cuda", "onnxruntime", "torch")
CPUINFO = Path("/proc/cpuinfo")
#: x86 flags of an int8 dot product that accumulates in int32. Without one, ONNX Runtime's
#: uint8 x int8 kernels sum pairs of products in int16 (VPMADDUBSW), which saturates: the
#: int8-dynamic graph then computes other numbers than a gate run on such a CPU checked (on
#: the AVX2 host its per-column variant missed the gate 3x). Arm's kernels accumulate in int32.
INT8_DOT_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})
AUTO_ORDER = ("tensorrt", "torch-cuda", "onnxruntime")


class BackendUnavailable(RuntimeError):
    """The named backend cannot run here; the message says what is missing."""


def cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


def int8_dot_flags(cpuinfo: Path | None = None) -> list[str] | None:
    """Which of `INT8_DOT_FLAGS` the x86 CPU's ``flags`` in `CPUINFO` name; None where it
    cannot be read."""
    try:
        text = (cpuinfo or CPUINFO).read_text()
    except OSError:
        return None
    flags = {flag for line in text.splitlines() if line.startswith("flags") for flag in line.split()}
    return sorted(flags & INT8_DOT_FLAGS)


def u8s8_saturates(cpuinfo: Path | None = None, machine: str | None = None) -> bool | None:
    """Whether ONNX Runtime's uint8 x int8 products saturate on this CPU: an x86 CPU without any
    of `INT8_DOT_FLAGS` in `CPUINFO`. None where it cannot tell."""
    if (machine or platform.machine()).lower() not in ("x86_64", "amd64", "i686", "i386"):
        return False
    flags = int8_dot_flags(cpuinfo)
    return None if flags is None else not flags


def needs_int8_dot_product(model_dir: Path) -> bool:
    """Whether the payload's int8-dynamic graph has full 8-bit weights, whose products only a CPU
    with an int8 dot product sums exactly (the builder's ``needs_int8_dot_product``). A 7-bit
    graph (``reduce_range``) cannot saturate: 2 x 255 x 64 < 2**15. Payloads built before the
    key said the same by having been gated on a CPU whose products did not saturate."""
    section = onnxruntime_section(model_dir)
    needs = section.get("needs_int8_dot_product")
    if isinstance(needs, bool):
        return needs
    return section.get("gate_cpu_u8s8_saturates") is False


class OnnxRuntimeBackend:
    """An ONNX graph on ONNX Runtime's CPU provider, KV cache kept as numpy arrays: by default
    the one the payload's manifest names (fp32 ``model.onnx``, or the int8 graph of a
    ``--cpu-precision int8`` or ``int8-dynamic`` build)."""

    name = "onnxruntime"

    def __init__(self, model_dir: Path, info: ModelInfo, *, threads: int = 0, onnx_file: str | None = None) -> None:
        import onnxruntime as ort

        self.info = info
        self.onnx_file = onnx_file or onnxruntime_file(model_dir)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Spinning intra-op threads stall each other for whole scheduler slices when the cores
        # are shared (measured here: 2.5x slower per token); a batch of work per call amortizes the wake-up.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if threads:
            options.intra_op_num_threads = threads
        if self.onnx_file == ONNX_INT8_DYNAMIC and needs_int8_dot_product(model_dir) and u8s8_saturates():
            raise BackendUnavailable(
                f"{self.onnx_file} has 8-bit weights, built for a CPU with an int8 dot product, and this one has "
                f"none of {', '.join(sorted(INT8_DOT_FLAGS))} ({CPUINFO}): its products would saturate and the "
                "answers differ from what the gate checked; rebuild the payload for this CPU (--cpu-precision "
                "int8-dynamic --target-instance-type of a family without one, such as ml.c5.xlarge: 7-bit weights "
                "that cannot saturate), or with --cpu-precision int8 (weight-only)"
            )
        self.session = ort.InferenceSession(
            str(model_dir / self.onnx_file), sess_options=options, providers=["CPUExecutionProvider"]
        )
        inputs = {i.name: i.type for i in self.session.get_inputs()}
        # The CPU graphs of current payloads update the KV cache in place; the fp16 graph (the
        # TensorRT export, checked here by the builder) and older payloads concatenate it.
        self._shared = SharedKVStep(self.session, info) if "seqlens_k" in inputs else None
        log.info("ONNX Runtime runs %s (KV cache %s)", self.onnx_file, "in place" if self._shared else "concatenated")
        self._past_names = input_names(info.n_layer)[3:]
        self._dtype = np.float16 if inputs[self._past_names[0]] == "tensor(float16)" else np.float32
        self._rng = np.random.default_rng()

    def forward(
        self, input_ids: IntArray, attention_mask: IntArray, position_ids: IntArray, past: Any | None
    ) -> tuple[FloatArray, Any]:
        if self._shared is not None:
            return self._shared.forward(input_ids, attention_mask, position_ids, past)
        if past is None:
            shape = (input_ids.shape[0], self.info.n_head, 0, self.info.head_dim)
            past = [np.zeros(shape, dtype=self._dtype)] * len(self._past_names)
        feeds = {"input_ids": input_ids, "attention_mask": attention_mask, "position_ids": position_ids}
        feeds.update(zip(self._past_names, past, strict=True))
        logits, *present = self.session.run(None, feeds)
        return logits.astype(np.float32, copy=False), present

    def generate(
        self, prompts: Sequence[Sequence[int]], params: Sequence[SamplingParams], stop: StopCheck | None = None
    ) -> list[Completion]:
        return decode_loop(self, prompts, params, eos_token_id=self.info.eos_token_id, rng=self._rng, stop=stop)


@dataclass(eq=False)
class _SharedKV:
    """One batch's KV cache: per layer a key and a value buffer of shape (rows, heads,
    capacity, head_dim), each bound as both the past input and the present output of `binding`,
    which the batch's steps share (only the token inputs and the logits are bound again)."""

    buffers: list[FloatArray]
    binding: Any
    #: Each row's last filled position (its length - 1).
    seqlens: npt.NDArray[np.int32]

    @property
    def capacity(self) -> int:
        return int(self.buffers[0].shape[2])


class SharedKVStep:
    """The step interface (`StepModel`) over the CPU graph whose attention writes new keys and
    values into the buffers it reads (`artifacts_builder.gpt2_cpu_graph`): no step copies the
    past. That graph wants rows right-padded (each row's tokens from position 0); the decoding
    loop pads on the left, so a prompt's rows are shifted here. A step writes into the past it
    is given and returns it: each past is stepped once, as the decoding loop does."""

    #: Buffer positions added at a time when a batch outgrows its cache.
    GROWTH = 64

    def __init__(self, session: Any, info: ModelInfo) -> None:
        import onnxruntime as ort

        self.session = session
        self.info = info
        self._wrap = ort.OrtValue.ortvalue_from_numpy
        self._past = shared_kv_input_names(info.n_layer)[4:]
        self._present = output_names(info.n_layer)[1:]

    def _alloc(self, rows: int, capacity: int) -> _SharedKV:
        shape = (rows, self.info.n_head, capacity, self.info.head_dim)
        buffers = [np.empty(shape, dtype=np.float32) for _ in self._past]
        binding = self.session.io_binding()
        for past_name, present_name, buffer in zip(self._past, self._present, buffers, strict=True):
            value = self._wrap(buffer)
            binding.bind_ortvalue_input(past_name, value)
            binding.bind_ortvalue_output(present_name, value)
        return _SharedKV(buffers, binding, np.zeros(rows, dtype=np.int32))

    def _grow(self, kv: _SharedKV, needed: int) -> _SharedKV:
        """A larger cache holding `kv`'s contents: a batch may run past the room its prompt
        suggested (teacher forcing, long completions)."""
        bigger = self._alloc(len(kv.seqlens), needed + self.GROWTH)
        for old, new in zip(kv.buffers, bigger.buffers, strict=True):
            new[:, :, : kv.capacity] = old
        return bigger

    def forward(
        self, input_ids: IntArray, attention_mask: IntArray, position_ids: IntArray, past: _SharedKV | None
    ) -> tuple[FloatArray, _SharedKV]:
        rows, width = input_ids.shape
        if past is None:
            lengths = attention_mask.sum(axis=1)
            filled = np.arange(width)[None, :] >= (width - lengths)[:, None]
            if lengths.min() < 1 or not np.array_equal(filled, attention_mask.astype(bool)):
                raise ValueError("a prompt's attention_mask must be left padding: zeros, then at least one 1 per row")
            # Row r's tokens move from its last lengths[r] positions to its first.
            source = np.minimum(np.arange(width)[None, :] + (width - lengths)[:, None], width - 1)
            keep = np.arange(width)[None, :] < lengths[:, None]
            input_ids = np.where(keep, np.take_along_axis(input_ids, source, axis=1), self.info.eos_token_id)
            position_ids = np.where(keep, np.take_along_axis(position_ids, source, axis=1), 0)
            kv = self._alloc(rows, width + self.GROWTH)
            seqlens = (lengths - 1).astype(np.int32)
            total = width
        else:
            if width != 1:
                raise ValueError(f"after the prompt the graph takes one token a step, not {width}")
            seqlens = past.seqlens + 1
            total = int(seqlens.max()) + 1
            kv = past if total <= past.capacity else self._grow(past, total)
        kv.seqlens = seqlens
        # A new array a step: the caller may keep the logits it was given (teacher forcing does).
        logits = np.empty((rows, self.info.vocab_size), dtype=np.float32)
        binding = kv.binding
        binding.bind_cpu_input("input_ids", np.ascontiguousarray(input_ids, dtype=np.int64))
        binding.bind_cpu_input("position_ids", np.ascontiguousarray(position_ids, dtype=np.int64))
        binding.bind_cpu_input("seqlens_k", seqlens)
        binding.bind_cpu_input("total_sequence_length", np.array(total, dtype=np.int32))
        binding.bind_ortvalue_output("logits", self._wrap(logits))
        self.session.run_with_iobinding(binding)
        return logits, kv


class TorchEagerBackend:
    """Hugging Face ``generate`` on the saved PyTorch weights: the seed's baseline."""

    name = "torch"

    def __init__(self, model_dir: Path, info: ModelInfo, *, device: str = "cpu", threads: int = 0) -> None:
        import torch
        from transformers import GPT2LMHeadModel

        if threads:
            torch.set_num_threads(threads)
        self.info = info
        self.device = device
        dtype = torch.float16 if device.startswith("cuda") else torch.float32
        model = GPT2LMHeadModel.from_pretrained(model_dir / TORCH_DIR, dtype=dtype)
        # transformers types `to` through a decorator that mypy misreads.
        self.model = model.to(device).eval()  # type: ignore[arg-type]
        self._generate_kwargs: dict[str, Any] = {}

    def generate(
        self, prompts: Sequence[Sequence[int]], params: Sequence[SamplingParams], stop: StopCheck | None = None
    ) -> list[Completion]:
        import torch

        from serving.gpt2.generation import left_pad

        results: list[Completion] = [Completion() for _ in prompts]
        # One `generate` call takes one set of sampling settings: group rows that share them.
        groups: dict[tuple[bool, float, int, float], list[int]] = {}
        for row, p in enumerate(params):
            groups.setdefault(p.key(), []).append(row)
        for rows in groups.values():
            first = params[rows[0]]
            ids, mask, _ = left_pad([prompts[r] for r in rows], self.info.eos_token_id)
            with torch.inference_mode():
                out = self.model.generate(
                    input_ids=torch.from_numpy(ids).to(self.device),
                    attention_mask=torch.from_numpy(mask).to(self.device),
                    max_new_tokens=max(params[r].max_new_tokens for r in rows),
                    do_sample=first.do_sample,
                    temperature=first.temperature if first.do_sample else None,
                    top_k=first.top_k if first.do_sample else None,
                    top_p=first.top_p if first.do_sample else None,
                    pad_token_id=self.info.eos_token_id,
                    eos_token_id=self.info.eos_token_id,
                    **self._generate_kwargs,
                )
            new = out[:, ids.shape[1] :].cpu().tolist()
            for row, tokens in zip(rows, new, strict=True):
                results[row] = _truncate(tokens, params[row].max_new_tokens, self.info.eos_token_id, row, stop)
        return results


def _truncate(tokens: list[int], limit: int, eos: int, row: int, stop: StopCheck | None) -> Completion:
    """Cut a whole-sequence result where the step-wise loop would have stopped."""
    result = Completion()
    for token in tokens[:limit]:
        if token == eos:
            result.finish_reason = "eos"
            return result
        result.tokens.append(token)
        if stop is not None and stop(row, result.tokens):
            result.finish_reason = "stop"
            return result
    return result


class TorchCudaGraphBackend(TorchEagerBackend):
    """PyTorch fp16 on the GPU with a static KV cache. Fixed shapes let `generate` compile the
    decode step with ``torch.compile(mode="reduce-overhead")``, i.e. CUDA graphs, which
    removes the per-kernel launch cost that dominates a 124M model's decode step. The
    warm-up at start captures the graphs, not a client's request."""

    name = "torch-cuda"

    def __init__(self, model_dir: Path, info: ModelInfo, *, threads: int = 0) -> None:
        from transformers import CompileConfig

        if not cuda_available():
            raise BackendUnavailable("backend torch-cuda needs a CUDA GPU; none is visible (use onnxruntime)")
        super().__init__(model_dir, info, device="cuda", threads=threads)
        self._generate_kwargs = {
            "cache_implementation": "static",
            "compile_config": CompileConfig(mode="reduce-overhead", fullgraph=True),
        }


GPU_BACKENDS = ("tensorrt", "torch-cuda")


class GpuRequired(BackendUnavailable):
    """The endpoint's instance type has a GPU, and CUDA does not start: refuse to serve from the CPU."""


def create_backend(
    name: str, model_dir: Path, info: ModelInfo, *, threads: int = 0, engine_cache: Path, require_gpu: bool = False
) -> Backend:
    """Build backend `name`, or with "auto" the first of AUTO_ORDER that starts here. With
    `require_gpu` (a GPU instance type), only a backend that runs on CUDA will do."""
    if require_gpu and not cuda_available():
        raise GpuRequired(
            "the endpoint's instance type has a GPU (GPT2_REQUIRE_GPU=true), but CUDA does not start in this "
            "container: refusing to serve from the CPU. Check the host driver against the image's CUDA "
            "(serve's CUDA compat message above; the endpoint's inference_ami_version) and that the image's "
            "torch is a CUDA build (serving/gpt2/requirements-torch.txt)"
        )
    if name == "auto":
        return _first_that_starts(
            GPU_BACKENDS if require_gpu else AUTO_ORDER, model_dir, info, threads=threads, engine_cache=engine_cache
        )
    return _create(name, model_dir, info, threads=threads, engine_cache=engine_cache)


def _first_that_starts(
    candidates: tuple[str, ...], model_dir: Path, info: ModelInfo, *, threads: int, engine_cache: Path
) -> Backend:
    if Path("/dev/nvidia0").exists() and not cuda_available():
        # Serving on the CPU of a GPU instance is slow and costly, so say so where it is seen.
        log.error(
            "a GPU is attached (/dev/nvidia0) but CUDA does not start: serving on the CPU. Check the host "
            "driver against the image's CUDA (serve's CUDA compat setup, the endpoint's inference_ami_version)"
        )
    failures = []
    for candidate in candidates:
        try:
            return _create(candidate, model_dir, info, threads=threads, engine_cache=engine_cache)
        except BackendUnavailable as exc:
            failures.append(str(exc))
            log.info("backend %s unavailable: %s", candidate, exc)
    raise BackendUnavailable(f"no backend of {', '.join(candidates)} can run here: " + "; ".join(failures))


def _create(name: str, model_dir: Path, info: ModelInfo, *, threads: int, engine_cache: Path) -> Backend:
    if name == "tensorrt":
        if not cuda_available():
            raise BackendUnavailable("backend tensorrt needs a CUDA GPU; none is visible")
        if importlib.util.find_spec("tensorrt") is None:
            raise BackendUnavailable("backend tensorrt needs the tensorrt package (the container image ships it)")
        from serving.gpt2.trt_engine import TensorRTBackend

        return TensorRTBackend(model_dir, info, engine_cache=engine_cache)
    if name == "torch-cuda":
        if not cuda_available():
            raise BackendUnavailable("backend torch-cuda needs a CUDA GPU; none is visible")
        return TorchCudaGraphBackend(model_dir, info, threads=threads)
    if name == "onnxruntime":
        if importlib.util.find_spec("onnxruntime") is None:
            raise BackendUnavailable("backend onnxruntime needs the onnxruntime package")
        return OnnxRuntimeBackend(model_dir, info, threads=threads)
    if name == "torch":
        return TorchEagerBackend(model_dir, info, threads=threads)
    raise BackendUnavailable(f"GPT2_BACKEND={name!r} is not a backend; use auto or one of {', '.join(BACKENDS)}")
