"""An endpoint's alarms (:class:`AlarmProps`): those on what a new model can break (latency,
5xx and model errors), which its update policy rolls back on, and those on its instances'
capacity (disk, GPU memory), which only notify."""

from __future__ import annotations

from collections.abc import Callable

from aws_cdk import ArnFormat, Duration, Names, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_sns as sns

from llm_contracts.sagemaker_metrics import OTEL_COMPONENT, OTEL_ENDPOINT
from llm_inference_cdk.endpoint_base import SageMakerEndpointBase
from llm_inference_cdk.endpoint_props import AlarmProps


def make_alarms(
    endpoint: SageMakerEndpointBase,
    props: AlarmProps,
    *,
    mode: str,
    gpus: int,
    topic: sns.ITopic | None,
    names: dict[str, str],
) -> tuple[list[cloudwatch.AlarmBase], list[cloudwatch.AlarmBase]]:
    """The alarms `props` sets on `endpoint`, an endpoint of `mode` on instances of `gpus` GPUs
    (the GPU memory alarm where it has any), as (rollback alarms, capacity alarms); `topic` is
    notified on ALARM and OK; each alarm's name goes in `names` by construct id."""
    period = Duration.seconds(props.period_s)
    errors = _model_errors(endpoint, props, mode)
    # GPUMemoryUtilization sums the GPUs: 0-100 times their count (SageMaker's monitoring page).
    gpu_memory = None if props.gpu_memory_percent is None or not gpus else props.gpu_memory_percent * gpus
    plural = "s" if gpus > 1 else ""
    # (id, threshold, description, metric, alarm above rather than at, a rollback alarm)
    specs = [
        # ModelLatency is published in microseconds.
        ("LatencyAlarm", None if props.latency_ms is None else props.latency_ms * 1000,
         f"Mean model latency above {props.latency_ms} ms", endpoint.metric_model_latency, True, True),
        ("Errors5xxAlarm", props.errors_5xx, f"{props.errors_5xx} or more 5xx invocation errors per period",
         endpoint.metric_invocation_5xx_errors, False, True),
        ("ModelErrorsAlarm", props.model_errors, errors[0], errors[1], False, True),
        ("DiskAlarm", props.disk_percent, f"ML storage volume more than {props.disk_percent}% full",
         endpoint.metric_disk_utilization, True, False),
        ("GpuMemoryAlarm", gpu_memory,
         f"GPU memory more than {props.gpu_memory_percent}% used on average: {props.gpu_memory_percent}% of the memory "
         f"of its {gpus} GPU{plural}, {gpu_memory} in GPUMemoryUtilization, which sums the GPUs' percentages",
         endpoint.metric_gpu_memory_utilization, True, False),
    ]  # fmt: skip
    rollback: list[cloudwatch.AlarmBase] = []
    capacity: list[cloudwatch.AlarmBase] = []
    for construct_id, threshold, description, metric, strictly, rolls_back in specs:
        if threshold is None:
            continue
        made = _alarm(
            endpoint, names, construct_id, description, metric(period=period), threshold, props, strictly=strictly
        )
        (rollback if rolls_back else capacity).append(made)
    if props.waiting_requests is not None:
        capacity.append(_waiting_requests_alarm(endpoint, props, names))
    if topic is not None:
        action = cw_actions.SnsAction(topic)
        for alarm in rollback + capacity:
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)
    return rollback, capacity


def _model_errors(
    endpoint: SageMakerEndpointBase, props: AlarmProps, mode: str
) -> tuple[str, Callable[..., cloudwatch.IMetric]]:
    """The model-error alarm's description and metric: an async endpoint publishes no
    InvocationModelErrors (its monitoring page lists all it publishes), and counts every request
    that failed, the model's errors among them, in InvocationFailures."""
    if mode == "async":
        return (
            f"{props.model_errors} or more queued requests per period that failed (the model answered with an "
            "error or did not answer, or SageMaker could not read the request or write the answer)",
            endpoint.metric_invocation_failures,
        )
    return (
        f"{props.model_errors} or more invocations per period the model answered with an error or did not answer",
        endpoint.metric_invocation_model_errors,
    )


def alarm_arns(scope: SageMakerEndpointBase, names: list[str]) -> list[str]:
    """The ARNs of the alarms `names` in `scope`'s stack. From their names, not their
    attributes: the execution role's policy that reads them must exist before the model, which
    comes before the endpoint the alarms watch."""
    stack = Stack.of(scope)
    return [
        stack.format_arn(
            service="cloudwatch", resource="alarm", resource_name=name, arn_format=ArnFormat.COLON_RESOURCE_NAME
        )
        for name in names
    ]


#: vLLM's queue of requests waiting for room in its batch or KV cache, as SageMaker's detailed
#: observability publishes it: its reference names the source metric ``vllm:num_requests_waiting``,
#: its PromQL examples ``vllm_num_requests_waiting``; the selector matches either.
VLLM_WAITING = "vllm[:_]num_requests_waiting"


def _waiting_requests_alarm(
    endpoint: SageMakerEndpointBase, props: AlarmProps, names: dict[str, str]
) -> cloudwatch.PromQLAlarm:
    """ALARM when the vLLM engine of an instance (or of the component's copy) has had at least
    `props.waiting_requests` requests waiting through a whole window: a PromQL alarm on detailed
    observability's OpenTelemetry metric, selected by the labels SageMaker gives it (its PromQL
    page quotes dotted label names)."""
    labels = {OTEL_ENDPOINT: endpoint.endpoint_name}
    if endpoint.component_name is not None:
        labels[OTEL_COMPONENT] = endpoint.component_name
    selector = ", ".join([f'__name__=~"{VLLM_WAITING}"', *(f"'{k}'=\"{v}\"" for k, v in labels.items())])
    construct_id = "WaitingRequestsAlarm"
    return cloudwatch.PromQLAlarm(
        endpoint,
        construct_id,
        alarm_name=_name(endpoint, names, construct_id),
        alarm_description=(
            f"{props.waiting_requests} or more requests waiting in the vLLM engine's queue for {props.window_s} s: "
            "its batch or KV cache is full (vllm:num_requests_waiting, SageMaker's detailed observability)"
        ),
        query=f"max by ('{OTEL_ENDPOINT}') ({{{selector}}}) >= {props.waiting_requests}",
        evaluation_interval=Duration.seconds(props.period_s),
        pending_period=Duration.seconds(props.window_s),
        recovery_period=Duration.seconds(props.period_s),
    )


def _name(endpoint: SageMakerEndpointBase, names: dict[str, str], construct_id: str) -> str:
    # A name of its own, unique to the stack and path, used as written: the endpoint's update
    # policy names its rollback alarms, which name the endpoint in their dimensions; a
    # reference either way would make each wait for the other.
    name = f"{Names.unique_resource_name(endpoint, max_length=200, separator='-')}-{construct_id}"
    names[construct_id] = name
    return name


def _alarm(
    endpoint: SageMakerEndpointBase,
    names: dict[str, str],
    construct_id: str,
    description: str,
    metric: cloudwatch.IMetric,
    threshold: float,
    props: AlarmProps,
    *,
    strictly: bool = False,
) -> cloudwatch.Alarm:
    return cloudwatch.Alarm(
        endpoint,
        construct_id,
        alarm_name=_name(endpoint, names, construct_id),
        alarm_description=description,
        metric=metric,
        threshold=threshold,
        evaluation_periods=props.evaluation_periods,
        comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
        if strictly
        else cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
    )
