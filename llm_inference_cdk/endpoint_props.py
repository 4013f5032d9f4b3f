"""The props of a SageMaker endpoint: its variant, autoscaling, alarms and update policy.

Standard library only (with llm_contracts): the CDK app reads cdk.json into these classes
without loading the AWS CDK.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from llm_contracts import aws, instances
from llm_inference_cdk.props import (
    Check,
    PropError,
    boolean,
    instance_of,
    integer,
    invalid,
    is_int,
    number,
    one_of,
    optional,
    prop,
    string_map,
    text,
    validate,
)

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,1023}$")
_AMI_VERSION = re.compile(r"^al2[0-9]*-ami-sagemaker-inference-[a-z]+-[0-9]+(-[0-9]+)?$")
#: SageMaker's names of endpoints and variants (CreateEndpoint, ProductionVariant), and their words.
SAGEMAKER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
SAGEMAKER_NAME_ALLOWED = "1 to 63 letters, digits and hyphens, not starting with one"
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
        validate(self, self._rules)

    def _rules(self) -> Iterator[PropError]:
        if self.max_capacity < self.min_capacity:
            yield invalid(self, "max_capacity", f"at least min_capacity ({self.min_capacity})")


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
    #: that refuses what it used to accept shows here; in async mode, which publishes no
    #: InvocationModelErrors, ``InvocationFailures``: queued requests that failed for any reason;
    #: None: no such alarm).
    model_errors: int | None = prop(10, check=optional(integer(1, 1_000_000)))
    #: Alarm when the instances' ML storage volume is fuller than this percentage on average
    #: (a full disk fails the next model download or engine build; None: no such alarm).
    disk_percent: int | None = prop(90, check=optional(integer(1, 100)))
    #: Alarm when GPU memory is fuller than this percentage on average over all the GPUs, on GPU
    #: instances (the next larger batch or longer sequence runs out of memory; the threshold is
    #: this times the GPUs, as GPUMemoryUtilization sums them; None: no such alarm).
    gpu_memory_percent: int | None = prop(95, check=optional(integer(1, 100)))
    #: Alarm when the vLLM engine's queue has held at least this many requests through a whole
    #: window (``vllm:num_requests_waiting``: requests wait when the engine's batch or KV cache is
    #: full), from SageMaker's detailed observability, which the endpoint config turns on; a PromQL
    #: alarm, real-time and inference-component modes (None: no such alarm). For a vLLM container,
    #: whose GPU memory use is the share it reserves at start whatever the load, in place of
    #: ``gpu_memory_percent``.
    waiting_requests: int | None = prop(None, check=optional(integer(1, 100_000)))
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
        validate(self, self._rules)

    def _rules(self) -> Iterator[PropError]:
        window = _DAY if self.period_s < 3600 else _WEEK
        if self.period_s * self.evaluation_periods > window:
            yield invalid(
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
    #: :meth:`SageMakerEndpointProps.deployment_strategy`: all-at-once for a single instance, rolling for
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
    #: documented to notice (docs/OPERATIONS.md, "Updates"); this check makes it.
    fail_rolled_back_updates: bool = prop(True, check=boolean())

    def __post_init__(self) -> None:
        validate(self, self._rules)

    def _rules(self) -> Iterator[PropError]:
        waits = self.wait_interval_s + self.termination_wait_s
        if self.max_execution_timeout_s <= waits:
            yield invalid(
                self,
                "max_execution_timeout_s",
                f"more than wait_interval_s + termination_wait_s ({waits}): SageMaker requires it",
            )


@dataclass(frozen=True, kw_only=True)
class InferenceComponentProps:
    """The model as an inference component on the endpoint: SageMaker places copies of it on
    instances it manages (``ManagedInstanceScaling``), the copy count scales on invocations per
    copy, and with ``min_copies=0`` the endpoint scales to zero instances when idle and back
    when a request finds no copy (a ``NoCapacityInvocationFailures`` alarm adds one; that
    request, and those until the copy is up, fail)."""

    #: GPUs (Neuron devices on inf2/trn) each copy reserves (0: a CPU-only copy).
    accelerators: int = prop(1, check=integer(0, 16))
    #: CPU cores each copy reserves.
    cpu_cores: float = prop(1, check=number(0.25, 192))
    #: Memory each copy reserves, MiB.
    memory_mb: int = prop(1024, check=integer(128, 2_097_152))
    #: Fewest copies; 0 lets the endpoint scale to zero instances when idle.
    min_copies: int = prop(1, check=integer(0, 1000))
    #: Most copies (required).
    max_copies: int = prop(check=integer(1, 1000))
    #: Invocations per copy per minute the copy count aims at (required).
    target_invocations_per_copy: int = prop(check=integer(1, 100_000))
    #: Fewest instances managed scaling keeps (None: 0 with ``min_copies=0``, else 1).
    min_instances: int | None = prop(None, check=optional(integer(0, 1000)))
    #: Most instances managed scaling may start (None: ``max_copies`` + 1: one copy per instance,
    #: and room for the new copy of a rolling update).
    max_instances: int | None = prop(None, check=optional(integer(1, 1000)))
    #: Seconds after a scale-in of copies before the next (default 300).
    scale_in_cooldown_s: int = prop(300, check=integer(0, 86_400))
    #: Seconds after a scale-out of copies before the next (default 60).
    scale_out_cooldown_s: int = prop(60, check=integer(0, 86_400))

    def __post_init__(self) -> None:
        validate(self, self._rules)

    def _rules(self) -> Iterator[PropError]:
        if self.max_copies < self.min_copies:
            yield invalid(self, "max_copies", f"at least min_copies ({self.min_copies})")
        if self.min_instances is not None and self.min_copies > 0 and self.min_instances == 0:
            yield invalid(self, "min_instances", "at least 1 while min_copies is above 0 (a copy needs an instance)")
        if self.max_instances is not None and self.max_instances < self.fewest_instances:
            yield invalid(self, "max_instances", f"at least min_instances ({self.fewest_instances})")

    @property
    def fewest_instances(self) -> int:
        if self.min_instances is not None:
            return self.min_instances
        return 0 if self.min_copies == 0 else 1

    @property
    def most_instances(self) -> int:
        # One more than one copy per instance needs: a rolling update starts a new copy before
        # it stops an old one, which at max_copies needs an instance more.
        return self.max_instances if self.max_instances is not None else self.max_copies + 1

    @property
    def scales_to_zero(self) -> bool:
        return self.min_copies == 0


@dataclass(frozen=True, kw_only=True)
class AsyncInferenceProps:
    """Asynchronous inference: requests are queued (their bodies in S3), answered into the
    endpoint's own bucket and announced on SNS, with no 60 s limit; the instance count scales on
    the queue per instance (``ApproximateBacklogSizePerInstance``), to zero when it is empty and
    out of zero on ``HasBacklogWithoutCapacity``."""

    #: Requests each instance works on at once (None: SageMaker's choice).
    max_concurrent_invocations_per_instance: int | None = prop(None, check=optional(integer(1, 1000)))
    #: Fewest instances; 0 lets the endpoint scale to zero while nothing is queued.
    min_instances: int = prop(0, check=integer(0, 100))
    #: Most instances (required).
    max_instances: int = prop(check=integer(1, 100))
    #: Queued requests per instance the instance count aims at.
    target_backlog_per_instance: float = prop(5.0, check=number(0.1, 10_000))
    #: Seconds after a scale-in before the next (default 300).
    scale_in_cooldown_s: int = prop(300, check=integer(0, 86_400))
    #: Seconds after a scale-out before the next (default 60).
    scale_out_cooldown_s: int = prop(60, check=integer(0, 86_400))

    def __post_init__(self) -> None:
        validate(self, self._rules)

    def _rules(self) -> Iterator[PropError]:
        if self.max_instances < self.min_instances:
            yield invalid(self, "max_instances", f"at least min_instances ({self.min_instances})")


#: How the endpoint serves: one real-time variant, an inference component, or async.
MODES = ("realtime", "inference-component", "async")


@dataclass(frozen=True, kw_only=True)
class SageMakerEndpointProps:
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
    #: SageMaker's inference AMI (driver and CUDA) such as ``al2023-ami-sagemaker-inference-gpu-4-1``:
    #: one of botocore's ``ProductionVariantInferenceAmiVersion`` (None: the instance family's
    #: default AMI).
    inference_ami_version: str | None = prop(
        None,
        check=optional(
            text(_AMI_VERSION, what="a GPU inference AMI version such as al2023-ami-sagemaker-inference-gpu-4-1")
        ),
    )
    #: The production variant's name.
    variant_name: str = prop("AllTraffic", check=text(SAGEMAKER_NAME, what=SAGEMAKER_NAME_ALLOWED))
    #: Autoscaling of the instance count (None: a fixed count; ``auto_scale_instance_count``
    #: adds it later).
    autoscaling: AutoscalingProps | None = prop(
        None, check=optional(Check(lambda v: isinstance(v, AutoscalingProps), "AutoscalingProps"))
    )
    #: Alarms on latency and 5xx errors (None: none; ``add_alarms`` adds them later).
    alarms: AlarmProps | None = prop(None, check=optional(instance_of(AlarmProps)))
    #: How updates reach the endpoint (default: :class:`DeploymentProps`' defaults).
    deployment: DeploymentProps = prop(factory=DeploymentProps, check=instance_of(DeploymentProps))
    #: Serve the model as an inference component (None: a real-time variant).
    inference_component: InferenceComponentProps | None = prop(
        None, check=optional(instance_of(InferenceComponentProps))
    )
    #: Serve asynchronously (None: a real-time variant).
    async_inference: AsyncInferenceProps | None = prop(None, check=optional(instance_of(AsyncInferenceProps)))

    def __post_init__(self) -> None:
        validate(self, self._rules)

    @property
    def instance(self) -> instances.InstanceType:
        """The instance type with its facts (GPUs, host, storage): what the rules and the
        constructs read of it."""
        return instances.InstanceType(self.instance_type)

    def _rules(self) -> Iterator[PropError]:
        instance = self.instance
        family = instance.family
        if not instance.size_exists:
            # The rules below read the instance's GPUs, cores and memory: a size it has not.
            yield invalid(self, "instance_type", f"a size of ml.{family}: {', '.join(instances.sizes(family))}")
            return
        if self.volume_size_gb is not None and instance.has_nvme:
            yield invalid(
                self,
                "volume_size_gb",
                f"unset for {self.instance_type}: its family has NVMe instance storage and SageMaker rejects "
                "VolumeSizeInGB",
            )
        bounds = self.instance_bounds
        if bounds is not None:
            if family in instances.BURSTABLE_FAMILIES:
                yield invalid(self, "instance_type", "a type that is not burstable: SageMaker does not autoscale t2/t3")
            count, (fewest, most, low, high) = self.initial_instance_count, bounds
            if count is not None and not max(1, fewest) <= count <= most:
                yield invalid(self, "initial_instance_count", f"between {low} ({max(1, fewest)}) and {high} ({most})")
        yield from self._ami_rules()
        yield from self._mode_rules()
        yield from self._deployment_rules()

    def _ami_rules(self) -> Iterator[PropError]:
        ami = self.inference_ami_version
        if ami is None:
            return
        known = aws.inference_ami_versions()
        if ami not in known:
            yield invalid(self, "inference_ami_version", "one of " + ", ".join(known) + " (botocore's SageMaker model)")
            return
        # A GPU AMI on Inferentia or a Neuron AMI on a GPU (families this project knows; others
        # are left to SageMaker).
        instance = self.instance
        kind = "neuron" if instance.is_neuron else "gpu" if instance.gpu is not None else None
        if kind is not None and f"-{kind}-" not in ami:
            fits = [name for name in known if f"-{kind}-" in name]
            yield invalid(self, "inference_ami_version", f"an AMI for {self.instance_type}: {', '.join(fits)}")

    def _mode_rules(self) -> Iterator[PropError]:
        if self.mode == "async" and self.alarms is not None and self.alarms.waiting_requests is not None:
            yield invalid(
                self.alarms,
                "waiting_requests",
                "unset in async mode: SageMaker's detailed observability covers real-time endpoints; an async "
                "endpoint's queue is ApproximateBacklogSize, which its scaling tracks",
            )
        if self.inference_component is not None and self.async_inference is not None:
            yield invalid(self, "async_inference", "unset with inference_component: an endpoint has one mode")
        if self.mode != "realtime" and self.autoscaling is not None:
            yield invalid(
                self, "autoscaling", f"unset in {self.mode} mode (it scales by its own props: copies or backlog)"
            )
        component = self.inference_component
        if component is None:
            return
        instance = self.instance
        gpus, host = instance.gpus, instance.host
        too_many = (component.accelerators > gpus and not instance.is_accelerated) or (
            gpus and component.accelerators > gpus
        )
        if too_many:
            yield invalid(component, "accelerators", f"at most {gpus}: each copy must fit on one {self.instance_type}")
        if host is not None and component.cpu_cores > host[0]:
            yield invalid(component, "cpu_cores", f"at most {host[0]}: the vCPUs of one {self.instance_type}")
        if host is not None and component.memory_mb > host[1] * 1024:
            yield invalid(component, "memory_mb", f"at most {host[1] * 1024}: the memory of one {self.instance_type}")
        fits = self._copies_per_instance(component)
        if fits is not None and fits[0] >= 1:
            per_instance, asks = fits
            needed = -(-component.max_copies // per_instance)
            if component.most_instances < needed:
                yield invalid(
                    component,
                    "max_instances",
                    f"at least {needed}: {component.max_copies} copies take {needed} {self.instance_type}, "
                    f"{per_instance} to an instance (each asks for {asks})",
                )

    def _copies_per_instance(self, component: InferenceComponentProps) -> tuple[int, str] | None:
        """How many copies one instance holds, and what each asks for of it, in words: SageMaker
        places a copy where its accelerators, CPU cores and memory are all free (botocore's
        SageMaker model, InferenceComponentComputeResourceRequirements), so the scarcest of the
        three bounds it. None for an instance type this project has no facts of."""
        gpus, host = self.instance.gpus, self.instance.host
        bounds: list[int] = []
        asks: list[str] = []
        if gpus and component.accelerators:
            bounds.append(gpus // component.accelerators)
            asks.append(f"{component.accelerators} of its {gpus} GPU{'s' if gpus != 1 else ''}")
        if host is not None:
            vcpus, memory_mb = host[0], host[1] * 1024
            bounds += [math.floor(vcpus / component.cpu_cores), memory_mb // component.memory_mb]
            asks += [
                f"{component.cpu_cores:g} of its {vcpus} vCPUs",
                f"{component.memory_mb} of its {memory_mb} MiB of memory",
            ]
        if not bounds:
            return None
        return min(bounds), ", ".join(asks[:-1]) + (" and " if len(asks) > 1 else "") + asks[-1]

    @property
    def instance_bounds(self) -> tuple[int, int, str, str] | None:
        """(fewest, most, and the props that set them) of the instances scaling keeps; None
        without scaling."""
        if self.autoscaling is not None:
            return self.autoscaling.min_capacity, self.autoscaling.max_capacity, "min_capacity", "max_capacity"
        if self.inference_component is not None:
            ic = self.inference_component
            return ic.fewest_instances, ic.most_instances, "inference_component.min_instances", "its max_instances"
        if self.async_inference is not None:
            queued = self.async_inference
            return queued.min_instances, queued.max_instances, "async_inference.min_instances", "its max_instances"
        return None

    @property
    def mode(self) -> str:
        """One of :data:`MODES`."""
        if self.inference_component is not None:
            return "inference-component"
        return "async" if self.async_inference is not None else "realtime"

    def _deployment_rules(self) -> Iterator[PropError]:
        deployment, fewest = self.deployment, self.fewest_instances
        strategy = self.deployment_strategy
        if strategy != "all-at-once" and fewest < 2:
            yield invalid(
                deployment,
                "strategy",
                f"all-at-once while the variant may run a single instance ({strategy} shifts at most half "
                "the fleet at a time, which one instance cannot be split into)",
            )
        alarms = self.alarms
        if deployment.auto_rollback and alarms is not None and deployment.wait_interval_s < alarms.window_s:
            if alarms.window_s > _LONGEST_BAKE_S:
                yield invalid(
                    deployment,
                    "auto_rollback",
                    f"false with alarms that need {alarms.window_s} s of data to fire (period_s x "
                    f"evaluation_periods): SageMaker bakes an update for at most {_LONGEST_BAKE_S} s; shorten "
                    "the alarms' window to roll back on them",
                )
            else:
                yield invalid(
                    deployment,
                    "wait_interval_s",
                    f"at least the rollback alarms' evaluation window ({alarms.window_s} s): a shorter baking "
                    "period ends before they can fire",
                )

    @property
    def fewest_instances(self) -> int:
        """The fewest instances the variant runs: autoscaling's minimum, else the count."""
        if self.inference_component is not None:
            return self.inference_component.fewest_instances
        if self.async_inference is not None:
            return self.async_inference.min_instances
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
        return "rolling" if self.instance.is_accelerated else "canary"

    @property
    def instance_count(self) -> int:
        """Instances at creation, resolved (an endpoint that scales to zero starts with one:
        SageMaker creates no endpoint of zero instances)."""
        if self.initial_instance_count is not None:
            return self.initial_instance_count
        if self.inference_component is not None or self.async_inference is not None:
            return max(1, self.fewest_instances)
        return self.autoscaling.min_capacity if self.autoscaling else 1

    @property
    def volume_size(self) -> int | None:
        """The volume SageMaker is given (None where the family has NVMe storage)."""
        if self.instance.has_nvme:
            return None
        return self.volume_size_gb or 30


#: Names kept for code written before the rename, each with the name that replaces it.
DEPRECATED_NAMES = {"EndpointProps": "SageMakerEndpointProps"}


def deprecated_name(module: str, name: str) -> Any:
    """The class that replaced `name` in `module`, with a DeprecationWarning that names it
    (aws-cdk's rule: ``FooProps`` configures ``Foo``); AttributeError for any other name."""
    if name not in DEPRECATED_NAMES:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    new = DEPRECATED_NAMES[name]
    warnings.warn(
        f"{module}.{name} is deprecated: use {new}, the props of SageMakerEndpoint (same fields)",
        DeprecationWarning,
        stacklevel=3,
    )
    return globals()[new]


def __getattr__(name: str) -> Any:
    return deprecated_name(__name__, name)
