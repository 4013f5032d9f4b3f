"""An endpoint's model as an inference component: the component, its copy-count scaling and,
for an endpoint that scales to zero, the alarm that brings a copy back (SageMaker's
"scale to zero" guide: endpoint-auto-scaling-zero-instances)."""

from __future__ import annotations

from aws_cdk import Duration, Names
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from llm_inference_cdk.endpoint_props import InferenceComponentProps, SageMakerEndpointProps
from llm_inference_cdk.scaling import out_of_zero, target_tracking

#: The scalable dimension of a component's copies.
COPY_DIMENSION = "sagemaker:inference-component:DesiredCopyCount"


def variant_scaling(props: InferenceComponentProps) -> sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty:
    """The variant's managed instance scaling: SageMaker starts and stops instances for the copies."""
    return sagemaker.CfnEndpointConfig.ManagedInstanceScalingProperty(
        status="ENABLED", min_instance_count=props.fewest_instances, max_instance_count=props.most_instances
    )


def add_component(
    scope: Construct, endpoint: sagemaker.CfnEndpoint, model: sagemaker.CfnModel, props: SageMakerEndpointProps
) -> sagemaker.CfnInferenceComponent:
    """The component on `endpoint`'s variant: `model` with the compute each copy reserves, one
    copy at creation, updated copy by copy (the update policy's rolling batches)."""
    spec = props.inference_component
    assert spec is not None
    ic = sagemaker.CfnInferenceComponent
    return ic(
        scope,
        # The instance type in the id, as in the endpoint's: a new type makes a new endpoint and,
        # with it, a new component (CloudFormation would update the old one in place, and an
        # inference component cannot move to another endpoint).
        f"Component-{props.instance_type.removeprefix('ml.')}",
        # A name of our own: scaling, metrics and invocations need the name, and it is known at
        # synthesis (from the endpoint's path, so a new endpoint's component has a new name).
        inference_component_name=component_name(endpoint),
        endpoint_name=endpoint.attr_endpoint_name,
        variant_name=props.variant_name,
        specification=ic.InferenceComponentSpecificationProperty(
            model_name=model.attr_model_name,
            compute_resource_requirements=ic.InferenceComponentComputeResourceRequirementsProperty(
                number_of_accelerator_devices_required=spec.accelerators or None,
                number_of_cpu_cores_required=spec.cpu_cores,
                min_memory_required_in_mb=spec.memory_mb,
            ),
            startup_parameters=ic.InferenceComponentStartupParametersProperty(
                container_startup_health_check_timeout_in_seconds=props.startup_health_check_timeout_s,
                model_data_download_timeout_in_seconds=props.model_data_download_timeout_s,
            ),
        ),
        # SageMaker creates the component with one copy (a new endpoint answers at once);
        # autoscaling then keeps it between min_copies and max_copies.
        runtime_config=ic.InferenceComponentRuntimeConfigProperty(copy_count=1),
    )


def component_name(endpoint: sagemaker.CfnEndpoint) -> str:
    return Names.unique_resource_name(endpoint, max_length=63, separator="-")


def scale_copies(
    scope: Construct, component: sagemaker.CfnInferenceComponent, props: InferenceComponentProps
) -> appscaling.CfnScalableTarget:
    """Target tracking of invocations per copy between min_copies and max_copies; with
    min_copies=0, a step policy on NoCapacityInvocationFailures adds the first copy back (target
    tracking cannot: with no copy there is no per-copy metric to track)."""
    target = target_tracking(
        scope,
        "CopyScaling",
        "CopyScalingPolicy",
        dimension=COPY_DIMENSION,
        resource_id=f"inference-component/{component.inference_component_name!s}",
        bounds=(props.min_copies, props.max_copies),
        policy_name="InvocationsPerCopy",
        target_value=props.target_invocations_per_copy,
        cooldowns_s=(props.scale_in_cooldown_s, props.scale_out_cooldown_s),
        predefined_metric="SageMakerInferenceComponentInvocationsPerCopy",
    )
    # Named as written, not referenced: the component must exist before its copies can scale.
    target.add_dependency(component)
    if props.scales_to_zero:
        _scale_out_of_zero(scope, component, target)
    return target


def _scale_out_of_zero(
    scope: Construct, component: sagemaker.CfnInferenceComponent, target: appscaling.CfnScalableTarget
) -> None:
    out_of_zero(
        scope,
        target,
        alarm_id="NoCapacityAlarm",
        description="A request found no copy of the model: add one (the way back from zero)",
        metric=cloudwatch.Metric(
            namespace="AWS/SageMaker",
            metric_name="NoCapacityInvocationFailures",
            dimensions_map={"InferenceComponentName": str(component.inference_component_name)},
            # Sum, as the scale-to-zero guide's alarm: the page lists no other statistic.
            statistic="Sum",
            period=Duration.minutes(1),
        ),
        evaluation_periods=1,
        cooldown_s=60,
    )
