"""The local AWS itself: loopback only, pinned moto, seeded parameter, bounded CLI calls."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

from local_aws import LocalAws, UnsupportedMotoVersion, patches, server
from local_aws.cdk import CdkTimeout, run_bounded

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
