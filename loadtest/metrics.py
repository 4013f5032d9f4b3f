"""The endpoint's own figures from CloudWatch: AWS/SageMaker ModelLatency (the container's time)
and OverheadLatency (SageMaker's), both in microseconds, per EndpointName and VariantName.

SageMaker publishes them per minute, a minute or two after the fact; a level's figures are
those of the whole minutes its window touches (levels shorter than a minute share minutes
with their neighbours: SampleCount says how many invocations a figure covers). Where nothing
is published (a local AWS, or no access to CloudWatch) the report says so instead.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from loadtest.invokers import Target

NAMESPACE = "AWS/SageMaker"
#: CloudWatch statistic -> the report's name for it.
STATISTICS = {"Average": "mean", "p50": "p50", "p90": "p90", "p99": "p99", "Maximum": "max", "SampleCount": "samples"}
#: Each metric and the statistics asked of it: those SageMaker's monitoring page
#: (sagemaker/latest/dg/monitoring-cloudwatch.html) lists for it. ModelLatency has percentiles;
#: OverheadLatency's are "Average, Sum, Min, Max, Sample Count", so none of its percentiles is asked.
METRICS: dict[str, tuple[str, ...]] = {
    "ModelLatency": tuple(STATISTICS),
    "OverheadLatency": ("Average", "Maximum", "SampleCount"),
}
PUBLISHED, NOT_PUBLISHED, UNAVAILABLE = "published", "not published", "unavailable"
POLL_S = 15.0


@dataclass(frozen=True)
class Window:
    """Whole minutes: the smallest period of SageMaker's endpoint metrics."""

    start: datetime
    end: datetime

    @classmethod
    def around(cls, started_at: datetime, ended_at: datetime) -> Window:
        start = started_at.replace(second=0, microsecond=0)
        end = ended_at.replace(second=0, microsecond=0)
        if end < ended_at or end == start:
            end += timedelta(minutes=1)
        return cls(start, end)

    @property
    def seconds(self) -> int:
        return int((self.end - self.start).total_seconds())


def scopes(target: Target, variants: Sequence[str]) -> dict[str, list[dict[str, str]]]:
    """The metric dimensions of each part of the target, by the name the report gives it: each
    production variant of an endpoint, or the inference component alone (SageMaker publishes an
    inference component's invocation metrics under its own name)."""
    if target.inference_component:
        return {target.inference_component: [{"Name": "InferenceComponentName", "Value": target.inference_component}]}
    return {
        variant: [{"Name": "EndpointName", "Value": target.endpoint}, {"Name": "VariantName", "Value": variant}]
        for variant in variants
    }


def query_ids(scoped: Mapping[str, list[dict[str, str]]]) -> dict[str, tuple[str, str, str]]:
    """GetMetricData queries by id, and the (scope, metric, statistic) each one answers."""
    return {
        f"q{s}_{m}_{k}": (scope, metric, stat)
        for s, scope in enumerate(scoped)
        for m, metric in enumerate(METRICS)
        for k, stat in enumerate(METRICS[metric])
    }


def fetch(cloudwatch: Any, scoped: Mapping[str, list[dict[str, str]]], window: Window) -> dict[str, Any]:
    """One level's figures: ``{"status": "published", "scopes": {name: {metric: {stat: value}}}}``
    (milliseconds; a scope without data is left out), ``not published`` or ``unavailable``
    (with the reason: CloudWatch refused or failed)."""
    queries = query_ids(scoped)
    request = [
        {
            "Id": query_id,
            "MetricStat": {
                "Metric": {"Namespace": NAMESPACE, "MetricName": metric, "Dimensions": scoped[scope]},
                "Period": window.seconds,
                "Stat": stat,
            },
            "ReturnData": True,
        }
        for query_id, (scope, metric, stat) in queries.items()
    ]
    found: dict[str, list[float]] = {}
    try:
        for page in cloudwatch.get_paginator("get_metric_data").paginate(
            MetricDataQueries=request, StartTime=window.start, EndTime=window.end
        ):
            for result in page["MetricDataResults"]:
                found.setdefault(result["Id"], []).extend(result["Values"])
    except (ClientError, BotoCoreError) as exc:
        return {"status": UNAVAILABLE, "reason": f"{type(exc).__name__}: {exc}", **_window(window)}
    figures = _figures(queries, found)
    return {"status": PUBLISHED if figures else NOT_PUBLISHED, "scopes": figures, **_window(window)}


def _window(window: Window) -> dict[str, Any]:
    return {"window": {"start": window.start.isoformat(), "end": window.end.isoformat()}}


def _figures(queries: Mapping[str, tuple[str, str, str]], found: Mapping[str, list[float]]) -> dict[str, Any]:
    counts = {
        (scope, metric): found.get(qid, []) for qid, (scope, metric, stat) in queries.items() if stat == "SampleCount"
    }
    figures: dict[str, dict[str, dict[str, float | None]]] = {}
    for query_id, (scope, metric, stat) in queries.items():
        samples = counts[(scope, metric)]
        if not sum(samples):
            continue
        value = combine(stat, found.get(query_id, []), samples)
        # Latencies come in microseconds; a count is a count.
        shown = value if value is None or stat == "SampleCount" else value / 1000
        figures.setdefault(scope, {}).setdefault(metric, {})[STATISTICS[stat]] = shown
    return figures


def combine(stat: str, values: Sequence[float], samples: Sequence[float]) -> float | None:
    """One figure from CloudWatch's datapoints for the window (one, unless CloudWatch split the
    window): counts add up, maxima take the largest, means weigh by their counts; a percentile
    of several periods cannot be recovered from theirs, so it is None then."""
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    if stat == "SampleCount":
        return math.fsum(values)
    if stat == "Maximum":
        return max(values)
    count = math.fsum(samples)
    if stat == "Average" and len(samples) == len(values) and count > 0:
        return math.fsum(v * n for v, n in zip(values, samples, strict=True)) / count
    return None


def covered(figures: Mapping[str, Any], successes: int) -> bool:
    """Whether CloudWatch has counted, by now, at least the level's successful invocations."""
    if figures["status"] == UNAVAILABLE:
        return True  # waiting will not change a refusal
    counted = sum((s.get("ModelLatency", {}).get("samples") or 0) for s in figures.get("scopes", {}).values())
    return counted >= successes


def is_published(cloudwatch: Any, target: Target) -> bool:
    """Whether the endpoint (or inference component) has ever had its latency published."""
    dimension = (
        {"Name": "InferenceComponentName", "Value": target.inference_component}
        if target.inference_component
        else {"Name": "EndpointName", "Value": target.endpoint}
    )
    try:
        listed = cloudwatch.list_metrics(Namespace=NAMESPACE, MetricName="ModelLatency", Dimensions=[dimension])
    except (ClientError, BotoCoreError):
        return False
    return bool(listed.get("Metrics"))


def collect(
    fetch_level: Callable[[int], dict[str, Any]],
    successes: Sequence[int],
    wait_s: float,
    published: Callable[[], bool],
    on_wait: Callable[[float], None] = lambda s: None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> list[dict[str, Any]]:
    """Each level's figures. When some are not all in yet, CloudWatch is asked again every
    15 s for up to `wait_s`, but only if the endpoint publishes at all (`published`, or a
    level has figures): a target that never publishes (a local AWS) is not waited for. Ctrl-C
    ends the wait with the figures so far. The wait is timed on `clock` and spent in `sleep`
    (a test gives both)."""
    results = [fetch_level(i) for i in range(len(successes))]
    pending = [i for i, n in enumerate(successes) if not covered(results[i], n)]
    if not pending or wait_s <= 0:
        return results
    if not any(r["status"] == PUBLISHED for r in results) and not published():
        return results
    on_wait(wait_s)
    deadline = clock() + wait_s
    try:
        while pending and clock() < deadline:
            sleep(min(POLL_S, max(0.0, deadline - clock())))
            for i in pending:
                results[i] = fetch_level(i)
            pending = [i for i in pending if not covered(results[i], successes[i])]
    except KeyboardInterrupt:
        pass  # the report is worth more than the last minutes' figures
    return results
