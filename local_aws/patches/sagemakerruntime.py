"""SageMaker runtime: InvokeEndpoint answered by the endpoint's container (local_aws/runtime.py)."""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from moto.core.common_types import TYPE_RESPONSE
from moto.s3.models import s3_backends
from moto.sagemaker.models import sagemaker_backends
from moto.sagemakerruntime.responses import SageMakerRuntimeResponse
from moto.sns.models import sns_backends
from moto.utilities.utils import get_partition

from local_aws.containers import Container
from local_aws.patches.base import patch, replace
from local_aws.patches.iam import assumed_role_caller
from local_aws.patches.sagemaker import components, sagemaker_arn
from local_aws.policies import evaluate, first_denial
from local_aws.runtime import HOSTING, INVOCATION_TIMEOUT_S, EndpointNotFound, NotInService, split_s3_url

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
        except EndpointNotFound:
            return _validation_error(f"Endpoint {name} of account {self.current_account} not found.")
        except (NotInService, LookupError) as exc:
            return _validation_error(str(exc))

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
