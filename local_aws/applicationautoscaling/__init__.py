"""Application Auto Scaling as the local AWS emulates it beyond moto's model: what a scaling
policy does when its alarm runs it. ``local_aws/patches/applicationautoscaling.py`` wires it in."""

from __future__ import annotations

from typing import Any

from moto.applicationautoscaling.models import applicationautoscaling_backends


def execute(policy_arn: str, alarm: Any, account: str, region: str) -> str:
    """The scaling policy `policy_arn` run by `alarm`: found and recorded (the capacity it
    scales is SageMaker's, which the local AWS does not change)."""
    backend = applicationautoscaling_backends[account][region]
    for policy in backend.policies.values():
        if policy.policy_arn == policy_arn:
            return f"policy {policy.policy_name} on {policy.resource_id} run"
    raise LookupError(f"No scaling policy {policy_arn}")
