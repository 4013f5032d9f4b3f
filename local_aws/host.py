"""The local AWS's process: what it holds beside its accounts' backends.

moto keeps each account's and region's resources in a backend (a ``BackendDict`` per service,
reset with moto's reset); the local AWS's services keep theirs the same way. What is left is
the host they run on, one per process as moto's backends are: the clock every service keeps
time and schedules by, the faults of the emulator itself that a test session reads, and each
service's *plane*: what it runs on this host for every account (the model containers of
SageMaker's endpoints, Lambda's function runtimes, CloudFormation's custom resources waiting
for their responses). A plane is made on first use by its own package (:meth:`Host.plane`), so
this module imports none of them. LocalAws starts and stops what the host runs
(local_aws/server.py); :data:`HOST` is the one object of the process that holds mutable state
outside a backend (tests/test_imports.py checks that no module holds any other).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime
from typing import TypeVar

from local_aws.clock import Clock, Job
from local_aws.faults import Faults

P = TypeVar("P")


class Host:
    """The clock, the faults and the services' planes of one process."""

    def __init__(self) -> None:
        #: The clock the services read (wall time until LocalAws starts one: :meth:`run_clock`).
        self.clock = Clock()
        self.faults = Faults()
        self._planes: dict[type, object] = {}
        self._lock = threading.Lock()

    def plane(self, kind: type[P]) -> P:
        """The process's one `kind` (made with ``kind()`` on first use)."""
        with self._lock:
            found = self._planes.get(kind)
            if found is None:
                found = self._planes[kind] = kind()
            return found  # type: ignore[return-value]

    def run_clock(self, clock: Clock, jobs: Sequence[Job]) -> None:
        """Make `clock` the one the services read and run `jobs` on (stopping the one before);
        a job's exception is a fault of the local AWS."""
        with self._lock:
            before, self.clock = self.clock, clock
        if before is not clock:
            before.stop()
        clock.start(jobs, on_fault=self._clock_fault)

    def _clock_fault(self, where: str, exc: Exception) -> None:
        self.faults.record("clock", where, exc)


#: The host of this process.
HOST = Host()


def now() -> datetime:
    """The local AWS's time now (aware, UTC)."""
    return HOST.clock.now()
