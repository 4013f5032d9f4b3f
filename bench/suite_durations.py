"""Where `make test`'s time goes: pytest's ``--durations=0`` report, summed per module and per
xdist group (tests/conftest.py's ``xdist_group``), setup, call and teardown apart.

    make test PYTEST_ARGS=--durations=0 2>&1 | tee build/make-test.log
    python -m bench.suite_durations build/make-test.log            # Markdown tables on stdout

A module-scoped fixture's time (a deploy, a server's start, a synthesis) is counted in the setup
of the first test that uses it, so a module's setup column is what its fixtures cost. Worker time
is the sum over both workers: the wall time of a group that one worker runs alone is its row's
total, and the suite's wall time is at least its largest group's.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

from tests.tiers import xdist_group_of

#: One line of pytest's durations report: ``12.34s call     <module>::<test>``.
DURATION = re.compile(r"^(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(tests/\S+?\.py)::\S", re.MULTILINE)
PHASES = ("setup", "call", "teardown")


def group_of(module: str) -> str:
    """The xdist group a module's tests run in (tests/tiers.py), the other tiers' modules summed per folder."""
    group = xdist_group_of(module)
    if group != module:
        return group
    return "rest: " + module.split("/")[1] if module.count("/") > 1 else "rest: tests/"


def durations(text: str) -> dict[str, dict[str, float]]:
    """Seconds per module and phase, from a durations report (pytest drops lines under 0.005 s)."""
    found: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(PHASES, 0.0))
    for seconds, phase, module in DURATION.findall(text):
        found[module][phase] += float(seconds)
    if not found:
        raise SystemExit("no durations in the log: run pytest with --durations=0")
    return dict(found)


def table(rows: dict[str, dict[str, float]], title: str, most: int) -> str:
    ordered = sorted(rows.items(), key=lambda item: -sum(item[1].values()))
    lines = [f"| {title} | setup s | call s | teardown s | total s |", "|---|---:|---:|---:|---:|"]
    for name, phases in ordered[:most]:
        lines.append(f"| `{name}` | " + " | ".join(f"{phases[p]:.0f}" for p in PHASES)
                     + f" | {sum(phases.values()):.0f} |")  # fmt: skip
    rest = ordered[most:]
    if rest:
        summed = {p: sum(phases[p] for _, phases in rest) for p in PHASES}
        lines.append(f"| {len(rest)} more | " + " | ".join(f"{summed[p]:.0f}" for p in PHASES)
                     + f" | {sum(summed.values()):.0f} |")  # fmt: skip
    everything = {p: sum(phases[p] for phases in rows.values()) for p in PHASES}
    lines.append("| **all** | " + " | ".join(f"{everything[p]:.0f}" for p in PHASES)
                 + f" | {sum(everything.values()):.0f} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="the output of a pytest run with --durations=0")
    parser.add_argument("--most", type=int, default=25, help="module rows to list (default 25)")
    args = parser.parse_args(argv)
    modules = durations(args.log.read_text(errors="replace"))
    groups: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(PHASES, 0.0))
    for module, phases in modules.items():
        for phase, seconds in phases.items():
            groups[group_of(module)][phase] += seconds
    print(table(dict(groups), "group", len(groups)))
    print()
    print(table(modules, "module", args.most))
    return 0


if __name__ == "__main__":
    sys.exit(main())
