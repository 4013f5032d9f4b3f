"""SageMaker runtime: InvokeEndpoint answered by the endpoint's container (local_aws/runtime.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from moto.core.common_types import TYPE_RESPONSE
from moto.sagemakerruntime.responses import SageMakerRuntimeResponse

from local_aws.containers import Container
from local_aws.patches.base import patch, replace
from local_aws.runtime import HOSTING, INVOCATION_TIMEOUT_S, EndpointNotFound, NotInService

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
    service is a ValidationError; no answer within 60 s is a ModelError. Stock moto answers every
    invocation with canned text."""
)
def invocations_reach_the_container() -> None:
    def invoke_endpoint(self: Any) -> TYPE_RESPONSE:
        name = self._get_params().get("EndpointName") or self.path.split("/")[2]
        body = self.body if isinstance(self.body, bytes) else str(self.body or "").encode()
        if len(body) > MAX_PAYLOAD_BYTES:
            return _validation_error(f"Request payload of {len(body)} bytes exceeds the limit of {MAX_PAYLOAD_BYTES}")
        key = (self.current_account, self.region, name)
        try:
            with HOSTING.route(key, self.headers.get("X-Amzn-SageMaker-Target-Variant")) as (variant, container):
                return _forward(self.headers, body, key, variant, container)
        except EndpointNotFound:
            return _validation_error(f"Endpoint {name} of account {self.current_account} not found.")
        except NotInService as exc:
            return _validation_error(str(exc))

    replace(SageMakerRuntimeResponse, "invoke_endpoint", invoke_endpoint)


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
