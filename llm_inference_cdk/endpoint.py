"""A SageMaker real-time endpoint: model, endpoint config, endpoint with its update policy,
and optionally autoscaling and alarms. This module builds them; its seams live beside it:
the grants and metrics it shares with an imported endpoint (``endpoint_base``), its alarms
(``endpoint_alarms``), its dashboard rows (``endpoint_dashboard``), its update policy and
rolled-back-update check (``deployment``), its scaling (``scaling``, ``component``,
``async_inference``).

L1 resources are used on purpose: aws-cdk's alpha SageMaker module grants
``AmazonSageMakerFullAccess`` by default and its shape changes between releases. The props
follow its spirit (``aws-sagemaker-alpha``: endpoint.ts, endpoint-config.ts): typed,
keyword-only, validated when they are made, with SageMaker's and CloudFormation's own limits,
so that a setting AWS would refuse fails synthesis instead of a deployment.
"""

from __future__ import annotations

from aws_cdk import ArnFormat, Duration, RemovalPolicy, Stack, Token
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from constructs import Construct

from llm_inference_cdk.async_inference import AsyncOutput, scale_backlog
from llm_inference_cdk.component import add_component, scale_copies, variant_scaling
from llm_inference_cdk.deployment import Watched, component_deployment, endpoint_deployment, fail_rolled_back_updates
from llm_inference_cdk.endpoint_alarms import alarm_arns, make_alarms
from llm_inference_cdk.endpoint_base import ImportedSageMakerEndpoint, ISageMakerEndpoint, SageMakerEndpointBase
from llm_inference_cdk.endpoint_dashboard import endpoint_rows
from llm_inference_cdk.endpoint_props import AlarmProps, AutoscalingProps, SageMakerEndpointProps
from llm_inference_cdk.images import ContainerImage
from llm_inference_cdk.model_data import ModelData
from llm_inference_cdk.nag import acknowledge, nag_arn
from llm_inference_cdk.props import PropError, invalid
from llm_inference_cdk.scaling import VARIANT_INSTANCES, target_tracking

#: Where SageMaker writes a container's output, by the endpoint's mode: an endpoint's under
#: ``/aws/sagemaker/Endpoints/<endpoint name>``, an inference component's under
#: ``/aws/sagemaker/InferenceComponents/<component name>`` (the names public deployment scripts
#: and Terraform imports of these groups use).
LOG_GROUP_PREFIXES = {
    "realtime": "/aws/sagemaker/Endpoints",
    "async": "/aws/sagemaker/Endpoints",
    "inference-component": "/aws/sagemaker/InferenceComponents",
}


class SageMakerEndpoint(SageMakerEndpointBase):
    """A SageMaker real-time endpoint with one production variant, on an execution role that
    may read its model data, pull its image, and write its own logs and metrics, nothing else.

    :param image: the serving image.
    :param model_data: the model's files.
    :param props: instance type, counts, timeouts, environment, autoscaling, alarms and the
        update policy.
    :param role: the execution role SageMaker assumes (default: a new least-privilege role as
        above; a given role gets the same grants added).
    :param alarm_topic: an SNS topic the alarms notify on ALARM and OK (default: none).
    """

    @staticmethod
    def from_endpoint_name(
        scope: Construct, construct_id: str, endpoint_name: str, *, variant_name: str = "AllTraffic"
    ) -> ISageMakerEndpoint:
        """An endpoint that exists outside this app, by its name: ``grant_invoke`` (on the ARN
        SageMaker writes, the name in lower case) and ``metric_*`` (by ``EndpointName`` and
        `variant_name`, SageMaker's default variant name unless given).

        The name must be known at synthesis: CloudFormation cannot lower-case a token, so pass
        the ARN itself to :meth:`from_endpoint_attributes` for a name that is one. ``grant_invoke``
        allows InvokeEndpoint on the endpoint's ARN alone: an inference component's ARN, or an
        async endpoint's InvokeEndpointAsync and S3 input, are the caller's to grant."""
        return ImportedSageMakerEndpoint(scope, construct_id, endpoint_name=endpoint_name, variant_name=variant_name)

    @staticmethod
    def from_endpoint_attributes(
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        endpoint_arn: str | None = None,
        variant_name: str = "AllTraffic",
    ) -> ISageMakerEndpoint:
        """An endpoint that exists outside this app, by its attributes: its name (for the
        metrics), its ARN as SageMaker reports it (default: formatted in this stack's account and
        region from the name, in lower case as SageMaker writes it) and its variant's name."""
        return ImportedSageMakerEndpoint(
            scope, construct_id, endpoint_name=endpoint_name, endpoint_arn=endpoint_arn, variant_name=variant_name
        )

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        image: ContainerImage,
        model_data: ModelData,
        props: SageMakerEndpointProps,
        role: iam.IRole | None = None,
        alarm_topic: sns.ITopic | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self._props = props
        # No aws:SourceAccount/SourceArn condition on the trust: SageMaker does not document that
        # it sets them when it assumes an execution role, and a condition on a key the service
        # leaves out denies the role to it (pass `role` with the conditions you have verified).
        self.role: iam.IRole = role or iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description="SageMaker execution role: reads its model data, pulls its image, writes its logs",
        )
        stack = Stack.of(self)
        if image.region is not None and not Token.is_unresolved(stack.region) and image.region != stack.region:
            # SageMaker pulls a model's image from ECR in the model's own region only.
            raise PropError(
                type(self).__name__,
                "image",
                getattr(image, "uri", image),
                f"an ECR image of the stack's region {stack.region}",
            )
        bound = model_data.bind(self, self.role)
        self.image_uri: str = image.bind(self, self.role)
        self._grant_logs_and_metrics()

        self.model = sagemaker.CfnModel(
            self,
            "Model",
            execution_role_arn=self.role.role_arn,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=self.image_uri, environment=dict(props.environment) or None, **bound.container
            ),
            enable_network_isolation=props.enable_network_isolation,
        )
        self.model_data_url = bound.url
        # The endpoint starts the container at creation: the role's grants and the model data
        # (an uncompressed prefix is copied at deploy) must be in place first.
        policy = self.role.node.try_find_child("DefaultPolicy")
        if policy is not None:
            self.model.node.add_dependency(policy)
        for construct in bound.depends_on:
            self.model.node.add_dependency(construct)

        volume_key = None if props.volume_size is None else self._volume_key()
        #: Where async answers go (async mode only).
        self.async_output = AsyncOutput(self, "Async", role=self.role) if props.async_inference else None
        component = props.inference_component
        self.endpoint_config = sagemaker.CfnEndpointConfig(
            self,
            "Config",
            production_variants=[self._variant()],
            kms_key_id=volume_key.key_arn if volume_key else None,
            # Inference components: the config names the role (the variant names no model).
            execution_role_arn=self.role.role_arn if component else None,
            async_inference_config=self.async_output.config(props.async_inference)
            if self.async_output and props.async_inference
            else None,
        )
        # SageMaker refuses to change the instance type of a variant that is an autoscaling
        # target in place (UpdateEndpoint fails), so the type is part of the endpoint's id: a new
        # type makes a new endpoint, autoscaling and alarms follow it, and CloudFormation deletes
        # the old endpoint once the new one is in service. The endpoint's name changes with it.
        self.endpoint = sagemaker.CfnEndpoint(
            self,
            f"Endpoint-{props.instance_type.removeprefix('ml.')}",
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
            # An update (new model or config) keeps the instance count autoscaling has set,
            # instead of dropping back to InitialInstanceCount under load.
            retain_all_variant_properties=True,
        )
        #: The inference component (inference-component mode only), its name and ARN.
        self.inference_component: sagemaker.CfnInferenceComponent | None = None
        self._component_name: str | None = None
        if component is not None:
            self.inference_component = add_component(self, self.endpoint, self.model, props)
            self._component_name = str(self.inference_component.inference_component_name)

        self.scalable_target: appscaling.CfnScalableTarget | None = None
        #: Every alarm of the endpoint.
        self.alarms: list[cloudwatch.AlarmBase] = []
        #: The alarms SageMaker watches while it bakes an update (a subset of ``alarms``).
        self.rollback_alarms: list[cloudwatch.AlarmBase] = []
        self._alarm_names: dict[str, str] = {}
        self._set_deployment_config()
        if props.deployment.fail_rolled_back_updates:
            #: The SSM parameter that fails an update SageMaker rolled back.
            self.update_check = fail_rolled_back_updates(self, self._watched())
        if props.autoscaling is not None:
            self.auto_scale_instance_count(props.autoscaling)
        if self.inference_component is not None and component is not None:
            self.scalable_target = scale_copies(self, self.inference_component, component)
        if props.async_inference is not None:
            self.scalable_target = scale_backlog(self, self.endpoint_name, self.variant_name, props.async_inference)
        if props.alarms is not None:
            self.add_alarms(props.alarms, topic=alarm_topic)

    # --- what a user reads (the props stay private: these are the values they resolve to) ---

    @property
    def endpoint_name(self) -> str:
        """The endpoint's name, generated by CloudFormation (a token until deployment)."""
        return self.endpoint.attr_endpoint_name

    @property
    def endpoint_arn(self) -> str:
        """The endpoint's ARN as SageMaker reports it (Ref), not one formatted from the name:
        SageMaker writes the name in lower case in its ARNs, and IAM compares ARNs
        case-sensitively, so a policy on an ARN of the generated (mixed-case) name would deny
        every call."""
        return self.endpoint.ref

    @property
    def variant_name(self) -> str:
        """The production variant's name."""
        return self._props.variant_name

    @property
    def component_name(self) -> str | None:
        """The inference component's name (inference-component mode only)."""
        return self._component_name

    @property
    def component_arn(self) -> str | None:
        """The inference component's ARN (inference-component mode only)."""
        return None if self.inference_component is None else self.inference_component.attr_inference_component_arn

    @property
    def instance_type(self) -> str:
        """The variant's instance type, such as ``ml.g5.xlarge``."""
        return self._props.instance_type

    @property
    def instance_count(self) -> int:
        """Instances at creation (scaling moves the count between its bounds afterwards)."""
        return self._props.instance_count

    @property
    def mode(self) -> str:
        """How the endpoint serves: ``realtime``, ``inference-component`` or ``async``."""
        return self._props.mode

    @property
    def deployment_strategy(self) -> str:
        """The update policy in force: ``all-at-once``, ``canary``, ``linear`` or ``rolling``
        (the one set in :class:`DeploymentProps`, else the one chosen for the variant)."""
        return self._props.deployment_strategy

    def _variant(self) -> sagemaker.CfnEndpointConfig.ProductionVariantProperty:
        """The production variant: the model on its instances, or (inference components) the
        instances SageMaker manages for the component's copies, which carry the model and its
        startup timeouts themselves."""
        props = self._props
        component = props.inference_component
        return sagemaker.CfnEndpointConfig.ProductionVariantProperty(
            variant_name=props.variant_name,
            model_name=None if component else self.model.attr_model_name,
            instance_type=props.instance_type,
            initial_instance_count=props.instance_count,
            initial_variant_weight=None if component else 1.0,
            container_startup_health_check_timeout_in_seconds=None
            if component
            else props.startup_health_check_timeout_s,
            model_data_download_timeout_in_seconds=None if component else props.model_data_download_timeout_s,
            volume_size_in_gb=props.volume_size,
            inference_ami_version=props.inference_ami_version,
            managed_instance_scaling=variant_scaling(component) if component else None,
            routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(
                routing_strategy="LEAST_OUTSTANDING_REQUESTS"
            )
            if component
            else None,
        )

    # --- grants -----------------------------------------------------------------------------

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let `grantee` call this endpoint and nothing else: InvokeEndpoint and
        InvokeEndpointWithResponseStream (AWS authorizes both with the one action
        ``sagemaker:InvokeEndpoint``: the Service Authorization Reference lists no action of
        the streaming call's own); in inference-component
        mode on this component; in async mode InvokeEndpointAsync, with its requests put under
        the bucket's ``input/`` (``grant_read_results`` lets it read the answers)."""
        if self.async_output is not None:
            self.async_output.grant_submit(grantee)
            return iam.Grant.add_to_principal(
                grantee=grantee, actions=["sagemaker:InvokeEndpointAsync"], resource_arns=[self.endpoint_arn]
            )
        return super().grant_invoke(grantee)

    def grant_read_results(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let `grantee` read async answers and failures (async mode only)."""
        if self.async_output is None:
            raise ValueError(f"{self.node.path}: only an async endpoint has results to read")
        return self.async_output.grant_read_results(grantee)

    def dashboard_widgets(self) -> list[list[cloudwatch.IWidget]]:
        """Rows of dashboard widgets for this endpoint: traffic and errors, model and overhead
        latency percentiles, what drives autoscaling, the instances' CPU, memory, GPU and disk,
        and the alarms' states."""
        return endpoint_rows(self, self._props, self.alarms)

    # --- autoscaling and alarms -------------------------------------------------------------

    def auto_scale_instance_count(self, props: AutoscalingProps) -> appscaling.CfnScalableTarget:
        """Scale the variant's instance count on invocations per instance (once)."""
        if self.scalable_target is not None:
            raise ValueError(f"{self.node.path}: autoscaling is already configured")
        count = self._props.instance_count
        if not props.min_capacity <= count <= props.max_capacity:
            raise invalid(
                props, "min_capacity", f"at most the initial instance count ({count}), with max_capacity at least it"
            )
        self.scalable_target = target_tracking(
            self,
            "ScalableTarget",
            "ScalingPolicy",
            dimension=VARIANT_INSTANCES,
            resource_id=f"endpoint/{self.endpoint_name}/variant/{self.variant_name}",
            bounds=(props.min_capacity, props.max_capacity),
            policy_name="InvocationsPerInstance",
            target_value=props.target_invocations_per_instance,
            cooldowns_s=(props.scale_in_cooldown_s, props.scale_out_cooldown_s),
            predefined_metric="SageMakerVariantInvocationsPerInstance",
        )
        return self.scalable_target

    def add_alarms(self, props: AlarmProps, *, topic: sns.ITopic | None = None) -> list[cloudwatch.AlarmBase]:
        """The alarms `props` sets (see :class:`AlarmProps`); `topic` is notified on ALARM and
        OK. Those on what a new model can break become the update's rollback alarms. An alarm on
        the vLLM engine's queue (``waiting_requests``) turns on the endpoint's detailed
        observability, which publishes it."""
        if props.waiting_requests is not None:
            if self._props.mode == "async":
                raise invalid(props, "waiting_requests", "unset in async mode (detailed observability covers "
                              "real-time endpoints)")  # fmt: skip
            self.endpoint_config.metrics_config = sagemaker.CfnEndpointConfig.MetricsConfigProperty(
                enable_detailed_observability=True
            )
        rollback, capacity = make_alarms(
            self,
            props,
            mode=self._props.mode,
            gpus=self._props.instance.gpus,
            topic=topic,
            names=self._alarm_names,
        )
        added = rollback + capacity
        self.alarms.extend(added)
        self.rollback_alarms.extend(rollback)
        self._set_deployment_config()
        if self._props.deployment.auto_rollback:
            # Deployment guardrails' guide: the execution role reads the rollback alarms' states.
            arns = alarm_arns(self, [self._alarm_names[alarm.node.id] for alarm in rollback])
            self.role.add_to_principal_policy(
                iam.PolicyStatement(actions=["cloudwatch:DescribeAlarms"], resources=arns)
            )
        return added

    # --- the update policy (deployment.py) --------------------------------------------------

    def _set_deployment_config(self) -> None:
        """The DeploymentConfig from the props and the rollback alarms: the endpoint's, or the
        inference component's, which carries the model and so has the updates that roll back."""
        deployment = self._props.deployment
        names = [self._alarm_names[a.node.id] for a in self.rollback_alarms] if deployment.auto_rollback else []
        if self.inference_component is not None:
            self.inference_component.deployment_config = component_deployment(deployment, names)
            return
        self.endpoint.deployment_config = endpoint_deployment(self._props.deployment_strategy, deployment, names)

    def _watched(self) -> Watched:
        """What an update changes and SageMaker may roll back: the endpoint's config, or the
        model of its inference component (whose own update the component's DeploymentConfig
        rolls back; the endpoint config stays)."""
        if self.inference_component is not None and self.component_name is not None:
            return Watched(
                what="model the inference component",
                noun="model",
                expected=self.model.attr_model_name,
                action="describeInferenceComponent",
                parameters={"InferenceComponentName": self.component_name},
                field="Specification.ModelName",
                arn=self.inference_component.attr_inference_component_arn,
                resource=self.inference_component,
            )
        return Watched(
            what="endpoint config the endpoint",
            noun="config",
            expected=self.endpoint_config.attr_endpoint_config_name,
            action="describeEndpoint",
            parameters={"EndpointName": self.endpoint_name},
            field="EndpointConfigName",
            arn=self.endpoint_arn,
            resource=self.endpoint,
        )

    # --- internals ------------------------------------------------------------------------------

    def _volume_key(self) -> kms.Key:
        key = kms.Key(
            self,
            "VolumeKey",
            enable_key_rotation=True,
            # The key encrypts only the endpoint's scratch volumes, which die with the stack.
            removal_policy=RemovalPolicy.DESTROY,
            pending_window=Duration.days(7),
            description="Encrypts the ML storage volume of the endpoint's instances",
        )
        # What EBS volume encryption uses, without the wildcards of grant_encrypt_decrypt; grants
        # only for the AWS services that attach the volume (kms:GrantIsForAWSResource), not for
        # whoever holds the role.
        key.grant(self.role, "kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKeyWithoutPlaintext")
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["kms:CreateGrant"],
                resources=[key.key_arn],
                conditions={"Bool": {"kms:GrantIsForAWSResource": True}},
            )
        )
        return key

    def _grant_logs_and_metrics(self) -> None:
        """What SageMaker's "CreateModel API: Execution Role Permissions" (in "How to use
        SageMaker AI execution roles") lists for logs and metrics, on the log groups of this
        endpoint's mode alone."""
        stack = Stack.of(self)
        prefix = LOG_GROUP_PREFIXES[self._props.mode]
        log_groups = stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name=f"{prefix}/*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"],
                resources=[log_groups, f"{log_groups}:log-stream:*"],
            )
        )
        # cloudwatch:PutMetricData accepts no narrower resource than "*"; the namespace condition narrows it.
        # Not AWS/SageMaker: namespaces beginning AWS/ are reserved for AWS's services (CloudWatch's
        # PutMetricData reference), so no caller's PutMetricData there is ever accepted.
        self.role.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}},
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
            f"AwsSolutions-IAM5[Resource::{nag_arn(stack, 'logs', f'log-group:{prefix}/*')}]",
            "The inference component's log group is named by SageMaker after the component, whose name changes "
            "with the endpoint it is on (a new instance type makes both), and the old one logs until it is deleted"
            if self._props.mode == "inference-component"
            else "The endpoint's log group name is generated by SageMaker from the endpoint name, "
            "which CloudFormation generates after this policy must exist",
        )
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::{nag_arn(stack, 'logs', f'log-group:{prefix}/*:log-stream:*')}]",
            "Log streams are created per instance by SageMaker under the log group of the endpoint or its component",
        )
