"""The closed loop's accounting, against the stand-in runtime."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterator

import pytest

from loadtest.invokers import Invoker, InvokerFactory, StreamTiming, Target, client_config, sagemaker_invokers
from loadtest.request import Request
from loadtest.runner import ProgressLine, Recorder, level_line, run_level, warm_up
from tests.loadtest.helpers import Canned, CannedRuntime, environment, model_error, ok

REQUEST = Request(body=b'{"input": "amazon"}', content_type="application/json")


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., CannedRuntime]]:
    """Starts the stand-in runtime with the given answers and points boto3 at it through
    AWS_ENDPOINT_URL, as the load tester is pointed at a local AWS."""
    with contextlib.ExitStack() as stack:

        def start(*answers: Canned) -> CannedRuntime:
            canned = stack.enter_context(CannedRuntime(answers))
            for key, value in environment(canned.url).items():
                monkeypatch.setenv(key, value)
            return canned

        yield start


def factory(concurrency: int) -> InvokerFactory:
    return sagemaker_invokers(Target("e"), REQUEST, client_config(concurrency))


class WindowClock:
    """A level's clock that stands still at 0 until `done()`, then reads `seconds`: the level's
    window lasts until something happened, not for a time a busy host may fill with nothing."""

    def __init__(self, seconds: float, done: Callable[[], bool]) -> None:
        self.seconds, self.done = seconds, done

    def __call__(self) -> float:
        return self.seconds if self.done() else 0.0


def test_every_request_is_a_success_or_an_error_of_its_kind(serve: Callable[..., CannedRuntime]) -> None:
    runtime = serve(ok(), model_error(400), ok())
    # One answer in three is the container's 400: the kinds add up to what the server sent. The
    # window closes once the server has had two rounds of its three answers.
    clock = WindowClock(0.5, lambda: len(runtime.received) >= 6)
    run = run_level(factory(3), concurrency=3, seconds=0.5, clock=clock)
    sent = len(runtime.received)
    level = run.summary()
    assert level["requests"] == sent >= 6
    assert level["requests"] == level["successes"] + sum(level["errors"].values())
    assert set(level["errors"]) == {"ModelError 400"}
    # The server cycled through its answers: a third of them (to within one cycle) were errors.
    assert abs(level["errors"]["ModelError 400"] - sent / 3) <= 1
    assert level["qps"] * level["elapsed_s"] == pytest.approx(level["requests"])
    assert level["elapsed_s"] >= 0.5
    assert level["latency_ms"] is not None and level["latency_ms"]["max"] >= level["latency_ms"]["p50"]
    assert '{"error": "bad"}' in level["error_examples"]["ModelError 400"]
    assert "ModelError 400" in level_line(level)


def test_each_client_has_its_own_invoker(serve: Callable[..., CannedRuntime]) -> None:
    serve(ok())
    inner, calls = factory(4), []

    def counted() -> Invoker:
        invoker, slot = inner(), len(calls)
        calls.append(0)

        def call() -> StreamTiming | None:
            calls[slot] += 1
            return invoker()

        return call

    # The window closes once every client has called its invoker.
    clock = WindowClock(0.3, lambda: len(calls) == 4 and all(calls))
    run = run_level(counted, concurrency=4, seconds=0.3, clock=clock)
    assert len(run.recorders) == 4
    assert all(r.count > 0 for r in run.recorders), "every client sent requests"


def test_warm_up_sends_its_requests_whatever_they_answer(serve: Callable[..., CannedRuntime]) -> None:
    runtime = serve(model_error(500), ok())
    warm_up(factory(1), 4)
    assert len(runtime.received) == 4


def test_progress_is_a_line_a_second_on_a_terminal_only() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    recorder = Recorder(latencies_s=[0.1, 0.2], errors=[("throttling", "slow down")])
    pipe, terminal = io.StringIO(), Terminal()
    ProgressLine(pipe, 10)(4, 2.0, [recorder])
    ProgressLine(terminal, 10)(4, 2.0, [recorder])
    assert pipe.getvalue() == ""
    line = terminal.getvalue()
    assert line.count("\n") == 1 and "c=4" in line and "requests 3" in line and "errors 1" in line
    assert "1.50 QPS" in line
