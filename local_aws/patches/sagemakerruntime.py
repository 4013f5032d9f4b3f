"""SageMaker runtime: InvokeEndpoint answered by the endpoint's container (local_aws/runtime.py)."""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import threading
import time
import urllib.parse
import uuid
from collections.abc import Generator, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import moto.sagemakerruntime.urls as runtime_urls
from moto.core.common_types import TYPE_RESPONSE
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.s3.models import s3_backends
from moto.sagemaker.models import sagemaker_backends
from moto.sagemakerruntime.responses import SageMakerRuntimeResponse
from moto.sns.models import sns_backends
from moto.utilities.utils import get_partition
from werkzeug.datastructures import ImmutableMultiDict

from local_aws import eventstream, validation
from local_aws.containers import Container
from local_aws.faults import FAULTS
from local_aws.patches.base import patch, replace
from local_aws.patches.iam import assumed_role_caller
from local_aws.patches.sagemaker import components, sagemaker_arn
from local_aws.policies import evaluate, first_denial
from local_aws.runtime import (
    HOSTING,
    INVOCATION_TIMEOUT_S,
    EndpointNotFound,
    NotInService,
    Unhealthy,
    split_s3_url,
)

log = logging.getLogger("local_aws.sagemakerruntime")

#: SageMaker's largest InvokeEndpoint payload (botocore's model: Body's max).
MAX_PAYLOAD_BYTES = 6 * 1024 * 1024


def endpoint_name(self: Any) -> str:
    """The request's EndpointName: its path's, percent-decoded (moto keeps the path as it came)."""
    return urllib.parse.unquote(self.path.split("/")[2])


def _model_error(status: int, body: bytes, endpoint: str, account: str, region: str, variant: str) -> TYPE_RESPONSE:
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


def _no_response(variant: str, key: tuple[str, str, str]) -> TYPE_RESPONSE:
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
    return _model_error(0, message.encode(), name, account, region, variant)


#: What the runtime raises for an invocation it cannot hand to a container.
UNROUTABLE = (Unhealthy, NotInService, LookupError)


def _unroutable(exc: Exception, key: tuple[str, str, str]) -> TYPE_RESPONSE:
    """InvokeEndpoint's (and the streaming call's) answer when the runtime cannot route: a crashed
    container's ModelError, else a ValidationError (a missing endpoint, one not InService, a
    component or variant it does not have)."""
    if isinstance(exc, Unhealthy):
        return _no_response(exc.variant, key)
    if isinstance(exc, EndpointNotFound):
        account, _, name = key
        return _validation_error(f"Endpoint {name} of account {account} not found.")
    return _validation_error(str(exc))


def _access_denied(self: Any, action: str, name: str, component: str | None = None) -> TYPE_RESPONSE | None:
    """AccessDeniedException (HTTP 400, as in the API references' Common Errors) when the
    request is signed as an assumed role whose policies do not allow `action` on the endpoint
    (and the component it names), by the ARNs SageMaker writes; None when allowed."""
    caller = assumed_role_caller(self.headers, self.current_account, self.region)
    if caller is None:
        return None
    arns = [sagemaker_arn("endpoint", name, self.current_account, self.region)]
    if component:
        arns.append(sagemaker_arn("inference-component", component, self.current_account, self.region))
    decision = first_denial(evaluate(caller, action, arn) for arn in arns)
    return None if decision.allowed else _error(400, "AccessDeniedException", {"message": decision.message})


def _validation_error(message: str) -> TYPE_RESPONSE:
    return _error(400, "ValidationError", {"message": message})


def _error(status: int, kind: str, payload: Mapping[str, Any]) -> TYPE_RESPONSE:
    # moto's dispatch takes the HTTP status from the "status" header of a handler's answer.
    headers = {"status": str(status), "x-amzn-ErrorType": kind, "Content-Type": "application/json"}
    return status, headers, json.dumps(payload)


# --- The request as the caller sent it ----------------------------------------------------------

#: The runtime's paths: an EndpointName is routed whatever it holds (botocore percent-encodes a
#: slash in it, which the server decodes), so that the model's pattern refuses it, as AWS does.
RUNTIME_PATHS = {
    "{0}/endpoints/(?P<name>.+)/async-invocations$": runtime_urls.response.dispatch,
    "{0}/endpoints/(?P<name>.+)/invocations$": runtime_urls.response.dispatch,
    "{0}/endpoints/(?P<name>.+)/invocations-response-stream$": runtime_urls.response.dispatch,
}


#: The operation each path of the runtime is for, by its end.
ACTIONS = {
    "/async-invocations": "InvokeEndpointAsync",
    "/invocations-response-stream": "InvokeEndpointWithResponseStream",
    "/invocations": "InvokeEndpoint",
}


@patch(
    restores="""The runtime's calls carry a body of any bytes (InvokeEndpoint's Body is a blob of up to
    6 MB, botocore's sagemaker-runtime model: images, audio, any binary payload), which reaches the
    container exactly as sent, whatever its ContentType; only the request's path and headers say
    which endpoint and operation it is for. Stock moto decodes every body as UTF-8
    (BaseResponse.setup_class), so a body that is not UTF-8 fails with an HTML 500 before any
    handler runs; it parses a body of a form's content type as a form (the container gets an empty
    body) and finds no operation for it or for JSON 1.1's (HTTP 404), and reads a body that looks
    like a query string ("EndpointName=x&Action=y") as the request's parameters, so that a body
    can send the call to another endpoint or operation."""
)
def runtime_bodies_are_bytes() -> None:
    setup = SageMakerRuntimeResponse.setup_class

    def setup_class(
        self: Any, request: Any, full_url: str | None = None, headers: Any = None, use_raw_body: bool | None = None
    ) -> None:
        request.get_data(cache=True)  # the bytes as they came, before anything parses them as a form
        request.__dict__.update(form=ImmutableMultiDict(), files=ImmutableMultiDict())
        setup(self, request, full_url, headers, use_raw_body=True)

    def get_action(self: Any) -> str | None:
        # By the path alone: moto picks its router by the body's content type, and finds no
        # operation for a form's or JSON 1.1's.
        for suffix, operation in ACTIONS.items():
            if self.path.endswith(suffix):
                return operation
        return None

    replace(SageMakerRuntimeResponse, "setup_class", setup_class)
    replace(SageMakerRuntimeResponse, "_get_action", get_action)
    replace(runtime_urls, "url_paths", RUNTIME_PATHS)


#: The runtime's operations.
OPERATIONS = ("InvokeEndpoint", "InvokeEndpointWithResponseStream", "InvokeEndpointAsync")


def _parameters(self: Any, operation: str) -> dict[str, Any]:
    """The request's parameters as botocore's model names them: the path's and the headers'
    members, and the body as the payload."""
    return validation.rest_parameters(
        "sagemaker-runtime", operation, uri={"EndpointName": endpoint_name(self)}, headers=self.headers, body=self.body
    )


def _too_large(size: int) -> TYPE_RESPONSE:
    """What SageMaker's front end answers a body over the limit: HTTP 413, no error type (botocore
    reports the code "413"), as users quote it (aws/sagemaker-python-sdk#171, then with the 5 MB
    limit: "HTTP content length exceeded 5246976 bytes.")."""
    return (
        413,
        {"status": "413", "Content-Type": "application/json"},
        json.dumps({"message": f"HTTP content length exceeded {MAX_PAYLOAD_BYTES} bytes."}),
    )


@patch(
    restores="""The runtime's requests are checked as AWS checks them before any endpoint sees them: a
    body over 6 MB (6,291,456 bytes) is answered HTTP 413 ("HTTP content length exceeded ...
    bytes.", aws/sagemaker-python-sdk#171), and a request that breaks botocore's sagemaker-runtime
    model (CustomAttributes, ContentType or Accept over 1,024 characters or not ASCII; an
    EndpointName, TargetVariant, InferenceComponentName or SessionId off its pattern or length; an
    InferenceId over 64; an InvocationTimeoutSeconds outside 1-3600, ...) with ValidationError and
    the model's "1 validation error detected" message (a sensitive member's value left out, as
    aws/aws-sdk-js#4203 quotes it). Stock moto checks nothing, and botocore's client checks only
    types, required members and minimums: a CustomAttributes of 1,025 characters reaches the
    container."""
)
def runtime_requests_are_validated() -> None:
    original = SageMakerRuntimeResponse.call_action

    def call_action(self: Any) -> TYPE_RESPONSE:
        operation = self._get_action()
        if operation in OPERATIONS and len(self.body or b"") > MAX_PAYLOAD_BYTES:
            return _too_large(len(self.body))
        if operation in OPERATIONS:
            refused = validation.check_request("sagemaker-runtime", operation, _parameters(self, operation))
            if refused is not None:
                return _error(400, refused.code, {"message": refused.message})
        return original(self)

    replace(SageMakerRuntimeResponse, "call_action", call_action)


@patch(
    restores="""InvokeEndpoint reaches the endpoint's container: body, ContentType, Accept,
    CustomAttributes and SessionId passed through, its answer returned; a 4xx or 5xx of the
    container becomes ModelError (424) with its status and body; an endpoint that does not exist
    or is not in service is a ValidationError, as are a TargetVariant it lacks, a TargetModel or
    TargetContainerHostname (none is multi-model or multi-container) and a real-time call to an
    asynchronous endpoint; no answer within 60 s is a ModelError. With InferenceComponentName,
    the component's container answers (a component of another endpoint, or none, is a
    ValidationError, as is an endpoint of components called without one). A variant whose
    container exited after InService, or that closes the connection without an answer, is a
    ModelError with status 0 ("could not get a response"), and what is left of a crashed
    container's processes is ended. A
    caller signed as an assumed role whose policies do not allow sagemaker:InvokeEndpoint on the
    endpoint's ARN (names in lower case, as SageMaker writes them) gets AccessDeniedException.
    Stock moto answers every invocation with canned text."""
)
def invocations_reach_the_container() -> None:
    def invoke_endpoint(self: Any) -> TYPE_RESPONSE:
        name, body = endpoint_name(self), bytes(self.body)
        key = (self.current_account, self.region, name)
        component = self.headers.get("X-Amzn-SageMaker-Inference-Component")
        denied = _access_denied(self, "sagemaker:InvokeEndpoint", name, component)
        if denied is not None:
            return denied
        try:
            with HOSTING.route(*_route_args(key, self.headers)) as (variant, container):
                return _forward(self.headers, body, key, variant, container)
        except UNROUTABLE as exc:
            return _unroutable(exc, key)

    replace(SageMakerRuntimeResponse, "invoke_endpoint", invoke_endpoint)


def _is_async(account: str, region: str, name: str) -> bool:
    backend: Any = sagemaker_backends[account][region]
    endpoint = backend.endpoints.get(name)
    config = backend.endpoint_configs.get(endpoint.endpoint_config_name) if endpoint is not None else None
    return bool(config is not None and config.async_inference_config)


def _target(key: tuple[str, str, str], headers: Mapping[str, str]) -> tuple[str, str, str]:
    """The runtime key an invocation goes to: the endpoint's, or its component's."""
    account, region, name = key
    hosted = HOSTING.find(key)
    if hosted is None:
        raise EndpointNotFound(name)
    if _is_async(account, region, name):
        # A real-time call to an asynchronous endpoint is a ValidationError (strands-agents/harness-sdk#1969;
        # the words are not quoted there).
        raise LookupError(f"Endpoint {name} is an asynchronous inference endpoint: call InvokeEndpointAsync.")
    if headers.get("X-Amzn-SageMaker-Target-Model"):
        # SageMaker's words (aws/amazon-sagemaker-examples#1026); no endpoint here hosts several models.
        raise LookupError(f"Endpoint {name} is not a multi-model endpoint and does not support target model header.")
    if headers.get("X-Amzn-SageMaker-Target-Container-Hostname"):
        raise LookupError(
            f"Endpoint {name} is not a multi-container endpoint with direct invocation and does not support target "
            "container hostname header."
        )
    component = headers.get("X-Amzn-SageMaker-Inference-Component")
    if component is None:
        if hosted.live is not None and not hosted.live.containers:
            raise LookupError(
                "Inference Component Name header is required for endpoints to which you plan to deploy inference "
                "components. Please include Inference Component Name header or consider using SageMaker models."
            )
        return key
    ic = components(account, region).get(component)
    if ic is None or ic.endpoint_name != name:
        raise LookupError(f"Inference component {component} not found on endpoint {name}.")
    return ic.hosting_key


#: The request headers SageMaker hands the container besides the body's, and those of its answer
#: it hands back (the stateful sessions' ids among them: sagemaker/latest/dg/stateful-sessions.html).
PASSED_ON = ("X-Amzn-SageMaker-Custom-Attributes", "X-Amzn-SageMaker-Session-Id")
PASSED_BACK = (
    "X-Amzn-SageMaker-Custom-Attributes",
    "X-Amzn-SageMaker-New-Session-Id",
    "X-Amzn-SageMaker-Closed-Session-Id",
)


def _forward(
    headers: Mapping[str, str], body: bytes, key: tuple[str, str, str], variant: str, container: Container
) -> TYPE_RESPONSE:
    """POST /invocations to the container as SageMaker does, and its answer as InvokeEndpoint's."""
    account, region, name = key
    sent = {k: headers[k] for k in PASSED_ON if headers.get(k)}
    try:
        answer = container.invoke(
            body,
            content_type=headers.get("Content-Type") or "application/octet-stream",
            accept=headers.get("Accept"),
            headers=sent,
            timeout=INVOCATION_TIMEOUT_S,
        )
    except OSError as exc:  # a timeout, or no answer (nothing listening, the connection reset or closed)
        if not isinstance(getattr(exc, "reason", exc), TimeoutError):
            return _no_response(variant, key)
        timed_out = f"Your invocation timed out while waiting for a response from container {variant}."
        return _model_error(0, timed_out.encode(), name, account, region, variant)
    if answer.status >= 400:
        return _model_error(answer.status, answer.body, name, account, region, variant)
    out = {"Content-Type": answer.content_type, "x-Amzn-Invoked-Production-Variant": variant}
    given = {k.lower(): v for k, v in answer.headers.items()}
    out.update({k: given[k.lower()] for k in PASSED_BACK if given.get(k.lower())})
    return 200, out, answer.body


# --- Response streaming ---------------------------------------------------------------------------

#: The longest a streamed answer may take, first byte to last, before SageMaker ends it with
#: ModelStreamError ModelInvocationTimeExceeded. The API reference names the error but not the
#: limit; 8 minutes is what SageMaker's hosting quotas give response streaming, as far as we
#: know (not checked against a page here): docs/LOCAL_AWS_STREAMING.md. Tests lower it.
STREAM_TIMEOUT_S: float = 8 * 60
#: The most bytes of the container's answer one PayloadPart carries: a part holds what the
#: container has sent so far, at most this much.
PART_BYTES = 64 * 1024
#: The most bytes of a container's error answer (non-2xx before streaming) read for ModelError.
MAX_ERROR_BYTES = 64 * 1024
STREAM_PATH_SUFFIX = "/invocations-response-stream"


def _stream_error(code: str, message: str) -> bytes:
    return eventstream.exception("ModelStreamError", {"Message": message, "ErrorCode": code})


def _stream(
    headers: Mapping[str, str], body: bytes, key: tuple[str, str, str], route: contextlib.ExitStack
) -> TYPE_RESPONSE:
    """POST /invocations to the container of `route` (held until the stream ends) and its answer
    as InvokeEndpointWithResponseStream's: a status before the stream (ModelError), or 200 and
    the event stream."""
    account, region, name = key
    variant, container = route.enter_context(HOSTING.route(*_route_args(key, headers)))
    sent = {"Content-Type": headers.get("Content-Type") or "application/octet-stream"}
    if headers.get("X-Amzn-SageMaker-Accept"):
        sent["Accept"] = headers["X-Amzn-SageMaker-Accept"]
    sent.update({k: headers[k] for k in PASSED_ON if headers.get(k)})
    connection = http.client.HTTPConnection("127.0.0.1", container.port, timeout=INVOCATION_TIMEOUT_S)
    route.callback(connection.close)
    try:
        connection.request("POST", "/invocations", body=body, headers=sent)
        answer = connection.getresponse()
    except TimeoutError:
        timed_out = f"Your invocation timed out while waiting for a response from container {variant}."
        return _model_error(0, timed_out.encode(), name, account, region, variant)
    except (OSError, http.client.HTTPException):  # no answer: nothing listening, or the connection reset
        return _no_response(variant, key)
    if answer.status >= 400:
        try:
            text = answer.read(MAX_ERROR_BYTES)
        except (OSError, http.client.HTTPException):
            text = b""
        return _model_error(answer.status, text, name, account, region, variant)
    out = {
        "Content-Type": "application/vnd.amazon.eventstream",
        "X-Amzn-SageMaker-Content-Type": answer.getheader("Content-Type") or "",
        "x-Amzn-Invoked-Production-Variant": variant,
    }
    attributes = answer.getheader("X-Amzn-SageMaker-Custom-Attributes")
    if attributes:
        out["X-Amzn-SageMaker-Custom-Attributes"] = attributes
    # moto's dispatch hands the body to a Flask Response as it is: an iterable is streamed.
    return 200, out, _Stream(answer, connection, variant, route.pop_all())  # type: ignore[return-value]


def _route_args(key: tuple[str, str, str], headers: Mapping[str, str]) -> tuple[tuple[str, str, str], str | None]:
    return _target(key, headers), headers.get("X-Amzn-SageMaker-Target-Variant")


class _Stream:
    """The container's answer as events, each part as soon as the container sends it. The
    server closes it when the caller goes away (its next write fails) or the stream ends: the
    connection to the container is closed then, which is how the container learns of it, and
    the endpoint's container is let go (an update may stop it)."""

    def __init__(
        self,
        answer: http.client.HTTPResponse,
        connection: http.client.HTTPConnection,
        variant: str,
        held: contextlib.ExitStack,
    ) -> None:
        self._parts = _parts(answer, connection, variant)
        self._held = held

    def __iter__(self) -> Iterator[bytes]:
        return self._parts

    def close(self) -> None:
        try:
            self._parts.close()
        finally:
            self._held.close()


def _parts(answer: http.client.HTTPResponse, connection: http.client.HTTPConnection, variant: str) -> Generator[bytes]:
    deadline = time.monotonic() + STREAM_TIMEOUT_S
    try:
        if not answer.chunked:
            # A whole answer (Content-Length): one part (the choice for what AWS does not
            # document, docs/LOCAL_AWS_STREAMING.md).
            _set_timeout(connection, deadline)
            yield from eventstream.payload_parts(answer.read())
            return
        while True:
            _set_timeout(connection, deadline)
            data = answer.read1(PART_BYTES)
            if not data:
                return
            yield eventstream.event("PayloadPart", data)
    except TimeoutError:
        # SageMaker's words, as a user reported them (re:Post "invoke-streaming-timeout-error").
        yield _stream_error(
            "ModelInvocationTimeExceeded",
            f"Your model {variant} did not complete sending the inference response in the allotted time.",
        )
    except (OSError, http.client.HTTPException, ValueError):
        # The container closed or reset the connection before its answer's end (for a chunked
        # answer, before the last chunk).
        yield _stream_error("StreamBroken", "The connection between SageMaker and the model was reset or closed.")
    except Exception as exc:  # the local AWS's own fault, after the stream began: the model's error for it
        FAULTS.record("sagemakerruntime", f"the stream of variant {variant}", exc)
        yield eventstream.exception(
            "InternalStreamFailure", {"Message": "The stream processing failed because of an unknown error."}
        )


def _set_timeout(connection: http.client.HTTPConnection, deadline: float) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0 or connection.sock is None:
        raise TimeoutError
    connection.sock.settimeout(remaining)


@patch(
    restores="""InvokeEndpointWithResponseStream (POST /endpoints/<name>/invocations-response-stream,
    botocore's sagemaker-runtime model) reaches the endpoint's container and answers its chunked
    answer as the event stream botocore reads (application/vnd.amazon.eventstream): each piece
    the container sends, as it arrives, a PayloadPart; an answer cut before its end a
    ModelStreamError (StreamBroken); one past the time limit a ModelStreamError
    (ModelInvocationTimeExceeded); a 4xx or 5xx of the container before the stream is ModelError
    (424), a missing endpoint a ValidationError, a crashed container the
    ModelError of InvokeEndpoint. A caller that goes away
    closes the connection to the container. A caller signed as an assumed role whose policies do
    not allow sagemaker:InvokeEndpoint (the action this operation is authorized by, Service
    Authorization Reference) on the endpoint gets AccessDeniedException, as on InvokeEndpoint.
    Stock moto routes the path to no handler."""
)
def streamed_invocations_reach_the_container() -> None:
    def routed(self: Any, environ: dict[str, Any], path: str) -> str | None:
        host: str | None = original(self, environ, path)
        # moto sends SageMaker's runtime paths to the runtime by their end ("invocations") only.
        if host is not None and host.startswith("api.sagemaker.") and path.endswith(STREAM_PATH_SUFFIX):
            return host.replace("api.sagemaker.", "runtime.sagemaker.", 1)
        return host

    def invoke_endpoint_with_response_stream(self: Any) -> TYPE_RESPONSE:
        name, body = endpoint_name(self), bytes(self.body)
        key = (self.current_account, self.region, name)
        component = self.headers.get("X-Amzn-SageMaker-Inference-Component")
        denied = _access_denied(self, "sagemaker:InvokeEndpoint", name, component)
        if denied is not None:
            return denied
        route = contextlib.ExitStack()
        with route:
            try:
                return _stream(self.headers, body, key, route)
            except UNROUTABLE as exc:
                return _unroutable(exc, key)

    original = DomainDispatcherApplication.infer_service_region_host
    replace(DomainDispatcherApplication, "infer_service_region_host", routed)
    replace(SageMakerRuntimeResponse, "invoke_endpoint_with_response_stream", invoke_endpoint_with_response_stream)


# --- Asynchronous inference ----------------------------------------------------------------------

#: Requests an async endpoint works on at once when its config sets no
#: MaxConcurrentInvocationsPerInstance (SageMaker chooses; one instance here).
DEFAULT_ASYNC_CONCURRENCY = 4

#: SageMaker's default and largest InvocationTimeoutSeconds of an async request.
ASYNC_TIMEOUT_S, ASYNC_MAX_TIMEOUT_S = 900, 3600


@dataclass(frozen=True)
class AsyncRequest:
    key: tuple[str, str, str]
    inference_id: str
    #: Where the input is in S3, or the input itself (Body, up to 128,000 bytes).
    input_location: str | None
    inline: bytes | None
    content_type: str
    accept: str | None
    custom_attributes: str | None
    timeout_s: int
    output_location: str
    failure_location: str
    success_topic: str | None
    error_topic: str | None
    #: Requests the endpoint works on at once (its MaxConcurrentInvocationsPerInstance).
    concurrency: int


def _async_request(self: Any, name: str) -> AsyncRequest | TYPE_RESPONSE:
    """The request InvokeEndpointAsync describes, or the ValidationError AWS answers it with."""
    backend: Any = sagemaker_backends[self.current_account][self.region]
    endpoint = backend.endpoints.get(name)
    if endpoint is None:
        return _validation_error(f"Endpoint {name} of account {self.current_account} not found.")
    config = backend.endpoint_configs[endpoint.endpoint_config_name].async_inference_config or {}
    output = config.get("OutputConfig")
    if not output:
        return _validation_error(f"Endpoint {name} is not an asynchronous inference endpoint.")
    hosted = HOSTING.find((self.current_account, self.region, name))
    if hosted is None or hosted.status not in ("InService", "Updating"):
        return _validation_error(f"Endpoint {name} is {endpoint.endpoint_status}, not InService")
    input_location = self.headers.get("X-Amzn-SageMaker-InputLocation") or None
    inline = bytes(self.body) or None
    if (input_location is None) == (inline is None):
        # "Body and InputLocation are mutually exclusive. Provide exactly one of them." (the API
        # reference; the error's wording is not documented).
        return _validation_error("Provide exactly one of Body and InputLocation.")
    if input_location is not None and not input_location.startswith("s3://"):
        return _validation_error(f"InputLocation {input_location!r} is not an S3 URI (s3://bucket/key).")
    timeout = int(self.headers.get("X-Amzn-SageMaker-InvocationTimeoutSeconds") or ASYNC_TIMEOUT_S)
    if not 1 <= timeout <= ASYNC_MAX_TIMEOUT_S:
        return _validation_error(f"InvocationTimeoutSeconds {timeout} is not between 1 and {ASYNC_MAX_TIMEOUT_S}.")
    inference_id = self.headers.get("X-Amzn-SageMaker-Inference-Id") or str(uuid.uuid4())
    notify = output.get("NotificationConfig") or {}
    # Where the answer goes: <path>[/<S3OutputPathExtension>]/<Filename, else <id>.out> (the API
    # reference describes both members, not how SageMaker joins them: this is the choice).
    extension = (self.headers.get("X-Amzn-SageMaker-S3OutputPathExtension") or "").strip("/")
    filename = self.headers.get("X-Amzn-SageMaker-Filename")

    def location(path: str, suffix: str) -> str:
        return "/".join(p for p in (path.rstrip("/"), extension, filename or f"{inference_id}{suffix}") if p)

    return AsyncRequest(
        key=(self.current_account, self.region, name),
        inference_id=inference_id,
        input_location=input_location,
        inline=inline,
        content_type=self.headers.get("X-Amzn-SageMaker-Content-Type") or "application/octet-stream",
        accept=self.headers.get("X-Amzn-SageMaker-Accept"),
        custom_attributes=self.headers.get("X-Amzn-SageMaker-Custom-Attributes"),
        timeout_s=timeout,
        output_location=location(output["S3OutputPath"], ".out"),
        failure_location=location(output.get("S3FailurePath", output["S3OutputPath"]), "-error.out"),
        success_topic=notify.get("SuccessTopic"),
        error_topic=notify.get("ErrorTopic"),
        concurrency=int(
            (config.get("ClientConfig") or {}).get("MaxConcurrentInvocationsPerInstance") or DEFAULT_ASYNC_CONCURRENCY
        ),
    )


#: The async requests accepted and neither answered nor failed yet (two may share an InferenceId).
_pending: list[AsyncRequest] = []
_pending_lock = threading.Lock()


def pending_async(key: tuple[str, str, str] | None = None) -> list[AsyncRequest]:
    """The async requests (of endpoint `key`, else all) accepted and not yet answered or failed."""
    with _pending_lock:
        return [r for r in _pending if key is None or r.key == key]


_queues: dict[tuple[tuple[str, str, str], int], threading.BoundedSemaphore] = {}
_queues_lock = threading.Lock()


def _queue(key: tuple[str, str, str], concurrency: int) -> threading.BoundedSemaphore:
    """The endpoint's queue: at most `concurrency` of its requests are worked on at once, the
    others wait their turn (the endpoint's one instance: queueing is part of an async latency)."""
    with _queues_lock:
        return _queues.setdefault((key, concurrency), threading.BoundedSemaphore(concurrency))


def _answer_async(request: AsyncRequest) -> None:
    """What SageMaker does with a queued request: once the endpoint takes it, the input read
    from S3, sent to the container, its answer written to the output location (or the reason to
    the failure location) and announced on the success (or error) topic. A request whose
    account is gone meanwhile (the local AWS reset or stopped) is dropped with a warning."""
    try:
        _answer_queued(request)
    finally:
        with _pending_lock:
            _pending[:] = [r for r in _pending if r is not request]


def _answer_queued(request: AsyncRequest) -> None:
    account, region, name = request.key
    s3 = s3_backends[account][get_partition(region)]
    received = datetime.now(UTC)
    with _queue(request.key, request.concurrency):
        try:
            answer = _invoke_async(request, s3)
            location, data, topic, reason = request.output_location, answer, request.success_topic, None
        except Exception as exc:  # every failure is the request's, reported where SageMaker reports it
            location, data, topic = request.failure_location, str(exc).encode(), request.error_topic
            reason = str(exc)
    try:
        out_bucket, out_key = split_s3_url(location)
        s3.put_object(out_bucket, out_key, data)
        if topic:
            notification = _notification(request, received, location, reason)
            sns_backends[account][region].publish(json.dumps(notification), arn=topic)
    except Exception as exc:  # a background thread: nothing above it to tell
        log.warning("async request %s of %s dropped: %s", request.inference_id, name, exc)


def _invoke_async(request: AsyncRequest, s3: Any) -> bytes:
    body = request.inline if request.inline is not None else _read_input(s3, str(request.input_location))
    with HOSTING.route(request.key) as (_variant, container):
        attributes = request.custom_attributes
        sent = {"X-Amzn-SageMaker-Custom-Attributes": attributes} if attributes else {}
        answer = container.invoke(
            body, content_type=request.content_type, accept=request.accept, headers=sent, timeout=request.timeout_s
        )
    if answer.status >= 400:
        raise _Failed(f"Received client error ({answer.status}) from model: {answer.body.decode(errors='replace')}")
    return bytes(answer.body)


def _read_input(s3: Any, location: str) -> bytes:
    bucket, key = split_s3_url(location)
    found = s3.buckets.get(bucket)
    stored = found.keys.get(key) if found is not None else None
    if stored is None:
        raise _Failed(f"Failed to read the input from {location}: there is no object there.")
    return bytes(stored.value)


def _notification(request: AsyncRequest, received: datetime, location: str, reason: str | None) -> dict[str, Any]:
    """The message SageMaker publishes on the success or error topic (its documented success
    message; a failure adds the reason)."""
    _, region, name = request.key
    found: dict[str, Any] = {
        "awsRegion": region,
        "eventTime": datetime.now(UTC).isoformat(),
        "receivedTime": received.isoformat(),
        "invocationStatus": "Failed" if reason is not None else "Completed",
        "requestParameters": {
            "contentType": request.content_type,
            "endpointName": name,
            **({"inputLocation": request.input_location} if request.input_location else {}),
        },
        "responseParameters": {"contentType": request.accept or "", "outputLocation": location},
        "inferenceId": request.inference_id,
        "eventVersion": "1.0",
        "eventSource": "aws:sagemaker",
        "eventName": "InferenceResult",
    }
    if reason is not None:
        found["failureReason"] = reason
    return found


class _Failed(Exception):
    pass


@patch(
    restores="""InvokeEndpointAsync queues the request and answers 202 with its id and where its
    answer and failure will be; then, as SageMaker does, the input (inline in Body, up to 128,000
    bytes, or read from S3 at InputLocation: exactly one of them) is sent to the endpoint's
    container, and the answer written to <S3OutputPath>[/<S3OutputPathExtension>]/<Filename or
    id.out> (or the reason to the failure path's <id>-error.out) and announced on the
    SuccessTopic (or ErrorTopic). An endpoint without AsyncInferenceConfig or not InService,
    both or neither of Body and InputLocation, or an input that is not an S3 URI is a
    ValidationError; an assumed role not allowed sagemaker:InvokeEndpointAsync on the endpoint
    gets AccessDeniedException. Stock moto answers with canned locations where nothing is ever
    written."""
)
def async_invocations_answer_through_s3() -> None:
    def invoke_endpoint_async(self: Any) -> TYPE_RESPONSE:
        name = endpoint_name(self)
        denied = _access_denied(self, "sagemaker:InvokeEndpointAsync", name)
        if denied is not None:
            return denied
        request = _async_request(self, name)
        if not isinstance(request, AsyncRequest):
            return request
        with _pending_lock:
            _pending.append(request)
        # A daemon: a request still queued when the local AWS stops is lost with its instance.
        threading.Thread(
            target=_answer_async, args=(request,), name=f"async-{request.inference_id}", daemon=True
        ).start()
        headers = {
            "status": "202",
            "X-Amzn-SageMaker-OutputLocation": request.output_location,
            "X-Amzn-SageMaker-FailureLocation": request.failure_location,
        }
        return 202, headers, json.dumps({"InferenceId": request.inference_id})

    replace(SageMakerRuntimeResponse, "invoke_endpoint_async", invoke_endpoint_async)
