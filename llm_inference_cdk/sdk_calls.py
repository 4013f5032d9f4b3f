"""The function that runs a stack's AwsCustomResource calls: its role and log group.

aws-cdk's custom-resources run every AwsCustomResource of a stack in one function (a
singleton), on the role and log group given to the first: a construct that adds a call finds
them with :func:`function_role`, which creates them (without the managed policy the function
would otherwise get) only where the stack has no such function yet.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from llm_inference_cdk.nag import acknowledge

#: The construct id of that function under its stack (aws-cdk's custom-resources).
SDK_CALL_FUNCTION = "AWS679f53fac002430cb0da5b7982bd2287"


def function_role(
    scope: Construct, prefix: str, description: str, *, reuse: bool = True
) -> tuple[iam.Role | None, logs.LogGroup | None]:
    """A role and a log group for the calls of `scope` (construct ids ``<prefix>Role`` and
    ``<prefix>Logs``), or (None, None) when `reuse` and the stack's function exists already."""
    stack = Stack.of(scope)
    if reuse and stack.node.try_find_child(SDK_CALL_FUNCTION) is not None:
        return None, None
    role = iam.Role(
        scope, f"{prefix}Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"), description=description
    )
    log_group = logs.LogGroup(
        scope, f"{prefix}Logs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=RemovalPolicy.DESTROY
    )
    log_group.grant_write(role)
    acknowledge(
        role,
        "AwsSolutions-IAM5[Resource::<"
        + stack.get_logical_id(log_group.node.default_child)  # type: ignore[arg-type]
        + ".Arn>:*]",
        "Log streams of the function that runs this stack's SDK calls, in its own log group",
    )
    return role, log_group
