"""bench/suite_durations.py sums pytest's durations report per group and module."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.suite_durations import durations, group_of, main

REPORT = """\
============================= slowest durations ==============================
120.50s setup    tests/e2e/test_modes.py::test_gpt2_real_time[a b]
30.25s call     tests/e2e/test_modes.py::test_gpt2_real_time[a b]
2.00s teardown tests/e2e/test_llm_stack.py::test_chat
1.50s call     tests/local_aws/test_runtime.py::test_x
0.75s call     tests/local_aws/test_runtime.py::test_y
0.01s setup    tests/test_docs.py::test_z
"""


def test_phases_are_summed_per_module() -> None:
    found = durations(REPORT)
    assert found["tests/e2e/test_modes.py"] == {"setup": 120.5, "call": 30.25, "teardown": 0.0}
    assert found["tests/local_aws/test_runtime.py"]["call"] == 2.25
    assert set(found) == {"tests/e2e/test_modes.py", "tests/e2e/test_llm_stack.py",
                          "tests/local_aws/test_runtime.py", "tests/test_docs.py"}  # fmt: skip


def test_modules_fall_in_the_groups_xdist_runs() -> None:
    assert group_of("tests/e2e/test_llm_stack.py") == "e2e-vllm"
    assert group_of("tests/e2e/test_modes.py") == "e2e-1"
    assert group_of("tests/e2e/test_invoke_endpoint.py") == "e2e-2"
    assert group_of("tests/local_aws/test_runtime.py") == "rest: local_aws"
    assert group_of("tests/test_docs.py") == "rest: tests/"


def test_a_log_without_durations_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text("2 passed in 1.0s\n")
    with pytest.raises(SystemExit, match="--durations=0"):
        main([str(log)])
