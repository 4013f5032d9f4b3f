"""The local AWS itself: loopback only, pinned moto, seeded parameter, bounded CLI calls, and
its use by hand as docs/LOCAL_AWS.md (linked from README) shows it."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import boto3
import pytest

from local_aws import LocalAws, UnsupportedMotoVersion, patches, server
from local_aws.cli.cdk import CDK_BIN, Cdk, CdkTimeout, run_bounded
from local_aws.sagemaker.containers import running_containers
from tests.docs_pages import commands_under
from tests.e2e.helpers import CLI_TIMEOUT_S

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def test_serves_on_loopback_with_a_free_port(local_aws: LocalAws) -> None:
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", local_aws.endpoint)
    assert local_aws.port > 0
    assert local_aws.client("sts").get_caller_identity()["Account"] == local_aws.account


def test_refuses_another_moto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server.metadata, "version", lambda name: "5.2.6")
    with pytest.raises(UnsupportedMotoVersion, match=r"moto 5\.2\.6 is installed.*moto\[server\]==5\.2\.5"):
        LocalAws().start()


def test_pinned_moto_is_the_patched_one() -> None:
    pins = re.findall(r"^moto\[server\]==(\S+)$", (ROOT / "requirements-dev.txt").read_text(), re.MULTILINE)
    assert pins == [patches.MOTO_VERSION]


def test_every_patch_says_what_it_restores() -> None:
    assert len(patches.PATCHES) >= 10
    for p in patches.PATCHES:
        assert len(p.restores) > 80 and "Stock moto" in p.restores, p.name


def test_neuron_dlami_parameter_is_published(local_aws: LocalAws, neuron_ami: str, base: object) -> None:
    from llm_inference_cdk.inf2.props import NEURON_DLAMI

    parameter = local_aws.client("ssm").get_parameter(Name=NEURON_DLAMI)["Parameter"]
    assert parameter["Value"] == neuron_ami and parameter["DataType"] == "aws:ec2:image"
    (image,) = local_aws.client("ec2").describe_images(ImageIds=[neuron_ami])["Images"]
    assert image["State"] == "available"


def test_the_cli_sends_no_telemetry_of_a_local_deploy(cdk: Cdk) -> None:
    """Otherwise each CLI command starts a Node.js process to send its telemetry (local_aws/cli/cdk.py)."""
    assert "CLI Telemetry is disabled" in cdk.run("cli-telemetry", "--status").output


def test_a_cli_call_past_its_bound_fails_and_is_killed(tmp_path: Path) -> None:
    marker = tmp_path / "child-still-running"
    child = tmp_path / "child.py"
    child.write_text(f"import time\ntime.sleep(3)\nopen({str(marker)!r}, 'w')\n")
    parent = tmp_path / "parent.py"
    # Runs for two minutes and starts a child of its own, as the CDK CLI does.
    parent.write_text(
        f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, {str(child)!r}])\ntime.sleep(120)\n"
    )
    # clock: tells a call ended at its 1 s bound from one that waited for the parent's 2 minutes:
    # 60 s is no bound on how fast a host kills a process group.
    started = time.monotonic()
    with pytest.raises(CdkTimeout, match="ran past its 1 s bound"):
        run_bounded([sys.executable, str(parent)], env={}, cwd=tmp_path, timeout_s=1)
    assert time.monotonic() - started < 60  # clock: the same
    time.sleep(4)
    assert not marker.exists(), "the whole process group is killed, children included"


def test_readme_flow_by_hand(e2e_artifacts: Path, tmp_path: Path) -> None:
    """docs/LOCAL_AWS.md's "Using it by hand", run as a reader runs it: `python -m local_aws` in
    the foreground and its exports, then each command of the page's block in turn (the CDK CLI,
    boto3's invoke_endpoint with the seed's request, `cdk destroy`); SIGTERM then stops it."""
    commands = commands_under(ROOT / "docs" / "LOCAL_AWS.md", "Using it by hand")
    server = subprocess.Popen(
        [sys.executable, "-m", "local_aws"], cwd=ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert server.stdout is not None
        exports = {}
        for line in server.stdout:
            if line.strip() == "# ready":
                break
            if line.startswith("export "):
                key, _, value = line.removeprefix("export ").strip().partition("=")
                exports[key] = shlex.split(value)[0]
        env = {**os.environ, **exports}
        # What a reader does not type: this run's output folder and tiny artifacts (theirs are
        # the project's), and the answers to the CLI's prompts (a test has no terminal).
        answers = {"deploy": ["--require-approval", "never"], "destroy": ["--force"]}
        given = ["--output", str(tmp_path / "cdk.out"), "-c", f"project.artifacts_dir={e2e_artifacts}"]
        name = ""
        for command in commands:
            words = shlex.split(command)
            if words[:2] == ["npx", "cdk"]:
                if words[2] == "bootstrap":  # the page's account and region are the local AWS's
                    assert words[3] == f"aws://{exports['CDK_DEFAULT_ACCOUNT']}/{exports['AWS_REGION']}", command
                argv = [str(CDK_BIN), *words[2:], *given, *answers.get(words[2], [])]
                run_bounded(argv, env=env, cwd=ROOT, timeout_s=CLI_TIMEOUT_S)
                if words[2] == "deploy":
                    cfn = boto3.client("cloudformation", **client_options(exports))
                    (stack,) = cfn.describe_stacks(StackName=words[3])["Stacks"]
                    name = next(o["OutputValue"] for o in stack["Outputs"] if o["OutputKey"] == "EndpointName")
                    assert running_containers(owner=server.pid)
                continue
            # The reader pastes the deployed endpoint's name where the page says so.
            assert "<the EndpointName output>" in command and name
            done = subprocess.run(
                ["bash", "-ec", command.replace("<the EndpointName output>", name)],
                cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            completions = json.loads(done.stdout)["outputs"][0]["completions"]
            assert completions and completions[0]["generated_text"].startswith("amazon")
        assert [w for c in commands for w in shlex.split(c)[:3]].count("destroy") == 1
        assert running_containers(owner=server.pid) == [], "`cdk destroy` stopped the endpoint's container"
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=60)
    assert code == 0
    assert running_containers(owner=server.pid) == [], "SIGTERM stopped every container"


def client_options(exports: dict[str, str]) -> dict[str, str]:
    return {
        "endpoint_url": exports["AWS_ENDPOINT_URL"],
        "region_name": exports["AWS_REGION"],
        "aws_access_key_id": exports["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": exports["AWS_SECRET_ACCESS_KEY"],
    }
