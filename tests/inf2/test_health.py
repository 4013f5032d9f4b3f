"""The inf2 host's health and Neuron metrics, run for real: the health check (a systemd timer's
script) against a stand-in DJL Serving on a local port, neuron-metrics against a stand-in
neuron-monitor that prints the documented JSON, both with a stand-in `aws` on PATH that records
its arguments (the AWS CLI cannot reach AWS here); their systemd units through systemd-analyze."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .helpers import ROOT

HOST_FILES = ROOT / "llm_inference_cdk" / "inf2"
NAMESPACE = "LLMInference/Inf2"
INSTANCE_ID = "i-0123456789abcdef0"
needs_curl = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is part of the DLAMI and of Debian's base")


@dataclass
class Djl:
    """What the stand-in DJL Serving answers, and what it was sent."""

    ping: int = 200
    invocation: int = 200
    delay_s: float = 0.0
    bodies: list[tuple[str, str, bytes]] = field(default_factory=list)


def djl_handler(djl: Djl) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(djl.ping if self.path == "/ping" else 404)
            self.end_headers()

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            djl.bodies.append((self.path, self.headers["Content-Type"], body))
            time.sleep(djl.delay_s)
            self.send_response(djl.invocation)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"outputs": ["Hello, world"]}')

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def djl() -> Iterator[tuple[Djl, int]]:
    state = Djl()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), djl_handler(state))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield state, server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def aws(tmp_path: Path) -> Path:
    """A stand-in `aws` on PATH: appends its arguments to a file, one JSON list a line, and exits
    with $AWS_EXIT (0 unless set)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "aws"
    stub.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        "with open(os.environ['AWS_CALLS'], 'a') as f:\n    f.write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "sys.exit(int(os.environ.get('AWS_EXIT', '0')))\n"
    )
    stub.chmod(0o755)
    return bin_dir


def calls(tmp_path: Path) -> list[list[str]]:
    path = tmp_path / "aws-calls"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def published(call: list[str]) -> dict[str, Any]:
    """{metric name: datum} of one `aws cloudwatch put-metric-data` call, after checking its form."""
    assert call[:2] == ["cloudwatch", "put-metric-data"], call
    options = dict(zip(call[2::2], call[3::2], strict=True))
    assert options["--region"] == "us-east-1" and options["--namespace"] == NAMESPACE
    data = json.loads(options["--metric-data"])
    for datum in data:
        assert datum["Dimensions"] == [{"Name": "InstanceId", "Value": INSTANCE_ID}]
    return {datum["MetricName"]: datum for datum in data}


# --- The health check -------------------------------------------------------------------------------


def run_health(tmp_path: Path, aws: Path, port: int, **env: str) -> subprocess.CompletedProcess[str]:
    probe = tmp_path / "probe-request.json"
    probe.write_text('{"text": ["Hello"], "max_new_tokens": 1}')
    settings = {"REGION": "us-east-1", "NAMESPACE": NAMESPACE, "INSTANCE_ID": INSTANCE_ID, "PORT": str(port),
                "PROBE_FILE": str(probe), "AWS_CALLS": str(tmp_path / "aws-calls")}  # fmt: skip
    return subprocess.run(["bash", str(HOST_FILES / "health-check.sh")],
                          env={"PATH": f"{aws}:{os.environ['PATH']}", **settings, **env},
                          capture_output=True, text=True, check=False, timeout=120)  # fmt: skip


@needs_curl
def test_a_serving_server_is_healthy_and_its_probe_timed(tmp_path: Path, aws: Path, djl: tuple[Djl, int]) -> None:
    state, port = djl
    state.delay_s = 0.2
    result = run_health(tmp_path, aws, port)
    assert result.returncode == 0, result.stderr
    [call] = calls(tmp_path)
    metrics = published(call)
    assert metrics["ServerHealthy"]["Value"] == 1 and metrics["ServerHealthy"]["Unit"] == "Count"
    latency = metrics["InvocationLatency"]
    # In milliseconds: at least the server's 0.2 s, below the 45 s past which curl gives up and the
    # probe fails (a figure in microseconds would be 200000 or more).
    assert latency["Unit"] == "Milliseconds" and 200 <= latency["Value"] < 45_000
    # The probe is a real invocation of the handler, with the body the stack set.
    assert state.bodies == [("/invocations", "application/json", b'{"text": ["Hello"], "max_new_tokens": 1}')]


@needs_curl
@pytest.mark.parametrize("ping", [503, None], ids=["ping-503", "not-listening"])
def test_a_server_that_does_not_answer_ping_is_reported_down(
    tmp_path: Path, aws: Path, djl: tuple[Djl, int], ping: int | None
) -> None:
    state, port = djl
    if ping is None:  # loading: DJL opens its port only once the model is loaded
        from .test_instance import socket_closed

        with socket_closed() as closed:
            result = run_health(tmp_path, aws, closed)
    else:
        state.ping = ping
        result = run_health(tmp_path, aws, port)
    assert result.returncode == 0, result.stderr
    [call] = calls(tmp_path)
    metrics = published(call)
    assert set(metrics) == {"ServerHealthy"} and metrics["ServerHealthy"]["Value"] == 0
    assert state.bodies == []  # no probe of a server that is not healthy


@needs_curl
def test_a_failed_probe_reports_health_without_a_latency(tmp_path: Path, aws: Path, djl: tuple[Djl, int]) -> None:
    state, port = djl
    state.invocation = 500
    result = run_health(tmp_path, aws, port)
    assert result.returncode == 0 and "probe invocation failed" in result.stderr
    [call] = calls(tmp_path)
    assert set(published(call)) == {"ServerHealthy"} and published(call)["ServerHealthy"]["Value"] == 1


@needs_curl
def test_a_failed_publication_fails_the_check(tmp_path: Path, aws: Path, djl: tuple[Djl, int]) -> None:
    _, port = djl
    result = run_health(tmp_path, aws, port, AWS_EXIT="255")
    assert result.returncode == 255  # systemd records the failed run in the journal
    assert len(calls(tmp_path)) == 1


@needs_curl
def test_the_health_check_needs_its_settings(tmp_path: Path, aws: Path, djl: tuple[Djl, int]) -> None:
    _, port = djl
    result = run_health(tmp_path, aws, port, INSTANCE_ID="")
    assert result.returncode != 0 and "INSTANCE_ID" in result.stderr and calls(tmp_path) == []


# --- Neuron metrics ---------------------------------------------------------------------------------


def report(*runtimes: tuple[dict[str, float], int], devices: int = 2, error: str = "") -> dict[str, Any]:
    """A neuron-monitor report in the documented format (Neuron Monitor User Guide): per runtime,
    the utilization of the NeuronCores it uses and the device memory it holds."""
    return {
        "neuron_runtime_data": [
            {
                "pid": 1000 + n,
                "neuron_runtime_tag": str(1000 + n),
                "error": "",
                "report": {
                    "neuroncore_counters": {
                        "period": 60.0,
                        "neuroncores_in_use": {
                            core: {"neuroncore_utilization": value} for core, value in utilization.items()
                        },
                        "error": error,
                    },
                    "memory_used": {
                        "period": 60.0,
                        "neuron_runtime_used_bytes": {"host": 123, "neuron_device": device_bytes},
                        "error": "",
                    },
                },
            }
            for n, (utilization, device_bytes) in enumerate(runtimes)
        ],
        "system_data": {},
        "instance_info": {"instance_id": INSTANCE_ID},
        "neuron_hardware_info": {"neuron_device_count": devices, "neuroncore_per_device_count": 2, "error": ""},
    }


def run_neuron_metrics(tmp_path: Path, aws: Path, reports: list[dict[str, Any]] | str, **env: str) -> Any:
    """neuron-metrics with a stand-in neuron-monitor that records its configuration and prints
    `reports`, one JSON a line (and a line that is not JSON), or `reports` as given, then exits."""
    lines = tmp_path / "reports.jsonl"
    if isinstance(reports, str):
        lines.write_text(reports)
    else:
        lines.write_text("".join(json.dumps(r) + "\n" for r in reports[:1]) + "not json\n"
                         + "".join(json.dumps(r) + "\n" for r in reports[1:]))  # fmt: skip
    monitor = tmp_path / "neuron-monitor"
    monitor.write_text(f'#!/bin/bash\n[ "$1" = -c ] && cp "$2" {tmp_path}/monitor-config.json\ncat {lines}\n')
    monitor.chmod(0o755)
    settings = {"REGION": "us-east-1", "NAMESPACE": NAMESPACE, "INSTANCE_ID": INSTANCE_ID,
                "NEURON_MONITOR": str(monitor), "AWS_CALLS": str(tmp_path / "aws-calls")}  # fmt: skip
    # The DLAMI's /usr/bin/python3; here this interpreter (the script is standard library only).
    return subprocess.run([sys.executable, str(HOST_FILES / "neuron_metrics.py")],
                          env={"PATH": f"{aws}:{os.environ['PATH']}", **settings, **env},
                          capture_output=True, text=True, check=False, timeout=120)  # fmt: skip


def test_neuron_metrics_publish_every_core_and_the_device_memory(tmp_path: Path, aws: Path) -> None:
    loaded = report(({"0": 50.0, "1": 30.0}, 1000), ({"2": 20.0}, 500))
    idle = report()
    result = run_neuron_metrics(tmp_path, aws, [loaded, idle])
    # neuron-monitor ended: the service exits with an error, and systemd starts it again.
    assert result.returncode != 0 and "neuron-monitor exited" in result.stderr
    assert "not JSON" in result.stderr  # a line it cannot read is skipped
    config = json.loads((tmp_path / "monitor-config.json").read_text())
    assert config["period"] == "60s"
    assert {m["type"] for r in config["neuron_runtimes"] for m in r["metrics"]} == {"neuroncore_counters",
                                                                                   "memory_used"}  # fmt: skip
    first, second = (published(call) for call in calls(tmp_path))
    # One datum per report holds every NeuronCore of the instance (idle ones at 0): its Average is
    # the instance's utilization, its Maximum the busiest core's.
    utilization = first["NeuronCoreUtilization"]
    assert utilization["Unit"] == "Percent" and utilization["Values"] == [50.0, 30.0, 20.0, 0.0]
    assert utilization["Counts"] == [1, 1, 1, 1]
    assert first["NeuronDeviceMemoryUsed"]["Value"] == 1500 and first["NeuronDeviceMemoryUsed"]["Unit"] == "Bytes"
    assert second["NeuronCoreUtilization"]["Values"] == [0.0] * 4 and second["NeuronDeviceMemoryUsed"]["Value"] == 0


#: Two reports as neuron-monitor prints them on an inf2.xlarge (one Inferentia2 device, two
#: NeuronCores-v2), one JSON object a line: the server loaded on both cores, then no Neuron
#: application (the server restarting). Every field of the Neuron Monitor User Guide's format
#: (aws-neuron-sdk, tools/neuron-sys-tools/neuron-monitor-user-guide.rst) for the groups asked
#: for, with the keys a published inf2.xlarge capture shows beside them (effective_flops); the
#: values are that capture's, the identifiers made up. Not recorded on this project's instance.
SAMPLE = Path(__file__).parent / "data" / "neuron-monitor-inf2.xlarge.jsonl"


def test_neuron_metrics_read_neuron_monitors_own_output(tmp_path: Path, aws: Path) -> None:
    result = run_neuron_metrics(tmp_path, aws, SAMPLE.read_text())
    assert "not JSON" not in result.stderr, result.stderr
    loaded, idle = (published(call) for call in calls(tmp_path))
    # Core 0 busy, core 1 in use but idle: the instance's two cores, its average 44.7 %.
    assert loaded["NeuronCoreUtilization"]["Values"] == [89.40087251059674, 0.0]
    assert loaded["NeuronDeviceMemoryUsed"]["Value"] == 141_649_980  # neuron_runtime_used_bytes.neuron_device
    # Without a Neuron application every core is idle and no device memory is held.
    assert idle["NeuronCoreUtilization"]["Values"] == [0.0, 0.0] and idle["NeuronDeviceMemoryUsed"]["Value"] == 0


def test_a_report_that_failed_publishes_nothing_it_does_not_have(tmp_path: Path, aws: Path) -> None:
    broken = report(({"0": 50.0}, 1000), error="could not read the counters")
    run_neuron_metrics(tmp_path, aws, [broken])
    [metrics] = (published(call) for call in calls(tmp_path))
    assert set(metrics) == {"NeuronDeviceMemoryUsed"} and metrics["NeuronDeviceMemoryUsed"]["Value"] == 1000


def test_a_failed_publication_is_logged_and_the_next_report_sent(tmp_path: Path, aws: Path) -> None:
    result = run_neuron_metrics(tmp_path, aws, [report(), report()], AWS_EXIT="255")
    assert len(calls(tmp_path)) == 2 and result.stderr.count("put-metric-data failed") == 2


# --- The units ----------------------------------------------------------------------------------------

UNITS = ("djl-serving-health.service", "djl-serving-health.timer", "neuron-metrics.service")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="make system-deps installs systemd")
def test_the_monitoring_units_pass_verify(tmp_path: Path) -> None:
    """As djl-serving.service's test: the units with their absolute paths moved into `tmp_path`,
    where the commands exist (verify checks each is an executable file)."""
    bin_dir, unit_dir = tmp_path / "bin", tmp_path / "units"
    bin_dir.mkdir()
    unit_dir.mkdir()
    for name in ("djl-serving-health", "neuron-metrics"):
        (bin_dir / name).symlink_to(shutil.which("true") or "/bin/true")
    for unit in UNITS:
        text = (HOST_FILES / unit).read_text().replace("/usr/local/bin/", f"{bin_dir}/")
        (unit_dir / unit).write_text(text)
    env = {**os.environ, "SYSTEMD_UNIT_PATH": f"{unit_dir}:"}
    verify = ["systemd-analyze", "verify", *(str(unit_dir / unit) for unit in UNITS)]
    result = subprocess.run(verify, env=env, capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 0 and result.stderr.strip() == "", result.stderr
    timer = (HOST_FILES / "djl-serving-health.timer").read_text().splitlines()
    assert "OnUnitActiveSec=1min" in timer and "Unit=djl-serving-health.service" in timer
    assert "EnvironmentFile=/etc/default/llm-inference-metrics" in (HOST_FILES / UNITS[0]).read_text().splitlines()
