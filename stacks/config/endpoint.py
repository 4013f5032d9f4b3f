"""The settings a SageMaker stack's endpoint shares with the other (``gpt2`` and ``gptj``),
read into the construct library's props under their cdk.json keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llm_contracts import instances
from llm_contracts.aws import SNS_TOPIC_ARN
from llm_inference_cdk.endpoint_props import AlarmProps, AutoscalingProps, EndpointProps
from llm_inference_cdk.props import optional, text
from stacks.config.reader import Section, read_props

#: cdk.json keys of the alarm props (the others are read under their own names).
ALARM_KEYS = {
    "latency_ms": "latency_alarm_ms",
    "errors_5xx": "errors_5xx_alarm_threshold",
    "period_s": "alarm_period_s",
    "evaluation_periods": "alarm_evaluation_periods",
}
TOPIC_ARN = optional(text(SNS_TOPIC_ARN, what="an SNS topic ARN: arn:aws:sns:<region>:<account>:<topic>"))


def read_endpoint(section: Section, defaults: Mapping[str, Any]) -> EndpointProps:
    """The endpoint's props from `section`; `defaults` are the stack's own (by prop name)."""
    autoscaling = read_props(section, AutoscalingProps, defaults=defaults)
    alarms = read_props(section, AlarmProps, keys=ALARM_KEYS, defaults=defaults)
    return read_props(
        section,
        EndpointProps,
        defaults=defaults,
        only=[
            "instance_type", "initial_instance_count", "startup_health_check_timeout_s",
            "model_data_download_timeout_s", "volume_size_gb", "enable_network_isolation", "environment",
            "inference_ami_version",
        ],
        autoscaling=autoscaling,
        alarms=alarms,
    )  # fmt: skip


def check_family(section: Section, endpoint: EndpointProps, families: frozenset[str], reason: str) -> None:
    section.check(
        "instance_type",
        endpoint.instance_type,
        instances.family(endpoint.instance_type) in families,
        f"an instance of the families {', '.join(sorted(families))} ({reason})",
    )


def check_environment(section: Section, user: Mapping[str, str], stack_sets: Mapping[str, str]) -> None:
    """`environment` may not set a variable the stack sets: name the setting to change instead
    (`stack_sets` maps each variable to its key, or to "" where the stack alone decides it)."""
    clashes = sorted(set(user) & set(stack_sets))
    fixes = [
        f"{name} comes from {section.key(stack_sets[name])}: set that instead"
        if stack_sets[name]
        else f"{name} is fixed by the stack (the serving handler's contract)"
        for name in clashes
    ]
    section.check("environment", dict(user), not clashes, f"free of {', '.join(clashes)} ({'; '.join(fixes)})")
