"""How the endpoint's modes scale: target tracking of a SageMaker dimension, and the way back
from zero that target tracking cannot take."""

from __future__ import annotations

from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

#: What scales a real-time or async endpoint: its variant's instances.
VARIANT_INSTANCES = "sagemaker:variant:DesiredInstanceCount"


def out_of_zero(
    scope: Construct,
    target: appscaling.CfnScalableTarget,
    *,
    alarm_id: str,
    description: str,
    metric: cloudwatch.Metric,
    evaluation_periods: int,
    cooldown_s: int,
    aggregation: str = "Maximum",
) -> cloudwatch.Alarm:
    """A step policy that adds one unit to `target` and the alarm on `metric` (at least 1) that
    runs it: target tracking cannot bring a target back from zero, since with nothing running
    the metric it tracks is not published (SageMaker's scale-to-zero guides). `aggregation` is
    the policy's MetricAggregationType (Average, Minimum or Maximum: a Sum, which the alarm's
    metric may have, is none of them)."""
    policy = appscaling.CfnScalingPolicy
    step = policy(
        scope,
        "OutOfZeroPolicy",
        policy_name="OutOfZero",
        policy_type="StepScaling",
        scaling_target_id=target.ref,
        step_scaling_policy_configuration=policy.StepScalingPolicyConfigurationProperty(
            adjustment_type="ChangeInCapacity",
            metric_aggregation_type=aggregation,
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


def target_tracking(
    scope: Construct,
    target_id: str,
    policy_id: str,
    *,
    dimension: str,
    resource_id: str,
    bounds: tuple[int, int],
    policy_name: str,
    target_value: float,
    cooldowns_s: tuple[int, int],
    predefined_metric: str | None = None,
    custom_metric: appscaling.CfnScalingPolicy.CustomizedMetricSpecificationProperty | None = None,
) -> appscaling.CfnScalableTarget:
    """A scalable target of SageMaker's `dimension` on `resource_id` between `bounds` (fewest,
    most), kept at `target_value` of a predefined or a custom metric, with (scale-in,
    scale-out) cooldowns. No RoleARN: Application Auto Scaling uses its SageMaker
    service-linked role."""
    target = appscaling.CfnScalableTarget(
        scope,
        target_id,
        service_namespace="sagemaker",
        scalable_dimension=dimension,
        resource_id=resource_id,
        min_capacity=bounds[0],
        max_capacity=bounds[1],
    )
    policy = appscaling.CfnScalingPolicy
    policy(
        scope,
        policy_id,
        policy_name=policy_name,
        policy_type="TargetTrackingScaling",
        scaling_target_id=target.ref,
        target_tracking_scaling_policy_configuration=policy.TargetTrackingScalingPolicyConfigurationProperty(
            target_value=float(target_value),
            predefined_metric_specification=policy.PredefinedMetricSpecificationProperty(
                predefined_metric_type=predefined_metric
            )
            if predefined_metric
            else None,
            customized_metric_specification=custom_metric,
            scale_in_cooldown=cooldowns_s[0],
            scale_out_cooldown=cooldowns_s[1],
        ),
    )
    return target
