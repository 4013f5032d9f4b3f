"""SageMaker: endpoint configs and models as AWS accepts and keeps them, and endpoints that run
their model's container (the local hosting runtime: local_aws/runtime.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from moto.cloudformation.exceptions import ValidationError as CloudFormationValidationError
from moto.cloudwatch.models import cloudwatch_backends
from moto.core.responses import ActionResult
from moto.iam.exceptions import NotFoundException as IamNotFound
from moto.iam.models import iam_backends
from moto.kms.models import kms_backends
from moto.s3.models import s3_backends
from moto.sagemaker import models as sm_models
from moto.sagemaker.exceptions import ValidationError as SageMakerValidationError
from moto.sagemaker.models import FakeEndpointConfig
from moto.sagemaker.models import Model as SageMakerModel
from moto.sagemaker.responses import SageMakerResponse
from moto.utilities.utils import get_partition

from local_aws.containers import ContainerError
from local_aws.patches.base import EmulatedResource, patch, register_types, replace, wrap_create
from local_aws.policies import Caller, Decision, evaluate, first_denial, role_caller
from local_aws.runtime import (
    ALL_AT_ONCE,
    DEFAULT_STARTUP_TIMEOUT_S,
    HOSTING,
    HostedEndpoint,
    Rollout,
    VariantSpec,
    lay_out,
    split_s3_url,
)
from local_aws.sagemaker.arns import sagemaker_arn
from local_aws.sagemaker.components import InferenceComponent, components

# SageMaker hosting instance type names: ml.<family>.<size>.
_SAGEMAKER_INSTANCE_TYPE = re.compile(r"^ml\.[a-z][a-z0-9-]*\.(medium|large|[0-9]*xlarge)$")


@patch(
    restores="""SageMaker writes the names of endpoints and inference components (and of models
    and endpoint configs) in lower case in their ARNs (EndpointArn of DescribeEndpoint, CloudFormation's
    Ref of an endpoint), and IAM compares ARNs as written: a grant formatted from the
    mixed-case name matches nothing (philschmid/cdk-samples#2, AWS_FACTS.md). Stock moto keeps
    the name's case."""
)
def hosting_arns_are_lower_cased() -> None:
    replace(sm_models, "arn_formatter", sagemaker_arn)

    def delete_endpoint(
        cls: Any, /, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str
    ) -> None:
        # The physical id is the ARN, whose name is lower-cased: the endpoint is found by its ARN.
        backend: Any = sm_models.sagemaker_backends[account_id][region_name]
        named = [e.endpoint_name for e in backend.endpoints.values() if e.arn == resource_name]
        backend.delete_endpoint(named[0] if named else resource_name.split("/")[-1])

    replace(sm_models.FakeEndpoint, "delete_from_cloudformation_json", classmethod(delete_endpoint))


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
    return [
        _spec(backend._models[variant["ModelName"]], variant["VariantName"], variant)
        for variant in config.production_variants
        # A variant without a model holds the instances of inference components, which bring theirs.
        if "ModelName" in variant
    ]


def _spec(model: Any, variant: str, startup: Mapping[str, Any]) -> VariantSpec:
    """What the runtime starts for `model` on `variant`, with the startup timeout `startup`
    (a production variant, or a component's StartupParameters) sets."""
    container = dict(model.primary_container or {})
    return VariantSpec(
        variant=variant,
        image=str(container.get("Image", "")),
        environment={str(k): str(v) for k, v in (container.get("Environment") or {}).items()},
        model_data={k: container[k] for k in ("ModelDataUrl", "ModelDataSource") if k in container},
        startup_timeout_s=int(startup.get("ContainerStartupHealthCheckTimeoutInSeconds") or DEFAULT_STARTUP_TIMEOUT_S),
        refused=_refused(model, container),
    )


def _refused(model: Any, container: Mapping[str, Any]) -> str | None:
    """Why SageMaker, acting as the model's execution role, could not pull the image or read
    the model data (the role's policies, the bucket's, the key's), else None. A role the
    account does not have is not evaluated (the local AWS's own tests name roles they never
    create; AWS refuses such a model at CreateModel)."""
    region, account = model.arn.split(":")[3:5]
    partition = get_partition(region)
    try:
        role = iam_backends[account][partition].get_role_by_arn(model.execution_role_arn)
    except IamNotFound:
        return None
    caller = role_caller(role, account, session=f"arn:{partition}:sts::{account}:assumed-role/{role.name}/SageMaker")
    image = str(container.get("Image", ""))
    pulled = _pull_refused(caller, image, partition)
    if pulled is not None:
        return pulled
    data = {k: container[k] for k in ("ModelDataUrl", "ModelDataSource") if k in container}
    decision = first_denial(_reads(caller, data, account, partition))
    if decision.allowed:
        return None
    url = data.get("ModelDataUrl") or data["ModelDataSource"]["S3DataSource"]["S3Uri"]
    # AWS's reason for model data it cannot download (its wording), with IAM's denial after it.
    return (
        f'Failed to download model data for container "container_1" from URL: "{url}". Please ensure that there is '
        f"an object located at the URL and that the role passed to CreateModel has permissions to download the "
        f"model. {decision.message}"
    )


def _pull_refused(caller: Caller, image: str, partition: str) -> str | None:
    """SageMaker's reason when the role may not pull `image` from ECR (its registry's repository
    policy is AWS's or the account's own: only the role's side is evaluated)."""
    found = re.fullmatch(r"(\d{12})\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com[^/]*/([^:@]+)[:@].*", image)
    if found is None:
        return None
    registry, region, repository = found.groups()
    arn = f"arn:{partition}:ecr:{region}:{registry}:repository/{repository}"
    for action, resource in (("ecr:GetAuthorizationToken", "*"), ("ecr:BatchGetImage", arn),
                             ("ecr:GetDownloadUrlForLayer", arn)):  # fmt: skip
        if not evaluate(caller, action, resource).allowed:
            name = action.split(":")[1]
            return f"The role '{caller.arn}' does not have {name} permission for the image: '{image}'."
    return None


def _reads(caller: Caller, data: Mapping[str, Any], account: str, partition: str) -> Iterator[Decision]:
    """The decisions on each S3 (and KMS) call SageMaker makes to download the model data."""
    s3 = s3_backends[account][partition]
    if "ModelDataUrl" in data:
        bucket, key = split_s3_url(data["ModelDataUrl"])
        objects = [key]
    elif "S3DataSource" in data.get("ModelDataSource", {}):
        source = data["ModelDataSource"]["S3DataSource"]
        bucket, prefix = split_s3_url(source["S3Uri"])
        if source.get("S3DataType") != "S3Prefix":
            objects = [prefix]
        else:
            yield _s3(caller, "s3:ListBucket", bucket, None, s3, {"s3:prefix": prefix})
            objects = sorted(k for k in getattr(s3.buckets.get(bucket), "keys", {}) if k.startswith(prefix))
    else:
        return
    for key in objects:
        yield _s3(caller, "s3:GetObject", bucket, key, s3, {})
        stored = s3.buckets[bucket].keys.get(key) if bucket in s3.buckets else None
        if stored is not None and stored.encryption == "aws:kms" and stored.kms_key_id:
            key_id = str(stored.kms_key_id)
            region = key_id.split(":")[3] if key_id.startswith("arn:") else s3.buckets[bucket].region_name
            kms_key = kms_backends[account][region].describe_key(key_id)
            yield evaluate(caller, "kms:Decrypt", kms_key.arn, resource_policy=kms_key.policy, key_policy=True)


def _s3(caller: Caller, action: str, bucket: str, key: str | None, s3: Any, context: Mapping[str, str]) -> Decision:
    found = s3.buckets.get(bucket)
    policy = found.policy.decode() if found is not None and found.policy else None
    resource = f"arn:aws:s3:::{bucket}" + (f"/{key}" if key is not None else "")
    return evaluate(caller, action, resource, resource_policy=policy, context=context)


def _fetch(account_id: str, region_name: str) -> Any:
    s3 = s3_backends[account_id][get_partition(region_name)]

    def read(bucket: str, key: str) -> bytes:
        found = s3.buckets.get(bucket)
        stored = found.keys.get(key) if found is not None else None
        if stored is None:
            # AWS's reason for model data it cannot download (its wording; _refused has it too).
            raise ContainerError(
                f'Failed to download model data for container "container_1" from URL: "s3://{bucket}/{key}". Please '
                "ensure that there is an object located at the URL and that the role passed to CreateModel has "
                "permissions to download the model."
            )
        return bytes(stored.value)

    def fetch(model_data: Mapping[str, Any], folder: Path) -> None:
        lay_out(
            model_data,
            folder,
            read=read,
            keys=lambda bucket, prefix: sorted(
                k for k in getattr(s3.buckets.get(bucket), "keys", {}) if k.startswith(prefix)
            ),
        )

    return fetch


def _capacity(size: Mapping[str, Any], instances: int) -> float:
    """A CapacitySize as a share of the fleet (at least one instance's, or copy's)."""
    if size.get("Type") in ("INSTANCE_COUNT", "COPY_COUNT"):
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
    SageMaker rolled it back) is not documented (docs/OPERATIONS.md, "Updates"): like Terraform's provider
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


# --- Inference components ----------------------------------------------------------------------


@patch(
    restores="""An endpoint config whose variant names no model (the variant of inference
    components: its instances are managed for the components, which bring their models) is
    accepted, and its endpoint starts no container of its own: it is InService once created and
    answers only invocations that name a component. Stock moto requires every variant to name a
    model and fails the request (500)."""
)
def variants_of_inference_components_name_no_model() -> None:
    original = sm_models.SageMakerModelBackend.validate_production_variants

    def validate_production_variants(self: Any, production_variants: list[dict[str, Any]]) -> None:
        original(self, [v for v in production_variants if "ModelName" in v])

    replace(sm_models.SageMakerModelBackend, "validate_production_variants", validate_production_variants)


def _deploy_component(
    ic: InferenceComponent, specification: Mapping[str, Any], deployment_config: Mapping[str, Any] | None
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
    spec = _spec(model, ic.variant_name, specification.get("StartupParameters") or {})

    def settled(hosted: HostedEndpoint) -> None:
        ic.status, ic.failure_reason = hosted.status, hosted.failure_reason
        ic.modified = datetime.now(UTC)
        if hosted.live is not None and hosted.live.config_name == model_name:
            ic.specification = dict(specification)  # what the copies run: the new model once it took over

    ic.status = "Creating" if HOSTING.find(ic.hosting_key) is None else "Updating"
    return HOSTING.deploy(
        ic.hosting_key,
        model_name,
        [spec],
        _fetch(account, region),
        settled,
        rollout=rollout_of(deployment_config, ic.copies),
        alarm_states=_alarm_states(account, region),
    )


class InferenceComponentResource(EmulatedResource):
    """AWS::SageMaker::InferenceComponent: its model's container started as a copy on the
    endpoint (one copy, whatever the count: the local AWS has one machine); CloudFormation waits
    until it is InService, fails on Failed, and an update of its specification rolls out under
    its DeploymentConfig. Ref is its ARN, as in AWS."""

    TYPE: ClassVar[str] = "AWS::SageMaker::InferenceComponent"
    NAME_PROPERTY: ClassVar[str] = "InferenceComponentName"

    def __init__(self, ic: InferenceComponent) -> None:
        self.ic = ic

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr in ("InferenceComponentArn", "InferenceComponentName")

    def get_cfn_attribute(self, attribute_name: str) -> Any:
        return self.ic.arn if attribute_name == "InferenceComponentArn" else self.ic.name

    @property
    def physical_resource_id(self) -> str:
        return self.ic.arn

    @classmethod
    def create(cls, name: str, properties: dict[str, Any], account_id: str, region_name: str) -> Any:
        backend: Any = sm_models.sagemaker_backends[account_id][region_name]
        endpoint_name = str(properties["EndpointName"])
        endpoint = backend.endpoints.get(endpoint_name)
        if endpoint is None:
            raise CloudFormationValidationError(name, f"Could not find endpoint '{endpoint_name}'.")
        name = str(properties.get("InferenceComponentName") or name)
        ic = InferenceComponent(
            name=name,
            arn=sagemaker_arn("inference-component", name, account_id, region_name),
            endpoint_name=endpoint_name,
            endpoint_arn=endpoint.arn,
            variant_name=str(properties.get("VariantName") or "AllTraffic"),
            specification={},
            copies=int((properties.get("RuntimeConfig") or {}).get("CopyCount", 1)),
        )
        components(account_id, region_name)[name] = ic
        _wait_component(ic, _deploy_component(ic, properties["Specification"], None))
        return cls(ic)

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> Any:
        # Every property updates in place (the resource's schema has no create-only property):
        # UpdateInferenceComponent, InService again once the new model rolled out, or rolled back.
        properties = cloudformation_json["Properties"]
        ic = original_resource.ic
        ic.endpoint_name = str(properties["EndpointName"])
        ic.variant_name = str(properties.get("VariantName") or ic.variant_name)
        ic.copies = int((properties.get("RuntimeConfig") or {}).get("CopyCount", ic.copies))
        hosted = HOSTING.find(ic.hosting_key)
        running = hosted.live.config_name if hosted is not None and hosted.live is not None else None
        if properties["Specification"].get("ModelName") != running:
            _wait_component(ic, _deploy_component(ic, properties["Specification"], properties.get("DeploymentConfig")))
        return original_resource

    def delete(self, account_id: str, region_name: str) -> None:
        HOSTING.delete(self.ic.hosting_key)
        components(account_id, region_name).pop(self.ic.name, None)


def _wait_component(ic: InferenceComponent, hosted: HostedEndpoint) -> None:
    hosted.settled.wait()
    if hosted.status == "Failed":
        raise CloudFormationValidationError(ic.name, f"Inference component {ic.name} failed: {hosted.failure_reason}")


def _component_or_error(backend: Any, name: str) -> InferenceComponent:
    ic = components(backend.account_id, backend.region_name).get(name)
    if ic is None:
        arn = sagemaker_arn("inference-component", name, backend.account_id, backend.region_name)
        raise SageMakerValidationError(message=f"Could not find inference component '{arn}'.")
    return ic


@patch(
    restores="""AWS::SageMaker::InferenceComponent exists: CloudFormation starts the component's
    model in its container on the endpoint (InService once it answers /ping, Failed otherwise),
    rolls an update of its model out under its DeploymentConfig (rolled back on its alarms,
    after which DescribeInferenceComponent names the model it still runs) and stops it on
    deletion; DescribeInferenceComponent and ListInferenceComponents answer. Stock moto skips
    the type (a stack 'creates' it with nothing behind it) and has neither call."""
)
def inference_components_run_their_container() -> None:
    register_types(InferenceComponentResource)

    def describe_inference_component(self: Any) -> ActionResult:
        ic = _component_or_error(self.sagemaker_backend, self._get_param("InferenceComponentName"))
        return ActionResult(ic.describe())

    def list_inference_components(self: Any) -> ActionResult:
        endpoint = self._get_param("EndpointNameEquals")
        found = [
            {k: v for k, v in ic.describe().items() if k not in ("Specification", "RuntimeConfig", "FailureReason")}
            for ic in components(self.sagemaker_backend.account_id, self.sagemaker_backend.region_name).values()
            if endpoint in (None, ic.endpoint_name)
        ]
        return ActionResult({"InferenceComponents": found})

    replace(SageMakerResponse, "describe_inference_component", describe_inference_component)
    replace(SageMakerResponse, "list_inference_components", list_inference_components)
