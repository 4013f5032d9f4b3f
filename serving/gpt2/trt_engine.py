"""TensorRT: engine build with two optimization profiles, a version/GPU check that rebuilds a
stale engine instead of crashing, and the step-wise backend.

Written against the TensorRT 10/11 Python API: strongly typed networks (the fp16 comes
from the fp16 ONNX file; TensorRT 11 has no ``BuilderFlag.FP16``), ``set_memory_pool_limit``,
``set_input_shape`` / ``set_tensor_address`` / ``execute_async_v3``. ``tensorrt`` and
``torch`` are imported inside the functions: this module is imported by the builder and
the tests on machines without either.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from serving.gpt2.generation import (
    ENGINE_FILE,
    ENGINE_INFO,
    ONNX_FP16,
    Completion,
    FloatArray,
    IntArray,
    ModelInfo,
    SamplingParams,
    StopCheck,
    decode_loop,
    input_names,
    output_names,
)

log = logging.getLogger(__name__)

Shape = tuple[int, ...]
#: name -> (min, opt, max)
Profile = dict[str, tuple[Shape, Shape, Shape]]
DEFAULT_WORKSPACE_BYTES = 4 << 30
CONTEXT, GENERATION = 0, 1


class EngineBuildError(RuntimeError):
    pass


def profiles(info: ModelInfo) -> list[Profile]:
    """Profile 0 (context): the whole padded prompt, empty past. Profile 1 (generation):
    one token on a past of 1 .. max_total_length - 1, as NVIDIA's GPT-2 demo did."""
    b, t, h, d = info.max_batch_size, info.max_total_length, info.n_head, info.head_dim
    mid = max(1, t // 2)
    context: Profile = {
        "input_ids": ((1, 1), (b, mid), (b, t - 1)),
        "attention_mask": ((1, 1), (b, mid), (b, t - 1)),
        "position_ids": ((1, 1), (b, mid), (b, t - 1)),
    }
    generation: Profile = {
        "input_ids": ((1, 1), (b, 1), (b, 1)),
        "attention_mask": ((1, 2), (b, mid + 1), (b, t)),
        "position_ids": ((1, 1), (b, 1), (b, 1)),
    }
    for name in input_names(info.n_layer)[3:]:
        context[name] = ((1, h, 0, d), (b, h, 0, d), (b, h, 0, d))
        generation[name] = ((1, h, 1, d), (b, h, mid, d), (b, h, t - 1, d))
    return [context, generation]


def current_platform() -> dict[str, str]:
    """The TensorRT version and the GPU's compute capability an engine is tied to."""
    import tensorrt as trt
    import torch

    major, minor = torch.cuda.get_device_capability()
    return {
        "tensorrt_version": str(trt.__version__),
        "compute_capability": f"{major}.{minor}",
        "gpu": str(torch.cuda.get_device_name()),
    }


def mismatch(recorded: dict[str, Any] | None, platform: dict[str, str]) -> str | None:
    """Why an engine built on `recorded` cannot run on `platform` (None: it can)."""
    if recorded is None:
        return "no engine was built (the artifacts were built without a GPU)"
    for key in ("tensorrt_version", "compute_capability"):
        if recorded.get(key) != platform[key]:
            return f"the engine was built for {key} {recorded.get(key)!r}, this machine has {platform[key]!r}"
    return None


def build_engine(
    onnx_path: Path,
    engine_path: Path,
    info: ModelInfo,
    *,
    workspace_bytes: int = DEFAULT_WORKSPACE_BYTES,
) -> dict[str, Any]:
    """Build and write `engine_path` and its `engine.json`; returns what `engine.json` holds."""
    import tensorrt as trt

    platform = current_platform()
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)) or parser.num_errors:
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise EngineBuildError(f"TensorRT {platform['tensorrt_version']} cannot parse {onnx_path}: {errors}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace_bytes)
    all_profiles = profiles(info)
    for shapes in all_profiles:
        profile = builder.create_optimization_profile()
        for name, (low, opt, high) in shapes.items():
            profile.set_shape(name, low, opt, high)
        config.add_optimization_profile(profile)
    started = time.monotonic()
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise EngineBuildError(
            f"TensorRT {platform['tensorrt_version']} failed to build {onnx_path} (see its log above); "
            "a larger workspace (--workspace-gb) sometimes helps"
        )
    engine_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = engine_path.with_suffix(".tmp")
    tmp.write_bytes(bytes(serialized))
    os.replace(tmp, engine_path)
    record = {
        **platform,
        "onnx": onnx_path.name,
        "max_batch_size": info.max_batch_size,
        "max_total_length": info.max_total_length,
        "profiles": [{k: [list(s) for s in v] for k, v in p.items()} for p in all_profiles],
        "build_seconds": round(time.monotonic() - started, 1),
    }
    (engine_path.parent / ENGINE_INFO).write_text(json.dumps(record, indent=2) + "\n")
    return record


def _read_info(folder: Path) -> dict[str, Any] | None:
    try:
        record: dict[str, Any] = json.loads((folder / ENGINE_INFO).read_text())
    except (FileNotFoundError, ValueError):
        return None
    return record if (folder / ENGINE_FILE).is_file() else None


def ensure_engine(model_dir: Path, info: ModelInfo, cache_dir: Path) -> Path:
    """The engine to load: the shipped one if it matches this GPU and TensorRT, else one
    rebuilt earlier into `cache_dir`, else a new build from the fp16 ONNX file (minutes,
    inside the endpoint's startup health-check timeout) instead of a crash."""
    platform = current_platform()
    reason = mismatch(_read_info(model_dir), platform)
    if reason is None:
        return model_dir / ENGINE_FILE
    if mismatch(_read_info(cache_dir), platform) is None:
        log.warning("shipped engine unusable (%s); using the engine rebuilt earlier in %s", reason, cache_dir)
        return cache_dir / ENGINE_FILE
    log.warning(
        "shipped engine unusable (%s): rebuilding from %s for TensorRT %s on compute capability %s",
        reason,
        ONNX_FP16,
        platform["tensorrt_version"],
        platform["compute_capability"],
    )
    build_engine(model_dir / ONNX_FP16, cache_dir / ENGINE_FILE, info)
    return cache_dir / ENGINE_FILE


class TensorRTBackend:
    """The fp16 engine, one execution context per profile; KV cache stays on the GPU."""

    name = "tensorrt"

    def __init__(self, model_dir: Path, info: ModelInfo, *, engine_cache: Path) -> None:
        import numpy as np
        import tensorrt as trt
        import torch

        self.info = info
        self._torch = torch
        self._rng = np.random.default_rng()
        path = ensure_engine(model_dir, info, engine_cache)
        self._logger = trt.Logger(trt.Logger.WARNING)
        self.engine = trt.Runtime(self._logger).deserialize_cuda_engine(path.read_bytes())
        if self.engine is None:
            raise EngineBuildError(f"TensorRT could not deserialize {path}; delete it to force a rebuild")
        self.stream = torch.cuda.Stream()  # type: ignore[no-untyped-call]
        self.contexts = []
        for index in (CONTEXT, GENERATION):
            context = self.engine.create_execution_context()
            context.set_optimization_profile_async(index, self.stream.cuda_stream)
            self.contexts.append(context)
        self._inputs = input_names(info.n_layer)
        self._outputs = output_names(info.n_layer)
        # Empty past tensors still need a valid device address.
        self._placeholder = torch.zeros(1, dtype=torch.float16, device="cuda")

    def forward(
        self, input_ids: IntArray, attention_mask: IntArray, position_ids: IntArray, past: Any | None
    ) -> tuple[FloatArray, Any]:
        torch = self._torch
        batch, seq = input_ids.shape
        context = self.contexts[CONTEXT if past is None else GENERATION]
        if past is None:
            empty = torch.empty((batch, self.info.n_head, 0, self.info.head_dim), dtype=torch.float16, device="cuda")
            past = [empty] * (2 * self.info.n_layer)
        # Every allocation and copy on the engine's stream: no implicit sync with the default one.
        with torch.cuda.stream(self.stream):
            feeds = [
                torch.from_numpy(input_ids).cuda(),
                torch.from_numpy(attention_mask).cuda(),
                torch.from_numpy(position_ids).cuda(),
                *past,
            ]
            for name, tensor in zip(self._inputs, feeds, strict=True):
                context.set_input_shape(name, tuple(tensor.shape))
                address = tensor.data_ptr() if tensor.numel() else self._placeholder.data_ptr()
                context.set_tensor_address(name, address)
            total = attention_mask.shape[1]
            shape = (batch, self.info.n_head, total, self.info.head_dim)
            logits = torch.empty((batch, self.info.vocab_size), dtype=torch.float32, device="cuda")
            present = [torch.empty(shape, dtype=torch.float16, device="cuda") for _ in range(2 * self.info.n_layer)]
            for name, tensor in zip(self._outputs, [logits, *present], strict=True):
                context.set_tensor_address(name, tensor.data_ptr())
            if not context.execute_async_v3(self.stream.cuda_stream):
                raise RuntimeError(f"TensorRT execution failed for batch {batch}, {seq} tokens, {total} positions")
        self.stream.synchronize()
        return logits.cpu().numpy(), present

    def generate(
        self, prompts: Sequence[Sequence[int]], params: Sequence[SamplingParams], stop: StopCheck | None = None
    ) -> list[Completion]:
        return decode_loop(self, prompts, params, eos_token_id=self.info.eos_token_id, rng=self._rng, stop=stop)
