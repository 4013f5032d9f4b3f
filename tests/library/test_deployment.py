"""The endpoint's update policy (SageMaker's deployment guardrails) and the check that fails a
CloudFormation update SageMaker rolled back, in a bare ``Stack()``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import ArnFormat, Stack
from aws_cdk.assertions import Template

from llm_inference_cdk import (
    AlarmProps,
    AutoscalingProps,
    DeploymentProps,
    PropError,
    SageMakerEndpoint,
    SageMakerEndpointProps,
)
from tests.library import helpers


def synthesized(**props: Any) -> tuple[Stack, SageMakerEndpoint, Template]:
    return helpers.synthesized(**props)


def alarm_arn(stack: Stack, name: str) -> str:
    return stack.format_arn(
        service="cloudwatch", resource="alarm", resource_name=name, arn_format=ArnFormat.COLON_RESOURCE_NAME
    )


def deployment_config(template: Template) -> dict[str, Any]:
    (endpoint,) = template.find_resources("AWS::SageMaker::Endpoint").values()
    return endpoint["Properties"]["DeploymentConfig"]  # type: ignore[no-any-return]


def test_one_instance_gets_all_at_once_blue_green_rolled_back_on_its_own_alarms() -> None:
    stack, made, template = synthesized(alarms=AlarmProps(latency_ms=800))
    config = deployment_config(template)
    routing = config["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]
    assert routing == {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 600}
    assert config["BlueGreenUpdatePolicy"]["MaximumExecutionTimeoutInSeconds"] == 3600
    names = [a["AlarmName"] for a in config["AutoRollbackConfiguration"]["Alarms"]]
    alarms = {
        a["Properties"]["AlarmName"]: a["Properties"]["MetricName"]
        for a in template.find_resources("AWS::CloudWatch::Alarm").values()
    }
    # The rollback alarms are the stack's own, named as written (no reference: no cycle).
    assert all(isinstance(n, str) for n in names)
    assert sorted(alarms[n] for n in names) == ["Invocation5XXErrors", "InvocationModelErrors", "ModelLatency"]
    assert len(made.rollback_alarms) == 3 and len(made.alarms) == 5
    # The execution role may read those alarms' states, and no others.
    reads = [
        s
        for p in template.find_resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Action"] == "cloudwatch:DescribeAlarms"
    ]
    (read,) = reads
    assert sorted(json.dumps(r) for r in read["Resource"]) == sorted(
        json.dumps(stack.resolve(alarm_arn(stack, n))) for n in names
    )


@pytest.mark.parametrize(
    ("instance_type", "strategy", "policy"),
    [("ml.g5.xlarge", "rolling", "RollingUpdatePolicy"), ("ml.c5.xlarge", "canary", "BlueGreenUpdatePolicy")],
)
def test_a_fleet_defaults_to_rolling_on_accelerators_and_canary_on_cpus(
    instance_type: str, strategy: str, policy: str
) -> None:
    scaling = AutoscalingProps(min_capacity=2, max_capacity=8, target_invocations_per_instance=100)
    _, made, template = synthesized(instance_type=instance_type, autoscaling=scaling, alarms=AlarmProps())
    assert made.deployment_strategy == strategy
    config = deployment_config(template)
    assert set(config) == {policy, "AutoRollbackConfiguration"}
    if strategy == "rolling":
        assert config[policy]["MaximumBatchSize"] == {"Type": "CAPACITY_PERCENT", "Value": 25}
    else:
        assert config[policy]["TrafficRoutingConfiguration"]["CanarySize"] == {"Type": "CAPACITY_PERCENT", "Value": 10}


def test_linear_steps_and_no_rollback_without_alarms() -> None:
    _, _, template = synthesized(
        initial_instance_count=4, deployment=DeploymentProps(strategy="linear", linear_step_percent=20)
    )
    config = deployment_config(template)
    assert "AutoRollbackConfiguration" not in config
    routing = config["BlueGreenUpdatePolicy"]["TrafficRoutingConfiguration"]
    assert routing["Type"] == "LINEAR" and routing["LinearStepSize"] == {"Type": "CAPACITY_PERCENT", "Value": 20}


def test_the_update_check_compares_the_running_config_with_the_templates() -> None:
    stack, made, template = synthesized()
    (parameter,) = template.find_resources("AWS::SSM::Parameter").values()
    config_id = stack.get_logical_id(made.endpoint_config)
    assert parameter["Properties"]["AllowedPattern"] == {
        "Fn::Join": ["", ["^", {"Fn::GetAtt": [config_id, "EndpointConfigName"]}, "$"]]
    }
    (running_id,) = template.find_resources("Custom::AWS")
    assert parameter["Properties"]["Value"] == {"Fn::GetAtt": [running_id, "EndpointConfigName"]}
    running = template.find_resources("Custom::AWS")[running_id]
    # It reads the endpoint after the endpoint's update, and again after each new config.
    assert stack.get_logical_id(made.endpoint) in running["DependsOn"]
    call = json.dumps(running["Properties"]["Update"])
    assert "describeEndpoint" in call and config_id in call
    granted = [
        s
        for p in template.find_resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if "sagemaker:DescribeEndpoint" in json.dumps(s["Action"])
    ]
    # The endpoint's ARN as SageMaker reports it (Ref): its ARNs write the name in lower case.
    assert len(granted) == 1 and granted[0]["Resource"] == stack.resolve(made.endpoint_arn)


def test_the_update_check_can_be_left_out() -> None:
    _, _, template = synthesized(deployment=DeploymentProps(fail_rolled_back_updates=False))
    template.resource_count_is("AWS::SSM::Parameter", 0)
    template.resource_count_is("Custom::AWS", 0)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"deployment": DeploymentProps(strategy="canary")}, r"strategy='canary' is invalid: allowed is all-at-once"),
        (
            {"alarms": AlarmProps(evaluation_periods=20), "deployment": DeploymentProps(wait_interval_s=300)},
            r"wait_interval_s=300 is invalid: allowed is at least the rollback alarms' evaluation window \(1200 s\)",
        ),
    ],
)
def test_an_update_policy_the_variant_cannot_follow_is_refused(given: dict[str, Any], message: str) -> None:
    with pytest.raises(PropError, match=rf"^DeploymentProps: {message}"):
        SageMakerEndpointProps(instance_type="ml.g5.xlarge", **given)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"strategy": "blue"}, r"strategy='blue' is invalid: allowed is one of all-at-once, canary, linear, rolling"),
        ({"wait_interval_s": 3601}, r"wait_interval_s=3601 is invalid: allowed is a whole number from 0 to 3600"),
        ({"canary_percent": 60}, r"canary_percent=60"),
        ({"rolling_batch_percent": 4}, r"rolling_batch_percent=4"),
        (
            {"max_execution_timeout_s": 300},
            r"max_execution_timeout_s=300 is invalid: allowed is a whole number from 600",
        ),
        (
            {"max_execution_timeout_s": 900, "wait_interval_s": 600, "termination_wait_s": 600},
            r"max_execution_timeout_s=900 is invalid: allowed is more than wait_interval_s \+ termination_wait_s",
        ),
    ],
)
def test_each_refused_deployment_prop_names_itself(given: dict[str, Any], message: str) -> None:
    with pytest.raises(PropError, match=rf"^DeploymentProps: {message}"):
        DeploymentProps(**given)


def test_the_update_policy_module_stands_alone_in_a_bare_stack() -> None:
    """deployment.py, beside DeploymentProps, builds the update policy and the check for any
    SageMaker endpoint resource, without a SageMakerEndpoint around it."""
    from aws_cdk import aws_sagemaker as sagemaker

    from llm_inference_cdk.deployment import Watched, endpoint_deployment, fail_rolled_back_updates

    stack = Stack()
    config = sagemaker.CfnEndpointConfig(
        stack,
        "Config",
        production_variants=[{"variantName": "AllTraffic", "modelName": "m", "instanceType": "ml.g5.xlarge"}],
    )
    endpoint = sagemaker.CfnEndpoint(
        stack,
        "Endpoint",
        endpoint_config_name=config.attr_endpoint_config_name,
        deployment_config=endpoint_deployment("canary", DeploymentProps(canary_percent=20), ["my-alarm"]),
    )
    check = fail_rolled_back_updates(
        stack,
        Watched(
            what="endpoint config the endpoint",
            noun="config",
            expected=config.attr_endpoint_config_name,
            action="describeEndpoint",
            parameters={"EndpointName": endpoint.attr_endpoint_name},
            field="EndpointConfigName",
            arn=endpoint.ref,
            resource=endpoint,
        ),
    )
    template = Template.from_stack(stack)
    assert deployment_config(template) == {
        "AutoRollbackConfiguration": {"Alarms": [{"AlarmName": "my-alarm"}]},
        "BlueGreenUpdatePolicy": {
            "MaximumExecutionTimeoutInSeconds": 3600,
            "TerminationWaitInSeconds": 0,
            "TrafficRoutingConfiguration": {
                "CanarySize": {"Type": "CAPACITY_PERCENT", "Value": 20},
                "Type": "CANARY",
                "WaitIntervalInSeconds": 600,
            },
        },
    }
    (config_id,) = template.find_resources("AWS::SageMaker::EndpointConfig")
    (parameter,) = template.find_resources("AWS::SSM::Parameter").values()
    assert parameter["Properties"]["AllowedPattern"] == {
        "Fn::Join": ["", ["^", {"Fn::GetAtt": [config_id, "EndpointConfigName"]}, "$"]]
    }
    # The value is what DescribeEndpoint answers after each update.
    (running_id,) = template.find_resources("Custom::AWS")
    assert parameter["Properties"]["Value"] == {"Fn::GetAtt": [running_id, "EndpointConfigName"]}
    assert stack.resolve(check.parameter_name) == {"Ref": stack.get_logical_id(check.node.default_child)}
    (describe,) = [
        s
        for p in template.find_resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if s["Action"] == "sagemaker:DescribeEndpoint"
    ]
    assert describe["Resource"] == {"Ref": stack.get_logical_id(endpoint)}
