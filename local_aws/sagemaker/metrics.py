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

import dataclasses
import functools
import logging
import shutil
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import psutil
from moto.core.base_backend import BackendDict, BaseBackend
from moto.sagemaker.models import sagemaker_backends

from llm_contracts import instances
from llm_contracts import sagemaker_metrics as catalog
from local_aws import host
from local_aws.cloudwatch import publish
from local_aws.host import HOST
from local_aws.sagemaker.async_inference import AsyncRequest, pending_async
from local_aws.sagemaker.components import components
from local_aws.sagemaker.runtime import Deployment, hosting_plane

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


class MetricsBackend(BaseBackend):
    """What SageMaker's metrics of one account and region carry from one minute to the next."""

    #: Whether SageMaker publishes its metrics: the patch that wires this module in sets it
    #: (local_aws/patches/sagemakerruntime.py), and reverting it leaves stock moto's silence.
    PUBLISHES: ClassVar[bool] = False

    def __init__(self, region_name: str, account_id: str) -> None:
        super().__init__(region_name, account_id)
        #: The account's own switch, on unless turned off: bench/local_aws_soak.py's arm with
        #: the metrics plane off.
        self.publishing = True
        self._lock = threading.Lock()
        #: When each variant or component last served an invocation, on the local AWS's clock.
        self._last_served: dict[Served, datetime] = {}
        #: Each running instance's use being measured (by its container's id): CPU is measured
        #: since the last look.
        self.uses: dict[int, InstanceUse] = {}

    @property
    def publishes(self) -> bool:
        return self.PUBLISHES and self.publishing

    def served(self, served: Served, at: datetime) -> None:
        with self._lock:
            self._last_served[served] = at

    def last_served(self, served: Served) -> datetime | None:
        with self._lock:
            return self._last_served.get(served)


metrics_backends = BackendDict(MetricsBackend, "sagemaker")


def _datum(name: str, value: float, unit: str) -> dict[str, Any]:
    return {"MetricName": name, "Value": float(value), "Unit": unit}


def emit(served: Served, namespace: str, data: Iterable[Mapping[str, Any]], at: datetime | None = None) -> list[str]:
    """Store `data` (name, value, unit; no dimensions) as SageMaker publishes them for
    `served`, each with the dimensions the catalog gives it in `served`'s mode; a datum the
    catalog does not list for the mode is left out and logged as the emulator's fault. The
    names stored. `at`: the time they are of (default: now)."""
    if not metrics_backends[served.account][served.region].publishes:
        return []
    kind = catalog.kind(served.instance_type)
    out, stored = [], []
    for datum in data:
        entry = _entry(namespace, str(datum["MetricName"]), served.mode, kind)
        if entry is None:
            log.error("SageMaker does not publish %s %s for an endpoint in %s mode: not emitted", namespace,
                      datum["MetricName"], served.mode)  # fmt: skip
            continue
        out.append({**datum, "Dimensions": served.dimensions(entry.dimensions), **({"Timestamp": at} if at else {})})
        stored.append(entry.name)
    publish(served.account, served.region, namespace, out)
    return stored


@functools.cache
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
    metrics_backends[served.account][served.region].served(served, host.now())
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


def idle(served: Served, at: datetime | None = None) -> list[str]:
    """A minute (from `at`) in which the variant or component, with capacity, served nothing."""
    per = "InvocationsPerCopy" if served.component is not None else "InvocationsPerInstance"
    zeros = [_datum("Invocations", 0, "None"), _datum(per, 0, "None")]
    return emit(served, catalog.INVOCATIONS_NAMESPACE, zeros, at)


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


def backlog(served: Served, *, queued: int, oldest_s: float, instances: int, at: datetime | None = None) -> list[str]:
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
        at,
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


def instance_use(served: Served, use: InstanceUse, at: datetime | None = None) -> list[str]:
    """One instance's use, once a minute (the minute from `at`)."""
    cpu, memory, disk = use.sample()
    return instance(served, cpu_percent=cpu, memory_percent=memory, disk_percent=disk, at=at)


def instance(
    served: Served, *, cpu_percent: float, memory_percent: float, disk_percent: float, at: datetime | None = None
) -> list[str]:
    """One instance's use, once a minute (CPU as a percent of one core, over all of them)."""
    return emit(
        served,
        catalog.INSTANCE_NAMESPACE,
        [
            _datum("CPUUtilization", cpu_percent, "Percent"),
            _datum("MemoryUtilization", memory_percent, "Percent"),
            _datum("DiskUtilization", disk_percent, "Percent"),
        ],
        at,
    )


# --- what the runtime serves and runs, measured --------------------------------------------------


def served_by(key: tuple[str, str, str], variant: str) -> Served | None:
    """What serves invocations routed to the runtime's `key` and `variant`: an endpoint's
    variant, or an inference component (its key ``inference-component/<name>``); None once the
    resource is gone."""
    account, region, name = key
    backend: Any = sagemaker_backends[account][region]
    component = None
    if name.startswith("inference-component/"):
        ic = components(account, region).get(name.removeprefix("inference-component/"))
        if ic is None:
            return None
        component, name, variant = ic.name, ic.endpoint_name, ic.variant_name
    endpoint = backend.endpoints.get(name)
    config = backend.endpoint_configs.get(endpoint.endpoint_config_name) if endpoint is not None else None
    if config is None:
        return None
    described = next((v for v in config.production_variants if v["VariantName"] == variant), None)
    if described is None:
        return None
    mode = "inference-component" if component else "async" if config.async_inference_config else "realtime"
    return Served(account, region, name, variant, mode, str(described["InstanceType"]), component)


@dataclass
class Measured:
    """One invocation as SageMaker measures it: from its receipt, the container's part of it."""

    served: Served
    capacity: int
    in_flight: int
    started: float = field(default_factory=time.monotonic)
    status: int | None = None
    model_started: float | None = None
    model_s: float = 0.0

    def model_begins(self) -> None:
        self.model_started = time.monotonic()

    def model_ends(self, status: int | None) -> None:
        """The container answered `status` (None: no answer), or its stream ended."""
        self.status = status
        if self.model_started is not None:
            self.model_s = time.monotonic() - self.model_started

    def publish(self) -> None:
        invoked(self.served, capacity=self.capacity, status=self.status, model_s=self.model_s,
                total_s=time.monotonic() - self.started, in_flight=self.in_flight)  # fmt: skip


def measure(key: tuple[str, str, str], variant: str, adapter: str | None = None) -> Measured | None:
    """An invocation the runtime routed to `key`'s `variant`, to measure (None: nothing serves
    it); one named by an `adapter` component is published under the adapter's name."""
    served = served_by(key, variant)
    if served is not None and adapter is not None:
        served = dataclasses.replace(served, component=adapter)
    hosted = hosting_plane().find(key)
    if served is None or hosted is None or hosted.live is None:
        return None
    return Measured(served, hosted.live.ready(variant), hosted.live.busy(variant))


def found_no_capacity(key: tuple[str, str, str], variant: str | None) -> None:
    """A request to `key` that found no instance (copy): counted where SageMaker counts it."""
    hosted = hosting_plane().find(key)
    name = variant or (next(iter(hosted.live.specs)) if hosted is not None and hosted.live is not None else None)
    served = served_by(key, name) if name else None
    if served is not None and served.component is not None:
        no_capacity(served)


def _volume_bytes(served: Served) -> int | None:
    backend: Any = sagemaker_backends[served.account][served.region]
    endpoint = backend.endpoints.get(served.endpoint)
    config = backend.endpoint_configs.get(endpoint.endpoint_config_name) if endpoint is not None else None
    for variant in config.production_variants if config is not None else []:
        if variant["VariantName"] == served.variant and variant.get("VolumeSizeInGB"):
            return int(variant["VolumeSizeInGB"]) * 1024**3
    return None


def _deployment_minute(key: tuple[str, str, str], deployment: Deployment, at: datetime, seen: set[int]) -> None:
    """The minute before `at` of `deployment`'s variants, stamped with its start."""
    minute = at - timedelta(minutes=1)
    for variant in deployment.specs:
        served = served_by(key, variant)
        if served is None:
            continue
        for container in deployment.instances.get(variant, []):
            if container.process is None or container.run_dir is None:
                continue
            seen.add(id(container))
            use = metrics_backends[served.account][served.region].uses.setdefault(
                id(container), InstanceUse(container.process.pid, container.run_dir, served.instance_type,
                                           _volume_bytes(served))
            )  # fmt: skip
            instance_use(served, use, minute)
        capacity = deployment.ready(variant)
        if served.mode == "async":
            waiting = pending_async(key)
            oldest = min((r.received_at for r in waiting), default=at)
            backlog(served, queued=len(waiting), oldest_s=(at - oldest).total_seconds(), instances=capacity, at=minute)
        else:
            last = metrics_backends[served.account][served.region].last_served(served)
            if capacity and (last is None or last < minute):
                idle(served, minute)


def publish_minute(at: datetime) -> None:
    """What SageMaker publishes every minute: each instance's use, each idle variant's or
    component's zero invocations, each async endpoint's queue."""
    if not MetricsBackend.PUBLISHES:
        return
    seen: set[int] = set()
    for key, hosted in hosting_plane().hosted():
        if hosted.live is not None:
            try:
                _deployment_minute(key, hosted.live, at, seen)
            except Exception as exc:  # the local AWS's own fault: kept, and the other endpoints' published
                HOST.faults.record("sagemaker", f"the metrics of endpoint {key[2]}", exc)
    for regions in list(metrics_backends.values()):
        for backend in list(regions.values()):
            for gone in set(backend.uses) - seen:
                backend.uses.pop(gone, None)


def async_answered(request: AsyncRequest, timing: Any, failed: bool, total_s: float) -> None:
    """An asynchronous request done: the model's answer, if it got one, and the request's times."""
    hosted = hosting_plane().find(request.key)
    variant = timing.variant or (next(iter(hosted.live.specs), None) if hosted and hosted.live else None)
    served = served_by(request.key, variant) if variant else None
    if served is None:
        return
    if timing.status is not None:
        invoked(served, capacity=_capacity(request.key, served.variant), status=timing.status,
                model_s=timing.model_s or 0.0, total_s=total_s, in_flight=1)  # fmt: skip
    async_processed(served, failed=failed, queued_s=timing.queued_s, total_s=total_s, download_s=timing.download_s,
                    upload_s=timing.upload_s)  # fmt: skip


def _capacity(key: tuple[str, str, str], variant: str) -> int:
    hosted = hosting_plane().find(key)
    return hosted.live.ready(variant) if hosted is not None and hosted.live is not None else 0
