"""What SageMaker publishes to CloudWatch about an endpoint, from what the local AWS's runtime
serves and runs, and nothing its mode does not publish: each datum is checked against the
catalog of what SageMaker publishes per endpoint mode and instance kind
(``llm_contracts/sagemaker_metrics.py``, with each metric's source page) before it is stored.

* per invocation (InvokeEndpoint, InvokeEndpointWithResponseStream): ``Invocations`` 1,
  ``InvocationsPerInstance`` 1/instances or ``InvocationsPerCopy`` 1/copies ("1/numberOfInstances
  is sent as the value on each request", API reference, ScalingPolicyMetric),
  ``Invocation4XXErrors``, ``Invocation5XXErrors`` and ``InvocationModelErrors`` 1 or 0 (the
  model's answer 4xx, 5xx, anything but 2xx or no answer), ``ModelLatency`` (the container's time:
  a stream's until its end) and ``OverheadLatency`` (the rest of SageMaker's), microseconds,
  ``ConcurrentRequestsPerModel`` / ``PerCopy`` (the requests in flight at it);
* per request that finds no copy of a component: ``NoCapacityInvocationFailures`` 1;
* per asynchronous request: what the async page lists of it (the model's 4xx and 5xx, its
  latency, the request's time in the queue and in all, failures), and every minute the queue:
  ``ApproximateBacklogSize``, per instance, the oldest request's age, ``HasBacklogWithoutCapacity``;
* every minute a variant or component with capacity served nothing: 0 of ``Invocations`` and of
  the per-instance or per-copy count, which target tracking needs to scale in when idle (the
  Application Auto Scaling User Guide: a target scales in to zero on a metric that "emits real 0
  values"; SageMaker's scale-to-zero guide scales copies in to zero on InvocationsPerCopy);
* every minute, per instance (a container here): ``CPUUtilization`` and ``MemoryUtilization`` of
  its processes (psutil), ``DiskUtilization`` of what it holds on its ML storage volume. GPU
  metrics need a GPU: tests publish them as SageMaker would.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from llm_contracts import instances
from llm_contracts import sagemaker_metrics as catalog
from local_aws.cloudwatch import publish

log = logging.getLogger("local_aws.sagemaker.metrics")

MICROSECONDS = 1_000_000


@dataclass(frozen=True)
class Served:
    """What served an invocation: an endpoint's variant, or an inference component on it."""

    account: str
    region: str
    endpoint: str
    variant: str
    #: ``realtime``, ``inference-component`` or ``async`` (catalog.MODES).
    mode: str
    instance_type: str
    component: str | None = None

    def dimensions(self, names: Iterable[str]) -> list[dict[str, str]]:
        values = {"EndpointName": self.endpoint, "VariantName": self.variant}
        if self.component is not None:
            values["InferenceComponentName"] = self.component
        return [{"Name": n, "Value": values[n]} for n in names]


def _datum(name: str, value: float, unit: str) -> dict[str, Any]:
    return {"MetricName": name, "Value": float(value), "Unit": unit}


def emit(served: Served, namespace: str, data: Iterable[Mapping[str, Any]]) -> list[str]:
    """Store `data` (name, value, unit; no dimensions) as SageMaker publishes them for
    `served`, each with the dimensions the catalog gives it in `served`'s mode; a datum the
    catalog does not list for the mode is left out and logged as the emulator's fault. The
    names stored."""
    kind = catalog.kind(served.instance_type)
    out, stored = [], []
    for datum in data:
        entry = _entry(namespace, str(datum["MetricName"]), served.mode, kind)
        if entry is None:
            log.error("SageMaker does not publish %s %s for an endpoint in %s mode: not emitted", namespace,
                      datum["MetricName"], served.mode)  # fmt: skip
            continue
        out.append({**datum, "Dimensions": served.dimensions(entry.dimensions)})
        stored.append(entry.name)
    publish(served.account, served.region, namespace, out)
    return stored


def _entry(namespace: str, name: str, mode: str, kind: str) -> catalog.PublishedMetric | None:
    """The catalog's entry for a metric an endpoint of `mode` on `kind` publishes."""
    found = [m for m in catalog.published(mode, kind) if (m.namespace, m.name) == (namespace, name)]
    return found[0] if found else None


def invoked(
    served: Served, *, capacity: int, status: int | None, model_s: float, total_s: float, in_flight: int
) -> list[str]:
    """One invocation answered (`status`: the container's HTTP status, None for no answer),
    with `capacity` instances or copies serving, the container's time `model_s` of SageMaker's
    `total_s`, `in_flight` requests at the model then (this one among them)."""
    answered = status is not None and 200 <= status < 300
    per = "InvocationsPerCopy" if served.component is not None else "InvocationsPerInstance"
    data = [
        _datum("Invocation4XXErrors", status is not None and 400 <= status < 500, "None"),
        _datum("Invocation5XXErrors", status is not None and status >= 500, "None"),
        _datum("ModelLatency", model_s * MICROSECONDS, "Microseconds"),
    ]
    if served.mode != "async":
        data += [
            _datum("Invocations", 1, "None"),
            _datum(per, 1 / max(capacity, 1), "None"),
            _datum("InvocationModelErrors", not answered, "None"),
            _datum("OverheadLatency", max(total_s - model_s, 0.0) * MICROSECONDS, "Microseconds"),
            _datum(
                "ConcurrentRequestsPerCopy" if served.component else "ConcurrentRequestsPerModel", in_flight, "None"
            ),
        ]
    return emit(served, catalog.INVOCATIONS_NAMESPACE, data)


def no_capacity(served: Served) -> list[str]:
    """A request that found no copy of the component."""
    return emit(served, catalog.INVOCATIONS_NAMESPACE, [_datum("NoCapacityInvocationFailures", 1, "None")])


def idle(served: Served) -> list[str]:
    """A minute in which the variant or component, with capacity, served nothing."""
    per = "InvocationsPerCopy" if served.component is not None else "InvocationsPerInstance"
    return emit(served, catalog.INVOCATIONS_NAMESPACE, [_datum("Invocations", 0, "None"), _datum(per, 0, "None")])


def async_processed(
    served: Served, *, failed: bool, queued_s: float, total_s: float, download_s: float, upload_s: float
) -> list[str]:
    """One asynchronous request done (answered, or `failed`), after `queued_s` in the queue and
    `total_s` from its receipt to its notice."""
    return emit(
        served,
        catalog.INVOCATIONS_NAMESPACE,
        [
            _datum("InvocationsProcesssed", 1, "Count"),
            _datum("InvocationFailures", failed, "Count"),
            _datum("TimeInBacklog", queued_s * MICROSECONDS, "Microseconds"),
            _datum("TotalProcessingTime", total_s * 1000, "Milliseconds"),
            _datum("RequestDownloadLatency", download_s * MICROSECONDS, "Microseconds"),
            _datum("ResponseUploadLatency", upload_s * MICROSECONDS, "Microseconds"),
        ],
    )


def backlog(served: Served, *, queued: int, oldest_s: float, instances: int) -> list[str]:
    """The asynchronous endpoint's queue, once a minute: requests queued or in progress, per
    instance, the oldest one's age, and whether requests wait with no instance."""
    return emit(
        served,
        catalog.INVOCATIONS_NAMESPACE,
        [
            _datum("ApproximateBacklogSize", queued, "Count"),
            _datum("ApproximateBacklogSizePerInstance", queued / instances if instances else queued, "Count"),
            _datum("ApproximateAgeOfOldestRequest", oldest_s, "Seconds"),
            _datum("HasBacklogWithoutCapacity", bool(queued and not instances), "None"),
        ],
    )


@dataclass
class InstanceUse:
    """What one instance (a container here) uses, as SageMaker measures it: its processes' CPU
    since the last look (percent of one core, summed over them: psutil) and their memory, as a
    share of the instance type's memory (the host's where the type is not known); the files it
    holds (its model data and scratch), as a share of its ML storage volume (`volume_bytes`; the
    file system it is on where none is given)."""

    pid: int
    folder: Path
    instance_type: str
    volume_bytes: int | None = None
    _processes: dict[int, psutil.Process] = field(default_factory=dict, repr=False)

    def _tree(self) -> list[psutil.Process]:
        try:
            leader = psutil.Process(self.pid)
            found = [leader, *leader.children(recursive=True)]
        except psutil.Error:
            return []
        # The same objects each time: cpu_percent measures since the object's last call.
        self._processes = {p.pid: self._processes.get(p.pid, p) for p in found}
        return list(self._processes.values())

    def sample(self) -> tuple[float, float, float]:
        """(CPU %, memory %, disk %) now."""
        cpu = rss = 0.0
        for process in self._tree():
            try:
                cpu += process.cpu_percent(interval=None)
                rss += process.memory_info().rss
            except psutil.Error:
                continue  # ended meanwhile
        known = instances.host(self.instance_type)
        memory = known[1] * 1024**3 if known else psutil.virtual_memory().total
        held = sum(f.stat().st_size for f in self.folder.rglob("*") if f.is_file()) if self.folder.exists() else 0
        volume = self.volume_bytes or (shutil.disk_usage(self.folder).total if self.folder.exists() else 1)
        return cpu, 100.0 * rss / memory, 100.0 * held / volume


def instance_use(served: Served, use: InstanceUse) -> list[str]:
    """One instance's use, once a minute."""
    cpu, memory, disk = use.sample()
    return instance(served, cpu_percent=cpu, memory_percent=memory, disk_percent=disk)


def instance(served: Served, *, cpu_percent: float, memory_percent: float, disk_percent: float) -> list[str]:
    """One instance's use, once a minute (CPU as a percent of one core, over all of them)."""
    return emit(
        served,
        catalog.INSTANCE_NAMESPACE,
        [
            _datum("CPUUtilization", cpu_percent, "Percent"),
            _datum("MemoryUtilization", memory_percent, "Percent"),
            _datum("DiskUtilization", disk_percent, "Percent"),
        ],
    )
