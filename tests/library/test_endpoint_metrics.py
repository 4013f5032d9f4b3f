"""Every alarm, dashboard widget and scaling policy of an endpoint, in a bare ``Stack()``,
names a metric SageMaker publishes for its mode and instance type, with those dimensions, a
statistic its page lists and a threshold the metric can cross (tests/infra/metric_check.py
against llm_contracts/sagemaker_metrics.py); and the faults issue 29 found, one test each."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import CfnResource, Stack
from aws_cdk.assertions import Template

from llm_contracts import sagemaker_metrics as catalog
from llm_inference_cdk import (
    AlarmProps,
    AsyncInferenceProps,
    AutoscalingProps,
    InferenceComponentProps,
    SageMakerEndpoint,
    ServiceDashboard,
)
from tests.infra.metric_check import problems
from tests.library import helpers

MODES: dict[str, dict[str, Any]] = {
    "realtime": {"autoscaling": AutoscalingProps(max_capacity=2, target_invocations_per_instance=100)},
    "inference-component": {
        "inference_component": InferenceComponentProps(max_copies=2, target_invocations_per_copy=10)
    },
    "inference-component-to-zero": {
        "inference_component": InferenceComponentProps(min_copies=0, max_copies=2, target_invocations_per_copy=10)
    },
    "async": {"async_inference": AsyncInferenceProps(max_instances=2)},
}


def with_dashboard(**props: Any) -> tuple[SageMakerEndpoint, dict[str, Any]]:
    """The endpoint of `props` with every alarm AlarmProps sets and its dashboard, synthesized."""
    stack = Stack()
    endpoint = helpers.endpoint(stack, **{"alarms": AlarmProps(latency_ms=800), **props})
    ServiceDashboard(stack, "Dashboard", rows=endpoint.dashboard_widgets())
    return endpoint, dict(Template.from_stack(stack).to_json())


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("instance_type", ["ml.g5.xlarge", "ml.g5.12xlarge"])
def test_every_metric_is_one_the_mode_publishes(mode: str, instance_type: str) -> None:
    _, template = with_dashboard(instance_type=instance_type, **MODES[mode])
    assert problems(template) == []


def test_a_cpu_endpoint_graphs_no_gpu() -> None:
    _, template = with_dashboard(instance_type="ml.c6i.xlarge", **MODES["realtime"])
    assert problems(template) == []


def test_async_rolls_back_on_the_failures_async_endpoints_publish() -> None:
    """Fault 1: async endpoints publish no InvocationModelErrors (async-inference-monitor.html), so
    an alarm on it never fires and a broken update is never rolled back; InvocationFailures counts
    every request that failed."""
    endpoint, template = with_dashboard(**MODES["async"])
    (errors,) = [a for a in endpoint.rollback_alarms if a.node.id == "ModelErrorsAlarm"]
    resource = errors.node.default_child
    assert isinstance(resource, CfnResource)
    alarm = template["Resources"][Stack.of(endpoint).get_logical_id(resource)]["Properties"]
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (
        "AWS/SageMaker",
        "InvocationFailures",
        "Sum",
    )
    assert {d["Name"] for d in alarm["Dimensions"]} == {"EndpointName", "VariantName"}
    assert catalog.find("AWS/SageMaker", "InvocationFailures", {"EndpointName", "VariantName"}, mode="async",
                        kind_="gpu") is not None  # fmt: skip
    config = next(iter(Template.from_json(template).find_resources("AWS::SageMaker::Endpoint").values()))
    rollback = config["Properties"]["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]
    assert {"AlarmName": alarm["AlarmName"]} in rollback


@pytest.mark.parametrize(
    ("instance_type", "gpus"), [("ml.g5.xlarge", 1), ("ml.g5.12xlarge", 4), ("ml.p4d.24xlarge", 8)]
)
def test_gpu_memory_threshold_counts_every_gpu(instance_type: str, gpus: int) -> None:
    """Fault 2: GPUMemoryUtilization is 0-100 multiplied by the number of GPUs
    (monitoring-cloudwatch.html): 95% of the memory of 4 GPUs is 380."""
    _, template = with_dashboard(instance_type=instance_type, alarms=AlarmProps(gpu_memory_percent=95))
    (alarm,) = [
        r["Properties"] for r in template["Resources"].values()
        if r["Type"] == "AWS::CloudWatch::Alarm" and r["Properties"].get("MetricName") == "GPUMemoryUtilization"
    ]  # fmt: skip
    assert alarm["Threshold"] == 95 * gpus
    assert f"95% of the memory of its {gpus} GPU" in alarm["AlarmDescription"]


def test_overhead_latency_is_graphed_with_the_statistics_it_has() -> None:
    """Fault 7: OverheadLatency lists Average, Sum, Min, Max and Sample Count, no percentiles."""
    _, template = with_dashboard(**MODES["realtime"])
    assert [p for p in problems(template) if "OverheadLatency" in p] == []
    body = str(Template.from_json(template).find_resources("AWS::CloudWatch::Dashboard"))
    assert "OverheadLatency" in body


def test_the_checker_refuses_what_a_mode_does_not_publish() -> None:
    """The check itself: an alarm on InvocationModelErrors of an async endpoint, a percentile of
    OverheadLatency, and a GPU memory threshold above what 1 GPU reaches are each reported."""
    stack = Stack()
    endpoint = helpers.endpoint(stack, **MODES["async"])
    endpoint.metric_invocation_model_errors().create_alarm(stack, "Errors", threshold=1, evaluation_periods=1)
    endpoint.metric_overhead_latency(statistic="p99").create_alarm(stack, "Overhead", threshold=1, evaluation_periods=1)
    endpoint.metric_gpu_memory_utilization().create_alarm(stack, "Memory", threshold=380, evaluation_periods=1)
    found = problems(dict(Template.from_stack(stack).to_json()))
    assert any("InvocationModelErrors" in p and "not published in async mode" in p for p in found), found
    assert any("OverheadLatency" in p for p in found), found
    assert any("threshold 380" in p and "0 to 100" in p for p in found), found


# --- the catalog itself ---------------------------------------------------------------------------


def test_async_publishes_only_what_its_page_lists() -> None:
    names = {m.name for m in catalog.published("async", "gpu")}
    # "Any metric not listed below is not published if the endpoint is enabled for asynchronous inference."
    assert not names & {"OverheadLatency", "Invocations", "InvocationsPerInstance", "InvocationModelErrors"}
    assert {"InvocationFailures", "ApproximateBacklogSizePerInstance", "HasBacklogWithoutCapacity"} <= names
    (latency,) = [m for m in catalog.published("async", "gpu") if m.name == "ModelLatency"]
    assert not latency.valid_statistic("p99") and latency.valid_statistic("Maximum")


def test_gpu_metrics_only_on_gpus_and_their_range_counts_them() -> None:
    for kind in ("cpu", "inferentia"):
        assert not {m.name for m in catalog.published("realtime", kind)} & {"GPUUtilization", "GPUMemoryUtilization"}
    memory = catalog.find("/aws/sagemaker/Endpoints", "GPUMemoryUtilization", {"EndpointName", "VariantName"},
                          mode="realtime", kind_="gpu")  # fmt: skip
    assert memory is not None
    assert catalog.value_range(memory, "ml.g5.12xlarge") == (0.0, 400.0)
    assert catalog.value_range(memory, "ml.p5.48xlarge") == (0.0, 800.0)
    cpu = catalog.find("/aws/sagemaker/Endpoints", "CPUUtilization", {"EndpointName", "VariantName"},
                       mode="async", kind_="gpu")  # fmt: skip
    assert cpu is not None and catalog.value_range(cpu, "ml.g5.12xlarge") == (0.0, 4800.0)


def test_component_invocations_are_per_component() -> None:
    assert catalog.find("AWS/SageMaker", "Invocations", {"InferenceComponentName"}, mode="inference-component",
                        kind_="gpu") is not None  # fmt: skip
    assert catalog.find("AWS/SageMaker", "Invocations", {"EndpointName", "VariantName"}, mode="inference-component",
                        kind_="gpu") is None  # fmt: skip
    assert catalog.kind("ml.inf2.xlarge") == "inferentia" and catalog.kind("ml.c6i.xlarge") == "cpu"


def test_every_entry_names_its_page_and_what_a_datum_is() -> None:
    for m in catalog.CATALOG:
        assert m.url.startswith("https://docs.aws.amazon.com/sagemaker/") and m.datum, m
        assert m.modes <= set(catalog.MODES) and m.kinds <= set(catalog.KINDS), m


# --- fault 3: the vLLM engine's pressure, from SageMaker's detailed observability ------------------


#: AWS's vLLM image for SageMaker (its repository is ``vllm``).
VLLM_IMAGE = "111122223333.dkr.ecr.eu-west-1.amazonaws.com/vllm:0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker"


def test_the_checker_refuses_a_framework_metric_of_another_container() -> None:
    """The engine's queue is published for a vLLM (or SGLang) container alone: on another, the
    PromQL alarm would match nothing and never fire."""
    stack = Stack()
    helpers.endpoint(stack, alarms=AlarmProps(waiting_requests=1))
    (found,) = problems(dict(Template.from_stack(stack).to_json()))
    assert "is no detailed-observability metric of a realtime endpoint serving with None" in found


def promql_alarms(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        r["Properties"] for r in template["Resources"].values()
        if r["Type"] == "AWS::CloudWatch::Alarm" and "EvaluationCriteria" in r["Properties"]
    ]  # fmt: skip


@pytest.mark.parametrize("mode", ["realtime", "inference-component"])
def test_a_vllm_endpoint_alarms_on_requests_waiting_in_its_engine(mode: str) -> None:
    """Fault 3: vLLM reserves gpu_memory_utilization of the GPU at start, so GPUMemoryUtilization
    stays there whatever the load and an alarm on it says nothing; what shows the engine's
    pressure is its queue, vllm:num_requests_waiting, which SageMaker's detailed observability
    publishes for real-time endpoints (queried with PromQL: a PromQL alarm)."""
    stack = Stack()
    endpoint = helpers.endpoint(
        stack,
        **MODES[mode],
        image_uri=VLLM_IMAGE,
        alarms=AlarmProps(gpu_memory_percent=None, waiting_requests=1, evaluation_periods=5),
    )
    template = dict(Template.from_stack(stack).to_json())
    assert problems(template) == []
    (alarm,) = promql_alarms(template)
    criteria = alarm["EvaluationCriteria"]["PromQLCriteria"]
    query = json.dumps(stack.resolve(criteria["Query"]))
    assert "vllm[:_]num_requests_waiting" in query and "'aws.sagemaker.endpoint.name'" in query
    assert query.rstrip('"').endswith(">= 1") or '>= 1"' in query
    assert (mode == "inference-component") == ("'aws.sagemaker.inference_component.name'" in query)
    # Waiting through the whole window (5 periods of 60 s) before ALARM, evaluated every period.
    assert (criteria["PendingPeriod"], alarm["EvaluationInterval"]) == (300, 60)
    assert alarm not in [r for r in endpoint.rollback_alarms]  # capacity: it notifies, it does not roll back
    (config,) = Template.from_stack(stack).find_resources("AWS::SageMaker::EndpointConfig").values()
    assert config["Properties"]["MetricsConfig"] == {"EnableDetailedObservability": True}
    assert not [
        r for r in template["Resources"].values()
        if r["Type"] == "AWS::CloudWatch::Alarm" and r["Properties"].get("MetricName") == "GPUMemoryUtilization"
    ]  # fmt: skip


def test_async_has_no_detailed_observability_to_alarm_on() -> None:
    """Detailed observability covers real-time endpoints (its page): an async endpoint's queue is
    ApproximateBacklogSize, which its scaling tracks."""
    from llm_inference_cdk import PropError, SageMakerEndpointProps

    with pytest.raises(PropError, match=r"waiting_requests=1 is invalid: allowed is unset in async mode"):
        SageMakerEndpointProps(instance_type="ml.g5.xlarge", alarms=AlarmProps(waiting_requests=1), **MODES["async"])
