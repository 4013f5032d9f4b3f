"""The local AWS's clock: what its services schedule on (CloudWatch evaluating its alarms,
SageMaker publishing its metrics, Application Auto Scaling's cooldowns), by default wall time, and
for tests a clock they can stop and move forward, so that nothing waits minutes.

A clock is wall time moved by an offset at a speed: ``Clock()`` is wall time (speed 1, what a
user of ``python -m local_aws`` gets, on AWS's own schedule); ``Clock(speed=0)`` stands still
until :meth:`Clock.advance` moves it; any other speed runs faster or slower than wall time (a
load test of seconds can span minutes of metrics). The jobs a clock is started with run at
each multiple of their interval since the epoch in the clock's time, in order, none skipped:
on a thread of the clock's while it moves by itself, and in the caller of :meth:`Clock.advance`
for the times it jumps over, each with the clock set to its time. One clock runs a process's
jobs at a time (moto's backends, which the jobs read, are the process's): the host's
(local_aws/host.py), which the services read and LocalAws starts with the services' schedule
(local_aws/schedule.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

log = logging.getLogger("local_aws.clock")

#: The finest interval a job may have (CloudWatch's high-resolution alarms run every 10 s).
RESOLUTION_S = 10
#: How often a wait on the clock looks at its condition while the clock stands still.
POLL_S = 0.2

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Job:
    """`run` with each multiple of `interval_s` seconds since the epoch, in the clock's time."""

    name: str
    interval_s: int
    run: Callable[[datetime], None]

    def __post_init__(self) -> None:
        if self.interval_s <= 0 or self.interval_s % RESOLUTION_S:
            raise ValueError(f"interval_s={self.interval_s}: a job runs every multiple of {RESOLUTION_S} s")


def _next_multiple(after: datetime, interval_s: int) -> datetime:
    """The first multiple of `interval_s` seconds since the epoch strictly after `after`."""
    elapsed = (after - EPOCH).total_seconds()
    return EPOCH + timedelta(seconds=(int(elapsed // interval_s) + 1) * interval_s)


class Clock:
    """Wall time moved by an offset, at `speed` times wall time (0: it stands still).

    :param speed: how many of the clock's seconds pass in a second of wall time.
    :param start: the clock's time now (default: wall time; a clock that stands still starts
        at the last whole minute, so that its periods are the minutes' and a test's first
        advance of a minute ends one).
    :param jobs: what it runs on its schedule (:meth:`start` may give others).
    """

    def __init__(self, *, speed: float = 1.0, start: datetime | None = None, jobs: Sequence[Job] = ()) -> None:
        if speed < 0:
            raise ValueError(f"speed={speed}: a clock does not run backwards")
        if start is None:
            start = datetime.now(UTC)
            if speed == 0:
                start = start.replace(second=0, microsecond=0)
        self._lock = threading.Condition()
        self._base = start.astimezone(UTC)
        self._wall = time.monotonic()
        self._speed = float(speed)
        # The jobs ran for every time up to here; one runner at a time.
        self._ran_until = self._base
        self._running = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._jobs = tuple(jobs)
        self._on_fault: Callable[[str, Exception], None] | None = None

    # --- time ----------------------------------------------------------------------------------

    def now(self) -> datetime:
        """The clock's time (aware, UTC)."""
        with self._lock:
            return self._now()

    def _now(self) -> datetime:
        return self._base + timedelta(seconds=(time.monotonic() - self._wall) * self._speed)

    @property
    def speed(self) -> float:
        return self._speed

    @speed.setter
    def speed(self, speed: float) -> None:
        if speed < 0:
            raise ValueError(f"speed={speed}: a clock does not run backwards")
        with self._lock:
            self._set(self._now())
            self._speed = float(speed)
            self._lock.notify_all()

    def _set(self, when: datetime) -> None:
        self._base, self._wall = when, time.monotonic()

    def advance(self, seconds: float) -> datetime:
        """Move the clock `seconds` forward, running in this thread every job due on the way
        (the clock set to each job's time while it runs); the clock's new time."""
        if seconds < 0:
            raise ValueError(f"seconds={seconds}: a clock does not run backwards")
        with self._running:
            with self._lock:
                target = self._now() + timedelta(seconds=seconds)
            self._run_due(until=target)
            with self._lock:
                self._set(max(target, self._now()))
                self._lock.notify_all()
                return self._base

    def sleep(self, seconds: float, *, until: Callable[[], bool] | None = None) -> bool:
        """Wait until the clock is `seconds` later, or `until()` is true (looked at every
        POLL_S of wall time); whether `until` ended the wait."""
        deadline = self.now() + timedelta(seconds=seconds)
        while True:
            if until is not None and until():
                return True
            with self._lock:
                now = self._now()
                if now >= deadline:
                    return False
                left = (deadline - now).total_seconds() / self._speed if self._speed else POLL_S
                self._lock.wait(min(POLL_S, left))

    # --- jobs ------------------------------------------------------------------------------------

    def start(
        self, jobs: Sequence[Job] | None = None, on_fault: Callable[[str, Exception], None] | None = None
    ) -> Clock:
        """Run the jobs (`jobs`, where given) as the clock moves by itself (a daemon thread), and
        for the times :meth:`advance` jumps over; a job's exception goes to `on_fault` (where,
        exception), and the other jobs and the clock go on (without it, it ends the clock's run)."""
        if jobs is not None:
            self._jobs = tuple(jobs)
        self._on_fault = on_fault
        if self._thread is None:
            self._stopping.clear()
            with self._lock:
                self._ran_until = self._now()
            self._thread = threading.Thread(target=self._drive, name="local-aws-clock", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stopping.set()
            with self._lock:
                self._lock.notify_all()
            thread.join(timeout=30)

    def _drive(self) -> None:
        while not self._stopping.is_set():
            with self._running:
                self._run_due(until=self.now())
            with self._lock:
                due = self._next_due(self._ran_until)
                now = self._now()
                if due is None:
                    self._lock.wait()
                elif due > now:
                    self._lock.wait((due - now).total_seconds() / self._speed if self._speed else None)

    def _run_due(self, until: datetime) -> None:
        """Every job due after the last run and at most `until`, in the order of their times."""
        while True:
            due = self._next_due(self._ran_until)
            if due is None or due > until:
                return
            with self._lock:
                if self._now() < due:
                    self._set(due)  # jumped over: the job sees its own time
            for job in self._jobs:
                if (due - EPOCH).total_seconds() % job.interval_s == 0:
                    try:
                        job.run(due)
                    except Exception as exc:  # the local AWS's own fault: kept, and the other jobs run
                        if self._on_fault is None:
                            raise
                        self._on_fault(f"clock job {job.name} at {due.isoformat()}", exc)
            self._ran_until = due

    def _next_due(self, after: datetime) -> datetime | None:
        return min((_next_multiple(after, job.interval_s) for job in self._jobs), default=None)
