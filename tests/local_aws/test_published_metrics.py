"""What AWS's services publish, a minute at a time (local_aws/cloudwatch/metrics.py): one datum
per minute, metric, dimensions and unit, its values and their counts in bounded memory, read by
CloudWatch's statistics as the values themselves."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from moto.cloudwatch.models import cloudwatch_backends

from local_aws import LocalAws
from local_aws.cloudwatch.metrics import EXACT_VALUES, OPEN_FOR, RELATIVE_ERROR, PublishedMinute, published_backends
from local_aws.cloudwatch.statistics import parse, samples_of
from tests.local_aws.helpers import client

_accounts = itertools.count(220_000_000_000)
REGION = "eu-west-1"
START = datetime(2026, 12, 7, 12, 0, 0)
DIMENSIONS = [{"Name": "EndpointName", "Value": "e"}, {"Name": "VariantName", "Value": "AllTraffic"}]


@pytest.fixture
def account() -> Iterator[str]:
    """An account of the test's own (moto's backends are the process's)."""
    account = str(next(_accounts))
    yield account
    cloudwatch_backends[account].pop(REGION, None)
    published_backends[account].pop(REGION, None)


def record(account: str, name: str, values: list[float], at: datetime, unit: str = "Microseconds") -> None:
    published_backends[account][REGION].record(
        "AWS/SageMaker", [{"MetricName": name, "Value": v, "Unit": unit, "Dimensions": DIMENSIONS} for v in values], at
    )


def minutes(account: str) -> list[PublishedMinute]:
    data = list(cloudwatch_backends[account][REGION].metric_data)
    assert all(isinstance(d, PublishedMinute) for d in data)
    return data  # type: ignore[return-value]


def test_a_minute_of_a_metric_is_one_datum_with_each_value_and_its_count(account: str) -> None:
    record(account, "ModelLatency", [250.0, 10.0, 250.0], START + timedelta(seconds=5))
    record(account, "ModelLatency", [40.0], START + timedelta(seconds=59.9))
    record(account, "Invocations", [1.0, 1.0], START + timedelta(seconds=30), unit="None")
    record(account, "ModelLatency", [7.0], START + timedelta(minutes=1))
    data = minutes(account)
    later = START + timedelta(minutes=1)
    assert [(d.name, d.timestamp, d.sample_count) for d in data] == [
        ("ModelLatency", START, 4), ("Invocations", START, 2), ("ModelLatency", later, 1)]  # fmt: skip
    latency = data[0].distribution()
    assert latency.counted == ((250.0, 2), (10.0, 1), (40.0, 1))
    assert (latency.stats.count, latency.stats.total, latency.stats.minimum, latency.stats.maximum) == (4, 550, 10, 250)
    # moto reads it as a statistic set: its own SampleCount, Sum, Minimum and Maximum.
    assert (data[0].sample_count, data[0].sum, data[0].min, data[0].max) == (4, 550, 10, 250)


def test_past_its_exact_values_a_minute_rounds_them_within_the_stated_error_and_stays_bounded(account: str) -> None:
    rng = random.Random(37)
    values = [rng.lognormvariate(11, 1.5) for _ in range(20_000)]  # latencies over four decades
    record(account, "ModelLatency", values, START)
    (minute,) = minutes(account)
    # 230 buckets a decade: bounded by the values' range, not by how many came.
    decades = math.log10(max(values) / min(values))
    assert EXACT_VALUES < 20_000 and minute.distinct_values <= 240 * (decades + 1)
    assert (minute.sample_count, minute.min, minute.max) == (20_000, min(values), max(values))
    assert minute.sum == pytest.approx(sum(values), rel=1e-12)
    ordered = sorted(values)
    samples = samples_of([minute])
    for name in ("p50", "p90", "p99", "p99.9"):
        exact = ordered[math.ceil(float(name[1:]) / 100 * len(ordered)) - 1]  # the nearest rank, as CloudWatch
        read = parse(name).of(samples)
        assert read == pytest.approx(exact, rel=RELATIVE_ERROR * 1.01)
    assert parse("Average").of(samples) == pytest.approx(sum(values) / len(values), rel=1e-12)


def test_exact_values_stay_exact_up_to_the_bound(account: str) -> None:
    values = [float(v) for v in range(1, EXACT_VALUES + 1)]
    record(account, "ModelLatency", values, START)
    (minute,) = minutes(account)
    assert minute.distinct_values == EXACT_VALUES
    assert parse("p50").of(samples_of([minute])) == 500.0


def test_only_the_recent_minutes_are_kept_open_to_more_values(account: str) -> None:
    for minute in range(60):
        record(account, "Invocations", [1.0], START + timedelta(minutes=minute), unit="None")
    backend = published_backends[account][REGION]
    assert backend.open_minutes <= OPEN_FOR.total_seconds() / 60 + 1
    assert len(minutes(account)) == 60  # every minute is still CloudWatch's data


def test_get_metric_statistics_reads_a_published_minute_with_its_percentiles(aws: LocalAws) -> None:
    aws.reset()
    now = aws.clock.now().replace(second=0, microsecond=0)
    from local_aws.cloudwatch import publish

    publish(aws.account, aws.region, "AWS/SageMaker",
            [{"MetricName": "ModelLatency", "Value": float(v), "Unit": "Microseconds", "Dimensions": DIMENSIONS}
             for v in range(1, 101)])  # fmt: skip
    found = client(aws, "cloudwatch").get_metric_statistics(
        Namespace="AWS/SageMaker", MetricName="ModelLatency", Dimensions=DIMENSIONS,
        StartTime=now - timedelta(minutes=1), EndTime=now + timedelta(minutes=2), Period=60,
        Statistics=["SampleCount", "Average", "Maximum"], ExtendedStatistics=["p50", "p99"],
    )  # fmt: skip
    (point,) = found["Datapoints"]
    assert point["Timestamp"] == now.replace(tzinfo=UTC)
    assert (point["SampleCount"], point["Average"], point["Maximum"]) == (100, 50.5, 100)
    assert point["ExtendedStatistics"] == {"p50": 50.0, "p99": 99.0}
