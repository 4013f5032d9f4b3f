"""CloudWatch's alarms evaluated on CloudWatch's schedule, by the local AWS's clock
(:mod:`local_aws.clock`): every 10 s of the clock, each alarm due then (every minute, every
10 s for a high-resolution one) is evaluated on its metric's data (:mod:`.evaluation`) and, when
its state changes, moved with its actions (:mod:`.actions`); an alarm that stays in a state
whose actions scale runs them again each period. An alarm the local AWS cannot evaluate (an
anomaly band, an unknown function) keeps its state, with a warning."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from moto.cloudwatch.models import CloudWatchBackend, cloudwatch_backends

from local_aws import host
from local_aws.cloudwatch.actions import change_state, run_actions, scaling_due
from local_aws.cloudwatch.evaluation import MetricIndex, check, due, evaluate, period_of, points_of
from local_aws.host import HOST

log = logging.getLogger("local_aws.cloudwatch")


def evaluate_due(backend: CloudWatchBackend, at: datetime) -> None:
    """Evaluate the backend's alarms due at `at` (what the patch installs as the backend's
    ``evaluate_alarms``)."""
    index: MetricIndex | None = None
    alarm: Any
    for alarm in list(backend.alarms.values()):
        if alarm.rule or not due(alarm, at):
            continue  # composite alarms are not this project's
        problem = check(alarm)
        if problem is not None:
            if getattr(alarm, "local_unevaluated", None) != problem:
                log.warning("alarm %s is not evaluated: %s", alarm.name, problem)
                alarm.local_unevaluated = problem
            continue
        index = index or MetricIndex(list(backend.metric_data))
        try:
            _evaluate(backend, alarm, index, at)
        except Exception as exc:  # the local AWS's own fault: kept, and the other alarms evaluated
            HOST.faults.record("cloudwatch", f"evaluating alarm {alarm.name}", exc)


def _evaluate(backend: CloudWatchBackend, alarm: Any, index: MetricIndex, at: datetime) -> None:
    outcome = evaluate(alarm, index, at)
    account, region = backend.account_id, backend.region_name
    if outcome.state is not None and outcome.state != alarm.state_value:
        change_state(alarm, outcome.state, outcome.reason, outcome.reason_data, account, region)
    elif scaling_due(alarm, period_of(alarm)):
        run_actions(alarm, str(alarm.state_value), account, region, scaling_only=True)


def evaluate_alarms(at: datetime) -> None:
    """Every backend's alarms due at `at`, where the patch that evaluates them is installed."""
    hook: Any = getattr(CloudWatchBackend, "evaluate_alarms", None)
    if hook is None:
        return
    for regions in list(cloudwatch_backends.values()):
        for backend in list(regions.values()):
            hook(backend, at)


def recent_values(alarm: Any, account: str, region: str) -> list[float]:
    """The values of the alarm's latest EvaluationPeriods datapoints that have data, oldest
    first, as of the clock's time: what a scaling policy its alarm runs reads of the metric."""
    backend = cloudwatch_backends[account][region]
    points, _ = points_of(alarm, MetricIndex(list(backend.metric_data)), host.now())
    return [p.value for p in points[-int(alarm.evaluation_periods) :] if p.value is not None]
