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


def _teacher_forced(backend: OnnxRuntimeBackend, prompts: list[list[int]], steps: list[list[int]]) -> np.ndarray:
    """Logits of a left-padded batch of `prompts`, then of each row's forced tokens, one a step."""
    ids, mask, pos = left_pad(prompts, pad_id=0)
    logits, past = backend.forward(ids, mask, pos, None)
    out = [logits]
    for tokens in steps:
        mask = np.concatenate([mask, np.ones((len(prompts), 1), dtype=np.int64)], axis=1)
        pos = pos[:, -1:] + 1
        logits, past = backend.forward(np.array([[t] for t in tokens]), mask, pos, past)
        out.append(logits)
    return np.stack(out, axis=1)


def test_cpu_graph_rows_of_a_batch_equal_each_row_alone(ort: OnnxRuntimeBackend) -> None:
    """The in-place graph right-pads rows of different lengths: each row's logits, at the prompt
    and at every step, are the ones it gets alone (fp32: to rounding)."""
    steps = [[11, 12, 13], [21, 22, 23], [31, 32, 33], [41, 42, 43]]
    together = _teacher_forced(ort, PROMPTS, steps)
    for row, prompt in enumerate(PROMPTS):
        alone = _teacher_forced(ort, [prompt], [[s[row]] for s in steps])
        np.testing.assert_allclose(together[row], alone[0], atol=1e-5)


def test_cpu_graph_updates_the_cache_in_place_and_grows_it(
    ort: OnnxRuntimeBackend, info: ModelInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids, mask, pos = left_pad(PROMPTS, pad_id=0)
    _, kv = ort.forward(ids, mask, pos, None)
    before = kv.buffers[0].copy()
    mask = np.concatenate([mask, np.ones((len(PROMPTS), 1), dtype=np.int64)], axis=1)
    _, after = ort.forward(np.array([[9]] * len(PROMPTS)), mask, pos[:, -1:] + 1, kv)
    assert after is kv  # the same buffers, written by the graph: no copy of the past
    lengths = [len(p) for p in PROMPTS]
    for row, length in enumerate(lengths):
        assert not np.array_equal(kv.buffers[0][row, :, length], before[row, :, length])  # the new key
        np.testing.assert_array_equal(kv.buffers[0][row, :, :length], before[row, :, :length])  # the past kept
    # A cache too small for the run grows, keeping what it held: the answers do not change.
    steps = [[11, 12, 13]] * (info.max_total_length - max(lengths) - 1)
    roomy = _teacher_forced(ort, PROMPTS, steps)
    monkeypatch.setattr(type(ort._shared), "GROWTH", 1)
    np.testing.assert_array_equal(_teacher_forced(ort, PROMPTS, steps), roomy)


def test_cpu_graph_refuses_what_it_cannot_run(ort: OnnxRuntimeBackend) -> None:
    ids, mask, pos = left_pad(PROMPTS, pad_id=0)
    with pytest.raises(ValueError, match="left padding"):
        ort.forward(ids, mask[:, ::-1].copy(), pos, None)
    _, kv = ort.forward(ids, mask, pos, None)
    with pytest.raises(ValueError, match="one token a step"):
        ort.forward(ids, np.ones((3, 12), dtype=np.int64), pos, kv)


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
