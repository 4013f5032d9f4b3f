"""Where moto 5.2.5's CloudFormation differs from AWS for this project's stacks, the fix.

Each patch is registered with :func:`patch` and says which AWS behaviour it restores;
without it, `cdk deploy`/`cdk destroy` either fail against moto or report success while
resources are missing, so a test would pass on a stack AWS would reject or build
differently. They reach into moto's internals, which change between releases: the local
AWS refuses to start on any moto but :data:`MOTO_VERSION` (see ``server.check_moto_version``).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from moto.applicationautoscaling.models import applicationautoscaling_backends
from moto.cloudformation import models as cfn_models
from moto.cloudformation import parsing as cfn_parsing
from moto.cloudformation import responses as cfn_responses
from moto.cloudformation.exceptions import CloudFormationError, ValidationError
from moto.cloudwatch.models import cloudwatch_backends
from moto.core.common_models import CloudFormationModel
from moto.core.responses import ActionResult, EmptyResult
from moto.ec2.models import ec2_backends
from moto.ec2.models.elastic_ip_addresses import ElasticAddress
from moto.ec2.models.flow_logs import FlowLogs
from moto.ec2.models.instances import Instance, MetadataOptions
from moto.ec2.models.internet_gateways import InternetGateway
from moto.ec2.models.nat_gateways import NatGateway
from moto.ec2.models.route_tables import Route, RouteTable
from moto.ec2.models.subnets import SubnetRouteTableAssociation
from moto.ec2.models.vpn_gateway import VPCGatewayAttachment
from moto.iam.models import Role, iam_backends
from moto.s3.models import FakeBucket, s3_backends
from moto.sagemaker.models import FakeEndpointConfig
from moto.sagemaker.models import Model as SageMakerModel
from moto.utilities.utils import get_partition

#: The one moto release these patches were written against and tested with.
MOTO_VERSION = "5.2.5"


@dataclass(frozen=True)
class Patch:
    name: str
    #: The AWS behaviour the patch restores, and what stock moto does instead.
    restores: str
    install: Callable[[], None]


PATCHES: list[Patch] = []
_lock = threading.Lock()
_applied = False


def _replace(owner: object, name: str, value: object) -> None:
    """Install ``value`` as ``owner.name`` (a moto class, module or method)."""
    setattr(owner, name, value)


def patch(restores: str) -> Callable[[Callable[[], None]], Callable[[], None]]:
    def register(install: Callable[[], None]) -> Callable[[], None]:
        PATCHES.append(Patch(name=install.__name__, restores=" ".join(restores.split()), install=install))
        return install

    return register


def apply() -> None:
    """Install every patch once per process (moto's classes are process-wide)."""
    global _applied
    with _lock:
        if _applied:
            return
        for p in PATCHES:
            p.install()
        _applied = True


# --- Change sets -------------------------------------------------------------------------


class ChangeSetNotFound(CloudFormationError):
    # The shape id in the CloudFormation model; moto serializes it as AWS does (HTTP 404,
    # code ChangeSetNotFound), which the CDK CLI waits for after deleting a change set.
    code = "ChangeSetNotFoundException"


def _change_sets_of(backend: Any, name_or_arn: str, stack_name: str | None) -> list[Any]:
    """Change sets matching an ARN, or a name within one stack (name or stack id)."""
    if name_or_arn in backend.change_sets:
        return [backend.change_sets[name_or_arn]]
    return [
        cs
        for cs in backend.change_sets.values()
        if cs.change_set_name == name_or_arn and stack_name in (None, cs.stack_name, cs.stack_id)
    ]


@patch(
    """A change set is identified by its ARN, or by its name *within the stack named by
    StackName*: the CDK CLI gives every stack's change set the same name
    (cdk-deploy-change-set). A missing one is ChangeSetNotFound (HTTP 404), which the CLI
    waits for after deleting one. Stock moto ignores StackName, picking any stack's change
    set, and answers a missing one with a ValidationError, on which the CLI gives up."""
)
def change_sets_belong_to_their_stack() -> None:
    backend_cls = cfn_models.CloudFormationBackend

    def describe_change_set(self: Any, change_set_name: str, stack_name: str | None = None) -> Any:
        found = _change_sets_of(self, change_set_name, stack_name)
        if not found:
            raise ChangeSetNotFound(f"ChangeSet [{change_set_name}] does not exist")
        return found[-1]

    _replace(backend_cls, "describe_change_set", describe_change_set)

    def describe_response(self: Any) -> Any:
        change_set = self.cloudformation_backend.describe_change_set(
            change_set_name=self._get_param("ChangeSetName"), stack_name=self._get_param("StackName")
        )
        return ActionResult(change_set)

    _replace(cfn_responses.CloudFormationResponse, "describe_change_set", describe_response)


@patch(
    """DeleteChangeSet succeeds when the stack exists but the change set does not (the CDK
    CLI deletes a stale cdk-deploy-change-set before every update and relies on this).
    Stock moto answers HTTP 500, which the SDK retries for ~45 s before failing the deploy."""
)
def delete_missing_change_set_succeeds() -> None:
    def delete_change_set(self: Any, change_set_name: str, stack_name: str | None = None) -> None:
        for cs in _change_sets_of(self, change_set_name, stack_name):
            self.change_sets.pop(cs.change_set_id, None)

    _replace(cfn_models.CloudFormationBackend, "delete_change_set", delete_change_set)

    def delete_response(self: Any) -> Any:
        self.cloudformation_backend.delete_change_set(
            change_set_name=self._get_param("ChangeSetName"), stack_name=self._get_param("StackName")
        )
        return EmptyResult()

    _replace(cfn_responses.CloudFormationResponse, "delete_change_set", delete_response)


@patch(
    """Executing a change set leaves the stack as CreateStack/UpdateStack would: its outputs
    and exports evaluated from the new template, its parameters the change set's, and the
    stack's other change sets deleted. Stock moto keeps the outputs of the previous template
    (none after a CREATE change set), so `cdk deploy` prints no outputs."""
)
def executed_change_set_updates_the_stack() -> None:
    def execute_change_set(self: Any, change_set_name: str, stack_name: str | None = None) -> None:
        found = _change_sets_of(self, change_set_name, stack_name)
        if not found:
            raise ChangeSetNotFound(f"ChangeSet [{change_set_name}] does not exist")
        change_set = found[-1]
        stack = self.stacks[change_set.stack_id]
        kind = change_set.change_set_type
        stack._add_stack_event(f"{kind}_IN_PROGRESS", resource_status_reason="User Initiated")
        old_exports = [export.name for export in stack.exports]
        change_set.apply()
        stack.template = change_set.template
        stack._parse_template()
        stack.description = stack.template_dict.get("Description")
        stack.parameters = change_set.parameters
        stack.output_map = stack._create_output_map()
        for name in old_exports:
            self.exports.pop(name, None)
        self._validate_export_uniqueness(stack)
        for export in stack.exports:
            self.exports[export.name] = export
        stack._add_stack_event(f"{kind}_COMPLETE")
        stack.status = f"{kind}_COMPLETE"
        change_set.execution_status = "EXECUTE_COMPLETE"
        for cs_id, cs in list(self.change_sets.items()):
            if cs.stack_id == stack.stack_id and cs is not change_set:
                del self.change_sets[cs_id]

    _replace(cfn_models.CloudFormationBackend, "execute_change_set", execute_change_set)


def _given_parameters(stack: Any, given: dict[str, Any]) -> dict[str, Any]:
    """``given`` completed with the defaults of the stack's template: what CloudFormation
    compares, and what UsePreviousValue reuses."""
    slots = stack.template_dict.get("Parameters", {})
    return {**{k: slot["Default"] for k, slot in slots.items() if "Default" in slot}, **given}


@patch(
    """Stack parameters are compared and reused as given, defaults included: UsePreviousValue
    reuses the value the caller gave (for an AWS::SSM::Parameter::Value<...> parameter, the
    parameter's *name*, which CloudFormation resolves again at every update), and a change
    set that passes a parameter's default explicitly has no changes. Stock moto reuses the
    resolved value (an AMI id), then fails the update trying to resolve it as a parameter
    name; and it sees a change whenever the CDK CLI, which passes SSM parameters on updates
    but not on creation, deploys an unchanged stack."""
)
def parameters_are_the_given_ones() -> None:
    def stack_parameters(self: Any) -> dict[str, Any]:
        return _given_parameters(self, dict(self.resource_map.input_parameters))

    def has_parameters(self: Any, other_parameters: dict[str, Any]) -> bool:
        return bool(self.stack_parameters == _given_parameters(self, other_parameters))

    _replace(cfn_models.Stack, "stack_parameters", property(stack_parameters))
    _replace(cfn_models.Stack, "has_parameters", has_parameters)


@patch(
    """An update that changes a resource moto can only create replaces it, as CloudFormation
    replaces a resource whose changed property cannot be updated in place: the new one is
    created, then the old one deleted. Stock moto records nothing for it (the resource
    disappears from the stack, is never deleted, and Refs to it resolve to null)."""
)
def unmodifiable_resources_are_replaced() -> None:
    original = cfn_parsing.parse_and_update_resource

    def parse_and_update_resource(
        logical_id: str, resource_json: dict[str, Any], resources_map: Any, account_id: str, region_name: str
    ) -> Any:
        updated = original(logical_id, resource_json, resources_map, account_id, region_name)
        if updated is not None:
            return updated
        old = resources_map._parsed_resources.get(logical_id)
        new = cfn_parsing.parse_and_create_resource(logical_id, resource_json, resources_map, account_id, region_name)
        if old is not None and not isinstance(old, str | dict | list):
            resources_map._delete_resource(old, resource_json)
        return new

    _replace(cfn_parsing, "parse_and_update_resource", parse_and_update_resource)


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

    _replace(FakeEndpointConfig, "validate_instance_type", validate_instance_type)


def _references(node: Any) -> set[str]:
    """Logical ids a template fragment points to with Ref or Fn::GetAtt."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "Ref" and isinstance(value, str):
                found.add(value)
            elif key == "Fn::GetAtt":
                target = value[0] if isinstance(value, list) else str(value).split(".")[0]
                found.add(target)
            else:
                found |= _references(value)
    elif isinstance(node, list):
        for item in node:
            found |= _references(item)
    return found


#: Types whose every property needs replacement in AWS; moto "updates" them by deleting and
#: creating one under a new name, which is a replacement all the same.
_ALWAYS_REPLACED = frozenset({"AWS::SageMaker::Model", "AWS::SageMaker::EndpointConfig"})


def _replaced_on_update(resource_json: dict[str, Any]) -> bool:
    if resource_json["Type"] in _ALWAYS_REPLACED:
        return True
    model = cfn_parsing.resource_class_from_type(resource_json["Type"])
    return model is not None and hasattr(model.update_from_cloudformation_json, "__isabstractmethod__")


@patch(
    """When an update replaces a resource (a new physical id), the resources that Ref or
    GetAtt it are updated with the new value, in dependency order, as CloudFormation does.
    Stock moto updates only resources whose own template text changed: an alarm on a
    replaced instance keeps watching the terminated one."""
)
def dependents_of_replaced_resources_are_updated() -> None:
    original = cfn_parsing.ResourceMap.build_resource_diff

    def build_resource_diff(self: Any, other_template: dict[str, Any], parameters: Any = None) -> dict[str, Any]:
        diff = original(self, other_template, parameters)
        new = other_template["Resources"]
        refs = {name: _references(body) for name, body in new.items()}
        replaced = {name for name in diff["Modify"] if _replaced_on_update(new[name])}
        modify = set(diff["Modify"])
        while replaced:
            dependents = {n for n, r in refs.items() if r & replaced and n not in modify and n not in diff["Add"]}
            modify |= dependents
            replaced = dependents
        ordered: list[str] = []
        while len(ordered) < len(modify):  # dependencies first
            pending = modify - set(ordered)
            ready = sorted(n for n in pending if not (refs[n] & (pending - {n})))
            ordered += ready or sorted(pending)  # a cycle (an invalid template): keep going
        diff["Modify"] = ordered
        return diff

    _replace(cfn_parsing.ResourceMap, "build_resource_diff", build_resource_diff)


# --- Resource types stock moto skips ------------------------------------------------------


class _Emulated:
    """What every model added here shares: created at once, deleted through ``delete``
    (moto's stack deletion calls ``resource.delete`` before ``delete_from_cloudformation_json``)."""

    def is_created(self) -> bool:
        return True

    @classmethod
    def delete_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        raise NotImplementedError(f"{cls.__name__} {resource_name} is deleted through its delete()")


class ScalableTarget(_Emulated, CloudFormationModel):
    """AWS::ApplicationAutoScaling::ScalableTarget, on moto's Application Auto Scaling."""

    def __init__(self, target: Any) -> None:
        self.target = target

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::ApplicationAutoScaling::ScalableTarget"

    @staticmethod
    def cloudformation_name_type() -> str:
        return ""

    @property
    def physical_resource_id(self) -> str:
        # What CloudFormation returns for Ref, and what ScalingPolicy.ScalingTargetId takes.
        t = self.target
        return f"{t.resource_id}|{t.scalable_dimension}|{t.service_namespace}"

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return False

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str, **kwargs: Any
    ) -> ScalableTarget:
        p = cloudformation_json["Properties"]
        suspended = p.get("SuspendedState")
        target = applicationautoscaling_backends[account_id][region_name].register_scalable_target(
            namespace=p["ServiceNamespace"],
            r_id=p["ResourceId"],
            dimension=p["ScalableDimension"],
            min_capacity=int(p["MinCapacity"]),
            max_capacity=int(p["MaxCapacity"]),
            role_arn=p.get("RoleARN", ""),
            suspended_state=suspended,
        )
        return cls(target)

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: ScalableTarget,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> ScalableTarget:
        p = cloudformation_json["Properties"]
        old = original_resource.target
        if (p["ServiceNamespace"], p["ResourceId"], p["ScalableDimension"]) != (
            old.service_namespace,
            old.resource_id,
            old.scalable_dimension,
        ):
            original_resource.delete(account_id, region_name)
        return cls.create_from_cloudformation_json(new_resource_name, cloudformation_json, account_id, region_name)

    def delete(self, account_id: str, region_name: str) -> None:
        t = self.target
        backend = applicationautoscaling_backends[account_id][region_name]
        # Deregistering a target deletes its scaling policies, as in AWS.
        for policy in list(backend.policies.values()):
            if (policy.service_namespace, policy.resource_id, policy.scalable_dimension) == (
                t.service_namespace,
                t.resource_id,
                t.scalable_dimension,
            ):
                backend.delete_scaling_policy(
                    policy.policy_name, policy.service_namespace, policy.resource_id, policy.scalable_dimension
                )
        if backend._scalable_target_exists(t.resource_id, t.scalable_dimension):
            backend.deregister_scalable_target(t.service_namespace, t.resource_id, t.scalable_dimension)


class ScalingPolicy(_Emulated, CloudFormationModel):
    """AWS::ApplicationAutoScaling::ScalingPolicy, on moto's Application Auto Scaling."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::ApplicationAutoScaling::ScalingPolicy"

    @staticmethod
    def cloudformation_name_type() -> str:
        return ""

    @property
    def physical_resource_id(self) -> str:
        return str(self.policy.policy_arn)

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr == "Arn"

    def get_cfn_attribute(self, attribute_name: str) -> Any:
        return self.physical_resource_id

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str, **kwargs: Any
    ) -> ScalingPolicy:
        p = cloudformation_json["Properties"]
        if "ScalingTargetId" in p:
            resource_id, dimension, namespace = p["ScalingTargetId"].split("|")
        else:
            resource_id, dimension, namespace = p["ResourceId"], p["ScalableDimension"], p["ServiceNamespace"]
        policy_type = p["PolicyType"]
        body = p.get("TargetTrackingScalingPolicyConfiguration") or p.get("StepScalingPolicyConfiguration")
        backend = applicationautoscaling_backends[account_id][region_name]
        if not backend._scalable_target_exists(resource_id, dimension):
            raise ValidationError(
                message=f"No scalable target registered for service namespace: {namespace}, resource ID: "
                f"{resource_id}, scalable dimension: {dimension}"
            )
        policy = backend.put_scaling_policy(
            policy_name=p["PolicyName"],
            service_namespace=namespace,
            resource_id=resource_id,
            scalable_dimension=dimension,
            policy_body=body,
            policy_type=policy_type,
        )
        return cls(policy)

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: ScalingPolicy,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> ScalingPolicy:
        original_resource.delete(account_id, region_name)
        return cls.create_from_cloudformation_json(new_resource_name, cloudformation_json, account_id, region_name)

    def delete(self, account_id: str, region_name: str) -> None:
        p = self.policy
        backend = applicationautoscaling_backends[account_id][region_name]
        key = type(p).formulate_key(p.service_namespace, p.resource_id, p.scalable_dimension, p.policy_name)
        if key in backend.policies:
            backend.delete_scaling_policy(p.policy_name, p.service_namespace, p.resource_id, p.scalable_dimension)


class MetricAlarm(_Emulated, CloudFormationModel):
    """AWS::CloudWatch::Alarm (single-metric alarms), on moto's CloudWatch."""

    def __init__(self, alarm: Any) -> None:
        self.alarm = alarm

    @staticmethod
    def cloudformation_type() -> str:
        return "AWS::CloudWatch::Alarm"

    @staticmethod
    def cloudformation_name_type() -> str:
        return "AlarmName"

    @property
    def physical_resource_id(self) -> str:
        return str(self.alarm.name)

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return attr == "Arn"

    def get_cfn_attribute(self, attribute_name: str) -> Any:
        return self.alarm.alarm_arn

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str, **kwargs: Any
    ) -> MetricAlarm:
        p = cloudformation_json["Properties"]
        alarm = cloudwatch_backends[account_id][region_name].put_metric_alarm(
            name=p.get("AlarmName", resource_name),
            namespace=p.get("Namespace"),
            metric_name=p.get("MetricName"),
            comparison_operator=p["ComparisonOperator"],
            evaluation_periods=int(p["EvaluationPeriods"]),
            period=int(p["Period"]) if "Period" in p else None,  # type: ignore[arg-type]
            threshold=float(p["Threshold"]) if "Threshold" in p else None,  # type: ignore[arg-type]
            statistic=p.get("Statistic"),
            description=p.get("AlarmDescription"),
            dimensions=p.get("Dimensions", []),
            alarm_actions=p.get("AlarmActions", []),
            datapoints_to_alarm=p.get("DatapointsToAlarm"),
            extended_statistic=p.get("ExtendedStatistic"),
            ok_actions=p.get("OKActions", []),
            insufficient_data_actions=p.get("InsufficientDataActions", []),
            unit=p.get("Unit"),
            actions_enabled=p.get("ActionsEnabled", True) in (True, "true"),
            treat_missing_data=p.get("TreatMissingData"),
            evaluate_low_sample_count_percentile=p.get("EvaluateLowSampleCountPercentile"),
            threshold_metric_id=p.get("ThresholdMetricId"),
        )
        return cls(alarm)

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: MetricAlarm,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> MetricAlarm:
        # PutMetricAlarm on the same name replaces the alarm's definition in place.
        name = cloudformation_json["Properties"].get("AlarmName", original_resource.alarm.name)
        if name != original_resource.alarm.name:
            original_resource.delete(account_id, region_name)
        return cls.create_from_cloudformation_json(name, cloudformation_json, account_id, region_name)

    def delete(self, account_id: str, region_name: str) -> None:
        cloudwatch_backends[account_id][region_name].delete_alarms([self.alarm.name])


@patch(
    """AWS::ApplicationAutoScaling::ScalableTarget and ::ScalingPolicy and
    AWS::CloudWatch::Alarm are created, updated and deleted. Stock moto has no model for them:
    it skips them with a warning and still reports CREATE_COMPLETE, so an endpoint would seem
    to deploy with no autoscaling or alarms. (AWS::S3::BucketPolicy stays skipped on purpose:
    moto enforces a policy's Deny statements without their conditions, so the bootstrap
    bucket's "deny unless aws:SecureTransport" would deny every request to this plain-HTTP
    emulator.)"""
)
def missing_resource_types_exist() -> None:
    # moto finds models through CloudFormationModel.__subclasses__(), so defining the classes
    # above made them subclasses; moto caches that list on first use, so drop the cache.
    cfn_parsing.get_model_list.cache_clear()
    cfn_parsing.get_model_map.cache_clear()
    cfn_parsing.get_name_type_map.cache_clear()
    known = cfn_parsing.get_model_map()
    for model in (ScalableTarget, ScalingPolicy, MetricAlarm):
        if known.get(model.cloudformation_type()) is not model:
            raise RuntimeError(f"moto did not register {model.cloudformation_type()}; is moto {MOTO_VERSION}?")


# --- EC2: VPC teardown --------------------------------------------------------------------


def _ec2(account_id: str, region_name: str) -> Any:
    return ec2_backends[account_id][region_name]


def _delete_route_table(self: Any, account_id: str, region_name: str) -> None:
    _ec2(account_id, region_name).delete_route_table(self.id)


def _delete_route(self: Any, account_id: str, region_name: str) -> None:
    backend = _ec2(account_id, region_name)
    if self.route_table.id not in backend.route_tables:
        return  # a route is deleted with its route table, as in AWS
    backend.delete_route(
        self.route_table.id,
        self.destination_cidr_block,
        self.destination_ipv6_cidr_block,
        self.destination_prefix_list.id if self.destination_prefix_list else None,
    )


def _delete_association(self: Any, account_id: str, region_name: str) -> None:
    _ec2(account_id, region_name).subnet_associations.pop(f"{self.route_table_id}:{self.subnet_id}", None)


def _delete_gateway_attachment(self: Any, account_id: str, region_name: str) -> None:
    backend = _ec2(account_id, region_name)
    if self.gateway_id.startswith("igw-"):
        backend.detach_internet_gateway(self.gateway_id, self.vpc_id)
    else:
        backend.detach_vpn_gateway(self.gateway_id, self.vpc_id)


def _delete_internet_gateway(self: Any, account_id: str, region_name: str) -> None:
    _ec2(account_id, region_name).delete_internet_gateway(self.id)


def _delete_nat_gateway(self: Any, account_id: str, region_name: str) -> None:
    backend = _ec2(account_id, region_name)
    backend.delete_nat_gateway(self.id)
    # A deleted NAT gateway releases its network interface and Elastic IP association.
    backend.nat_gateways.pop(self.id, None)


def _release_address(self: Any, account_id: str, region_name: str) -> None:
    _ec2(account_id, region_name).release_address(address=self.public_ip)


def _delete_flow_log(self: Any, account_id: str, region_name: str) -> None:
    _ec2(account_id, region_name).delete_flow_logs([self.id])


@patch(
    """Deleting a stack deletes its AWS::EC2::RouteTable, ::Route,
    ::SubnetRouteTableAssociation, ::VPCGatewayAttachment, ::InternetGateway, ::NatGateway,
    ::EIP and ::FlowLog. Stock moto has no delete for them: the VPC keeps dependencies, its
    deletion fails ("has dependencies"), and `cdk destroy` of a stack with a VPC fails."""
)
def vpc_resources_are_deleted() -> None:
    _replace(RouteTable, "delete", _delete_route_table)
    _replace(Route, "delete", _delete_route)
    _replace(SubnetRouteTableAssociation, "delete", _delete_association)
    _replace(VPCGatewayAttachment, "delete", _delete_gateway_attachment)
    _replace(InternetGateway, "delete", _delete_internet_gateway)
    _replace(NatGateway, "delete", _delete_nat_gateway)
    _replace(ElasticAddress, "delete", _release_address)
    _replace(FlowLogs, "delete", _delete_flow_log)


# --- Properties stock moto ignores ----------------------------------------------------------

#: Reads the properties moto ignores before it creates: properties -> properties.
Prepare = Callable[[dict[str, Any]], dict[str, Any]]
#: Applies the properties moto ignored to what it created: (resource, properties, account, region).
Fix = Callable[[Any, dict[str, Any], str, str], None]


def _wrap_create(model: type[Any], *, prepare: Prepare | None = None, fix: Fix | None = None) -> None:
    """Wrap ``model.create_from_cloudformation_json``: ``prepare`` rewrites the properties moto
    reads, ``fix`` runs on each new resource (moto's update methods that replace create
    through it too)."""
    create = model.create_from_cloudformation_json.__func__

    def create_wrapped(
        cls: Any, /, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str,
        **kw: Any,
    ) -> Any:  # fmt: skip
        props = cloudformation_json["Properties"]
        given = {**cloudformation_json, "Properties": prepare(props)} if prepare else cloudformation_json
        resource = create(cls, resource_name, given, account_id, region_name, **kw)
        if fix:
            fix(resource, props, account_id, region_name)
        return resource

    _replace(model, "create_from_cloudformation_json", classmethod(create_wrapped))


def _primary_interface(props: dict[str, Any]) -> dict[str, Any]:
    """SubnetId and SecurityGroupIds from the primary NetworkInterfaces entry (CDK writes
    them there when associate_public_ip_address is set), where moto reads them."""
    primary = [n for n in props.get("NetworkInterfaces", []) if str(n.get("DeviceIndex")) == "0"]
    if not primary:
        return props
    nic = primary[0]
    return {
        **props,
        "SubnetId": props.get("SubnetId", nic.get("SubnetId")),
        "SecurityGroupIds": props.get("SecurityGroupIds", nic.get("GroupSet", [])),
    }


def _apply_instance_properties(instance: Any, props: dict[str, Any], account_id: str, region_name: str) -> None:
    props = _primary_interface(props)
    backend = _ec2(account_id, region_name)
    if props.get("SecurityGroupIds"):
        backend.modify_instance_security_groups(instance.id, props["SecurityGroupIds"])
    template = props.get("LaunchTemplate")
    if template:
        version = backend._get_template_from_args(template)
        instance.metadata_options = MetadataOptions(version.data.get("MetadataOptions", {}))
    if props.get("Monitoring") in (True, "true"):
        instance.monitoring_state = "enabled"


@patch(
    """AWS::EC2::Instance is launched into the subnet and security groups of its primary
    NetworkInterfaces entry or of SubnetId/SecurityGroupIds, with the instance metadata
    options of its LaunchTemplate (CDK's require_imdsv2 sets HttpTokens=required there) and
    detailed Monitoring. Stock moto reads only SubnetId and SecurityGroups (EC2-Classic
    names): the instance lands in the default VPC with a public IP, no security group of
    the stack, and IMDSv1 enabled."""
)
def instance_properties_are_applied() -> None:
    _wrap_create(Instance, prepare=_primary_interface, fix=_apply_instance_properties)


def _apply_network_isolation(model: Any, props: dict[str, Any], account_id: str, region_name: str) -> None:
    model.enable_network_isolation = props.get("EnableNetworkIsolation") in (True, "true")


@patch(
    """AWS::SageMaker::Model keeps EnableNetworkIsolation (the container gets no network
    access). Stock moto always reports it False, so the endpoint would look open."""
)
def model_network_isolation_is_kept() -> None:
    _wrap_create(SageMakerModel, fix=_apply_network_isolation)


def _sync_managed_policies(role: Any, properties: dict[str, Any], account_id: str, region_name: str) -> None:
    arns = properties.get("ManagedPolicyArns", [])
    iam = iam_backends[account_id][get_partition(region_name)]
    for arn in set(role.managed_policies) - set(arns):
        iam.detach_role_policy(arn, role.name)
    for arn in arns:
        if arn not in role.managed_policies:
            iam.attach_role_policy(arn, role.name)


@patch(
    """AWS::IAM::Role attaches the managed policies of ManagedPolicyArns (and detaches them
    before the role is deleted or when they leave the list). Stock moto ignores the
    property: the role lacks e.g. AmazonSSMManagedInstanceCore."""
)
def role_managed_policies_are_attached() -> None:
    _wrap_create(Role, fix=_sync_managed_policies)
    update = Role.update_from_cloudformation_json.__func__  # type: ignore[attr-defined]
    delete = Role.delete_from_cloudformation_json.__func__  # type: ignore[attr-defined]

    def update_role(
        cls: Any, /, original_resource: Any, new_resource_name: str, cloudformation_json: dict[str, Any],
        account_id: str, region_name: str,
    ) -> Any:  # fmt: skip
        role = update(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name)
        _sync_managed_policies(role, cloudformation_json["Properties"], account_id, region_name)
        return role

    def delete_role(
        cls: Any, /, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str
    ) -> None:
        iam = iam_backends[account_id][get_partition(region_name)]
        for role in list(iam.roles.values()):
            if role.name == resource_name:
                _sync_managed_policies(role, {}, account_id, region_name)
        delete(cls, resource_name, cloudformation_json, account_id, region_name)

    _replace(Role, "update_from_cloudformation_json", classmethod(update_role))
    _replace(Role, "delete_from_cloudformation_json", classmethod(delete_role))


# --- CDK's AwsCustomResource ------------------------------------------------------------

#: Where the emulated custom resources send their SDK calls: the local AWS itself
#: (set by ``LocalAws.start``).
_endpoint: dict[str, str] = {}


def set_endpoint(url: str, access_key: str, secret_key: str) -> None:
    _endpoint.update(url=url, access_key=access_key, secret_key=secret_key)


def _snake(action: str) -> str:
    # AwsCustomResource takes SDK v3 names ("copyObject" or "CopyObjectCommand"); boto3 snake_case.
    name = action.removesuffix("Command")
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _sdk_call(call: dict[str, Any], region_name: str) -> dict[str, Any]:
    import boto3

    service = call["service"].removeprefix("@aws-sdk/client-").lower()
    client = boto3.client(
        service,
        endpoint_url=_endpoint["url"],
        region_name=call.get("region") or region_name,
        aws_access_key_id=_endpoint["access_key"],
        aws_secret_access_key=_endpoint["secret_key"],
    )
    response = getattr(client, _snake(call["action"]))(**call.get("parameters", {}))
    response.pop("ResponseMetadata", None)
    return dict(response)


def _physical_id(call: dict[str, Any], fallback: str) -> str:
    given = call.get("physicalResourceId") or {}
    return str(given.get("id") or fallback)


class AwsSdkCallResource(_Emulated, CloudFormationModel):
    """Custom::AWS, the resource of CDK's ``AwsCustomResource``: its Create, Update and Delete
    SDK calls, made against the local AWS as its Lambda function makes them against AWS.
    Not emulated: IAM (moto does not check the function's role) and CloudFormation's order
    of a replacement (here the old resource is deleted during the update, not in the cleanup
    after it), so tests/infra checks the role's scope for that cleanup."""

    def __init__(self, physical_id: str, delete_call: dict[str, Any] | None, region_name: str) -> None:
        self.physical_id = physical_id
        self.delete_call = delete_call
        self.region_name = region_name

    @staticmethod
    def cloudformation_type() -> str:
        return "Custom::AWS"

    @staticmethod
    def cloudformation_name_type() -> str:
        return ""

    @property
    def physical_resource_id(self) -> str:
        return self.physical_id

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return False

    @classmethod
    def _from_properties(cls, which: str, properties: dict[str, Any], fallback_id: str, region_name: str) -> Any:
        # As the provider: a create without a Create call makes the Update call; an update
        # without an Update call makes none and keeps the physical id.
        raw = properties.get("Create") or properties.get("Update") if which == "Create" else properties.get("Update")
        call = json.loads(raw) if raw else None
        if call is not None:
            _sdk_call(call, region_name)
        delete = json.loads(properties["Delete"]) if properties.get("Delete") else None
        return cls(_physical_id(call or {}, fallback_id), delete, region_name)

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str, **kwargs: Any
    ) -> AwsSdkCallResource:
        properties = cloudformation_json["Properties"]
        return cls._from_properties("Create", properties, resource_name, region_name)  # type: ignore[no-any-return]

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: AwsSdkCallResource,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> AwsSdkCallResource:
        properties = cloudformation_json["Properties"]
        updated = cls._from_properties("Update", properties, original_resource.physical_id, region_name)
        # A new physical id means a new resource: CloudFormation deletes the old one.
        if updated.physical_id != original_resource.physical_id:
            original_resource.delete(account_id, region_name)
        return updated  # type: ignore[no-any-return]

    def delete(self, account_id: str, region_name: str) -> None:
        if self.delete_call is not None:
            _sdk_call(self.delete_call, self.region_name)


@patch(
    """Custom::AWS (CDK's AwsCustomResource) makes its Create, Update and Delete SDK calls
    (GptjStack copies its model files under one S3 prefix this way). Stock moto invokes the
    provider's Lambda function, which needs a Docker engine, and has no update or delete for
    custom resources; the calls run here in process, against the local AWS."""
)
def aws_custom_resources_make_their_calls() -> None:
    original = cfn_parsing.resource_class_from_type

    def resource_class_from_type(resource_type: str) -> Any:
        if resource_type == AwsSdkCallResource.cloudformation_type():
            return AwsSdkCallResource
        return original(resource_type)

    _replace(cfn_parsing, "resource_class_from_type", resource_class_from_type)


class BucketNotEmpty(CloudFormationError):
    code = "BucketNotEmpty"


@patch(
    """Deleting AWS::S3::Bucket fails while the bucket holds objects (AWS answers
    BucketNotEmpty), so a stack deletion first deletes what empties it (GptjStack's model-file
    copies) and retries. Stock moto reports the bucket deleted and keeps it, with its objects,
    whenever it happens to try the bucket first."""
)
def non_empty_buckets_are_not_deleted() -> None:
    original = FakeBucket.delete_from_cloudformation_json.__func__  # type: ignore[attr-defined]

    def delete_bucket(
        cls: Any, /, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str
    ) -> None:
        backend = s3_backends[account_id][get_partition(region_name)]
        bucket = backend.buckets.get(resource_name)
        if bucket is not None and bucket.keys:
            raise BucketNotEmpty(message=f"The bucket {resource_name} you tried to delete is not empty")
        original(cls, resource_name, cloudformation_json, account_id, region_name)

    _replace(FakeBucket, "delete_from_cloudformation_json", classmethod(delete_bucket))
