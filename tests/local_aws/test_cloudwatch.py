"""CloudWatch's evaluation of alarms (local_aws/cloudwatch/) against the CloudWatch User Guide:
the tables of "How alarm state is evaluated when data is missing", the statistics' definitions,
metric math, and the clock that schedules the evaluations."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from local_aws import clock as clocks
from local_aws.clock import Clock
from local_aws.cloudwatch import metric_math
from local_aws.cloudwatch.evaluation import (
    ALARM,
    INSUFFICIENT_DATA,
    OK,
    Datapoint,
    MetricIndex,
    check,
    decide,
    due,
    evaluate,
)
from local_aws.cloudwatch.statistics import Samples, StatisticSet, parse

START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
RETAIN = None

# --- "How alarm state is evaluated when data is missing" -------------------------------------------

#: (datapoints of the evaluation range, oldest first; datapoints to alarm;
#:  the state for missing, ignore, breaching, notBreaching); N = 3, a range of 5.
TABLES = [
    # The first table: 3 out of 3.
    ("0 - X - X", 3, (OK, OK, OK, OK)),
    ("0 - - - -", 3, (OK, OK, OK, OK)),
    ("- - - - -", 3, (INSUFFICIENT_DATA, RETAIN, ALARM, OK)),
    ("0 X X - X", 3, (ALARM, ALARM, ALARM, ALARM)),
    ("- - X - -", 3, (ALARM, RETAIN, ALARM, OK)),
    # The page's earlier version, on the same rule ("the oldest evaluated data point is breaching").
    ("- - - - X", 3, (INSUFFICIENT_DATA, RETAIN, ALARM, OK)),
    ("X - - - -", 3, (ALARM, RETAIN, ALARM, OK)),
    # The second table: 2 out of 3.
    ("0 - X - X", 2, (ALARM, ALARM, ALARM, ALARM)),
    ("0 0 X 0 X", 2, (ALARM, ALARM, ALARM, ALARM)),
    ("0 - X - -", 2, (OK, OK, ALARM, OK)),
    ("- - - - 0", 2, (OK, OK, ALARM, OK)),
    ("- - - X -", 2, (ALARM, RETAIN, ALARM, OK)),
]


def points(text: str) -> list[Datapoint]:
    value = {"0": 0.0, "X": 5.0, "-": None}
    return [Datapoint(START + timedelta(minutes=i), value[c]) for i, c in enumerate(text.split())]


@pytest.mark.parametrize(("data", "to_alarm", "states"), TABLES)
def test_missing_data_as_the_user_guide_tables_say(data: str, to_alarm: int, states: tuple[str | None, ...]) -> None:
    for treat, expected in zip(("missing", "ignore", "breaching", "notBreaching"), states, strict=True):
        state, _ = decide(points(data), 3, to_alarm, lambda v: v > 1, treat)
        assert state == expected, f"{data} M={to_alarm} {treat}"


def test_the_latest_existing_datapoints_are_evaluated_when_enough_exist() -> None:
    # "including the necessary extra data points from farther back in the evaluation range"
    _, used = decide(points("0 X - X -"), 2, 2, lambda v: v > 1, "notBreaching")
    assert [p.value for p in used] == [5.0, 5.0]


# --- statistics ------------------------------------------------------------------------------------


def samples(*values: float) -> Samples:
    return Samples(tuple(values))


def test_basic_statistics_of_values_and_statistic_sets() -> None:
    data = Samples((1.0, 3.0), (StatisticSet(count=2, total=10, minimum=2, maximum=8),))
    assert {name: parse(name).of(data) for name in ("SampleCount", "Sum", "Average", "Minimum", "Maximum")} == {
        "SampleCount": 4, "Sum": 14.0, "Average": 3.5, "Minimum": 1.0, "Maximum": 8.0,
    }  # fmt: skip
    assert parse("Sum").of(Samples()) is None


def test_percentiles_are_the_highest_value_of_the_lowest_share() -> None:
    values = samples(*range(1, 101))
    assert parse("p99").of(values) == 99
    assert parse("p50").of(values) == 50
    assert parse("p100").of(values) == 100
    assert parse("p99.9").of(samples(1, 2, 3)) == 3


def test_extended_statistics_as_defined() -> None:
    values = samples(*range(1, 11))  # 1..10
    assert parse("tm90").of(values) == 5.0  # the highest 10% left out
    assert parse("TM(10%:90%)").of(values) == 5.5
    assert parse("IQM").of(values) == parse("TM(25%:75%)").of(values)
    assert parse("tc90").of(values) == 9
    assert parse("ts90").of(values) == 45
    assert parse("WM(10%:90%)").of(values) == 5.5  # 1 counted as 2, 10 as 9
    assert parse("PR(:3)").of(values) == 30.0  # at most 3
    assert parse("TC(2:5)").of(values) == 3  # above 2, at most 5


def test_no_raw_statistic_of_negative_values_or_unequal_sets() -> None:
    assert parse("p50").of(samples(-1, 2)) is None
    assert parse("p50").of(Samples((), (StatisticSet(2, 10, 2, 8),))) is None
    assert parse("p50").of(Samples((), (StatisticSet(3, 12, 4, 4),))) == 4


def test_low_sample_count_of_a_percentile() -> None:
    assert parse("p99").low_sample_count(samples(*range(999)))
    assert not parse("p99").low_sample_count(samples(*range(1000)))
    assert parse("p10").low_sample_count(samples(*range(99)))
    assert not parse("Average").low_sample_count(samples(1))


@pytest.mark.parametrize("name", ["p101", "tm0", "Median", "TM(5%:10)", "TM(:)"])
def test_unknown_statistics_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match=r"statistic|percentile|boundary"):
        parse(name)


# --- metric math -----------------------------------------------------------------------------------


def test_fill_and_arithmetic() -> None:
    series = {"m": [None, 1.0, None, 3.0], "n": [2.0, 2.0, 2.0, None]}
    assert metric_math.evaluate("FILL(m, 0)", series, 4) == [0.0, 1.0, 0.0, 3.0]
    assert metric_math.evaluate("FILL(m, REPEAT)", series, 4) == [1.0, 1.0, 1.0, 3.0]
    assert metric_math.evaluate("FILL(m, LINEAR)", series, 4) == [1.0, 1.0, 2.0, 3.0]
    assert metric_math.evaluate("m * 100 / n", series, 4) == [None, 50.0, None, None]
    assert metric_math.evaluate("IF(n > 1, 1, 0) + MAX(m)", series, 4) == [4.0, 4.0, 4.0, None]
    assert metric_math.evaluate("MAX([m, n])", series, 4) == [2.0, 2.0, 2.0, 3.0]


def test_fill_of_a_series_without_data_yields_none() -> None:
    assert metric_math.evaluate("FILL(m, 0)", {"m": [None, None]}, 2) == [None, None]


@pytest.mark.parametrize("expression", ["ANOMALY_DETECTION_BAND(m)", "m +", "q * 2", "[m, m]"])
def test_expressions_the_local_aws_cannot_evaluate(expression: str) -> None:
    with pytest.raises(metric_math.ExpressionError):
        metric_math.check(expression, ["m"])


# --- an alarm's evaluation -----------------------------------------------------------------------


def datum(name: str, value: float, when: datetime, **dimensions: str) -> Any:
    dims = [SimpleNamespace(name=k, value=v) for k, v in dimensions.items()]
    return SimpleNamespace(namespace="Test", name=name, dimensions=dims, timestamp=when, unit=None, value=value)


def alarm(**settings: Any) -> Any:
    defaults: dict[str, Any] = {
        "namespace": "Test", "metric_name": "Latency", "dimensions": [SimpleNamespace(name="E", value="e")],
        "period": 60, "statistic": "Average", "extended_statistic": None, "evaluation_periods": 1,
        "datapoints_to_alarm": None, "threshold": 100.0, "comparison_operator": "GreaterThanThreshold",
        "treat_missing_data": "notBreaching", "evaluate_low_sample_count_percentile": None, "unit": None,
        "metric_data_queries": [], "threshold_metric_id": None,
    }  # fmt: skip
    return SimpleNamespace(**{**defaults, **settings})


@pytest.mark.parametrize(("value", "state"), [(50.0, OK), (500.0, ALARM)])
def test_a_reason_of_many_datapoints_keeps_within_what_describe_alarms_answers(value: float, state: str) -> None:
    """StateReason is at most 1,023 characters and StateReasonData 4,000 (botocore's cloudwatch
    model): a reason that would list more datapoints lists the latest that fit."""
    periods = 60
    data = [datum("Latency", value, START + timedelta(minutes=i), E="e") for i in range(periods)]
    outcome = evaluate(alarm(evaluation_periods=periods), MetricIndex(data), START + timedelta(minutes=periods))
    assert outcome.state == state
    assert len(outcome.reason) <= 1023 and len(outcome.reason_data) <= 4000, (
        len(outcome.reason),
        len(outcome.reason_data),
    )
    assert outcome.reason.startswith("Threshold Crossed: ") and outcome.reason.endswith(" transition).")
    assert f"{value} ({(START + timedelta(minutes=periods - 1)).strftime('%d/%m/%y %H:%M:%S')}), " in outcome.reason
    assert ", ...] " in outcome.reason


def test_an_alarm_on_a_percentile_of_its_metric() -> None:
    now = START + timedelta(minutes=1)
    data = [
        datum("Latency", v, START + timedelta(seconds=i % 60), E="e") for i, v in enumerate([50.0] * 98 + [500.0] * 2)
    ]
    data.append(datum("Latency", 900.0, START, E="other"))  # another metric: other dimensions
    index = MetricIndex(data)
    assert evaluate(alarm(extended_statistic="p99", statistic=None), index, now).state == ALARM
    assert evaluate(alarm(extended_statistic="p90", statistic=None), index, now).state == OK
    outcome = evaluate(alarm(), index, now)  # the average, 59
    assert outcome.state == OK
    assert json.loads(outcome.reason_data)["recentDatapoints"] == [59.0]
    # Too few samples for a significant p99 (fewer than 1000), and the alarm told to wait for them.
    ignoring = alarm(extended_statistic="p99", statistic=None, evaluate_low_sample_count_percentile="ignore")
    assert evaluate(ignoring, index, now).state is None


def test_the_reason_names_the_datapoints_as_aws_does() -> None:
    index = MetricIndex([datum("Latency", 250.0, START, E="e")])
    outcome = evaluate(alarm(), index, START + timedelta(minutes=1))
    assert outcome.reason == (
        "Threshold Crossed: 1 out of the last 1 datapoints [250.0 (01/01/26 12:00:00)] was greater than the "
        "threshold (100.0) (minimum 1 datapoint for OK -> ALARM transition)."
    )


def test_a_math_alarm_on_fill() -> None:
    query = SimpleNamespace(
        id="healthy", expression=None, period=None, return_data="false",
        metric_stat=SimpleNamespace(
            metric=SimpleNamespace(namespace="Test", metric_name="Healthy",
                                   dimensions=[SimpleNamespace(name="E", value="e")]),
            period=60, stat="Maximum", unit=None,
        ),
    )  # fmt: skip
    expression = SimpleNamespace(
        id="e1", expression="FILL(healthy, 0)", period=None, return_data="true", metric_stat=None
    )
    down = alarm(
        metric_data_queries=[query, expression], period=None, statistic=None, namespace=None, metric_name=None,
        dimensions=[], threshold=1.0, comparison_operator="LessThanThreshold", evaluation_periods=3,
        datapoints_to_alarm=2, treat_missing_data="ignore",
    )  # fmt: skip
    assert check(down) is None
    at = START + timedelta(minutes=5)
    # No report in the range: FILL yields nothing, the state is kept.
    assert evaluate(down, MetricIndex([]), at).state is None
    # One report of health 3 minutes back: the periods around it are filled with 0, 2 of 3 down.
    once = MetricIndex([datum("Healthy", 1.0, at - timedelta(minutes=3), E="e")])
    assert evaluate(down, once, at).state == ALARM
    # Reports in the last two periods: 1 of 3 down.
    twice = MetricIndex([datum("Healthy", 1.0, at - timedelta(minutes=m), E="e") for m in (1, 2)])
    assert evaluate(down, twice, at).state == OK


def test_high_resolution_alarms_are_due_every_10_seconds_others_every_minute() -> None:
    assert due(alarm(period=10), START + timedelta(seconds=10))
    assert not due(alarm(period=60), START + timedelta(seconds=10))
    assert due(alarm(period=300), START + timedelta(minutes=1))


def test_alarms_the_local_aws_cannot_evaluate_say_why() -> None:
    assert "anomaly" in str(check(alarm(comparison_operator="LessThanLowerOrGreaterThanUpperThreshold")))
    assert "statistic" in str(check(alarm(statistic="Median")))


# --- the clock ----------------------------------------------------------------------------------


Ran = list[tuple[str, timedelta, timedelta]]


@pytest.fixture
def ticking() -> tuple[Clock, Ran]:
    """A clock that stands still at START, with two jobs that record (name, their time, the
    clock's time when they ran), from START."""
    ran: Ran = []
    clock = Clock(
        speed=0,
        start=START,
        jobs=[
            clocks.Job("ten", 10, lambda at: ran.append(("ten", at - START, clock.now() - START))),
            clocks.Job("minute", 60, lambda at: ran.append(("minute", at - START, clock.now() - START))),
        ],
    )
    return clock, ran


def test_a_clock_that_stands_still_runs_each_job_it_jumps_over_at_its_time(ticking: tuple[Clock, Ran]) -> None:
    clock, ran = ticking
    clock.advance(5)
    assert ran == [] and clock.now() == START + timedelta(seconds=5)
    clock.advance(60)
    seconds = [(name, at.seconds, seen.seconds) for name, at, seen in ran]
    assert seconds == [("ten", s, s) for s in (10, 20, 30, 40, 50, 60)] + [("minute", 60, 60)]
    assert clock.now() == START + timedelta(seconds=65)


def test_a_running_clock_runs_its_jobs_itself() -> None:
    ran: list[datetime] = []
    done = threading.Event()
    clock = Clock(speed=600, start=START)  # ten minutes a second

    def job(at: datetime) -> None:
        ran.append(at)
        if len(ran) >= 3:
            done.set()

    try:
        clock.start([clocks.Job("test", 60, job)])
        assert done.wait(5)
    finally:
        clock.stop()
    assert ran[:3] == [START + timedelta(minutes=i) for i in (1, 2, 3)]


def test_a_wait_on_a_clock_that_stands_still_ends_when_it_is_moved() -> None:
    clock = Clock(speed=0, start=START)
    ended: list[bool] = []
    waiter = threading.Thread(target=lambda: ended.append(clock.sleep(60)))
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive()
    clock.advance(60)
    waiter.join(5)
    assert ended == [False]
    assert clock.sleep(3600, until=lambda: True)


# --- Through the server --------------------------------------------------------------------------


def test_data_put_without_a_timestamp_is_read_back_by_both_calls(aws: Any) -> None:
    """PutMetricData stamps a datum without a Timestamp with the time of receipt, and GetMetricData
    and GetMetricStatistics read it back (an aware stamp once failed both with a 500)."""
    cw = aws.client("cloudwatch")
    cw.put_metric_data(Namespace="Test/Stamps", MetricData=[{"MetricName": "m", "Value": 1.0}])
    now = datetime.now(UTC)
    cw.put_metric_data(Namespace="Test/Stamps", MetricData=[{"MetricName": "m", "Value": 2.0, "Timestamp": now}])
    window = {"StartTime": now - timedelta(minutes=5), "EndTime": now + timedelta(minutes=5)}
    metric = {"Namespace": "Test/Stamps", "MetricName": "m"}
    query = {"Id": "m", "MetricStat": {"Metric": metric, "Period": 600, "Stat": "Sum"}}
    found = cw.get_metric_data(MetricDataQueries=[query], **window)["MetricDataResults"][0]
    assert sum(found["Values"]) == 3.0
    points = cw.get_metric_statistics(**metric, Period=600, Statistics=["Sum"], **window)["Datapoints"]
    assert sum(p["Sum"] for p in points) == 3.0
