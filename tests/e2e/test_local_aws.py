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
from local_aws.cdk import CDK_BIN, CdkTimeout, run_bounded
from local_aws.containers import running_containers
from tests.e2e.helpers import CLI_TIMEOUT_S

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
#: The image URI the by-hand example (docs/LOCAL_AWS.md) gives Gpt2Stack (no Docker engine publishes the asset here).
README_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/gpt2:local"


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


def test_a_cli_call_past_its_bound_fails_and_is_killed(tmp_path: Path) -> None:
    marker = tmp_path / "child-still-running"
    child = tmp_path / "child.py"
    child.write_text(f"import time\ntime.sleep(3)\nopen({str(marker)!r}, 'w')\n")
    parent = tmp_path / "parent.py"
    # Runs for a minute and starts a child of its own, as the CDK CLI does.
    parent.write_text(
        f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, {str(child)!r}])\ntime.sleep(60)\n"
    )
    started = time.monotonic()
    with pytest.raises(CdkTimeout, match="ran past its 1 s bound"):
        run_bounded([sys.executable, str(parent)], env={}, cwd=tmp_path, timeout_s=1)
    assert time.monotonic() - started < 10
    time.sleep(4)
    assert not marker.exists(), "the whole process group is killed, children included"


def test_readme_flow_by_hand(e2e_artifacts: Path, tmp_path: Path) -> None:
    """The by-hand use docs/LOCAL_AWS.md shows: `python -m local_aws` in the foreground, its exports, the CDK CLI,
    boto3's invoke_endpoint with the seed's request; SIGTERM stops it and every container."""
    # The by-hand use moved from README to the local AWS's reference.
    assert f"gpt2.image_uri={README_IMAGE}" in (ROOT / "docs" / "LOCAL_AWS.md").read_text()
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
        context = ["-c", f"project.artifacts_dir={e2e_artifacts}", "-c", f"gpt2.image_uri={README_IMAGE}"]
        cdk = [str(CDK_BIN), "--output", str(tmp_path / "cdk.out"), *context]
        bound = {"env": env, "cwd": ROOT, "timeout_s": CLI_TIMEOUT_S}
        run_bounded([*cdk, "bootstrap", f"aws://{exports['CDK_DEFAULT_ACCOUNT']}/{exports['AWS_REGION']}"], **bound)
        run_bounded([*cdk, "deploy", "Gpt2Stack", "--require-approval", "never"], **bound)
        cfn = boto3.client("cloudformation", **client_options(exports))
        (stack,) = cfn.describe_stacks(StackName="Gpt2Stack")["Stacks"]
        name = next(o["OutputValue"] for o in stack["Outputs"] if o["OutputKey"] == "EndpointName")
        runtime = boto3.client("sagemaker-runtime", **client_options(exports))
        answer = runtime.invoke_endpoint(EndpointName=name, ContentType="application/json", Body=b'{"input": "amazon"}')
        completions = json.loads(answer["Body"].read())["outputs"][0]["completions"]
        assert completions and completions[0]["generated_text"].startswith("amazon")
        assert running_containers(owner=server.pid)
    finally:
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=60)
    assert code == 0
    assert running_containers(owner=server.pid) == [], "SIGTERM stopped the endpoint's container"


def client_options(exports: dict[str, str]) -> dict[str, str]:
    return {
        "endpoint_url": exports["AWS_ENDPOINT_URL"],
        "region_name": exports["AWS_REGION"],
        "aws_access_key_id": exports["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": exports["AWS_SECRET_ACCESS_KEY"],
    }
