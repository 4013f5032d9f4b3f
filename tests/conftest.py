"""Fixtures shared by every test folder."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import leaks
from tests.tiers import TIERS

ROOT = Path(__file__).resolve().parents[1]

# jsii prints an end-of-life banner on every process start under Node 20; it says nothing
# about our code.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        tier = next((name for name, fixtures in TIERS.items() if used & fixtures), None)
        if tier is None and item.get_closest_marker("e2e") is not None:
            tier = "e2e"
        for marker in ("slow", "gpu", "tensorrt"):
            if tier is None and item.get_closest_marker(marker) is not None:
                tier = "slow"
        item.add_marker(tier or "fast")


@pytest.fixture(name="cdk_cli")
def cdk_cli_fixture() -> Path:
    """The pinned CDK CLI (node_modules/.bin/cdk); skipped where `npm ci` has not run."""
    if shutil.which("node") is None:
        pytest.skip("the CDK CLI needs Node.js")
    cdk = ROOT / "node_modules" / ".bin" / "cdk"
    if not cdk.exists():
        pytest.skip("run `npm ci` (make setup) for the pinned CDK CLI")
    return cdk


@pytest.fixture(name="builder_cli")
def builder_cli_fixture() -> list[str]:
    """The artifacts builder's documented command line, ``python -m artifacts_builder``."""
    return [sys.executable, "-m", "artifacts_builder"]


#: Every process a test starts inherits this marker (tests/leaks.py).
_SESSION = f"{os.getpid()}"
os.environ[leaks.MARKER] = _SESSION


def _local_aws_faults() -> list[str]:
    """The faults of the local AWS met since last asked (local_aws/faults.py), as lines; none
    where no test loaded it."""
    faults = sys.modules.get("local_aws.faults")
    if faults is None:
        return []
    return [f"{f.service} {f.where}: {f.error}\n{f.traceback}" for f in faults.FAULTS.take()]


#: Faults of the local AWS met between tests (in a background thread).
_LATE: list[str] = []


@pytest.fixture(autouse=True)
def no_local_aws_fault() -> Iterator[None]:
    """A test during which the local AWS failed on its own (an HTTP 500 of the emulator, which
    its log shows with the traceback) fails, whatever the test asserted."""
    _LATE.extend(_local_aws_faults())  # met after an earlier test looked: the session fails
    yield
    found = _local_aws_faults()
    if found:
        pytest.fail("the local AWS failed on its own during this test:\n" + "\n".join(found), pytrace=False)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if a process a test started is still running (then end it, so that the
    machine is clean either way), or if the local AWS failed on its own after the last test
    looked. Processes end asynchronously: give them a moment first."""
    late = _LATE + _local_aws_faults()
    if late:
        print("\nthe local AWS failed on its own:\n" + "\n".join(late), file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
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
