"""Metric data as CloudWatch stores it: stamped with the time of receipt (the local AWS's clock)
where a datum has no timestamp; and what AWS's own services publish (SageMaker's invocation and
instance metrics, in their reserved namespaces), a minute at a time.

SageMaker sends its endpoint metrics "at a 1-minute frequency" (SageMaker Developer Guide,
"Amazon SageMaker AI metrics in Amazon CloudWatch"): one datum a minute for each metric,
dimensions and unit, not one per request. :class:`PublishedMinute` is that datum: every value of
the minute with how often it came (what PutMetricData's Values and Counts carry), so that
percentiles are still computed from the values, beside the exact count, sum, minimum and
maximum. Its memory is bounded by the minutes, not by the requests: a minute keeps up to
:data:`EXACT_VALUES` distinct values exactly; past them, each value is rounded to its bucket
(within :data:`RELATIVE_ERROR` of itself), and a percentile is read within that error.

The minutes being filled are indexed in :class:`PublishedMetrics`, a backend per account and
region reset with moto's; the minutes themselves are data of moto's CloudWatch backend, where
GetMetricData, GetMetricStatistics, ListMetrics and the alarms read them. Recording a value
takes only the index's lock (to find its minute) and the minute's own: no lock an alarm's
evaluation holds.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from moto.cloudwatch.models import MetricAggregatedDatum, cloudwatch_backends
from moto.core.base_backend import BackendDict, BaseBackend

from local_aws import host
from local_aws.cloudwatch.statistics import Distribution, StatisticSet

#: Distinct values a minute of one metric keeps exactly; past them its values are rounded. A
#: minute of 10,000 latencies holds at most this many (value, count) pairs.
EXACT_VALUES = 1000
#: How far from a value its rounded value may be, as a share of it, once a minute holds more
#: than EXACT_VALUES distinct values: their buckets (a factor of 1.01 apart) number about 230 a
#: factor of ten, so a minute of latencies over three decades holds about 700.
RELATIVE_ERROR = 0.005
_GAMMA = (1 + RELATIVE_ERROR) / (1 - RELATIVE_ERROR)
_LOG_GAMMA = math.log(_GAMMA)
#: How long a minute stays open to more values after it ends: a service stamps a minute's
#: summary with the minute's start (SageMaker's idle and per-instance minutes, published just
#: after the minute).
OPEN_FOR = timedelta(minutes=5)


def stamped(metric_data: Iterable[Mapping[str, Any]], when: datetime) -> list[dict[str, Any]]:
    """The data, each datum without a Timestamp stamped `when`. Stamps are naive UTC (an aware
    one made so), as moto keeps every timestamp it parses and compares them with GetMetricData's
    StartTime and EndTime: an aware one there fails the call."""
    return [{**m, "Timestamp": _naive(m.get("Timestamp") or when)} for m in metric_data]


def _naive(when: Any) -> Any:
    if isinstance(when, datetime) and when.tzinfo is not None:
        return when.astimezone(UTC).replace(tzinfo=None)
    return when


def _bucketed(value: float) -> float:
    """`value` as the middle of its bucket: buckets of :data:`RELATIVE_ERROR` around powers of
    :data:`_GAMMA`, so that a value is read within that share of itself (zero and negative values
    are kept as they are)."""
    if value <= 0 or not math.isfinite(value):
        return value
    return float(_GAMMA ** round(math.log(value) / _LOG_GAMMA))


class PublishedMinute(MetricAggregatedDatum):
    """A minute of one metric (namespace, name, dimensions, unit) as an AWS service publishes it:
    to moto, a statistic set (its count, sum, minimum and maximum, exact); to the local AWS's
    statistics (:func:`local_aws.cloudwatch.statistics.samples_of`), its values and their counts."""

    def __init__(
        self, namespace: str, name: str, dimensions: list[dict[str, str]], minute: datetime, unit: Any, value: float
    ) -> None:
        super().__init__(namespace, name, value, value, 1.0, value, dimensions, minute, unit)
        self._lock = threading.Lock()
        self._counts: dict[float, int] = {value: 1}
        #: Whether its values are rounded to their buckets (past EXACT_VALUES distinct values).
        self._bucketed = False

    def add(self, value: float) -> None:
        with self._lock:
            self.sample_count += 1
            self.sum += value
            self.min = min(self.min, value)
            self.max = max(self.max, value)
            if self._bucketed:
                value = _bucketed(value)
            counts = self._counts
            counts[value] = counts.get(value, 0) + 1
            if len(counts) > EXACT_VALUES and not self._bucketed:
                self._bucketed = True
                merged: dict[float, int] = {}
                for kept, count in counts.items():
                    key = _bucketed(kept)
                    merged[key] = merged.get(key, 0) + count
                self._counts = merged

    def distribution(self) -> Distribution:
        with self._lock:
            return Distribution(
                StatisticSet(self.sample_count, self.sum, self.min, self.max), tuple(self._counts.items())
            )

    @property
    def distinct_values(self) -> int:
        return len(self._counts)


MinuteKey = tuple[str, str, tuple[tuple[str, str], ...], str | None, datetime]


class PublishedMetrics(BaseBackend):
    """What AWS's services publish in one account and region: the minutes still open to values,
    by metric (:data:`OPEN_FOR` after they end); older ones are only CloudWatch's data."""

    def __init__(self, region_name: str, account_id: str) -> None:
        super().__init__(region_name, account_id)
        self._lock = threading.Lock()
        self._open: dict[MinuteKey, PublishedMinute] = {}
        self._latest = datetime.min
        self._store = cloudwatch_backends[account_id][region_name]

    def record(self, namespace: str, metric_data: Iterable[Mapping[str, Any]], when: datetime) -> None:
        """Add each datum's Value to its minute (its Timestamp's, else `when`'s): the index's lock
        taken once for all of them, each minute's own for its value."""
        keyed = []
        for datum in stamped(metric_data, when):
            minute = datum["Timestamp"].replace(second=0, microsecond=0)
            dimensions = tuple((str(d["Name"]), str(d["Value"])) for d in datum.get("Dimensions", ()))
            keyed.append(
                ((namespace, str(datum["MetricName"]), dimensions, datum.get("Unit"), minute), float(datum["Value"]))
            )
        adds = []
        with self._lock:
            for key, value in keyed:
                found = self._open.get(key)
                if found is not None:
                    adds.append((found, value))
                    continue
                found = PublishedMinute(namespace, key[1], [{"Name": n, "Value": v} for n, v in key[2]], key[4],
                                        key[3], value)  # fmt: skip
                self._open[key] = found
                # Whole: a reader copies the list; a minute with no value is never seen.
                self._store.metric_data.append(found)
                self._close_before(key[4])
        for found, value in adds:
            found.add(value)

    def _close_before(self, minute: datetime) -> None:
        if minute <= self._latest:
            return
        self._latest = minute
        for key in [k for k in self._open if k[4] < minute - OPEN_FOR]:
            del self._open[key]

    @property
    def open_minutes(self) -> int:
        with self._lock:
            return len(self._open)


published_backends = BackendDict(PublishedMetrics, "cloudwatch")


def publish(account: str, region: str, namespace: str, metric_data: Iterable[Mapping[str, Any]]) -> None:
    """Store `metric_data` (PutMetricData's MetricData, each with a Value) under `namespace` as a
    service of the account's region publishes it: a minute at a time, at the clock's time where a
    datum names none."""
    published_backends[account][region].record(namespace, metric_data, host.now())
