"""IAM: roles with the managed policies their template names; callers with credentials of
sts:AssumeRole evaluated as their role (S3, EC2 and SageMaker requests)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote

import xmltodict
from moto.core.authorization import ActionAuthenticatorMixin
from moto.core.exceptions import _RESTError
from moto.iam.models import Role, iam_backends
from moto.s3.exceptions import S3ClientError
from moto.s3.models import s3_backends
from moto.utilities.utils import get_partition

from local_aws.patches.base import patch, replace, wrap_create
from local_aws.policies import Caller, Decision, assumed_role_caller, evaluate, first_denial
from local_aws.sagemaker.arns import sagemaker_arn
from local_aws.sagemaker.errors import ApiAccessDenied


def _sync_managed_policies(role: Any, properties: dict[str, Any], account_id: str, region_name: str) -> None:
    arns = properties.get("ManagedPolicyArns", [])
    iam = iam_backends[account_id][get_partition(region_name)]
    for arn in set(role.managed_policies) - set(arns):
        iam.detach_role_policy(arn, role.name)
    for arn in arns:
        if arn not in role.managed_policies:
            iam.attach_role_policy(arn, role.name)


@patch(
    """AWS::IAM::Role attaches the managed policies of ManagedPolicyArns (and detaches them
    before the role is deleted or when they leave the list). Stock moto ignores the
    property: the role lacks e.g. AmazonSSMManagedInstanceCore."""
)
def role_managed_policies_are_attached() -> None:
    wrap_create(Role, fix=_sync_managed_policies)
    update = Role.update_from_cloudformation_json.__func__  # type: ignore[attr-defined]
    delete = Role.delete_from_cloudformation_json.__func__  # type: ignore[attr-defined]

    def update_role(
        cls: Any, /, original_resource: Any, new_resource_name: str, cloudformation_json: dict[str, Any],
        account_id: str, region_name: str,
    ) -> Any:  # fmt: skip
        role = update(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name)
        _sync_managed_policies(role, cloudformation_json["Properties"], account_id, region_name)
        return role

    def delete_role(
        cls: Any, /, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str
    ) -> None:
        iam = iam_backends[account_id][get_partition(region_name)]
        for role in list(iam.roles.values()):
            if role.name == resource_name:
                _sync_managed_policies(role, {}, account_id, region_name)
        delete(cls, resource_name, cloudformation_json, account_id, region_name)

    replace(Role, "update_from_cloudformation_json", classmethod(update_role))
    replace(Role, "delete_from_cloudformation_json", classmethod(delete_role))


# moto's names of S3 requests that IAM authorizes under another action (Amazon S3 User Guide,
# "Amazon S3 policy actions by API operation"); the others are IAM's names already.
_S3_ACTIONS = {
    "HeadBucket": "ListBucket",
    "GetPublicAccessBlock": "GetBucketPublicAccessBlock",
    "PutPublicAccessBlock": "PutBucketPublicAccessBlock",
    "DeletePublicAccessBlock": "PutBucketPublicAccessBlock",
}


def s3_context(querystring: Mapping[str, Any]) -> dict[str, str]:
    """The S3 condition keys of a request that the stacks' grants use (s3:prefix of a listing)."""
    prefix = querystring.get("prefix")
    if isinstance(prefix, list):
        prefix = prefix[0] if prefix else None
    return {} if prefix is None else {"s3:prefix": str(prefix)}


@patch(
    """S3 requests signed with credentials of sts:AssumeRole are evaluated as that role:
    its identity-based policies and the bucket's policy, AWS's evaluation logic
    (local_aws/policies.py); a denied one answers 403 AccessDenied with IAM's reason. Stock
    moto evaluates nothing unless its IAM authentication is switched on for every caller, and
    then matches Action and Resource alone."""
)
def assumed_roles_are_evaluated_by_s3() -> None:
    stock = ActionAuthenticatorMixin._authenticate_and_authorize_s3_action

    def authorize(self: Any, bucket_name: str | None = None, key_name: str | None = None) -> None:
        caller = assumed_role_caller(self.headers, self.current_account, self.region)
        if caller is None:
            stock(self, bucket_name=bucket_name, key_name=key_name)
            return
        action = f"s3:{_S3_ACTIONS.get(self.data.get('Action', ''), self.data.get('Action', ''))}"
        checks = [(action, bucket_name, key_name)]
        if action == "s3:DeleteObject" and key_name is None:  # DeleteObjects: each key its own
            checks = [(action, bucket_name, key) for key in _keys_to_delete(self.body)]
        source = self.headers.get("x-amz-copy-source")
        if source and action == "s3:PutObject":  # CopyObject, UploadPartCopy: the source is read
            source_bucket, _, source_key = unquote(str(source).split("?")[0]).lstrip("/").partition("/")
            checks.append(("s3:GetObject", source_bucket, source_key))
        context = s3_context(self.querystring)
        account, region = self.current_account, self.region
        decision = first_denial(_s3_decision(caller, *check, account, region, context) for check in checks)
        if not decision.allowed:
            raise S3ClientError("AccessDenied", decision.message)

    replace(ActionAuthenticatorMixin, "_authenticate_and_authorize_s3_action", authorize)


def _s3_decision(
    caller: Caller, action: str, bucket_name: str | None, key_name: str | None, account: str, region: str,
    context: Mapping[str, str],
) -> Decision:  # fmt: skip
    partition = get_partition(region)
    resource = f"arn:{partition}:s3:::{bucket_name or '*'}" + (f"/{key_name}" if key_name else "")
    bucket = s3_backends[account][partition].buckets.get(bucket_name or "")
    policy = bucket.policy.decode() if bucket is not None and bucket.policy else None
    return evaluate(caller, action, resource, resource_policy=policy, context=context)


def _keys_to_delete(body: bytes | str) -> list[str]:
    """The keys of a DeleteObjects request (S3 decides s3:DeleteObject on each object)."""
    objects = xmltodict.parse(body, strip_whitespace=False).get("Delete", {}).get("Object", [])
    return [str(o["Key"]) for o in (objects if isinstance(objects, list) else [objects])]


# --- Other services' calls by assumed roles -------------------------------------------------------


class UnauthorizedOperation(_RESTError):
    """EC2's refusal of a call the caller's policies do not allow (HTTP 403)."""

    code = 403

    def __init__(self, message: str) -> None:
        super().__init__("UnauthorizedOperation", f"You are not authorized to perform this operation. {message}")


def _group_arn(response: Any) -> str:
    partition, region, account = get_partition(response.region), response.region, response.current_account
    return f"arn:{partition}:ec2:{region}:{account}:security-group/{response._get_param('GroupId')}"


def _sagemaker_arn(kind: str, parameter: str) -> Callable[[Any], str]:
    def arn(response: Any) -> str:
        return sagemaker_arn(kind, str(response._get_param(parameter)), response.current_account, response.region)

    return arn


_GROUP_ACTIONS = (
    "AuthorizeSecurityGroupIngress", "AuthorizeSecurityGroupEgress",
    "RevokeSecurityGroupIngress", "RevokeSecurityGroupEgress",
)  # fmt: skip
#: The resource each evaluated action is on (service authorization reference); "*" for the others.
_RESOURCES: dict[tuple[str, str], Callable[[Any], str]] = {
    **{("ec2", action): _group_arn for action in _GROUP_ACTIONS},
    ("sagemaker", "DescribeEndpoint"): _sagemaker_arn("endpoint", "EndpointName"),
    ("sagemaker", "DescribeEndpointConfig"): _sagemaker_arn("endpoint-config", "EndpointConfigName"),
    ("sagemaker", "DescribeInferenceComponent"): _sagemaker_arn("inference-component", "InferenceComponentName"),
    ("sagemaker", "DescribeModel"): _sagemaker_arn("model", "ModelName"),
}
#: How each service refuses a call its caller may not make.
_DENIED: dict[str, Callable[[str], Exception]] = {
    "ec2": UnauthorizedOperation,
    "sagemaker": ApiAccessDenied,
}


@patch(
    """EC2 and SageMaker requests signed with credentials of sts:AssumeRole (a Lambda function's
    among them) are evaluated as that role, on the resource the action names in the Service
    Authorization Reference (a security group's rules, an endpoint's, endpoint config's, inference
    component's or model's description; "*" for the others): EC2 refuses with UnauthorizedOperation
    (HTTP 403), SageMaker with AccessDeniedException, each with IAM's reason. Stock moto evaluates
    nothing unless its IAM authentication is switched on for every caller."""
)
def assumed_roles_are_evaluated_by_ec2_and_sagemaker() -> None:
    stock = ActionAuthenticatorMixin._authenticate_and_authorize_normal_action

    def authorize(self: Any, resource: str = "*") -> None:
        service = str(getattr(self, "service_name", ""))
        caller = assumed_role_caller(self.headers, self.current_account, self.region) if service in _DENIED else None
        if caller is None:
            stock(self, resource)
            return
        action = self._get_action()
        arn = _RESOURCES.get((service, action), lambda _: "*")(self)
        decision = evaluate(caller, f"{service}:{action}", arn)
        if not decision.allowed:
            raise _DENIED[service](decision.message)

    replace(ActionAuthenticatorMixin, "_authenticate_and_authorize_normal_action", authorize)
