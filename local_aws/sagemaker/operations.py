"""The SageMaker runtime's three operations, whole: who may call, where the request goes, what it
is measured as, and how each refusal is answered. A patch parses moto's request into a
:class:`RuntimeRequest` and makes one call here (local_aws/patches/sagemakerruntime.py)."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any

from moto.core.common_types import TYPE_RESPONSE

from local_aws.sagemaker import async_inference, metrics
from local_aws.sagemaker.authorization import access_denied
from local_aws.sagemaker.errors import ValidationError, answer_refusal, unroutable
from local_aws.sagemaker.invocations import adapter_named, endpoint_name, forward, route_args, stream
from local_aws.sagemaker.runtime import NoCapacity, Unroutable, hosting_plane


@dataclass(frozen=True)
class RuntimeRequest:
    """One call of the runtime, as it came: the account and region it is signed for, the
    endpoint its path names, its headers and its body's bytes."""

    account: str
    region: str
    endpoint: str
    headers: Any
    body: bytes

    @classmethod
    def of(cls, response: Any) -> RuntimeRequest:
        """The request moto's response object holds."""
        return cls(response.current_account, response.region, endpoint_name(response), response.headers,
                   bytes(response.body or b""))  # fmt: skip

    @property
    def key(self) -> tuple[str, str, str]:
        return self.account, self.region, self.endpoint

    @property
    def component(self) -> str | None:
        return self.headers.get("X-Amzn-SageMaker-Inference-Component")  # type: ignore[no-any-return]


def invoke_endpoint(request: RuntimeRequest) -> TYPE_RESPONSE:
    """InvokeEndpoint: the container's answer, or SageMaker's refusal."""
    denied = access_denied(request.headers, request.account, request.region, "sagemaker:InvokeEndpoint",
                           request.endpoint, request.component)  # fmt: skip
    if denied is not None:
        return denied
    routed: tuple[tuple[str, str, str], str | None] = (request.key, None)
    try:
        routed = route_args(request.key, request.headers)
        with hosting_plane().route(*routed) as (variant, container):
            measured = metrics.measure(routed[0], variant, adapter_named(request.key, request.headers))
            answer = forward(request.headers, request.body, request.key, variant, container, measured)
        if measured is not None:
            measured.publish()
        return answer
    except NoCapacity as exc:
        metrics.found_no_capacity(*routed)
        return unroutable(exc, request.key)
    except Unroutable as exc:
        return unroutable(exc, request.key)


def invoke_endpoint_with_response_stream(request: RuntimeRequest) -> TYPE_RESPONSE:
    """InvokeEndpointWithResponseStream: the container's answer as an event stream, or
    SageMaker's refusal."""
    denied = access_denied(request.headers, request.account, request.region, "sagemaker:InvokeEndpoint",
                           request.endpoint, request.component)  # fmt: skip
    if denied is not None:
        return denied
    route = contextlib.ExitStack()
    with route:
        try:
            return stream(request.headers, request.body, request.key, route, metrics.measure)
        except NoCapacity as exc:
            metrics.found_no_capacity(*route_args(request.key, request.headers))
            return unroutable(exc, request.key)
        except Unroutable as exc:
            return unroutable(exc, request.key)


def invoke_endpoint_async(request: RuntimeRequest) -> TYPE_RESPONSE:
    """InvokeEndpointAsync: 202 with where the answer will be, the request queued."""
    denied = access_denied(request.headers, request.account, request.region, "sagemaker:InvokeEndpointAsync",
                           request.endpoint)  # fmt: skip
    if denied is not None:
        return denied
    try:
        queued = async_inference.async_request(request)
    except ValidationError as refused:
        return answer_refusal(refused)
    async_inference.accept(queued, metrics.async_answered)
    headers = {
        "status": "202",
        "X-Amzn-SageMaker-OutputLocation": queued.output_location,
        "X-Amzn-SageMaker-FailureLocation": queued.failure_location,
    }
    return 202, headers, json.dumps({"InferenceId": queued.inference_id})
