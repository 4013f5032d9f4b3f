"""What every service's answers share: an error of the local AWS itself in the service's protocol
(local_aws/faults.py keeps and logs each), a JSON answer without null members
(local_aws/json_answers.py), and every successful answer checked against its operation's shape (one
that breaks it is a fault of the local AWS too: local_aws/validation/answers.py)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import UnknownServiceError
from botocore.model import OperationNotFoundError
from flask import Flask, Response
from flask import request as flask_request
from moto.core.common_types import TYPE_RESPONSE
from moto.core.responses import BaseResponse
from moto.core.utils import get_service_model
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from werkzeug.exceptions import HTTPException

from local_aws.faults import answer, where
from local_aws.host import HOST
from local_aws.json_answers import leave_out_nulls
from local_aws.patches.base import Patch, find, patch, replace
from local_aws.validation.answers import CHECKED_PROTOCOLS, answer_violations


def _handler(app: Flask, installed: Patch) -> Any:
    backend = str(getattr(app, "service", ""))

    def handle(exc: Exception) -> Any:
        if isinstance(exc, HTTPException):
            return exc.get_response()  # moto's own answer to a path it does not route
        # An app made while the patch was installed keeps the handler, which then lets the
        # exception through as stock moto does (a patch can be reverted on a running server).
        if not installed.installed:
            raise exc
        fault = HOST.faults.record(backend, where(flask_request), exc)
        status, headers, body = answer(backend, fault)
        return Response(body, status=status, headers=headers)

    return handle


@patch(
    restores="""An error of the local AWS itself (an exception no handler expected) is answered as AWS
    answers its own errors, in the service's protocol, which the SDKs parse: HTTP 500 with
    InternalFailure ("The request processing has failed because of an unknown error, exception or
    failure", the API references' Common Errors; InternalError in S3's and EC2's XML), and it is
    logged with its traceback and counted (local_aws/faults.py), so that a test session in which one
    happened fails. Stock moto's server answers Flask's HTML page "500 Internal Server Error", which
    botocore reports as error code 500 with the page as its message."""
)
def internal_errors_answer_in_the_protocol() -> None:
    this = find("internal_errors_answer_in_the_protocol")
    original = DomainDispatcherApplication.get_application

    def get_application(self: Any, environ: dict[str, Any]) -> Flask:
        app: Flask = original(self, environ)
        if not getattr(app, "answers_faults", False):
            app.register_error_handler(Exception, _handler(app, this))
            app.answers_faults = True  # type: ignore[attr-defined]
        return app

    replace(DomainDispatcherApplication, "get_application", get_application)


# --- Successful answers -------------------------------------------------------------------------


def answered_call(response: BaseResponse, answer: TYPE_RESPONSE) -> tuple[str, str, str] | None:
    """The service, operation and protocol (botocore's names) of a call `response` answered with
    `answer`, when it succeeded (not an error) and is an operation of botocore's model (not moto's
    own API)."""
    if not 200 <= int(answer[0]) < 300:
        return None
    service = response.boto3_service_name
    try:
        operation = response._get_action()
        service_model = get_service_model(service)
        service_model.operation_model(operation)
        return service, operation, response.determine_response_protocol(service_model)
    except (OperationNotFoundError, NotImplementedError, KeyError, UnknownServiceError):
        return None


@patch(
    restores="""A JSON answer leaves out a member that has no value, as AWS's JSON protocols do: no
    member of an answer is null (botocore's models give null no type, and the API references'
    examples write none). Stock moto's handlers that write their JSON themselves write null for
    each member they hold no value for: NextToken of DescribeScalableTargets and
    DescribeScalingPolicies, nextToken of DescribeLogGroups and DescribeLogStreams, KMSKeyArn,
    VpcConfig and the signing ARNs of Lambda's CreateFunction and GetFunctionConfiguration, KMS's
    SigningAlgorithms and NextMarker."""
)
def json_answers_leave_out_members_without_a_value() -> None:
    # The SageMaker runtime's handler calls the call_action it found installed when it was:
    # reverted, this one must answer as stock moto.
    this = find("json_answers_leave_out_members_without_a_value")
    call_action = BaseResponse.call_action

    def call_action_without_nulls(self: BaseResponse) -> TYPE_RESPONSE:
        status, headers, body = answer = call_action(self)
        if not (this.installed and isinstance(body, str | bytes)):
            return answer  # a stream is no JSON
        call = answered_call(self, answer)
        if call is None or call[2] not in ("json", "rest-json"):
            return answer
        return status, headers, leave_out_nulls(call[0], call[1], body)

    replace(BaseResponse, "call_action", call_action_without_nulls)


class ShapeViolation(Exception):
    """An answer of the local AWS that AWS would not send: it breaks its operation's output shape
    (botocore's model; local_aws/validation/answers.py)."""


#: An answer of the runtime's streamed call (its headers), checked once when the patch installs.
STREAMED_EXAMPLE = (
    "sagemaker-runtime",
    "InvokeEndpointWithResponseStream",
    "rest-json",
    {"X-Amzn-SageMaker-Content-Type": "text/plain", "x-Amzn-Invoked-Production-Variant": "AllTraffic",
     "X-Amzn-SageMaker-Custom-Attributes": "a=1"},
    None,
)  # fmt: skip


def check_answer(response: BaseResponse, answer: TYPE_RESPONSE) -> None:
    """Keep as a fault of the local AWS a successful answer of `response`'s call that breaks its
    operation's output shape."""
    call = answered_call(response, answer)
    if call is None or call[2] not in CHECKED_PROTOCOLS:
        return
    service, operation, protocol = call
    body = answer[2] if isinstance(answer[2], str | bytes) else None  # a stream: its headers alone
    try:
        violations = answer_violations(service, operation, protocol, answer[1], body)
    except Exception as exc:  # the check's own failure is the local AWS's too
        HOST.faults.record(service, where(response), exc)
        return
    if violations:
        said = "; ".join(str(v) for v in violations)
        HOST.faults.record(service, where(response), ShapeViolation(f"{operation} answered outside its shape: {said}"))


@patch(
    restores="""Every answer is in its operation's shape, as AWS's answers are (botocore's model of each
    service, from which AWS's own SDKs are generated): each successful answer of every service but
    S3 (moto's S3 answers through handlers of its own, in REST XML) is read back as it was sent,
    JSON or XML (botocore's parsers drop a member the shape lacks without a word), a stream's
    headers alone, and checked against its operation's output shape
    (local_aws/validation/answers.py: no member the shape lacks, every required member, each value
    of its type, a timestamp as the protocol writes it, within its lengths and ranges, off no
    pattern or enum, never null); one that breaks it is a fault of the local AWS, logged and kept
    (local_aws/faults.py), so that a test during which it was answered fails, while the caller
    still gets the answer. Stock moto answers what its objects hold, checked against nothing: an
    empty DataCaptureConfig, which sagemaker-core's pydantic models refuse, went unseen by every
    test that used botocore."""
)
def answers_are_checked_against_their_shapes() -> None:
    this = find("answers_are_checked_against_their_shapes")
    # A stream's headers are checked before its first part goes out: what the check reads of the
    # runtime's model is made ready now, so that no first part waits for it (tests/loadtest/
    # test_stream.py times the parts).
    answer_violations(*STREAMED_EXAMPLE)
    dispatch = BaseResponse._dispatch

    def checked_dispatch(self: BaseResponse, request: Any, full_url: str | None = None, headers: Any = None) -> Any:
        answer = dispatch(self, request, full_url, headers)
        if this.installed:
            check_answer(self, answer)
        return answer

    replace(BaseResponse, "_dispatch", checked_dispatch)
