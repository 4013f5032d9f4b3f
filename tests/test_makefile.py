"""A dry run of the Makefile runs nothing: tests/test_doc_commands.py checks each documented
target with ``make -n``, and make runs a recipe line that names ``$(MAKE)`` even under ``-n``, so
such a line that also ran pytest once started the whole suite again inside the suite."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Where the Makefile finds its tools, pointed nowhere: a command run for real fails on it.
NOWHERE = "/nonexistent-dry-run"


def phony_targets() -> list[str]:
    text = (ROOT / "Makefile").read_text()
    declared = re.search(r"^\.PHONY:((?:.*\\\n)*.*)$", text, flags=re.MULTILINE)
    assert declared, "the Makefile declares no .PHONY targets"
    return sorted(set(declared[1].replace("\\\n", " ").split()))


@pytest.mark.parametrize("target", phony_targets())
def test_a_dry_run_of_a_target_runs_none_of_its_commands(target: str) -> None:
    dry = subprocess.run(
        ["make", "-n", "--no-print-directory", target, f"BIN={NOWHERE}", f"PYTHON={NOWHERE}/python3", "ENDPOINT=e"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert NOWHERE not in dry.stderr, dry.stderr
