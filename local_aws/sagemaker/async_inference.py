"""Asynchronous inference as SageMaker does it: a request queued per endpoint, its input (inline
or in S3) sent to the container, the answer or the failure written to S3 and announced on SNS;
every accepted request tracked until it is answered or failed."""

from __future__ import annotations

import json
import logging
import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from moto.core.common_types import TYPE_RESPONSE
from moto.s3.models import s3_backends
from moto.sagemaker.models import sagemaker_backends
from moto.sns.models import sns_backends
from moto.utilities.utils import get_partition

from local_aws.runtime import HOSTING, split_s3_url
from local_aws.sagemaker.errors import validation_error

log = logging.getLogger("local_aws.sagemaker.async_inference")

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


def async_request(self: Any, name: str) -> AsyncRequest | TYPE_RESPONSE:
    """The request InvokeEndpointAsync describes, or the ValidationError AWS answers it with."""
    backend: Any = sagemaker_backends[self.current_account][self.region]
    endpoint = backend.endpoints.get(name)
    if endpoint is None:
        return validation_error(f"Endpoint {name} of account {self.current_account} not found.")
    config = backend.endpoint_configs[endpoint.endpoint_config_name].async_inference_config or {}
    output = config.get("OutputConfig")
    if not output:
        return validation_error(f"Endpoint {name} is not an asynchronous inference endpoint.")
    hosted = HOSTING.find((self.current_account, self.region, name))
    if hosted is None or hosted.status not in ("InService", "Updating"):
        return validation_error(f"Endpoint {name} is {endpoint.endpoint_status}, not InService")
    input_location = self.headers.get("X-Amzn-SageMaker-InputLocation") or None
    inline = bytes(self.body) or None
    if (input_location is None) == (inline is None):
        # "Body and InputLocation are mutually exclusive. Provide exactly one of them." (the API
        # reference; the error's wording is not documented).
        return validation_error("Provide exactly one of Body and InputLocation.")
    if input_location is not None and not input_location.startswith("s3://"):
        return validation_error(f"InputLocation {input_location!r} is not an S3 URI (s3://bucket/key).")
    timeout = int(self.headers.get("X-Amzn-SageMaker-InvocationTimeoutSeconds") or ASYNC_TIMEOUT_S)
    if not 1 <= timeout <= ASYNC_MAX_TIMEOUT_S:
        return validation_error(f"InvocationTimeoutSeconds {timeout} is not between 1 and {ASYNC_MAX_TIMEOUT_S}.")
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


def answer(request: AsyncRequest) -> None:
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


def accept(request: AsyncRequest) -> None:
    """Queue `request`: answered in the background, as the endpoint's queue lets it."""
    with _pending_lock:
        _pending.append(request)
    # A daemon: a request still queued when the local AWS stops is lost with its instance.
    threading.Thread(target=answer, args=(request,), name=f"async-{request.inference_id}", daemon=True).start()
