"""TensorRT code against a fake `tensorrt` module (the real one cannot be installed here)
and a fixed GPU description (there is no GPU): the calls the builder makes, the profiles,
and the rebuild of an engine that does not match the GPU or the TensorRT version."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from serving.gpt2 import trt_engine
from serving.gpt2.backends import OnnxRuntimeBackend
from serving.gpt2.generation import ENGINE_FILE, ENGINE_INFO, ONNX_FP16, ModelInfo, SamplingParams, input_names

PLATFORM = {"tensorrt_version": "10.8.0", "compute_capability": "8.6", "gpu": "NVIDIA A10G"}


class FakeTensorRT(types.ModuleType):
    """Records what is asked of it; shapes and flags follow the TensorRT 10 Python API."""

    # Complex on purpose: a stand-in of the TensorRT API, one nested class or function per call it fakes.
    def __init__(self, *, parse_errors: tuple[str, ...] = (), build_fails: bool = False) -> None:  # noqa: C901
        super().__init__("tensorrt")
        self.__version__ = PLATFORM["tensorrt_version"]
        self.calls: list[tuple[str, Any]] = []
        fake = self

        class Logger:
            WARNING = 2

            def __init__(self, level: int) -> None:
                fake.calls.append(("Logger", level))

        class NetworkDefinitionCreationFlag:
            STRONGLY_TYPED = 5

        class MemoryPoolType:
            WORKSPACE = 0

        class Parser:
            def __init__(self, network: object, logger: object) -> None:
                self.num_errors = len(parse_errors)

            def parse_from_file(self, path: str) -> bool:
                fake.calls.append(("parse_from_file", path))
                return not parse_errors

            def get_error(self, i: int) -> str:
                return parse_errors[i]

        class Profile:
            def __init__(self) -> None:
                self.shapes: dict[str, tuple[Any, ...]] = {}

            def set_shape(self, name: str, low: Any, opt: Any, high: Any) -> None:
                self.shapes[name] = (low, opt, high)

        class Config:
            def set_memory_pool_limit(self, pool: int, size: int) -> None:
                fake.calls.append(("workspace", size))

            def add_optimization_profile(self, profile: Profile) -> int:
                fake.calls.append(("profile", profile.shapes))
                return 0

        class Builder:
            def __init__(self, logger: object) -> None:
                pass

            def create_network(self, flags: int) -> object:
                fake.calls.append(("create_network", flags))
                return object()

            def create_builder_config(self) -> Config:
                return Config()

            def create_optimization_profile(self) -> Profile:
                return Profile()

            def build_serialized_network(self, network: object, config: Config) -> bytes | None:
                fake.calls.append(("build", None))
                return None if build_fails else b"serialized engine"

        self.Logger, self.Builder, self.OnnxParser = Logger, Builder, Parser
        self.NetworkDefinitionCreationFlag, self.MemoryPoolType = NetworkDefinitionCreationFlag, MemoryPoolType

    def called(self, name: str) -> list[Any]:
        return [arg for call, arg in self.calls if call == name]


@pytest.fixture
def fake_trt(monkeypatch: pytest.MonkeyPatch) -> FakeTensorRT:
    fake = FakeTensorRT()
    monkeypatch.setitem(sys.modules, "tensorrt", fake)
    monkeypatch.setattr(trt_engine, "current_platform", lambda: dict(PLATFORM))
    return fake


@pytest.fixture
def info(model_dir: Path) -> ModelInfo:
    return ModelInfo.load(model_dir)


def test_build_engine_uses_strong_typing_and_two_profiles(
    fake_trt: FakeTensorRT, info: ModelInfo, model_dir: Path, tmp_path: Path
) -> None:
    engine = tmp_path / ENGINE_FILE
    record = trt_engine.build_engine(model_dir / ONNX_FP16, engine, info, workspace_bytes=1 << 30)
    assert fake_trt.called("create_network") == [1 << 5]  # STRONGLY_TYPED: fp16 comes from the ONNX file
    assert fake_trt.called("parse_from_file") == [str(model_dir / ONNX_FP16)]
    assert fake_trt.called("workspace") == [1 << 30]
    context, generation = fake_trt.called("profile")
    b, t, h, d = info.max_batch_size, info.max_total_length, info.n_head, info.head_dim
    assert context["input_ids"] == ((1, 1), (b, t // 2), (b, t - 1))
    assert context["past_key_values.0.key"][2] == (b, h, 0, d)
    assert generation["input_ids"][2] == (b, 1)
    assert generation["past_key_values.0.value"] == ((1, h, 1, d), (b, h, t // 2, d), (b, h, t - 1, d))
    assert set(context) == set(generation) == set(input_names(info.n_layer))
    assert engine.read_bytes() == b"serialized engine"
    saved = json.loads((tmp_path / ENGINE_INFO).read_text())
    assert saved == record
    assert (saved["tensorrt_version"], saved["compute_capability"]) == ("10.8.0", "8.6")


def test_parse_errors_and_failed_builds_are_reported(
    monkeypatch: pytest.MonkeyPatch, info: ModelInfo, model_dir: Path, tmp_path: Path
) -> None:
    monkeypatch.setattr(trt_engine, "current_platform", lambda: dict(PLATFORM))
    monkeypatch.setitem(sys.modules, "tensorrt", FakeTensorRT(parse_errors=("Unsupported op: Foo",)))
    with pytest.raises(trt_engine.EngineBuildError, match=r"cannot parse .*model_fp16\.onnx: Unsupported op: Foo"):
        trt_engine.build_engine(model_dir / ONNX_FP16, tmp_path / ENGINE_FILE, info)
    monkeypatch.setitem(sys.modules, "tensorrt", FakeTensorRT(build_fails=True))
    with pytest.raises(trt_engine.EngineBuildError, match="failed to build"):
        trt_engine.build_engine(model_dir / ONNX_FP16, tmp_path / ENGINE_FILE, info)
    assert not (tmp_path / ENGINE_FILE).exists()


def _ship(folder: Path, model_dir: Path, **recorded: str) -> None:
    """A model folder as the builder leaves it, with an engine built on `recorded`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ONNX_FP16).write_bytes((model_dir / ONNX_FP16).read_bytes())
    (folder / ENGINE_FILE).write_bytes(b"engine from the build machine")
    (folder / ENGINE_INFO).write_text(json.dumps({**PLATFORM, **recorded}))


def test_matching_engine_is_used_as_shipped(
    fake_trt: FakeTensorRT, info: ModelInfo, model_dir: Path, tmp_path: Path
) -> None:
    _ship(tmp_path / "model", model_dir)
    assert trt_engine.ensure_engine(tmp_path / "model", info, tmp_path / "cache") == tmp_path / "model" / ENGINE_FILE
    assert fake_trt.called("build") == []


@pytest.mark.parametrize(
    ("recorded", "reason"),
    [
        ({"tensorrt_version": "10.3.0"}, "tensorrt_version '10.3.0'"),
        ({"compute_capability": "7.5"}, "compute_capability '7.5'"),
    ],
)
def test_mismatched_engine_is_rebuilt_not_fatal(
    fake_trt: FakeTensorRT, info: ModelInfo, model_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture,
    recorded: dict[str, str], reason: str,
) -> None:  # fmt: skip
    _ship(tmp_path / "model", model_dir, **recorded)
    cache = tmp_path / "cache"
    assert trt_engine.ensure_engine(tmp_path / "model", info, cache) == cache / ENGINE_FILE
    assert fake_trt.called("parse_from_file") == [str(tmp_path / "model" / ONNX_FP16)]
    assert reason in caplog.text and "rebuilding" in caplog.text
    # the next start (another worker, a restart) reuses the rebuilt engine
    fake_trt.calls.clear()
    assert trt_engine.ensure_engine(tmp_path / "model", info, cache) == cache / ENGINE_FILE
    assert fake_trt.called("build") == []


def test_no_shipped_engine_is_built_at_start(
    fake_trt: FakeTensorRT, info: ModelInfo, model_dir: Path, tmp_path: Path
) -> None:
    assert trt_engine.mismatch(None, PLATFORM) is not None
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / ONNX_FP16).write_bytes((model_dir / ONNX_FP16).read_bytes())
    assert trt_engine.ensure_engine(tmp_path / "model", info, tmp_path / "cache") == tmp_path / "cache" / ENGINE_FILE
    assert len(fake_trt.called("build")) == 1


def test_every_shape_the_server_runs_is_inside_a_profile(model_dir: Path, info: ModelInfo) -> None:
    """Drive the real decode loop (ONNX Runtime underneath) at the batcher's limits and check
    each forward call against the profile TensorRT would select for it."""
    context, generation = trt_engine.profiles(info)
    ort = OnnxRuntimeBackend(model_dir, info, threads=1, onnx_file=ONNX_FP16)  # TensorRT's graph
    seen: list[int] = []

    class Checked:
        def forward(self, ids: Any, mask: Any, pos: Any, past: Any) -> Any:
            profile = context if past is None else generation
            shapes = {"input_ids": ids.shape, "attention_mask": mask.shape, "position_ids": pos.shape}
            if past is not None:
                shapes.update(zip(input_names(info.n_layer)[3:], (p.shape for p in past), strict=True))
            for name, shape in shapes.items():
                low, _, high = profile[name]
                assert all(lo <= s <= hi for lo, s, hi in zip(low, shape, high, strict=True)), (name, shape, high)
            seen.append(mask.shape[1])
            return ort.forward(ids, mask, pos, past)

    longest_prompt = info.max_total_length - 2
    prompts = [[7] * longest_prompt] + [[5]] * (info.max_batch_size - 1)
    params = [SamplingParams(max_new_tokens=2)] * len(prompts)
    from serving.gpt2.generation import decode_loop

    decode_loop(Checked(), prompts, params, eos_token_id=-1, rng=np.random.default_rng(0))
    assert max(seen) == info.max_total_length - 1
