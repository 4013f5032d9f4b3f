"""CloudFormation resources as the API requests CloudFormation makes to create them: each
resource type these stacks create, its properties resolved and typed as the requests carry them,
then checked as the service checks the request (local_aws.validation.model)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import regex
from botocore.model import Shape

from local_aws.validation.base import UNRESOLVED, Rejected, Unresolved
from local_aws.validation.documented import rules_of
from local_aws.validation.model import check_request, operation_model

#: What a request is: (service, operation, parameters), as boto3 would send it.
Request = tuple[str, str, dict[str, Any]]

#: The name CloudFormation generates when a template names nothing: its generator is not
#: moto's (moto's can be longer than AWS allows), so a stand-in that every name rule accepts.
GENERATED_NAME = "generated-by-cloudformation"
#: An id CloudFormation knows once an earlier call of the resource answered.
_EARLIER_ID = "id-from-an-earlier-call"


def _is_intrinsic(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)).startswith(("Fn::", "Ref"))


def _holds_unresolved(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_holds_unresolved(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_unresolved(v) for v in value)
    return isinstance(value, Unresolved)


def _scalar(kind: str, value: Any) -> Any:
    if kind in ("integer", "long") and isinstance(value, str) and regex.fullmatch(r"-?\d+", value):
        return int(value)
    if kind in ("float", "double") and isinstance(value, str) and regex.fullmatch(r"-?\d+(\.\d*)?", value):
        return float(value)
    if kind in ("float", "double") and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind == "boolean" and isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if kind == "string" and isinstance(value, dict | list):
        # A policy or a dashboard given as an object; one that names another resource is left
        # to the service (its text is not what the template says).
        return UNRESOLVED if _holds_unresolved(value) else json.dumps(value)
    if kind == "string" and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


def coerce(shape: Shape, value: Any) -> Any:
    """A CloudFormation property value as the API request carries it: numbers and booleans from
    the strings CloudFormation passes, JSON documents as text, members the request does not have
    dropped (the resource's schema, not the API, decides about them), unresolved values marked."""
    if _is_intrinsic(value):
        return UNRESOLVED
    kind = shape.type_name
    if kind == "structure" and isinstance(value, dict):
        members = shape.members
        return {k: coerce(members[k], v) for k, v in value.items() if k in members}
    if kind == "list" and isinstance(value, list):
        return [coerce(shape.member, v) for v in value]
    if kind == "map" and isinstance(value, dict):
        return {k: coerce(shape.value, v) for k, v in value.items()}
    return _scalar(kind, value)


def _refers_to(node: Any, resources: set[str]) -> bool:
    """Whether a template fragment reads what a resource of `resources` made (Ref, Fn::GetAtt,
    or ${Resource} in Fn::Sub)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "Fn::GetAtt" or (key == "Ref" and value in resources):
                return True
            if key == "Fn::Sub":
                text = value[0] if isinstance(value, list) else value
                named = {m.split(".")[0] for m in regex.findall(r"\$\{([^}!]+)\}", str(text))}
                if named & resources:
                    return True
            if _refers_to(value, resources):
                return True
    elif isinstance(node, list):
        return any(_refers_to(item, resources) for item in node)
    return False


def made_by_the_emulator(template_value: Any, resolved: Any, resources: set[str]) -> Any:
    """`resolved`, with each value that came from another resource (a name or id moto made up,
    which AWS would have made valid) marked unresolved: only what the template itself says, and
    its parameters, is checked."""
    if _is_intrinsic(template_value) and _refers_to(template_value, resources):
        return UNRESOLVED
    if isinstance(template_value, dict) and isinstance(resolved, dict):
        return {k: made_by_the_emulator(template_value.get(k), v, resources) for k, v in resolved.items()}
    if isinstance(template_value, list) and isinstance(resolved, list):
        if len(template_value) != len(resolved):  # Fn::If with AWS::NoValue dropped an item
            return UNRESOLVED if _refers_to(template_value, resources) else resolved
        return [made_by_the_emulator(t, r, resources) for t, r in zip(template_value, resolved, strict=True)]
    return resolved


def _rule(rule: dict[str, Any]) -> dict[str, Any]:
    """A SecurityGroupIngress/Egress rule of CloudFormation as EC2's IpPermission."""
    described = {"Description": rule["Description"]} if "Description" in rule else {}
    permission: dict[str, Any] = {k: rule[k] for k in ("IpProtocol", "FromPort", "ToPort") if k in rule}
    if "CidrIp" in rule:
        permission["IpRanges"] = [{"CidrIp": rule["CidrIp"], **described}]
    if "CidrIpv6" in rule:
        permission["Ipv6Ranges"] = [{"CidrIpv6": rule["CidrIpv6"], **described}]
    for key in ("DestinationPrefixListId", "SourcePrefixListId"):
        if key in rule:
            permission["PrefixListIds"] = [{"PrefixListId": rule[key], **described}]
    for key in ("DestinationSecurityGroupId", "SourceSecurityGroupId"):
        if key in rule:
            permission["UserIdGroupPairs"] = [{"GroupId": rule[key], **described}]
    return permission


def _tags(props: dict[str, Any], key: str = "Key", value: str = "Value") -> list[dict[str, Any]]:
    return [{key: t.get("Key"), value: t.get("Value")} for t in props.get("Tags", []) if isinstance(t, dict)]


def _pick(props: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: props[k] for k in keys if k in props}


def _named(props: dict[str, Any], prop: str) -> Any:
    return props.get(prop, GENERATED_NAME)


def _sagemaker(operation: str, name: str, *, drop: tuple[str, ...] = ()) -> Callable[[dict[str, Any]], list[Request]]:
    def requests(props: dict[str, Any]) -> list[Request]:
        params = {k: v for k, v in props.items() if k not in drop}
        return [("sagemaker", operation, {**params, name: _named(props, name)})]

    return requests


def _security_group(props: dict[str, Any]) -> list[Request]:
    create = {
        "GroupName": _named(props, "GroupName"),
        "Description": props.get("GroupDescription"),
        **({"VpcId": props["VpcId"]} if "VpcId" in props else {}),
    }
    if props.get("Tags"):
        create["TagSpecifications"] = [{"ResourceType": "security-group", "Tags": _tags(props)}]
    made: list[Request] = [("ec2", "CreateSecurityGroup", create)]
    for prop, operation in (
        ("SecurityGroupEgress", "AuthorizeSecurityGroupEgress"),
        ("SecurityGroupIngress", "AuthorizeSecurityGroupIngress"),
    ):
        rules = rules_of(props.get(prop))
        if rules:
            made.append(("ec2", operation, {"GroupId": _EARLIER_ID, "IpPermissions": [_rule(r) for r in rules]}))
    return made


def _security_group_rule(operation: str) -> Callable[[dict[str, Any]], list[Request]]:
    def requests(props: dict[str, Any]) -> list[Request]:
        group = _pick(props, "GroupId", "GroupName")
        return [("ec2", operation, {**group, "IpPermissions": [_rule(props)]})]

    return requests


def _topic(props: dict[str, Any]) -> list[Request]:
    attributes = _pick(props, "DisplayName", "KmsMasterKeyId", "FifoTopic", "SignatureVersion", "TracingConfig",
                       "ContentBasedDeduplication")  # fmt: skip
    params: dict[str, Any] = {"Name": _named(props, "TopicName"), "Tags": _tags(props)}
    if attributes:
        params["Attributes"] = {k: str(v).lower() if isinstance(v, bool) else v for k, v in attributes.items()}
    return [("sns", "CreateTopic", params)]


def _key(props: dict[str, Any]) -> list[Request]:
    create = _pick(props, "Description", "KeyUsage", "KeySpec", "Origin", "MultiRegion")
    if "KeyPolicy" in props:
        create["Policy"] = props["KeyPolicy"]
    if props.get("BypassPolicyLockoutSafetyCheck") is not None:
        create["BypassPolicyLockoutSafetyCheck"] = props["BypassPolicyLockoutSafetyCheck"]
    made: list[Request] = [("kms", "CreateKey", {**create, "Tags": _tags(props, "TagKey", "TagValue")})]
    if str(props.get("EnableKeyRotation")).lower() == "true":
        rotation = _pick(props, "RotationPeriodInDays")
        made.append(("kms", "EnableKeyRotation", {"KeyId": _EARLIER_ID, **rotation}))
    if "PendingWindowInDays" in props:
        # Used when the stack deletes the key: a value KMS refuses fails that deletion, so
        # CloudFormation's schema refuses it at creation (7-30).
        window = props["PendingWindowInDays"]
        made.append(("kms", "ScheduleKeyDeletion", {"KeyId": _EARLIER_ID, "PendingWindowInDays": window}))
    return made


def _alarm(props: dict[str, Any]) -> list[Request]:
    return [("cloudwatch", "PutMetricAlarm", {**props, "AlarmName": _named(props, "AlarmName")})]


def _dashboard(props: dict[str, Any]) -> list[Request]:
    return [("cloudwatch", "PutDashboard", {**props, "DashboardName": _named(props, "DashboardName")})]


def _role(props: dict[str, Any]) -> list[Request]:
    name = _named(props, "RoleName")
    create = _pick(
        props, "AssumeRolePolicyDocument", "Description", "MaxSessionDuration", "Path", "PermissionsBoundary"
    )
    made: list[Request] = [("iam", "CreateRole", {**create, "RoleName": name, "Tags": _tags(props)})]
    for policy in props.get("Policies", []):
        made.append(("iam", "PutRolePolicy", {"RoleName": name, **policy}))
    return made


def _policy(props: dict[str, Any]) -> list[Request]:
    document = {k: props.get(k) for k in ("PolicyName", "PolicyDocument")}
    return [("iam", "PutRolePolicy", {"RoleName": role, **document}) for role in props.get("Roles", [])]


def _log_group(props: dict[str, Any]) -> list[Request]:
    name = _named(props, "LogGroupName")
    create = {"logGroupName": name, **({"kmsKeyId": props["KmsKeyId"]} if "KmsKeyId" in props else {})}
    made: list[Request] = [("logs", "CreateLogGroup", create)]
    if "RetentionInDays" in props:
        made.append(("logs", "PutRetentionPolicy", {"logGroupName": name, "retentionInDays": props["RetentionInDays"]}))
    return made


def _scalable_target(props: dict[str, Any]) -> list[Request]:
    keys = ("ServiceNamespace", "ResourceId", "ScalableDimension", "MinCapacity", "MaxCapacity", "RoleARN")
    return [("application-autoscaling", "RegisterScalableTarget", _pick(props, *keys))]


def _scaling_policy(props: dict[str, Any]) -> list[Request]:
    params = {k: v for k, v in props.items() if k != "ScalingTargetId"}
    if "ScalingTargetId" in props:
        # The target names the scaled resource, which the target's own request was checked for.
        params = {"ServiceNamespace": "sagemaker", "ResourceId": _EARLIER_ID, "ScalableDimension":
                  "sagemaker:variant:DesiredInstanceCount", **params}  # fmt: skip
    return [("application-autoscaling", "PutScalingPolicy", params)]


def _parameter(props: dict[str, Any]) -> list[Request]:
    keys = ("Name", "Description", "Value", "Type", "AllowedPattern", "Tier", "Policies", "DataType")
    params = _pick(props, *keys)
    tags = props.get("Tags") or {}
    if isinstance(tags, dict) and tags:
        params["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]
    return [("ssm", "PutParameter", {"Name": GENERATED_NAME, **params})]


#: The requests CloudFormation makes for each resource type these stacks create (others pass
#: unchecked: docs/LOCAL_AWS_INPUTS.md lists them).
REQUESTS: dict[str, Callable[[dict[str, Any]], list[Request]]] = {
    "AWS::SageMaker::Model": _sagemaker("CreateModel", "ModelName"),
    "AWS::SageMaker::EndpointConfig": _sagemaker("CreateEndpointConfig", "EndpointConfigName"),
    "AWS::SageMaker::Endpoint": _sagemaker("CreateEndpoint", "EndpointName"),
    "AWS::SageMaker::InferenceComponent": _sagemaker(
        "CreateInferenceComponent", "InferenceComponentName", drop=("DeploymentConfig",)
    ),
    "AWS::EC2::SecurityGroup": _security_group,
    "AWS::EC2::SecurityGroupEgress": _security_group_rule("AuthorizeSecurityGroupEgress"),
    "AWS::EC2::SecurityGroupIngress": _security_group_rule("AuthorizeSecurityGroupIngress"),
    "AWS::SNS::Topic": _topic,
    "AWS::KMS::Key": _key,
    "AWS::CloudWatch::Alarm": _alarm,
    "AWS::CloudWatch::Dashboard": _dashboard,
    "AWS::IAM::Role": _role,
    "AWS::IAM::Policy": _policy,
    "AWS::Logs::LogGroup": _log_group,
    "AWS::ApplicationAutoScaling::ScalableTarget": _scalable_target,
    "AWS::ApplicationAutoScaling::ScalingPolicy": _scaling_policy,
    "AWS::SSM::Parameter": _parameter,
}


def requests_of(resource_type: str, properties: dict[str, Any]) -> list[Request]:
    """The API requests CloudFormation makes to create a resource of `resource_type`, with the
    properties coerced as the requests carry them."""
    make = REQUESTS.get(resource_type)
    if make is None:
        return []
    return [
        (service, operation, coerce(operation_model(service, operation).input_shape, params))
        for service, operation, params in make(properties)
    ]


def check_resource(resource_type: str, properties: dict[str, Any]) -> tuple[Request, Rejected] | None:
    """The first request of the resource that AWS refuses, with AWS's refusal."""
    for request in requests_of(resource_type, properties):
        refused = check_request(*request)
        if refused is not None:
            return request, refused
    return None


def template_problems(template: dict[str, Any]) -> list[str]:
    """Every resource of a synthesized template whose literal values AWS refuses, as
    '<logical id> <service> <operation>: <AWS's error>' (values CloudFormation resolves at deploy
    time are checked when the local AWS creates the resource)."""
    found = []
    for logical_id, resource in template.get("Resources", {}).items():
        refused = check_resource(resource.get("Type", ""), resource.get("Properties", {}))
        if refused is not None:
            (service, operation, _), error = refused
            found.append(f"{logical_id} {service} {operation}: {error}")
    return found
