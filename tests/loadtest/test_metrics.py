"""The endpoint's own figures from CloudWatch (botocore's Stubber checks each request against
CloudWatch's API model and answers it), and the endpoint check before any load."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from loadtest import metrics
from loadtest.cli import TargetError, check_target
from loadtest.invokers import Target

REGION = "us-east-1"
T = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def client(service: str) -> Any:
    return boto3.client(service, region_name=REGION, aws_access_key_id="t", aws_secret_access_key="t")


def at(minute: int, second: int = 0) -> datetime:
    return T.replace(minute=minute, second=second)


@pytest.mark.parametrize(
    ("start", "end", "window"),
    [
        ((0, 5), (0, 15), ((0, 0), (1, 0))),
        ((0, 50), (1, 10), ((0, 0), (2, 0))),
        ((0, 0), (1, 0), ((0, 0), (1, 0))),
        ((0, 0), (0, 0), ((0, 0), (1, 0))),
    ],
)
def test_a_window_is_whole_minutes_around_the_level(
    start: tuple[int, int], end: tuple[int, int], window: tuple[tuple[int, int], tuple[int, int]]
) -> None:
    got = metrics.Window.around(at(*start), at(*end))
    assert (got.start, got.end) == (at(*window[0]), at(*window[1]))
    assert got.seconds % 60 == 0


def test_scopes_are_the_variants_or_the_inference_component() -> None:
    variants = metrics.scopes(Target("e"), ["A", "B"])
    assert variants["B"] == [{"Name": "EndpointName", "Value": "e"}, {"Name": "VariantName", "Value": "B"}]
    assert metrics.scopes(Target("e", "ic"), ["A"]) == {"ic": [{"Name": "InferenceComponentName", "Value": "ic"}]}


def answer(scoped: dict[str, Any], values: dict[tuple[str, str, str], list[float]]) -> dict[str, Any]:
    """GetMetricData's answer with `values` for (scope, metric, statistic) and none for the rest."""
    return {
        "MetricDataResults": [
            {
                "Id": qid,
                "Label": qid,
                "Timestamps": [T] * len(values.get(key, [])),
                "Values": values.get(key, []),
                "StatusCode": "Complete",
            }
            for qid, key in metrics.query_ids(scoped).items()
        ]
    }


def test_published_figures_are_in_milliseconds() -> None:
    scoped = metrics.scopes(Target("e"), ["AllTraffic"])
    window = metrics.Window(at(0), at(2))
    values = {
        ("AllTraffic", "ModelLatency", "Average"): [12_500.0],
        ("AllTraffic", "ModelLatency", "p99"): [40_000.0],
        ("AllTraffic", "ModelLatency", "SampleCount"): [80.0],
        ("AllTraffic", "OverheadLatency", "Average"): [2_000.0],
        ("AllTraffic", "OverheadLatency", "SampleCount"): [80.0],
    }
    cloudwatch = client("cloudwatch")
    sent: list[dict[str, Any]] = []
    cloudwatch.meta.events.register("provide-client-params.*.GetMetricData", lambda params, **_: sent.append(params))
    with Stubber(cloudwatch) as stub:
        stub.add_response("get_metric_data", answer(scoped, values))
        figures = metrics.fetch(cloudwatch, scoped, window)
        stub.assert_no_pending_responses()
    (params,) = sent
    assert (params["StartTime"], params["EndTime"]) == (window.start, window.end)
    stats = [q["MetricStat"] for q in params["MetricDataQueries"]]
    # Each metric with the statistics its page lists (no percentile of OverheadLatency), over the
    # whole window as one period, for the variant.
    assert {(s["Metric"]["MetricName"], s["Stat"]) for s in stats} == {
        *(("ModelLatency", stat) for stat in metrics.STATISTICS),
        ("OverheadLatency", "Average"),
        ("OverheadLatency", "Maximum"),
        ("OverheadLatency", "SampleCount"),
    }
    assert {s["Period"] for s in stats} == {120}
    assert all(
        s["Metric"]["Namespace"] == "AWS/SageMaker" and s["Metric"]["Dimensions"] == scoped["AllTraffic"] for s in stats
    )
    assert figures["status"] == metrics.PUBLISHED
    model = figures["scopes"]["AllTraffic"]["ModelLatency"]
    assert model["mean"] == 12.5 and model["p99"] == 40.0 and model["samples"] == 80
    assert model["p50"] is None  # asked, but CloudWatch had none
    assert figures["scopes"]["AllTraffic"]["OverheadLatency"] == {"mean": 2.0, "max": None, "samples": 80}
    assert metrics.covered(figures, 80) and not metrics.covered(figures, 81)


def test_nothing_published_and_cloudwatch_refusing_are_told_apart() -> None:
    scoped = metrics.scopes(Target("e"), ["AllTraffic"])
    window = metrics.Window(at(0), at(1))
    cloudwatch = client("cloudwatch")
    with Stubber(cloudwatch) as stub:
        stub.add_response("get_metric_data", answer(scoped, {}))
        stub.add_client_error("get_metric_data", "AccessDeniedException", "not authorized to GetMetricData", 400)
        empty = metrics.fetch(cloudwatch, scoped, window)
        refused = metrics.fetch(cloudwatch, scoped, window)
    assert empty["status"] == metrics.NOT_PUBLISHED and not metrics.covered(empty, 1)
    assert refused["status"] == metrics.UNAVAILABLE and "AccessDeniedException" in refused["reason"]
    assert metrics.covered(refused, 10), "waiting does not change a refusal"


@pytest.mark.parametrize(
    ("stat", "values", "samples", "expected"),
    [
        ("SampleCount", [3.0, 5.0], [3.0, 5.0], 8.0),
        ("Maximum", [3.0, 9.0], [1.0, 1.0], 9.0),
        ("Average", [10.0, 20.0], [1.0, 3.0], 17.5),
        ("p50", [10.0, 20.0], [1.0, 3.0], None),
        ("p50", [10.0], [4.0], 10.0),
        ("Average", [], [], None),
    ],
)
def test_datapoints_of_a_split_window_combine(
    stat: str, values: list[float], samples: list[float], expected: float | None
) -> None:
    assert metrics.combine(stat, values, samples) == expected


def figures(samples: int) -> dict[str, Any]:
    if not samples:
        return {"status": metrics.NOT_PUBLISHED, "scopes": {}}
    return {"status": metrics.PUBLISHED, "scopes": {"A": {"ModelLatency": {"samples": samples}}}}


def test_collect_waits_only_for_an_endpoint_that_publishes() -> None:
    calls: list[int] = []

    def never(i: int) -> dict[str, Any]:
        calls.append(i)
        return figures(0)

    slept: list[float] = []
    waited: list[float] = []
    results = metrics.collect(never, [5, 5], wait_s=60, published=lambda: False, on_wait=waited.append,
                              sleep=slept.append)  # fmt: skip
    assert slept == waited == [] and calls == [0, 1]  # asked once each, and no wait at all
    assert [r["status"] for r in results] == [metrics.NOT_PUBLISHED] * 2


def test_collect_asks_again_until_each_level_is_counted() -> None:
    counts = {0: iter([10, 10]), 1: iter([0, 3, 7])}  # level 1 is counted in full on the third try
    slept: list[float] = []
    waited: list[float] = []
    results = metrics.collect(
        lambda i: figures(next(counts[i])), [10, 7], wait_s=60, published=lambda: True, on_wait=waited.append,
        sleep=slept.append,
    )  # fmt: skip
    assert [r["scopes"]["A"]["ModelLatency"]["samples"] for r in results] == [10, 7]
    assert len(slept) == 2 and all(0 < s <= metrics.POLL_S for s in slept) and waited == [60]


class StoppedClock:
    """A clock that moves only when something sleeps on it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_collect_gives_up_at_its_deadline() -> None:
    clock, calls = StoppedClock(), []

    def short(i: int) -> dict[str, Any]:
        calls.append(i)
        return figures(1)

    results = metrics.collect(short, [5], wait_s=40, published=lambda: True, sleep=clock.sleep, clock=clock)
    # Asked every POLL_S (15 s) until the 40 s are over, the last wait cut to what was left.
    assert clock.slept == [metrics.POLL_S, metrics.POLL_S, 40 - 2 * metrics.POLL_S] and len(calls) == 4
    assert results[0]["scopes"]["A"]["ModelLatency"]["samples"] == 1


# --- The endpoint check before any load ------------------------------------------------------


def described(status: str, **extra: Any) -> dict[str, Any]:
    return {
        "EndpointName": "e",
        "EndpointArn": f"arn:aws:sagemaker:{REGION}:123456789012:endpoint/e",
        "EndpointStatus": status,
        "CreationTime": T,
        "LastModifiedTime": T,
        "ProductionVariants": [{"VariantName": "AllTraffic"}, {"VariantName": "Canary"}],
        **extra,
    }


def test_an_endpoint_in_service_gives_its_variants() -> None:
    sagemaker = client("sagemaker")
    with Stubber(sagemaker) as stub:
        stub.add_response("describe_endpoint", described("InService"), {"EndpointName": "e"})
        assert check_target(sagemaker, Target("e")) == ["AllTraffic", "Canary"]


@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [
        ("Creating", None, "endpoint 'e' is Creating, not InService"),
        (
            "Failed",
            "the ping health check failed",
            "endpoint 'e' is Failed (the ping health check failed), not InService",
        ),
    ],
)
def test_an_endpoint_not_in_service_is_refused(status: str, reason: str | None, expected: str) -> None:
    sagemaker = client("sagemaker")
    extra = {"FailureReason": reason} if reason else {}
    with Stubber(sagemaker) as stub, pytest.raises(TargetError) as raised:
        stub.add_response("describe_endpoint", described(status, **extra))
        check_target(sagemaker, Target("e"))
    assert expected in str(raised.value)


def test_an_unknown_endpoint_is_refused_by_name() -> None:
    sagemaker = client("sagemaker")
    with Stubber(sagemaker) as stub, pytest.raises(TargetError) as raised:
        stub.add_client_error("describe_endpoint", "ValidationException", 'Could not find endpoint "nope".', 400)
        check_target(sagemaker, Target("nope"))
    assert "endpoint 'nope' does not exist" in str(raised.value) and "region" in str(raised.value)


def component(endpoint: str, status: str) -> dict[str, Any]:
    return {
        "InferenceComponentName": "ic",
        "InferenceComponentArn": f"arn:aws:sagemaker:{REGION}:123456789012:inference-component/ic",
        "EndpointName": endpoint,
        "EndpointArn": f"arn:aws:sagemaker:{REGION}:123456789012:endpoint/{endpoint}",
        "InferenceComponentStatus": status,
        "CreationTime": T,
        "LastModifiedTime": T,
    }


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (component("e", "InService"), None),
        (component("other", "InService"), "belongs to endpoint 'other', not 'e'"),
        (component("e", "Creating"), "inference component 'ic' is Creating, not InService"),
    ],
)
def test_an_inference_component_is_checked_too(answer: dict[str, Any], expected: str | None) -> None:
    sagemaker = client("sagemaker")
    with Stubber(sagemaker) as stub:
        stub.add_response("describe_endpoint", described("InService"))
        stub.add_response("describe_inference_component", answer, {"InferenceComponentName": "ic"})
        if expected is None:
            assert check_target(sagemaker, Target("e", "ic")) == ["AllTraffic", "Canary"]
        else:
            with pytest.raises(TargetError, match=expected):
                check_target(sagemaker, Target("e", "ic"))


def test_ctrl_c_while_waiting_keeps_the_figures_so_far() -> None:
    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    results = metrics.collect(lambda i: figures(1), [5], wait_s=60, published=lambda: True, sleep=interrupted)
    assert results[0]["scopes"]["A"]["ModelLatency"]["samples"] == 1
