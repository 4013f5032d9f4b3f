"""The session's leak check finds a process a test left running, and only its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import leaks

ROOT = Path(__file__).resolve().parents[1]


def test_a_process_with_the_sessions_marker_is_found_and_another_is_not() -> None:
    session = os.environ[leaks.MARKER]
    mine = subprocess.Popen(["sleep", "30"], start_new_session=True)
    other = subprocess.Popen(["sleep", "30"], env={"PATH": os.environ["PATH"]}, start_new_session=True)
    try:
        pids = {p.pid for p in leaks.left_running(session)}
        assert mine.pid in pids and other.pid not in pids
    finally:
        for process in (mine, other):
            process.kill()
            process.wait()
    assert mine.pid not in {p.pid for p in leaks.left_running(session)}


def test_the_jsii_runtime_and_its_kernel_are_not_leaks() -> None:
    """jsii's runtime serves this session's AWS CDK calls until the interpreter exits, and its
    kernel runs in a child whose command line does not say jsii-runtime (CI killed it)."""
    import aws_cdk

    aws_cdk.App()  # starts the runtime if no test has yet
    session = os.environ[leaks.MARKER]
    everything = leaks.marked(session)
    runtime = [p for p in everything if "jsii-runtime" in p.cmdline]
    kernels = [p for p in everything if p.ppid in {r.pid for r in runtime}]
    assert runtime and kernels
    left = {p.pid for p in leaks.left_running(session)}
    assert not left & {p.pid for p in runtime + kernels}


def test_a_process_that_wiped_its_environment_is_found_through_its_session() -> None:
    """A process that renames itself with setproctitle (vLLM's ``VLLM::EngineCore``) overwrites
    what /proc/PID/environ reads; it is still in the session of the marked process that started
    it. Here the child's environment is empty (``env -i``), which reads the same."""
    session = os.environ[leaks.MARKER]
    leader = subprocess.Popen(["bash", "-c", "env -i sleep 30 & wait"], start_new_session=True)
    try:
        for _ in range(100):
            wiped = [p for p in leaks.left_running(session) if p.ppid == leader.pid]
            if wiped:
                break
            time.sleep(0.05)
        assert [p.cmdline for p in wiped] == ["sleep 30"]
        environ = Path(f"/proc/{wiped[0].pid}/environ").read_bytes()
        assert leaks.MARKER.encode() not in environ  # found through its session, not its marker
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()


@pytest.mark.slow  # a pytest run of its own, on two workers: about 8 s
def test_a_process_left_on_a_worker_fails_the_run(tmp_path: Path) -> None:
    """`make test` runs on pytest-xdist workers, whose exit status xdist reports before their
    sessionfinish hooks run: a worker's leak reaches the controller (tests/conftest.py), which
    fails the run; the process is ended either way."""
    (tmp_path / "test_leak.py").write_text(
        "import subprocess\n\n\ndef test_leaves_a_process():\n"
        "    subprocess.Popen(['sleep', '37'], start_new_session=True)\n"
    )
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-n", "2", "-p", "no:cacheprovider",
         "-q", str(tmp_path / "test_leak.py")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        # Not this run's options or worker's identity (PYTEST_ADDOPTS, PYTEST_XDIST_WORKER...).
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},
    )  # fmt: skip
    assert ran.returncode == 1, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "1 passed" in ran.stdout and "still running: pid" in ran.stderr, ran.stderr[-2000:]
    assert subprocess.run(["pgrep", "-f", "sleep 37"], capture_output=True).returncode == 1
