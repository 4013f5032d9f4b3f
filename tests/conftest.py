"""Fixtures shared by every test folder."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

import pytest

from tests import leaks

# jsii prints an end-of-life banner on every process start under Node 20; it says nothing
# about our code.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


#: Every process a test starts inherits this marker (tests/leaks.py).
_SESSION = f"{os.getpid()}"
os.environ[leaks.MARKER] = _SESSION


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if a process a test started is still running (then end it, so that the
    machine is clean either way). Processes end asynchronously: give them a moment first."""
    deadline = time.monotonic() + 5
    while (left := leaks.left_running(_SESSION)) and time.monotonic() < deadline:
        time.sleep(0.2)
    if not left:
        return
    print("\nprocesses started by this test session are still running:", file=sys.stderr)
    for process in left:
        print(f"  pid {process.pid}: {process.cmdline[:200]}", file=sys.stderr)
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
