"""The session's leak check finds a process a test left running, and only its own."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests import leaks


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
