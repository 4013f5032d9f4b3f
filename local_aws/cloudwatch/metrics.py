"""Metric data as CloudWatch stores it: stamped with the time of receipt (the local AWS's clock)
where a datum has no timestamp, and published by the local AWS's own services as AWS's services
publish theirs (SageMaker's invocation and instance metrics), in their reserved namespaces."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from moto.cloudwatch.models import cloudwatch_backends

from local_aws import clock


def stamped(metric_data: Iterable[Mapping[str, Any]], when: datetime) -> list[dict[str, Any]]:
    """The data, each datum without a Timestamp stamped `when`. Stamps are naive UTC (an aware
    one made so), as moto
    keeps every timestamp it parses and compares them with GetMetricData's StartTime and
    EndTime: an aware one there fails the call."""
    return [{**m, "Timestamp": _naive(m.get("Timestamp") or when)} for m in metric_data]


def _naive(when: Any) -> Any:
    if isinstance(when, datetime) and when.tzinfo is not None:
        return when.astimezone(UTC).replace(tzinfo=None)
    return when


def publish(account: str, region: str, namespace: str, metric_data: Iterable[Mapping[str, Any]]) -> None:
    """Store `metric_data` (PutMetricData's MetricData) under `namespace` as a service of the
    account's region publishes it, at the clock's time where a datum names none."""
    data = stamped(metric_data, clock.now())
    if data:
        cloudwatch_backends[account][region].put_metric_data(namespace, data)
