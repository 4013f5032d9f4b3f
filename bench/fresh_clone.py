"""A newcomer's first hour, timed: README's commands on a fresh clone with empty caches.

Clones this repository's HEAD into a new folder, gives pip, uv and npm caches of their own that
start empty (the Debian packages, pyenv's Pythons and the torch wheel on disk stay as the machine
has them), then runs, one after another and as README gives them:

1. ``make demo`` (set up, build the tiny artifacts, deploy, call and destroy the three stacks),
2. ``make test-fast`` (the fast tier, after that setup),
3. ``make test`` (the rest of the setup, lint, every test),

timing each and reading pytest's closing line. Targets (issue 37): ``make demo`` within 5 min,
``make test-fast`` under 60 s, ``make test`` within 15 min, setup included, on a 2-core machine.

    python -m bench.fresh_clone                          # about 25 minutes on 2 cores
    python -m bench.fresh_clone --repeat 3 --phases "make test"   # three fresh clones, one after another
    python -m bench.fresh_clone --keep                   # keep every clone (and its logs) afterwards

``--repeat N`` makes N fresh clones one after another, each with empty caches, and runs the
phases in each: a flake shows as one red run among green ones, so the runs go on after a failure.

Results: ``bench/results/fresh_clone.json`` and a Markdown table on stdout for
docs/BENCHMARKS.md. Each phase's full output is written in the clone's ``build/fresh-clone/``;
the clone is deleted after a run whose phases all passed unless ``--keep`` is given, and a failed
run's logs are always kept (in its clone, and copied to ``bench/results/fresh-clone-logs/``), since
they are the one thing to read next.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: (phase, command, target in seconds)
PHASES = (("make demo", ["make", "demo"], 300), ("make test-fast", ["make", "test-fast"], 60),
          ("make test", ["make", "test"], 900))  # fmt: skip
PHASE_NAMES = tuple(name for name, _, _ in PHASES)
PYTEST_SUMMARY = re.compile(r"^=* ?(\d+ (?:passed|failed).*) in [\d.]+s", re.MULTILINE)


def cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or "unknown"
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown")


def run_phase(name: str, command: list[str], clone: Path, env: dict[str, str], logs: Path) -> dict[str, Any]:
    log = logs / (name.replace(" ", "-") + ".log")
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    with log.open("w") as out:
        # Its own process group: an interrupted run (Ctrl-C, a timeout's SIGTERM) ends the whole
        # make and everything it started, as the tests require of themselves.
        proc = subprocess.Popen(
            command, cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = proc.wait()
        except BaseException:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
            raise
    seconds = time.monotonic() - started
    text = log.read_text(errors="replace")
    summary = PYTEST_SUMMARY.findall(text)
    return {
        # pytest's short summary: what to read first when a phase failed.
        "failed": re.findall(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", text, flags=re.MULTILINE),
        "phase": name,
        "command": " ".join(command),
        "exit_code": code,
        "seconds": round(seconds, 1),
        "pytest": summary[-1] if summary else None,
        "load_average_before": round(load_before, 2),
        "log": str(log),
    }


def fresh_clone_run(phases: tuple[tuple[str, list[str], int], ...], keep: bool, failed_logs: Path) -> dict[str, Any]:
    """One fresh clone of HEAD, the phases run in it in order (stopping at the first that fails,
    since the later ones build on its setup), its report returned."""
    work = Path(tempfile.mkdtemp(prefix="fresh-clone-"))
    # mkdtemp's 0700 would keep the unprivileged serve test (it runs the venv's Python as nobody)
    # out of the clone; a clone in a user's folder is readable.
    work.chmod(0o755)
    clone = work / "repo"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip
    logs = clone / "build" / "fresh-clone"
    logs.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTEST", "LLM_INFERENCE_"))}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if str(ROOT) not in p)
    env["PIP_CACHE_DIR"] = str(work / "pip-cache")
    env["UV_CACHE_DIR"] = str(work / "uv-cache")
    env["npm_config_cache"] = str(work / "npm-cache")
    env["MYPY_CACHE_DIR"] = str(clone / ".mypy_cache")
    results: list[dict[str, Any]] = []
    try:
        for name, command, target in phases:
            print(f"[fresh-clone] {name} ...", file=sys.stderr, flush=True)
            result = {**run_phase(name, command, clone, env, logs), "target_seconds": target}
            print(f"[fresh-clone] {name}: exit {result['exit_code']} in {result['seconds']:.0f} s "
                  f"({result['pytest'] or 'no pytest summary'})", file=sys.stderr, flush=True)  # fmt: skip
            for test in result["failed"]:
                print(f"[fresh-clone]   failed: {test}", file=sys.stderr, flush=True)
            results.append(result)
            if result["exit_code"] != 0:
                break
    finally:
        failed = any(r["exit_code"] != 0 for r in results) or len(results) < len(phases)
        if failed:
            # A failure's log is the one thing to read next: kept beside the results too, so that
            # deleting the clone's folder (a tmp cleaner, a reboot) does not lose it.
            kept = failed_logs / f"{head}-{work.name}"
            shutil.copytree(logs, kept, dirs_exist_ok=True)
            for r in results:
                r["log"] = str(kept / Path(r["log"]).name)
            print(f"[fresh-clone] failed: the clone is kept in {work}, its logs in {kept}", file=sys.stderr,
                  flush=True)  # fmt: skip
        elif keep:
            print(f"[fresh-clone] the clone and its logs are kept in {work}", file=sys.stderr, flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return {"commit": head, "passed": not failed, "phases": results, "clone": str(work) if work.exists() else None}


def table(runs: list[dict[str, Any]]) -> str:
    """The runs as BENCHMARKS.md's Markdown table."""
    lines = ["| run | phase | exit | time | target | pytest | load before |", "|---:|---|---:|---:|---:|---|---:|"]
    for number, run in enumerate(runs, 1):
        for r in run["phases"]:
            minutes = f"{r['seconds'] / 60:.1f} min" if r["seconds"] >= 120 else f"{r['seconds']:.0f} s"
            target = f"{r['target_seconds'] // 60 or 1} min"
            lines.append(f"| {number} | `{r['command']}` | {r['exit_code']} | {minutes} | {target} | "
                         f"{r['pytest'] or '-'} | {r['load_average_before']} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--keep", action="store_true", help="keep every clone and its logs (a failed run's are always kept)"
    )
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="fresh clones to make one after another, each running the phases (default 1)")  # fmt: skip
    parser.add_argument("--phases", nargs="+", choices=PHASE_NAMES, default=list(PHASE_NAMES), metavar="PHASE",
                        help="phases to run in each clone, in README's order (default: all three)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "fresh_clone.json")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: give at least 1 run")
    phases = tuple(phase for phase in PHASES if phase[0] in args.phases)
    failed_logs = args.out.parent / "fresh-clone-logs"

    runs: list[dict[str, Any]] = []
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, {cpu_model()}, {platform.platform()}"
    for number in range(1, args.repeat + 1):
        print(f"[fresh-clone] run {number} of {args.repeat}", file=sys.stderr, flush=True)
        runs.append(fresh_clone_run(phases, args.keep, failed_logs))
        # Written after each run: an interrupted series still reports the runs it finished.
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"machine": machine, "runs": runs}, indent=2) + "\n")
    commits = sorted({run["commit"] for run in runs})
    print(f"Commit {', '.join(commits)}, {machine}\n")
    print(table(runs))
    passed = sum(run["passed"] for run in runs)
    print(f"\n{passed} of {len(runs)} runs passed")
    return 0 if passed == len(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
