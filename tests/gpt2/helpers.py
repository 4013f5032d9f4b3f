"""Helpers of the GPT-2 tests."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Quantized:
    """The tiny model built with one `--cpu-precision` (its gate passed, or the build failed)."""

    out: Path
    tar: Path
    model_dir: Path


def children(pid: int) -> set[int]:
    """Every process below `pid` (reads /proc; psutil is not needed for this)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            parents.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def cmdline(pid: int) -> bytes:
    """A process's command line, arguments separated by spaces (nginx rewrites its own so)."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
