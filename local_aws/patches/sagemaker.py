"""SageMaker: endpoint configs and models as AWS accepts and keeps them, and endpoints that run
their model's container (the local hosting runtime: local_aws/runtime.py)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from moto.cloudformation.exceptions import ValidationError as CloudFormationValidationError
from moto.cloudwatch.models import cloudwatch_backends
from moto.core.responses import ActionResult
from moto.s3.models import s3_backends
from moto.sagemaker import models as sm_models
from moto.sagemaker.exceptions import ValidationError as SageMakerValidationError
from moto.sagemaker.models import FakeEndpointConfig
from moto.sagemaker.models import Model as SageMakerModel
from moto.sagemaker.responses import SageMakerResponse
from moto.utilities.utils import get_partition

from local_aws.patches.base import patch, replace, wrap_create
from local_aws.runtime import (
    ALL_AT_ONCE,
    DEFAULT_STARTUP_TIMEOUT_S,
    HOSTING,
    HostedEndpoint,
    Rollout,
    VariantSpec,
    lay_out,
)

# SageMaker hosting instance type names: ml.<family>.<size>.
_SAGEMAKER_INSTANCE_TYPE = re.compile(r"^ml\.[a-z][a-z0-9-]*\.(medium|large|[0-9]*xlarge)$")


@patch(
    """Endpoint configs accept the SageMaker instance types AWS launched after moto's fixed
    list was written (ml.g5, ml.g6, ml.p4d, ml.p5, ml.inf2, ...). Stock moto rejects them with
    a ValidationException, so a stack on ml.g5.xlarge could never deploy."""
)
def current_instance_types_are_accepted() -> None:
    validate = FakeEndpointConfig.validate_instance_type

    def validate_instance_type(self: Any, instance_type: str) -> None:
        if not _SAGEMAKER_INSTANCE_TYPE.match(instance_type):
            validate(self, instance_type)

    replace(FakeEndpointConfig, "validate_instance_type", validate_instance_type)


def _apply_network_isolation(model: Any, props: dict[str, Any], account_id: str, region_name: str) -> None:
    model.enable_network_isolation = props.get("EnableNetworkIsolation") in (True, "true")


@patch(
    """AWS::SageMaker::Model keeps EnableNetworkIsolation (the container gets no network
    access). Stock moto always reports it False, so the endpoint would look open."""
)
def model_network_isolation_is_kept() -> None:
    wrap_create(SageMakerModel, fix=_apply_network_isolation)


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


def _capacity(size: Mapping[str, Any], instances: int) -> float:
    """A CapacitySize as a share of the fleet (at least one instance's)."""
    if size.get("Type") == "INSTANCE_COUNT":
        return min(1.0, max(1, int(size["Value"])) / max(1, instances))
    return min(1.0, max(int(size["Value"]) / 100, 1 / max(1, instances)))


def _steps(step: float, bake_s: float) -> tuple[tuple[float, float], ...]:
    shares, share = [], 0.0
    while share < 1.0:
        share = min(1.0, share + step)
        shares.append((share, bake_s))
    return tuple(shares)


def rollout_of(deployment_config: Mapping[str, Any] | None, instances: int) -> Rollout:
    """How SageMaker moves traffic under a DeploymentConfig: blue/green all at once, canary or
    linear (each shift followed by WaitIntervalInSeconds of baking), or rolling batches (each
    baked as long); with none, all at once without baking."""
    if not deployment_config:
        return ALL_AT_ONCE
    alarms = tuple(
        str(a["AlarmName"]) for a in deployment_config.get("AutoRollbackConfiguration", {}).get("Alarms", [])
    )
    rolling = deployment_config.get("RollingUpdatePolicy")
    if rolling:
        wait = float(rolling.get("WaitIntervalInSeconds", 0))
        steps = _steps(_capacity(rolling["MaximumBatchSize"], instances), wait)
        timeout = rolling.get("MaximumExecutionTimeoutInSeconds")
    else:
        policy = deployment_config.get("BlueGreenUpdatePolicy", {})
        routing = policy.get("TrafficRoutingConfiguration", {"Type": "ALL_AT_ONCE"})
        wait = float(routing.get("WaitIntervalInSeconds", 0))
        kind = routing.get("Type", "ALL_AT_ONCE")
        if kind == "CANARY":
            steps = ((_capacity(routing["CanarySize"], instances), wait), (1.0, wait))
        elif kind == "LINEAR":
            steps = _steps(_capacity(routing["LinearStepSize"], instances), wait)
        else:
            steps = ((1.0, wait),)
        timeout = policy.get("MaximumExecutionTimeoutInSeconds")
    return Rollout(steps=steps, alarms=alarms, timeout_s=None if timeout is None else float(timeout))


def _alarm_states(account_id: str, region_name: str) -> Any:
    def states(names: tuple[str, ...]) -> dict[str, str]:
        alarms = cloudwatch_backends[account_id][region_name].alarms
        return {name: str(alarms[name].state_value) for name in names if name in alarms}

    return states


def _deploy(
    backend: Any, endpoint: Any, config_name: str, deployment_config: Mapping[str, Any] | None = None
) -> HostedEndpoint:
    key = (backend.account_id, backend.region_name, endpoint.endpoint_name)

    def settled(hosted: HostedEndpoint) -> None:
        endpoint.endpoint_status, endpoint.failure_reason = hosted.status, hosted.failure_reason
        if hosted.live is not None and hosted.live.config_name == config_name:
            # The endpoint describes the config it runs: the new one only once it took over.
            config = backend.endpoint_configs[config_name]
            endpoint.endpoint_config_name = config_name
            endpoint.production_variants = endpoint._process_production_variants(config.production_variants)

    endpoint.endpoint_status = "Creating" if HOSTING.find(key) is None else "Updating"
    variants = _variants(backend, config_name)
    instances = sum(int(v["InitialInstanceCount"]) for v in backend.endpoint_configs[config_name].production_variants)
    return HOSTING.deploy(
        key,
        config_name,
        variants,
        _fetch(backend.account_id, backend.region_name),
        settled,
        rollout=rollout_of(deployment_config, instances),
        alarm_states=_alarm_states(backend.account_id, backend.region_name),
    )


@patch(
    restores="""CreateEndpoint starts the model's container: the endpoint is Creating until it answers
    /ping within the variant's startup timeout, then InService, or Failed with the reason when
    the container exits or never answers. UpdateEndpoint starts the new config's containers and
    switches to them once they answer /ping (Updating until then; a failure leaves the endpoint
    InService on its config, with the reason); with a DeploymentConfig it shifts the traffic as
    its policy says (all at once, canary, linear or rolling batches), bakes after each shift
    and rolls back to the old config if one of its AutoRollbackConfiguration alarms is in
    ALARM meanwhile (deployment guardrails); DeleteEndpoint stops them. Stock moto marks every
    endpoint InService at once, with nothing behind it, and has no UpdateEndpoint."""
)
def endpoints_run_their_container() -> None:
    original = sm_models.SageMakerModelBackend.create_endpoint

    def create_endpoint(self: Any, endpoint_name: str, endpoint_config_name: str, tags: Any) -> Any:
        endpoint = original(self, endpoint_name, endpoint_config_name, tags)
        _deploy(self, endpoint, endpoint_config_name)
        return endpoint

    replace(sm_models.SageMakerModelBackend, "create_endpoint", create_endpoint)
    original_delete = sm_models.SageMakerModelBackend.delete_endpoint

    def delete_endpoint(self: Any, endpoint_name: str) -> None:
        original_delete(self, endpoint_name)
        HOSTING.delete((self.account_id, self.region_name, endpoint_name))

    replace(sm_models.SageMakerModelBackend, "delete_endpoint", delete_endpoint)

    def update_endpoint(
        self: Any, endpoint_name: str, endpoint_config_name: str, deployment_config: Mapping[str, Any] | None = None
    ) -> str:
        endpoint = self.endpoints.get(endpoint_name)
        if endpoint is None:
            arn = sm_models.FakeEndpoint.arn_formatter(endpoint_name, self.account_id, self.region_name)
            raise SageMakerValidationError(message=f"Could not find endpoint '{arn}'.")
        if endpoint_config_name not in self.endpoint_configs:
            raise SageMakerValidationError(message=f"Could not find endpoint configuration '{endpoint_config_name}'.")
        if endpoint.endpoint_status != "InService":
            raise SageMakerValidationError(
                message=f"Cannot update in-progress endpoint '{endpoint.arn}' ({endpoint.endpoint_status})."
            )
        _deploy(self, endpoint, endpoint_config_name, deployment_config)
        return str(endpoint.arn)

    replace(sm_models.SageMakerModelBackend, "update_endpoint", update_endpoint)

    def update_endpoint_action(self: Any) -> ActionResult:
        arn = self.sagemaker_backend.update_endpoint(
            self._get_param("EndpointName"), self._get_param("EndpointConfigName"), self._get_param("DeploymentConfig")
        )
        return ActionResult({"EndpointArn": arn})

    replace(SageMakerResponse, "update_endpoint", update_endpoint_action)


@patch(
    restores="""CloudFormation creates an AWS::SageMaker::Endpoint only once it is InService, and fails
    the resource (and the stack) when the endpoint fails; an update calls UpdateEndpoint with
    the template's DeploymentConfig and completes once the endpoint is InService again. Whether
    it also checks that the endpoint then runs the new config (and not the old one, after
    SageMaker rolled it back) is not documented (README, "Updates"): like Terraform's provider
    (hashicorp/terraform-provider-aws #48997), it is taken not to. Stock moto completes the
    resource at once, and updates by deleting the endpoint and creating it again."""
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
        backend: Any = sm_models.sagemaker_backends[account_id][region_name]  # with UpdateEndpoint, patched in
        config_name = cloudformation_json["Properties"]["EndpointConfigName"]
        endpoint = original_resource
        if config_name != endpoint.endpoint_config_name:
            # UpdateEndpoint with the template's update policy, then wait for the endpoint.
            deployment = cloudformation_json["Properties"].get("DeploymentConfig")
            backend.update_endpoint(endpoint.endpoint_name, config_name, deployment)
            _wait(account_id, region_name, endpoint.endpoint_name)
        return endpoint

    replace(sm_models.FakeEndpoint, "create_from_cloudformation_json", classmethod(create))
    replace(sm_models.FakeEndpoint, "update_from_cloudformation_json", classmethod(update))


def _wait(account_id: str, region_name: str, endpoint_name: str) -> None:
    """Until the endpoint settles; a Failed endpoint fails the resource (an update SageMaker
    rolled back leaves it InService, which the resource takes for done)."""
    hosted = HOSTING.find((account_id, region_name, endpoint_name))
    if hosted is None:
        return
    hosted.settled.wait()
    if hosted.status == "Failed":
        raise CloudFormationValidationError(endpoint_name, f"Endpoint {endpoint_name} failed: {hosted.failure_reason}")
