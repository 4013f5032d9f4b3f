"""What the local AWS's SageMaker publishes (local_aws/sagemaker/metrics.py): per endpoint mode,
the catalog's metrics with the catalog's dimensions (llm_contracts/sagemaker_metrics.py), and
nothing the catalog does not list for the mode."""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from moto.cloudwatch.models import cloudwatch_backends

from llm_contracts import sagemaker_metrics as catalog
from local_aws.sagemaker import metrics
from local_aws.sagemaker.metrics import InstanceUse, Served

_accounts = itertools.count(210_000_000_000)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Served's fields, in an account of the test's own (moto's backends are the process's), and
    the metrics published (as the patch that wires the module in lets them be)."""
    monkeypatch.setattr(metrics.MetricsBackend, "PUBLISHES", True)
    account = str(next(_accounts))
    yield {"account": account, "region": "eu-west-1", "endpoint": "e", "variant": "AllTraffic",
           "instance_type": "ml.g5.xlarge"}  # fmt: skip
    cloudwatch_backends[account].pop("eu-west-1", None)


def stored(served: Served) -> dict[tuple[str, str], tuple[list[tuple[str, str]], list[float]]]:
    """(namespace, name) -> (dimensions, values) of what the account holds."""
    found: dict[tuple[str, str], tuple[list[tuple[str, str]], list[float]]] = {}
    datum: Any
    for datum in cloudwatch_backends[served.account][served.region].metric_data:
        dims = [(str(d.name), str(d.value)) for d in datum.dimensions]
        # A minute's values in the order they first came (local_aws/cloudwatch/metrics.py).
        found.setdefault((datum.namespace, datum.name), (dims, []))[1].extend(datum.distribution().as_values())
    return found


def test_a_real_time_invocation_as_sagemaker_publishes_it(served: dict[str, Any]) -> None:
    where = Served(**served, mode="realtime")
    metrics.invoked(where, capacity=2, status=200, model_s=0.25, total_s=0.3, in_flight=3)
    metrics.invoked(where, capacity=2, status=503, model_s=0.01, total_s=0.02, in_flight=1)
    data = stored(where)
    invocations = catalog.INVOCATIONS_NAMESPACE
    assert {name for _, name in data} == {
        "Invocations", "InvocationsPerInstance", "Invocation4XXErrors", "Invocation5XXErrors", "InvocationModelErrors",
        "ModelLatency", "OverheadLatency", "ConcurrentRequestsPerModel",
    }  # fmt: skip
    assert data[invocations, "InvocationsPerInstance"] == ([("EndpointName", "e"), ("VariantName", "AllTraffic")],
                                                           [0.5, 0.5])  # fmt: skip
    assert data[invocations, "Invocation5XXErrors"][1] == [0.0, 1.0]
    assert data[invocations, "InvocationModelErrors"][1] == [0.0, 1.0]
    assert data[invocations, "ModelLatency"][1] == pytest.approx([250_000, 10_000])
    assert data[invocations, "OverheadLatency"][1] == pytest.approx([50_000, 10_000])


def test_a_component_publishes_per_component(served: dict[str, Any]) -> None:
    where = Served(**served, mode="inference-component", component="c")
    metrics.invoked(where, capacity=4, status=None, model_s=1.0, total_s=1.0, in_flight=1)
    metrics.no_capacity(where)
    data = stored(where)
    assert data[catalog.INVOCATIONS_NAMESPACE, "InvocationsPerCopy"] == ([("InferenceComponentName", "c")], [0.25])
    # No answer at all (a crashed container): a model error, neither 4xx nor 5xx.
    assert [data[catalog.INVOCATIONS_NAMESPACE, n][1] for n in ("InvocationModelErrors", "Invocation5XXErrors")] == [
        [1.0], [0.0]]  # fmt: skip
    assert data[catalog.INVOCATIONS_NAMESPACE, "NoCapacityInvocationFailures"][1] == [1.0]
    assert ("AWS/SageMaker", "InvocationsPerInstance") not in data


def test_an_async_endpoint_publishes_only_what_its_page_lists(
    served: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    where = Served(**served, mode="async")
    metrics.invoked(where, capacity=1, status=200, model_s=0.1, total_s=0.2, in_flight=1)
    metrics.async_processed(where, failed=True, queued_s=2, total_s=3, download_s=0.01, upload_s=0.02)
    metrics.backlog(where, queued=3, oldest_s=40, instances=0)
    names = {name for _, name in stored(where)}
    assert {"Invocations", "InvocationModelErrors", "OverheadLatency", "InvocationsPerInstance"}.isdisjoint(names)
    assert {"Invocation4XXErrors", "ModelLatency", "InvocationFailures", "HasBacklogWithoutCapacity"} <= names
    assert stored(where)[catalog.INVOCATIONS_NAMESPACE, "HasBacklogWithoutCapacity"] == ([("EndpointName", "e")], [1.0])
    # Asked for a metric its mode does not publish, the emulator refuses itself and says so.
    with caplog.at_level(logging.ERROR, logger="local_aws.sagemaker.metrics"):
        assert metrics.idle(where) == []
    assert "does not publish AWS/SageMaker Invocations for an endpoint in async mode" in caplog.text


@pytest.mark.parametrize("mode", catalog.MODES)
def test_every_metric_emitted_is_in_the_catalog_for_its_mode(
    served: dict[str, Any], mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    where = Served(**served, mode=mode, component="c" if mode == "inference-component" else None)
    metrics.invoked(where, capacity=1, status=200, model_s=0.1, total_s=0.2, in_flight=1)
    metrics.instance(where, cpu_percent=50, memory_percent=10, disk_percent=5)
    if mode == "async":
        metrics.async_processed(where, failed=False, queued_s=1, total_s=2, download_s=0.01, upload_s=0.01)
        metrics.backlog(where, queued=0, oldest_s=0, instances=1)
    else:
        metrics.idle(where)
    if mode == "inference-component":
        metrics.no_capacity(where)
    assert "does not publish" not in caplog.text
    kind = catalog.kind(where.instance_type)
    for (namespace, name), (dimensions, _) in stored(where).items():
        entry = catalog.find(namespace, name, {d for d, _ in dimensions}, mode=mode, kind_=kind)
        assert entry is not None, f"{namespace} {name} {dimensions} in {mode}"


def test_an_instance_use_is_its_processes_and_files(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "model.bin").write_bytes(b"\0" * 1_000_000)
    busy = subprocess.Popen([sys.executable, "-c", "x = bytearray(50_000_000)\nwhile True: pass"])
    try:
        use = InstanceUse(busy.pid, tmp_path, "ml.g5.xlarge", volume_bytes=10_000_000)
        # What the process consumed between the sampler's two looks, as the kernel accounts it:
        # the share it got of the host depends on the host's load (other tests, other users), not
        # the measurement, which must report exactly that CPU time over that window. The sampler
        # looks (psutil: the monotonic clock, then the CPU time) within each use.sample(): this
        # test looks just before and just after each, which brackets the sampler's window.
        process = psutil.Process(busy.pid)

        def look() -> tuple[float, float]:
            # clock: brackets the sampler's own looks, an order that holds at any speed: no bound
            return sum(process.cpu_times()[:2]), time.monotonic()

        (c0, t0), _, (c1, t1) = look(), use.sample(), look()  # psutil measures CPU between two looks
        while look()[0] - c1 < 0.2:  # until it has run 0.2 s of CPU, however busy the host
            time.sleep(0.05)
        (c2, t2), (cpu, memory, disk), (c3, t3) = look(), use.sample(), look()
    finally:
        busy.kill()
        busy.wait()
    # The sampler's window holds at least the CPU time between its inner brackets over the time
    # between its outer ones, and at most the converse; psutil rounds to a tenth of a percent.
    assert 100 * (c2 - c1) / (t3 - t0) - 0.1 <= cpu <= 100 * (c3 - c0) / (t2 - t1) + 0.1
    assert 0 < cpu <= 100 * (os.cpu_count() or 1)  # percent of one core, over all of them
    assert 50_000_000 / 16 / 1024**3 * 100 < memory < 1  # of ml.g5.xlarge's 16 GiB
    assert disk == pytest.approx(10.0)
    gone = InstanceUse(busy.pid, tmp_path / "gone", "ml.g5.xlarge", volume_bytes=10)
    assert gone.sample() == (0.0, 0.0, 0.0)
