"""SageMaker runtime: InvokeEndpoint answered by the endpoint's container (local_aws/runtime.py)."""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import threading
import time
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

from local_aws import eventstream
from local_aws.containers import Container
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

#: SageMaker's largest InvokeEndpoint payload.
MAX_PAYLOAD_BYTES = 6 * 1024 * 1024


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


def _no_response(exc: Unhealthy, key: tuple[str, str, str]) -> TYPE_RESPONSE:
    """What SageMaker answers when the endpoint's instance gives no answer at all (its container
    crashed): ModelError with status 0 and these words, as users quote them
    (aws/amazon-sagemaker-examples#2815, after the model server's workers "abnormally
    terminated"; #3089). The API reference documents ModelError but not this message."""
    account, region, name = key
    message = (
        f"Amazon SageMaker could not get a response from the {name} endpoint. This can occur when CPU or memory "
        "utilization is high. To check your utilization, see Amazon CloudWatch. To fix this problem, use an instance "
        "type with more CPU capacity or memory."
    )
    return _model_error(0, message.encode(), name, account, region, exc.variant)


#: What the runtime raises for an invocation it cannot hand to a container.
UNROUTABLE = (Unhealthy, NotInService, LookupError)


def _unroutable(exc: Exception, key: tuple[str, str, str]) -> TYPE_RESPONSE:
    """InvokeEndpoint's (and the streaming call's) answer when the runtime cannot route: a crashed
    container's ModelError, else a ValidationError (a missing endpoint, one not InService, a
    component or variant it does not have)."""
    if isinstance(exc, Unhealthy):
        return _no_response(exc, key)
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


@patch(
    restores="""InvokeEndpoint reaches the endpoint's container: body, ContentType, Accept and
    CustomAttributes passed through, its answer returned; a 4xx or 5xx of the container becomes
    ModelError (424) with its status and body; an endpoint that does not exist or is not in
    service is a ValidationError; no answer within 60 s is a ModelError. With
    InferenceComponentName, the component's container answers (a component of another endpoint,
    or none, is a ValidationError, as is an endpoint of components called without one). A
    variant whose container exited after InService is a ModelError with status 0 ("could not get
    a response"), and what is left of its processes is ended. A
    caller signed as an assumed role whose policies do not allow sagemaker:InvokeEndpoint on the
    endpoint's ARN (names in lower case, as SageMaker writes them) gets AccessDeniedException.
    Stock moto answers every invocation with canned text."""
)
def invocations_reach_the_container() -> None:
    def invoke_endpoint(self: Any) -> TYPE_RESPONSE:
        name = self._get_params().get("EndpointName") or self.path.split("/")[2]
        body = self.body if isinstance(self.body, bytes) else str(self.body or "").encode()
        if len(body) > MAX_PAYLOAD_BYTES:
            return _validation_error(f"Request payload of {len(body)} bytes exceeds the limit of {MAX_PAYLOAD_BYTES}")
        key = (self.current_account, self.region, name)
        component = self.headers.get("X-Amzn-SageMaker-Inference-Component")
        denied = _access_denied(self, "sagemaker:InvokeEndpoint", name, component)
        if denied is not None:
            return denied
        try:
            target = _target(key, component)
            with HOSTING.route(target, self.headers.get("X-Amzn-SageMaker-Target-Variant")) as (variant, container):
                return _forward(self.headers, body, key, variant, container)
        except UNROUTABLE as exc:
            return _unroutable(exc, key)

    replace(SageMakerRuntimeResponse, "invoke_endpoint", invoke_endpoint)


def _target(key: tuple[str, str, str], component: str | None) -> tuple[str, str, str]:
    """The runtime key an invocation goes to: the endpoint's, or its component's."""
    account, region, name = key
    hosted = HOSTING.find(key)
    if hosted is None:
        raise EndpointNotFound(name)
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


def _forward(
    headers: Mapping[str, str], body: bytes, key: tuple[str, str, str], variant: str, container: Container
) -> TYPE_RESPONSE:
    """POST /invocations to the container as SageMaker does, and its answer as InvokeEndpoint's."""
    account, region, name = key
    sent = {}
    if headers.get("X-Amzn-SageMaker-Custom-Attributes"):
        sent["X-Amzn-SageMaker-Custom-Attributes"] = headers["X-Amzn-SageMaker-Custom-Attributes"]
    try:
        answer = container.invoke(
            body,
            content_type=headers.get("Content-Type") or "application/octet-stream",
            accept=headers.get("Accept"),
            headers=sent,
            timeout=INVOCATION_TIMEOUT_S,
        )
    except OSError:  # a timeout, or nothing listening any more
        timed_out = f"Your invocation timed out while waiting for a response from container {variant}."
        return _model_error(0, timed_out.encode(), name, account, region, variant)
    if answer.status >= 400:
        return _model_error(answer.status, answer.body, name, account, region, variant)
    out = {"Content-Type": answer.content_type, "x-Amzn-Invoked-Production-Variant": variant}
    attributes = {k.lower(): v for k, v in answer.headers.items()}.get("x-amzn-sagemaker-custom-attributes")
    if attributes:
        out["X-Amzn-SageMaker-Custom-Attributes"] = attributes
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
RUNTIME_PATHS = {
    **runtime_urls.url_paths,
    "{0}/endpoints/(?P<name>[^/]+)/invocations-response-stream$": runtime_urls.response.dispatch,
}


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
    if headers.get("X-Amzn-SageMaker-Custom-Attributes"):
        sent["X-Amzn-SageMaker-Custom-Attributes"] = headers["X-Amzn-SageMaker-Custom-Attributes"]
    connection = http.client.HTTPConnection("127.0.0.1", container.port, timeout=INVOCATION_TIMEOUT_S)
    route.callback(connection.close)
    try:
        connection.request("POST", "/invocations", body=body, headers=sent)
        answer = connection.getresponse()
    except (OSError, http.client.HTTPException):  # a timeout, or nothing listening any more
        timed_out = f"Your invocation timed out while waiting for a response from container {variant}."
        return _model_error(0, timed_out.encode(), name, account, region, variant)
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
    return _target(key, headers.get("X-Amzn-SageMaker-Inference-Component")), headers.get(
        "X-Amzn-SageMaker-Target-Variant"
    )


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
    (424), a missing endpoint or a body over 6 MB a ValidationError, a crashed container the
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
        name = self.path.split("/")[2]
        body = self.body if isinstance(self.body, bytes) else str(self.body or "").encode()
        if len(body) > MAX_PAYLOAD_BYTES:
            return _validation_error(f"Request payload of {len(body)} bytes exceeds the limit of {MAX_PAYLOAD_BYTES}")
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
    replace(runtime_urls, "url_paths", RUNTIME_PATHS)
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
    input_location: str
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
    input_location = self.headers.get("X-Amzn-SageMaker-InputLocation") or ""
    if not input_location.startswith("s3://"):
        return _validation_error(f"InputLocation {input_location!r} is not an S3 URI (s3://bucket/key).")
    timeout = int(self.headers.get("X-Amzn-SageMaker-InvocationTimeoutSeconds") or ASYNC_TIMEOUT_S)
    if not 1 <= timeout <= ASYNC_MAX_TIMEOUT_S:
        return _validation_error(f"InvocationTimeoutSeconds {timeout} is not between 1 and {ASYNC_MAX_TIMEOUT_S}.")
    inference_id = self.headers.get("X-Amzn-SageMaker-Inference-Id") or str(uuid.uuid4())
    notify = output.get("NotificationConfig") or {}
    return AsyncRequest(
        key=(self.current_account, self.region, name),
        inference_id=inference_id,
        input_location=input_location,
        content_type=self.headers.get("X-Amzn-SageMaker-Content-Type") or "application/octet-stream",
        accept=self.headers.get("X-Amzn-SageMaker-Accept"),
        custom_attributes=self.headers.get("X-Amzn-SageMaker-Custom-Attributes"),
        timeout_s=timeout,
        output_location=f"{output['S3OutputPath'].rstrip('/')}/{inference_id}.out",
        failure_location=f"{output.get('S3FailurePath', output['S3OutputPath']).rstrip('/')}/{inference_id}-error.out",
        success_topic=notify.get("SuccessTopic"),
        error_topic=notify.get("ErrorTopic"),
        concurrency=int(
            (config.get("ClientConfig") or {}).get("MaxConcurrentInvocationsPerInstance") or DEFAULT_ASYNC_CONCURRENCY
        ),
    )


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
    bucket, key = split_s3_url(request.input_location)
    body = bytes(s3.get_object(bucket, key).value)
    with HOSTING.route(request.key) as (_variant, container):
        attributes = request.custom_attributes
        sent = {"X-Amzn-SageMaker-Custom-Attributes": attributes} if attributes else {}
        answer = container.invoke(
            body, content_type=request.content_type, accept=request.accept, headers=sent, timeout=request.timeout_s
        )
    if answer.status >= 400:
        raise _Failed(f"Received client error ({answer.status}) from model: {answer.body.decode(errors='replace')}")
    return bytes(answer.body)


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
            "inputLocation": request.input_location,
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
    answer and failure will be; then, as SageMaker does, the input is read from S3 and sent to
    the endpoint's container, and the answer written to <S3OutputPath>/<id>.out (or the reason
    to <S3FailurePath>/<id>-error.out) and announced on the SuccessTopic (or ErrorTopic). An
    endpoint without AsyncInferenceConfig or an input that is not an S3 URI is a
    ValidationError; an assumed role not allowed sagemaker:InvokeEndpointAsync on the endpoint
    gets AccessDeniedException. Stock moto answers with canned locations where nothing is ever
    written."""
)
def async_invocations_answer_through_s3() -> None:
    def invoke_endpoint_async(self: Any) -> TYPE_RESPONSE:
        name = self._get_params().get("EndpointName") or self.path.split("/")[2]
        denied = _access_denied(self, "sagemaker:InvokeEndpointAsync", name)
        if denied is not None:
            return denied
        request = _async_request(self, name)
        if not isinstance(request, AsyncRequest):
            return request
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
