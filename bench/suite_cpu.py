"""Where `make test`'s CPU goes, per kind of process: the suite is CPU-bound on 2 cores (four
workers, load average 6-9), so its wall time follows the CPU it burns, wherever it burns it: in
the pytest workers, in the containers the local AWS runs, in the CDK CLI and jsii's Node.js
kernel, in the builds.

    python -m bench.suite_cpu make test        # a table on stdout when the command ends

Every 0.3 s it reads each process's CPU time (utime + stime, /proc/PID/stat) and keeps the
largest seen per process (pid and start time); a process that lives less than a sample's
interval is missed, which is why the totals are a floor. The kernel's threads and the processes
that were running before the command are left out. Where a kind's CPU is large, a profile of
that kind says why (``py-spy record --subprocesses``, as for issue 37).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

#: (kind, pattern over the command line): the first that matches names the process's kind.
KINDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern))
    for kind, pattern in (
        ("compiler (torch's inductor)", r"cc1plus|/usr/bin/ld |\bg\+\+ "),
        ("jsii kernel (Node.js: synthesis)", r"node .*(--preserve-symlinks \S*/lib|jsii-runtime)"),
        ("CDK CLI (Node.js)", r"node\S* \S*cdk\b"),
        ("Lambda runtime (Node.js)", r"bootstrap\.cjs"),
        ("vLLM container", r"\.venv-vllm/|VLLM::"),
        ("Hugging Face toolkit container", r"\.venv-hf/|^java .*model_server"),
        ("LMI container", r"\.venv-lmi/|lmi_entrypoint|lmi_driver"),
        ("GPT-2 container", r"gunicorn|serving/gpt2/serve|^nginx"),
        ("artifacts builder", r"-m artifacts_builder"),
        ("pytest worker", r"exec\(eval\(sys\.stdin|xdist"),
        ("mypy", r"/mypy\b"),
        ("pip, uv (installs)", r"-m pip |/uv |/pip "),
        ("CDK app (python app.py)", r"\bapp\.py\b"),
        ("pytest (controller, inner runs)", r"pytest"),
    )
)


@dataclass
class Seen:
    command: str
    cpu_s: float


def kind_of(command: str) -> str:
    for kind, pattern in KINDS:
        if pattern.search(command):
            return kind
    return "other"


def _stat(pid: str, tick: int) -> tuple[str, float] | None:
    """(start time, CPU seconds) of a process, None if it is gone or is a kernel thread."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    if int(fields[6]) & 0x00200000:  # PF_KTHREAD in the flags (field 9): a kernel thread
        return None
    return fields[19], (int(fields[11]) + int(fields[12])) / tick


def _command(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def sample(seen: dict[str, Seen], before: set[str], tick: int) -> None:
    """One pass over /proc: each process's CPU so far, kept per pid and start time."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        stat = _stat(pid, tick)
        if stat is None:
            continue
        key = f"{pid}:{stat[0]}"
        if key in before:
            continue
        if key in seen:
            seen[key].cpu_s = max(seen[key].cpu_s, stat[1])
        elif command := _command(pid):
            seen[key] = Seen(command, stat[1])


def running(tick: int) -> set[str]:
    keys = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit() and (stat := _stat(pid, tick)) is not None:
            keys.add(f"{pid}:{stat[0]}")
    return keys


def by_kind(seen: Iterable[Seen]) -> dict[str, tuple[float, int]]:
    """CPU seconds and process count per kind."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for process in seen:
        row = totals[kind_of(process.command)]
        row[0] += process.cpu_s
        row[1] += 1
    return {kind: (cpu, int(count)) for kind, (cpu, count) in totals.items()}


def table(totals: dict[str, tuple[float, int]], wall_s: float, cores: int) -> Iterator[str]:
    everything = sum(cpu for cpu, _ in totals.values())
    yield "| kind | CPU s | processes | share |"
    yield "|---|---:|---:|---:|"
    for kind, (cpu, count) in sorted(totals.items(), key=lambda item: -item[1][0]):
        yield f"| {kind} | {cpu:.0f} | {count} | {cpu / everything:.0%} |"
    yield f"| **all** | {everything:.0f} | {sum(n for _, n in totals.values())} | |"
    yield ""
    yield f"{wall_s:.0f} s of wall time on {cores} cores: {everything / max(wall_s * cores, 1e-9):.0%} of them busy."


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    tick = os.sysconf("SC_CLK_TCK")
    before = running(tick)
    seen: dict[str, Seen] = {}
    done = threading.Event()

    def sampler() -> None:
        while not done.wait(0.3):
            sample(seen, before, tick)

    thread = threading.Thread(target=sampler, daemon=True)
    started = time.monotonic()
    thread.start()
    code = subprocess.call(command)
    done.set()
    thread.join()
    sample(seen, before, tick)
    wall_s = time.monotonic() - started
    print("\n".join(table(by_kind(seen.values()), wall_s, os.cpu_count() or 1)))
    return code


if __name__ == "__main__":
    sys.exit(main())
