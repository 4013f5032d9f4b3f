"""Inputs: what AWS refuses in a request is refused, with AWS's error, both when CloudFormation
creates a resource and when the API is called directly (the checks: local_aws/validation/;
the reference: docs/LOCAL_AWS_INPUTS.md)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from moto.applicationautoscaling.responses import ApplicationAutoScalingResponse
from moto.cloudformation import parsing as cfn_parsing
from moto.cloudformation.exceptions import ValidationError as CloudFormationValidationError
from moto.cloudwatch.responses import CloudWatchResponse
from moto.core.parse import PROTOCOL_PARSERS
from moto.core.request import determine_request_protocol
from moto.core.utils import get_service_model
from moto.ec2.responses import EC2Response
from moto.iam.responses import IamResponse
from moto.kms.responses import KmsResponse
from moto.logs.responses import LogsResponse
from moto.sagemaker.responses import SageMakerResponse
from moto.sns.responses import SNSResponse
from moto.ssm.responses import SimpleSystemManagerResponse

from local_aws.patches.base import patch, replace
from local_aws.validation.base import Rejected
from local_aws.validation.cloudformation import REQUESTS, check_resource, made_by_the_emulator
from local_aws.validation.model import check_request

#: How CloudFormation names each service in a failed resource's reason.
_SERVICE_NAMES = {
    "ec2": "AmazonEC2",
    "sagemaker": "AmazonSageMaker",
    "sns": "AmazonSNS",
    "kms": "AWSKMS",
    "cloudwatch": "AmazonCloudWatch",
    "iam": "AmazonIdentityManagement",
    "logs": "AWSLogs",
    "application-autoscaling": "AWSApplicationAutoScaling",
    "ssm": "AWSSimpleSystemsManagement",
}


def resource_failure_reason(service: str, refused: Rejected) -> str:
    """A failed resource's status reason as CloudFormation writes the error of a service call
    (the form aws-cloudformation/cfn-lint#173 quotes): AWS's message, then its code."""
    return (
        f"{refused.message} (Service: {_SERVICE_NAMES.get(service, service)}; Status Code: 400; "
        f"Error Code: {refused.code}; Request ID: {uuid.uuid4()}; Proxy: null)"
    )


class ResourceFailed(CloudFormationValidationError):
    """A resource whose request the service refused: its status reason is the error alone (a
    CreateStack that meets it outside a change set answers ValidationError, as moto does for
    other failures there)."""

    def __str__(self) -> str:
        return str(self.message)


@patch(
    """A resource whose properties AWS would refuse fails: each resource type these stacks create
    is turned into the requests CloudFormation makes (CreateModel, CreateEndpointConfig,
    CreateSecurityGroup and AuthorizeSecurityGroupEgress, CreateTopic, CreateKey,
    PutMetricAlarm, ...), each checked against the service's botocore model (required members,
    types, lengths, ranges, patterns, enums) and the constraints AWS documents beyond it
    (security-group and rule descriptions, topic names, key deletion windows, log retention
    days, EC2 tag lengths); the first refusal fails the resource with AWS's message and code,
    and the stack rolls back. Stock moto creates whatever the template says: an apostrophe in a
    rule description, a variant name with a space, an alarm with an unknown comparison operator
    all deploy."""
)
def resource_properties_are_validated() -> None:
    original = cfn_parsing.parse_resource_and_generate_name

    def parse_resource_and_generate_name(logical_id: str, resource_json: dict[str, Any], resources_map: Any) -> Any:
        parsed = original(logical_id, resource_json, resources_map)
        if not parsed and resource_json.get("Type") not in REQUESTS:
            return parsed
        # A checked type moto lacks (None: it skips the resource) is still checked, resolved.
        resolved = parsed[1] if parsed else cfn_parsing.clean_json(resource_json, resources_map)
        properties = made_by_the_emulator(
            resource_json.get("Properties") or {},
            resolved.get("Properties") or {},
            set(resources_map._resource_json_map),
        )
        refused = check_resource(resolved["Type"], properties)
        if refused is not None:
            (service, _, _), error = refused
            raise ResourceFailed(logical_id, resource_failure_reason(service, error))
        return parsed

    replace(cfn_parsing, "parse_resource_and_generate_name", parse_resource_and_generate_name)


def _request_parameters(response: Any) -> dict[str, Any]:
    """The request's parameters as botocore's model names them."""
    if response.automated_parameter_parsing:
        return dict(response.params)
    service_model = get_service_model(response.boto3_service_name)
    request = response.normalized_request
    protocol = determine_request_protocol(service_model, request.content_type)
    if protocol == "json":
        return dict(json.loads(response.body or "{}"))
    operation = service_model.operation_model(response._get_action())
    parser = PROTOCOL_PARSERS[protocol](operation, map_type=dict)
    parsed = parser.parse(
        {
            "method": request.method,
            "values": request.values,
            "headers": request.headers,
            "body": request.data,
            "url_path": request.path,
            "url_params": getattr(response, "uri_match", None) or {},
        }
    )
    return dict(parsed)


#: The API calls checked: response class, its method, the service and the operation.
CHECKED_CALLS: list[tuple[type[Any], str, str, str]] = [
    (EC2Response, "create_security_group", "ec2", "CreateSecurityGroup"),
    (EC2Response, "authorize_security_group_egress", "ec2", "AuthorizeSecurityGroupEgress"),
    (EC2Response, "authorize_security_group_ingress", "ec2", "AuthorizeSecurityGroupIngress"),
    (SageMakerResponse, "create_model", "sagemaker", "CreateModel"),
    (SageMakerResponse, "create_endpoint_config", "sagemaker", "CreateEndpointConfig"),
    (SageMakerResponse, "create_endpoint", "sagemaker", "CreateEndpoint"),
    (SNSResponse, "create_topic", "sns", "CreateTopic"),
    (KmsResponse, "create_key", "kms", "CreateKey"),
    (KmsResponse, "enable_key_rotation", "kms", "EnableKeyRotation"),
    (KmsResponse, "schedule_key_deletion", "kms", "ScheduleKeyDeletion"),
    (CloudWatchResponse, "put_metric_alarm", "cloudwatch", "PutMetricAlarm"),
    (CloudWatchResponse, "put_dashboard", "cloudwatch", "PutDashboard"),
    (IamResponse, "create_role", "iam", "CreateRole"),
    (IamResponse, "put_role_policy", "iam", "PutRolePolicy"),
    (LogsResponse, "create_log_group", "logs", "CreateLogGroup"),
    (LogsResponse, "put_retention_policy", "logs", "PutRetentionPolicy"),
    (ApplicationAutoScalingResponse, "register_scalable_target", "application-autoscaling", "RegisterScalableTarget"),
    (ApplicationAutoScalingResponse, "put_scaling_policy", "application-autoscaling", "PutScalingPolicy"),
    (SimpleSystemManagerResponse, "put_parameter", "ssm", "PutParameter"),
]


def refuse_invalid(response: Any, service: str, operation: str) -> None:
    """Raise AWS's error for the request moto's ``response`` is handling if AWS would refuse it:
    for the calls that moto lacks and a patch adds (CreateInferenceComponent), which the patch
    calls first."""
    refused = check_request(service, operation, _request_parameters(response))
    if refused is not None:
        raise refused


def _checked(method: Callable[[Any], Any], service: str, operation: str) -> Callable[[Any], Any]:
    def checked(self: Any) -> Any:
        refuse_invalid(self, service, operation)
        return method(self)

    return checked


@patch(
    """A direct API call AWS would refuse is refused with AWS's error code and message: the same
    checks as for CloudFormation's resources, on the request as received (an apostrophe in a
    rule description given to AuthorizeSecurityGroupEgress answers InvalidParameterValue; a
    SageMaker model name with a space, ValidationException). Stock moto checks almost nothing
    beyond what boto3 itself checks (types, required members, minimum lengths)."""
)
def api_requests_are_validated() -> None:
    for owner, method, service, operation in CHECKED_CALLS:
        replace(owner, method, _checked(getattr(owner, method), service, operation))
