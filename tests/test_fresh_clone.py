"""bench/fresh_clone.py reads what a phase's make printed."""

from __future__ import annotations

import sys
from pathlib import Path

from bench.fresh_clone import run_phase

# The end of a failing `make test`, as pytest prints it.
FAILING_RUN = """\
=========================== short test summary info ============================
SKIPPED [1] tests/gptj/test_gpu.py:18: needs a CUDA GPU
FAILED tests/local_aws/test_patches.py::test_x[a b] - AssertionError: assert 1 == 2
ERROR tests/e2e/test_modes.py::test_y - RuntimeError: boom
====== 1 failed, 2457 passed, 2 skipped, 1 error in 796.37s (0:13:16) ======
"""


def test_a_failed_phase_names_its_failures(tmp_path: Path) -> None:
    printer = [sys.executable, "-c", f"import sys; print({FAILING_RUN!r}); sys.exit(2)"]
    result = run_phase("make test", printer, tmp_path, {}, tmp_path)
    assert result["exit_code"] == 2
    assert result["failed"] == ["tests/local_aws/test_patches.py::test_x[a b]", "tests/e2e/test_modes.py::test_y"]
    assert result["pytest"] == "1 failed, 2457 passed, 2 skipped, 1 error"
    assert Path(result["log"]).read_text().startswith("=====")
