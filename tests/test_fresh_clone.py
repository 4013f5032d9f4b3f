"""bench/fresh_clone.py reads what a phase's make printed."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from bench.fresh_clone import fresh_clone_run, run_phase

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


def exits(code: int) -> list[str]:
    return [sys.executable, "-c", f"print('phase output'); raise SystemExit({code})"]


def test_a_failed_run_keeps_its_logs_and_a_passed_one_leaves_nothing(tmp_path: Path) -> None:
    """--repeat goes on after a red run: each run is a clone of its own, a failed one's logs are
    copied beside the results (the one thing to read next), a passed one's clone is deleted."""
    kept = tmp_path / "fresh-clone-logs"
    failed = fresh_clone_run((("make test", exits(2), 1), ("never", exits(0), 1)), keep=False, failed_logs=kept)
    try:
        assert failed["passed"] is False
        assert [p["phase"] for p in failed["phases"]] == ["make test"]  # the later phase builds on it
        log = Path(failed["phases"][0]["log"])
        assert log.parent.parent == kept and log.read_text() == "phase output\n"
        assert failed["clone"] is not None and Path(failed["clone"]).is_dir()
    finally:
        shutil.rmtree(failed["clone"], ignore_errors=True)
    passed = fresh_clone_run((("make test", exits(0), 1),), keep=False, failed_logs=kept)
    assert passed["passed"] is True and passed["clone"] is None
    assert len(list(kept.iterdir())) == 1
