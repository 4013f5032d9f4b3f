"""Application Auto Scaling: the CloudFormation types of an endpoint's autoscaling, which
stock moto lacks (registered by ``cloudformation.missing_resource_types_exist``), and the scalable
dimension of an inference component's copies, which it refuses."""

from __future__ import annotations

from typing import Any, ClassVar

from moto.applicationautoscaling import models as aas_models
from moto.applicationautoscaling.models import applicationautoscaling_backends
from moto.applicationautoscaling.responses import ApplicationAutoScalingResponse
from moto.cloudformation.exceptions import ValidationError

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
