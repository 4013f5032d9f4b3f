"""One SageMaker real-time endpoint: model, endpoint config, endpoint, autoscaling, alarms.

Both SageMaker stacks use it; they differ only in the image, the model data and the
container environment. L1 resources are used on purpose: the alpha L2 module grants
`AmazonSageMakerFullAccess` and its shape changes between releases.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from aws_cdk import ArnFormat, Duration, RemovalPolicy, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from constructs import Construct

from stacks.config import EndpointSettings
from stacks.model_image import ModelImage
from stacks.nag import acknowledge, nag_arn

VARIANT_NAME = "AllTraffic"
LOG_GROUP_PREFIX = "/aws/sagemaker/Endpoints"


class ModelData(Protocol):
    """Where the model's files are: a ``model.tar.gz`` (``ModelAsset``) or an uncompressed
    S3 prefix (``ModelPrefix``)."""

    def bind_to_container(self, role: iam.IGrantable) -> dict[str, Any]:
        """Grant `role` read access; return the container definition's model-data properties."""
        ...


class SageMakerEndpoint(Construct):
    """A SageMaker real-time endpoint with one production variant.

    :param settings: instance type, counts, timeouts, autoscaling and alarm settings.
    :param image: the serving image.
    :param model_data: the model's files; the role may read those alone.
    :param environment: container environment; ``settings.environment`` is applied on top.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: EndpointSettings,
        image: ModelImage,
        model_data: ModelData,
        environment: Mapping[str, str] | None = None,
        **kwargs: object,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        stack = Stack.of(self)

        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description="SageMaker execution role: reads its model data, pulls its image, writes its logs",
        )
        model_data_properties = model_data.bind_to_container(self.role)
        image.grant_pull(self.role)
        self._grant_logs_and_metrics(stack)

        env = dict(environment or {})
        clashes = sorted(set(env) & set(settings.environment))
        if clashes:
            raise ValueError(
                f"environment={dict(settings.environment)!r} is invalid: {', '.join(clashes)} is set by the stack "
                "from its typed settings; change that setting instead of the variable"
            )
        env.update(settings.environment)
        self.model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=self.role.role_arn,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=image.uri,
                environment=env or None,
                **model_data_properties,
            ),
            enable_network_isolation=settings.enable_network_isolation,
        )
        # The endpoint starts the container at creation: the role's policy must exist first.
        self.model.node.add_dependency(self.role.node.find_child("DefaultPolicy"))
        if isinstance(model_data, Construct):
            # And the model data must be in place (an uncompressed prefix is copied at deploy).
            self.model.node.add_dependency(model_data)

        volume_key = None
        if not settings.has_nvme:
            volume_key = kms.Key(
                self,
                "VolumeKey",
                enable_key_rotation=True,
                # The key encrypts only the endpoint's scratch volumes, which die with the stack.
                removal_policy=RemovalPolicy.DESTROY,
                pending_window=Duration.days(7),
                description="Encrypts the ML storage volume of the endpoint's instances",
            )
            # What EBS volume encryption uses, without the wildcards of grant_encrypt_decrypt.
            volume_key.grant(
                self.role, "kms:CreateGrant", "kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKeyWithoutPlaintext"
            )

        self.endpoint_config = sagemaker.CfnEndpointConfig(
            self,
            "Config",
            production_variants=[
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=VARIANT_NAME,
                    model_name=self.model.attr_model_name,
                    instance_type=settings.instance_type,
                    initial_instance_count=settings.initial_instance_count,
                    initial_variant_weight=1.0,
                    container_startup_health_check_timeout_in_seconds=settings.startup_health_check_timeout_s,
                    model_data_download_timeout_in_seconds=settings.model_data_download_timeout_s,
                    volume_size_in_gb=settings.volume_size_gb,
                    inference_ami_version=settings.inference_ami_version,
                )
            ],
            kms_key_id=volume_key.key_arn if volume_key else None,
        )
        # SageMaker refuses to change the instance type of a variant that is an autoscaling
        # target in place (UpdateEndpoint fails), so the type is part of the endpoint's id: a new
        # type makes a new endpoint, autoscaling and alarms follow it, and CloudFormation deletes
        # the old endpoint once the new one is in service. The endpoint's name changes with it.
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            f"Endpoint-{settings.instance_type.removeprefix('ml.')}",
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
            # An update (new model or config) keeps the instance count autoscaling has set,
            # instead of dropping back to InitialInstanceCount under load.
            retain_all_variant_properties=True,
        )
        self.endpoint_name = self.endpoint.attr_endpoint_name

        self._autoscaling(settings)
        self.latency_alarm, self.errors_alarm = self._alarms(settings)

    def _grant_logs_and_metrics(self, stack: Stack) -> None:
        log_groups = stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name=f"{LOG_GROUP_PREFIX}/*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"],
                resources=[log_groups, f"{log_groups}:log-stream:*"],
            )
        )
        # cloudwatch:PutMetricData accepts no narrower resource than "*"; the namespace condition narrows it.
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringLike": {"cloudwatch:namespace": ["/aws/sagemaker/*", "AWS/SageMaker"]}},
            )
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "ecr:GetAuthorizationToken and cloudwatch:PutMetricData support no resource-level "
            "permissions; PutMetricData is narrowed to SageMaker namespaces by a condition",
        )
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::{nag_arn(stack, 'logs', f'log-group:{LOG_GROUP_PREFIX}/*')}]",
            "The endpoint's log group name is generated by SageMaker from the endpoint name, "
            "which CloudFormation generates after this policy must exist",
        )
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::{nag_arn(stack, 'logs', f'log-group:{LOG_GROUP_PREFIX}/*:log-stream:*')}]",
            "Log streams are created per instance by SageMaker under the endpoint's log group",
        )

    def _autoscaling(self, settings: EndpointSettings) -> None:
        scaling = settings.autoscaling
        # No RoleARN: Application Auto Scaling uses its SageMaker service-linked role.
        self.scalable_target = appscaling.CfnScalableTarget(
            self,
            "ScalableTarget",
            service_namespace="sagemaker",
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            resource_id=f"endpoint/{self.endpoint_name}/variant/{VARIANT_NAME}",
            min_capacity=scaling.min_capacity,
            max_capacity=scaling.max_capacity,
        )
        appscaling.CfnScalingPolicy(
            self,
            "ScalingPolicy",
            policy_name="InvocationsPerInstance",
            policy_type="TargetTrackingScaling",
            scaling_target_id=self.scalable_target.ref,
            target_tracking_scaling_policy_configuration=appscaling.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty(
                target_value=float(scaling.target_invocations_per_instance),
                predefined_metric_specification=appscaling.CfnScalingPolicy.PredefinedMetricSpecificationProperty(
                    predefined_metric_type="SageMakerVariantInvocationsPerInstance"
                ),
                scale_in_cooldown=scaling.scale_in_cooldown_s,
                scale_out_cooldown=scaling.scale_out_cooldown_s,
            ),
        )

    def _metric(self, name: str, statistic: str, period_s: int) -> cloudwatch.Metric:
        # SageMaker publishes these with the dimensions EndpointName and VariantName.
        return cloudwatch.Metric(
            namespace="AWS/SageMaker",
            metric_name=name,
            dimensions_map={"EndpointName": self.endpoint_name, "VariantName": VARIANT_NAME},
            statistic=statistic,
            period=Duration.seconds(period_s),
        )

    def _alarms(self, settings: EndpointSettings) -> tuple[cloudwatch.Alarm, cloudwatch.Alarm]:
        alarms = settings.alarms
        latency = cloudwatch.Alarm(
            self,
            "LatencyAlarm",
            alarm_description=f"Mean model latency above {alarms.latency_ms} ms",
            # ModelLatency is published in microseconds.
            metric=self._metric("ModelLatency", "Average", alarms.period_s),
            threshold=alarms.latency_ms * 1000,
            evaluation_periods=alarms.evaluation_periods,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        errors = cloudwatch.Alarm(
            self,
            "Errors5xxAlarm",
            alarm_description=f"{alarms.errors_5xx} or more 5xx invocation errors per period",
            metric=self._metric("Invocation5XXErrors", "Sum", alarms.period_s),
            threshold=alarms.errors_5xx,
            evaluation_periods=alarms.evaluation_periods,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        if alarms.topic_arn is not None:
            topic = cw_actions.SnsAction(sns.Topic.from_topic_arn(self, "AlarmTopic", alarms.topic_arn))
            for alarm in (latency, errors):
                alarm.add_alarm_action(topic)
                alarm.add_ok_action(topic)
        return latency, errors
