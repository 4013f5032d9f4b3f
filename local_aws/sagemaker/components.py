"""Inference components: what SageMaker keeps of each (DescribeInferenceComponent's fields), in
the account's and region's components backend (moto's reset drops it with its own); their copies
run in the hosting runtime (local_aws/sagemaker/runtime.py) under the component's key."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from moto.cloudformation.exceptions import ValidationError as CloudFormationValidationError
from moto.core.base_backend import BackendDict, BaseBackend
from moto.sagemaker import models as sm_models
from moto.sagemaker.exceptions import ValidationError as SageMakerValidationError

from local_aws.sagemaker.arns import sagemaker_arn
from local_aws.sagemaker.containers import Container
from local_aws.sagemaker.hosting import alarm_states, fetch, rollout_of, variant_spec
from local_aws.sagemaker.logs import COMPONENT_GROUP
from local_aws.sagemaker.placement import Fleet, Need
from local_aws.sagemaker.runtime import HostedEndpoint, hosting_backends, hosting_plane


@dataclass
class InferenceComponent:
    """What DescribeInferenceComponent tells of a component."""

    name: str
    arn: str
    endpoint_name: str
    endpoint_arn: str
    variant_name: str
    specification: dict[str, Any]
    copies: int
    status: str = "Creating"
    failure_reason: str | None = None
    #: An adapter component's base (BaseInferenceComponentName): it runs in the base's copies.
    base: str | None = None
    created: datetime = field(default_factory=lambda: datetime.now(UTC))
    modified: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def hosting_key(self) -> tuple[str, str, str]:
        account, region = self.arn.split(":")[4], self.arn.split(":")[3]
        return account, region, component_key(self.name)

    @property
    def runs_in(self) -> tuple[str, str, str]:
        """The runtime key of the copies that serve it: its own, or its base's (an adapter's)."""
        account, region, _ = self.hosting_key
        return (account, region, component_key(self.base)) if self.base is not None else self.hosting_key

    def current_copies(self) -> int:
        """The copies that answer /ping (an adapter's: its base's)."""
        hosted = hosting_plane().find(self.runs_in)
        return hosted.live.ready(self.variant_name) if hosted is not None and hosted.live is not None else 0

    def describe(self) -> dict[str, Any]:
        found = {
            "InferenceComponentName": self.name,
            "InferenceComponentArn": self.arn,
            "EndpointName": self.endpoint_name,
            "EndpointArn": self.endpoint_arn,
            "VariantName": self.variant_name,
            "Specification": self.specification,
            "RuntimeConfig": {"DesiredCopyCount": self.copies, "CurrentCopyCount": self.current_copies()},
            "CreationTime": self.created,
            "LastModifiedTime": self.modified,
            "InferenceComponentStatus": self.status,
        }
        if self.failure_reason:
            found["FailureReason"] = self.failure_reason
        return found


def component_key(name: str) -> str:
    """The runtime's key of a component's containers (no endpoint name contains a slash)."""
    return f"inference-component/{name}"


class ComponentsBackend(BaseBackend):
    """An account's inference components in one region, by name."""

    def __init__(self, region_name: str, account_id: str) -> None:
        super().__init__(region_name, account_id)
        self.inference_components: dict[str, InferenceComponent] = {}


components_backends = BackendDict(ComponentsBackend, "sagemaker")


def components(account_id: str, region_name: str) -> dict[str, InferenceComponent]:
    """The account's components in the region."""
    return components_backends[account_id][region_name].inference_components


def deploy_component(
    ic: InferenceComponent,
    specification: Mapping[str, Any],
    deployment_config: Mapping[str, Any] | None,
    on_ready: Callable[[Container], None] | None = None,
) -> HostedEndpoint:
    """The component's model in its container, as SageMaker starts a copy; an update rolls copy
    by copy as its DeploymentConfig says and rolls back on its alarms."""
    account, region, _ = ic.hosting_key
    backend: Any = sm_models.sagemaker_backends[account][region]
    model_name = str(specification["ModelName"])
    model = backend._models.get(model_name)
    if model is None:
        arn = sagemaker_arn("model", model_name, account, region)
        raise SageMakerValidationError(message=f"Could not find model '{arn}'.")
    # Each copy writes its output to the component's log group, stream <instance-id> (local_aws/sagemaker/logs.py).
    startup = specification.get("StartupParameters") or {}
    spec = replace(
        variant_spec(model, ic.variant_name, startup, log_group=COMPONENT_GROUP.format(ic.name)),
        count=ic.copies,
        fleet=fleet_of(backend, ic),
        need=Need.of(specification.get("ComputeResourceRequirements")),
        on_ready=on_ready,
    )

    def settled(hosted: HostedEndpoint) -> None:
        ic.status, ic.failure_reason = hosted.status, hosted.failure_reason
        ic.modified = datetime.now(UTC)
        if hosted.live is not None and hosted.live.config_name == model_name:
            ic.specification = dict(specification)  # what the copies run: the new model once it took over

    ic.status = "Creating" if hosting_plane().find(ic.hosting_key) is None else "Updating"
    return hosting_plane().deploy(
        ic.hosting_key,
        model_name,
        [spec],
        fetch(account, region),
        settled,
        rollout=rollout_of(deployment_config, ic.copies),
        alarm_states=alarm_states(account, region),
    )


def fleet_of(backend: Any, ic: InferenceComponent) -> Fleet | None:
    """The instances of the component's endpoint variant its copies are placed on, kept in the
    hosting backend per endpoint, config and variant (made at the first copy); None when the
    endpoint or its variant is not found."""
    endpoint = backend.endpoints.get(ic.endpoint_name)
    config = backend.endpoint_configs.get(endpoint.endpoint_config_name) if endpoint is not None else None
    if config is None:
        return None
    variant = next((v for v in config.production_variants if v["VariantName"] == ic.variant_name), None)
    if variant is None:
        return None
    fleets = hosting_backends[backend.account_id][backend.region_name].fleets
    key = (ic.endpoint_name, str(config.endpoint_config_name), ic.variant_name)
    if key not in fleets:
        fleets[key] = Fleet.of(variant)
    return fleets[key]


def wait_component(ic: InferenceComponent, hosted: HostedEndpoint) -> None:
    hosted.settled.wait()
    if hosted.status == "Failed":
        raise CloudFormationValidationError(ic.name, f"Inference component {ic.name} failed: {hosted.failure_reason}")


def component_or_error(backend: Any, name: str) -> InferenceComponent:
    return component_named(backend.account_id, backend.region_name, name)


def component_named(account: str, region: str, name: str) -> InferenceComponent:
    """The account's component `name` in the region, or SageMaker's refusal."""
    ic = components(account, region).get(name)
    if ic is None:
        arn = sagemaker_arn("inference-component", name, account, region)
        raise SageMakerValidationError(message=f"Could not find inference component '{arn}'.")
    return ic
