"""An endpoint's update policy and its rolled-back-update check, from :class:`DeploymentProps`
(``endpoint_props``): SageMaker's deployment guardrails (``DeploymentConfig``) on the endpoint,
or on its inference component, and the check that fails a CloudFormation update SageMaker
rolled back (CloudFormation is not documented to notice; README, "Updates")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_ssm as ssm
from aws_cdk import custom_resources as cr
from constructs import Construct

from llm_inference_cdk.endpoint_props import DeploymentProps
from llm_inference_cdk.sdk_calls import function_role


def endpoint_deployment(
    strategy: str, deployment: DeploymentProps, alarm_names: list[str]
) -> sagemaker.CfnEndpoint.DeploymentConfigProperty:
    """The endpoint's DeploymentConfig: `strategy`'s update policy, rolled back on `alarm_names`."""
    rollback = None
    if alarm_names:
        rollback = sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
            alarms=[sagemaker.CfnEndpoint.AlarmProperty(alarm_name=name) for name in alarm_names]
        )
    return sagemaker.CfnEndpoint.DeploymentConfigProperty(
        auto_rollback_configuration=rollback, **update_policy(strategy, deployment)
    )


def update_policy(strategy: str, deployment: DeploymentProps) -> dict[str, Any]:
    """The BlueGreenUpdatePolicy or RollingUpdatePolicy of `strategy` (DeploymentConfig's keys)."""
    percent = sagemaker.CfnEndpoint.CapacitySizeProperty
    if strategy == "rolling":
        return {
            "rolling_update_policy": sagemaker.CfnEndpoint.RollingUpdatePolicyProperty(
                maximum_batch_size=percent(type="CAPACITY_PERCENT", value=deployment.rolling_batch_percent),
                wait_interval_in_seconds=deployment.wait_interval_s,
                maximum_execution_timeout_in_seconds=deployment.max_execution_timeout_s,
            )
        }
    routing = sagemaker.CfnEndpoint.TrafficRoutingConfigProperty(
        type=strategy.upper().replace("-", "_"),
        wait_interval_in_seconds=deployment.wait_interval_s,
        canary_size=percent(type="CAPACITY_PERCENT", value=deployment.canary_percent) if strategy == "canary" else None,
        linear_step_size=percent(type="CAPACITY_PERCENT", value=deployment.linear_step_percent)
        if strategy == "linear"
        else None,
    )
    return {
        "blue_green_update_policy": sagemaker.CfnEndpoint.BlueGreenUpdatePolicyProperty(
            traffic_routing_configuration=routing,
            termination_wait_in_seconds=deployment.termination_wait_s,
            maximum_execution_timeout_in_seconds=deployment.max_execution_timeout_s,
        )
    }


def component_deployment(
    deployment: DeploymentProps, alarm_names: list[str]
) -> sagemaker.CfnInferenceComponent.InferenceComponentDeploymentConfigProperty:
    """A component is updated in rolling batches of `rolling_batch_percent` of its copies (at
    least one; SageMaker takes 5 to 50 percent of the copy count), each baked, rolled back on
    `alarm_names`."""
    ic = sagemaker.CfnInferenceComponent
    return ic.InferenceComponentDeploymentConfigProperty(
        rolling_update_policy=ic.InferenceComponentRollingUpdatePolicyProperty(
            maximum_batch_size=ic.InferenceComponentCapacitySizeProperty(
                type="CAPACITY_PERCENT", value=deployment.rolling_batch_percent
            ),
            wait_interval_in_seconds=deployment.wait_interval_s,
            maximum_execution_timeout_in_seconds=deployment.max_execution_timeout_s,
        ),
        auto_rollback_configuration=ic.AutoRollbackConfigurationProperty(
            alarms=[ic.AlarmProperty(alarm_name=name) for name in alarm_names]
        )
        if alarm_names
        else None,
    )


@dataclass(frozen=True)
class Watched:
    """A resource whose update SageMaker may roll back, and the field that shows it."""

    what: str
    noun: str
    expected: str
    action: str  # the SDK's name of the Describe call
    parameters: dict[str, str]
    field: str
    arn: str
    resource: Construct

    @property
    def iam_action(self) -> str:
        return f"sagemaker:{self.action[0].upper()}{self.action[1:]}"


def fail_rolled_back_updates(scope: Construct, watched: Watched) -> ssm.StringParameter:
    """After each update, read what the endpoint runs (its endpoint config; the model of its
    inference component); an SSM parameter that only accepts what the template asks for
    then fails the update if SageMaker rolled it back, and CloudFormation rolls the stack
    back to what the endpoint runs."""
    role, log_group = function_role(scope, "UpdateCheck", f"Reads the {watched.what} runs after an update")
    describe = cr.AwsSdkCall(
        service="SageMaker",
        action=watched.action,
        parameters=watched.parameters,
        # A new physical id with each new config or model: the call runs after each update.
        physical_resource_id=cr.PhysicalResourceId.of(watched.expected),
        output_paths=[watched.field],
    )
    running = cr.AwsCustomResource(
        scope,
        "RunningConfig",
        on_create=describe,
        on_update=describe,
        policy=cr.AwsCustomResourcePolicy.from_statements(
            [iam.PolicyStatement(actions=[watched.iam_action], resources=[watched.arn])]
        ),
        role=role,
        log_group=log_group,
        install_latest_aws_sdk=False,
    )
    running.node.add_dependency(watched.resource)
    return ssm.StringParameter(
        scope,
        "UpdateCheck",
        description=(
            f"The {watched.what} runs. An update fails here when SageMaker rolled the endpoint back to its "
            f"previous {watched.noun}: the value then does not match the pattern of the {watched.noun} the "
            "template asked for"
        ),
        string_value=running.get_response_field(watched.field),
        allowed_pattern=f"^{watched.expected}$",
    )
