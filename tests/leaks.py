"""The processes a test session started and left running (the session fails if there is one).

The session puts :data:`MARKER` in its environment, and every process a test starts inherits
it (local_aws/sagemaker/containers.py, which gives a container a fresh environment as SageMaker does,
passes this project's own ``LLM_INFERENCE_`` variables on). A process that carries this
session's marker and still runs when the session ends was left behind; the interpreter running
pytest and the jsii runtime that serves its AWS CDK calls are not.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil

MARKER = "LLM_INFERENCE_TEST_SESSION"


@dataclass(frozen=True)
class Process:
    pid: int
    ppid: int
    cmdline: str


def marked(session: str) -> list[Process]:
    """The live processes whose environment carries `session` as the marker, and those of the
    sessions they lead: a process that renames itself with setproctitle (vLLM's
    ``VLLM::EngineCore``) overwrites what /proc/PID/environ reads, but stays in the session of the
    container that started it (local_aws/sagemaker/containers.py starts each in a session of its own)."""
    stats: dict[int, tuple[int, int, str]] = {}
    carries = set()
    for process in psutil.process_iter():
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                continue  # exited, waiting to be reaped: holds nothing
            stats[process.pid] = (process.ppid(), os.getsid(process.pid), " ".join(process.cmdline()))
            if process.environ().get(MARKER) == session:
                carries.add(process.pid)
        except (psutil.Error, OSError):
            continue  # gone since the listing, or not ours to read
    return [
        Process(pid, ppid, cmdline)
        for pid, (ppid, leader, cmdline) in sorted(stats.items())
        if pid in carries or leader in carries
    ]


def left_running(session: str) -> list[Process]:
    """This session's processes, but this one and jsii's: the jsii runtime (``jsii-runtime.js``)
    runs its kernel in a child (``lib/program.js``), which ends with it."""
    me = os.getpid()
    processes = marked(session)
    jsii = {p.pid for p in processes if "jsii-runtime" in p.cmdline}
    jsii |= {p.pid for p in processes if p.ppid in jsii}
    return [p for p in processes if p.pid != me and p.pid not in jsii]
