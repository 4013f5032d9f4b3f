"""What CloudWatch does when an alarm changes state: each action of the new state run (an SNS
topic notified, an Application Auto Scaling policy executed, EC2's recover recorded) and each
written to the alarm's history, a failed one only there, as in AWS (CloudWatch User Guide,
"Alarm actions"; the notification's format from "Using Amazon SNS topics" and the knowledge
center's example). Auto Scaling actions run again for every period the alarm stays in the state
("For Amazon EC2 Auto Scaling actions, the alarm continues to invoke the action for every period
that the alarm remains in the new state")."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from moto.applicationautoscaling.models import applicationautoscaling_backends
from moto.kms.models import kms_backends
from moto.sns.models import sns_backends

from local_aws import host
from local_aws.policies import evaluate, first_denial, service_caller
from local_aws.validation.model import botocore_session

log = logging.getLogger("local_aws.cloudwatch")

#: The service principal CloudWatch calls other services as when it runs an alarm's actions.
CLOUDWATCH = "cloudwatch.amazonaws.com"


@cache
def _region_name(region: str) -> str:
    """The region's long name, as CloudWatch writes it in notifications ("US East (N. Virginia)")."""
    for partition in botocore_session().get_data("endpoints")["partitions"]:
        if region in partition["regions"]:
            return str(partition["regions"][region].get("description", region))
    return region


def _timestamp(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}+0000"


def notification(alarm: Any, old_state: str, account: str, region: str) -> tuple[str, str]:
    """The subject and message CloudWatch publishes for an alarm's state change."""
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
            "StatisticType": "ExtendedStatistic" if alarm.extended_statistic else "Statistic",
            "Statistic": (alarm.extended_statistic or (alarm.statistic or "").upper()) or None,
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


def history(alarm: Any) -> list[dict[str, Any]]:
    """The alarm's history as DescribeAlarmHistory answers it, oldest first."""
    found: list[dict[str, Any]] | None = getattr(alarm, "local_history", None)
    if found is None:
        found = []
        alarm.local_history = found
    return found


def record(alarm: Any, kind: str, summary: str, data: Mapping[str, Any]) -> None:
    history(alarm).append(
        {
            "AlarmName": alarm.name,
            "AlarmType": "MetricAlarm",
            "Timestamp": host.now(),
            "HistoryItemType": kind,
            "HistorySummary": summary,
            "HistoryData": json.dumps(data),
        }
    )


class _Denied(Exception):
    pass


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


def _service(action: str) -> str:
    return [*action.split(":"), "", "", ""][2]


def _scale(policy_arn: str, alarm: Any, account: str, region: str) -> str:
    """The Application Auto Scaling policy the action names, executed for the alarm (where the
    local AWS's Application Auto Scaling runs policies: local_aws/patches/applicationautoscaling.py)."""
    backend = applicationautoscaling_backends[account][region]
    run = getattr(type(backend), "execute_policy", None)
    if run is None:
        raise _Denied(f"Unsupported action {policy_arn}")
    return str(run(backend, policy_arn, alarm))


def run_actions(alarm: Any, old_state: str, account: str, region: str, *, scaling_only: bool = False) -> None:
    """Run the actions of the alarm's state (only the scaling ones, `scaling_only`, where the
    alarm stays in it), each written to its history."""
    if not alarm.actions_enabled:
        return
    actions = {"ALARM": alarm.alarm_actions, "OK": alarm.ok_actions}.get(
        alarm.state_value, alarm.insufficient_data_actions
    )
    for action in actions or []:
        service = _service(action)
        if scaling_only and service != "autoscaling":
            continue
        data: dict[str, Any] = {
            "actionState": "Succeeded",
            "stateUpdateTimestamp": _timestamp(alarm.state_updated_timestamp),
        }
        try:
            if service == "sns":
                message_id = _publish(alarm, action, old_state, account, region)
                data.update(notificationResource=action, publishedMessage={"messageId": message_id})
            elif service == "autoscaling":
                data.update(scalingPolicy=action, detail=_scale(action, alarm, account, region))
            elif service == "automate":
                # EC2's recover action: recorded, the instance left as it is (nothing to recover).
                data.update(automateAction=action)
            else:
                raise _Denied(f"Unsupported action {action}")
            record(alarm, "Action", f"Successfully executed action {action}", data)
        except Exception as exc:  # every failure of an action is the alarm's history's, as in AWS
            data.update(actionState="Failed", error=str(exc))
            log.warning("alarm %s: action %s failed: %s", alarm.name, action, exc)
            record(alarm, "Action", f"Failed to execute action {action}", data)
    if any(_service(a) == "autoscaling" for a in actions or []):
        alarm.local_scaled_at = host.now()


def scaling_due(alarm: Any, period_s: int) -> bool:
    """Whether the alarm, staying in its state, runs its scaling actions again: a period after
    it last did."""
    last: datetime | None = getattr(alarm, "local_scaled_at", None)
    actions = {"ALARM": alarm.alarm_actions, "OK": alarm.ok_actions}.get(
        alarm.state_value, alarm.insufficient_data_actions
    )
    if not any(_service(a) == "autoscaling" for a in actions or []):
        return False
    return last is None or host.now() - last >= timedelta(seconds=period_s)


def change_state(alarm: Any, state: str, reason: str, reason_data: str, account: str, region: str) -> None:
    """The alarm in `state` for `reason`, as CloudWatch moves it: its history, and the actions of
    the new state on a change."""
    old = str(alarm.state_value)
    alarm.update_state(reason, reason_data, state)
    alarm.state_updated_timestamp = host.now().replace(tzinfo=None)
    if old == state:
        return
    record(
        alarm,
        "StateUpdate",
        f"Alarm updated from {old} to {state}",
        {"version": "1.0", "oldState": {"stateValue": old},
         "newState": {"stateValue": state, "stateReason": reason}},
    )  # fmt: skip
    run_actions(alarm, old, account, region)
