"""Lambda-backed custom resources: CloudFormation's side of their protocol, run against the
local AWS's Lambda.

For each Create, Update and Delete, CloudFormation invokes the function the ServiceToken names,
asynchronously, with a request event that carries a ResponseURL (a presigned S3 URL), and waits
for the function to PUT its response there (CloudFormation User Guide, "Custom resources":
request and response objects). Here:

* the event is CloudFormation's: RequestType, ServiceToken, ResponseURL, StackId, RequestId,
  LogicalResourceId, ResourceType, ResourceProperties (every value a string, as CloudFormation
  passes them), PhysicalResourceId (Update, Delete), OldResourceProperties (Update);
* the ResponseURL's host is the one CloudFormation's URLs have
  (``cloudformation-custom-resource-response-<region>.s3.<region>.amazonaws.com``); the local AWS
  answers for it (the function's connections to it are routed there) on a path of its own;
* the response is checked as CloudFormation checks it (a Status of SUCCESS or FAILED, a
  PhysicalResourceId, Data of at most 4096 bytes); FAILED fails the resource with
  ``Received response status [FAILED] from custom resource. Message returned: <Reason>``;
* a Create that failed is followed by a Delete with the physical id of the FAILED response (or
  one CloudFormation makes up), as CloudFormation sends when it rolls the creation back; an
  Update that returns another physical id replaces the resource (the old one gets a Delete after
  the update, from the stack's cleanup);
* CloudFormation waits for the response up to the resource's ServiceTimeout (default 3600 s)
  and fails it with ``CloudFormation did not receive a response from your Custom Resource``.
  What is a choice here: once every attempt of the invocation (Lambda's retries included) has
  ended without a response, nothing can send one any more, and the local AWS fails the resource
  then, naming the invocation's last error (Runtime.ImportModuleError, Sandbox.Timedout, ...),
  instead of waiting out the ServiceTimeout.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import string
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from local_aws.awslambda.functions import FunctionNotFound, find
from local_aws.awslambda.nodejs import RuntimeUnavailable
from local_aws.awslambda.service import AsyncInvocation, lambda_plane
from local_aws.host import HOST

log = logging.getLogger("local_aws.lambda")

#: CloudFormation's limit on a response (its Data and the rest).
MAX_RESPONSE_BYTES = 4096
#: How long CloudFormation waits for a response unless the resource's ServiceTimeout says.
DEFAULT_SERVICE_TIMEOUT_S = 3600
#: The path under which the local AWS takes responses (moto's own route for them).
RESPONSE_PATH = "/cloudformation_{region}/cfnresponse"


def response_host(region: str) -> str:
    """The host of CloudFormation's response URLs in `region` (its response bucket's)."""
    return f"cloudformation-custom-resource-response-{region.replace('-', '')}.s3.{region}.amazonaws.com"


class CustomResourceFailed(Exception):
    """The resource's request failed; the message is CloudFormation's status reason, and
    `physical_id` the one a FAILED response named (None when none came)."""

    def __init__(self, reason: str, physical_id: str | None = None) -> None:
        super().__init__(reason)
        self.physical_id = physical_id


@dataclass
class _Pending:
    arrived: threading.Event
    response: dict[str, Any] | None = None
    problem: str = ""


class Responses:
    """The requests waiting for a response, by RequestId."""

    def __init__(self) -> None:
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.Lock()

    def expect(self, request_id: str) -> _Pending:
        pending = _Pending(threading.Event())
        with self._lock:
            self._pending[request_id] = pending
        return pending

    def forget(self, request_id: str) -> None:
        with self._lock:
            self._pending.pop(request_id, None)

    def deliver(self, body: bytes) -> tuple[int, str]:
        """A response PUT to a response URL: (HTTP status, body) of the answer."""
        try:
            response = json.loads(body)
            request_id = response["RequestId"]
        except (ValueError, KeyError, TypeError):
            return 400, "a custom resource response is a JSON object with the request's RequestId"
        with self._lock:
            pending = self._pending.get(str(request_id))
        if pending is None or pending.arrived.is_set():
            return 403, f"no request {request_id} waits for a response (expired or answered)"
        if len(body) > MAX_RESPONSE_BYTES:
            pending.problem = "Response object is too long."
        elif response.get("Status") not in ("SUCCESS", "FAILED"):
            pending.problem = f"Invalid status in response: {response.get('Status')!r}"
        elif not response.get("PhysicalResourceId"):
            pending.problem = "Invalid PhysicalResourceId"
        pending.response = response
        pending.arrived.set()
        return 200, ""


def responses_plane() -> Responses:
    """The process's custom resource requests waiting for a response (local_aws/host.py):
    request ids are unique over every account, and a response URL names none."""
    return HOST.plane(Responses)


def _as_strings(value: Any) -> Any:
    """Properties as CloudFormation hands them to a custom resource: every scalar a string."""
    if isinstance(value, Mapping):
        return {k: _as_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_strings(v) for v in value]
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


@dataclass(frozen=True)
class Target:
    """The resource a request is about."""

    stack_id: str
    logical_id: str
    resource_type: str
    account: str
    region: str


def request(
    target: Target,
    request_type: str,
    properties: Mapping[str, Any],
    *,
    physical_id: str | None = None,
    old_properties: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Send one request to the resource's function and wait for its response; the response,
    or :class:`CustomResourceFailed` with CloudFormation's reason."""
    token = str(properties.get("ServiceToken", ""))
    if token.split(":")[2:3] == ["sns"]:
        raise CustomResourceFailed(
            f"ServiceToken {token} is an SNS topic: the local AWS runs custom resources backed by a Lambda "
            "function only"
        )
    try:
        function = find(token, target.account, target.region)
        lambda_plane().runtime.check(function)
    except (FunctionNotFound, RuntimeUnavailable) as exc:
        raise CustomResourceFailed(f"The custom resource's function {token} cannot be invoked: {exc}") from exc
    request_id = str(uuid.uuid4())
    region = target.region
    url = (
        f"https://{response_host(region)}{RESPONSE_PATH.format(region=region)}"
        f"?stack={quote(target.stack_id, safe='')}&resource={quote(target.logical_id, safe='')}&request={request_id}"
    )
    event: dict[str, Any] = {
        "RequestType": request_type,
        "ServiceToken": token,
        "ResponseURL": url,
        "StackId": target.stack_id,
        "RequestId": request_id,
        "LogicalResourceId": target.logical_id,
        "ResourceType": target.resource_type,
        "ResourceProperties": _as_strings(properties),
    }
    if physical_id is not None:
        event["PhysicalResourceId"] = physical_id
    if old_properties is not None:
        event["OldResourceProperties"] = _as_strings(old_properties)
    timeout_s = float(properties.get("ServiceTimeout") or DEFAULT_SERVICE_TIMEOUT_S)
    pending = responses_plane().expect(request_id)
    started = time.monotonic()
    try:
        invocation = lambda_plane().invoke_async(function, event)
        response = _wait(pending, invocation, request_id, timeout_s)
        # The handler returns once it has responded: its invocation (its output in its log group,
        # written as its role) is over before CloudFormation goes on, which may delete that role.
        invocation.done.wait(function.timeout_s * (1 + function.async_retries))
    finally:
        responses_plane().forget(request_id)
        # What running the handler costs a deploy (the suite's and the demo's time are measured by it).
        log.info(
            "custom resource %s (%s) %s: %s in %.2f s", target.logical_id, target.resource_type, request_type,
            (pending.response or {}).get("Status", "no response"), time.monotonic() - started,
        )  # fmt: skip
    if pending.problem:
        raise CustomResourceFailed(pending.problem)
    if response["Status"] == "FAILED":
        reason = response.get("Reason") or "See the details in CloudWatch Log Stream: " + str(
            response.get("PhysicalResourceId")
        )
        raise CustomResourceFailed(
            f"Received response status [FAILED] from custom resource. Message returned: {reason} "
            f"(RequestId: {request_id})",
            physical_id=str(response["PhysicalResourceId"]),
        )
    return response


def _wait(pending: _Pending, invocation: AsyncInvocation, request_id: str, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    no_response = (
        f"CloudFormation did not receive a response from your Custom Resource. Please check your logs for "
        f"requestId [{request_id}]. If you are using the Python cfn-response module, you may need to update your "
        "Lambda function code so that CloudFormation can attach the updated version."
    )
    while not pending.arrived.wait(0.05):
        if invocation.done.is_set() and not pending.arrived.is_set():
            last = invocation.last
            why = "the last returned"
            if invocation.failure:
                why = f"the local AWS could not run it: {invocation.failure}"
            elif last is not None and not last.ok:
                why = f"the last with {last.error_type}: {last.error_message}"
            raise CustomResourceFailed(
                f"{no_response} (local AWS: the {len(invocation.attempts)} invocation(s) of "
                f"{invocation.function.name} ended without one, {why}; CloudFormation would wait "
                f"{timeout_s:.0f} s for it)"
            )
        if time.monotonic() > deadline:
            raise CustomResourceFailed(no_response)
    assert pending.response is not None
    return pending.response


def _made_up_physical_id(stack_id: str, logical_id: str) -> str:
    stack_name = stack_id.split("/")[1] if "/" in stack_id else stack_id
    suffix = "".join(random.choices(string.ascii_uppercase + string.digits, k=12))  # noqa: S311 -- an id, not a secret
    return f"{stack_name}-{logical_id}-{suffix}"


class LambdaBackedCustomResource:
    """A custom resource (``Custom::<name>`` or AWS::CloudFormation::CustomResource) whose
    ServiceToken is a Lambda function: created, updated and deleted by its function's responses;
    Fn::GetAtt reads the response's Data.

    A moto CloudFormation model by its methods, not by deriving from moto's CloudFormationModel,
    whose subclasses stock moto lists as its own types: this one is found only through the
    mapping of custom resource types that patches/cloudformation.py installs.
    """

    #: Set by moto's CloudFormation once the resource is made.
    cf_resource_type: str
    logical_resource_id: str

    def __init__(self, target: Target, properties: Mapping[str, Any], response: Mapping[str, Any]) -> None:
        self.target = target
        self.properties = dict(properties)
        self.physical_id = str(response["PhysicalResourceId"])
        self.data: dict[str, Any] = dict(response.get("Data") or {})

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::CloudFormation::CustomResource"

    @staticmethod
    def cloudformation_name_type() -> str:
        return ""

    def is_created(self) -> bool:
        return True

    @property
    def physical_resource_id(self) -> str:
        return self.physical_id

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return True  # whatever the response's Data holds

    def get_cfn_attribute(self, attribute_name: str) -> Any:
        if attribute_name not in self.data:
            raise CustomResourceFailed(
                f"CustomResource attribute error: Vendor response doesn't contain {attribute_name} key in object "
                f"{self.target.stack_id}|{self.target.logical_id}|..."
            )
        return self.data[attribute_name]

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str, **kwargs: Any
    ) -> LambdaBackedCustomResource:
        target = Target(kwargs["StackId"], kwargs["LogicalId"], kwargs["ResourceType"], account_id, region_name)
        properties = cloudformation_json.get("Properties", {})
        try:
            response = request(target, "Create", properties)
        except CustomResourceFailed as failed:
            # CloudFormation's rollback sends the failed resource a Delete (aws/aws-cdk#5525).
            physical_id = failed.physical_id or _made_up_physical_id(target.stack_id, target.logical_id)
            # The rollback goes on if that fails too; the resource is gone from the stack either way.
            with contextlib.suppress(CustomResourceFailed):
                request(target, "Delete", properties, physical_id=physical_id)
            raise
        return cls(target, properties, response)

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: LambdaBackedCustomResource,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> LambdaBackedCustomResource:
        properties = cloudformation_json.get("Properties", {})
        response = request(
            original_resource.target,
            "Update",
            properties,
            physical_id=original_resource.physical_id,
            old_properties=original_resource.properties,
        )
        return cls(original_resource.target, properties, response)

    def delete(self, account_id: str, region_name: str) -> None:
        request(self.target, "Delete", self.properties, physical_id=self.physical_id)
