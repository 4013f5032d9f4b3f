"""The capacity of the scalable dimensions the local AWS can scale, read and set as Application
Auto Scaling does on AWS: through the service that owns the resource. SageMaker's two
(Application Auto Scaling's service-linked role for SageMaker calls
UpdateEndpointWeightsAndCapacities and UpdateInferenceComponentRuntimeConfig):

* ``sagemaker:variant:DesiredInstanceCount`` of ``endpoint/<endpoint>/variant/<variant>``: the
  variant's DesiredInstanceCount in DescribeEndpoint;
* ``sagemaker:inference-component:DesiredCopyCount`` of ``inference-component/<name>``: the
  component's DesiredCopyCount in DescribeInferenceComponent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from moto.sagemaker.models import sagemaker_backends

VARIANT_INSTANCES = "sagemaker:variant:DesiredInstanceCount"
COMPONENT_COPIES = "sagemaker:inference-component:DesiredCopyCount"


class CapacityError(LookupError):
    """The resource of a scalable target cannot be scaled (it does not exist)."""


@dataclass(frozen=True)
class Dimension:
    """How to read and set one scalable dimension's capacity: (resource id, account, region)."""

    capacity: Callable[[str, str, str], int]
    set_capacity: Callable[[str, int, str, str], None]
    #: What the dimension counts, as scaling activities say it ("instance count").
    noun: str


def _variant(resource_id: str, account: str, region: str) -> tuple[Any, dict[str, Any]]:
    _, endpoint_name, _, variant_name = resource_id.split("/", 3)
    endpoint = sagemaker_backends[account][region].endpoints.get(endpoint_name)
    if endpoint is None:
        raise CapacityError(f"Could not find endpoint {endpoint_name}")
    for variant in endpoint.production_variants:
        if variant["VariantName"] == variant_name:
            return endpoint, variant
    raise CapacityError(f"Endpoint {endpoint_name} has no variant {variant_name}")


def _variant_capacity(resource_id: str, account: str, region: str) -> int:
    _, variant = _variant(resource_id, account, region)
    return int(variant.get("DesiredInstanceCount") or 0)


def _set_variant_capacity(resource_id: str, count: int, account: str, region: str) -> None:
    endpoint, variant = _variant(resource_id, account, region)
    wanted = {"VariantName": variant["VariantName"], "DesiredInstanceCount": count}
    if variant.get("DesiredWeight") is not None:
        wanted["DesiredWeight"] = variant["DesiredWeight"]
    sagemaker_backends[account][region].update_endpoint_weights_and_capacities(endpoint.endpoint_name, [wanted])


def _component(resource_id: str, account: str, region: str) -> Any:
    name = resource_id.removeprefix("inference-component/")
    # The components the local AWS's SageMaker keeps on its backend (local_aws/sagemaker/components.py).
    found = getattr(sagemaker_backends[account][region], "inference_components", {}).get(name)
    if found is None:
        raise CapacityError(f"Could not find inference component {name}")
    return found


def _component_capacity(resource_id: str, account: str, region: str) -> int:
    return int(_component(resource_id, account, region).copies)


def _set_component_capacity(resource_id: str, count: int, account: str, region: str) -> None:
    _component(resource_id, account, region).copies = count


DIMENSIONS: dict[tuple[str, str], Dimension] = {
    ("sagemaker", VARIANT_INSTANCES): Dimension(_variant_capacity, _set_variant_capacity, "instance count"),
    ("sagemaker", COMPONENT_COPIES): Dimension(_component_capacity, _set_component_capacity, "copy count"),
}


def dimension(namespace: str, scalable_dimension: str) -> Dimension:
    found = DIMENSIONS.get((namespace, scalable_dimension))
    if found is None:
        raise CapacityError(f"The local AWS does not scale {namespace} {scalable_dimension}")
    return found
