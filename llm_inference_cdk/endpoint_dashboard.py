"""The dashboard rows of an endpoint: traffic and errors, latencies, what its mode's scaling
tracks, the instances' use, and its alarms' states."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch

from llm_inference_cdk.endpoint_base import SageMakerEndpointBase
from llm_inference_cdk.endpoint_props import SageMakerEndpointProps


def endpoint_rows(
    endpoint: SageMakerEndpointBase, props: SageMakerEndpointProps, alarms: list[cloudwatch.AlarmBase]
) -> list[list[cloudwatch.IWidget]]:
    """Rows of dashboard widgets for `endpoint`: traffic and errors, latencies, what drives
    autoscaling, the instances' CPU, memory, GPU (on GPU instances) and disk, and the alarms'
    states; each of a metric the endpoint's mode publishes, with statistics its page lists
    (llm_contracts/sagemaker_metrics.py)."""
    name = endpoint.node.id
    # An async endpoint publishes neither Invocations nor InvocationModelErrors, nor
    # OverheadLatency, and its ModelLatency has no percentiles (async-inference-monitor.html);
    # OverheadLatency's statistics are Average, Sum, Minimum, Maximum and SampleCount.
    extremes: tuple[str, ...] = ("Average", "Maximum")
    if props.mode == "async":
        traffic = (
            f"{name}: queued requests processed and failed per minute",
            endpoint.metric_invocations_processed(label="processed"),
            endpoint.metric_invocation_failures(label="failed"),
        )
        latencies = [
            ("model latency", endpoint.metric_model_latency(), extremes),
            ("time a request waited in the queue", endpoint.metric_time_in_backlog(), extremes),
        ]
    else:
        traffic = (
            f"{name}: invocations and errors per minute",
            endpoint.metric_invocations(label="invocations"),
            endpoint.metric_invocation_model_errors(label="model errors"),
        )
        latencies = [("model latency", endpoint.metric_model_latency(), ("p50", "p90", "p99")),
                     ("overhead latency", endpoint.metric_overhead_latency(), extremes)]  # fmt: skip
    usage: list[cloudwatch.IWidget] = [
        cloudwatch.GraphWidget(
            title=f"{name}: CPU and memory, %",
            left=[endpoint.metric_cpu_utilization(label="CPU"), endpoint.metric_memory_utilization(label="memory")],
            width=8,
        )
    ]
    gpus = props.instance.gpus
    if gpus:
        usage.append(
            cloudwatch.GraphWidget(
                title=f"{name}: GPU and GPU memory, % summed over its {gpus} GPU{'s' if gpus > 1 else ''}",
                left=[
                    endpoint.metric_gpu_utilization(label="GPU"),
                    endpoint.metric_gpu_memory_utilization(label="GPU memory"),
                ],
                left_y_axis=cloudwatch.YAxisProps(min=0, max=100 * gpus),
                width=8,
            )
        )
    disk = cloudwatch.GraphWidget(
        title=f"{name}: ML storage volume, % used", left=[endpoint.metric_disk_utilization(label="disk")], width=8
    )
    rows: list[list[cloudwatch.IWidget]] = [
        [
            _traffic(endpoint, *traffic),
            *(_milliseconds(metric, f"{name}: {what}", stats) for what, metric, stats in latencies),
        ],
        [_scaling_widget(endpoint, props), *usage],
        [disk],
    ]
    if alarms:
        rows[-1].append(cloudwatch.AlarmStatusWidget(title=f"{name}: alarms", alarms=alarms, width=16))
    return rows


def _traffic(
    endpoint: SageMakerEndpointBase, title: str, requests: cloudwatch.Metric, failed: cloudwatch.Metric
) -> cloudwatch.GraphWidget:
    """`requests` per minute on the left, 4xx, 5xx and the mode's `failed` on the right."""
    return cloudwatch.GraphWidget(
        title=title,
        left=[requests],
        right=[
            endpoint.metric_invocation_4xx_errors(label="4xx"),
            endpoint.metric_invocation_5xx_errors(label="5xx"),
            failed,
        ],
        width=8,
    )


def _milliseconds(metric: cloudwatch.Metric, title: str, statistics: tuple[str, ...]) -> cloudwatch.GraphWidget:
    """`metric`, published in microseconds, graphed in milliseconds, one line per statistic."""
    lines = [
        cloudwatch.MathExpression(
            expression=f"{_id(stat)} / 1000",
            using_metrics={_id(stat): metric.with_(statistic=stat)},
            label=f"{stat} ms",
            period=Duration.minutes(1),
        )
        for stat in statistics
    ]
    return cloudwatch.GraphWidget(title=title, left=lines, width=8)


def _id(statistic: str) -> str:
    # A metric-math id starts with a lower-case letter.
    return statistic.lower()


def _scaling_widget(endpoint: SageMakerEndpointBase, props: SageMakerEndpointProps) -> cloudwatch.GraphWidget:
    """What the mode's scaling tracks, its target, and what brings it back from zero."""
    name = endpoint.node.id

    def target(value: float) -> list[cloudwatch.HorizontalAnnotation]:
        return [cloudwatch.HorizontalAnnotation(value=value, label="scaling target")]

    if props.inference_component is not None:
        return cloudwatch.GraphWidget(
            title=f"{name}: invocations per copy (what scaling tracks) and requests that found no copy",
            left=[endpoint.metric_invocations_per_copy(label="invocations per copy")],
            left_annotations=target(props.inference_component.target_invocations_per_copy),
            right=[endpoint.metric_no_capacity_failures(label="no copy")],
            width=8,
        )
    if props.async_inference is not None:
        return cloudwatch.GraphWidget(
            title=f"{name}: queued requests per instance (what scaling tracks) and queued without an instance",
            left=[endpoint.metric_backlog(label="queued"), endpoint.metric_backlog_per_instance(label="per instance")],
            left_annotations=target(props.async_inference.target_backlog_per_instance),
            right=[endpoint.metric_backlog_without_capacity(label="queued, no instance")],
            width=8,
        )
    tracked = props.autoscaling.target_invocations_per_instance if props.autoscaling else None
    return cloudwatch.GraphWidget(
        title=f"{name}: invocations per instance (what autoscaling tracks) and instances reporting",
        left=[endpoint.metric_invocations_per_instance(label="invocations per instance")],
        left_annotations=target(tracked) if tracked else None,
        right=[endpoint.metric_cpu_utilization(statistic="SampleCount", label="instances reporting")],
        width=8,
    )
