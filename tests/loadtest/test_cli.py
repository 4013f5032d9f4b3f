"""`python -m loadtest` refuses what it cannot run with one line and exit code 2, before it
sends anything (the stand-in runtime it is pointed at must receive nothing)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from loadtest.cli import parser
from tests.loadtest.helpers import CannedRuntime, environment, ok

ROOT = Path(__file__).resolve().parents[2]
GPT2_REQUEST = str(ROOT / "loadtest" / "requests" / "gpt2.json")


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loadtest", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_help_lists_the_options() -> None:
    result = cli("--help", env={})
    assert result.returncode == 0
    for option in ("--endpoint", "--request", "--concurrency", "--seconds", "--out", "--inference-component"):
        assert option in result.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--concurrency", "0"], "argument --concurrency: 0 is out of range: allowed is a whole number from 1 to 1024"),
        (["--concurrency", "1", "two"], "argument --concurrency: 'two' is not a whole number"),
        (["--seconds", "0"], "argument --seconds: 0 is out of range: allowed is a number of seconds above 0"),
        (["--seconds", "-5"], "argument --seconds: -5 is out of range"),
        (["--request", str(ROOT / "README.md")], "request file"),
        (["--request", str(ROOT / "nothing.json")], "cannot be read"),
        (["--stream", "--async"], "--async and --stream: an asynchronous endpoint answers through S3"),
    ],
)
def test_a_bad_option_or_request_file_is_one_line_and_exit_code_2(
    args: list[str], expected: str, tmp_path: Path
) -> None:
    with CannedRuntime([ok()]) as runtime:
        base = ["--endpoint", "e", "--request", GPT2_REQUEST, "--out", str(tmp_path / "out")]
        result = cli(*base, *args, env=environment(runtime.url))
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("python -m loadtest: error: ") and expected in result.stderr
    assert result.stdout == ""
    assert runtime.received == [], "refused before anything was sent"
    assert not (tmp_path / "out").exists()


def test_a_request_file_that_is_not_json_names_the_file(tmp_path: Path) -> None:
    request = tmp_path / "request.json"
    request.write_text('{"body": {"input": "amazon"}')
    result = cli("--endpoint", "e", "--request", str(request), env=environment("http://127.0.0.1:9"))
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert f"request file {request} is not JSON" in line


def test_readme_documents_every_option() -> None:
    # The load tester's reference (README's "Load-test an endpoint" section until it moved there).
    section = (ROOT / "docs" / "LOADTEST.md").read_text()
    documented = set(re.findall(r"--[a-z][a-z-]+", section))
    options = {o for action in parser()._actions for o in action.option_strings if o.startswith("--")}
    assert documented == options - {"--help"}


def test_make_loadtest_passes_its_variables_on() -> None:
    """`make -n` prints the commands without running them: the last is the load tester's."""
    # Run as a user's make, not as a child of `make test` (which would print its directory).
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    result = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-n",
            "loadtest",
            "ENDPOINT=my-endpoint",
            "REQUEST=r.json",
            "CONCURRENCY=2 8",
            "SECONDS=5",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    command = shlex.split(result.stdout.strip().splitlines()[-1])
    assert command[1:3] == ["-m", "loadtest"]
    args = parser().parse_args(command[3:])
    assert (args.endpoint, str(args.request), args.concurrency, args.seconds) == ("my-endpoint", "r.json", [2, 8], 5.0)
