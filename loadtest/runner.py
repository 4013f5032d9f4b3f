"""Closed-loop load: `concurrency` clients, each sending its next request as soon as the last one
is answered, for `seconds`; requests in flight at the deadline are waited for and counted."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from loadtest.invokers import Invoker, InvokerFactory, StreamTiming
from loadtest.stats import classify, error_message, latency_summary, summary


@dataclass
class Recorder:
    """What one client thread saw (its own lists: no lock between clients)."""

    latencies_s: list[float] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    #: Of the successful streamed requests: when their tokens arrived.
    streams: list[StreamTiming] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.latencies_s) + len(self.errors)


@dataclass
class LevelRun:
    concurrency: int
    seconds: float
    started_at: datetime
    ended_at: datetime
    elapsed_s: float
    recorders: list[Recorder]
    interrupted: bool = False

    def summary(self) -> dict[str, Any]:
        """The level's figures. QPS is requests over the elapsed time, which runs from the first
        request to the last answer, so that QPS x elapsed_s is the request count."""
        latencies = [s for r in self.recorders for s in r.latencies_s]
        errors = [e for r in self.recorders for e in r.errors]
        requests = len(latencies) + len(errors)
        examples: dict[str, str] = {}
        for kind, message in errors:
            examples.setdefault(kind, message)
        return {
            "concurrency": self.concurrency,
            "seconds": self.seconds,
            "started_at": _iso(self.started_at),
            "ended_at": _iso(self.ended_at),
            "elapsed_s": self.elapsed_s,
            "requests": requests,
            "successes": len(latencies),
            "errors": dict(Counter(kind for kind, _ in errors).most_common()),
            "error_examples": examples,
            "qps": requests / self.elapsed_s if self.elapsed_s > 0 else 0.0,
            # Of the successful requests: a failure's latency is the error path's, not the model's.
            "latency_ms": latency_summary(latencies),
            "stream": self._stream_summary(),
            "interrupted": self.interrupted,
        }

    def _stream_summary(self) -> dict[str, Any] | None:
        """Time to first token, time between tokens (over every gap of every request), tokens per
        second of each request (its tokens over its duration) and of the level (every token over
        the elapsed time); None when no request streamed."""
        streams = [s for r in self.recorders for s in r.streams]
        if not streams:
            return None
        tokens = sum(len(s.token_times_s) for s in streams)
        return {
            "requests": len(streams),
            "tokens": tokens,
            "time_to_first_token_ms": latency_summary(
                [s.first_token_s for s in streams if s.first_token_s is not None]
            ),
            "time_between_tokens_ms": latency_summary([gap for s in streams for gap in s.gaps_s]),
            "tokens_per_s_per_request": summary(
                [len(s.token_times_s) / s.duration_s for s in streams if s.duration_s > 0]
            ),
            "tokens_per_s": tokens / self.elapsed_s if self.elapsed_s > 0 else 0.0,
        }


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


#: What a level is timed on: seconds (a test gives a clock it controls).
Clock = Callable[[], float]


def _client(invoker: Invoker, recorder: Recorder, deadline: float, stop: threading.Event, clock: Clock) -> None:
    while not stop.is_set() and clock() < deadline:
        started = clock()
        try:
            timing = invoker()
        except Exception as exc:  # every failure is a data point of the level, whatever it is
            recorder.errors.append((classify(exc), error_message(exc)))
        else:
            recorder.latencies_s.append(clock() - started)
            if timing is not None:
                recorder.streams.append(timing)


Progress = Callable[[int, float, list[Recorder]], None]


def run_level(
    factory: InvokerFactory,
    concurrency: int,
    seconds: float,
    progress: Progress | None = None,
    clock: Clock = time.perf_counter,
) -> LevelRun:
    """Run one level, timed on `clock`. Ctrl-C stops the clients after their current request and
    marks the level interrupted (the caller runs no further level)."""
    invokers = [factory() for _ in range(concurrency)]
    recorders = [Recorder() for _ in range(concurrency)]
    stop = threading.Event()
    started_at = datetime.now(UTC)
    started = clock()
    deadline = started + seconds
    threads = [
        threading.Thread(
            target=_client, args=(invoker, recorder, deadline, stop, clock), name=f"client-{i}", daemon=True
        )
        for i, (invoker, recorder) in enumerate(zip(invokers, recorders, strict=True))
    ]
    for thread in threads:
        thread.start()
    interrupted = False
    try:
        _watch(threads, started, recorders, concurrency, progress, clock)
    except KeyboardInterrupt:
        interrupted = True
        stop.set()
        for thread in threads:
            thread.join()
    elapsed = clock() - started
    return LevelRun(concurrency, seconds, started_at, datetime.now(UTC), elapsed, recorders, interrupted)


def _watch(
    threads: list[threading.Thread],
    started: float,
    recorders: list[Recorder],
    concurrency: int,
    progress: Progress | None,
    clock: Clock,
) -> None:
    """Wait for the clients, reporting progress once a second."""
    next_tick = started + 1.0
    for thread in threads:
        while thread.is_alive():
            thread.join(timeout=max(0.0, next_tick - clock()))
            if clock() >= next_tick:
                if progress is not None:
                    progress(concurrency, clock() - started, recorders)
                next_tick += 1.0


def warm_up(factory: InvokerFactory, requests: int) -> None:
    """Requests that are not counted: the first ones of a fresh client or container pay for
    connections and lazy initialization. Their errors show in the level that follows."""
    invoker = factory()
    for _ in range(requests):
        try:
            invoker()
        except Exception:  # noqa: S112 (counted by the levels, not here)
            continue


class ProgressLine:
    """A line a second on a terminal; nothing on a pipe or a file (the caller prints one line
    per level there), so that logs stay short."""

    def __init__(self, stream: TextIO, seconds: float) -> None:
        self.stream = stream
        self.seconds = seconds
        self.enabled = stream.isatty()

    def __call__(self, concurrency: int, elapsed: float, recorders: list[Recorder]) -> None:
        if not self.enabled:
            return
        requests = sum(r.count for r in recorders)
        errors = sum(len(r.errors) for r in recorders)
        self.stream.write(
            f"  c={concurrency:<4} {min(elapsed, self.seconds):5.0f}/{self.seconds:.0f} s  requests {requests:<7} "
            f"errors {errors:<6} {requests / elapsed:8.2f} QPS\n"
        )
        self.stream.flush()


def level_line(level: dict[str, Any]) -> str:
    """One line that sums up a finished level."""
    latency = level["latency_ms"]
    timing = f"p50 {latency['p50']:.1f} ms, p99 {latency['p99']:.1f} ms" if latency else "no successful request"
    errors = ", ".join(f"{kind}: {n}" for kind, n in level["errors"].items()) or "none"
    count = f"{level['requests']} requests in {level['elapsed_s']:.1f} s"
    return f"c={level['concurrency']}: {count}, {level['qps']:.2f} QPS, {timing}; errors: {errors}"
