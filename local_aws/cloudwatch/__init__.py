"""CloudWatch as the local AWS emulates it beyond moto's model (which stores alarms and data
and evaluates nothing): alarms evaluated on CloudWatch's schedule (:mod:`.alarms`), as CloudWatch
evaluates them (:mod:`.evaluation`: periods, statistics incl. percentiles (:mod:`.statistics`),
datapoints to alarm, missing data, metric math (:mod:`.metric_math`)), and the actions of a
change of state with the alarm's history (:mod:`.actions`); the data AWS's services publish
(:mod:`.metrics`). The state is moto's backends' (the
alarms carry their history), reset with them; ``local_aws/patches/cloudwatch.py`` wires it in."""

from local_aws.cloudwatch.actions import change_state, history, notification, run_actions
from local_aws.cloudwatch.alarms import evaluate_due, recent_values
from local_aws.cloudwatch.metrics import publish

__all__ = ["change_state", "evaluate_due", "history", "notification", "publish", "recent_values", "run_actions"]
