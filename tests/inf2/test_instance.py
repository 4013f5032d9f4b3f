"""The instance: rendered user data (shellcheck, every step), the systemd unit
(systemd-analyze verify), the helper scripts run for real, and synthesis checks."""

from __future__ import annotations

import base64
import email
import gzip
import http.server
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from project_config import ConfigError

from .helpers import ROOT, stand_in_artifacts

HOST_FILES = ROOT / "llm_inference_cdk" / "inf2"
needs_shellcheck = pytest.mark.skipif(shutil.which("shellcheck") is None, reason="make system-deps installs shellcheck")


def resolve(value: Any) -> str:
    """A CloudFormation value as text: intrinsics become fixed placeholders."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(resolve(p) for p in parts)
    if isinstance(value, dict) and "Fn::Base64" in value:
        return base64.b64encode(resolve(value["Fn::Base64"]).encode()).decode()
    if isinstance(value, dict) and "Fn::Sub" in value:
        return value["Fn::Sub"].replace("${AWS::AccountId}", "123456789012").replace("${AWS::Region}", "us-east-1")
    (key, arg), *_ = value.items()
    if key == "Ref":
        return {"AWS::Region": "us-east-1", "AWS::URLSuffix": "amazonaws.com"}.get(arg, "resource-id")
    return "111122223333" if key == "Fn::FindInMap" else "resolved"


def of_type(template: dict[str, Any], type_name: str) -> list[dict[str, Any]]:
    return [r for r in template["Resources"].values() if r["Type"] == type_name]


@pytest.fixture(scope="module")
def user_data_parts(tiny_template: dict[str, Any]) -> dict[str, str]:
    [instance] = of_type(tiny_template, "AWS::EC2::Instance")
    mime = base64.b64decode(resolve(instance["Properties"]["UserData"])).decode()
    message = email.message_from_string(mime)
    return {part.get_content_type(): part.get_payload(decode=True).decode() for part in message.walk()
            if not part.is_multipart()}  # fmt: skip


def test_user_data_runs_at_every_boot(user_data_parts: dict[str, str]) -> None:
    assert "- [scripts-user, always]" in user_data_parts["text/cloud-config"]


@needs_shellcheck
def test_rendered_user_data_passes_shellcheck(user_data_parts: dict[str, str]) -> None:
    script = user_data_parts["text/x-shellscript"]
    result = subprocess.run(
        ["shellcheck", "-s", "bash", "-"], input=script, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout


@needs_shellcheck
@pytest.mark.parametrize("name", ["bootstrap.sh", "run-container.sh", "wait-ping.sh", "health-check.sh", "ship-log.sh"])
def test_each_installed_script_passes_shellcheck(name: str) -> None:
    # The user data carries these inside heredocs, where shellcheck does not look.
    result = subprocess.run(["shellcheck", str(HOST_FILES / name)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


def test_user_data_contains_each_step(user_data_parts: dict[str, str], tiny_artifacts: Path) -> None:
    script = user_data_parts["text/x-shellscript"]
    sha = json.loads((tiny_artifacts / "inf2" / "manifest.json").read_text())["files"]["bundle.tar.gz"]["sha256"]
    steps = [
        f"export BUNDLE_SHA256={sha}",
        "export BUNDLE_URL='s3://",
        "/djl-inference:0.29.0-neuronx-sdk2.19.1'",
        "export LOAD_TIMEOUT_S=11700",  # 3 copies of OPT-13B (24 NeuronCores / degree 8) x 3600 s + 900 s
        "export PUBLISH_ADDRESS=127.0.0.1",  # no inf2.ingress_cidr: DJL's port on loopback alone
        "flock --wait",  # one run at a time
        "modprobe neuron",  # the Neuron driver
        "systemctl enable --now docker",  # docker from the DLAMI
        'aws s3 cp --only-show-errors --region "$REGION" "$BUNDLE_URL"',  # the bundle
        "sha256sum --check --strict",  # ... checked
        "aws ecr get-login-password",  # ECR login
        'retry 5 docker pull "$IMAGE_URI"',  # the pinned image
        'CACHE_DIR="$ROOT/neuron-cache"',  # compiled graphs on the volume
        "/usr/local/bin/djl-serving-run 0755 <<",
        "/usr/local/bin/djl-serving-wait 0755 <<",
        "/etc/systemd/system/djl-serving.service 0644 <<",
        "/usr/local/bin/djl-serving-health 0755 <<",
        "/usr/local/bin/neuron-metrics 0755 <<",
        "/etc/systemd/system/djl-serving-health.timer 0644 <<",
        "/usr/local/bin/llm-inference-ship-log 0755 <<",
        "/etc/systemd/system/llm-inference-bootstrap-log.timer 0644 <<",
        "systemctl enable djl-serving.service",
        "systemctl restart --no-block djl-serving.service",
        "systemctl enable --now djl-serving-health.timer neuron-metrics.service llm-inference-bootstrap-log.timer",
    ]
    positions = [script.find(step) for step in steps]
    assert all(p >= 0 for p in positions), [s for s, p in zip(steps, positions, strict=True) if p < 0]
    # The units and scripts are in place before the bootstrap enables them.
    assert max(positions[-11:-3]) < positions[-3]


def test_user_data_fits_ec2s_limit(user_data_parts: dict[str, str], tiny_template: dict[str, Any]) -> None:
    """EC2 refuses user data over 16 KB and the deploy fails (the local AWS does not check): the
    script goes as it is (no base64) and the files it installs without their comments, and what
    a deploy resolves into the header (the bundle's URL, the image, the log group) has room."""
    from llm_inference_cdk.inf2.server import INSTALLED, USER_DATA_LIMIT, installed_body, installed_text

    [instance] = of_type(tiny_template, "AWS::EC2::Instance")
    size = len(base64.b64decode(resolve(instance["Properties"]["UserData"])))
    assert size < USER_DATA_LIMIT - 1024, size
    script = user_data_parts["text/x-shellscript"]
    for source, target, _ in INSTALLED:
        text = installed_text(source)
        command, body = installed_body(source)
        assert f"{command} {target} " in script and body in script, source
        # What unpack writes is the file as put would have.
        assert command == "put" or gzip.decompress(base64.b64decode(body)).decode() == text, source
        assert not [line for line in text.splitlines()[1:] if line.lstrip().startswith("#")]


@pytest.fixture
def unit_copy(tmp_path: Path) -> Path:
    """The unit with its absolute paths moved into `tmp_path`, where they exist: verify
    checks that each command is an executable file and that required units exist, and
    this machine has neither docker.service nor /usr/local/bin/djl-serving-*."""
    bin_dir, unit_dir = tmp_path / "bin", tmp_path / "units"
    bin_dir.mkdir()
    unit_dir.mkdir()
    shutil.copy(HOST_FILES / "run-container.sh", bin_dir / "djl-serving-run")
    shutil.copy(HOST_FILES / "wait-ping.sh", bin_dir / "djl-serving-wait")
    (bin_dir / "docker").symlink_to(shutil.which("true") or "/bin/true")  # only its path is checked
    for path in bin_dir.iterdir():
        path.chmod(0o755)
    unit = (HOST_FILES / "djl-serving.service").read_text()
    unit = unit.replace("/usr/local/bin/", f"{bin_dir}/").replace("/usr/bin/docker", f"{bin_dir}/docker")
    (unit_dir / "djl-serving.service").write_text(unit)
    (unit_dir / "docker.service").write_text("[Unit]\nDescription=docker\n[Service]\nExecStart=/bin/true\n")
    return unit_dir / "djl-serving.service"


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="make system-deps installs systemd")
def test_systemd_unit_passes_verify(unit_copy: Path) -> None:
    env = {**os.environ, "SYSTEMD_UNIT_PATH": f"{unit_copy.parent}:"}
    result = subprocess.run(["systemd-analyze", "verify", str(unit_copy)], env=env, capture_output=True, text=True,
                            check=False, timeout=60)  # fmt: skip
    assert result.returncode == 0 and result.stderr.strip() == "", result.stderr
    # The same check fails on a typo: it really reads the unit.
    unit_copy.write_text(unit_copy.read_text().replace("Restart=on-failure", "Restrat=on-failure"))
    result = subprocess.run(["systemd-analyze", "verify", str(unit_copy)], env=env, capture_output=True, text=True,
                            check=False, timeout=60)  # fmt: skip
    assert "Unknown key" in result.stderr


def test_unit_restarts_on_failure_and_waits_for_ping() -> None:
    unit = (HOST_FILES / "djl-serving.service").read_text()
    for line in ("Restart=on-failure", "ExecStartPost=/usr/local/bin/djl-serving-wait", "StartLimitIntervalSec=0",
                 "Requires=docker.service", "EnvironmentFile=/etc/default/djl-serving"):  # fmt: skip
        assert line in unit.splitlines()


class _Ping(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/ping" else 404)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def ping_server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ping)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def run_script(name: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(HOST_FILES / name)], env={"PATH": os.environ["PATH"], **env},
                          capture_output=True, text=True, check=False, timeout=60)  # fmt: skip


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is part of the DLAMI and of Debian's base")
def test_wait_ping_succeeds_once_ping_answers_and_fails_at_the_deadline(ping_server: int) -> None:
    ok = run_script("wait-ping.sh", PORT=str(ping_server), LOAD_TIMEOUT_S="30")
    assert ok.returncode == 0 and "answers /ping" in ok.stdout
    with socket_closed() as port:
        late = run_script("wait-ping.sh", PORT=str(port), LOAD_TIMEOUT_S="0")
    assert late.returncode == 1 and "did not answer /ping within 0s" in late.stderr


class socket_closed:
    """A local port nothing listens on."""

    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return int(self.sock.getsockname()[1])

    def __exit__(self, *args: object) -> None:
        self.sock.close()


def container_env(tmp_path: Path) -> dict[str, str]:
    """run-container.sh's settings (from /etc/default/djl-serving), with a stub docker that
    writes its arguments one a line, and two Neuron devices, all in `tmp_path`."""
    dev = tmp_path / "dev"
    dev.mkdir()
    for n in range(2):
        (dev / f"neuron{n}").touch()
    docker = tmp_path / "docker"
    docker.write_text(f'#!/bin/bash\nprintf "%s\\n" "$@" >{tmp_path}/docker-args\n')
    docker.chmod(0o755)
    env = {k: str(tmp_path / k.lower()) for k in ("MODEL_DIR", "CACHE_DIR", "LOG_DIR")}
    return {**env, "IMAGE_URI": "djl-inference:0.29.0-neuronx-sdk2.19.1", "REGION": "us-east-1", "LOG_GROUP": "g",
            "PORT": "8080", "PUBLISH_ADDRESS": "127.0.0.1", "RUN_DOCKER": str(docker),
            "RUN_NEURON_DEVICES": f"{dev}/neuron*"}  # fmt: skip


def values_of(args: list[str], option: str) -> list[str]:
    return [args[i + 1] for i, arg in enumerate(args) if arg == option]


@pytest.mark.parametrize("address", ["127.0.0.1", "0.0.0.0"])
def test_run_container_publishes_on_the_given_address_and_drops_privileges(tmp_path: Path, address: str) -> None:
    env = {**container_env(tmp_path), "PUBLISH_ADDRESS": address, "PORT": "9000"}
    result = run_script("run-container.sh", **env)
    assert result.returncode == 0, result.stderr
    args = (tmp_path / "docker-args").read_text().splitlines()
    # Loopback unless an ingress CIDR is set: SSM port forwarding reaches 127.0.0.1 on the host.
    assert values_of(args, "-p") == [f"{address}:9000:8080"]
    # No capability at all (the Neuron devices come through --device), and no way to gain one.
    assert values_of(args, "--cap-drop") == ["ALL"] and values_of(args, "--cap-add") == []
    assert values_of(args, "--security-opt") == ["no-new-privileges"]
    assert "--privileged" not in args
    # Options come before the image: docker run passes whatever follows it to the container.
    assert args.index("--cap-drop") < args.index(env["IMAGE_URI"])


def test_run_container_needs_the_publish_address(tmp_path: Path) -> None:
    env = container_env(tmp_path)
    del env["PUBLISH_ADDRESS"]
    result = run_script("run-container.sh", **env)
    assert result.returncode != 0 and "PUBLISH_ADDRESS" in result.stderr
    assert not (tmp_path / "docker-args").exists()


def test_run_container_keeps_the_hub_cache_on_the_volume(tmp_path: Path) -> None:
    env = container_env(tmp_path)
    result = run_script("run-container.sh", **env)
    assert result.returncode == 0, result.stderr
    args = (tmp_path / "docker-args").read_text().splitlines()
    assert args[:3] == ["run", "--rm", "--name"] and args[-2:] == [env["IMAGE_URI"], "serve"]
    mounts = {args[i + 1] for i, arg in enumerate(args) if arg == "-v"}
    # The image's HF_HOME and TRANSFORMERS_CACHE lie under /tmp/.cache (pytorch-inf2.Dockerfile, v0.29.0):
    # with --rm, a cache there is lost at every start, and with it a half-done 26 GB download.
    assert f"{env['CACHE_DIR']}/hub-cache:/tmp/.cache" in mounts
    assert f"{env['CACHE_DIR']}:/opt/ml/neuron-cache" in mounts and f"{env['MODEL_DIR']}:/opt/ml/model:ro" in mounts
    assert [args[i + 1] for i, arg in enumerate(args) if arg == "--device"] == [
        f"{tmp_path}/dev/neuron0",
        f"{tmp_path}/dev/neuron1",
    ]
    # The bundle's option.model_loading_timeout governs; the variable would only be read without it.
    assert not any(arg.startswith("MODEL_LOADING_TIMEOUT") for arg in args)


def test_run_container_refuses_to_start_without_neuron_devices(tmp_path: Path) -> None:
    env = container_env(tmp_path)
    for dev in (tmp_path / "dev").iterdir():
        dev.unlink()
    result = run_script("run-container.sh", **env)
    assert result.returncode == 1 and f"no {tmp_path}/dev/neuron* device" in result.stderr
    assert not (tmp_path / "docker-args").exists()


def test_instance_is_closed_and_hardened_by_default(tiny_template: dict[str, Any]) -> None:
    [group] = of_type(tiny_template, "AWS::EC2::SecurityGroup")
    assert "SecurityGroupIngress" not in group["Properties"]
    assert of_type(tiny_template, "AWS::EC2::SecurityGroupIngress") == []
    [instance] = of_type(tiny_template, "AWS::EC2::Instance")
    assert "KeyName" not in instance["Properties"]
    [template] = of_type(tiny_template, "AWS::EC2::LaunchTemplate")
    assert template["Properties"]["LaunchTemplateData"]["MetadataOptions"]["HttpTokens"] == "required"
    [volume] = instance["Properties"]["BlockDeviceMappings"]
    assert volume["Ebs"]["Encrypted"] is True and volume["Ebs"]["VolumeSize"] == 512
    # The system-status alarm on its metric, the server's health alarm on metric math over its own.
    alarms = {
        a["Properties"].get("MetricName") or a["Properties"]["Metrics"][1]["MetricStat"]["Metric"]["MetricName"]: a
        for a in of_type(tiny_template, "AWS::CloudWatch::Alarm")
    }
    assert set(alarms) == {"StatusCheckFailed_System", "ServerHealthy"}
    alarm = alarms["StatusCheckFailed_System"]
    assert ":automate:" in json.dumps(alarm["Properties"]["AlarmActions"]) and "ec2:recover" in json.dumps(
        alarm["Properties"]["AlarmActions"]
    )
    outputs = tiny_template["Outputs"]
    assert "AWS-StartPortForwardingSession" in json.dumps(outputs["PortForward"]["Value"])
    assert outputs["TryIt"]["Value"].startswith("curl ")


def test_synthesis_refuses_a_bundle_built_from_other_settings(
    synth_inf2: Callable[..., dict[str, Any]], tiny_artifacts: Path
) -> None:
    with pytest.raises(ConfigError, match=r"inf2.bundle=.*option.n_positions: bundle '512', settings '256'.*rebuild"):
        synth_inf2(tiny_artifacts, **{"inf2.n_positions": 256})


def test_synthesis_refuses_a_model_id_other_than_the_bundled_model(
    synth_inf2: Callable[..., dict[str, Any]], tiny_artifacts: Path
) -> None:
    # The bundle ships its model: a hub model id would be ignored by the instance, so it is refused.
    with pytest.raises(ConfigError) as err:
        synth_inf2(tiny_artifacts, **{"inf2.model_id": "facebook/opt-6.7b"})
    assert str(err.value) == (
        "inf2.model_id='facebook/opt-6.7b' is invalid: allowed is unset or 'tiny-random-opt', the model the bundle "
        "ships (to serve facebook/opt-6.7b from the hub, build the bundle without --tiny or --model-dir)"
    )


def test_synthesis_checks_the_bundled_model_heads(
    synth_inf2: Callable[..., dict[str, Any]], tmp_path: Path, tiny_model_dir: Path
) -> None:
    from artifacts_builder.inf2 import run

    from .helpers import builder_args

    config = json.loads((tiny_model_dir / "config.json").read_text())
    odd = tmp_path / "odd-heads"
    shutil.copytree(tiny_model_dir, odd)
    (odd / "config.json").write_text(json.dumps({**config, "num_attention_heads": 12}))
    # Built for degree 4 (12 heads divide), then synthesized with cdk.json's degree 8.
    assert run(builder_args(tmp_path, "--model-dir", str(odd), "-c", "inf2.tensor_parallel_degree=4")) == 0
    stand_in_artifacts(tmp_path)
    with pytest.raises(ConfigError, match=r"odd-heads has 12 attention heads \(config.json of odd-heads"):
        synth_inf2(tmp_path)
