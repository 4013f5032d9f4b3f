"""CPU burners for ``pytest --stress`` (`make test-stress`): one process per core, each spinning
on sha256 at the niceness pytest runs at, so that the tests run on a host whose every core is
taken, as a shared CI machine or two workers deploying vLLM make it (issue 37).

The burners are one process group of their own (a leader that forks the others), ended with one
``killpg`` before the session checks for processes left running (tests/leaks.py: they carry the
session's marker like any process a test starts, so a burner that survived would fail the run).
Each burner also ends by itself once pytest is gone, so that a killed pytest leaves no core
spinning.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import psutil

#: What each burner runs: the leader forks the others, then every one spins until the process
#: that started it (pytest, argv[2]) is gone.
BURN = """
import hashlib, os, sys
count, owner = int(sys.argv[1]), int(sys.argv[2])
for _ in range(count - 1):
    if os.fork() == 0:
        break
block = b"x" * 4096
while True:
    for _ in range(20_000):
        hashlib.sha256(block).digest()
    try:
        os.kill(owner, 0)
    except ProcessLookupError:
        sys.exit(0)
"""


class Burners:
    """`count` CPU-bound processes (default: one per core) in a process group of their own."""

    def __init__(self, count: int | None = None) -> None:
        self.count = count or os.cpu_count() or 1
        self.leader: subprocess.Popen[bytes] | None = None

    def start(self) -> Burners:
        self.leader = subprocess.Popen(
            [sys.executable, "-c", BURN, str(self.count), str(os.getpid())],
            start_new_session=True,  # a group of their own: one killpg ends them all
            stdin=subprocess.DEVNULL,
        )
        return self

    def pids(self) -> list[int]:
        """The burners now running (the leader's process group)."""
        if self.leader is None:
            return []
        group = self.leader.pid
        found = []
        for process in psutil.process_iter(["pid", "status"]):
            with contextlib.suppress(psutil.Error, OSError):
                if process.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(process.info["pid"]) == group:
                    found.append(process.info["pid"])
        return found

    def stop(self) -> None:
        """SIGKILL to the whole group, and wait until none of it runs (at most 10 s: killed
        processes end within milliseconds)."""
        if self.leader is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.leader.pid, signal.SIGKILL)
        self.leader.wait()
        deadline = time.monotonic() + 10  # clock: how long to wait for killed processes to be reaped, no bound
        while self.pids() and time.monotonic() < deadline:  # clock: the same wait
            time.sleep(0.05)
        self.leader = None

    def __enter__(self) -> Burners:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
