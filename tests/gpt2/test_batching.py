"""One bad row never fails the other requests of its batch: the batcher runs a batch that
raises again job by job, and token choice cannot turn odd logits into an exception."""

from __future__ import annotations

import http.client
import json
import socketserver
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import numpy as np
import pytest

from serving.gpt2.batching import DynamicBatcher, GenerationFailed, Job
from serving.gpt2.generation import Backend, Completion, ModelInfo, SamplingParams, StopCheck, choose_tokens

POISON = [666]


class FakeBackend:
    """Echoes each prompt; any batch that holds the POISON prompt raises, as a backend does
    when one row's numbers go wrong."""

    name = "fake"
    info = ModelInfo(model="fake", n_layer=1, n_head=1, head_dim=1, vocab_size=1000, n_positions=64, eos_token_id=0,
                     max_batch_size=8, max_total_length=64, default_max_new_tokens=2)  # fmt: skip

    def __init__(self) -> None:
        self.calls: list[list[list[int]]] = []

    def generate(
        self, prompts: Sequence[Sequence[int]], params: Sequence[SamplingParams], stop: StopCheck | None = None
    ) -> list[Completion]:
        self.calls.append([list(p) for p in prompts])
        if POISON in self.calls[-1]:
            raise ValueError("Probabilities contain NaN")
        return [Completion(tokens=list(p)) for p in prompts]


@pytest.fixture(name="batcher")
def batcher_fixture() -> Iterator[tuple[DynamicBatcher, FakeBackend]]:
    backend = FakeBackend()
    # A long queue delay: jobs submitted together always share one batch.
    batcher = DynamicBatcher(backend, max_batch_size=8, max_queue_delay_s=0.3, max_queue_rows=64, max_total_length=64)
    yield batcher, backend
    batcher.stop()


def job(*prompts: list[int]) -> Job:
    return Job(
        prompts=list(prompts),
        params=[SamplingParams(max_new_tokens=2)] * len(prompts),
        deadline=float("inf"),
    )


def test_a_failing_job_fails_alone(batcher: tuple[DynamicBatcher, FakeBackend]) -> None:
    dyn, backend = batcher
    good_a, bad, good_b = job([1], [2]), job(POISON), job([3])
    futures = [dyn.submit(j) for j in (good_a, bad, good_b)]
    a, b = futures[0].result(timeout=10), futures[2].result(timeout=10)
    assert [c.tokens for c in a.completions] == [[1], [2]] and a.batch_rows == 2
    assert [c.tokens for c in b.completions] == [[3]] and b.batch_rows == 1
    with pytest.raises(GenerationFailed, match=r"generating 1 completion\(s\) failed: ValueError") as caught:
        futures[1].result(timeout=10)
    assert isinstance(caught.value.__cause__, ValueError)
    # one batch of all four rows, then each job alone
    assert backend.calls == [[[1], [2], POISON, [3]], [[1], [2]], [POISON], [[3]]]
    # and the batcher still runs
    assert dyn.submit(job([4])).result(timeout=10).completions[0].tokens == [4]


def test_a_lone_failing_job_is_not_run_twice(batcher: tuple[DynamicBatcher, FakeBackend]) -> None:
    dyn, backend = batcher
    with pytest.raises(GenerationFailed):
        dyn.submit(job(POISON)).result(timeout=10)
    assert backend.calls == [[POISON]]


def sampled(n: int, **given: Any) -> list[SamplingParams]:
    return [SamplingParams(max_new_tokens=1, do_sample=True, **given)] * n


def test_tiny_temperature_over_large_logits_is_the_argmax() -> None:
    """1e-320 once made logits / T overflow to inf - inf = NaN; the validator now refuses it,
    and token choice stays finite even when asked directly."""
    rng = np.random.default_rng(0)
    logits = np.array([[3e4, 2e4, -1e4, 2.9e4]] * 50, dtype=np.float32)
    for temperature in (1e-320, 1e-3, 0.01):
        assert set(choose_tokens(logits, sampled(50, temperature=temperature), rng).tolist()) == {0}
    # ties at the top share the draw
    tied = np.array([[5.0, 5.0, -1.0]] * 200, dtype=np.float32)
    assert set(choose_tokens(tied, sampled(200, temperature=1e-320), rng).tolist()) == {0, 1}


def test_non_finite_row_falls_back_to_greedy_alone() -> None:
    rng = np.random.default_rng(0)
    logits = np.array(
        [
            [0.0, np.nan, 2.0, 1.0],  # NaN: argmax of the rest
            [0.0, np.inf, 2.0, 1.0],  # inf - inf would be NaN
            [np.nan] * 4,  # nothing usable: token 0, no exception
            [0.0, 0.0, 0.0, 0.0],  # a healthy row keeps sampling
        ],
        dtype=np.float32,
    )
    rows = np.repeat(logits, 100, axis=0)
    chosen = choose_tokens(rows, sampled(400), rng).reshape(4, 100)
    assert set(chosen[0].tolist()) == {2}
    assert set(chosen[1].tolist()) == {1}
    assert set(chosen[2].tolist()) == {0}
    assert set(chosen[3].tolist()) == {0, 1, 2, 3}
    # greedy rows never pick a NaN either
    greedy = choose_tokens(logits[:1], [SamplingParams(max_new_tokens=1)], rng)
    assert greedy.tolist() == [2]


# -- over HTTP: the real predictor and ONNX Runtime, one request's rows break the backend ---------


class PoisonedBackend:
    """The real backend, except that a batch holding `poison` raises."""

    def __init__(self, inner: Backend, poison: list[int]) -> None:
        self.inner, self.poison = inner, poison
        self.name, self.info = inner.name, inner.info
        self.batches: list[int] = []

    def generate(
        self, prompts: Sequence[Sequence[int]], params: Sequence[SamplingParams], stop: StopCheck | None = None
    ) -> list[Completion]:
        self.batches.append(len(prompts))
        if any(list(p) == self.poison for p in prompts):
            raise ValueError("Probabilities contain NaN")
        return self.inner.generate(prompts, params, stop)


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def post(port: int, payload: Any) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", "/invocations", body=json.dumps(payload), headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.getheader("Content-Type") == "application/json"
        return response.status, response.read()
    finally:
        conn.close()


def test_one_failing_request_over_http_fails_only_itself(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from serving.gpt2 import backends
    from serving.gpt2.generation import TOKENIZER_DIR
    from serving.gpt2.predictor import App, Predictor, Tokenizer
    from serving.gpt2.settings import ServerSettings

    poison = Tokenizer(model_dir / TOKENIZER_DIR).encode("poison pill")
    made: list[PoisonedBackend] = []
    real_create = backends.create_backend

    def create(name: str, path: Path, info: ModelInfo, **kwargs: Any) -> Backend:
        made.append(PoisonedBackend(real_create(name, path, info, **kwargs), poison))
        return made[-1]

    monkeypatch.setattr(backends, "create_backend", create)
    settings = ServerSettings(model_dir=model_dir, backend="onnxruntime", threads=1, max_queue_delay_us=300_000)
    predictor = Predictor(settings)
    predictor.load()
    httpd = make_server("127.0.0.1", 0, App(predictor), server_class=_ThreadingServer, handler_class=_QuietHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    port = httpd.server_address[1]
    try:
        prompts = ["amazon", "poison pill", "neural network", "lithium battery"]
        request = {"parameters": {"max_new_tokens": 5}}
        alone = {p: post(port, {"input": p, **request}) for p in prompts if p != "poison pill"}
        made[0].batches.clear()
        barrier = threading.Barrier(len(prompts))

        def call(prompt: str) -> tuple[int, bytes]:
            barrier.wait()
            return post(port, {"input": prompt, **request})

        with ThreadPoolExecutor(len(prompts)) as pool:
            results = dict(zip(prompts, pool.map(call, prompts), strict=True))
        assert made[0].batches[0] == len(prompts), f"the four requests were not batched: {made[0].batches}"
        status, raw = results.pop("poison pill")
        assert status == 500
        error = json.loads(raw)["error"]
        assert error["code"] == "generation_failed" and "ValueError" in error["message"]
        assert "Traceback" not in raw.decode() and "Probabilities" not in raw.decode()
        for prompt, (status, raw) in results.items():
            assert status == 200, raw
            assert json.loads(raw)["outputs"] == json.loads(alone[prompt][1])["outputs"]
        assert post(port, {"input": "amazon", **request})[0] == 200
    finally:
        httpd.shutdown()
        httpd.server_close()
        assert predictor.batcher is not None
        predictor.batcher.stop()


class HeldBackend(FakeBackend):
    """A backend whose first batch runs until the test lets it end (`release`); `started` is set
    once it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.started, self.release = threading.Event(), threading.Event()

    def generate(
        self, prompts: Sequence[Sequence[int]], params: Sequence[SamplingParams], stop: StopCheck | None = None
    ) -> list[Completion]:
        self.started.set()
        self.release.wait(60)
        return super().generate(prompts, params, stop)


@pytest.mark.timing
def test_a_busy_server_waits_for_the_callers_of_the_batch_that_just_finished() -> None:
    """A job queued during a batch waits its delay from the end of that batch, so the caller
    whose answer just went out (and who asks again at once) joins it: steady load keeps full
    batches instead of two half batches taking turns.

    Timing: the follow-up must come within the queue delay (1 s) of the batch's end. Its caller
    submits it as its answer comes: measured on the 2-core dev host, a batch's end to its caller's
    next submit took under 0.1 ms (20 tries beside a running `make test`, and with two CPU
    burners added); 1 s is 10 000 times that. The rest is an order: the batch runs until the
    queued job's own delay has passed (a sleep longer than it: a lower bound)."""
    backend = HeldBackend()
    dyn = DynamicBatcher(backend, max_batch_size=8, max_queue_delay_s=1.0, max_queue_rows=64, max_total_length=64)
    try:
        first = dyn.submit(job([1]))
        assert backend.started.wait(60)  # the first batch is running now
        queued = dyn.submit(job([2]))
        time.sleep(1.2)  # its own delay from arrival runs out before the batch ends
        backend.release.set()
        first.result(timeout=60)
        follow_up = dyn.submit(job([3]))  # the first caller asks again at once
        assert queued.result(timeout=60).batch_rows == 2
        assert follow_up.result(timeout=60).batch_rows == 2
        assert backend.calls == [[[1]], [[2], [3]]]
    finally:
        backend.release.set()
        dyn.stop()
