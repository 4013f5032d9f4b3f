"""The props of a SageMaker endpoint: its variant, autoscaling, alarms and update policy.

Standard library only (with llm_contracts): the CDK app reads cdk.json into these classes
without loading the AWS CDK.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from llm_contracts import instances
from llm_inference_cdk.props import (
    Check,
    boolean,
    instance_of,
    integer,
    invalid,
    is_int,
    one_of,
    optional,
    prop,
    string_map,
    text,
    validate,
)

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,1023}$")
_AMI_VERSION = re.compile(r"^al2-ami-sagemaker-inference-gpu-[0-9]+(-[0-9]+)?$")
_VARIANT_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_INSTANCE_TYPE = Check(
    lambda v: isinstance(v, str) and instances.SAGEMAKER_INSTANCE.match(v) is not None,
    "a SageMaker instance type such as ml.g5.xlarge",
)
#: CloudWatch evaluates at most a day of periods under an hour, a week otherwise (PutMetricAlarm).
_DAY, _WEEK = 86_400, 604_800


@dataclass(frozen=True, kw_only=True)
class AutoscalingProps:
    """Target tracking on ``SageMakerVariantInvocationsPerInstance`` (invocations per instance
    per minute), through Application Auto Scaling's SageMaker service-linked role."""

    #: Fewest instances.
    min_capacity: int = prop(1, check=integer(1, 100))
    #: Most instances (required).
    max_capacity: int = prop(check=integer(1, 100))
    #: Invocations per instance per minute that autoscaling aims at (required).
    target_invocations_per_instance: int = prop(check=integer(1, 100_000))
    #: Seconds after a scale-in activity before the next (default 300).
    scale_in_cooldown_s: int = prop(300, check=integer(0, 86_400))
    #: Seconds after a scale-out activity before the next (default 60).
    scale_out_cooldown_s: int = prop(60, check=integer(0, 86_400))

    def __post_init__(self) -> None:
        validate(self)
        if self.max_capacity < self.min_capacity:
            raise invalid(self, "max_capacity", f"at least min_capacity ({self.min_capacity})")


@dataclass(frozen=True, kw_only=True)
class AlarmProps:
    """CloudWatch alarms on the variant. Those on what a new model can break (5xx errors,
    model errors, latency) are also the update's rollback alarms (:class:`DeploymentProps`);
    those on the instances' capacity (disk, GPU memory) only notify."""

    #: Alarm when the mean model latency of a period exceeds this many milliseconds (None: no
    #: latency alarm).
    latency_ms: int | None = prop(None, check=optional(integer(1, 60_000)))
    #: Alarm at this many 5xx invocation errors in a period.
    errors_5xx: int = prop(5, check=integer(1, 1_000_000))
    #: Alarm at this many invocations in a period that the container answered with an error
    #: or did not answer (``InvocationModelErrors``: 4xx of the container included, so a model
    #: that refuses what it used to accept shows here; None: no such alarm).
    model_errors: int | None = prop(10, check=optional(integer(1, 1_000_000)))
    #: Alarm when the instances' ML storage volume is fuller than this percentage on average
    #: (a full disk fails the next model download or engine build; None: no such alarm).
    disk_percent: int | None = prop(90, check=optional(integer(1, 100)))
    #: Alarm when GPU memory is fuller than this percentage on average, on GPU instances (the
    #: next larger batch or longer sequence runs out of memory; None: no such alarm).
    gpu_memory_percent: int | None = prop(95, check=optional(integer(1, 100)))
    #: Seconds per period: SageMaker publishes endpoint metrics once a minute, so a shorter
    #: period would see no data and never fire.
    period_s: int = prop(
        60,
        check=Check(
            lambda v: is_int(v) and 60 <= v <= _DAY and v % 60 == 0,
            "a multiple of 60 from 60 to 86400 (endpoint metrics are per minute)",
        ),
    )
    #: Periods a threshold must be breached in a row.
    evaluation_periods: int = prop(3, check=integer(1, 100))

    def __post_init__(self) -> None:
        validate(self)
        window = _DAY if self.period_s < 3600 else _WEEK
        if self.period_s * self.evaluation_periods > window:
            raise invalid(
                self,
                "evaluation_periods",
                f"at most {window // self.period_s} with period_s={self.period_s} "
                f"(CloudWatch evaluates at most {window} s)",
            )

    @property
    def window_s(self) -> int:
        """Seconds of breaching data an alarm needs before it fires."""
        return self.period_s * self.evaluation_periods


#: SageMaker's longest baking period (WaitIntervalInSeconds).
_LONGEST_BAKE_S = 3600
#: SageMaker's update policies: blue/green with its three ways of shifting traffic, or rolling.
STRATEGIES = ("all-at-once", "canary", "linear", "rolling")


@dataclass(frozen=True, kw_only=True)
class DeploymentProps:
    """How SageMaker moves the endpoint to a new endpoint config (a new model, payload or
    setting): SageMaker's deployment guardrails (``DeploymentConfig``).

    Blue/green (``all-at-once``, ``canary``, ``linear``) starts a whole new fleet beside the old
    one and shifts traffic to it; ``rolling`` replaces the fleet a batch at a time, needing only
    a batch of extra instances. After each shift SageMaker bakes: for ``wait_interval_s`` it
    watches the endpoint's rollback alarms and, if one goes into ALARM, sends all traffic back
    to the old fleet and ends the update there."""

    #: The update policy, one of :data:`STRATEGIES` (None: chosen from the variant by
    #: :meth:`EndpointProps.deployment_strategy`: all-at-once for a single instance, rolling for
    #: a fleet of GPU or Neuron instances, canary for a fleet of CPU instances).
    strategy: str | None = prop(None, check=optional(one_of(*STRATEGIES)))
    #: Seconds of baking after each traffic shift (or rolling batch), during which the rollback
    #: alarms are watched: long enough for them to fire (at least their evaluation window).
    wait_interval_s: int = prop(600, check=integer(0, _LONGEST_BAKE_S))
    #: canary: the share of the fleet's capacity that gets traffic first, percent (SageMaker
    #: allows at most half the fleet).
    canary_percent: int = prop(10, check=integer(1, 50))
    #: linear: the share of capacity each step shifts, percent.
    linear_step_percent: int = prop(25, check=integer(10, 50))
    #: rolling: the share of the fleet replaced per batch, percent (SageMaker: 5 to 50).
    rolling_batch_percent: int = prop(25, check=integer(5, 50))
    #: blue/green: seconds the old fleet stays after all traffic moved, for a manual way back.
    termination_wait_s: int = prop(0, check=integer(0, 3600))
    #: Seconds the whole update may take before SageMaker stops it and rolls back.
    max_execution_timeout_s: int = prop(3600, check=integer(600, 28_800))
    #: Roll back on the endpoint's alarms (5xx errors, model errors and latency, those that
    #: are set); with no such alarm, SageMaker rolls back only an update that fails to start.
    auto_rollback: bool = prop(True, check=boolean())
    #: Fail the CloudFormation update (which then rolls back) when, after it, the endpoint does
    #: not run the new endpoint config: SageMaker rolled it back. CloudFormation is not
    #: documented to notice (README, "Updates"); this check makes it.
    fail_rolled_back_updates: bool = prop(True, check=boolean())

    def __post_init__(self) -> None:
        validate(self)
        waits = self.wait_interval_s + self.termination_wait_s
        if self.max_execution_timeout_s <= waits:
            raise invalid(
                self,
                "max_execution_timeout_s",
                f"more than wait_interval_s + termination_wait_s ({waits}): SageMaker requires it",
            )


@dataclass(frozen=True, kw_only=True)
class EndpointProps:
    """One production variant on SageMaker instances."""

    #: The instance type (required), such as ``ml.g5.xlarge``.
    instance_type: str = prop(check=_INSTANCE_TYPE)
    #: Instances at creation (None: autoscaling's ``min_capacity``, else 1).
    initial_instance_count: int | None = prop(None, check=optional(integer(1, 100)))
    #: Seconds SageMaker waits for ``/ping`` at start (None: SageMaker's default).
    startup_health_check_timeout_s: int | None = prop(None, check=optional(integer(60, 3600)))
    #: Seconds SageMaker allows to download the model data (None: SageMaker's default).
    model_data_download_timeout_s: int | None = prop(None, check=optional(integer(60, 3600)))
    #: The ML storage volume, GB, KMS-encrypted with a key of the endpoint (None: 30 GB on
    #: families without NVMe storage; families with NVMe storage take none).
    volume_size_gb: int | None = prop(None, check=optional(integer(1, 512)))
    #: The container gets no network.
    enable_network_isolation: bool = prop(True, check=boolean())
    #: Container environment.
    environment: Mapping[str, str] = prop(
        factory=dict,
        check=string_map(
            _ENV_NAME,
            max_value=1024,
            max_items=100,
            what="at most 100 environment variable names (letters, digits, _) to strings of at most 1024 characters",
        ),
    )
    #: SageMaker's GPU inference AMI (driver and CUDA) such as
    #: ``al2-ami-sagemaker-inference-gpu-3-1`` (None: the instance family's default AMI).
    inference_ami_version: str | None = prop(
        None,
        check=optional(
            text(_AMI_VERSION, what="a GPU inference AMI version such as al2-ami-sagemaker-inference-gpu-3-1")
        ),
    )
    #: The production variant's name.
    variant_name: str = prop(
        "AllTraffic", check=text(_VARIANT_NAME, what="1 to 63 letters, digits and hyphens, not starting with one")
    )
    #: Autoscaling of the instance count (None: a fixed count; ``auto_scale_instance_count``
    #: adds it later).
    autoscaling: AutoscalingProps | None = prop(
        None, check=optional(Check(lambda v: isinstance(v, AutoscalingProps), "AutoscalingProps"))
    )
    #: Alarms on latency and 5xx errors (None: none; ``add_alarms`` adds them later).
    alarms: AlarmProps | None = prop(None, check=optional(instance_of(AlarmProps)))
    #: How updates reach the endpoint (default: :class:`DeploymentProps`' defaults).
    deployment: DeploymentProps = prop(factory=DeploymentProps, check=instance_of(DeploymentProps))

    def __post_init__(self) -> None:
        validate(self)
        family = instances.family(self.instance_type)
        if not instances.size_exists(self.instance_type):
            raise invalid(self, "instance_type", f"a size of ml.{family}: {', '.join(instances.sizes(family))}")
        if self.volume_size_gb is not None and family in instances.NVME_FAMILIES:
            raise invalid(
                self,
                "volume_size_gb",
                f"unset for {self.instance_type}: its family has NVMe instance storage and SageMaker rejects "
                "VolumeSizeInGB",
            )
        scaling = self.autoscaling
        if scaling is not None:
            if family in instances.BURSTABLE_FAMILIES:
                raise invalid(self, "instance_type", "a type that is not burstable: SageMaker does not autoscale t2/t3")
            count = self.initial_instance_count
            if count is not None and not scaling.min_capacity <= count <= scaling.max_capacity:
                raise invalid(
                    self,
                    "initial_instance_count",
                    f"between min_capacity ({scaling.min_capacity}) and max_capacity ({scaling.max_capacity})",
                )
        self._check_deployment()

    def _check_deployment(self) -> None:
        deployment, fewest = self.deployment, self.fewest_instances
        strategy = self.deployment_strategy
        if strategy != "all-at-once" and fewest < 2:
            raise invalid(
                deployment,
                "strategy",
                f"all-at-once while the variant may run a single instance ({strategy} shifts at most half "
                "the fleet at a time, which one instance cannot be split into)",
            )
        alarms = self.alarms
        if deployment.auto_rollback and alarms is not None and deployment.wait_interval_s < alarms.window_s:
            if alarms.window_s > _LONGEST_BAKE_S:
                raise invalid(
                    deployment,
                    "auto_rollback",
                    f"false with alarms that need {alarms.window_s} s of data to fire (period_s x "
                    f"evaluation_periods): SageMaker bakes an update for at most {_LONGEST_BAKE_S} s; shorten "
                    "the alarms' window to roll back on them",
                )
            raise invalid(
                deployment,
                "wait_interval_s",
                f"at least the rollback alarms' evaluation window ({alarms.window_s} s): a shorter baking "
                "period ends before they can fire",
            )

    @property
    def fewest_instances(self) -> int:
        """The fewest instances the variant runs: autoscaling's minimum, else the count."""
        return self.autoscaling.min_capacity if self.autoscaling else self.instance_count

    @property
    def deployment_strategy(self) -> str:
        """The update policy: the one set, else all-at-once blue/green for a variant that may run
        one instance (nothing smaller to shift), rolling for a fleet of accelerated instances (a
        blue/green fleet beside it would double the GPUs for the update) and canary for a fleet
        of CPU instances."""
        if self.deployment.strategy is not None:
            return self.deployment.strategy
        if self.fewest_instances < 2:
            return "all-at-once"
        return "rolling" if instances.is_accelerated(self.instance_type) else "canary"

    @property
    def instance_count(self) -> int:
        """Instances at creation, resolved."""
        if self.initial_instance_count is not None:
            return self.initial_instance_count
        return self.autoscaling.min_capacity if self.autoscaling else 1

    @property
    def volume_size(self) -> int | None:
        """The volume SageMaker is given (None where the family has NVMe storage)."""
        if instances.has_nvme(self.instance_type):
            return None
        return self.volume_size_gb or 30
