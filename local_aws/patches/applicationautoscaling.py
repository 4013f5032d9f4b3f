"""Application Auto Scaling: the CloudFormation types of an endpoint's autoscaling, which
stock moto lacks (registered by ``cloudformation.missing_resource_types_exist``), the scalable
dimension of an inference component's copies, which it refuses, and the wiring of
``local_aws.applicationautoscaling`` (target tracking's alarms, policies that change capacity,
scaling activities) into moto's."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from moto.applicationautoscaling import models as aas_models
from moto.applicationautoscaling import responses as aas_responses
from moto.applicationautoscaling.models import (
    ApplicationAutoscalingBackend,
    FakeApplicationAutoscalingPolicy,
    applicationautoscaling_backends,
)
from moto.applicationautoscaling.responses import ApplicationAutoScalingResponse
from moto.cloudformation.exceptions import ValidationError

from local_aws.applicationautoscaling import activities, bound_capacity, execute, make_alarms
from local_aws.applicationautoscaling.targets import role_arn
from local_aws.patches.base import EmulatedResource, patch, replace


def _backend(account_id: str, region_name: str) -> Any:
    return applicationautoscaling_backends[account_id][region_name]


class ScalableTarget(EmulatedResource):
    """AWS::ApplicationAutoScaling::ScalableTarget, on moto's Application Auto Scaling."""

    TYPE: ClassVar[str] = "AWS::ApplicationAutoScaling::ScalableTarget"

    def __init__(self, target: Any) -> None:
        self.target = target

    @property
    def physical_resource_id(self) -> str:
        # What CloudFormation returns for Ref, and what ScalingPolicy.ScalingTargetId takes.
        t = self.target
        return f"{t.resource_id}|{t.scalable_dimension}|{t.service_namespace}"

    @classmethod
    def create(cls, name: str, properties: dict[str, Any], account_id: str, region_name: str) -> ScalableTarget:
        p = properties
        target = _backend(account_id, region_name).register_scalable_target(
            namespace=p["ServiceNamespace"],
            r_id=p["ResourceId"],
            dimension=p["ScalableDimension"],
            min_capacity=int(p["MinCapacity"]),
            max_capacity=int(p["MaxCapacity"]),
            role_arn=p.get("RoleARN", ""),
            suspended_state=p.get("SuspendedState"),
        )
        return cls(target)

    def replaced_by(self, properties: dict[str, Any]) -> bool:
        # Registering the same target again updates its capacities in place.
        t = self.target
        identity = (t.service_namespace, t.resource_id, t.scalable_dimension)
        return (properties["ServiceNamespace"], properties["ResourceId"], properties["ScalableDimension"]) != identity

    def delete(self, account_id: str, region_name: str) -> None:
        t = self.target
        backend = _backend(account_id, region_name)
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


class ScalingPolicy(EmulatedResource):
    """AWS::ApplicationAutoScaling::ScalingPolicy, on moto's Application Auto Scaling.
    An update deletes the policy and puts the new one."""

    TYPE: ClassVar[str] = "AWS::ApplicationAutoScaling::ScalingPolicy"
    HAS_ARN: ClassVar[bool] = True

    def __init__(self, policy: Any) -> None:
        self.policy = policy

    @property
    def physical_resource_id(self) -> str:
        return str(self.policy.policy_arn)

    @property
    def arn(self) -> str:
        return self.physical_resource_id

    @classmethod
    def create(cls, name: str, properties: dict[str, Any], account_id: str, region_name: str) -> ScalingPolicy:
        p = properties
        if "ScalingTargetId" in p:
            resource_id, dimension, namespace = p["ScalingTargetId"].split("|")
        else:
            resource_id, dimension, namespace = p["ResourceId"], p["ScalableDimension"], p["ServiceNamespace"]
        body = p.get("TargetTrackingScalingPolicyConfiguration") or p.get("StepScalingPolicyConfiguration")
        backend = _backend(account_id, region_name)
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
            policy_type=p["PolicyType"],
        )
        return cls(policy)

    def delete(self, account_id: str, region_name: str) -> None:
        p = self.policy
        backend = _backend(account_id, region_name)
        key = type(p).formulate_key(p.service_namespace, p.resource_id, p.scalable_dimension, p.policy_name)
        if key in backend.policies:
            backend.delete_scaling_policy(p.policy_name, p.service_namespace, p.resource_id, p.scalable_dimension)


#: What scales an inference component: its copy count.
COMPONENT_COPIES = "sagemaker:inference-component:DesiredCopyCount"


@patch(
    restores="""An inference component's copy count is a scalable target
    (sagemaker:inference-component:DesiredCopyCount on inference-component/<name>), as AWS
    has allowed since inference components launched. Stock moto's list of dimensions predates
    them and refuses the target with a ValidationException."""
)
def inference_component_copies_scale() -> None:
    original = aas_models._target_params_are_valid

    def target_params_are_valid(namespace: str, r_id: str, dimension: str) -> bool:
        if namespace == "sagemaker" and dimension == COMPONENT_COPIES and r_id.startswith("inference-component/"):
            return True
        return bool(original(namespace, r_id, dimension))

    replace(aas_models, "_target_params_are_valid", target_params_are_valid)
    validate_params = ApplicationAutoScalingResponse._validate_params

    def validate_request(self: Any) -> None:
        target = (self._get_param("ServiceNamespace"), self._get_param("ScalableDimension"))
        if target != ("sagemaker", COMPONENT_COPIES):
            validate_params(self)

    replace(ApplicationAutoScalingResponse, "_validate_params", validate_request)


@patch(
    restores="""A target tracking policy of a SageMaker variant's instances or an inference
    component's copies makes the CloudWatch alarms AWS makes for it, whose action is the policy:
    TargetTracking-<resource>-AlarmHigh-<id> (above the target for 3 of 3 one-minute datapoints)
    and, unless scale-in is disabled, TargetTracking-<resource>-AlarmLow-<id> (below 90% of it
    for 15 of 15), listed in the policy's Alarms; a policy put again replaces its alarms, and a
    deleted one takes them with it (Application Auto Scaling User Guide, target tracking). Stock
    moto makes alarms for DynamoDB and ECS policies only, and leaves a replaced policy's."""
)
def target_tracking_policies_make_their_alarms() -> None:
    stock = ApplicationAutoscalingBackend.put_scaling_policy

    def put_scaling_policy(
        self: Any,
        policy_name: str,
        service_namespace: str,
        resource_id: str,
        scalable_dimension: str,
        policy_body: dict[str, Any],
        policy_type: str | None,
    ) -> Any:
        key = FakeApplicationAutoscalingPolicy.formulate_key(
            service_namespace, resource_id, scalable_dimension, policy_name
        )
        old = self.policies.get(key)
        if old is not None:
            old.delete_alarms(self.account_id, self.region_name)
        policy = stock(self, policy_name, service_namespace, resource_id, scalable_dimension, policy_body, policy_type)
        if policy.policy_type == "TargetTrackingScaling" and service_namespace == "sagemaker":
            policy.alarms = make_alarms(policy, self.account_id, self.region_name)
        return policy

    replace(ApplicationAutoscalingBackend, "put_scaling_policy", put_scaling_policy)


@patch(
    restores="""A scaling policy its alarm runs changes the capacity of its scalable target, as
    Application Auto Scaling does (User Guide: target tracking, step scaling, cooldowns): target
    tracking in proportion to the metric, step scaling by the step its breach falls in, within
    the target's minimum and maximum, each direction's cooldown kept; the capacity set through
    SageMaker (a variant's DesiredInstanceCount in DescribeEndpoint, a component's
    DesiredCopyCount in DescribeInferenceComponent). RegisterScalableTarget with bounds the
    capacity is outside moves it into them. Each is a scaling activity, which
    DescribeScalingActivities answers (IncludeNotScaledActivities for the decisions not to
    scale). Stock moto runs no policy (its alarm's action fails) and has no
    DescribeScalingActivities."""
)
def scaling_policies_change_capacity() -> None:
    stock_register = ApplicationAutoscalingBackend.register_scalable_target

    def register_scalable_target(self: Any, *args: Any, **kwargs: Any) -> Any:
        target = stock_register(self, *args, **kwargs)
        bound_capacity(target, self.account_id, self.region_name)
        return target

    def execute_policy(self: Any, policy_arn: str, alarm: Any) -> str:
        return execute(policy_arn, alarm, self.account_id, self.region_name)

    def describe_scaling_activities(self: Any) -> str:
        wanted = {
            "ServiceNamespace": self._get_param("ServiceNamespace"),
            "ResourceId": self._get_param("ResourceId"),
            "ScalableDimension": self._get_param("ScalableDimension"),
        }
        with_not_scaled = bool(self._get_param("IncludeNotScaledActivities"))
        found = [
            a
            for a in reversed(activities(self.current_account, self.region))
            if all(value in (None, a[key]) for key, value in wanted.items())
            and (with_not_scaled or "NotScaledReasons" not in a)
        ]
        start = int(self._get_param("NextToken") or 0)
        size = int(self._get_param("MaxResults") or 50)
        page = found[start : start + size]
        token = str(start + size) if start + size < len(found) else None
        return json.dumps({"ScalingActivities": page, **({"NextToken": token} if token else {})})

    replace(ApplicationAutoscalingBackend, "register_scalable_target", register_scalable_target)
    replace(ApplicationAutoscalingBackend, "execute_policy", execute_policy)
    replace(ApplicationAutoScalingResponse, "describe_scaling_activities", describe_scaling_activities)


@patch(
    restores="""A scalable target registered without a RoleARN is scaled with Application Auto Scaling's
    service-linked role for its service, which DescribeScalableTargets answers as its RoleARN (a
    required member: botocore's application-autoscaling model): for SageMaker
    arn:aws:iam::<account>:role/aws-service-role/sagemaker.application-autoscaling.amazonaws.com/AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint
    (RegisterScalableTarget's RoleARN in the API reference; the User Guide's "Service-linked role ARN
    reference"). The templates CDK writes give none. Stock moto answers the RoleARN given: "" for
    a target CloudFormation registered, null for one registered through the API."""
)
def scalable_targets_name_their_service_linked_role() -> None:
    build = aas_responses._build_target

    def build_target(target: Any) -> dict[str, Any]:
        built: dict[str, Any] = build(target)
        account = target.applicationautoscaling_backend.account_id
        built["RoleARN"] = role_arn(target.role_arn, target.service_namespace, account)
        return built

    replace(aas_responses, "_build_target", build_target)
