"""SageMaker: endpoint configs and models as AWS accepts and keeps them, endpoints that run their
model's container and inference components; the behaviour is local_aws/sagemaker/'s (hosting,
components) and local_aws/sagemaker/runtime.py's, this module wires it into moto and its CloudFormation."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from moto.cloudformation.exceptions import ValidationError as CloudFormationValidationError
from moto.core.responses import ActionResult, EmptyResult
from moto.sagemaker import models as sm_models
from moto.sagemaker.models import FakeEndpointConfig
from moto.sagemaker.models import Model as SageMakerModel
from moto.sagemaker.responses import SageMakerResponse

from local_aws.patches.base import EmulatedResource, patch, register_types, replace, wrap_create
from local_aws.patches.inputs import refuse_invalid
from local_aws.sagemaker import control, described
from local_aws.sagemaker.arns import sagemaker_arn
from local_aws.sagemaker.components import (
    InferenceComponent,
    component_or_error,
    wait_component,
)
from local_aws.sagemaker.hosting import deploy, hosted_endpoint_of, wait_settled
from local_aws.sagemaker.runtime import hosting_plane

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


def _owned_by_the_runtime(attribute: str, stored: str) -> property:
    """An attribute of moto's endpoint record read from the runtime's record of the endpoint
    (local_aws/sagemaker/hosting.py); moto's own value (its constructor's, kept under its name
    `stored`, where moto's response object reads it) before it is deployed."""

    def get(self: Any) -> Any:
        hosted = hosted_endpoint_of(self)
        return getattr(hosted, attribute) if hosted is not None else self.__dict__.get(stored)

    def put(self: Any, value: Any) -> None:
        self.__dict__[stored] = value

    return property(get, put)


def _endpoint_response(self: Any) -> dict[str, Any]:
    # moto builds DescribeEndpoint's answer from the record's __dict__: the owned values instead.
    return {
        **sm_models.BaseObject.gen_response_object(self),
        "EndpointStatus": self.endpoint_status,
        "FailureReason": self.failure_reason,
    }


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
        deploy(self, endpoint, endpoint_config_name)
        return endpoint

    replace(sm_models.SageMakerModelBackend, "create_endpoint", create_endpoint)
    original_delete = sm_models.SageMakerModelBackend.delete_endpoint

    def delete_endpoint(self: Any, endpoint_name: str) -> None:
        original_delete(self, endpoint_name)
        hosting_plane().delete((self.account_id, self.region_name, endpoint_name))

    replace(sm_models.SageMakerModelBackend, "delete_endpoint", delete_endpoint)

    def update_endpoint(
        self: Any, endpoint_name: str, endpoint_config_name: str, deployment_config: Mapping[str, Any] | None = None
    ) -> str:
        return control.update_endpoint(self, endpoint_name, endpoint_config_name, deployment_config)

    replace(sm_models.SageMakerModelBackend, "update_endpoint", update_endpoint)

    # One owner of an endpoint's status: the runtime's record of it, once deployed.
    replace(sm_models.FakeEndpoint, "endpoint_status", _owned_by_the_runtime("status", "endpoint_status"))
    replace(sm_models.FakeEndpoint, "failure_reason", _owned_by_the_runtime("failure_reason", "failure_reason"))
    replace(sm_models.FakeEndpoint, "gen_response_object", _endpoint_response)

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
        wait_settled(account_id, region_name, endpoint.endpoint_name)
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
            wait_settled(account_id, region_name, endpoint.endpoint_name)
        return endpoint

    replace(sm_models.FakeEndpoint, "create_from_cloudformation_json", classmethod(create))
    replace(sm_models.FakeEndpoint, "update_from_cloudformation_json", classmethod(update))


@patch(
    restores="""DescribeEndpoint and DescribeEndpointConfig answer DataCaptureConfig only where the
    endpoint config has one: DescribeEndpointConfig the config's own, DescribeEndpoint its
    DataCaptureConfigSummary (EnableCapture, CaptureStatus Started or Stopped,
    CurrentSamplingPercentage, DestinationS3Uri and KmsKeyId, each required: botocore's sagemaker
    model and the API reference's DataCaptureConfigSummary); DescribeEndpointConfig answers
    AsyncInferenceConfig only for an asynchronous endpoint's config; AWS leaves out what a resource
    does not have. Stock moto answers "DataCaptureConfig": {} for both calls and
    "AsyncInferenceConfig": {} for a config CloudFormation created, which lack the members the
    model requires and AWS's own SDKs refuse (sagemaker-core's Endpoint.get and EndpointConfig.get
    fail pydantic's validation), and DescribeEndpoint the config's DataCaptureConfig itself where
    it has one."""
)
def endpoint_configs_are_described_as_aws_does() -> None:
    def describe_endpoint(self: Any) -> ActionResult:
        backend = self.sagemaker_backend
        answer = backend.describe_endpoint(self._get_param("EndpointName"))
        config = backend.endpoint_configs.get(answer.get("EndpointConfigName"))
        return ActionResult(described.endpoint(answer, config.data_capture_config if config is not None else None))

    def describe_endpoint_config(self: Any) -> ActionResult:
        answer = self.sagemaker_backend.describe_endpoint_config(self._get_param("EndpointConfigName"))
        return ActionResult(described.endpoint_config(answer))

    replace(SageMakerResponse, "describe_endpoint", describe_endpoint)
    replace(SageMakerResponse, "describe_endpoint_config", describe_endpoint_config)


@patch(
    restores="""DescribeModel answers VpcConfig only for a model that has one, as AWS leaves out what a
    resource does not have (VpcConfig's SecurityGroupIds and Subnets are required: botocore's
    sagemaker model). Stock moto answers "VpcConfig": {} for a model CloudFormation created without
    one, which sagemaker-core's Model.get refuses (pydantic: the required members are missing)."""
)
def models_without_a_vpc_describe_none() -> None:
    def describe_model(self: Any) -> ActionResult:
        model = self.sagemaker_backend.describe_model(self._get_param("ModelName"))
        return ActionResult(described.model(model.response_object))

    replace(SageMakerResponse, "describe_model", describe_model)


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


class InferenceComponentResource(EmulatedResource):
    """AWS::SageMaker::InferenceComponent: its model's container started per copy on the
    endpoint, each placed where its resources are free (local_aws/sagemaker/placement.py); CloudFormation waits
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
        ic, hosted = control.start_component(
            backend, name, endpoint_name, properties.get("VariantName"), properties["Specification"],
            properties.get("RuntimeConfig"),
        )  # fmt: skip
        if hosted is not None:
            wait_component(ic, hosted)
        elif ic.status == "Failed":
            raise CloudFormationValidationError(name, f"Inference component {name} failed: {ic.failure_reason}")
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
        ic = original_resource.ic
        hosted = control.update_component(ic, cloudformation_json["Properties"])
        if hosted is not None:
            wait_component(ic, hosted)
        elif ic.status == "Failed":
            raise CloudFormationValidationError(ic.name, f"Inference component {ic.name} failed: {ic.failure_reason}")
        return original_resource

    def delete(self, account_id: str, region_name: str) -> None:
        control.delete_component(self.ic)


@patch(
    restores="""AWS::SageMaker::InferenceComponent exists: CloudFormation starts the component's
    model in its container on the endpoint (InService once it answers /ping, Failed otherwise),
    rolls an update of its model out under its DeploymentConfig (rolled back on its alarms,
    after which DescribeInferenceComponent names the model it still runs) and stops it on
    deletion; CreateInferenceComponent does the same (Creating, then InService or Failed with the
    reason, as DescribeInferenceComponent tells), DeleteInferenceComponent stops it,
    DescribeInferenceComponent and ListInferenceComponents answer. An adapter inference component
    (Specification.BaseInferenceComponentName, its Container.ArtifactUrl a .tar.gz; the API
    reference's InferenceComponentSpecification, the Developer Guide's "Fine-tune models with
    adapter inference components") is unpacked onto each copy of its base and registered with its
    model server (POST /adapters), invoked by its own name through the base's copies with the
    X-Amzn-SageMaker-Adapter-Identifier header, and unregistered on deletion
    (local_aws/sagemaker/adapters.py). Stock moto skips the type (a stack 'creates' it with nothing
    behind it) and has none of these calls."""
)
def inference_components_run_their_container() -> None:
    register_types(InferenceComponentResource)

    def describe_inference_component(self: Any) -> ActionResult:
        ic = component_or_error(self.sagemaker_backend, self._get_param("InferenceComponentName"))
        return ActionResult(ic.describe())

    def list_inference_components(self: Any) -> ActionResult:
        found = control.list_inference_components(self.sagemaker_backend, self._get_param("EndpointNameEquals"))
        return ActionResult({"InferenceComponents": found})

    def create_inference_component(self: Any) -> ActionResult:
        refuse_invalid(self, "sagemaker", "CreateInferenceComponent")
        ic, _ = control.start_component(
            self.sagemaker_backend,
            self._get_param("InferenceComponentName"),
            self._get_param("EndpointName"),
            self._get_param("VariantName"),
            self._get_param("Specification"),
            self._get_param("RuntimeConfig"),
        )
        return ActionResult({"InferenceComponentArn": ic.arn})

    def delete_inference_component(self: Any) -> EmptyResult:
        ic = component_or_error(self.sagemaker_backend, self._get_param("InferenceComponentName"))
        control.delete_component(ic)
        return EmptyResult()

    replace(SageMakerResponse, "create_inference_component", create_inference_component)
    replace(SageMakerResponse, "delete_inference_component", delete_inference_component)
    replace(SageMakerResponse, "describe_inference_component", describe_inference_component)
    replace(SageMakerResponse, "list_inference_components", list_inference_components)


@patch(
    restores="""A variant's instance count and a component's copy count change what runs, as
    Application Auto Scaling changes them: UpdateEndpointWeightsAndCapacities (its
    DesiredInstanceCount) and UpdateInferenceComponentRuntimeConfig (its CopyCount) start or stop
    the containers of the variant's instances or the component's copies, each in service once it
    answers /ping; the endpoint (the component) is Updating meanwhile, DescribeEndpoint's
    CurrentInstanceCount (DescribeInferenceComponent's CurrentCopyCount) the containers in
    service; invocations are spread over them, the least busy first; a component at zero copies
    answers ValidationError "Inference Component has no capacity to process this request ..."
    (the API reference of UpdateEndpointWeightsAndCapacities; AWS's scale-to-zero blog post).
    Stock moto writes the counts and runs nothing, and has no
    UpdateInferenceComponentRuntimeConfig."""
)
def capacity_changes_run_containers() -> None:
    def update_endpoint_weights_and_capacities(
        self: Any, endpoint_name: str, desired_weights_and_capacities: list[dict[str, Any]]
    ) -> str:
        return control.update_endpoint_weights_and_capacities(self, endpoint_name, desired_weights_and_capacities)

    def update_inference_component_runtime_config(self: Any) -> ActionResult:
        count = int(self._get_param("DesiredRuntimeConfig")["CopyCount"])
        arn = control.update_inference_component_runtime_config(
            self.sagemaker_backend, self._get_param("InferenceComponentName"), count
        )
        return ActionResult({"InferenceComponentArn": arn})

    replace(
        sm_models.SageMakerModelBackend,
        "update_endpoint_weights_and_capacities",
        update_endpoint_weights_and_capacities,
    )
    replace(SageMakerResponse, "update_inference_component_runtime_config", update_inference_component_runtime_config)
