"""Asynchronous inference as SageMaker does it: a request queued per endpoint, its input (inline
or in S3) sent to the container, the answer or the failure written to S3 and announced on SNS;
every accepted request tracked until it is answered or failed."""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from moto.core.base_backend import BackendDict, BaseBackend
from moto.s3.models import s3_backends
from moto.sagemaker.models import sagemaker_backends
from moto.sns.models import sns_backends
from moto.utilities.utils import get_partition

from local_aws import host
from local_aws.sagemaker.errors import ValidationError
from local_aws.sagemaker.runtime import hosting_plane, split_s3_url

log = logging.getLogger("local_aws.sagemaker.async_inference")

#: Requests an async endpoint's instance works on at once when its config sets no
#: MaxConcurrentInvocationsPerInstance (SageMaker chooses).
DEFAULT_ASYNC_CONCURRENCY = 4
#: How long a request may wait in the queue (RequestTTLSeconds' default and largest, 6 hours).
REQUEST_TTL_S = 6 * 3600

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
    #: Requests each of the endpoint's instances works on at once (its MaxConcurrentInvocationsPerInstance).
    concurrency: int
    #: How long it may wait in the queue (RequestTTLSeconds).
    ttl_s: int = REQUEST_TTL_S
    #: When SageMaker received it, on the local AWS's clock (the queue's oldest request's age).
    received_at: datetime = field(default_factory=host.now)


def async_request(request: Any) -> AsyncRequest:
    """The request InvokeEndpointAsync describes (local_aws/sagemaker/operations.py's
    RuntimeRequest); ValidationError where AWS refuses it."""
    account, region, name = request.key
    backend: Any = sagemaker_backends[account][region]
    endpoint = backend.endpoints.get(name)
    if endpoint is None:
        raise ValidationError(f"Endpoint {name} of account {account} not found.")
    config = backend.endpoint_configs[endpoint.endpoint_config_name].async_inference_config or {}
    output = config.get("OutputConfig")
    if not output:
        raise ValidationError(f"Endpoint {name} is not an asynchronous inference endpoint.")
    hosted = hosting_plane().find(request.key)
    if hosted is None or hosted.status not in ("InService", "Updating"):
        raise ValidationError(f"Endpoint {name} is {endpoint.endpoint_status}, not InService")
    headers = request.headers
    input_location = headers.get("X-Amzn-SageMaker-InputLocation") or None
    inline = bytes(request.body) or None
    if (input_location is None) == (inline is None):
        # "Body and InputLocation are mutually exclusive. Provide exactly one of them." (the API
        # reference; the error's wording is not documented).
        raise ValidationError("Provide exactly one of Body and InputLocation.")
    if input_location is not None and not input_location.startswith("s3://"):
        raise ValidationError(f"InputLocation {input_location!r} is not an S3 URI (s3://bucket/key).")
    timeout = int(headers.get("X-Amzn-SageMaker-InvocationTimeoutSeconds") or ASYNC_TIMEOUT_S)
    if not 1 <= timeout <= ASYNC_MAX_TIMEOUT_S:
        raise ValidationError(f"InvocationTimeoutSeconds {timeout} is not between 1 and {ASYNC_MAX_TIMEOUT_S}.")
    inference_id = headers.get("X-Amzn-SageMaker-Inference-Id") or str(uuid.uuid4())
    notify = output.get("NotificationConfig") or {}
    # Where the answer goes: <path>[/<S3OutputPathExtension>]/<Filename, else <id>.out> (the API
    # reference describes both members, not how SageMaker joins them: this is the choice).
    extension = (headers.get("X-Amzn-SageMaker-S3OutputPathExtension") or "").strip("/")
    filename = headers.get("X-Amzn-SageMaker-Filename")

    def location(path: str, suffix: str) -> str:
        return "/".join(p for p in (path.rstrip("/"), extension, filename or f"{inference_id}{suffix}") if p)

    return AsyncRequest(
        key=request.key,
        inference_id=inference_id,
        input_location=input_location,
        inline=inline,
        content_type=headers.get("X-Amzn-SageMaker-Content-Type") or "application/octet-stream",
        accept=headers.get("X-Amzn-SageMaker-Accept"),
        custom_attributes=headers.get("X-Amzn-SageMaker-Custom-Attributes"),
        timeout_s=timeout,
        output_location=location(output["S3OutputPath"], ".out"),
        failure_location=location(output.get("S3FailurePath", output["S3OutputPath"]), "-error.out"),
        success_topic=notify.get("SuccessTopic"),
        error_topic=notify.get("ErrorTopic"),
        concurrency=int(
            (config.get("ClientConfig") or {}).get("MaxConcurrentInvocationsPerInstance") or DEFAULT_ASYNC_CONCURRENCY
        ),
        ttl_s=int(headers.get("X-Amzn-SageMaker-RequestTTLSeconds") or REQUEST_TTL_S),
    )


class AsyncQueues(BaseBackend):
    """The asynchronous requests of one account and region: those accepted and neither answered
    nor failed yet (two may share an InferenceId), and per endpoint how many its instances work
    on now. A request still queued when the backend is reset is lost with its instance."""

    def __init__(self, region_name: str, account_id: str) -> None:
        super().__init__(region_name, account_id)
        self._turn = threading.Condition()
        self._pending: list[AsyncRequest] = []
        self._working: dict[str, int] = {}

    def accepted(self, request: AsyncRequest) -> None:
        with self._turn:
            self._pending.append(request)

    def done(self, request: AsyncRequest) -> None:
        with self._turn:
            self._pending = [r for r in self._pending if r is not request]

    def pending(self, endpoint: str | None = None) -> list[AsyncRequest]:
        with self._turn:
            return [r for r in self._pending if endpoint is None or r.key[2] == endpoint]

    @contextmanager
    def turn(self, request: AsyncRequest) -> Iterator[None]:
        """The request's turn: at most `concurrency` requests per instance of the endpoint are
        worked on at once, the others wait theirs (queueing is part of an async latency), and
        with no instance every one waits: for the instance HasBacklogWithoutCapacity's alarm
        starts, or past its RequestTTLSeconds (then it fails)."""
        name = request.key[2]
        deadline = time.monotonic() + request.ttl_s
        with self._turn:
            while self._working.get(name, 0) >= request.concurrency * _instances(request.key):
                if time.monotonic() > deadline:
                    raise _Failed(f"Request {request.inference_id} expired after {request.ttl_s} s in the queue.")
                self._turn.wait(0.2)
            self._working[name] = self._working.get(name, 0) + 1
        try:
            yield
        finally:
            with self._turn:
                self._working[name] -= 1
                self._turn.notify_all()


async_backends = BackendDict(AsyncQueues, "sagemaker")


def pending_async(key: tuple[str, str, str] | None = None) -> list[AsyncRequest]:
    """The async requests (of endpoint `key`, else all) accepted and not yet answered or failed."""
    if key is not None:
        account, region, name = key
        return async_backends[account][region].pending(name)
    return [r for regions in list(async_backends.values()) for q in list(regions.values()) for r in q.pending()]


def _instances(key: tuple[str, str, str]) -> int:
    hosted = hosting_plane().find(key)
    deployment = hosted.live if hosted is not None else None
    return sum(deployment.ready(v) for v in deployment.specs) if deployment is not None else 0


#: Told of each request done (request, timing, failed, seconds from receipt to notice): the
#: metrics SageMaker publishes of it (local_aws/sagemaker/metrics.py `async_answered`).
Answered = Callable[[AsyncRequest, "_Timing", bool, float], None]


def answer(request: AsyncRequest, answered: Answered | None = None) -> None:
    """What SageMaker does with a queued request: once the endpoint takes it, the input read
    from S3, sent to the container, its answer written to the output location (or the reason to
    the failure location) and announced on the success (or error) topic; then `answered` is told.
    A request whose account is gone meanwhile (the local AWS reset or stopped) is dropped with a
    warning."""
    account, region, _ = request.key
    try:
        _answer_queued(request, answered)
    finally:
        async_backends[account][region].done(request)


def _answer_queued(request: AsyncRequest, answered: Answered | None) -> None:
    account, region, name = request.key
    s3 = s3_backends[account][get_partition(region)]
    received, waited = datetime.now(UTC), time.monotonic()
    timing = _Timing()
    try:
        with async_backends[account][region].turn(request):
            timing.queued_s = time.monotonic() - waited
            answer = _invoke_async(request, s3, timing)
        location, data, topic, reason = request.output_location, answer, request.success_topic, None
    except Exception as exc:  # every failure is the request's, reported where SageMaker reports it
        location, data, topic = request.failure_location, str(exc).encode(), request.error_topic
        reason = str(exc)
    try:
        out_bucket, out_key = split_s3_url(location)
        uploading = time.monotonic()
        s3.put_object(out_bucket, out_key, data)
        timing.upload_s = time.monotonic() - uploading
        if topic:
            notification = _notification(request, received, location, reason)
            sns_backends[account][region].publish(json.dumps(notification), arn=topic)
    except Exception as exc:  # a background thread: nothing above it to tell
        log.warning("async request %s of %s dropped: %s", request.inference_id, name, exc)
    if answered is not None:
        answered(request, timing, reason is not None, time.monotonic() - waited)


@dataclass
class _Timing:
    """What SageMaker times of an async request: its time in the queue, reading its input, the
    container's answer (its status), writing the answer."""

    queued_s: float = 0.0
    download_s: float = 0.0
    upload_s: float = 0.0
    variant: str | None = None
    status: int | None = None
    model_s: float | None = None


def _invoke_async(request: AsyncRequest, s3: Any, timing: _Timing) -> bytes:
    reading = time.monotonic()
    body = request.inline if request.inline is not None else _read_input(s3, str(request.input_location))
    timing.download_s = time.monotonic() - reading
    with hosting_plane().route(request.key) as (variant, container):
        timing.variant = variant
        attributes = request.custom_attributes
        sent = {"X-Amzn-SageMaker-Custom-Attributes": attributes} if attributes else {}
        started = time.monotonic()
        answer = container.invoke(
            body, content_type=request.content_type, accept=request.accept, headers=sent, timeout=request.timeout_s
        )
        timing.status, timing.model_s = answer.status, time.monotonic() - started
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


def accept(request: AsyncRequest, answered: Answered | None = None) -> None:
    """Queue `request`: answered in the background, as the endpoint's queue lets it, then
    `answered` told."""
    account, region, _ = request.key
    async_backends[account][region].accepted(request)
    # A daemon: a request still queued when the local AWS stops is lost with its instance.
    threading.Thread(target=answer, args=(request, answered), name=f"async-{request.inference_id}",
                     daemon=True).start()  # fmt: skip
