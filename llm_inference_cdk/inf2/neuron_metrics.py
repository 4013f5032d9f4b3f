#!/usr/bin/env python3
# neuron-metrics.service: NeuronCore utilization and Neuron device memory, read from the DLAMI's
# neuron-monitor and published to CloudWatch with the AWS CLI, once a minute.
#
# neuron-monitor writes one JSON report a line (format: the Neuron Monitor User Guide); each
# report becomes one `aws cloudwatch put-metric-data` call in NAMESPACE, dimension InstanceId:
# - NeuronCoreUtilization (Percent): one datum holding every NeuronCore of the instance (an idle
#   one at 0), so that its Average is the instance's utilization and its Maximum the busiest core's;
# - NeuronDeviceMemoryUsed (Bytes): the device memory the Neuron applications hold.
# A metric that some application's report lacks is left out rather than published too low.
#
# Not neuron-monitor-cloudwatch.py, the sample beside neuron-monitor: it needs boto3 in the host's
# Python, and its metric names are not documented, where Inf2Server's metric methods name these.
# Standard library only, for the DLAMI's /usr/bin/python3 (3.10). Settings: REGION, NAMESPACE,
# INSTANCE_ID (/etc/default/llm-inference-metrics); NEURON_MONITOR moves the monitor (the tests
# run a stand-in that way). The comments here stay out of the user data (server.installed_text).
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

MONITOR = "/opt/aws/neuron/bin/neuron-monitor"
PERIOD_S = 60


def monitor_config(period_s: int) -> dict[str, Any]:
    # Only the two metric groups published, for every Neuron application on the host.
    metrics = [{"type": "neuroncore_counters"}, {"type": "memory_used"}]
    return {"period": f"{period_s}s", "neuron_runtimes": [{"tag_filter": ".*", "metrics": metrics}]}


def group(runtime: Any, name: str) -> dict[str, Any] | None:
    # A runtime's metric group; None when neuron-monitor could not collect it.
    found = ((runtime or {}).get("report") or {}).get(name)
    return dict(found) if isinstance(found, dict) and not found.get("error") else None


def utilization(runtimes: list[Any], cores: int) -> list[float] | None:
    busy: dict[int, float] = {}
    for runtime in runtimes:
        counters = group(runtime, "neuroncore_counters")
        if counters is None:
            return None
        for index, core in (counters.get("neuroncores_in_use") or {}).items():
            busy[int(index)] = min(busy.get(int(index), 0.0) + float(core.get("neuroncore_utilization", 0.0)), 100.0)
    return [busy.get(index, 0.0) for index in range(max(cores, max(busy, default=-1) + 1))]


def device_memory(runtimes: list[Any]) -> int | None:
    total = 0
    for runtime in runtimes:
        used = group(runtime, "memory_used")
        if used is None:
            return None
        total += int((used.get("neuron_runtime_used_bytes") or {}).get("neuron_device") or 0)
    return total


def metric_data(report: dict[str, Any], instance_id: str) -> list[dict[str, Any]]:
    hardware = report.get("neuron_hardware_info") or {}
    cores = int(hardware.get("neuron_device_count") or 0) * int(hardware.get("neuroncore_per_device_count") or 0)
    runtimes = list(report.get("neuron_runtime_data") or [])
    dimensions = [{"Name": "InstanceId", "Value": instance_id}]
    data: list[dict[str, Any]] = []
    memory = device_memory(runtimes)
    if memory is not None:
        data.append({"MetricName": "NeuronDeviceMemoryUsed", "Value": memory, "Unit": "Bytes",
                     "Dimensions": dimensions})  # fmt: skip
    values = utilization(runtimes, cores)
    if values:
        data.append({"MetricName": "NeuronCoreUtilization", "Values": values, "Counts": [1] * len(values),
                     "Unit": "Percent", "Dimensions": dimensions})  # fmt: skip
    return data


def publish(data: list[dict[str, Any]], *, region: str, namespace: str) -> bool:
    command = ["aws", "cloudwatch", "put-metric-data", "--region", region, "--namespace", namespace,
               "--metric-data", json.dumps(data)]  # fmt: skip
    return subprocess.run(command, check=False).returncode == 0


def main() -> int:
    region, namespace, instance_id = (os.environ[name] for name in ("REGION", "NAMESPACE", "INSTANCE_ID"))
    with tempfile.NamedTemporaryFile("w", suffix=".json") as config:
        json.dump(monitor_config(PERIOD_S), config)
        config.flush()
        monitor = os.environ.get("NEURON_MONITOR", MONITOR)
        with subprocess.Popen([monitor, "-c", config.name], stdout=subprocess.PIPE, text=True) as process:
            assert process.stdout is not None
            for line in process.stdout:
                try:
                    report = json.loads(line)
                except ValueError:
                    print(f"neuron-metrics: skipped a line that is not JSON: {line[:200]!r}", file=sys.stderr)
                    continue
                data = metric_data(report, instance_id)
                if data and not publish(data, region=region, namespace=namespace):
                    print("neuron-metrics: put-metric-data failed; the next report is sent", file=sys.stderr)
    # neuron-monitor ended: exit with an error, and systemd starts the service again.
    print(f"neuron-metrics: neuron-monitor exited ({process.returncode}); systemd starts it again", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
