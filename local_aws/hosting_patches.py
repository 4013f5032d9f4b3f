"""moto's SageMaker endpoints, and its SageMaker runtime, with the local hosting runtime behind
them (local_aws/runtime.py). Each patch says which AWS behaviour it restores."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from moto.cloudformation.exceptions import ValidationError as CloudFormationValidationError
from moto.core.common_types import TYPE_RESPONSE
from moto.s3.models import s3_backends
from moto.sagemaker import models as sm_models
from moto.sagemakerruntime.responses import SageMakerRuntimeResponse
from moto.utilities.utils import get_partition

from local_aws.patches import _replace, patch
from local_aws.runtime import (
    DEFAULT_STARTUP_TIMEOUT_S,
    HOSTING,
    INVOCATION_TIMEOUT_S,
    EndpointNotFound,
    HostedEndpoint,
    NotInService,
    VariantSpec,
    lay_out,
)

#: SageMaker's largest InvokeEndpoint payload.
MAX_PAYLOAD_BYTES = 6 * 1024 * 1024


def _variants(backend: Any, config_name: str) -> list[VariantSpec]:
    """The containers an endpoint config asks for, read from moto's backend."""
    config = backend.endpoint_configs[config_name]
    specs = []
    for variant in config.production_variants:
        model = backend._models[variant["ModelName"]]
        container = dict(model.primary_container or {})
        specs.append(
            VariantSpec(
                variant=variant["VariantName"],
                image=str(container.get("Image", "")),
                environment={str(k): str(v) for k, v in (container.get("Environment") or {}).items()},
                model_data={k: container[k] for k in ("ModelDataUrl", "ModelDataSource") if k in container},
                startup_timeout_s=int(
                    variant.get("ContainerStartupHealthCheckTimeoutInSeconds") or DEFAULT_STARTUP_TIMEOUT_S
                ),
            )
        )
    return specs


def _fetch(account_id: str, region_name: str) -> Any:
    s3 = s3_backends[account_id][get_partition(region_name)]

    def fetch(model_data: Mapping[str, Any], folder: Path) -> None:
        lay_out(
            model_data,
            folder,
            read=lambda bucket, key: bytes(s3.get_object(bucket, key).value),  # type: ignore[union-attr]
            keys=lambda bucket, prefix: sorted(k for k in s3.get_bucket(bucket).keys if k.startswith(prefix)),
        )

    return fetch


def _deploy(backend: Any, endpoint: Any, config_name: str) -> HostedEndpoint:
    key = (backend.account_id, backend.region_name, endpoint.endpoint_name)

    def settled(hosted: HostedEndpoint) -> None:
        endpoint.endpoint_status, endpoint.failure_reason = hosted.status, hosted.failure_reason

    endpoint.endpoint_status = "Creating" if HOSTING.find(key) is None else "Updating"
    return HOSTING.deploy(
        key, config_name, _variants(backend, config_name), _fetch(backend.account_id, backend.region_name), settled
    )


@patch(
    restores="""CreateEndpoint starts the model's container: the endpoint is Creating until it answers
    /ping within the variant's startup timeout, then InService, or Failed with the reason when
    the container exits or never answers. Stock moto marks every endpoint InService at once, with
    nothing behind it."""
)
def endpoints_run_their_container() -> None:
    original = sm_models.SageMakerModelBackend.create_endpoint

    def create_endpoint(self: Any, endpoint_name: str, endpoint_config_name: str, tags: Any) -> Any:
        endpoint = original(self, endpoint_name, endpoint_config_name, tags)
        _deploy(self, endpoint, endpoint_config_name)
        return endpoint

    _replace(sm_models.SageMakerModelBackend, "create_endpoint", create_endpoint)
    original_delete = sm_models.SageMakerModelBackend.delete_endpoint

    def delete_endpoint(self: Any, endpoint_name: str) -> None:
        original_delete(self, endpoint_name)
        HOSTING.delete((self.account_id, self.region_name, endpoint_name))

    _replace(sm_models.SageMakerModelBackend, "delete_endpoint", delete_endpoint)


@patch(
    restores="""CloudFormation creates an AWS::SageMaker::Endpoint only once it is InService, and fails
    the resource (and the stack) when the endpoint fails; an update deploys the new endpoint
    config beside the old one, switches once it is healthy, and fails (the endpoint keeping the
    old config) when it is not. Stock moto completes the resource at once, and updates by
    deleting the endpoint and creating it again."""
)
def stack_waits_for_endpoints() -> None:
    original_create = sm_models.FakeEndpoint.create_from_cloudformation_json.__func__  # type: ignore[attr-defined]

    def create(
        cls: Any, /, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kw: Any
    ) -> Any:
        endpoint = original_create(cls, resource_name, cloudformation_json, account_id, region_name, **kw)
        _wait(account_id, region_name, endpoint.endpoint_name)
        return endpoint

    def update(
        cls: Any,
        /,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
    ) -> Any:
        backend = sm_models.sagemaker_backends[account_id][region_name]
        config_name = cloudformation_json["Properties"]["EndpointConfigName"]
        endpoint = original_resource
        if config_name != endpoint.endpoint_config_name:
            _deploy(backend, endpoint, config_name)
            _wait(account_id, region_name, endpoint.endpoint_name)
            config = backend.endpoint_configs[config_name]
            endpoint.endpoint_config_name = config_name
            endpoint.production_variants = endpoint._process_production_variants(config.production_variants)
        return endpoint

    _replace(sm_models.FakeEndpoint, "create_from_cloudformation_json", classmethod(create))
    _replace(sm_models.FakeEndpoint, "update_from_cloudformation_json", classmethod(update))


def _wait(account_id: str, region_name: str, endpoint_name: str) -> None:
    hosted = HOSTING.find((account_id, region_name, endpoint_name))
    if hosted is None:
        return
    hosted.settled.wait()
    if hosted.failure_reason is not None:
        raise CloudFormationValidationError(endpoint_name, f"Endpoint {endpoint_name} failed: {hosted.failure_reason}")


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
        account, region = self.current_account, self.region
        body = self.body if isinstance(self.body, bytes) else str(self.body or "").encode()
        if len(body) > MAX_PAYLOAD_BYTES:
            return _validation_error(f"Request payload of {len(body)} bytes exceeds the limit of {MAX_PAYLOAD_BYTES}")
        try:
            variant, container = HOSTING.container(
                (account, region, name), self.headers.get("X-Amzn-SageMaker-Target-Variant")
            )
        except EndpointNotFound:
            return _validation_error(f"Endpoint {name} of account {account} not found.")
        except NotInService as exc:
            return _validation_error(str(exc))
        headers = {}
        if self.headers.get("X-Amzn-SageMaker-Custom-Attributes"):
            headers["X-Amzn-SageMaker-Custom-Attributes"] = self.headers["X-Amzn-SageMaker-Custom-Attributes"]
        try:
            answer = container.invoke(
                body,
                content_type=self.headers.get("Content-Type") or "application/octet-stream",
                accept=self.headers.get("Accept"),
                headers=headers,
                timeout=INVOCATION_TIMEOUT_S,
            )
        except OSError:  # a timeout, or nothing listening any more
            return _model_error(
                0,
                f"Your invocation timed out while waiting for a response from container {variant}.".encode(),
                name,
                account,
                region,
                variant,
            )
        if answer.status >= 400:
            return _model_error(answer.status, answer.body, name, account, region, variant)
        out = {"Content-Type": answer.content_type, "x-Amzn-Invoked-Production-Variant": variant}
        attributes = {k.lower(): v for k, v in answer.headers.items()}.get("x-amzn-sagemaker-custom-attributes")
        if attributes:
            out["X-Amzn-SageMaker-Custom-Attributes"] = attributes
        return 200, out, answer.body

    _replace(SageMakerRuntimeResponse, "invoke_endpoint", invoke_endpoint)
