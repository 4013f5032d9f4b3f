"""The settings a SageMaker stack's endpoint shares with the other (``gpt2`` and ``gptj``),
read into the construct library's props under their cdk.json keys, and their checks against the
built payload (:func:`require_payload`, :func:`check_volume`), which the stacks call once it is
there: a stack consumes validated settings and checks none itself."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llm_contracts.aws import SNS_TOPIC_ARN
from llm_contracts.manifest import PAYLOAD_MANIFEST, ManifestError, read_manifest
from llm_inference_cdk.alarm_topic import EMAIL
from llm_inference_cdk.endpoint_props import (
    MODES,
    AlarmProps,
    AsyncInferenceProps,
    AutoscalingProps,
    DeploymentProps,
    InferenceComponentProps,
    SageMakerEndpointProps,
)
from llm_inference_cdk.props import optional, text
from project_config.reader import ConfigError, Section, read_props

#: cdk.json keys of the alarm props (the others are read under their own names).
ALARM_KEYS = {
    "latency_ms": "latency_alarm_ms",
    "errors_5xx": "errors_5xx_alarm_threshold",
    "model_errors": "model_errors_alarm_threshold",
    "disk_percent": "disk_alarm_percent",
    "gpu_memory_percent": "gpu_memory_alarm_percent",
    "waiting_requests": "waiting_requests_alarm_threshold",
    "period_s": "alarm_period_s",
    "evaluation_periods": "alarm_evaluation_periods",
}
#: cdk.json keys of the update policy's props.
DEPLOYMENT_KEYS = {
    "strategy": "update_strategy",
    "wait_interval_s": "update_wait_s",
    "canary_percent": "update_canary_percent",
    "linear_step_percent": "update_linear_step_percent",
    "rolling_batch_percent": "update_batch_percent",
    "termination_wait_s": "update_termination_wait_s",
    "max_execution_timeout_s": "update_timeout_s",
    "auto_rollback": "update_auto_rollback",
    "fail_rolled_back_updates": "update_fail_on_rollback",
}
#: cdk.json keys of the inference component's props (the others under their own names).
COMPONENT_KEYS = {"min_instances": "ic_min_instances", "max_instances": "ic_max_instances"}
#: cdk.json keys of the async props.
ASYNC_KEYS = {
    "max_concurrent_invocations_per_instance": "async_max_concurrency",
    "min_instances": "async_min_instances",
    "max_instances": "async_max_instances",
    "target_backlog_per_instance": "async_target_backlog",
}
#: Each mode's scaling props, their keys, and the SageMakerEndpointProps field that holds them.
_MODE_PROPS: dict[str, tuple[type[Any], dict[str, str], str]] = {
    "realtime": (AutoscalingProps, {}, "autoscaling"),
    "inference-component": (InferenceComponentProps, COMPONENT_KEYS, "inference_component"),
    "async": (AsyncInferenceProps, ASYNC_KEYS, "async_inference"),
}
TOPIC_ARN = optional(text(SNS_TOPIC_ARN, what="an SNS topic ARN: arn:aws:sns:<region>:<account>:<topic>"))
ALARM_EMAIL = optional(EMAIL)


def mode_keys(mode: str) -> set[str]:
    """The cdk.json keys of `mode`'s scaling props."""
    cls, keys, _ = _MODE_PROPS[mode]
    return {keys.get(f.name, f.name) for f in dataclasses.fields(cls)}


#: The alarm props a serving framework's endpoint reads in place of others: on vLLM, the engine's
#: queue (detailed observability publishes it for vLLM containers) instead of GPU memory, which
#: vLLM holds at gpu_memory_utilization whatever the load. The first of each pair is read, the
#: second not; an endpoint of no framework reads the second alone.
FRAMEWORK_ALARMS = {"vllm": ("waiting_requests", "gpu_memory_percent")}


def read_endpoint(
    section: Section, defaults: Mapping[str, Any], *, framework: str | None = None
) -> SageMakerEndpointProps:
    """The endpoint's props from `section`; `defaults` are the stack's own (by prop name, and
    by cdk.json key for the scaling props of the endpoint's mode); `framework` is the serving
    framework of its container (``vllm``), whose alarms differ (:data:`FRAMEWORK_ALARMS`)."""
    mode = section.choice("endpoint_mode", "realtime", MODES)
    for other in MODES:
        for key in sorted(mode_keys(other) - mode_keys(mode)):
            if section.has(key):
                raise section.fail(
                    key,
                    section.get(key),
                    f"unset in {mode} mode: it is a setting of {section.key('endpoint_mode')}={other}",
                )
    cls, keys, field = _MODE_PROPS[mode]
    # The modes' props share field names (min_instances): their defaults go by cdk.json key.
    mode_defaults = {
        f.name: defaults[keys.get(f.name, f.name)]
        for f in dataclasses.fields(cls)
        if keys.get(f.name, f.name) in defaults
    }
    scaling = {field: read_props(section, cls, keys=keys, defaults=mode_defaults)}
    read, unread = FRAMEWORK_ALARMS.get(framework or "", ("gpu_memory_percent", "waiting_requests"))
    alarm_defaults = dict(defaults)
    if framework is not None:
        # Detailed observability covers real-time endpoints: none in async mode.
        alarm_defaults.setdefault(read, None if mode == "async" else 1)
    alarms = read_props(
        section,
        AlarmProps,
        keys=ALARM_KEYS,
        defaults=alarm_defaults,
        only=[f.name for f in dataclasses.fields(AlarmProps) if f.name != unread],
        **{unread: None},
    )
    deployment = read_props(section, DeploymentProps, keys=DEPLOYMENT_KEYS, defaults=defaults)
    return read_props(
        section,
        SageMakerEndpointProps,
        defaults=defaults,
        only=[
            "instance_type", "initial_instance_count", "startup_health_check_timeout_s",
            "model_data_download_timeout_s", "volume_size_gb", "enable_network_isolation", "environment",
            "inference_ami_version",
        ],
        # Rules across props: the update policy's that depend on the variant (its count, its
        # alarms), a component's compute that must fit the instance type.
        owners={DeploymentProps.__name__: DEPLOYMENT_KEYS, AlarmProps.__name__: ALARM_KEYS, cls.__name__: keys},
        alarms=alarms,
        deployment=deployment,
        **scaling,
    )  # fmt: skip


def check_notifications(section: Section, topic_arn: str | None, email: str | None) -> None:
    """An e-mail address is subscribed to the stack's own topic, which a given topic replaces."""
    section.check(
        "alarm_email",
        email,
        email is None or topic_arn is None,
        f"unset when {section.key('alarm_topic_arn')} is set (subscribe the address to that topic, or unset "
        "alarm_topic_arn to have the stack's own topic)",
    )


def check_family(section: Section, endpoint: SageMakerEndpointProps, families: frozenset[str], reason: str) -> None:
    section.check(
        "instance_type",
        endpoint.instance_type,
        endpoint.instance.family in families,
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


# --- synthesis: the built payload against the settings ------------------------------------------


def check_volume(section: str, endpoint: SageMakerEndpointProps, payload: Path) -> None:
    """ConfigError when the ML storage volume cannot hold the payload: SageMaker copies the
    files of an S3 prefix onto it, and downloads a model.tar.gz there, then extracts it (twice
    its size). One GB more for the container's own files. Families with NVMe instance storage
    take no volume and are not checked."""
    if endpoint.volume_size is None:
        return
    if payload.is_dir():
        size = sum(int(e["size"]) for e in read_manifest(payload, PAYLOAD_MANIFEST)["files"].values())
        what, factor = f"the payload files under {payload}", 1
    else:
        size = payload.stat().st_size
        what, factor = f"{payload}, which SageMaker downloads and then extracts", 2
    needed = math.ceil(size * factor / 2**30) + 1
    if endpoint.volume_size < needed:
        raise ConfigError(
            f"{section}.volume_size_gb={endpoint.volume_size} is invalid: allowed is at least {needed} (GB): "
            f"{what} take {size / 2**30:.1f} GB on the endpoint's volume"
        )


def require_payload(path: Path, key: str, component: str) -> None:
    """ManifestError (which leaves this stack alone out of the synthesis) when the payload at
    `path` (the setting `key`) has not been built."""
    if not path.exists():
        raise ManifestError(
            f"{key}={str(path)!r} does not exist: build it with `python -m artifacts_builder {component}` "
            f"(--tiny for an offline stand-in), or point {key} at a built payload"
        )
