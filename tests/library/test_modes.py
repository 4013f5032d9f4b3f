"""The endpoint's three modes in a bare ``Stack()``: an inference component that scales to
zero and back, and asynchronous inference into the endpoint's own bucket and topics."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Match, Template

from llm_inference_cdk import (
    AlarmProps,
    AsyncInferenceProps,
    AutoscalingProps,
    InferenceComponentProps,
    PropError,
    SageMakerEndpoint,
    SageMakerEndpointProps,
)
from tests.library import helpers


def synthesized(**props: Any) -> tuple[Stack, SageMakerEndpoint, Template]:
    return helpers.synthesized(**{"instance_type": "ml.g5.2xlarge", "alarms": AlarmProps(latency_ms=800), **props})


def built(**props: Any) -> tuple[Stack, SageMakerEndpoint]:
    return helpers.built(**{"instance_type": "ml.g5.2xlarge", "alarms": AlarmProps(latency_ms=800), **props})


def component(**props: Any) -> InferenceComponentProps:
    return InferenceComponentProps(**{"max_copies": 2, "target_invocations_per_copy": 10, **props})


def only(template: Template, kind: str) -> dict[str, Any]:
    (resource,) = template.find_resources(kind).values()
    return resource["Properties"]  # type: ignore[no-any-return]


def statements(template: Template) -> list[dict[str, Any]]:
    return [
        s
        for p in template.find_resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]


# --- inference component ----------------------------------------------------------------------


def test_a_component_that_scales_to_zero_and_back() -> None:
    stack, made, template = synthesized(
        inference_component=component(min_copies=0, accelerators=1, cpu_cores=4, memory_mb=16_384)
    )
    config = only(template, "AWS::SageMaker::EndpointConfig")
    (variant,) = config["ProductionVariants"]
    # The variant names no model: the component carries it; the config names the role.
    assert "ModelName" not in variant
    # Up to one instance per copy, and one more for the new copy of a rolling update.
    assert variant["ManagedInstanceScaling"] == {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 3}
    assert variant["InitialInstanceCount"] == 1  # SageMaker creates no endpoint of zero instances
    assert variant["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    assert "ExecutionRoleArn" in config
    ic = only(template, "AWS::SageMaker::InferenceComponent")
    assert ic["Specification"]["ComputeResourceRequirements"] == {
        "NumberOfAcceleratorDevicesRequired": 1,
        "NumberOfCpuCoresRequired": 4,
        "MinMemoryRequiredInMb": 16_384,
    }
    assert ic["RuntimeConfig"] == {"CopyCount": 1}
    assert ic["InferenceComponentName"] == made.component_name
    # Copies scale between 0 and 2 on invocations per copy...
    target = only(template, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert target["ScalableDimension"] == "sagemaker:inference-component:DesiredCopyCount"
    assert target["ResourceId"] == f"inference-component/{made.component_name}"
    assert (target["MinCapacity"], target["MaxCapacity"]) == (0, 2)
    policies = {p["Properties"]["PolicyType"]: p["Properties"] for p in template.find_resources(
        "AWS::ApplicationAutoScaling::ScalingPolicy").values()}  # fmt: skip
    tracking = policies["TargetTrackingScaling"]["TargetTrackingScalingPolicyConfiguration"]
    assert tracking["PredefinedMetricSpecification"]["PredefinedMetricType"] == (
        "SageMakerInferenceComponentInvocationsPerCopy"
    )
    assert tracking["TargetValue"] == 10
    # ...and a request that finds no copy trips the alarm whose action adds one.
    step = policies["StepScaling"]["StepScalingPolicyConfiguration"]
    assert step["StepAdjustments"] == [{"ScalingAdjustment": 1, "MetricIntervalLowerBound": 0}]
    alarms = [a["Properties"] for a in template.find_resources("AWS::CloudWatch::Alarm").values()]
    (back,) = [a for a in alarms if a["MetricName"] == "NoCapacityInvocationFailures"]
    assert back["Dimensions"] == [{"Name": "InferenceComponentName", "Value": made.component_name}]
    (action,) = back["AlarmActions"]
    (step_id,) = [
        k
        for k, v in template.find_resources("AWS::ApplicationAutoScaling::ScalingPolicy").items()
        if v["Properties"]["PolicyType"] == "StepScaling"
    ]
    assert action == {"Ref": step_id}
    assert stack.resolve(made.scalable_target.ref) == {"Ref": next(iter(template.find_resources(  # type: ignore[union-attr]
        "AWS::ApplicationAutoScaling::ScalableTarget")))}  # fmt: skip


def test_a_component_that_keeps_a_copy_has_no_way_back_from_zero() -> None:
    _, _, template = synthesized(inference_component=component(min_copies=1))
    variant = only(template, "AWS::SageMaker::EndpointConfig")["ProductionVariants"][0]
    assert variant["ManagedInstanceScaling"]["MinInstanceCount"] == 1
    template.resource_properties_count_is(
        "AWS::CloudWatch::Alarm", Match.object_like({"MetricName": "NoCapacityInvocationFailures"}), 0
    )
    template.resource_properties_count_is(
        "AWS::ApplicationAutoScaling::ScalingPolicy", Match.object_like({"PolicyType": "StepScaling"}), 0
    )


def test_component_updates_roll_copy_by_copy_on_the_endpoints_alarms() -> None:
    _, made, template = synthesized(inference_component=component())
    ic = only(template, "AWS::SageMaker::InferenceComponent")
    policy = ic["DeploymentConfig"]["RollingUpdatePolicy"]
    # The deployment's rolling batch (25 percent: one copy of up to four), within SageMaker's 5 to 50.
    assert policy["MaximumBatchSize"] == {"Type": "CAPACITY_PERCENT", "Value": 25}
    names = [a["AlarmName"] for a in ic["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]]
    assert len(names) == len(made.rollback_alarms) == 3
    # The endpoint itself takes no update policy: the component's rolls the model.
    assert "DeploymentConfig" not in only(template, "AWS::SageMaker::Endpoint")
    # The rollback check reads the component's model, after the component.
    calls = [r for r in template.find_resources("Custom::AWS").values()]
    (check,) = calls
    create = json.dumps(check["Properties"]["Create"])
    assert "describeInferenceComponent" in create and "Specification.ModelName" in create


def test_component_metrics_and_invocations_are_the_components() -> None:
    stack, made = built(inference_component=component())
    latency = made.metric_model_latency()
    assert stack.resolve(latency.dimensions) == {"InferenceComponentName": made.component_name}
    user = iam.Role(stack, "Caller", assumed_by=iam.AccountRootPrincipal())
    made.grant_invoke(user)
    template = Template.from_stack(stack)
    (grant,) = [s for s in statements(template) if s["Action"] == "sagemaker:InvokeEndpoint"]
    # The ARNs SageMaker reports (it lower-cases names in its ARNs; IAM compares them as written).
    endpoint_id = stack.resolve(made.endpoint_arn)["Ref"]
    component_id = stack.resolve(made.inference_component.ref)["Ref"]  # type: ignore[union-attr]
    assert grant["Resource"] == [{"Ref": endpoint_id}, {"Fn::GetAtt": [component_id, "InferenceComponentArn"]}]


SCALING = AutoscalingProps(min_capacity=1, max_capacity=2, target_invocations_per_instance=10)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"inference_component": component(accelerators=2)},
            "accelerators=2 is invalid: allowed is at most 1: each copy must fit on one ml.g5.2xlarge",
        ),
        ({"inference_component": component(cpu_cores=9)}, "cpu_cores=9 is invalid: allowed is at most 8"),
        ({"inference_component": component(memory_mb=40_000)}, "memory_mb=40000 is invalid: allowed is at most 32768"),
        ({"inference_component": component(), "autoscaling": SCALING}, "unset in inference-component mode"),
        ({"async_inference": AsyncInferenceProps(max_instances=2), "autoscaling": SCALING}, "unset in async mode"),
        (
            {"inference_component": component(), "async_inference": AsyncInferenceProps(max_instances=2)},
            "an endpoint has one mode",
        ),
        (
            {"inference_component": component(), "initial_instance_count": 5},
            "initial_instance_count=5 is invalid: allowed is between inference_component.min_instances (1) and its "
            "max_instances (3)",
        ),
        (
            {"async_inference": AsyncInferenceProps(max_instances=2), "instance_type": "ml.t2.medium"},
            "SageMaker does not autoscale t2/t3",
        ),
    ],
    ids=["gpus", "cpus", "memory", "ic-autoscaling", "async-autoscaling", "two-modes", "ic-count", "async-t2"],
)
def test_a_component_that_cannot_fit_or_a_second_mode_is_refused(given: dict[str, Any], message: str) -> None:
    with pytest.raises(PropError) as refused:
        SageMakerEndpointProps(**{"instance_type": "ml.g5.2xlarge", **given})
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("asks", "message"),
    [
        # 4 GPUs hold four copies of one; 48 vCPUs only two copies of 24 cores.
        (
            {"cpu_cores": 24},
            "max_instances=1 is invalid: allowed is at least 2: 4 copies take 2 ml.g5.12xlarge, 2 to an instance (each "
            "asks for 1 of its 4 GPUs, 24 of its 48 vCPUs and 8192 of its 196608 MiB of memory)",
        ),
        # 192 GiB hold one copy of 100 GiB.
        ({"memory_mb": 102_400}, "max_instances=1 is invalid: allowed is at least 4: 4 copies take 4 ml.g5.12xlarge"),
    ],
    ids=["cpus", "memory"],
)
def test_copies_an_instance_holds_count_what_a_copy_asks_for(asks: dict[str, Any], message: str) -> None:
    """Issue 38: the instances a component's copies need were counted by its GPUs alone
    (instance GPUs // accelerators), so copies whose CPU cores or memory two of them could not
    share on one instance passed with room for too few instances, and the copies beyond it never
    got placed."""
    props = {"accelerators": 1, "cpu_cores": 2, "memory_mb": 8192, "max_copies": 4, "max_instances": 1, **asks}
    with pytest.raises(PropError) as refused:
        SageMakerEndpointProps(instance_type="ml.g5.12xlarge", inference_component=component(**props))
    assert str(refused.value).startswith(f"InferenceComponentProps: {message}"), refused.value
    assert "\n" not in str(refused.value)
    # What four copies of one GPU, 2 cores and 8 GiB fit: one instance.
    SageMakerEndpointProps(instance_type="ml.g5.12xlarge", inference_component=component(**{**props, **{
        "cpu_cores": 2, "memory_mb": 8192}}))  # fmt: skip


def test_component_props_refuse_bounds_that_contradict() -> None:
    with pytest.raises(PropError, match=r"max_copies=1 is invalid: allowed is at least min_copies \(2\)"):
        component(min_copies=2, max_copies=1)
    with pytest.raises(PropError, match="min_instances=0 is invalid"):
        component(min_copies=1, min_instances=0)


# --- async ------------------------------------------------------------------------------------


def test_async_answers_into_its_own_bucket_and_topics_and_scales_to_zero() -> None:
    _, made, template = synthesized(async_inference=AsyncInferenceProps(max_instances=3))
    config = only(template, "AWS::SageMaker::EndpointConfig")
    output = config["AsyncInferenceConfig"]["OutputConfig"]
    assert json.dumps(output["S3OutputPath"]).count("/output/") == 1
    assert json.dumps(output["S3FailurePath"]).count("/failure/") == 1
    assert set(output["NotificationConfig"]) == {"SuccessTopic", "ErrorTopic"}
    assert made.async_output is not None
    bucket = template.find_resources("AWS::S3::Bucket")
    (props,) = [b["Properties"] for b in bucket.values()]
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": "AES256"
    }
    assert props["PublicAccessBlockConfiguration"]["RestrictPublicBuckets"] is True
    for topic in template.find_resources("AWS::SNS::Topic").values():
        assert "KmsMasterKeyId" in topic["Properties"]
    target = only(template, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert (target["MinCapacity"], target["MaxCapacity"]) == (0, 3)
    assert target["ScalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    metrics = {a["Properties"]["MetricName"] for a in template.find_resources("AWS::CloudWatch::Alarm").values()}
    assert "HasBacklogWithoutCapacity" in metrics
    tracking = [
        p["Properties"]["TargetTrackingScalingPolicyConfiguration"]
        for p in template.find_resources("AWS::ApplicationAutoScaling::ScalingPolicy").values()
        if p["Properties"]["PolicyType"] == "TargetTrackingScaling"
    ]
    assert tracking[0]["CustomizedMetricSpecification"]["MetricName"] == "ApproximateBacklogSizePerInstance"
    # The endpoint keeps its update policy in async mode (SageMaker excludes only Marketplace
    # containers and Inf1 from guardrails).
    assert "DeploymentConfig" in only(template, "AWS::SageMaker::Endpoint")


def test_async_grants_submit_and_reading_results_to_whom_the_user_names() -> None:
    stack, made = built(async_inference=AsyncInferenceProps(max_instances=1))
    caller = iam.Role(stack, "Caller", assumed_by=iam.AccountRootPrincipal())
    reader = iam.Role(stack, "Reader", assumed_by=iam.AccountRootPrincipal())
    made.grant_invoke(caller)
    made.grant_read_results(reader)
    template = Template.from_stack(stack)
    by_role: dict[str, list[dict[str, Any]]] = {}
    for policy in template.find_resources("AWS::IAM::Policy").values():
        for role in policy["Properties"]["Roles"]:
            by_role.setdefault(role["Ref"], []).extend(policy["Properties"]["PolicyDocument"]["Statement"])
    caller_id, reader_id = (stack.resolve(r.role_name)["Ref"] for r in (caller, reader))
    caller_actions = sorted(a for s in by_role[caller_id] for a in [s["Action"]])
    assert caller_actions == ["s3:PutObject", "sagemaker:InvokeEndpointAsync"]
    (put,) = [s for s in by_role[caller_id] if s["Action"] == "s3:PutObject"]
    assert "/input/*" in json.dumps(put["Resource"])
    listing, read = by_role[reader_id]
    # Listing the two prefixes: a poll of an answer not written yet is a 404, not a 403.
    assert listing["Action"] == "s3:ListBucket"
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["output/*", "failure/*"]}}
    assert read["Action"] == "s3:GetObject"
    assert "/output/*" in json.dumps(read["Resource"]) and "/failure/*" in json.dumps(read["Resource"])
    assert "/input/" not in json.dumps(read["Resource"])


def test_results_of_a_realtime_endpoint_are_refused() -> None:
    stack, made = built()
    with pytest.raises(ValueError, match="only an async endpoint has results to read"):
        made.grant_read_results(iam.Role(stack, "R", assumed_by=iam.AccountRootPrincipal()))


def test_async_topics_say_they_carry_answers_not_alarms() -> None:
    """Issue 29, fault 7: the topics SageMaker announces each answer and failure on were
    described and displayed as the stack's alarm topics ("LLM inference alarms"), which a
    subscriber could not tell apart."""
    _, _, template = synthesized(async_inference=AsyncInferenceProps(max_instances=2))
    names = sorted(t["Properties"]["DisplayName"] for t in template.find_resources("AWS::SNS::Topic").values())
    assert names == ["LLM inference: async answers", "LLM inference: async failures"]
    keys = sorted(k["Properties"]["Description"] for k in template.find_resources("AWS::KMS::Key").values())
    assert not [k for k in keys if "alarm" in k.lower()], keys
    assert "Encrypts the notices of this endpoint's answers" in keys


# --- every mode -------------------------------------------------------------------------------


def _arn(value: Any) -> str:
    """An ARN CloudFormation joins, its references written ${Name}."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return "${" + value["Ref"] + "}"
    separator, parts = value["Fn::Join"]
    return str(separator).join(_arn(part) for part in parts)


#: Each mode, and the log group prefix its containers write to: an endpoint's under
#: /aws/sagemaker/Endpoints/<endpoint name>, an inference component's under
#: /aws/sagemaker/InferenceComponents/<component name>.
MODE_LOGS = {
    "realtime": ({}, "/aws/sagemaker/Endpoints"),
    "inference-component": ({"inference_component": component()}, "/aws/sagemaker/InferenceComponents"),
    "async": ({"async_inference": AsyncInferenceProps(max_instances=2)}, "/aws/sagemaker/Endpoints"),
}


@pytest.mark.parametrize("mode", list(MODE_LOGS))
def test_the_role_writes_the_log_group_of_its_mode_and_no_other(mode: str) -> None:
    """Issue 38: an inference component's container writes to its own log group,
    /aws/sagemaker/InferenceComponents/<component name>, while the execution role allowed the logs
    actions only under /aws/sagemaker/Endpoints/*, so a component's logs were denied. The role gets
    the actions SageMaker's "CreateModel API: Execution Role Permissions" lists, on the groups (and
    their streams) of its mode alone."""
    props, prefix = MODE_LOGS[mode]
    stack, made, template = synthesized(**props)
    role = stack.resolve(made.role.role_name)
    granted = [
        s
        for p in template.find_resources("AWS::IAM::Policy").values()
        if role in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    logs = [s for s in granted if "logs:" in json.dumps(s["Action"])]
    assert [sorted(s["Action"]) for s in logs] == [
        ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"]
    ]
    group = f"arn:${{AWS::Partition}}:logs:${{AWS::Region}}:${{AWS::AccountId}}:log-group:{prefix}/*"
    assert [_arn(r) for r in logs[0]["Resource"]] == [group, f"{group}:log-stream:*"]
    (metrics,) = [s for s in granted if s["Action"] == "cloudwatch:PutMetricData"]
    assert metrics["Resource"] == "*" and metrics["Condition"] == {
        "StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}
    }
