"""The dashboard rows of an endpoint: traffic and errors, latency percentiles, what its mode's
scaling tracks, the instances' use, and its alarms' states."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch

from llm_inference_cdk.endpoint_base import SageMakerEndpointBase
from llm_inference_cdk.endpoint_props import SageMakerEndpointProps


def endpoint_rows(
    endpoint: SageMakerEndpointBase, props: SageMakerEndpointProps, alarms: list[cloudwatch.Alarm]
) -> list[list[cloudwatch.IWidget]]:
    """Rows of dashboard widgets for `endpoint`: traffic and errors, model and overhead
    latency percentiles, what drives autoscaling, the instances' CPU, memory, GPU and disk,
    and the alarms' states."""
    name = endpoint.node.id

    def percentiles(metric: cloudwatch.Metric, title: str) -> cloudwatch.GraphWidget:
        # SageMaker publishes latencies in microseconds: shown in milliseconds.
        lines = {
            p: cloudwatch.MathExpression(
                expression=f"{p} / 1000",
                using_metrics={p: metric.with_(statistic=p)},
                label=f"{p} ms",
                period=Duration.minutes(1),
            )
            for p in ("p50", "p90", "p99")
        }
        return cloudwatch.GraphWidget(title=title, left=list(lines.values()), width=8)

    traffic = cloudwatch.GraphWidget(
        title=f"{name}: invocations and errors per minute",
        left=[endpoint.metric_invocations(label="invocations")],
        right=[
            endpoint.metric_invocation_4xx_errors(label="4xx"),
            endpoint.metric_invocation_5xx_errors(label="5xx"),
            endpoint.metric_invocation_model_errors(label="model errors"),
        ],
        width=8,
    )
    scaling = _scaling_widget(endpoint, props)
    usage = [
        cloudwatch.GraphWidget(
            title=f"{name}: CPU and memory, %",
            left=[endpoint.metric_cpu_utilization(label="CPU"), endpoint.metric_memory_utilization(label="memory")],
            width=8,
        ),
        cloudwatch.GraphWidget(
            title=f"{name}: GPU and GPU memory, %",
            left=[
                endpoint.metric_gpu_utilization(label="GPU"),
                endpoint.metric_gpu_memory_utilization(label="GPU memory"),
            ],
            width=8,
        ),
        cloudwatch.GraphWidget(
            title=f"{name}: ML storage volume, % used", left=[endpoint.metric_disk_utilization(label="disk")], width=8
        ),
    ]
    rows: list[list[cloudwatch.IWidget]] = [
        [
            traffic,
            percentiles(endpoint.metric_model_latency(), f"{name}: model latency"),
            percentiles(endpoint.metric_overhead_latency(), f"{name}: overhead latency"),
        ],
        [scaling, *usage[:2]],
        [usage[2]],
    ]
    if alarms:
        rows[2].append(cloudwatch.AlarmStatusWidget(title=f"{name}: alarms", alarms=alarms, width=16))
    return rows


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
