"""CloudWatch: the CloudFormation type of an alarm, single-metric or on metric math, which stock
moto lacks (registered by ``cloudformation.missing_resource_types_exist``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from moto.applicationautoscaling.models import applicationautoscaling_backends
from moto.cloudwatch.models import (
    CloudWatchBackend,
    Dimension,
    Metric,
    MetricDataQuery,
    MetricDatum,
    MetricStat,
    cloudwatch_backends,
)
from moto.cloudwatch.responses import CloudWatchResponse
from moto.core.responses import ActionResult
from moto.core.utils import utcnow
from moto.kms.models import kms_backends
from moto.sns.models import sns_backends

from local_aws.patches.base import EmulatedResource, patch, replace
from local_aws.policies import evaluate, first_denial, service_caller

log = logging.getLogger("local_aws.cloudwatch")


class MetricAlarm(EmulatedResource):
    """AWS::CloudWatch::Alarm, on moto's CloudWatch: a single metric, or the metric queries of a
    math alarm (``Metrics``), which DescribeAlarms returns as AWS does."""

    TYPE: ClassVar[str] = "AWS::CloudWatch::Alarm"
    NAME_PROPERTY: ClassVar[str] = "AlarmName"
    HAS_ARN: ClassVar[bool] = True

    def __init__(self, alarm: Any) -> None:
        self.alarm = alarm

    @property
    def physical_resource_id(self) -> str:
        return str(self.alarm.name)

    @property
    def arn(self) -> str:
        return str(self.alarm.alarm_arn)

    @classmethod
    def create(cls, name: str, properties: dict[str, Any], account_id: str, region_name: str) -> MetricAlarm:
        # moto types the optional fields str, and keeps the None of one a template leaves out.
        p: Any = properties
        alarm = cloudwatch_backends[account_id][region_name].put_metric_alarm(
            name=p.get("AlarmName", name),
            namespace=p.get("Namespace"),
            metric_name=p.get("MetricName"),
            comparison_operator=p["ComparisonOperator"],
            evaluation_periods=int(p["EvaluationPeriods"]),
            period=int(p["Period"]) if "Period" in p else None,  # type: ignore[arg-type]
            threshold=float(p["Threshold"]) if "Threshold" in p else None,  # type: ignore[arg-type]
            statistic=p.get("Statistic"),
            description=p.get("AlarmDescription"),
            dimensions=p.get("Dimensions", []),
            alarm_actions=p.get("AlarmActions", []),
            metric_data_queries=[_query(q) for q in p.get("Metrics", [])] or None,
            datapoints_to_alarm=p.get("DatapointsToAlarm"),
            extended_statistic=p.get("ExtendedStatistic"),
            ok_actions=p.get("OKActions", []),
            insufficient_data_actions=p.get("InsufficientDataActions", []),
            unit=p.get("Unit"),
            actions_enabled=p.get("ActionsEnabled", True) in (True, "true"),
            treat_missing_data=p.get("TreatMissingData"),
            evaluate_low_sample_count_percentile=p.get("EvaluateLowSampleCountPercentile"),
            threshold_metric_id=p.get("ThresholdMetricId"),
        )
        return cls(alarm)

    def replaced_by(self, properties: dict[str, Any]) -> bool:
        # PutMetricAlarm on the same name replaces the alarm's definition in place.
        return bool(properties.get("AlarmName", self.alarm.name) != self.alarm.name)

    def name_after_update(self, new_resource_name: str) -> str:
        # An alarm the template does not name keeps the name it was created with.
        return str(self.alarm.name)

    def delete(self, account_id: str, region_name: str) -> None:
        cloudwatch_backends[account_id][region_name].delete_alarms([self.alarm.name])


def _query(q: dict[str, Any]) -> MetricDataQuery:
    """One of a math alarm's metric queries, as moto's PutMetricAlarm reads it from the API."""
    stat = q.get("MetricStat")
    metric_stat = None
    if stat is not None:
        m = stat["Metric"]
        dimensions = [Dimension(d["Name"], d["Value"]) for d in m.get("Dimensions", [])]
        metric_stat = MetricStat(Metric(m["MetricName"], m["Namespace"], dimensions), str(stat["Period"]),
                                 stat["Stat"], stat.get("Unit"))  # fmt: skip
    return MetricDataQuery(
        query_id=q["Id"],
        label=q.get("Label"),  # type: ignore[arg-type]
        period=str(q["Period"]) if "Period" in q else None,  # type: ignore[arg-type]
        return_data=str(q.get("ReturnData", True)).lower(),
        expression=q.get("Expression"),
        metric_stat=metric_stat,
    )


# --- Alarm actions ---------------------------------------------------------------------------------

#: The service principal CloudWatch calls other services as when it runs an alarm's actions.
CLOUDWATCH = "cloudwatch.amazonaws.com"


def _region_name(region: str) -> str:
    """The region's long name, as CloudWatch writes it in notifications ("US East (N. Virginia)")."""
    from botocore.session import get_session

    for partition in get_session().get_data("endpoints")["partitions"]:
        if region in partition["regions"]:
            return str(partition["regions"][region].get("description", region))
    return region


def _timestamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}+0000"


def notification(alarm: Any, old_state: str, account: str, region: str) -> tuple[str, str]:
    """The subject and message CloudWatch publishes for an alarm's state change (CloudWatch
    User Guide, "Using Amazon SNS topics: notification format" and the knowledge center's
    example of an alarm's notification)."""
    named = _region_name(region)
    message = {
        "AlarmName": alarm.name,
        "AlarmDescription": alarm.description,
        "AWSAccountId": account,
        "AlarmConfigurationUpdatedTimestamp": _timestamp(alarm.configuration_updated_timestamp),
        "NewStateValue": alarm.state_value,
        "NewStateReason": alarm.state_reason,
        "StateChangeTime": _timestamp(alarm.state_updated_timestamp),
        "Region": named,
        "AlarmArn": alarm.alarm_arn,
        "OldStateValue": old_state,
        "OKActions": list(alarm.ok_actions),
        "AlarmActions": list(alarm.alarm_actions),
        "InsufficientDataActions": list(alarm.insufficient_data_actions),
        "Trigger": {
            "MetricName": alarm.metric_name,
            "Namespace": alarm.namespace,
            "StatisticType": "Statistic",
            "Statistic": (alarm.statistic or "").upper() or None,
            "Dimensions": [{"name": d.name, "value": d.value} for d in alarm.dimensions],
            "Period": alarm.period,
            "EvaluationPeriods": alarm.evaluation_periods,
            "ComparisonOperator": alarm.comparison_operator,
            "Threshold": alarm.threshold,
            "TreatMissingData": alarm.treat_missing_data or "missing",
        },
    }
    subject = f'{alarm.state_value}: "{alarm.name}" in {named}'
    return subject[:100], json.dumps(message)


def _history(alarm: Any) -> list[dict[str, Any]]:
    """The alarm's history as DescribeAlarmHistory answers it, newest last."""
    found: list[dict[str, Any]] | None = getattr(alarm, "local_history", None)
    if found is None:
        found = []
        alarm.local_history = found
    return found


def _record(alarm: Any, kind: str, summary: str, data: Mapping[str, Any]) -> None:
    _history(alarm).append(
        {
            "AlarmName": alarm.name,
            "AlarmType": "MetricAlarm",
            "Timestamp": utcnow(),
            "HistoryItemType": kind,
            "HistorySummary": summary,
            "HistoryData": json.dumps(data),
        }
    )


def _publish(alarm: Any, topic_arn: str, old_state: str, account: str, region: str) -> str:
    """Publish the alarm's notification as CloudWatch: allowed by the topic's policy and, for an
    encrypted topic, the key's policy; returns the message id, or raises _Denied."""
    topic = sns_backends[account][region].get_topic(topic_arn)
    caller = service_caller(CLOUDWATCH, account)
    # What CloudWatch names in its requests (the confused-deputy keys of AWS's docs). Whether SNS
    # passes them on to KMS is not documented: they are passed, so a key policy that requires
    # them (as the stacks' keys do) is honoured, and one that requires others is not.
    # SNS's own aws:SourceOwner (the account of the publishing resource) is what the topic's
    # default policy requires: it lets the account's alarms publish (SNS Developer Guide,
    # "Example cases for Amazon SNS access control").
    context = {"aws:SourceArn": alarm.alarm_arn, "aws:SourceAccount": account, "aws:SourceOwner": account}
    decision = evaluate(caller, "SNS:Publish", topic_arn, resource_policy=topic.policy, context=context)
    if decision.allowed and topic.kms_master_key_id:
        key = kms_backends[account][region].describe_key(topic.kms_master_key_id)
        decision = first_denial(
            evaluate(caller, action, key.arn, resource_policy=key.policy, key_policy=True, context=context)
            for action in ("kms:GenerateDataKey", "kms:Decrypt")
        )
    if not decision.allowed:
        raise _Denied(decision.message)
    subject, message = notification(alarm, old_state, account, region)
    return str(sns_backends[account][region].publish(message, arn=topic_arn, subject=subject))


class _Denied(Exception):
    pass


def run_actions(alarm: Any, old_state: str, account: str, region: str) -> None:
    """What CloudWatch does when an alarm changes state: each action of the new state run, and
    each written to the alarm's history (a failed one only there, as in AWS)."""
    _record(
        alarm,
        "StateUpdate",
        f"Alarm updated from {old_state} to {alarm.state_value}",
        {"version": "1.0", "oldState": {"stateValue": old_state}, "newState": {"stateValue": alarm.state_value,
                                                                              "stateReason": alarm.state_reason}},
    )  # fmt: skip
    if not alarm.actions_enabled:
        return
    actions = {"ALARM": alarm.alarm_actions, "OK": alarm.ok_actions}.get(
        alarm.state_value, alarm.insufficient_data_actions
    )
    for action in actions or []:
        data: dict[str, Any] = {
            "actionState": "Succeeded",
            "stateUpdateTimestamp": _timestamp(alarm.state_updated_timestamp),
        }
        service = [*action.split(":"), "", "", ""][2]
        try:
            if service == "sns":
                message_id = _publish(alarm, action, old_state, account, region)
                data.update(notificationResource=action, publishedMessage={"messageId": message_id})
            elif service == "autoscaling":
                data.update(scalingPolicy=action, detail=_scale(action, account, region))
            elif service == "automate":
                # EC2's recover action: recorded, the instance left as it is (nothing to recover).
                data.update(automateAction=action)
            else:
                raise _Denied(f"Unsupported action {action}")
            _record(alarm, "Action", f"Successfully executed action {action}", data)
        except Exception as exc:  # every failure of an action is the alarm's history's, as in AWS
            data.update(actionState="Failed", error=str(exc))
            log.warning("alarm %s: action %s failed: %s", alarm.name, action, exc)
            _record(alarm, "Action", f"Failed to execute action {action}", data)


def _scale(policy_arn: str, account: str, region: str) -> str:
    """A scaling policy run by its alarm: found and recorded (the endpoint's capacity is
    SageMaker's, which the local AWS does not change)."""
    backend = applicationautoscaling_backends[account][region]
    for policy in backend.policies.values():
        if policy.policy_arn == policy_arn:
            return f"policy {policy.policy_name} on {policy.resource_id} run"
    raise LookupError(f"No scaling policy {policy_arn}")


@patch(
    restores="""An alarm that changes state (SetAlarmState) runs the actions of its new state at
    once, as CloudWatch does within seconds: an SNS topic gets the notification CloudWatch
    publishes (delivered to its subscribers, SQS queues included) when the topic's policy lets
    cloudwatch.amazonaws.com publish and, for an encrypted topic, the key's policy lets it use
    the key (the topic's default policy does; a TopicPolicy replaces it); a scaling policy is
    run; EC2's recover action is recorded. Each action, done or failed with AWS's access-denied
    message, is written to the alarm's history, which DescribeAlarmHistory answers. Stock moto
    changes the state and runs nothing, and has no DescribeAlarmHistory."""
)
def alarm_actions_run() -> None:
    stock = CloudWatchBackend.set_alarm_state

    def set_alarm_state(self: Any, alarm_name: str, reason: str, reason_data: str, state_value: str) -> None:
        alarm = self.alarms.get(alarm_name)
        old_state = alarm.state_value if alarm is not None else None
        stock(self, alarm_name, reason, reason_data, state_value)
        if old_state != state_value:  # CloudWatch runs actions on a change of state only
            run_actions(self.alarms[alarm_name], str(old_state), self.account_id, self.region_name)

    def describe_alarm_history(self: Any) -> ActionResult:
        name = self._get_param("AlarmName")
        kind = self._get_param("HistoryItemType")
        alarms = [a for a in self.cloudwatch_backend.alarms.values() if name in (None, a.name)]
        items = [i for a in alarms for i in _history(a) if kind in (None, i["HistoryItemType"])]
        items.sort(key=lambda i: i["Timestamp"], reverse=self._get_param("ScanBy") != "TimestampAscending")
        return ActionResult({"AlarmHistoryItems": items})

    replace(CloudWatchBackend, "set_alarm_state", set_alarm_state)
    replace(CloudWatchResponse, "describe_alarm_history", describe_alarm_history)


# --- Alarms evaluated on their metric --------------------------------------------------------------

_STATISTICS: dict[str, Any] = {
    "Sum": sum,
    "Average": lambda v: sum(v) / len(v),
    "Minimum": min,
    "Maximum": max,
    "SampleCount": len,
}
_COMPARISONS: dict[str, Any] = {
    "GreaterThanThreshold": lambda a, t: a > t,
    "GreaterThanOrEqualToThreshold": lambda a, t: a >= t,
    "LessThanThreshold": lambda a, t: a < t,
    "LessThanOrEqualToThreshold": lambda a, t: a <= t,
}


def _naive(when: datetime) -> datetime:
    return when if when.tzinfo is None else when.astimezone(UTC).replace(tzinfo=None)


def evaluate_alarm(backend: Any, alarm: Any) -> None:
    """An alarm on one metric and a statistic, evaluated as CloudWatch does on its latest
    EvaluationPeriods periods (CloudWatch User Guide, "Evaluating an alarm"): ALARM when
    DatapointsToAlarm of them breach, OK when every one has data and none breaches; a period
    without data counts as missing (TreatMissingData's default). Math alarms and percentiles are
    not evaluated."""
    compare = _COMPARISONS.get(alarm.comparison_operator)
    statistic = _STATISTICS.get(alarm.statistic or "")
    if alarm.metric_data_queries or compare is None or statistic is None or not alarm.period:
        return
    wanted = {(d.name, d.value) for d in alarm.dimensions}
    values = [
        (_naive(d.timestamp), d.value)
        for d in backend.metric_data
        if isinstance(d, MetricDatum)
        and (d.namespace, d.name) == (alarm.namespace, alarm.metric_name)
        and {(x.name, x.value) for x in d.dimensions} == wanted
    ]
    period, periods = timedelta(seconds=int(alarm.period)), int(alarm.evaluation_periods)
    now = utcnow()
    breaching = with_data = 0
    for i in range(periods):
        window = [v for t, v in values if now - (i + 1) * period < t <= now - i * period]
        if window:
            with_data += 1
            breaching += bool(compare(statistic(window), float(alarm.threshold)))
    if breaching >= int(alarm.datapoints_to_alarm or periods):
        state = "ALARM"
    elif with_data == periods and breaching == 0:
        state = "OK"
    else:
        return
    if state != alarm.state_value:
        verb = "were" if state == "ALARM" else "were not"
        reason = (
            f"Threshold Crossed: {breaching} out of the last {periods} datapoints {verb} "
            f"{alarm.comparison_operator} the threshold ({alarm.threshold})."
        )
        backend.set_alarm_state(alarm.name, reason, json.dumps({"version": "1.0"}), state)


@patch(
    restores="""PutMetricData evaluates the alarms on the metric it writes (one metric and a
    statistic: Sum, Average, Minimum, Maximum, SampleCount), over their latest EvaluationPeriods
    periods, and an alarm that changes state runs its actions as on SetAlarmState. Stock moto
    stores the data and leaves every alarm as it is."""
)
def alarms_evaluate_their_metric() -> None:
    stock = CloudWatchBackend.put_metric_data

    def put_metric_data(self: Any, namespace: str, metric_data: list[dict[str, Any]]) -> None:
        stock(self, namespace, metric_data)
        names = {m["MetricName"] for m in metric_data}
        for alarm in list(self.alarms.values()):
            if alarm.namespace == namespace and alarm.metric_name in names:
                evaluate_alarm(self, alarm)

    replace(CloudWatchBackend, "put_metric_data", put_metric_data)
