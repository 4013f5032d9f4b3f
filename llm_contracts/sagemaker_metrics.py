"""What SageMaker publishes for an endpoint, per endpoint mode and instance kind: each metric's
namespace, dimensions, unit, valid statistics, value range and the page that says so.

Two readers: the stacks' synthesis check (tests/infra/metric_check.py), which refuses an alarm,
dashboard widget or scaling policy on a metric its endpoint's mode does not publish, with
other dimensions or another statistic, or with a threshold outside the metric's range on its
instance type; and the local AWS, which is to emit exactly what :func:`published` lists for a
mode, each datum as :attr:`PublishedMetric.datum` says, from the invocations it serves.

The pages, read in December 2026 (:data:`SOURCES`):

* ``monitoring``: the endpoint, invocation and inference-component tables. Invocation metrics
  are per ``EndpointName, VariantName``, an inference component's per
  ``InferenceComponentName``; instance metrics per ``EndpointName, VariantName`` under
  ``/aws/sagemaker/Endpoints``; GPUUtilization and GPUMemoryUtilization range over 0-100
  "multiplied by the number of GPUs", CPUUtilization over 0-100 per core; the ``*Normalized``
  and ``*Reservation`` metrics only on endpoints that host inference components. The page gives
  the instance metrics a unit but no statistics: Average, Minimum, Maximum and SampleCount are
  listed here (SampleCount counts the instances reporting: the async troubleshooting page).
* ``async``: "an exhaustive list": any metric it does not name (OverheadLatency, Invocations,
  InvocationsPerInstance, InvocationModelErrors among them) "is not published if the endpoint
  is enabled for asynchronous inference"; ModelLatency without percentiles. ``InvocationsProcesssed``
  is spelled as the page spells it.
* ``async-autoscale``: HasBacklogWithoutCapacity (per EndpointName, Average in its example).
* ``scale-to-zero``: NoCapacityInvocationFailures (per InferenceComponentName, Sum in its
  example), emitted when a request finds no copy.
* ``detailed-observability`` and ``otel-metrics``: the OpenTelemetry metrics of real-time
  endpoints' serving frameworks (vLLM, SGLang), queried with PromQL (``promql``), labelled
  ``aws.sagemaker.endpoint.name`` and ``aws.sagemaker.inference_component.name``; only these
  reach a PromQL alarm. Enhanced metrics (``enhanced``) add instance and container dimensions,
  which the stacks do not use: they are not listed.

Standard library only: synthesis and the local AWS import this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llm_contracts import instances

#: How an endpoint serves (the construct library's ``MODES``).
MODES = ("realtime", "inference-component", "async")
#: What an instance computes with: NVIDIA GPUs, CPUs alone, or Inferentia/Trainium.
KINDS = ("gpu", "cpu", "inferentia")
#: The pages the entries come from.
SOURCES = {
    "monitoring": "https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html",
    "async": "https://docs.aws.amazon.com/sagemaker/latest/dg/async-inference-monitor.html",
    "async-autoscale": "https://docs.aws.amazon.com/sagemaker/latest/dg/async-inference-autoscale.html",
    "async-troubleshooting": "https://docs.aws.amazon.com/sagemaker/latest/dg/async-inference-troubleshooting.html",
    "scale-to-zero": "https://docs.aws.amazon.com/sagemaker/latest/dg/endpoint-auto-scaling-zero-instances.html",
    "enhanced": "https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch-enhanced-metrics.html",
    "detailed-observability": (
        "https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch-detailed-observability.html"
    ),
    "otel-metrics": "https://docs.aws.amazon.com/sagemaker/latest/dg/inference-monitoring.html",
    "promql": "https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-detailed-observability-promql.html",
}

INVOCATIONS_NAMESPACE = "AWS/SageMaker"
INSTANCE_NAMESPACE = "/aws/sagemaker/Endpoints"
COMPONENT_NAMESPACE = "/aws/sagemaker/InferenceComponents"
#: Detailed observability's OpenTelemetry metrics have no CloudWatch namespace: PromQL reads them.
OTEL = "otel"

#: CloudWatch's statistics, as templates and GetMetricStatistics name them; percentiles are
#: extended statistics (``p99``) and count as :data:`PERCENTILES`.
AVERAGE, SUM, MINIMUM, MAXIMUM, SAMPLE_COUNT, PERCENTILES = (
    "Average", "Sum", "Minimum", "Maximum", "SampleCount", "percentiles",
)  # fmt: skip

ENDPOINT_VARIANT = ("EndpointName", "VariantName")
ENDPOINT = ("EndpointName",)
COMPONENT = ("InferenceComponentName",)
#: The OpenTelemetry labels of detailed observability that name an endpoint and a component.
OTEL_ENDPOINT, OTEL_COMPONENT = "aws.sagemaker.endpoint.name", "aws.sagemaker.inference_component.name"

_ALL_MODES = frozenset(MODES)
_SYNC_MODES = frozenset({"realtime", "inference-component"})
_ALL_KINDS = frozenset(KINDS)
_LATENCY = frozenset({AVERAGE, SUM, MINIMUM, MAXIMUM, SAMPLE_COUNT})
_INSTANCE = frozenset({AVERAGE, MINIMUM, MAXIMUM, SAMPLE_COUNT})


@dataclass(frozen=True)
class PublishedMetric:
    """One metric SageMaker publishes, in the modes and on the instance kinds it names."""

    name: str
    namespace: str
    #: The dimensions (for :data:`OTEL`, the labels) it is published with, all of them.
    dimensions: tuple[str, ...]
    unit: str
    statistics: frozenset[str]
    modes: frozenset[str]
    kinds: frozenset[str]
    #: The lowest and highest value; the highest is per GPU or per vCPU where :attr:`per` says
    #: so (None: no bound).
    low: float = 0.0
    high: float | None = None
    #: ``gpu`` or ``vcpu``: :attr:`high` is multiplied by the instance's count of them.
    per: str | None = None
    #: What one datum is, for the local AWS that emits it.
    datum: str = ""
    #: The key of its page in :data:`SOURCES`.
    source: str = "monitoring"
    #: Serving frameworks that publish it (detailed observability's framework metrics only).
    frameworks: frozenset[str] = field(default_factory=frozenset)

    @property
    def url(self) -> str:
        return SOURCES[self.source]

    def valid_statistic(self, statistic: str) -> bool:
        """Whether `statistic` (``Average``, ``p99``, ``tm99`` ...) is one the page lists."""
        if statistic in self.statistics:
            return True
        extended = statistic[:1] == "p" and statistic[1:].replace(".", "", 1).isdigit()
        return extended and PERCENTILES in self.statistics


def _invocation(
    name: str, unit: str, statistics: frozenset[str], datum: str, *, modes: frozenset[str] = _ALL_MODES, **kw: object
) -> list[PublishedMetric]:
    """An invocation metric: per endpoint and variant in the `modes` that publish it, and per
    inference component where that mode is one of them."""
    made = []
    for mode_set, dimensions in (
        (modes - {"inference-component"}, ENDPOINT_VARIANT),
        (modes & {"inference-component"}, COMPONENT),
    ):
        if mode_set:
            made.append(PublishedMetric(name, INVOCATIONS_NAMESPACE, dimensions, unit, statistics, frozenset(mode_set),
                                        _ALL_KINDS, datum=datum, **kw))  # type: ignore[arg-type]  # fmt: skip
    return made


_COUNT_STATS = frozenset({AVERAGE, SUM})
CATALOG: tuple[PublishedMetric, ...] = (
    # --- invocations (AWS/SageMaker) ---------------------------------------------------------
    *_invocation("Invocations", "None", frozenset({SUM}), "1 per request sent to the model",
                 modes=_SYNC_MODES),
    *_invocation("InvocationsPerInstance", "None", frozenset({SUM}),
                 "1/instances per request (the variant's instances when it was served)",
                 modes=frozenset({"realtime"})),
    *_invocation("InvocationsPerCopy", "None", frozenset({SUM}), "1/copies per request",
                 modes=frozenset({"inference-component"})),
    *_invocation("Invocation4XXErrors", "None", _COUNT_STATS, "1 per request the model answered 4xx, else 0",
                 high=1.0),
    *_invocation("Invocation5XXErrors", "None", _COUNT_STATS, "1 per request the model answered 5xx, else 0",
                 high=1.0),
    *_invocation("InvocationModelErrors", "None", _COUNT_STATS,
                 "1 per request the model did not answer 2xx (4xx, 5xx, socket error, malformed answer, timeout), "
                 "else 0", modes=_SYNC_MODES, high=1.0),
    *_invocation("ModelLatency", "Microseconds", _LATENCY | {PERCENTILES}, "the model's time for one request, us",
                 modes=_SYNC_MODES),
    *_invocation("ModelLatency", "Microseconds", _LATENCY, "the model's time for one request, us",
                 modes=frozenset({"async"}), source="async"),
    *_invocation("OverheadLatency", "Microseconds", _LATENCY,
                 "SageMaker's time around the model's for one request, us", modes=_SYNC_MODES),
    *_invocation("ConcurrentRequestsPerModel", "None", frozenset({MINIMUM, MAXIMUM}),
                 "requests in flight at the model", modes=frozenset({"realtime"})),
    *_invocation("ConcurrentRequestsPerCopy", "None", frozenset({MINIMUM, MAXIMUM}),
                 "requests in flight per copy", modes=frozenset({"inference-component"})),
    PublishedMetric("NoCapacityInvocationFailures", INVOCATIONS_NAMESPACE, COMPONENT, "None", frozenset({SUM}),
                    frozenset({"inference-component"}), _ALL_KINDS,
                    datum="1 per request that found no copy of the component", source="scale-to-zero"),
    # --- the async queue (AWS/SageMaker) ----------------------------------------------------------
    *(
        PublishedMetric(name, INVOCATIONS_NAMESPACE, ENDPOINT, unit, frozenset({AVERAGE, MAXIMUM, MINIMUM}),
                        frozenset({"async"}), _ALL_KINDS, datum=datum, source="async")
        for name, unit, datum in (
            ("ApproximateBacklogSize", "Count", "requests queued or being processed"),
            ("ApproximateBacklogSizePerInstance", "Count", "requests queued per instance"),
            ("ApproximateAgeOfOldestRequest", "Seconds", "age of the oldest queued request, s"),
        )
    ),
    PublishedMetric("HasBacklogWithoutCapacity", INVOCATIONS_NAMESPACE, ENDPOINT, "None",
                    frozenset({AVERAGE, MAXIMUM, MINIMUM}), frozenset({"async"}), _ALL_KINDS, high=1.0,
                    datum="1 while requests are queued and no instance runs, else 0", source="async-autoscale"),
    *(
        PublishedMetric(name, INVOCATIONS_NAMESPACE, ENDPOINT_VARIANT, unit, stats, frozenset({"async"}), _ALL_KINDS,
                        datum=datum, source="async")
        for name, unit, stats, datum in (
            ("RequestDownloadFailures", "Count", frozenset({SUM}), "1 per request whose input S3 could not give"),
            ("ResponseUploadFailures", "Count", frozenset({SUM}), "1 per answer that could not be written to S3"),
            ("NotificationFailures", "Count", frozenset({SUM}), "1 per SNS notice that failed"),
            ("RequestDownloadLatency", "Microseconds", _LATENCY, "time to read one request's input, us"),
            ("ResponseUploadLatency", "Microseconds", _LATENCY, "time to write one answer, us"),
            ("ExpiredRequests", "Count", frozenset({SUM}), "1 per request that expired in the queue"),
            ("InvocationFailures", "Count", frozenset({SUM}), "1 per request that failed, for any reason"),
            ("InvocationsProcesssed", "Count", frozenset({SUM}), "1 per request processed"),
            ("TimeInBacklog", "Microseconds", _LATENCY, "one request's time in the queue, us"),
            ("TotalProcessingTime", "Milliseconds", _LATENCY, "one request's time from receipt to its notice, ms"),
        )
    ),
    # --- the instances (/aws/sagemaker/Endpoints) ---------------------------------------------
    PublishedMetric("CPUUtilization", INSTANCE_NAMESPACE, ENDPOINT_VARIANT, "Percent", _INSTANCE, _ALL_MODES,
                    _ALL_KINDS, high=100.0, per="vcpu", datum="one instance's CPU use, % of one core times the cores"),
    *(
        PublishedMetric(name, INSTANCE_NAMESPACE, ENDPOINT_VARIANT, "Percent", _INSTANCE, _ALL_MODES, _ALL_KINDS,
                        high=100.0, datum=datum)
        for name, datum in (
            ("MemoryUtilization", "one instance's memory in use by its containers, %"),
            ("DiskUtilization", "one instance's ML storage volume in use by its containers, %"),
        )
    ),
    *(
        PublishedMetric(name, INSTANCE_NAMESPACE, ENDPOINT_VARIANT, "Percent", _INSTANCE, _ALL_MODES,
                        frozenset({"gpu"}), high=100.0, per="gpu", datum=datum)
        for name, datum in (
            ("GPUUtilization", "one instance's GPU use, % of one GPU summed over its GPUs"),
            ("GPUMemoryUtilization", "one instance's GPU memory in use, % of one GPU summed over its GPUs"),
        )
    ),
    *(
        PublishedMetric(name, INSTANCE_NAMESPACE, ENDPOINT_VARIANT, "Percent", _INSTANCE,
                        frozenset({"inference-component"}), kinds, high=100.0, datum=datum)
        for name, kinds, datum in (
            ("CPUUtilizationNormalized", _ALL_KINDS, "CPUUtilization over the cores, 0-100"),
            ("CPUReservation", _ALL_KINDS, "the cores the copies reserve, % of the instance's"),
            ("MemoryReservation", _ALL_KINDS, "the memory the copies reserve, % of the instance's"),
            ("GPUUtilizationNormalized", frozenset({"gpu"}), "GPUUtilization over the GPUs, 0-100"),
            ("GPUMemoryUtilizationNormalized", frozenset({"gpu"}), "GPUMemoryUtilization over the GPUs, 0-100"),
            ("GPUReservation", frozenset({"gpu"}), "the GPUs the copies reserve, % of the instance's"),
        )
    ),
    # --- the copies of an inference component (/aws/sagemaker/InferenceComponents) -------------
    *(
        PublishedMetric(name, COMPONENT_NAMESPACE, COMPONENT, "Percent", _INSTANCE,
                        frozenset({"inference-component"}), kinds, high=100.0, datum=datum)
        for name, kinds, datum in (
            ("CPUUtilizationNormalized", _ALL_KINDS, "a copy's CPU use over its reservation, 0-100"),
            ("MemoryUtilizationNormalized", _ALL_KINDS, "a copy's memory use over its reservation, 0-100"),
            ("GPUUtilizationNormalized", frozenset({"gpu"}), "a copy's GPU use over its reservation, 0-100"),
            ("GPUMemoryUtilizationNormalized", frozenset({"gpu"}), "a copy's GPU memory over its reservation, 0-100"),
        )
    ),
    # --- detailed observability: the serving framework's own metrics (PromQL) -------------------
    *(
        PublishedMetric(name, OTEL, (OTEL_ENDPOINT, OTEL_COMPONENT), unit, frozenset(), _SYNC_MODES, _ALL_KINDS,
                        high=high, datum=datum, source="otel-metrics", frameworks=frozenset({"vllm"}))
        for name, unit, high, datum in (
            ("vllm:num_requests_waiting", "Count", None, "requests waiting in the engine's queue (Queue Depth)"),
            ("vllm:num_requests_running", "Count", None, "requests the engine is running (Batch Size)"),
        )
    ),
)  # fmt: skip


def kind(instance_type: str) -> str:
    """The :data:`KINDS` entry of a SageMaker instance type (``ml.g5.xlarge``: ``gpu``)."""
    instance = instances.InstanceType(instance_type)
    if instance.gpus > 0:
        return "gpu"
    return "inferentia" if instance.is_neuron else "cpu"


def published(mode: str, kind_: str, *, framework: str | None = None) -> tuple[PublishedMetric, ...]:
    """Every metric an endpoint of `mode` on instances of `kind_` publishes (with `framework`,
    the detailed-observability metrics of that serving framework too)."""
    if mode not in MODES or kind_ not in KINDS:
        raise ValueError(f"mode {mode!r} or kind {kind_!r} is not one of {MODES} and {KINDS}")
    return tuple(
        m for m in CATALOG if mode in m.modes and kind_ in m.kinds and (not m.frameworks or framework in m.frameworks)
    )


def find(
    namespace: str, name: str, dimensions: set[str] | frozenset[str], *, mode: str, kind_: str,
    framework: str | None = None,
) -> PublishedMetric | None:  # fmt: skip
    """The catalog's entry for `name` in `namespace` with exactly those `dimensions`, as an
    endpoint of `mode` and `kind_` publishes it; None when it does not."""
    for m in published(mode, kind_, framework=framework):
        if (m.namespace, m.name) == (namespace, name) and set(m.dimensions) == set(dimensions):
            return m
    return None


def why_not(namespace: str, name: str, dimensions: set[str] | frozenset[str], *, mode: str, kind_: str) -> str:
    """Why :func:`find` found nothing: what the catalog says of that name instead."""
    same = [m for m in CATALOG if (m.namespace, m.name) == (namespace, name)]
    if not same:
        return f"{namespace} {name} is not a metric SageMaker publishes for an endpoint (see {SOURCES['monitoring']})"
    offered = "; ".join(
        f"{'/'.join(sorted(m.modes))} on {'/'.join(sorted(m.kinds))} by {', '.join(m.dimensions)} ({m.url})"
        for m in same
    )
    return f"{namespace} {name} by {', '.join(sorted(dimensions))} is not published in {mode} mode on {kind_} " \
           f"instances: it is published {offered}"  # fmt: skip


def value_range(metric: PublishedMetric, instance_type: str) -> tuple[float, float | None]:
    """The lowest and highest value `metric` takes on `instance_type` (None: no bound, or a
    count of vCPUs this project has no table for)."""
    if metric.high is None or metric.per is None:
        return metric.low, metric.high
    instance = instances.InstanceType(instance_type)
    if metric.per == "gpu":
        return metric.low, metric.high * instance.gpus
    host = instance.host
    return metric.low, None if host is None else metric.high * host[0]
