"""How CloudWatch evaluates a metric alarm, from the CloudWatch User Guide's "Using Amazon
CloudWatch alarms" (AlarmThatSendsEmail.md of awsdocs/amazon-cloudwatch-user-guide, 2023-05-17):

* "Evaluating an alarm": an alarm of a period of a minute or more is evaluated every minute, one
  of 10 or 30 s every 10 s, on the datapoints of its latest periods (each period's statistic of
  the metric's data in it); ALARM when Datapoints to Alarm (M) of the Evaluation Periods (N)
  evaluated breach the threshold, else OK;
* "How alarm state is evaluated when data is missing": CloudWatch reads an *evaluation range*
  longer than N periods (5 for N = 3 in the page's tables; N + 2 here, which AWS does not state
  in general); with no period of the latest N missing they are evaluated; else, with N periods of
  data in the range, the latest N of them; else every datapoint of the range and as many
  missing ones as make N, treated as TreatMissingData says (``breaching``, ``notBreaching``;
  ``missing``: INSUFFICIENT_DATA if the range has no data; ``ignore``: the state kept);
* "Avoiding premature transitions to alarm state": with only breaching data in the range,
  fewer than M, the alarm goes to ALARM when the oldest is at least M periods old
  (``missing``), and keeps its state (``ignore``);
* "Percentile-based alarms and low data samples": with ``EvaluateLowSampleCountPercentile:
  ignore``, a percentile over too few samples leaves the state as it is;
* "Alarms on math expressions": the queries' series over the range, the expression's
  (:mod:`.metric_math`) datapoints evaluated as a metric's.

The tables of the missing-data section are tests/local_aws/test_cloudwatch.py's cases.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from local_aws.cloudwatch import metric_math
from local_aws.cloudwatch.statistics import Samples, Statistic, parse, samples_of

OK, ALARM, INSUFFICIENT_DATA = "OK", "ALARM", "INSUFFICIENT_DATA"
#: The periods of an evaluation range beyond the evaluation periods (see the module's docstring).
RANGE_EXTRA = 2

COMPARISONS: dict[str, tuple[Callable[[float, float], bool], str]] = {
    "GreaterThanThreshold": (lambda v, t: v > t, "greater than"),
    "GreaterThanOrEqualToThreshold": (lambda v, t: v >= t, "greater than or equal to"),
    "LessThanThreshold": (lambda v, t: v < t, "less than"),
    "LessThanOrEqualToThreshold": (lambda v, t: v <= t, "less than or equal to"),
}


@dataclass(frozen=True)
class Datapoint:
    """One period of an alarm's range: its start, its value (None: missing), and whether a
    percentile's samples were too few to be significant."""

    start: datetime
    value: float | None
    samples: float = 0
    low_samples: bool = False


def decide(
    points: Sequence[Datapoint], periods: int, to_alarm: int, breaches: Callable[[float], bool], treat_missing: str
) -> tuple[str | None, list[Datapoint]]:
    """The state CloudWatch gives an alarm whose evaluation range holds `points` (oldest first),
    None to keep the current one; and the datapoints it evaluated (see the module's docstring)."""
    existing = [p for p in points if p.value is not None]
    recent = list(points[-periods:])
    if all(p.value is not None for p in recent):
        used, fill = recent, 0
    elif len(existing) >= periods:
        used, fill = existing[-periods:], 0
    else:
        used, fill = existing, periods - len(existing)
    breaching = sum(1 for p in used if p.value is not None and breaches(p.value))
    within = len(used) - breaching
    if fill == 0 or breaching >= to_alarm:
        return (ALARM if breaching >= to_alarm else OK), used
    if treat_missing == "breaching":
        return (ALARM if breaching + fill >= to_alarm else OK), used
    if treat_missing == "notBreaching" or within:
        return OK, used
    keep = treat_missing == "ignore"
    if breaching:
        oldest = next(i for i, p in enumerate(points) if p.value is not None and breaches(p.value))
        if len(points) - oldest >= to_alarm:
            return (None if keep else ALARM), used
    return (None if keep else INSUFFICIENT_DATA), used


# --- an alarm's data ----------------------------------------------------------------------------


def _utc(when: datetime) -> datetime:
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


MetricKey = tuple[str, str, frozenset[tuple[str, str]]]


class MetricIndex:
    """Every datum of a CloudWatch backend by metric (namespace, name, dimensions), in time
    order: what the evaluations of one moment read."""

    def __init__(self, data: Iterable[Any]) -> None:
        found: dict[MetricKey, list[tuple[datetime, Any]]] = {}
        for datum in data:
            key = (datum.namespace, datum.name, frozenset((d.name, d.value) for d in datum.dimensions))
            found.setdefault(key, []).append((_utc(datum.timestamp), datum))
        for entries in found.values():
            entries.sort(key=lambda e: e[0])
        self._data = found

    def samples(
        self, namespace: str, name: str, dimensions: Mapping[str, str], unit: str | None, start: datetime, end: datetime
    ) -> Samples:
        """The data of the metric from `start` (inclusive) to `end` (exclusive)."""
        entries = self._data.get((namespace, name, frozenset(dimensions.items())), [])
        times = [e[0] for e in entries]
        window = entries[bisect.bisect_left(times, start) : bisect.bisect_left(times, end)]
        return samples_of(d for _, d in window if not (unit and d.unit and d.unit != unit))


@dataclass(frozen=True)
class MetricQuery:
    """One metric's statistic over a period."""

    namespace: str
    name: str
    dimensions: Mapping[str, str]
    statistic: Statistic
    period_s: int
    unit: str | None = None

    def points(self, index: MetricIndex, at: datetime, count: int) -> list[Datapoint]:
        """The datapoints of the `count` periods before `at`, oldest first."""
        found = []
        for i in range(count, 0, -1):
            start = at - timedelta(seconds=i * self.period_s)
            samples = index.samples(
                self.namespace, self.name, self.dimensions, self.unit, start, start + timedelta(seconds=self.period_s)
            )
            value = self.statistic.of(samples)
            found.append(Datapoint(start, value, samples.count, self.statistic.low_sample_count(samples)))
        return found


def _dimensions(dimensions: Iterable[Any]) -> dict[str, str]:
    return {str(d.name): str(d.value) for d in dimensions}


def period_of(alarm: Any) -> int:
    """The alarm's period: its own, or (a math alarm) its queries'."""
    if alarm.metric_data_queries:
        periods = [int(q.metric_stat.period) for q in alarm.metric_data_queries if q.metric_stat is not None]
        periods += [int(q.period) for q in alarm.metric_data_queries if q.period]
        return min(periods) if periods else 60
    return int(alarm.period or 60)


def _returned(alarm: Any) -> Any:
    queries = alarm.metric_data_queries
    returned = [q for q in queries if str(q.return_data).lower() not in ("false", "none")]
    return returned[-1] if returned else queries[-1]


def points_of(alarm: Any, index: MetricIndex, at: datetime) -> tuple[list[Datapoint], str]:
    """The datapoints of the alarm's evaluation range before `at`, and what they are of (the
    statistic, or the expression)."""
    count = int(alarm.evaluation_periods) + RANGE_EXTRA
    if not alarm.metric_data_queries:
        statistic = parse(alarm.extended_statistic or alarm.statistic)
        query = MetricQuery(
            alarm.namespace, alarm.metric_name, _dimensions(alarm.dimensions), statistic, int(alarm.period), alarm.unit
        )
        return query.points(index, at, count), statistic.name
    series: dict[str, list[float | None]] = {}
    starts: list[datetime] = []
    expressions = []
    for q in alarm.metric_data_queries:
        if q.metric_stat is None:
            expressions.append(q)
            continue
        stat = q.metric_stat
        metric = MetricQuery(
            stat.metric.namespace, stat.metric.metric_name, _dimensions(stat.metric.dimensions), parse(stat.stat),
            int(stat.period), stat.unit,
        )  # fmt: skip
        points = metric.points(index, at, count)
        series[q.id] = [p.value for p in points]
        starts = [p.start for p in points]
    for q in expressions:
        series[q.id] = metric_math.evaluate(q.expression, series, count)
    returned = _returned(alarm)
    values = series[returned.id]
    if not starts:
        period = timedelta(seconds=period_of(alarm))
        starts = [at - (count - i) * period for i in range(count)]
    return [Datapoint(s, v) for s, v in zip(starts, values, strict=True)], returned.expression or returned.id


# --- an evaluation ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What an evaluation found: the alarm's new state (None: kept), why, in AWS's words."""

    state: str | None
    reason: str
    reason_data: str


def _stamp(when: datetime) -> str:
    return when.strftime("%d/%m/%y %H:%M:%S")


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}+0000"


def evaluate(alarm: Any, index: MetricIndex, at: datetime) -> Outcome:
    """The alarm evaluated at `at` on `index`'s data."""
    compare, words = COMPARISONS[alarm.comparison_operator]
    threshold = float(alarm.threshold)
    periods = int(alarm.evaluation_periods)
    to_alarm = int(alarm.datapoints_to_alarm or periods)
    points, of = points_of(alarm, index, at)
    state, used = decide(
        points, periods, to_alarm, lambda v: compare(v, threshold), alarm.treat_missing_data or "missing"
    )
    if (alarm.evaluate_low_sample_count_percentile or "evaluate") == "ignore" and any(p.low_samples for p in used):
        state = None
    latest = list(reversed(used))
    n = len(used)

    def reason_listing(kept: int) -> str:
        shown = ", ".join(f"{p.value} ({_stamp(p.start)})" for p in latest[:kept]) + (", ..." if kept < n else "")
        if state == ALARM:
            breaching = sum(1 for p in used if p.value is not None and compare(p.value, threshold))
            return (
                f"Threshold Crossed: {breaching} out of the last {periods} datapoints [{shown}] "
                f"{'was' if breaching == 1 else 'were'} {words} the threshold ({threshold}) "
                f"(minimum {to_alarm} datapoint{'s' if to_alarm > 1 else ''} for OK -> ALARM transition)."
            )
        if state == OK:
            return (
                f"Threshold Crossed: {n} datapoint{'s' if n != 1 else ''} [{shown}] {'was' if n == 1 else 'were'} "
                f"not {words} the threshold ({threshold}) (minimum 1 datapoint for ALARM -> OK transition)."
            )
        missing = periods - n
        return f"Insufficient Data: {missing} datapoint{'s were' if missing != 1 else ' was'} unknown."

    def data_listing(kept: int) -> str:
        return json.dumps({
            "version": "1.0",
            "queryDate": _iso(at),
            "startDate": _iso(points[0].start) if points else _iso(at),
            ("statistic" if not alarm.metric_data_queries else "expression"): of,
            "period": period_of(alarm),
            "recentDatapoints": [p.value for p in used[n - kept :]],
            "threshold": threshold,
            "evaluatedDatapoints": [
                {"timestamp": _iso(p.start), **({"sampleCount": p.samples} if p.samples else {}),
                 **({"value": p.value} if p.value is not None else {})}
                for p in latest[:kept]
            ],
        })  # fmt: skip

    return Outcome(state, _fitting(reason_listing, n, MAX_REASON), _fitting(data_listing, n, MAX_REASON_DATA))


#: The most characters of an alarm's StateReason and StateReasonData (botocore's cloudwatch model):
#: a reason of more datapoints than fit lists the latest that do (CloudWatch documents no other way).
MAX_REASON = 1023
MAX_REASON_DATA = 4000


def _fitting(listing: Callable[[int], str], count: int, limit: int) -> str:
    """`listing` of as many of its `count` datapoints as fit in `limit` characters, the latest first."""
    if len(whole := listing(count)) <= limit:
        return whole
    fits, too_many = 0, count  # listing(fits) fits (none, at worst), listing(too_many) does not
    while too_many - fits > 1:
        middle = (fits + too_many) // 2
        fits, too_many = (middle, too_many) if len(listing(middle)) <= limit else (fits, middle)
    return listing(fits)


def due(alarm: Any, at: datetime) -> bool:
    """Whether CloudWatch evaluates the alarm at `at` (a multiple of 10 s): every minute, every
    10 s for a high-resolution alarm (a period of 10, 20 or 30 s)."""
    return period_of(alarm) < 60 or at.second == 0


def check(alarm: Any) -> str | None:
    """Why the local AWS cannot evaluate the alarm, else None."""
    if getattr(alarm, "evaluation_criteria", None):
        return "PromQL alarms are not evaluated here (no OpenTelemetry metrics to query)"
    if alarm.comparison_operator not in COMPARISONS:
        return f"the comparison {alarm.comparison_operator} (anomaly detection) is not evaluated here"
    if getattr(alarm, "threshold_metric_id", None):
        return "alarms on an anomaly detection band are not evaluated here"
    try:
        if alarm.metric_data_queries:
            ids = [q.id for q in alarm.metric_data_queries]
            for q in alarm.metric_data_queries:
                if q.metric_stat is not None:
                    parse(q.metric_stat.stat)
                elif q.expression:
                    metric_math.check(q.expression, ids)
        else:
            parse(alarm.extended_statistic or alarm.statistic or "")
    except ValueError as exc:
        return str(exc)
    return None
