"""SageMaker's errors as SageMaker words them. The runtime's refusals are classes (ValidationError,
AccessDeniedException), each answered by `answer_refusal`; ModelError with the container's status
and HTTP 413 past the body limit are answers built whole; moto's dispatch sends each answer
(status, headers, body) as it is. An API call an assumed role may not make is refused with
ApiAccessDenied."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from moto.core.common_types import TYPE_RESPONSE
from moto.core.exceptions import JsonRESTError, ServiceException

from local_aws.sagemaker.runtime import EndpointNotFound, NoCapacity, Unhealthy, Unroutable

MAX_PAYLOAD_BYTES = 6 * 1024 * 1024


class ValidationError(ServiceException):
    """The runtime's refusal of a request it cannot serve: an endpoint it cannot route to, a
    member its model or its rules refuse (HTTP 400)."""

    code = "ValidationError"


class AccessDeniedException(ServiceException):
    """The runtime's refusal of a caller whose policies do not allow the call (HTTP 400, as in
    the API references' Common Errors)."""

    code = "AccessDeniedException"


class ApiAccessDenied(JsonRESTError):
    """SageMaker's AccessDeniedException to an API call the caller's policies do not allow."""

    # A JsonRESTError: moto's authorization hook answers an HTTPException, and a ServiceException as a 500.
    def __init__(self, message: str) -> None:
        super().__init__("AccessDeniedException", message)


def answer_refusal(refused: ServiceException) -> TYPE_RESPONSE:
    """The runtime's answer to a refusal: HTTP 400, the error's code as its type, its message."""
    # Not moto's serializer: it writes {"__type", "Message"}, where the runtime answers {"message"}.
    return _error(400, refused.code, {"message": refused.message})


# Built whole, not a ServiceException: moto's serializer would add __type and reorder the fields.
def model_error(status: int, body: bytes, endpoint: str, account: str, region: str, variant: str) -> TYPE_RESPONSE:
    kind = "client" if 400 <= status < 500 else "server"
    text = body.decode(errors="replace")
    log_group = f"/aws/sagemaker/Endpoints/{endpoint}"
    message = (
        f'Received {kind} error ({status}) from {variant} with message "{text}". See '
        f"https://{region}.console.aws.amazon.com/cloudwatch/home?region={region}#logEventViewer:group={log_group} "
        f"in account {account} for more information."
    )
    payload = {
        "ErrorCode": f"{kind.upper()}_ERROR_FROM_MODEL",
        "LogStreamArn": f"arn:aws:logs:{region}:{account}:log-group:{log_group}",
        "Message": message,
        "OriginalMessage": text,
        "OriginalStatusCode": status,
    }
    return _error(424, "ModelError", payload)


def no_response(variant: str, key: tuple[str, str, str]) -> TYPE_RESPONSE:
    """What SageMaker answers when the endpoint's instance gives no answer at all (its container
    crashed, or closed the connection without answering): ModelError with status 0 and these
    words, as users quote them (aws/amazon-sagemaker-examples#2815, after the model server's
    workers "abnormally terminated"; #3089). The API reference documents ModelError but not this
    message."""
    account, region, name = key
    message = (
        f"Amazon SageMaker could not get a response from the {name} endpoint. This can occur when CPU or memory "
        "utilization is high. To check your utilization, see Amazon CloudWatch. To fix this problem, use an instance "
        "type with more CPU capacity or memory."
    )
    return model_error(0, message.encode(), name, account, region, variant)


#: What SageMaker answers an invocation of a component with no copy (AWS Machine Learning blog,
#: "Unlock cost savings with the new scale down to zero feature in SageMaker Inference").
NO_CAPACITY = (
    "Inference Component has no capacity to process this request. ApplicationAutoScaling may be in-progress (if "
    "configured) or try to increase the capacity by invoking UpdateInferenceComponentRuntimeConfig API."
)


def unroutable(exc: Unroutable, key: tuple[str, str, str]) -> TYPE_RESPONSE:
    """InvokeEndpoint's (and the streaming call's) answer when the runtime cannot route: a crashed
    container's ModelError, else a ValidationError (a missing endpoint, one not InService, a
    component or variant it does not have)."""
    if isinstance(exc, Unhealthy):
        return no_response(exc.variant, key)
    if isinstance(exc, EndpointNotFound):
        account, _, name = key
        return answer_refusal(ValidationError(f"Endpoint {name} of account {account} not found."))
    if isinstance(exc, NoCapacity):
        return answer_refusal(ValidationError(NO_CAPACITY))
    return answer_refusal(ValidationError(str(exc)))


def _error(status: int, kind: str, payload: Mapping[str, Any]) -> TYPE_RESPONSE:
    # moto's dispatch takes the HTTP status from the "status" header of a handler's answer.
    headers = {"status": str(status), "x-amzn-ErrorType": kind, "Content-Type": "application/json"}
    return status, headers, json.dumps(payload)


# Built whole, not a ServiceException: SageMaker's front end answers it with no error type.
def too_large(size: int) -> TYPE_RESPONSE:
    """What SageMaker's front end answers a body over the limit: HTTP 413, no error type (botocore
    reports the code "413"), as users quote it (aws/sagemaker-python-sdk#171, then with the 5 MB
    limit: "HTTP content length exceeded 5246976 bytes.")."""
    return (
        413,
        {"status": "413", "Content-Type": "application/json"},
        json.dumps({"message": f"HTTP content length exceeded {MAX_PAYLOAD_BYTES} bytes."}),
    )
