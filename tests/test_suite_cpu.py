"""bench/suite_cpu.py names each process's kind from its command line and sums CPU per kind."""

from __future__ import annotations

import pytest

from bench.suite_cpu import Seen, by_kind, kind_of, main


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        (
            "node --max-old-space-size=4069 --preserve-symlinks /tmp/tmpab12/lib/program.js",
            "jsii kernel (Node.js: synthesis)",
        ),
        ("node /work/node_modules/.bin/cdk deploy --app cdk.out", "CDK CLI (Node.js)"),
        ("/work/.venv-vllm/bin/python -m vllm.entrypoints.openai.api_server --port 1", "vLLM container"),
        ("/work/.venv-hf/bin/python /work/local_aws/images/hf_entrypoint.py x", "Hugging Face toolkit container"),
        ("/work/.venv/bin/python -m gunicorn --chdir serving/gpt2 wsgi:app", "GPT-2 container"),
        ("/work/.venv/bin/python -u -c import sys;exec(eval(sys.stdin.readline()))", "pytest worker"),
        ("/work/.venv/bin/python -m artifacts_builder all --tiny --out x", "artifacts builder"),
        (
            "/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus -quiet -I /work/.venv-vllm/lib/torch/include",
            "compiler (torch's inductor)",
        ),
        ("/usr/bin/sleep 5", "other"),
    ],
)
def test_a_process_is_named_by_its_command_line(command: str, kind: str) -> None:
    assert kind_of(command) == kind


def test_cpu_is_summed_per_kind() -> None:
    totals = by_kind([Seen("node /x/.bin/cdk synth", 1.5), Seen("node /x/.bin/cdk deploy", 2.0), Seen("sleep 1", 0.5)])
    assert totals == {"CDK CLI (Node.js)": (3.5, 2), "other": (0.5, 1)}


def test_the_command_runs_and_its_children_are_counted(capsys: pytest.CaptureFixture[str]) -> None:
    # Two seconds of CPU: the sampler reads every 0.3 s, so it sees all but the last read's worth.
    burn = "import time\nend = time.process_time() + 2\nwhile time.process_time() < end: pass"
    assert main(["--", "python3", "-c", burn]) == 0
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if line.startswith("| other |")]
    assert float(row.split("|")[2]) >= 1
