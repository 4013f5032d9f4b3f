"""SageMaker's control plane where the local AWS runs what moto only records: UpdateEndpoint,
CreateInferenceComponent, ListInferenceComponents, UpdateEndpointWeightsAndCapacities and
UpdateInferenceComponentRuntimeConfig, each whole (its refusals, with SageMaker's messages, and
what it starts). A patch reads moto's request and makes one call here
(local_aws/patches/sagemaker.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from moto.sagemaker.exceptions import ValidationError

from local_aws.sagemaker import adapters
from local_aws.sagemaker.arns import sagemaker_arn
from local_aws.sagemaker.components import InferenceComponent, component_or_error, components, deploy_component
from local_aws.sagemaker.hosting import deploy
from local_aws.sagemaker.runtime import HostedEndpoint, hosting_plane
from local_aws.sagemaker.scaling import set_copy_count, set_instance_count


def _endpoint(backend: Any, name: str) -> Any:
    """The endpoint named, or the component and capacity calls' refusal (UpdateEndpoint's quotes
    the ARN otherwise)."""
    endpoint = backend.endpoints.get(name)
    if endpoint is None:
        arn = sagemaker_arn("endpoint", name, backend.account_id, backend.region_name)
        raise ValidationError(message=f'Could not find endpoint "{arn}".')
    return endpoint


def update_endpoint(
    backend: Any, endpoint_name: str, endpoint_config_name: str, deployment_config: Mapping[str, Any] | None = None
) -> str:
    """UpdateEndpoint: the new config's containers started, the traffic moved to them as the
    DeploymentConfig says; the endpoint's ARN."""
    endpoint = backend.endpoints.get(endpoint_name)
    if endpoint is None:
        arn = sagemaker_arn("endpoint", endpoint_name, backend.account_id, backend.region_name)
        raise ValidationError(message=f"Could not find endpoint '{arn}'.")
    if endpoint_config_name not in backend.endpoint_configs:
        raise ValidationError(message=f"Could not find endpoint configuration '{endpoint_config_name}'.")
    if endpoint.endpoint_status != "InService":
        raise ValidationError(
            message=f"Cannot update in-progress endpoint '{endpoint.arn}' ({endpoint.endpoint_status})."
        )
    deploy(backend, endpoint, endpoint_config_name, deployment_config)
    return str(endpoint.arn)


def start_component(
    backend: Any,
    name: str,
    endpoint_name: str,
    variant_name: str | None,
    specification: Mapping[str, Any],
    runtime_config: Mapping[str, Any] | None,
) -> tuple[InferenceComponent, HostedEndpoint | None]:
    """The component made and started: a model's copies starting (the HostedEndpoint to wait
    on), or an adapter registered with its base's copies (None: InService or Failed already)."""
    account, region = backend.account_id, backend.region_name
    endpoint = _endpoint(backend, endpoint_name)
    if name in components(account, region):
        arn = sagemaker_arn("inference-component", name, account, region)
        raise ValidationError(message=f'Cannot create already existing inference component "{arn}".')
    if adapters.is_adapter(specification):
        return adapters.create(account, region, name, endpoint_name, endpoint.arn, specification), None
    ic = InferenceComponent(
        name=name,
        arn=sagemaker_arn("inference-component", name, account, region),
        endpoint_name=endpoint_name,
        endpoint_arn=endpoint.arn,
        variant_name=str(variant_name or "AllTraffic"),
        specification={},
        copies=int((runtime_config or {}).get("CopyCount", 1)),
    )
    components(account, region)[name] = ic
    return ic, deploy_base(ic, specification, None)


def deploy_base(
    ic: InferenceComponent, specification: Mapping[str, Any], deployment_config: Mapping[str, Any] | None
) -> HostedEndpoint:
    """A component's model deployed (or updated), each new copy given the component's adapters."""
    return deploy_component(ic, specification, deployment_config, on_ready=adapters.on_ready(ic))


def update_component(ic: InferenceComponent, properties: Mapping[str, Any]) -> HostedEndpoint | None:
    """An update of the component's properties (CloudFormation's): a new model rolled out (the
    HostedEndpoint to wait on), an adapter's new archive registered again (None)."""
    specification = properties["Specification"]
    if ic.base is not None:
        if specification != ic.specification:
            adapters.update(ic, specification)
        return None
    ic.endpoint_name = str(properties["EndpointName"])
    ic.variant_name = str(properties.get("VariantName") or ic.variant_name)
    ic.copies = int((properties.get("RuntimeConfig") or {}).get("CopyCount", ic.copies))
    hosted = hosting_plane().find(ic.hosting_key)
    running = hosted.live.config_name if hosted is not None and hosted.live is not None else None
    if specification.get("ModelName") == running:
        return None
    return deploy_base(ic, specification, properties.get("DeploymentConfig"))


def delete_component(ic: InferenceComponent) -> None:
    """The component's copies stopped (an adapter: unregistered from its base's), and forgotten."""
    account, region, _ = ic.hosting_key
    if ic.base is not None:
        adapters.remove(ic)
        return
    hosting_plane().delete(ic.hosting_key)
    components(account, region).pop(ic.name, None)


def list_inference_components(backend: Any, endpoint_name: str | None) -> list[dict[str, Any]]:
    """ListInferenceComponents' summaries (of one endpoint's, where named)."""
    return [
        {k: v for k, v in ic.describe().items() if k not in ("Specification", "RuntimeConfig", "FailureReason")}
        for ic in components(backend.account_id, backend.region_name).values()
        if endpoint_name in (None, ic.endpoint_name)
    ]


def update_endpoint_weights_and_capacities(
    backend: Any, endpoint_name: str, desired_weights_and_capacities: list[dict[str, Any]]
) -> str:
    """UpdateEndpointWeightsAndCapacities: each variant's weight kept, its instance count set
    (containers started or stopped); the endpoint's ARN."""
    endpoint = _endpoint(backend, endpoint_name)
    for wanted in desired_weights_and_capacities:
        variant = str(wanted["VariantName"])
        if "DesiredWeight" in wanted:
            for described in endpoint.production_variants:
                if described["VariantName"] == variant:
                    described["DesiredWeight"] = described["CurrentWeight"] = wanted["DesiredWeight"]
        if "DesiredInstanceCount" in wanted:
            count = int(wanted["DesiredInstanceCount"])
            set_instance_count(backend.account_id, backend.region_name, endpoint_name, variant, count)
    return str(endpoint.arn)


def update_inference_component_runtime_config(backend: Any, name: str, copy_count: int) -> str:
    """UpdateInferenceComponentRuntimeConfig: the copies started or stopped; the component's ARN."""
    set_copy_count(backend.account_id, backend.region_name, name, copy_count)
    return component_or_error(backend, name).arn
