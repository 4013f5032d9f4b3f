"""Fixtures shared by every test folder."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import leaks
from tests.stress import Burners
from tests.tiers import TIERS, xdist_group_of

ROOT = Path(__file__).resolve().parents[1]

# jsii prints an end-of-life banner on every process start under Node 20; it says nothing
# about our code.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


def xdist_group(item: pytest.Item) -> str:
    """The group of tests one pytest-xdist worker runs together (tests/tiers.py's xdist_group_of)."""
    return xdist_group_of(item.nodeid.split("::", 1)[0])


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--stress",
        action="store_true",
        help="run the tests with every core busy: one CPU-bound process per core (tests/stress.py), "
        "started before the first test and killed at the session's end (make test-stress)",
    )


#: The CPU burners of --stress, in the controlling process only (not in each xdist worker).
_BURNERS = Burners()


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--stress") and not hasattr(config, "workerinput"):
        _BURNERS.start()


def pytest_report_header(config: pytest.Config) -> str | None:
    if _BURNERS.leader is None:
        return None
    return f"--stress: {_BURNERS.count} CPU burners (process group {_BURNERS.leader.pid}), one per core"


def pytest_unconfigure(config: pytest.Config) -> None:
    _BURNERS.stop()  # where the session ended before pytest_sessionfinish (a usage error)


# First: pytest-xdist's worker reads the xdist_group markers in its own hook of the same name,
# which otherwise runs before this one and finds none, so that --dist loadgroup scheduled every
# test alone and each worker made the end-to-end session's local AWS, payloads and deploys again
# (tests/test_groups.py).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A tier comes from fixtures, `e2e`, `slow`, `gpu` and `tensorrt` only: `timing` (a test that
    # compares wall-clock durations, tests/test_timing.py) says nothing of what a test needs, and
    # a timing test has its tier like any other.
    # The marker is pytest-xdist's (--strict-markers refuses it where the plugin is left out).
    grouped = config.pluginmanager.hasplugin("xdist")
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        tier = next((name for name, fixtures in TIERS.items() if used & fixtures), None)
        if tier is None and item.get_closest_marker("e2e") is not None:
            tier = "e2e"
        for marker in ("slow", "gpu", "tensorrt"):
            if tier is None and item.get_closest_marker(marker) is not None:
                tier = "slow"
        item.add_marker(tier or "fast")
        if grouped:
            item.add_marker(pytest.mark.xdist_group(xdist_group(item)))


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


@pytest.fixture(scope="module")
def tiny_sources(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Each tiny causal language model's source folder (a hub snapshot's layout), made once a
    module: the llm builder's input (tests/llm/test_builder.py, the documented commands' offline
    runs in tests/test_doc_commands.py)."""
    from artifacts_builder.tiny import make_tiny_causal_lm

    made: dict[str, Path] = {}

    def source(kind: str) -> Path:
        if kind not in made:
            made[kind] = make_tiny_causal_lm(kind, tmp_path_factory.mktemp(f"source-{kind}"))
        return made[kind]

    return source


#: Every process a test starts inherits this marker (tests/leaks.py).
_SESSION = f"{os.getpid()}"
os.environ[leaks.MARKER] = _SESSION


def _local_aws_faults() -> list[str]:
    """The faults of the local AWS met since last asked (local_aws/faults.py, kept by the host in
    local_aws/host.py), as lines; none where no test loaded it."""
    host = sys.modules.get("local_aws.host")
    if host is None:
        return []
    return [f"{f.service} {f.where}: {f.error}\n{f.traceback}" for f in host.HOST.faults.take()]


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


#: What a pytest-xdist worker found at its end (the lines of session_problems), sent to the
#: controller in its workeroutput: xdist reports the worker's exit status before its
#: sessionfinish hooks run, so a worker's own failing of the session would be lost.
WORKER_PROBLEMS = "llm_inference_session_problems"
_FROM_WORKERS: list[str] = []


def session_problems() -> list[str]:
    """What fails this process's session though every test passed: the local AWS failing on its
    own after the last test looked, processes its tests started still running (ended here, so
    that the machine is clean either way). Processes end asynchronously: they get a moment."""
    problems = [f"the local AWS failed on its own:\n{fault}" for fault in _LATE + _local_aws_faults()]
    deadline = time.monotonic() + 5  # clock: the moment processes get to end, then they are killed
    while (left := leaks.left_running(_SESSION)) and time.monotonic() < deadline:  # clock: the same
        time.sleep(0.2)
    for process in left:
        problems.append(f"a process started by this test session is still running: pid {process.pid}: "
                        f"{process.cmdline[:200]}")  # fmt: skip
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
    return problems


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """A worker's session problems, kept for the controller's end (pytest-xdist's hook)."""
    _FROM_WORKERS.extend(getattr(node, "workeroutput", {}).get(WORKER_PROBLEMS, []))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The run fails on a session problem of this process or of any worker's. The burners of
    --stress are ended first: they carry the session's marker, and one left running fails the run."""
    _BURNERS.stop()
    problems = session_problems() + _FROM_WORKERS
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # a worker: the controller reports them
        workeroutput[WORKER_PROBLEMS] = problems
    elif problems:
        print("\n" + "\n".join(problems), file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
