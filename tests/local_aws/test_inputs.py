"""What AWS refuses in a request, the local AWS refuses with AWS's error: direct API calls, and
the resources CloudFormation creates (checks: local_aws/validation/; patch:
local_aws/patches/inputs.py). Each refusal has an accepted twin, so that a check that refused
everything would fail here too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from local_aws import LocalAws, patches
from local_aws.validation.cloudformation import template_problems
from local_aws.validation.documented import EC2_RULE_DESCRIPTION
from local_aws.validation.model import check_request
from tests.local_aws.helpers import (
    Template,
    client,
    deploy_stack,
    error_of,
    failures,
    stack_status,
)

ROLE_ARN = "arn:aws:iam::123456789012:role/sagemaker"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/model:1"
STARTUP = "ContainerStartupHealthCheckTimeoutInSeconds"


def _rule(description: str) -> dict[str, Any]:
    return {"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443,
            "IpRanges": [{"CidrIp": "0.0.0.0/0", "Description": description}]}  # fmt: skip


def _variant(**overrides: Any) -> dict[str, Any]:
    return {"VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "ml.g5.xlarge",
            "InitialInstanceCount": 1, **overrides}  # fmt: skip


# Each call: (service, method, kwargs refused, kwargs accepted, AWS's error code, a part of its message).
CALLS: dict[str, tuple[str, str, dict[str, Any], dict[str, Any], str, str]] = {
    "rule description with an apostrophe": (
        "ec2", "authorize_security_group_egress",
        {"IpPermissions": [_rule("the hub's addresses")]}, {"IpPermissions": [_rule("the hub addresses")]},
        "InvalidParameterValue", "Invalid rule description",
    ),
    "rule description of 256 characters": (
        "ec2", "authorize_security_group_egress",
        {"IpPermissions": [_rule("a" * 256)]}, {"IpPermissions": [_rule("a" * 255)]},
        "InvalidParameterValue", "less than 256 characters",
    ),
    "group description beyond ASCII": (
        "ec2", "create_security_group",
        {"GroupName": "g2", "Description": "model server \u2192 clients"},
        {"GroupName": "g3", "Description": "model server to clients"},
        "InvalidParameterValue", "Character sets beyond ASCII are not supported",
    ),
    "SageMaker model name with a space": (
        "sagemaker", "create_model",
        {"ModelName": "my model", "ExecutionRoleArn": ROLE_ARN, "PrimaryContainer": {"Image": IMAGE}},
        {"ModelName": "my-model", "ExecutionRoleArn": ROLE_ARN, "PrimaryContainer": {"Image": IMAGE}},
        "ValidationException", "at 'modelName' failed to satisfy constraint: Member must satisfy regular expression",
    ),
    "endpoint config startup timeout past 3600 s": (
        "sagemaker", "create_endpoint_config",
        {"EndpointConfigName": "c1", "ProductionVariants": [_variant(**{STARTUP: 3601})]},
        {"EndpointConfigName": "c2", "ProductionVariants": [_variant(**{STARTUP: 3600})]},
        "ValidationException",
        "at 'productionVariants.1.member.containerStartupHealthCheckTimeoutInSeconds' failed to satisfy "
        "constraint: Member must have value less than or equal to 3600",
    ),
    "alarm with an unknown comparison": (
        "cloudwatch", "put_metric_alarm",
        {"AlarmName": "a", "EvaluationPeriods": 1, "ComparisonOperator": "Above", "MetricName": "m",
         "Namespace": "n", "Period": 60, "Statistic": "Sum", "Threshold": 1.0},
        {"AlarmName": "a", "EvaluationPeriods": 1, "ComparisonOperator": "GreaterThanThreshold", "MetricName": "m",
         "Namespace": "n", "Period": 60, "Statistic": "Sum", "Threshold": 1.0},
        "ValidationError", "Member must satisfy enum value set",
    ),
    "log retention of 4 days": (
        "logs", "put_retention_policy", {"logGroupName": "g", "retentionInDays": 4},
        {"logGroupName": "g", "retentionInDays": 5}, "InvalidParameterException", "at 'retentionInDays'",
    ),
    "role name with a space": (
        "iam", "create_role", {"RoleName": "my role", "AssumeRolePolicyDocument": "{}"},
        {"RoleName": "my-role", "AssumeRolePolicyDocument": "{}"}, "ValidationError", "at 'roleName'",
    ),
}  # fmt: skip


def _prepare(aws: LocalAws) -> dict[str, Any]:
    """What the calls refer to: a VPC, a security group, a log group, a SageMaker model."""
    ec2 = client(aws, "ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    group = ec2.create_security_group(GroupName="g", Description="https out", VpcId=vpc)["GroupId"]
    client(aws, "logs").create_log_group(logGroupName="g")
    client(aws, "sagemaker").create_model(ModelName="m", ExecutionRoleArn=ROLE_ARN, PrimaryContainer={"Image": IMAGE})
    return {"vpc": vpc, "group": group}


def _call(aws: LocalAws, service: str, method: str, kwargs: dict[str, Any], made: dict[str, Any]) -> Callable[[], Any]:
    extra = {"GroupId": made["group"]} if method == "authorize_security_group_egress" else {}
    extra = {"VpcId": made["vpc"]} if method == "create_security_group" else extra
    return lambda: getattr(client(aws, service), method)(**kwargs, **extra)


@pytest.mark.parametrize("case", sorted(CALLS))
def test_a_call_aws_refuses_answers_its_error(aws: LocalAws, case: str) -> None:
    service, method, refused, accepted, code, said = CALLS[case]
    aws.reset()
    made = _prepare(aws)
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError) as error:
        _call(aws, service, method, refused, made)()
    assert error.value.response["Error"]["Code"] == code
    assert said in error.value.response["Error"]["Message"]
    assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    aws.reset()
    made = _prepare(aws)
    assert error_of(_call(aws, service, method, accepted, made)) is None
    aws.reset()
    made = _prepare(aws)
    # Stock moto answers what it accepted as it holds it (a role name with a space), off its shape.
    with patches.without("api_requests_are_validated"), patches.without("answers_are_checked_against_their_shapes"):
        assert error_of(_call(aws, service, method, refused, made)) is None, "stock moto accepts it"


def _stack(**resources: dict[str, Any]) -> Template:
    return {"Resources": resources}


def _model(**properties: Any) -> dict[str, Any]:
    container = {"ExecutionRoleArn": ROLE_ARN, "PrimaryContainer": {"Image": IMAGE}}
    return {"Type": "AWS::SageMaker::Model", "Properties": {**container, **properties}}


def test_a_resource_aws_refuses_fails_the_deploy_with_its_error(aws: LocalAws) -> None:
    aws.reset()
    deploy_stack(aws, "stack", _stack(Fine=_model(), Model=_model(ModelName="my model")))
    assert stack_status(aws, "stack") == "ROLLBACK_COMPLETE"
    reason = failures(aws, "stack")["Model"]
    assert reason.startswith(
        "1 validation error detected: Value 'my model' at 'modelName' failed to satisfy constraint: Member must "
        "satisfy regular expression pattern"
    )
    assert "(Service: AmazonSageMaker; Status Code: 400; Error Code: ValidationException;" in reason
    # The rollback deleted what the stack had made.
    assert client(aws, "sagemaker").list_models()["Models"] == []


def test_a_stack_created_with_its_parameters_given_rolls_back_too(aws: LocalAws) -> None:
    # As `cdk bootstrap` creates CDKToolkit: a failure then made the rollback itself fail (HTTP 500).
    aws.reset()
    template = {"Parameters": {"Name": {"Type": "String"}}, **_stack(Model=_model(ModelName={"Ref": "Name"}))}
    given = [{"ParameterKey": "Name", "ParameterValue": "my model"}]
    assert deploy_stack(aws, "stack", template, Parameters=given) is None
    assert stack_status(aws, "stack") == "ROLLBACK_COMPLETE"
    assert "Error Code: ValidationException" in failures(aws, "stack")["Model"]


def test_names_cloudformation_generates_and_resolved_values_are_checked_as_aws_sees_them(aws: LocalAws) -> None:
    # moto generates longer names than CloudFormation (stack-logicalid-suffix, past SageMaker's 63
    # characters here): a template that names nothing is not refused for moto's generator.
    aws.reset()
    long_id = "Model" + "X" * 60
    assert deploy_stack(aws, "stack", _stack(**{long_id: _model()})) is None
    assert stack_status(aws, "stack") == "CREATE_COMPLETE"
    # Nor is a name moto made for one resource when another reads it (a policy of a role whose
    # moto name is past IAM's 64 characters).
    trust = {
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]
    }
    role, role_id = {"Type": "AWS::IAM::Role", "Properties": {"AssumeRolePolicyDocument": trust}}, "Role" + "X" * 60
    # (The policy names the role's ARN: a document that reads another resource is sent as text.)
    statement = {"Effect": "Allow", "Action": "iam:GetRole", "Resource": {"Fn::GetAtt": [role_id, "Arn"]}}
    document = {"Version": "2012-10-17", "Statement": [statement]}
    given = {"PolicyName": "p", "PolicyDocument": document, "Roles": [{"Ref": role_id}]}
    policy = {"Type": "AWS::IAM::Policy", "Properties": given}
    assert deploy_stack(aws, "roles", _stack(**{role_id: role, "Policy": policy})) is None
    assert stack_status(aws, "roles") == "CREATE_COMPLETE", failures(aws, "roles")
    # A value resolved at deploy time is checked once resolved.
    template = {
        "Parameters": {"Name": {"Type": "String", "Default": "my model"}},
        **_stack(Model=_model(ModelName={"Ref": "Name"})),
    }
    deploy_stack(aws, "resolved", template)
    assert "Error Code: ValidationException" in failures(aws, "resolved")["Model"]


def test_synthesized_templates_are_checked_on_their_literal_values() -> None:
    group = {"GroupDescription": "https out", "VpcId": {"Ref": "Vpc"},
             "SecurityGroupEgress": [{"IpProtocol": "tcp", "CidrIp": "0.0.0.0/0", "Description": "it's"}]}  # fmt: skip
    problems = template_problems({"Resources": {"Sg": {"Type": "AWS::EC2::SecurityGroup", "Properties": group}}})
    assert problems == [f"Sg ec2 AuthorizeSecurityGroupEgress: InvalidParameterValue: {EC2_RULE_DESCRIPTION.message}"]
    # An unresolved value (the Ref above, or a description made with Fn::Join) is left to the deploy.
    group["SecurityGroupEgress"][0]["Description"] = {"Fn::Join": ["", ["it", "'s"]]}  # type: ignore[index]
    assert template_problems({"Resources": {"Sg": {"Type": "AWS::EC2::SecurityGroup", "Properties": group}}}) == []


@pytest.mark.parametrize(
    ("request_", "refused"),
    [
        # The model's maximum, which botocore's own validator leaves to the service.
        (("sagemaker", "CreateEndpoint", {"EndpointName": "e" * 64, "EndpointConfigName": "c"}), True),
        (("sagemaker", "CreateEndpoint", {"EndpointName": "e" * 63, "EndpointConfigName": "c"}), False),
        # A documented range narrower than the model's (KMS: 7-30 days; the model says 1-365).
        (("kms", "ScheduleKeyDeletion", {"KeyId": "k", "PendingWindowInDays": 31}), True),
        (("kms", "ScheduleKeyDeletion", {"KeyId": "k", "PendingWindowInDays": 30}), False),
        # A pattern with Java's \p{} classes (SageMaker tag keys).
        (("sagemaker", "CreateModel", {"ModelName": "m", "Tags": [{"Key": "caf\u00e9 #1", "Value": "v"}]}), True),
        (("sagemaker", "CreateModel", {"ModelName": "m", "Tags": [{"Key": "caf\u00e9 1", "Value": "v"}]}), False),
    ],
)
def test_constraints_beyond_botocores_own_validator(request_: tuple[str, str, dict[str, Any]], refused: bool) -> None:
    assert (check_request(*request_) is not None) == refused


def test_create_inference_component_is_checked_as_aws_checks_it(aws: LocalAws) -> None:
    """CreateInferenceComponent, which moto lacks and local_aws/patches/sagemaker.py adds, gets the
    same checks as the calls moto has: a name with a space is refused before anything is looked up;
    the same request with a valid name passes them and is answered by the service itself."""
    from botocore.exceptions import ClientError

    aws.reset()
    sagemaker = client(aws, "sagemaker")
    request = {"EndpointName": "none", "VariantName": "AllTraffic",
               "Specification": {"ModelName": "m", "ComputeResourceRequirements": {"MinMemoryRequiredInMb": 1024}},
               "RuntimeConfig": {"CopyCount": 1}}  # fmt: skip
    with pytest.raises(ClientError) as refused:
        sagemaker.create_inference_component(InferenceComponentName="my component", **request)
    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "at 'inferenceComponentName' failed to satisfy constraint" in refused.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as answered:
        sagemaker.create_inference_component(InferenceComponentName="my-component", **request)
    assert answered.value.response["Error"]["Message"].startswith('Could not find endpoint "arn:aws:sagemaker:')
