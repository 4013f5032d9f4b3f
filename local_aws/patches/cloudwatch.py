"""CloudWatch: the CloudFormation type of an alarm, single-metric or on metric math, which stock
moto lacks (registered by ``cloudformation.missing_resource_types_exist``)."""

from __future__ import annotations

from typing import Any, ClassVar

from moto.cloudwatch.models import Dimension, Metric, MetricDataQuery, MetricStat, cloudwatch_backends

from local_aws.patches.base import EmulatedResource


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
