"""Capacity as SageMaker changes it (what Application Auto Scaling calls): a variant's instance
count (UpdateEndpointWeightsAndCapacities) and an inference component's copy count
(UpdateInferenceComponentRuntimeConfig), which the runtime matches by starting or stopping
containers (local_aws/sagemaker/runtime.py: ``Hosting.scale``). Meanwhile the endpoint (the component) is
Updating, its desired count the new one and its current count the containers that answer /ping
("When it receives the request, SageMaker sets the endpoint status to Updating. After updating
the endpoint, it sets the status to InService", the API reference of
UpdateEndpointWeightsAndCapacities); a component at zero copies answers no invocation."""

from __future__ import annotations

from typing import Any

from moto.sagemaker.exceptions import ValidationError as SageMakerValidationError
from moto.sagemaker.models import sagemaker_backends

from local_aws.sagemaker.arns import sagemaker_arn
from local_aws.sagemaker.components import InferenceComponent, component_or_error
from local_aws.sagemaker.runtime import Deployment, HostedEndpoint, hosting_plane


def _variant(endpoint: Any, name: str) -> dict[str, Any]:
    for variant in endpoint.production_variants:
        if variant["VariantName"] == name:
            return variant  # type: ignore[no-any-return]
    raise SageMakerValidationError(
        message=f'The variant name(s) "{name}" is/are not present within endpoint configuration '
        f'"{endpoint.endpoint_config_name}".'
    )


def _endpoint(backend: Any, name: str) -> Any:
    endpoint = backend.endpoints.get(name)
    if endpoint is None:
        arn = sagemaker_arn("endpoint", name, backend.account_id, backend.region_name)
        raise SageMakerValidationError(message=f'Could not find endpoint "{arn}".')
    return endpoint


def instance_count(account: str, region: str, endpoint_name: str, variant: str) -> int:
    """The variant's desired instance count."""
    found = _variant(_endpoint(sagemaker_backends[account][region], endpoint_name), variant)
    return int(found.get("DesiredInstanceCount") or 0)


def set_instance_count(account: str, region: str, endpoint_name: str, variant: str, count: int) -> None:
    """The variant's instance count set to `count` (its weight kept)."""
    endpoint = _endpoint(sagemaker_backends[account][region], endpoint_name)
    described = _variant(endpoint, variant)
    described["DesiredInstanceCount"] = count

    def changed(hosted: HostedEndpoint, deployment: Deployment, name: str) -> None:
        described["CurrentInstanceCount"] = deployment.ready(name)

    hosting_plane().scale((account, region, endpoint_name), variant, count, changed)


def copy_count(account: str, region: str, component: str) -> int:
    """The component's desired copy count."""
    return component_or_error(sagemaker_backends[account][region], component).copies


def set_copy_count(account: str, region: str, component: str, count: int) -> None:
    """The component's copy count set to `count`."""
    ic: InferenceComponent = component_or_error(sagemaker_backends[account][region], component)
    ic.copies = count

    def changed(hosted: HostedEndpoint, deployment: Deployment, name: str) -> None:
        ic.status = hosted.status

    ic.status = "Updating"
    hosting_plane().scale(ic.hosting_key, ic.variant_name, count, changed)


def current(hosting_key: tuple[str, str, str], variant: str) -> int:
    """The instances (copies) of `variant` that answer /ping."""
    hosted = hosting_plane().find(hosting_key)
    return hosted.live.ready(variant) if hosted is not None and hosted.live is not None else 0
