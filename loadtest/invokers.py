"""What one request is: an :class:`Invoker` sends it and returns once its answer is in, or raises.

The runner times each call, so an invoker that waits for more than one round trip (an
asynchronous endpoint: InvokeEndpointAsync, then polling the output location) measures
end-to-end latency the same way; its errors go through :func:`loadtest.stats.classify`.
Each client thread gets its own invoker from an :data:`InvokerFactory`, called in the main
thread before the level starts (building boto3 clients concurrently is not thread-safe).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from botocore.config import Config

from loadtest.request import Request

#: Above SageMaker's own 60 s limit on an invocation, so that its timeout (a ModelError) is what
#: a slow model gives, not ours.
DEFAULT_READ_TIMEOUT_S = 70.0
CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class StreamTiming:
    """When one streamed answer's tokens arrived, in seconds from the call."""

    token_times_s: tuple[float, ...]
    #: From the call to the stream's end.
    duration_s: float

    @property
    def first_token_s(self) -> float | None:
        return self.token_times_s[0] if self.token_times_s else None

    @property
    def gaps_s(self) -> list[float]:
        return [later - earlier for earlier, later in itertools.pairwise(self.token_times_s)]


class Invoker(Protocol):
    """Sends one request; a streaming invoker returns when its tokens arrived."""

    def __call__(self) -> StreamTiming | None: ...


InvokerFactory = Callable[[], Invoker]


@dataclass(frozen=True)
class Target:
    """What the requests go to: an endpoint, or one inference component of it."""

    endpoint: str
    inference_component: str | None = None

    def describe(self) -> dict[str, Any]:
        return {"endpoint": self.endpoint, "inference_component": self.inference_component}


def client_config(concurrency: int, read_timeout_s: float = DEFAULT_READ_TIMEOUT_S) -> Config:
    """A client that never retries: a throttled or failed request is counted, not hidden behind
    a retry's latency. Each thread has its own client, which holds one connection at a time; the
    pool is still sized to the concurrency so that an invoker sharing one client (a poller of
    asynchronous results) cannot queue behind it."""
    return Config(
        retries={"mode": "standard", "total_max_attempts": 1},
        max_pool_connections=max(10, concurrency),
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=read_timeout_s,
    )


class SageMakerInvoker:
    """InvokeEndpoint with the request file's body and headers; the answer is read in full."""

    def __init__(self, client: Any, target: Target, request: Request) -> None:
        self.client = client
        self.arguments: dict[str, Any] = {
            "EndpointName": target.endpoint,
            "Body": request.body,
            "ContentType": request.content_type,
        }
        optional = {
            "Accept": request.accept,
            "CustomAttributes": request.custom_attributes,
            "InferenceComponentName": target.inference_component,
        }
        self.arguments.update({key: value for key, value in optional.items() if value is not None})

    def __call__(self) -> StreamTiming | None:
        answer = self.client.invoke_endpoint(**self.arguments)
        answer["Body"].read()
        return None


def count_tokens(line: bytes) -> int:
    """The tokens one line of a streamed answer stands for: a JSON line with a "token" (this
    project's GPT-2 container), or a server-sent event's ``data:`` line other than ``[DONE]``
    (vLLM, TGI, LMI): one; any other line (an end or error line, an empty one): none."""
    text = line.strip()
    if text.startswith(b"data:"):
        return 0 if text[5:].strip() in (b"", b"[DONE]") else 1
    if text.startswith(b"{"):
        try:
            return 1 if "token" in json.loads(text) else 0
        except ValueError:
            return 0
    return 0


class StreamingInvoker(SageMakerInvoker):
    """InvokeEndpointWithResponseStream: the time each token arrived. Tokens are counted by line
    (count_tokens); an answer with no such line counts each PayloadPart as one token. An error
    event in the stream (ModelStreamError) raises, as a failed call does. The times are read off
    `clock` (seconds; a test gives one it controls), once when each part arrives."""

    def __init__(
        self, client: Any, target: Target, request: Request, *, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        super().__init__(client, target, request)
        self.clock = clock

    def __call__(self) -> StreamTiming:
        started = self.clock()
        answer = self.client.invoke_endpoint_with_response_stream(**self.arguments)
        times: list[float] = []
        parts: list[float] = []
        pending = b""
        for event in answer["Body"]:
            data = event.get("PayloadPart", {}).get("Bytes", b"")
            now = self.clock() - started
            parts.append(now)
            *lines, pending = (pending + data).split(b"\n")
            times.extend(now for line in lines for _ in range(count_tokens(line)))
        ended = self.clock() - started
        times.extend(ended for _ in range(count_tokens(pending)))
        return StreamTiming(tuple(times or parts), ended)


def sagemaker_invokers(
    target: Target,
    request: Request,
    config: Config,
    session: Any | None = None,
    region: str | None = None,
    *,
    stream: bool = False,
) -> InvokerFactory:
    """Invokers of InvokeEndpoint (InvokeEndpointWithResponseStream with `stream`), each with its
    own sagemaker-runtime client of `session` (default: a new boto3 session: the standard
    credential chain, AWS_REGION, AWS_ENDPOINT_URL)."""
    import boto3

    session = session or boto3.session.Session(region_name=region)
    kind = StreamingInvoker if stream else SageMakerInvoker
    return lambda: kind(session.client("sagemaker-runtime", config=config), target, request)


#: How often an asynchronous request's output and failure locations are looked at.
ASYNC_POLL_S = 0.2


class AsyncFailure(Exception):
    """SageMaker wrote the request's failure (its FailureLocation) instead of an answer."""


class AsyncTimeout(TimeoutError):
    """Neither the answer nor the failure appeared within the read timeout."""


class AsyncInvoker:
    """InvokeEndpointAsync of the request file's body (put once at `input_location`), then the
    output and failure locations polled until one of them exists: the time taken is the
    request's end-to-end latency, queueing included. A failure raises AsyncFailure with what
    SageMaker wrote; none within `timeout_s` raises AsyncTimeout."""

    def __init__(
        self,
        runtime: Any,
        s3: Any,
        target: Target,
        request: Request,
        input_location: str,
        *,
        timeout_s: float = DEFAULT_READ_TIMEOUT_S,
        poll_s: float = ASYNC_POLL_S,
    ) -> None:
        self.runtime, self.s3, self.timeout_s, self.poll_s = runtime, s3, timeout_s, poll_s
        self.arguments: dict[str, Any] = {
            "EndpointName": target.endpoint,
            "InputLocation": input_location,
            "ContentType": request.content_type,
            # SageMaker's limit on working on it: as long as the client waits, within 1 to 3600 s.
            "InvocationTimeoutSeconds": max(1, min(3600, int(timeout_s))),
            # A request the client gave up on must not stay queued (6 hours by default) ahead of
            # the next level's.
            "RequestTTLSeconds": max(60, min(21_600, int(timeout_s))),
        }
        optional = {"Accept": request.accept, "CustomAttributes": request.custom_attributes}
        self.arguments.update({key: value for key, value in optional.items() if value is not None})

    def __call__(self) -> None:
        answer = self.runtime.invoke_endpoint_async(**self.arguments)
        output, failure = answer["OutputLocation"], answer.get("FailureLocation")
        deadline = time.monotonic() + self.timeout_s
        while True:
            if self._exists(output):
                return
            if failure and self._exists(failure):
                raise AsyncFailure(self._read(failure)[:300])
            if time.monotonic() > deadline:
                raise AsyncTimeout(f"no answer at {output} after {self.timeout_s:g} s")
            time.sleep(self.poll_s)

    def _exists(self, url: str) -> bool:
        from botocore.exceptions import ClientError

        bucket, key = split_s3_url(url)
        try:
            self.s3.head_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise
        return True

    def _read(self, url: str) -> str:
        bucket, key = split_s3_url(url)
        return str(self.s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode(errors="replace"))


def split_s3_url(url: str) -> tuple[str, str]:
    """(bucket, key) of s3://bucket/key; ValueError for anything else."""
    if not url.startswith("s3://") or "/" not in url[5:]:
        raise ValueError(f"{url!r} is not an S3 URI such as s3://bucket/key")
    bucket, _, key = url[5:].partition("/")
    return bucket, key


def async_invokers(
    target: Target, request: Request, config: Config, input_location: str, session: Any, timeout_s: float
) -> InvokerFactory:
    """Invokers of InvokeEndpointAsync, each with its own sagemaker-runtime and S3 clients."""
    return lambda: AsyncInvoker(
        session.client("sagemaker-runtime", config=config),
        session.client("s3", config=config),
        target,
        request,
        input_location,
        timeout_s=timeout_s,
    )
