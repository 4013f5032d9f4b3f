"""Application Auto Scaling's policies on the local AWS (local_aws/applicationautoscaling/), as
the Application Auto Scaling User Guide describes them: step adjustments and their rounding, and
a target tracking policy that scales an endpoint's variant out and back in through the alarms it
made, evaluated by CloudWatch on the clock, with its cooldowns."""

from __future__ import annotations

from typing import Any

import pytest

from local_aws import LocalAws
from local_aws.applicationautoscaling.policies import _percent_change, _step
from local_aws.cloudwatch import publish
from tests.local_aws.helpers import client, echo_endpoint, endpoint_status

# --- step scaling --------------------------------------------------------------------------------

#: The guide's example: a breach threshold of 50 (percent), scale-out and scale-in steps.
OUT = {"StepAdjustments": [
    {"MetricIntervalLowerBound": 0, "MetricIntervalUpperBound": 10, "ScalingAdjustment": 0},
    {"MetricIntervalLowerBound": 10, "MetricIntervalUpperBound": 20, "ScalingAdjustment": 10},
    {"MetricIntervalLowerBound": 20, "ScalingAdjustment": 30},
]}  # fmt: skip
IN = {"StepAdjustments": [
    {"MetricIntervalLowerBound": -10, "MetricIntervalUpperBound": 0, "ScalingAdjustment": 0},
    {"MetricIntervalLowerBound": -20, "MetricIntervalUpperBound": -10, "ScalingAdjustment": -10},
    {"MetricIntervalUpperBound": -20, "ScalingAdjustment": -30},
]}  # fmt: skip


@pytest.mark.parametrize(
    ("metric", "config", "adjustment"),
    # The guide: "If the metric value gets to 60 ... by 1 (10 percent) ... to 70 ... 30 percent",
    # "If the metric value gets to 40 ... 10 percent ... falls to 30 ... 30 percent".
    [(55, OUT, 0), (60, OUT, 10), (69.9, OUT, 10), (70, OUT, 30), (45, IN, 0), (41, IN, 0), (40, IN, -10),
     (31, IN, -10), (30, IN, -30)],
)  # fmt: skip
def test_the_step_a_breach_falls_in(metric: float, config: dict[str, Any], adjustment: float) -> None:
    # Above the threshold the lower bound is inclusive, below it the upper bound.
    assert _step(config, metric - 50) == adjustment


def test_percent_changes_are_rounded_as_the_guide_says() -> None:
    # The guide's walk-through: +10% of 10, +30% of 11, -10% of 14, -30% of 13.
    assert [_percent_change(10, 10, 0), _percent_change(11, 30, 0)] == [1, 3]
    assert [_percent_change(14, -10, 0), _percent_change(13, -30, 0)] == [-1, -3]
    assert [_percent_change(2, 10, 0), _percent_change(2, -10, 0)] == [1, -1]  # between -1 and 1: one
    assert _percent_change(4, 25, 2) == 2  # MinAdjustmentMagnitude


# --- target tracking, end to end on the local AWS ---------------------------------------------------

VARIANT = {
    "ServiceNamespace": "sagemaker",
    "ResourceId": "endpoint/tracked/variant/AllTraffic",
    "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
}


def desired(aws: LocalAws) -> int:
    (variant,) = client(aws, "sagemaker").describe_endpoint(EndpointName="tracked")["ProductionVariants"]
    return int(variant["DesiredInstanceCount"])


def minutes_of(aws: LocalAws, per_instance: float, minutes: int) -> list[int]:
    """`minutes` of invocations per instance at `per_instance` a minute, published as SageMaker
    publishes them; the desired instance count after each minute."""
    counts = []
    dimensions = [{"Name": "EndpointName", "Value": "tracked"}, {"Name": "VariantName", "Value": "AllTraffic"}]
    for _ in range(minutes):
        datum = {"MetricName": "InvocationsPerInstance", "Value": per_instance, "Dimensions": dimensions}
        publish(aws.account, aws.region, "AWS/SageMaker", [datum])
        aws.clock.advance(60)
        counts.append(desired(aws))
    return counts


def test_target_tracking_scales_a_variant_out_and_back_in(aws: LocalAws) -> None:
    aws.reset()
    echo_endpoint(aws, "tracked")
    assert endpoint_status(aws, "tracked", settle=True) == "InService"
    scaling = client(aws, "application-autoscaling")
    scaling.register_scalable_target(**VARIANT, MinCapacity=1, MaxCapacity=4)
    scaling.put_scaling_policy(
        **VARIANT, PolicyName="invocations", PolicyType="TargetTrackingScaling",
        TargetTrackingScalingPolicyConfiguration={
            "TargetValue": 10.0, "ScaleOutCooldown": 120, "ScaleInCooldown": 300,
            "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"},
        },
    )  # fmt: skip
    # 30 a minute on one instance, three times the target: after 3 of 3 breaching minutes,
    # 3 instances (1 x 30 / 10); the next minutes, within the scale-out cooldown, the same
    # metric asks for no more than the cooldown's scale-out already added.
    assert minutes_of(aws, 30, 4) == [1, 1, 3, 3]
    # Past the cooldown, still 3 times the target on 3 instances: 9, bounded by the maximum.
    assert minutes_of(aws, 30, 1) == [4]
    # 5 a minute on 4 instances (half the target, below 90% of it): after 15 of 15 minutes
    # scaled in to 2 (4 x 5 / 10), then no scale-in within its cooldown (5 minutes), then 1.
    counts = minutes_of(aws, 5, 21)
    assert counts[:14] == [4] * 14 and counts[14] == 2
    assert counts[15:19] == [2] * 4 and counts[19:] == [1, 1]
    activities = scaling.describe_scaling_activities(ServiceNamespace="sagemaker")["ScalingActivities"]
    assert [a["Description"] for a in reversed(activities)] == [
        f"Setting desired instance count to {n}." for n in (3, 4, 2, 1)
    ]
    assert all(a["Cause"].startswith("monitor alarm TargetTracking-endpoint/tracked/variant/AllTraffic-Alarm")
               for a in activities)  # fmt: skip
    # At 1 instance, the low alarm still in ALARM asks for 1 again: a decision not to scale.
    minutes_of(aws, 5, 1)
    not_scaled = scaling.describe_scaling_activities(ServiceNamespace="sagemaker", IncludeNotScaledActivities=True)
    reasons = [r["Code"] for a in not_scaled["ScalingActivities"] for r in a.get("NotScaledReasons", [])]
    assert set(reasons) == {"AlreadyAtDesiredCapacity"}


def test_a_new_minimum_above_the_capacity_scales_out_to_it(aws: LocalAws) -> None:
    aws.reset()
    echo_endpoint(aws, "tracked")
    endpoint_status(aws, "tracked", settle=True)
    client(aws, "application-autoscaling").register_scalable_target(**VARIANT, MinCapacity=2, MaxCapacity=4)
    assert desired(aws) == 2
    (activity,) = client(aws, "application-autoscaling").describe_scaling_activities(ServiceNamespace="sagemaker")[
        "ScalingActivities"
    ]
    assert activity["Cause"] == "minimum capacity was set to 2"
