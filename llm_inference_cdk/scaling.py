"""What the endpoint modes that scale to zero share: the way back from zero."""

from __future__ import annotations

from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct


def out_of_zero(
    scope: Construct,
    target: appscaling.CfnScalableTarget,
    *,
    alarm_id: str,
    description: str,
    metric: cloudwatch.Metric,
    evaluation_periods: int,
    cooldown_s: int,
) -> cloudwatch.Alarm:
    """A step policy that adds one unit to `target` and the alarm on `metric` (at least 1) that
    runs it: target tracking cannot bring a target back from zero, since with nothing running
    the metric it tracks is not published (SageMaker's scale-to-zero guides)."""
    policy = appscaling.CfnScalingPolicy
    step = policy(
        scope,
        "OutOfZeroPolicy",
        policy_name="OutOfZero",
        policy_type="StepScaling",
        scaling_target_id=target.ref,
        step_scaling_policy_configuration=policy.StepScalingPolicyConfigurationProperty(
            adjustment_type="ChangeInCapacity",
            metric_aggregation_type=metric.statistic,
            cooldown=cooldown_s,
            step_adjustments=[policy.StepAdjustmentProperty(scaling_adjustment=1, metric_interval_lower_bound=0)],
        ),
    )
    alarm = cloudwatch.Alarm(
        scope,
        alarm_id,
        alarm_description=description,
        metric=metric,
        threshold=1,
        evaluation_periods=evaluation_periods,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
    )
    # The alarm's action is the policy (not an SNS topic): set on the L1, which takes its ARN.
    alarm.node.default_child.alarm_actions = [step.ref]  # type: ignore[union-attr]
    return alarm
