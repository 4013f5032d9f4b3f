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

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from moto.sagemaker.exceptions import ValidationError as SageMakerValidationError

from local_aws.sagemaker import scaling

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


def _variant_ids(resource_id: str) -> tuple[str, str]:
    _, endpoint_name, _, variant_name = resource_id.split("/", 3)
    return endpoint_name, variant_name


def _component_name(resource_id: str) -> str:
    return resource_id.removeprefix("inference-component/")


@contextmanager
def _refused() -> Iterator[None]:
    """SageMaker's refusal (a resource it does not have) as the capacity's error."""
    try:
        yield
    except SageMakerValidationError as exc:
        raise CapacityError(exc.message) from exc


def _variant_capacity(resource_id: str, account: str, region: str) -> int:
    with _refused():
        return scaling.instance_count(account, region, *_variant_ids(resource_id))


def _set_variant_capacity(resource_id: str, count: int, account: str, region: str) -> None:
    with _refused():
        scaling.set_instance_count(account, region, *_variant_ids(resource_id), count)


def _component_capacity(resource_id: str, account: str, region: str) -> int:
    with _refused():
        return scaling.copy_count(account, region, _component_name(resource_id))


def _set_component_capacity(resource_id: str, count: int, account: str, region: str) -> None:
    with _refused():
        scaling.set_copy_count(account, region, _component_name(resource_id), count)


DIMENSIONS: dict[tuple[str, str], Dimension] = {
    ("sagemaker", VARIANT_INSTANCES): Dimension(_variant_capacity, _set_variant_capacity, "instance count"),
    ("sagemaker", COMPONENT_COPIES): Dimension(_component_capacity, _set_component_capacity, "copy count"),
}


def dimension(namespace: str, scalable_dimension: str) -> Dimension:
    found = DIMENSIONS.get((namespace, scalable_dimension))
    if found is None:
        raise CapacityError(f"The local AWS does not scale {namespace} {scalable_dimension}")
    return found


#: The service-linked role Application Auto Scaling scales a namespace's targets with when they are
#: registered without a RoleARN, by its path and name (the Application Auto Scaling User Guide,
#: "Service-linked role ARN reference").
SERVICE_LINKED_ROLES = {
    "sagemaker": "aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
    "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint",
}


def role_arn(given: str | None, namespace: str, account: str) -> str | None:
    """The role a target of `namespace` is scaled with: the RoleARN it was registered with, else
    the service's service-linked role (None for a namespace this does not know)."""
    if given or namespace not in SERVICE_LINKED_ROLES:
        return given or None
    return f"arn:aws:iam::{account}:role/{SERVICE_LINKED_ROLES[namespace]}"
