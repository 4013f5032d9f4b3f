"""CloudWatch: the CloudFormation type of an alarm, single-metric or on metric math, which stock
moto lacks (registered by ``cloudformation.missing_resource_types_exist``); and the wiring of
``local_aws.cloudwatch`` (alarms evaluated on CloudWatch's schedule, their actions and history)
into moto's CloudWatch."""

from __future__ import annotations

from typing import Any, ClassVar

from moto.cloudwatch.models import (
    CloudWatchBackend,
    Dimension,
    Metric,
    MetricDataQuery,
    MetricStat,
    Statistics,
    cloudwatch_backends,
)
from moto.cloudwatch.responses import CloudWatchResponse
from moto.core.responses import ActionResult

from local_aws import host
from local_aws.cloudwatch import change_state, evaluate_due, history
from local_aws.cloudwatch.evaluation import INSUFFICIENT_DATA
from local_aws.cloudwatch.metrics import stamped
from local_aws.cloudwatch.statistics import BASIC, parse, samples_of
from local_aws.patches.base import EmulatedResource, patch, replace


class MetricAlarm(EmulatedResource):
    """AWS::CloudWatch::Alarm, on moto's CloudWatch: a single metric, the metric queries of a
    math alarm (``Metrics``), or a PromQL alarm's query (``EvaluationCriteria``, with its
    ``EvaluationInterval`` and no comparison of its own), which DescribeAlarms returns as AWS does.
    A PromQL alarm is kept, not evaluated: the local AWS has no OpenTelemetry metrics to query."""

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
            comparison_operator=p.get("ComparisonOperator"),
            evaluation_periods=int(p["EvaluationPeriods"]) if "EvaluationPeriods" in p else None,  # type: ignore[arg-type]
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
        # Attributes moto's Alarm lacks: its DescribeAlarms serializes them by name.
        alarm.evaluation_criteria = p.get("EvaluationCriteria")  # type: ignore[attr-defined]
        alarm.evaluation_interval = p.get("EvaluationInterval")  # type: ignore[attr-defined]
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
        # A boolean, as DescribeAlarms answers it (the template may write it as text).
        return_data=str(q.get("ReturnData", True)).lower() != "false",  # type: ignore[arg-type]
        expression=q.get("Expression"),
        metric_stat=metric_stat,
    )


# --- Alarms: their state, actions and evaluation ------------------------------------------------


@patch(
    restores="""An alarm that changes state (SetAlarmState, or its evaluation) runs the actions of
    its new state at once, as CloudWatch does within seconds: an SNS topic gets the notification
    CloudWatch publishes (delivered to its subscribers, SQS queues included) when the topic's
    policy lets cloudwatch.amazonaws.com publish and, for an encrypted topic, the key's policy
    lets it use the key (the topic's default policy does; a TopicPolicy replaces it); an
    Application Auto Scaling policy is executed; EC2's recover action is recorded. Each action,
    done or failed with AWS's access-denied message, is written to the alarm's history, which
    DescribeAlarmHistory answers. Stock moto changes the state and runs nothing, and has no
    DescribeAlarmHistory."""
)
def alarm_actions_run() -> None:
    stock = CloudWatchBackend.set_alarm_state

    def set_alarm_state(self: Any, alarm_name: str, reason: str, reason_data: str, state_value: str) -> None:
        alarm = self.alarms.get(alarm_name)
        old = None if alarm is None else alarm.state_value
        stock(self, alarm_name, reason, reason_data, state_value)  # its checks of the request
        if alarm is not None:
            alarm.state_value = old  # moved again, as CloudWatch moves it
            change_state(alarm, state_value, reason, reason_data, self.account_id, self.region_name)

    def describe_alarm_history(self: Any) -> ActionResult:
        name = self._get_param("AlarmName")
        kind = self._get_param("HistoryItemType")
        alarms = [a for a in self.cloudwatch_backend.alarms.values() if name in (None, a.name)]
        items = [i for a in alarms for i in history(a) if kind in (None, i["HistoryItemType"])]
        items.sort(key=lambda i: i["Timestamp"], reverse=self._get_param("ScanBy") != "TimestampAscending")
        return ActionResult({"AlarmHistoryItems": items})

    replace(CloudWatchBackend, "set_alarm_state", set_alarm_state)
    replace(CloudWatchResponse, "describe_alarm_history", describe_alarm_history)


@patch(
    restores="""PutMetricAlarm creates an alarm in INSUFFICIENT_DATA ("Unchecked: Initial alarm
    creation"), and an update of an existing alarm keeps its state and history while it replaces
    its configuration (CloudWatch API reference, PutMetricAlarm). Stock moto creates every alarm
    in OK, and an update starts it over in OK with no history."""
)
def new_alarms_have_insufficient_data() -> None:
    stock = CloudWatchBackend.put_metric_alarm

    def put_metric_alarm(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        before = self.alarms.get(name)
        alarm = stock(self, name, *args, **kwargs)
        if before is not None:
            for kept in ("state_value", "state_reason", "state_reason_data", "state_updated_timestamp", "history",
                         "local_history", "local_scaled_at"):  # fmt: skip
                if hasattr(before, kept):
                    setattr(alarm, kept, getattr(before, kept))
        else:
            alarm.state_value = INSUFFICIENT_DATA
            alarm.state_updated_timestamp = host.now().replace(tzinfo=None)
        alarm.configuration_updated_timestamp = host.now().replace(tzinfo=None)
        return alarm

    replace(CloudWatchBackend, "put_metric_alarm", put_metric_alarm)


@patch(
    restores="""CloudWatch evaluates every alarm on its own schedule, as the CloudWatch User Guide's
    "Evaluating an alarm" and "Configuring how CloudWatch alarms treat missing data" say: every
    minute (every 10 s for a period of 10 to 30 s), on the datapoints of its latest periods (its
    statistic, percentiles and the other extended statistics included, or its metric math),
    ALARM when DatapointsToAlarm of EvaluationPeriods breach, missing data treated as
    TreatMissingData says; a change of state runs its actions. The schedule is the local AWS's
    clock (local_aws/clock.py: wall time, or one a test moves), and PutMetricData without a
    Timestamp stamps its data with the clock's time. Stock moto stores the data and never
    changes an alarm's state."""
)
def alarms_are_evaluated() -> None:
    stock = CloudWatchBackend.put_metric_data

    def put_metric_data(self: Any, namespace: str, metric_data: list[dict[str, Any]]) -> None:
        stock(self, namespace, stamped(metric_data, host.now()))

    replace(CloudWatchBackend, "put_metric_data", put_metric_data)
    replace(CloudWatchBackend, "evaluate_alarms", evaluate_due)


def _extended(data: Any, name: str) -> float | None:
    try:
        return parse(name).of(samples_of(data.metric_data))
    except ValueError:
        return None


@patch(
    restores="""GetMetricData and GetMetricStatistics compute every statistic CloudWatch defines
    (CloudWatch User Guide, "CloudWatch statistics definitions"): percentiles (p99), trimmed
    and winsorized means, trimmed counts and sums, IQM and percentile ranks, in a GetMetricData
    query's Stat and in GetMetricStatistics' ExtendedStatistics, from the raw values (none where
    a statistic set stands for no raw values or a value is negative). Stock moto answers only
    SampleCount, Sum, Average, Minimum and Maximum: no value for a percentile, and no
    ExtendedStatistics."""
)
def extended_statistics_are_computed() -> None:
    stock = Statistics.get_statistics_for_type

    def get_statistics_for_type(self: Any, stat: str) -> Any:
        return stock(self, stat) if stat in BASIC else _extended(self, stat)

    def get_metric_statistics(self: Any) -> ActionResult:
        statistics = self._get_param("Statistics", []) or []
        extended = self._get_param("ExtendedStatistics", []) or []
        if not statistics and not extended:
            return stock_response(self)
        found = self.cloudwatch_backend.get_metric_statistics(
            self._get_param("Namespace"), self._get_param("MetricName"), self._get_param("StartTime"),
            self._get_param("EndTime"), self._get_int_param("Period"), list(statistics),
            unit=self._get_param("Unit"), dimensions=self._get_param("Dimensions", []),
        )  # fmt: skip
        points = []
        for period in found:
            point: dict[str, Any] = {"Timestamp": period.timestamp}
            for name in statistics:
                point[name] = get_statistics_for_type(period, name)
            if extended:
                point["ExtendedStatistics"] = {n: v for n in extended if (v := _extended(period, n)) is not None}
            if period.unit:
                point["Unit"] = period.unit
            points.append(point)
        return ActionResult({"Label": self._get_param("MetricName"), "Datapoints": points})

    stock_response = CloudWatchResponse.get_metric_statistics
    replace(Statistics, "get_statistics_for_type", get_statistics_for_type)
    replace(CloudWatchResponse, "get_metric_statistics", get_metric_statistics)
