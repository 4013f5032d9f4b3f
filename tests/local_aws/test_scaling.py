"""SageMaker's side of scaling and of its metrics on the local AWS, with the echo image: a
component at zero copies and back, an asynchronous endpoint at zero instances whose queue waits
for one, and what SageMaker publishes of the instances and invocations (local_aws/sagemaker/:
scaling.py, metrics.py; local_aws/sagemaker/runtime.py)."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any

import pytest

from local_aws import LocalAws
from local_aws.sagemaker.errors import NO_CAPACITY
from tests.local_aws.helpers import (
    client,
    component_stack,
    create_stack,
    delete_stack,
    echo_config,
    echo_endpoint,
    endpoint_named,
    endpoint_status,
    error_of,
    physical_ids,
)

INVOCATIONS = "AWS/SageMaker"


def data(aws: LocalAws, namespace: str, name: str, dimensions: dict[str, str], stat: str = "Sum") -> list[float]:
    """The metric's values, one per minute with data, oldest first, over the last ten minutes of
    the clock."""
    now = aws.clock.now()
    query = {"Id": "q", "MetricStat": {"Metric": {"Namespace": namespace, "MetricName": name, "Dimensions": [
        {"Name": k, "Value": v} for k, v in dimensions.items()]}, "Period": 60, "Stat": stat}}  # fmt: skip
    (result,) = client(aws, "cloudwatch").get_metric_data(
        MetricDataQueries=[query],
        StartTime=now - timedelta(minutes=10),
        EndTime=now + timedelta(minutes=1),
        ScanBy="TimestampAscending",
    )["MetricDataResults"]
    return list(result["Values"])


def until(check: Any, timeout_s: float = 60) -> Any:
    """What `check` found once it found something; a failure after a generous `timeout_s` for
    what the runtime does within a second or two here."""
    deadline = time.monotonic() + timeout_s  # clock: a generous wait, whose expiry only fails a hung runtime
    while not (found := check()):
        assert time.monotonic() < deadline, "the runtime did not settle"  # clock: the same wait
        time.sleep(0.1)
    return found


def test_a_component_at_zero_copies_answers_no_capacity_until_one_is_back(aws: LocalAws) -> None:
    aws.reset()
    create_stack(aws, "ic", component_stack("1"))
    sm, runtime = client(aws, "sagemaker"), client(aws, "sagemaker-runtime")
    endpoint = endpoint_named(aws, physical_ids(aws, "ic")["Endpoint"])

    def copies(count: int) -> dict[str, Any]:
        sm.update_inference_component_runtime_config(InferenceComponentName="echo-ic",
                                                     DesiredRuntimeConfig={"CopyCount": count})  # fmt: skip

        def settled() -> dict[str, Any] | None:
            described = sm.describe_inference_component(InferenceComponentName="echo-ic")
            return described if described["InferenceComponentStatus"] == "InService" else None

        return dict(until(settled)["RuntimeConfig"])

    def invoke() -> Any:
        return runtime.invoke_endpoint(EndpointName=endpoint, InferenceComponentName="echo-ic", Body=b"{}")

    try:
        assert copies(0) == {"DesiredCopyCount": 0, "CurrentCopyCount": 0}
        with pytest.raises(Exception, match="ValidationError") as refused:
            invoke()
        assert refused.value.response["Error"]["Message"] == NO_CAPACITY  # type: ignore[attr-defined]
        assert data(aws, INVOCATIONS, "NoCapacityInvocationFailures", {"InferenceComponentName": "echo-ic"}) == [1.0]
        assert copies(2) == {"DesiredCopyCount": 2, "CurrentCopyCount": 2}
        assert json.loads(invoke()["Body"].read())["version"] == "1"
        # Per copy: each invocation counts 1/copies.
        per_copy = data(aws, INVOCATIONS, "InvocationsPerCopy", {"InferenceComponentName": "echo-ic"})
        assert per_copy == [0.5]
    finally:
        delete_stack(aws, "ic")


def test_an_async_endpoint_at_zero_instances_queues_until_one_starts(aws: LocalAws) -> None:
    aws.reset()
    s3, sm, runtime = client(aws, "s3"), client(aws, "sagemaker"), client(aws, "sagemaker-runtime")
    s3.create_bucket(Bucket="answers")
    echo_config(aws, "queued-config")
    config = sm.describe_endpoint_config(EndpointConfigName="queued-config")
    sm.delete_endpoint_config(EndpointConfigName="queued-config")
    sm.create_endpoint_config(
        EndpointConfigName="queued-config", ProductionVariants=config["ProductionVariants"],
        AsyncInferenceConfig={"OutputConfig": {"S3OutputPath": "s3://answers/output"}},
    )  # fmt: skip
    sm.create_endpoint(EndpointName="queued", EndpointConfigName="queued-config")
    assert endpoint_status(aws, "queued", settle=True) == "InService"

    def instances(count: int) -> None:
        wanted = [{"VariantName": "AllTraffic", "DesiredInstanceCount": count}]
        sm.update_endpoint_weights_and_capacities(EndpointName="queued", DesiredWeightsAndCapacities=wanted)
        endpoint_status(aws, "queued", settle=True)

    instances(0)
    (variant,) = sm.describe_endpoint(EndpointName="queued")["ProductionVariants"]
    assert (variant["DesiredInstanceCount"], variant["CurrentInstanceCount"]) == (0, 0)
    queued = runtime.invoke_endpoint_async(
        EndpointName="queued", Body=b'{"queued": true}', ContentType="application/json"
    )
    aws.clock.advance(60)
    endpoint = {"EndpointName": "queued"}
    assert data(aws, INVOCATIONS, "HasBacklogWithoutCapacity", endpoint, "Maximum") == [1.0]
    assert data(aws, INVOCATIONS, "ApproximateBacklogSize", endpoint, "Maximum") == [1.0]
    bucket, key = queued["OutputLocation"].removeprefix("s3://").split("/", 1)
    assert error_of(lambda: s3.get_object(Bucket=bucket, Key=key)) == "NoSuchKey"
    instances(1)
    answer = until(lambda: error_of(lambda: s3.get_object(Bucket=bucket, Key=key)) is None, 30)
    assert answer
    assert json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())["body"] == '{"queued": true}'
    variant_dims = {"EndpointName": "queued", "VariantName": "AllTraffic"}
    assert data(aws, INVOCATIONS, "InvocationsProcesssed", variant_dims) == [1.0]
    aws.clock.advance(60)
    assert data(aws, INVOCATIONS, "HasBacklogWithoutCapacity", endpoint, "Maximum")[-1] == 0.0
    # An async endpoint publishes no Invocations (its monitoring page lists all it publishes).
    assert data(aws, INVOCATIONS, "Invocations", variant_dims) == []


def test_instances_report_their_use_and_an_idle_minute_its_zeros(aws: LocalAws) -> None:
    aws.reset()
    echo_endpoint(aws, "used")
    assert endpoint_status(aws, "used", settle=True) == "InService"
    runtime = client(aws, "sagemaker-runtime")
    runtime.invoke_endpoint(EndpointName="used", Body=json.dumps({"sleep_s": 0.2}).encode())
    aws.clock.advance(60)  # the minute with the invocation
    aws.clock.advance(60)  # an idle one
    variant = {"EndpointName": "used", "VariantName": "AllTraffic"}
    assert data(aws, INVOCATIONS, "Invocations", variant) == [1.0, 0.0]
    assert data(aws, INVOCATIONS, "InvocationsPerInstance", variant) == [1.0, 0.0]
    (latency,) = data(aws, INVOCATIONS, "ModelLatency", variant, "Average")
    # In microseconds: at least the container's 0.2 s, below the 60 s any answered invocation
    # takes (SageMaker's limit; a figure in nanoseconds would be 1000 times too large).
    assert 200_000 <= latency < 60_000_000
    for name in ("CPUUtilization", "MemoryUtilization", "DiskUtilization"):
        values = data(aws, "/aws/sagemaker/Endpoints", name, variant, "Average")
        assert len(values) == 2 and all(0 <= v < 100 for v in values), (name, values)
    assert data(aws, "/aws/sagemaker/Endpoints", "MemoryUtilization", variant, "Average")[0] > 0


def test_a_streamed_invocation_is_measured_to_its_end(aws: LocalAws) -> None:
    aws.reset()
    echo_endpoint(aws, "streamed")
    assert endpoint_status(aws, "streamed", settle=True) == "InService"
    request = {"parts": ["a", "b", "c"], "part_delay_s": 0.2}
    answer = client(aws, "sagemaker-runtime").invoke_endpoint_with_response_stream(
        EndpointName="streamed", Body=json.dumps(request).encode()
    )
    assert b"".join(e["PayloadPart"]["Bytes"] for e in answer["Body"] if "PayloadPart" in e) == b"abc"
    variant = {"EndpointName": "streamed", "VariantName": "AllTraffic"}
    (latency,) = until(lambda: data(aws, INVOCATIONS, "ModelLatency", variant, "Maximum"), 10)
    assert latency >= 400_000  # the parts' delays, in microseconds
    assert data(aws, INVOCATIONS, "InvocationModelErrors", variant) == [0.0]
