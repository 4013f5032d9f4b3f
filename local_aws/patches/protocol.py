"""What every service's answers share: an error of the local AWS itself in the service's protocol
(local_aws/faults.py keeps and logs each), and a JSON answer without null members
(local_aws/json_answers.py)."""

from __future__ import annotations

import sys
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

from local_aws.faults import FAULTS, answer, where
from local_aws.json_answers import leave_out_nulls
from local_aws.patches.base import patch, replace

#: Whether the patch is installed: an app made while it was keeps the handler, which then lets
#: the exception through as stock moto does (a patch can be reverted on a running server).
ENABLED = False


def _handler(app: Flask) -> Any:
    backend = str(getattr(app, "service", ""))

    def handle(exc: Exception) -> Any:
        if isinstance(exc, HTTPException):
            return exc.get_response()  # moto's own answer to a path it does not route
        if not sys.modules[__name__].ENABLED:
            raise exc
        fault = FAULTS.record(backend, where(flask_request), exc)
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
    replace(sys.modules[__name__], "ENABLED", True)
    original = DomainDispatcherApplication.get_application

    def get_application(self: Any, environ: dict[str, Any]) -> Flask:
        app: Flask = original(self, environ)
        if not getattr(app, "answers_faults", False):
            app.register_error_handler(Exception, _handler(app))
            app.answers_faults = True  # type: ignore[attr-defined]
        return app

    replace(DomainDispatcherApplication, "get_application", get_application)


# --- Successful answers -------------------------------------------------------------------------


def answered_call(response: BaseResponse, answer: TYPE_RESPONSE) -> tuple[str, str, str] | None:
    """The service, operation and protocol (botocore's names) of a call `response` answered with
    `answer`, when it succeeded with a body in full (not an error, not a stream) and is an
    operation of botocore's model (not moto's own API)."""
    status, _, body = answer
    if not 200 <= int(status) < 300 or not isinstance(body, str | bytes):
        return None
    service = response.boto3_service_name
    try:
        operation = response._get_action()
        service_model = get_service_model(service)
        service_model.operation_model(operation)
        return service, operation, response.determine_response_protocol(service_model)
    except (OperationNotFoundError, NotImplementedError, KeyError, UnknownServiceError):
        return None


#: Whether the patch that leaves out null members is installed (the SageMaker runtime's handler
#: calls the one it found installed when it was).
LEAVES_OUT_NULLS = False


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
    replace(sys.modules[__name__], "LEAVES_OUT_NULLS", True)
    call_action = BaseResponse.call_action

    def call_action_without_nulls(self: BaseResponse) -> TYPE_RESPONSE:
        status, headers, body = answer = call_action(self)
        call = answered_call(self, answer) if sys.modules[__name__].LEAVES_OUT_NULLS else None
        if call is None or call[2] not in ("json", "rest-json"):
            return answer
        return status, headers, leave_out_nulls(call[0], call[1], body)

    replace(BaseResponse, "call_action", call_action_without_nulls)
