"""Where an invocation's output goes: its function's CloudWatch Logs log group, written as the
function's execution role, as Lambda writes it.

Lambda sends each execution environment's output to a log stream ``YYYY/MM/DD/[$LATEST]<id>`` of
the function's log group (LoggingConfig's LogGroup, else ``/aws/lambda/<name>``), with the
execution role's permissions: logs:CreateLogGroup when the group does not exist,
logs:CreateLogStream and logs:PutLogEvents. A role without them loses the output, and the
function runs as before (Lambda Developer Guide, "Sending Lambda function logs to CloudWatch
Logs": "If the execution role doesn't have the required permissions, Lambda can't send logs").
Every invocation here is its environment's first, so each has a stream of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from moto.iam.exceptions import NotFoundException
from moto.iam.models import iam_backends
from moto.logs.models import logs_backends
from moto.utilities.utils import get_partition

from local_aws.awslambda.functions import Function
from local_aws.policies import Caller, evaluate, role_caller

log = logging.getLogger("local_aws.lambda")


def execution_role(function: Function) -> Caller:
    """The function's execution role as a caller, in the session Lambda opens for it."""
    partition = get_partition(function.region)
    role_name = function.role_arn.rsplit("/", 1)[-1]
    session = f"arn:{partition}:sts::{function.account}:assumed-role/{role_name}/{function.name}"
    try:
        role = iam_backends[function.account][partition].get_role_by_arn(function.role_arn)
    except NotFoundException:  # a role deleted since: it may do nothing
        return Caller(arn=function.role_arn, account=function.account, session=session)
    return role_caller(role, function.account, session=session)


def deliver(function: Function, stream: str, events: Sequence[tuple[int, str]]) -> bool:
    """Write `events` (epoch milliseconds, message) to `stream` of the function's log group, as
    its role may; whether they were written."""
    partition = get_partition(function.region)
    group_arn = f"arn:{partition}:logs:{function.region}:{function.account}:log-group:{function.log_group}"
    stream_arn = f"{group_arn}:log-stream:{stream}"
    role = execution_role(function)
    backend = logs_backends[function.account][function.region]
    if function.log_group not in backend.groups:
        if not evaluate(role, "logs:CreateLogGroup", group_arn).allowed:
            log.info("%s: its role may not create %s; its output is lost", function.name, function.log_group)
            return False
        backend.create_log_group(function.log_group, tags={})
    for action in ("logs:CreateLogStream", "logs:PutLogEvents"):
        decision = evaluate(role, action, stream_arn)
        if not decision.allowed:
            log.info("%s: its output is lost: %s", function.name, decision.message)
            return False
    backend.create_log_stream(function.log_group, stream)
    if events:
        backend.put_log_events(function.log_group, stream, [{"timestamp": t, "message": m} for t, m in events])
    return True
