"""Scaling policies as Application Auto Scaling runs them (Application Auto Scaling User Guide,
application-auto-scaling-target-tracking.md and application-auto-scaling-step-scaling-policies.md
of awsdocs/application-auto-scaling-user-guide; the scaling activities' words from
application-auto-scaling-scaling-activities.md):

* a target tracking policy makes the CloudWatch alarms AWS makes for it and runs when one of
  them does: ``TargetTracking-<resource>-AlarmHigh-<id>``, above the target for 3 of 3 one-minute
  datapoints, and (unless scale-in is disabled) ``...-AlarmLow-<id>``, below 90% of it for 15 of
  15 (the alarms AWS made for a SageMaker variant's policy, as a user read them: re:Post
  "sagemaker-autoscaling-delay", "> 1500 for 3 datapoints within 3 minutes", "< 1350 for 15
  datapoints within 15 minutes"); the new capacity is proportional to the metric, rounded up
  (the capacity times the metric over the target: "scales out proportionally to the metric",
  "always acts conservatively by rounding up");
* a step scaling policy applies the step adjustment its metric's breach falls in (the alarm's
  latest datapoints aggregated as MetricAggregationType says, against the alarm's threshold;
  above it the lower bound inclusive, below it the upper bound), as ChangeInCapacity,
  ExactCapacity or PercentChangeInCapacity (rounded as the guide says, MinAdjustmentMagnitude);
* cooldowns: after a scale-out, another scale-out only if larger, counting the capacity the
  first added; after a scale-in, no scale-in until the cooldown ends; a scale-out ends a
  scale-in's cooldown;
* the capacity stays within the scalable target's minimum and maximum (a target whose capacity
  is outside new bounds is moved into them: "minimum capacity was set to 15"), and dynamic
  scaling suspended in a direction does not scale that way.

Each decision is a scaling activity (DescribeScalingActivities), a decision not to scale one
with its NotScaledReasons.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Mapping
from typing import Any

from moto.applicationautoscaling.models import applicationautoscaling_backends
from moto.cloudwatch.models import cloudwatch_backends

from local_aws import host
from local_aws.applicationautoscaling.targets import CapacityError, dimension
from local_aws.cloudwatch import recent_values

log = logging.getLogger("local_aws.applicationautoscaling")

#: The alarms AWS makes for a target tracking policy: (suffix, comparison, periods, share of target).
TRACKING_ALARMS = (
    ("AlarmHigh", "GreaterThanThreshold", 3, 1.0),
    ("AlarmLow", "LessThanThreshold", 15, 0.9),
)

#: Application Auto Scaling's predefined SageMaker metrics the local AWS tracks: (namespace,
#: metric, statistic); their dimensions come from the target's resource id.
PREDEFINED = {
    "SageMakerVariantInvocationsPerInstance": ("AWS/SageMaker", "InvocationsPerInstance", "Sum"),
    "SageMakerInferenceComponentInvocationsPerCopy": ("AWS/SageMaker", "InvocationsPerCopy", "Sum"),
}


def _resource_dimensions(resource_id: str) -> list[dict[str, str]]:
    """The CloudWatch dimensions of a SageMaker resource's metrics."""
    parts = resource_id.split("/")
    if parts[0] == "endpoint":
        return [{"Name": "EndpointName", "Value": parts[1]}, {"Name": "VariantName", "Value": parts[3]}]
    return [{"Name": "InferenceComponentName", "Value": parts[1]}]


def _tracked_metric(policy: Any) -> dict[str, Any] | None:
    """The metric a target tracking policy tracks, as PutMetricAlarm's arguments; None for one
    the local AWS cannot track."""
    config = policy.target_tracking_scaling_policy_configuration or {}
    predefined = (config.get("PredefinedMetricSpecification") or {}).get("PredefinedMetricType")
    if predefined in PREDEFINED:
        namespace, name, statistic = PREDEFINED[predefined]
        dimensions = _resource_dimensions(policy.resource_id)
        return {"namespace": namespace, "metric_name": name, "statistic": statistic, "dimensions": dimensions}
    custom = config.get("CustomizedMetricSpecification") or {}
    if custom.get("MetricName"):
        return {
            "namespace": custom["Namespace"],
            "metric_name": custom["MetricName"],
            "statistic": custom.get("Statistic", "Average"),
            "dimensions": [{"Name": d["Name"], "Value": d["Value"]} for d in custom.get("Dimensions") or []],
            "unit": custom.get("Unit"),
        }
    return None


def make_alarms(policy: Any, account: str, region: str) -> list[Any]:
    """The alarms of a target tracking policy, as AWS makes them (see the module's docstring)."""
    metric = _tracked_metric(policy)
    if metric is None:
        log.warning("scaling policy %s: the local AWS does not track its metric: no alarm, no scaling",
                    policy.policy_name)  # fmt: skip
        return []
    config = policy.target_tracking_scaling_policy_configuration
    target = float(config["TargetValue"])
    disabled = str(config.get("DisableScaleIn", False)).lower() == "true"
    cloudwatch = cloudwatch_backends[account][region]
    alarms = []
    for suffix, comparison, periods, share in TRACKING_ALARMS:
        if suffix == "AlarmLow" and disabled:
            continue
        alarms.append(
            cloudwatch.put_metric_alarm(
                name=f"TargetTracking-{policy.resource_id}-{suffix}-{uuid.uuid4()}",
                comparison_operator=comparison,
                evaluation_periods=periods,
                datapoints_to_alarm=periods,
                period=60,
                threshold=target * share,
                description=f"DO NOT EDIT OR DELETE. For TargetTrackingScaling policy {policy.policy_arn}.",
                alarm_actions=[policy.policy_arn],
                **metric,
            )
        )
    return alarms


# --- running a policy -------------------------------------------------------------------------------


def _find(backend: Any, policy_arn: str) -> Any:
    for policy in backend.policies.values():
        if policy.policy_arn == policy_arn:
            return policy
    raise LookupError(f"No scaling policy {policy_arn}")


def _activities(backend: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] | None = getattr(backend, "local_activities", None)
    if found is None:
        found = backend.local_activities = []
    return found


def activities(account: str, region: str) -> list[dict[str, Any]]:
    """The scaling activities of the account's region, oldest first."""
    return _activities(applicationautoscaling_backends[account][region])


def record(target: Any, cause: str, *, to: int | None, noun: str, not_scaled: Mapping[str, Any] | None = None,
           failure: str | None = None) -> dict[str, Any]:  # fmt: skip
    """A scaling activity of `target`: its capacity set `to`, a decision not to scale, or a failure."""
    now = host.now().timestamp()
    activity: dict[str, Any] = {
        "ActivityId": str(uuid.uuid4()),
        "ServiceNamespace": target.service_namespace,
        "ResourceId": target.resource_id,
        "ScalableDimension": target.scalable_dimension,
        "Cause": cause,
        "StartTime": now,
    }
    if failure is not None:
        activity.update(Description=f"Setting desired {noun}.", EndTime=now, StatusCode="Failed", StatusMessage=failure)
    elif not_scaled is not None:
        activity.update(Description="Attempting to scale due to alarm triggered", StatusCode="Failed",
                        NotScaledReasons=[dict(not_scaled)])  # fmt: skip
    else:
        activity.update(
            Description=f"Setting desired {noun} to {to}.",
            EndTime=now,
            StatusCode="Successful",
            StatusMessage=f"Successfully set desired {noun} to {to}. Change successfully fulfilled by "
            f"{target.service_namespace}.",
        )
    _activities(target.applicationautoscaling_backend).append(activity)
    return activity


def _suspended(target: Any, out: bool) -> bool:
    state = target.suspended_state or {}
    return str(state.get("DynamicScalingOutSuspended" if out else "DynamicScalingInSuspended", False)).lower() == "true"


def _aggregate(kind: str, values: list[float]) -> float:
    if kind == "Minimum":
        return min(values)
    if kind == "Maximum":
        return max(values)
    return sum(values) / len(values)


def _step(config: Mapping[str, Any], breach: float) -> float | None:
    """The scaling adjustment of the step the breach (metric minus threshold) falls in."""
    for step in config.get("StepAdjustments") or []:
        low, high = step.get("MetricIntervalLowerBound"), step.get("MetricIntervalUpperBound")
        low = -math.inf if low is None else float(low)
        high = math.inf if high is None else float(high)
        inside = (low <= breach < high) if breach >= 0 else (low < breach <= high)
        if inside:
            return float(step["ScalingAdjustment"])
    return None


def _percent_change(current: int, percent: float, at_least: int) -> int:
    """The guide's rounding: above 1 down, between 0 and 1 to 1, between -1 and 0 to -1, below -1 up."""
    change = current * percent / 100
    rounded = math.floor(change) if change > 1 else 1 if change > 0 else -1 if change > -1 else math.ceil(change)
    if change == 0:
        rounded = 0
    return rounded if abs(rounded) >= at_least else int(math.copysign(at_least, rounded))


def _stepped(policy: Any, alarm: Any, current: int, values: list[float]) -> int | None:
    config = policy.step_scaling_policy_configuration or {}
    breach = _aggregate(config.get("MetricAggregationType", "Average"), values) - float(alarm.threshold)
    adjustment = _step(config, breach)
    if adjustment is None:
        return None
    kind = config.get("AdjustmentType", "ChangeInCapacity")
    if kind == "ExactCapacity":
        return int(adjustment)
    if kind == "PercentChangeInCapacity":
        return current + _percent_change(current, adjustment, int(config.get("MinAdjustmentMagnitude") or 0))
    return current + int(adjustment)


def _cooldown(policy: Any, out: bool) -> float:
    if policy.policy_type == "StepScaling":
        return float((policy.step_scaling_policy_configuration or {}).get("Cooldown") or 0)
    config = policy.target_tracking_scaling_policy_configuration or {}
    # The API reference's default for SageMaker's resources, 300 s either way.
    return float(config.get("ScaleOutCooldown" if out else "ScaleInCooldown", 300))


def _cooling(policy: Any, out: bool) -> bool:
    """Whether the policy's cooldown of a scale-out (`out`) or scale-in runs."""
    last = getattr(policy, "local_scaled_out_at" if out else "local_scaled_in_at", None)
    return last is not None and (host.now() - last).total_seconds() < _cooldown(policy, out)


def execute(policy_arn: str, alarm: Any, account: str, region: str) -> str:
    """The policy `policy_arn` run by `alarm` (CloudWatch's action): the capacity changed, or why
    not, as a scaling activity; what happened, in a line."""
    backend = applicationautoscaling_backends[account][region]
    policy = _find(backend, policy_arn)
    target: Any = backend.targets.get(policy.scalable_dimension, {}).get(policy.resource_id)
    if target is None:
        raise LookupError(f"No scalable target {policy.resource_id} for the policy {policy.policy_name}")
    cause = f"monitor alarm {alarm.name} in state {alarm.state_value} triggered policy {policy.policy_name}"
    try:
        dim = dimension(policy.service_namespace, policy.scalable_dimension)
        current = dim.capacity(policy.resource_id, account, region)
    except CapacityError as exc:
        return str(record(target, cause, to=None, noun="capacity", failure=str(exc))["StatusMessage"])
    wanted, held = _decision(policy, target, alarm, current, account, region)
    if wanted is None:
        return f"policy {policy.policy_name}: {held}"
    out = wanted > current
    bounded = min(max(wanted, int(target.min_capacity)), int(target.max_capacity))
    if bounded == current:
        reason: dict[str, Any] = {"Code": "AlreadyAtDesiredCapacity"}
        if wanted != current:
            code, limit = ("AlreadyAtMaxCapacity", "MaxCapacity") if out else ("AlreadyAtMinCapacity", "MinCapacity")
            reason = {"Code": code, limit: bounded}
        record(target, cause, to=None, noun=dim.noun, not_scaled={**reason, "CurrentCapacity": current})
        return f"policy {policy.policy_name}: {reason['Code']}"
    try:
        dim.set_capacity(policy.resource_id, bounded, account, region)
    except Exception as exc:  # the owning service refused: the activity failed, as in AWS
        return str(record(target, cause, to=bounded, noun=dim.noun, failure=str(exc))["StatusMessage"])
    _scaled(backend, policy, out, current)
    return str(record(target, cause, to=bounded, noun=dim.noun)["StatusMessage"])


def _decision(policy: Any, target: Any, alarm: Any, current: int, account: str, region: str) -> tuple[int | None, str]:
    """The capacity the policy asks for now, or None and why it asks for none."""
    values = recent_values(alarm, account, region)
    if not values:
        return None, "no data in the alarm's latest periods, nothing to scale on"
    wanted = _wanted(policy, alarm, current, values)
    if wanted is None:
        return None, f"capacity {current} kept"
    out = wanted > current
    if wanted == current:
        return wanted, ""
    if _suspended(target, out):
        return None, f"dynamic scaling {'out' if out else 'in'} is suspended"
    if not out and _cooling(policy, out=False):
        return None, "scale-in cooldown"
    return wanted, ""


def _scaled(backend: Any, policy: Any, out: bool, before: int) -> None:
    """The cooldowns a scaling activity starts (and a scale-out ends)."""
    now = host.now()
    if not out:
        policy.local_scaled_in_at = now
        return
    if not _cooling(policy, out=True):
        policy.local_capacity_before_out = before
    policy.local_scaled_out_at = now
    for other in backend.policies.values():  # a scale-out ends every scale-in cooldown of the target
        if (other.resource_id, other.scalable_dimension) == (policy.resource_id, policy.scalable_dimension):
            other.local_scaled_in_at = None


def _wanted(policy: Any, alarm: Any, current: int, values: list[float]) -> int | None:
    """The capacity the policy asks for, None for no change. Within a scale-out cooldown a
    scale-out counts the capacity the last one added as there already: it is computed from the
    capacity before that one, and must come out larger than the capacity now."""
    cooling_out = _cooling(policy, out=True)
    before = int(getattr(policy, "local_capacity_before_out", current))
    if policy.policy_type == "StepScaling":
        wanted = _stepped(policy, alarm, current, values)
        if wanted is not None and wanted > current and cooling_out:
            wanted = _stepped(policy, alarm, before, values)
            return wanted if wanted is not None and wanted > current else None
        return wanted
    if current == 0:
        return None  # no capacity, no per-capacity metric to track (SageMaker's scale-to-zero guide)
    high = alarm.comparison_operator.startswith("Greater")
    target = float(policy.target_tracking_scaling_policy_configuration["TargetValue"])
    wanted = math.ceil((before if high and cooling_out else current) * values[-1] / target)
    return wanted if wanted == current or high == (wanted > current) else None


def bound_capacity(target: Any, account: str, region: str) -> None:
    """A target registered again with a minimum above or a maximum below its capacity is moved
    into its bounds at once, as Application Auto Scaling does."""
    try:
        dim = dimension(target.service_namespace, target.scalable_dimension)
        current = dim.capacity(target.resource_id, account, region)
    except CapacityError:
        return  # the resource is not there (yet): nothing to move
    if target.min_capacity is not None and current < int(target.min_capacity):
        wanted, cause = int(target.min_capacity), f"minimum capacity was set to {target.min_capacity}"
    elif target.max_capacity is not None and current > int(target.max_capacity):
        wanted, cause = int(target.max_capacity), f"maximum capacity was set to {target.max_capacity}"
    else:
        return
    dim.set_capacity(target.resource_id, wanted, account, region)
    record(target, cause, to=wanted, noun=dim.noun)
