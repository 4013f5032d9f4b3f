"""The backends on the tiny model, for real: padding, sampling, agreement between backends,
and the choice of backend at start."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from serving.gpt2.backends import BackendUnavailable, OnnxRuntimeBackend, TorchEagerBackend, create_backend
from serving.gpt2.generation import ModelInfo, SamplingParams, choose_tokens, left_pad

PROMPTS = [[377, 494], [5, 6, 7, 8, 9, 10], [42]]


@pytest.fixture(scope="module")
def info(model_dir: Path) -> ModelInfo:
    return ModelInfo.load(model_dir)


@pytest.fixture(scope="module")
def ort(model_dir: Path, info: ModelInfo) -> OnnxRuntimeBackend:
    return OnnxRuntimeBackend(model_dir, info, threads=1)


def test_left_pad_keeps_last_tokens_aligned() -> None:
    ids, mask, pos = left_pad([[1, 2, 3], [4]], pad_id=0)
    assert ids.tolist() == [[1, 2, 3], [0, 0, 4]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1]]
    assert pos[:, -1].tolist() == [2, 0]


def test_batched_greedy_equals_each_prompt_alone(ort: OnnxRuntimeBackend) -> None:
    params = [SamplingParams(max_new_tokens=10)] * len(PROMPTS)
    together = [c.tokens for c in ort.generate(PROMPTS, params)]
    alone = [ort.generate([p], [SamplingParams(max_new_tokens=10)])[0].tokens for p in PROMPTS]
    assert together == alone


def test_torch_baseline_agrees_with_onnxruntime(model_dir: Path, info: ModelInfo, ort: OnnxRuntimeBackend) -> None:
    eager = TorchEagerBackend(model_dir, info, threads=1)
    params = [SamplingParams(max_new_tokens=8)] * len(PROMPTS)
    assert [c.tokens for c in eager.generate(PROMPTS, params)] == [c.tokens for c in ort.generate(PROMPTS, params)]


def test_per_row_limits_and_stop(ort: OnnxRuntimeBackend) -> None:
    params = [SamplingParams(max_new_tokens=3), SamplingParams(max_new_tokens=7)]
    out = ort.generate(PROMPTS[:2], params, stop=lambda row, tokens: row == 1 and len(tokens) == 2)
    assert len(out[0].tokens) == 3 and out[0].finish_reason == "length"
    assert len(out[1].tokens) == 2 and out[1].finish_reason == "stop"


def test_sampling_respects_top_k_and_top_p() -> None:
    rng = np.random.default_rng(0)
    logits = np.array([[0.0, 5.0, 4.9, -3.0]] * 200, dtype=np.float32)
    top1 = choose_tokens(logits, [SamplingParams(max_new_tokens=1, do_sample=True, top_k=1)] * 200, rng)
    assert set(top1.tolist()) == {1}
    top2 = choose_tokens(logits, [SamplingParams(max_new_tokens=1, do_sample=True, top_k=2)] * 200, rng)
    assert set(top2.tolist()) == {1, 2}
    nucleus = choose_tokens(logits, [SamplingParams(max_new_tokens=1, do_sample=True, top_p=0.3)] * 200, rng)
    assert set(nucleus.tolist()) == {1}
    hot = choose_tokens(logits, [SamplingParams(max_new_tokens=1, do_sample=True, temperature=100.0)] * 200, rng)
    assert len(set(hot.tolist())) == 4


def test_auto_picks_onnxruntime_without_a_gpu(model_dir: Path, info: ModelInfo, tmp_path: Path) -> None:
    backend = create_backend("auto", model_dir, info, engine_cache=tmp_path)
    assert backend.name == "onnxruntime"
    with pytest.raises(BackendUnavailable, match="needs a CUDA GPU"):
        create_backend("tensorrt", model_dir, info, engine_cache=tmp_path)
    with pytest.raises(BackendUnavailable, match="GPT2_BACKEND='tpu' is not a backend"):
        create_backend("tpu", model_dir, info, engine_cache=tmp_path)


@pytest.mark.gpu
def test_cuda_graph_backend_matches_onnxruntime(model_dir: Path, info: ModelInfo, ort: OnnxRuntimeBackend) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from serving.gpt2.backends import TorchCudaGraphBackend

    backend = TorchCudaGraphBackend(model_dir, info)
    params = [SamplingParams(max_new_tokens=8)] * len(PROMPTS)
    # fp16 may flip a near-tie; most rows must still agree with the fp32 reference.
    pairs = zip(backend.generate(PROMPTS, params), ort.generate(PROMPTS, params), strict=True)
    same = sum(a.tokens == b.tokens for a, b in pairs)
    assert same >= len(PROMPTS) - 1
