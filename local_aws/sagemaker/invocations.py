"""Invocations of the local runtime's endpoints, as SageMaker's runtime makes them: the request
routed to the variant's (or the component's) container, its answer as InvokeEndpoint's, and the
container's chunked answer as InvokeEndpointWithResponseStream's event stream."""

from __future__ import annotations

import contextlib
import http.client
import time
import urllib.parse
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import Any

from moto.core.common_types import TYPE_RESPONSE
from moto.sagemaker.models import sagemaker_backends

from local_aws import eventstream
from local_aws.host import HOST
from local_aws.sagemaker.adapters import ADAPTER_HEADER
from local_aws.sagemaker.components import components
from local_aws.sagemaker.containers import Container
from local_aws.sagemaker.errors import model_error, no_response
from local_aws.sagemaker.metrics import Measured
from local_aws.sagemaker.runtime import INVOCATION_TIMEOUT_S, EndpointNotFound, RefusedInvocation, hosting_plane


def endpoint_name(self: Any) -> str:
    """The request's EndpointName: its path's, percent-decoded (moto keeps the path as it came)."""
    return urllib.parse.unquote(self.path.split("/")[2])


def is_async(account: str, region: str, name: str) -> bool:
    backend: Any = sagemaker_backends[account][region]
    endpoint = backend.endpoints.get(name)
    config = backend.endpoint_configs.get(endpoint.endpoint_config_name) if endpoint is not None else None
    return bool(config is not None and config.async_inference_config)


def target(key: tuple[str, str, str], headers: Mapping[str, str]) -> tuple[str, str, str]:
    """The runtime key an invocation goes to: the endpoint's, or its component's."""
    account, region, name = key
    hosted = hosting_plane().find(key)
    if hosted is None:
        raise EndpointNotFound(name)
    if is_async(account, region, name):
        # A real-time call to an asynchronous endpoint is a ValidationError (strands-agents/harness-sdk#1969;
        # the words are not quoted there).
        raise RefusedInvocation(f"Endpoint {name} is an asynchronous inference endpoint: call InvokeEndpointAsync.")
    if headers.get("X-Amzn-SageMaker-Target-Model"):
        # SageMaker's words (aws/amazon-sagemaker-examples#1026); no endpoint here hosts several models.
        raise RefusedInvocation(
            f"Endpoint {name} is not a multi-model endpoint and does not support target model header."
        )
    if headers.get("X-Amzn-SageMaker-Target-Container-Hostname"):
        raise RefusedInvocation(
            f"Endpoint {name} is not a multi-container endpoint with direct invocation and does not support target "
            "container hostname header."
        )
    component = headers.get("X-Amzn-SageMaker-Inference-Component")
    if component is None:
        if hosted.live is not None and not hosted.live.specs:
            raise RefusedInvocation(
                "Inference Component Name header is required for endpoints to which you plan to deploy inference "
                "components. Please include Inference Component Name header or consider using SageMaker models."
            )
        return key
    ic = components(account, region).get(component)
    if ic is None or ic.endpoint_name != name:
        raise RefusedInvocation(f"Inference component {component} not found on endpoint {name}.")
    if ic.base is not None and ic.status != "InService":
        # An adapter no copy of its base holds (the words are the local AWS's: AWS documents none).
        raise RefusedInvocation(f"Inference component {component} is {ic.status}, not InService.")
    return ic.runs_in


def _passed_on(headers: Mapping[str, str], adapter: str | None) -> dict[str, str]:
    """What of the caller's headers the container gets, and the adapter an invocation names."""
    sent = {k: headers[k] for k in PASSED_ON if headers.get(k)}
    return {**sent, ADAPTER_HEADER: adapter} if adapter is not None else sent


def adapter_named(key: tuple[str, str, str], headers: Mapping[str, str]) -> str | None:
    """The adapter component an invocation of endpoint `key` names, if it names one: the copy of
    its base gets the adapter's name in ADAPTER_HEADER."""
    component = headers.get("X-Amzn-SageMaker-Inference-Component")
    ic = components(key[0], key[1]).get(component) if component else None
    return ic.name if ic is not None and ic.base is not None else None


#: The request headers SageMaker hands the container besides the body's, and those of its answer
#: it hands back (the stateful sessions' ids among them: sagemaker/latest/dg/stateful-sessions.html).
PASSED_ON = ("X-Amzn-SageMaker-Custom-Attributes", "X-Amzn-SageMaker-Session-Id")
PASSED_BACK = (
    "X-Amzn-SageMaker-Custom-Attributes",
    "X-Amzn-SageMaker-New-Session-Id",
    "X-Amzn-SageMaker-Closed-Session-Id",
)


def forward(
    headers: Mapping[str, str],
    body: bytes,
    key: tuple[str, str, str],
    variant: str,
    container: Container,
    measured: Measured | None = None,
) -> TYPE_RESPONSE:
    """POST /invocations to the container as SageMaker does, and its answer as InvokeEndpoint's
    (`measured`: the container's part of it timed, its status kept)."""
    account, region, name = key
    sent = _passed_on(headers, adapter_named(key, headers))
    if measured is not None:
        measured.model_begins()
    try:
        answer = container.invoke(
            body,
            content_type=headers.get("Content-Type") or "application/octet-stream",
            accept=headers.get("Accept"),
            headers=sent,
            timeout=INVOCATION_TIMEOUT_S,
        )
    except OSError as exc:  # a timeout, or no answer (nothing listening, the connection reset or closed)
        if measured is not None:
            measured.model_ends(None)
        if not isinstance(getattr(exc, "reason", exc), TimeoutError):
            return no_response(variant, key)
        timed_out = f"Your invocation timed out while waiting for a response from container {variant}."
        return model_error(0, timed_out.encode(), name, account, region, variant)
    if measured is not None:
        measured.model_ends(answer.status)
    if answer.status >= 400:
        return model_error(answer.status, answer.body, name, account, region, variant)
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


# An event of the stream, not a ServiceException: the answer's 200 and headers are sent by then.
def stream_error(code: str, message: str) -> bytes:
    return eventstream.exception("ModelStreamError", {"Message": message, "ErrorCode": code})


def stream(
    headers: Mapping[str, str],
    body: bytes,
    key: tuple[str, str, str],
    route: contextlib.ExitStack,
    measure: Callable[[tuple[str, str, str], str, str | None], Measured | None] | None = None,
) -> TYPE_RESPONSE:
    """POST /invocations to the container of `route` (held until the stream ends) and its answer
    as InvokeEndpointWithResponseStream's: a status before the stream (ModelError), or 200 and
    the event stream. With `measure`, the invocation is measured (the container's part until the
    stream's end) and published when it is done."""
    account, region, name = key
    routed = route_args(key, headers)
    variant, container = route.enter_context(hosting_plane().route(*routed))
    adapter = adapter_named(key, headers)
    measured = measure(routed[0], variant, adapter) if measure is not None else None
    if measured is not None:
        route.callback(measured.publish)
        measured.model_begins()
    sent = {"Content-Type": headers.get("Content-Type") or "application/octet-stream", **_passed_on(headers, adapter)}
    if headers.get("X-Amzn-SageMaker-Accept"):
        sent["Accept"] = headers["X-Amzn-SageMaker-Accept"]
    connection = http.client.HTTPConnection("127.0.0.1", container.port, timeout=INVOCATION_TIMEOUT_S)
    route.callback(connection.close)
    try:
        connection.request("POST", "/invocations", body=body, headers=sent)
        answer = connection.getresponse()
    except TimeoutError:
        timed_out = f"Your invocation timed out while waiting for a response from container {variant}."
        return model_error(0, timed_out.encode(), name, account, region, variant)
    except (OSError, http.client.HTTPException):  # no answer: nothing listening, or the connection reset
        return no_response(variant, key)
    if measured is not None:
        measured.status = answer.status
        if answer.status >= 400:
            measured.model_ends(answer.status)
    if answer.status >= 400:
        try:
            text = answer.read(MAX_ERROR_BYTES)
        except (OSError, http.client.HTTPException):
            text = b""
        return model_error(answer.status, text, name, account, region, variant)
    out = {
        "Content-Type": "application/vnd.amazon.eventstream",
        "X-Amzn-SageMaker-Content-Type": answer.getheader("Content-Type") or "",
        "x-Amzn-Invoked-Production-Variant": variant,
    }
    attributes = answer.getheader("X-Amzn-SageMaker-Custom-Attributes")
    if attributes:
        out["X-Amzn-SageMaker-Custom-Attributes"] = attributes
    # moto's dispatch hands the body to a Flask Response as it is: an iterable is streamed.
    return 200, out, Stream(answer, connection, variant, route.pop_all(), measured)  # type: ignore[return-value]


def route_args(key: tuple[str, str, str], headers: Mapping[str, str]) -> tuple[tuple[str, str, str], str | None]:
    return target(key, headers), headers.get("X-Amzn-SageMaker-Target-Variant")


class Stream:
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
        measured: Measured | None = None,
    ) -> None:
        self._parts = parts(answer, connection, variant, measured)
        self._held = held

    def __iter__(self) -> Iterator[bytes]:
        return self._parts

    def close(self) -> None:
        try:
            self._parts.close()
        finally:
            self._held.close()


def parts(
    answer: http.client.HTTPResponse,
    connection: http.client.HTTPConnection,
    variant: str,
    measured: Measured | None = None,
) -> Generator[bytes]:
    """The answer's parts as events; `measured` learns when the model's stream ended, and how
    (None when it broke off or ran out of time)."""
    deadline = time.monotonic() + STREAM_TIMEOUT_S
    ended: int | None = None
    try:
        if not answer.chunked:
            # A whole answer (Content-Length): one part (the choice for what AWS does not
            # document, docs/LOCAL_AWS_STREAMING.md).
            set_timeout(connection, deadline)
            whole = answer.read()
            ended = answer.status
            yield from eventstream.payload_parts(whole)
            return
        while True:
            set_timeout(connection, deadline)
            data = answer.read1(PART_BYTES)
            if not data:
                ended = answer.status
                return
            yield eventstream.event("PayloadPart", data)
    except TimeoutError:
        # SageMaker's words, as a user reported them (re:Post "invoke-streaming-timeout-error").
        yield stream_error(
            "ModelInvocationTimeExceeded",
            f"Your model {variant} did not complete sending the inference response in the allotted time.",
        )
    except (OSError, http.client.HTTPException, ValueError):
        # The container closed or reset the connection before its answer's end (for a chunked
        # answer, before the last chunk).
        yield stream_error("StreamBroken", "The connection between SageMaker and the model was reset or closed.")
    except Exception as exc:  # the local AWS's own fault, after the stream began: the model's error for it
        HOST.faults.record("sagemakerruntime", f"the stream of variant {variant}", exc)
        yield eventstream.exception(
            "InternalStreamFailure", {"Message": "The stream processing failed because of an unknown error."}
        )
    finally:
        if measured is not None:
            measured.model_ends(ended)


def set_timeout(connection: http.client.HTTPConnection, deadline: float) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0 or connection.sock is None:
        raise TimeoutError
    connection.sock.settimeout(remaining)
