"""A SageMaker real-time endpoint: model, endpoint config, endpoint with its update policy,
and optionally autoscaling and alarms.

L1 resources are used on purpose: aws-cdk's alpha SageMaker module grants
``AmazonSageMakerFullAccess`` by default and its shape changes between releases. The props
follow its spirit (``aws-sagemaker-alpha``: endpoint.ts, endpoint-config.ts): typed,
keyword-only, validated when they are made, with SageMaker's and CloudFormation's own limits,
so that a setting AWS would refuse fails synthesis instead of a deployment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aws_cdk import ArnFormat, Duration, Names, RemovalPolicy, Stack, Token
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from aws_cdk import aws_ssm as ssm
from aws_cdk import custom_resources as cr
from constructs import Construct

from llm_contracts import instances
from llm_inference_cdk.async_inference import AsyncOutput, scale_backlog
from llm_inference_cdk.component import add_component, component_deployment, scale_copies, variant_scaling
from llm_inference_cdk.endpoint_props import AlarmProps, AutoscalingProps, DeploymentProps, EndpointProps
from llm_inference_cdk.images import ContainerImage
from llm_inference_cdk.model_data import ModelData
from llm_inference_cdk.nag import acknowledge, nag_arn
from llm_inference_cdk.props import PropError, invalid
from llm_inference_cdk.scaling import VARIANT_INSTANCES, target_tracking
from llm_inference_cdk.sdk_calls import function_role

LOG_GROUP_PREFIX = "/aws/sagemaker/Endpoints"
#: Namespace of the per-instance metrics SageMaker publishes (CPU, memory, GPU, disk).
INSTANCE_NAMESPACE = "/aws/sagemaker/Endpoints"


class SageMakerEndpoint(Construct):
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

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        image: ContainerImage,
        model_data: ModelData,
        props: EndpointProps,
        role: iam.IRole | None = None,
        alarm_topic: sns.ITopic | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.props = props
        self.variant_name = props.variant_name
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
        self.endpoint_name: str = self.endpoint.attr_endpoint_name
        # The ARN SageMaker reports (Ref), not one formatted from the name: SageMaker writes the
        # name in lower case in its ARNs, and IAM compares ARNs case-sensitively, so a policy on
        # an ARN of the generated (mixed-case) name would deny every call.
        self.endpoint_arn: str = self.endpoint.ref
        #: The inference component (inference-component mode only), its name and ARN.
        self.inference_component: sagemaker.CfnInferenceComponent | None = None
        self.component_name: str | None = None
        if component is not None:
            self.inference_component = add_component(self, self.endpoint, self.model, props)
            self.component_name = str(self.inference_component.inference_component_name)

        self.scalable_target: appscaling.CfnScalableTarget | None = None
        #: Every alarm of the endpoint.
        self.alarms: list[cloudwatch.Alarm] = []
        #: The alarms SageMaker watches while it bakes an update (a subset of ``alarms``).
        self.rollback_alarms: list[cloudwatch.Alarm] = []
        self._alarm_names: dict[str, str] = {}
        self._set_deployment_config()
        if props.deployment.fail_rolled_back_updates:
            self._fail_rolled_back_updates()
        if props.autoscaling is not None:
            self.auto_scale_instance_count(props.autoscaling)
        if self.inference_component is not None and component is not None:
            self.scalable_target = scale_copies(self, self.inference_component, component)
        if props.async_inference is not None:
            self.scalable_target = scale_backlog(self, self.endpoint_name, self.variant_name, props.async_inference)
        if props.alarms is not None:
            self.add_alarms(props.alarms, topic=alarm_topic)

    def _variant(self) -> sagemaker.CfnEndpointConfig.ProductionVariantProperty:
        """The production variant: the model on its instances, or (inference components) the
        instances SageMaker manages for the component's copies, which carry the model and its
        startup timeouts themselves."""
        props = self.props
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
        """Let `grantee` call this endpoint and nothing else: InvokeEndpoint (and
        InvokeEndpointWithResponseStream, which the same action covers); in inference-component
        mode on this component; in async mode InvokeEndpointAsync, with its requests put under
        the bucket's ``input/`` (``grant_read_results`` lets it read the answers)."""
        if self.async_output is not None:
            self.async_output.grant_submit(grantee)
            return iam.Grant.add_to_principal(
                grantee=grantee, actions=["sagemaker:InvokeEndpointAsync"], resource_arns=[self.endpoint_arn]
            )
        arns = [self.endpoint_arn]
        if self.inference_component is not None:
            arns.append(self.inference_component.attr_inference_component_arn)
        return iam.Grant.add_to_principal(grantee=grantee, actions=["sagemaker:InvokeEndpoint"], resource_arns=arns)

    def grant_read_results(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let `grantee` read async answers and failures (async mode only)."""
        if self.async_output is None:
            raise ValueError(f"{self.node.path}: only an async endpoint has results to read")
        return self.async_output.grant_read_results(grantee)

    # --- metrics --------------------------------------------------------------------------------

    def metric(
        self, metric_name: str, *, namespace: str = "AWS/SageMaker", statistic: str = "Sum", **options: Any
    ) -> cloudwatch.Metric:
        """A metric of this endpoint's variant, with the dimensions SageMaker publishes it with
        (``EndpointName``, ``VariantName``; an inference component's ``AWS/SageMaker`` metrics
        by ``InferenceComponentName``); per minute unless `options` say otherwise."""
        options.setdefault("period", Duration.minutes(1))
        dimensions = {"EndpointName": self.endpoint_name, "VariantName": self.variant_name}
        if self.component_name is not None and namespace == "AWS/SageMaker":
            # A component's invocation metrics are published per component.
            dimensions = {"InferenceComponentName": self.component_name}
        return cloudwatch.Metric(
            namespace=namespace, metric_name=metric_name, dimensions_map=dimensions, statistic=statistic, **options
        )

    def metric_backlog(self, **options: Any) -> cloudwatch.Metric:
        """Requests queued for an async endpoint (``ApproximateBacklogSize``, average)."""
        return self._endpoint_metric("ApproximateBacklogSize", **options)

    def metric_backlog_per_instance(self, **options: Any) -> cloudwatch.Metric:
        """Queued requests per instance, what an async endpoint's scaling tracks (average)."""
        return self._endpoint_metric("ApproximateBacklogSizePerInstance", **options)

    def metric_backlog_without_capacity(self, **options: Any) -> cloudwatch.Metric:
        """1 while requests are queued and no instance runs (``HasBacklogWithoutCapacity``)."""
        return self._endpoint_metric("HasBacklogWithoutCapacity", **options)

    def _endpoint_metric(self, metric_name: str, **options: Any) -> cloudwatch.Metric:
        # The async queue's metrics are published per endpoint, without a variant.
        options.setdefault("period", Duration.minutes(1))
        options.setdefault("statistic", "Average")
        return cloudwatch.Metric(
            namespace="AWS/SageMaker",
            metric_name=metric_name,
            dimensions_map={"EndpointName": self.endpoint_name},
            **options,
        )

    def metric_invocations_per_copy(self, **options: Any) -> cloudwatch.Metric:
        """Invocations per copy of the inference component, what its scaling tracks (sum)."""
        return self.metric("InvocationsPerCopy", **{"statistic": "Sum", **options})

    def metric_no_capacity_failures(self, **options: Any) -> cloudwatch.Metric:
        """Requests that found no copy of the inference component (sum): the way back from zero."""
        return self.metric("NoCapacityInvocationFailures", **{"statistic": "Sum", **options})

    def metric_invocations(self, **options: Any) -> cloudwatch.Metric:
        """Requests sent to the model (sum)."""
        return self.metric("Invocations", **options)

    def metric_invocations_per_instance(self, **options: Any) -> cloudwatch.Metric:
        """Invocations divided by the instance count: what autoscaling tracks (sum)."""
        return self.metric("InvocationsPerInstance", **options)

    def metric_model_latency(self, **options: Any) -> cloudwatch.Metric:
        """Time the container took to answer, microseconds (average)."""
        return self.metric("ModelLatency", **{"statistic": "Average", **options})

    def metric_overhead_latency(self, **options: Any) -> cloudwatch.Metric:
        """SageMaker's own time around the container's, microseconds (average)."""
        return self.metric("OverheadLatency", **{"statistic": "Average", **options})

    def metric_invocation_4xx_errors(self, **options: Any) -> cloudwatch.Metric:
        """Requests answered 4xx (sum)."""
        return self.metric("Invocation4XXErrors", **options)

    def metric_invocation_5xx_errors(self, **options: Any) -> cloudwatch.Metric:
        """Requests answered 5xx (sum)."""
        return self.metric("Invocation5XXErrors", **options)

    def metric_invocation_model_errors(self, **options: Any) -> cloudwatch.Metric:
        """Requests the container answered with an error or did not answer (sum)."""
        return self.metric("InvocationModelErrors", **options)

    def metric_model_setup_time(self, **options: Any) -> cloudwatch.Metric:
        """Time to start a new instance of the model, microseconds (average)."""
        return self.metric("ModelSetupTime", **{"statistic": "Average", **options})

    def metric_cpu_utilization(self, **options: Any) -> cloudwatch.Metric:
        """CPU use of the instances, percent of one core times the cores (average)."""
        return self.metric("CPUUtilization", namespace=INSTANCE_NAMESPACE, **{"statistic": "Average", **options})

    def metric_memory_utilization(self, **options: Any) -> cloudwatch.Metric:
        """Memory use of the instances, percent (average)."""
        return self.metric("MemoryUtilization", namespace=INSTANCE_NAMESPACE, **{"statistic": "Average", **options})

    def metric_gpu_utilization(self, **options: Any) -> cloudwatch.Metric:
        """GPU use of the instances, percent of one GPU times the GPUs (average)."""
        return self.metric("GPUUtilization", namespace=INSTANCE_NAMESPACE, **{"statistic": "Average", **options})

    def metric_gpu_memory_utilization(self, **options: Any) -> cloudwatch.Metric:
        """GPU memory use of the instances, percent (average)."""
        return self.metric("GPUMemoryUtilization", namespace=INSTANCE_NAMESPACE, **{"statistic": "Average", **options})

    def metric_disk_utilization(self, **options: Any) -> cloudwatch.Metric:
        """Disk use of the instances' ML storage, percent (average)."""
        return self.metric("DiskUtilization", namespace=INSTANCE_NAMESPACE, **{"statistic": "Average", **options})

    def dashboard_widgets(self) -> list[list[cloudwatch.IWidget]]:
        """Rows of dashboard widgets for this endpoint: traffic and errors, model and overhead
        latency percentiles, what drives autoscaling, the instances' CPU, memory, GPU and disk,
        and the alarms' states."""
        name = self.node.id

        def percentiles(metric: cloudwatch.Metric, title: str) -> cloudwatch.GraphWidget:
            # SageMaker publishes latencies in microseconds: shown in milliseconds.
            lines = {
                p: cloudwatch.MathExpression(
                    expression=f"{p} / 1000",
                    using_metrics={p: metric.with_(statistic=p)},
                    label=f"{p} ms",
                    period=Duration.minutes(1),
                )
                for p in ("p50", "p90", "p99")
            }
            return cloudwatch.GraphWidget(title=title, left=list(lines.values()), width=8)

        traffic = cloudwatch.GraphWidget(
            title=f"{name}: invocations and errors per minute",
            left=[self.metric_invocations(label="invocations")],
            right=[
                self.metric_invocation_4xx_errors(label="4xx"),
                self.metric_invocation_5xx_errors(label="5xx"),
                self.metric_invocation_model_errors(label="model errors"),
            ],
            width=8,
        )
        scaling = self._scaling_widget()
        usage = [
            cloudwatch.GraphWidget(
                title=f"{name}: CPU and memory, %",
                left=[self.metric_cpu_utilization(label="CPU"), self.metric_memory_utilization(label="memory")],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title=f"{name}: GPU and GPU memory, %",
                left=[self.metric_gpu_utilization(label="GPU"), self.metric_gpu_memory_utilization(label="GPU memory")],
                width=8,
            ),
            cloudwatch.GraphWidget(
                title=f"{name}: ML storage volume, % used", left=[self.metric_disk_utilization(label="disk")], width=8
            ),
        ]
        rows: list[list[cloudwatch.IWidget]] = [
            [
                traffic,
                percentiles(self.metric_model_latency(), f"{name}: model latency"),
                percentiles(self.metric_overhead_latency(), f"{name}: overhead latency"),
            ],
            [scaling, *usage[:2]],
            [usage[2]],
        ]
        if self.alarms:
            rows[2].append(cloudwatch.AlarmStatusWidget(title=f"{name}: alarms", alarms=self.alarms, width=16))
        return rows

    def _scaling_widget(self) -> cloudwatch.GraphWidget:
        """What the mode's scaling tracks, its target, and what brings it back from zero."""
        name, props = self.node.id, self.props

        def target(value: float) -> list[cloudwatch.HorizontalAnnotation]:
            return [cloudwatch.HorizontalAnnotation(value=value, label="scaling target")]

        if props.inference_component is not None:
            return cloudwatch.GraphWidget(
                title=f"{name}: invocations per copy (what scaling tracks) and requests that found no copy",
                left=[self.metric_invocations_per_copy(label="invocations per copy")],
                left_annotations=target(props.inference_component.target_invocations_per_copy),
                right=[self.metric_no_capacity_failures(label="no copy")],
                width=8,
            )
        if props.async_inference is not None:
            return cloudwatch.GraphWidget(
                title=f"{name}: queued requests per instance (what scaling tracks) and queued without an instance",
                left=[self.metric_backlog(label="queued"), self.metric_backlog_per_instance(label="per instance")],
                left_annotations=target(props.async_inference.target_backlog_per_instance),
                right=[self.metric_backlog_without_capacity(label="queued, no instance")],
                width=8,
            )
        tracked = props.autoscaling.target_invocations_per_instance if props.autoscaling else None
        return cloudwatch.GraphWidget(
            title=f"{name}: invocations per instance (what autoscaling tracks) and instances reporting",
            left=[self.metric_invocations_per_instance(label="invocations per instance")],
            left_annotations=target(tracked) if tracked else None,
            right=[self.metric_cpu_utilization(statistic="SampleCount", label="instances reporting")],
            width=8,
        )

    # --- autoscaling and alarms -------------------------------------------------------------

    def auto_scale_instance_count(self, props: AutoscalingProps) -> appscaling.CfnScalableTarget:
        """Scale the variant's instance count on invocations per instance (once)."""
        if self.scalable_target is not None:
            raise ValueError(f"{self.node.path}: autoscaling is already configured")
        count = self.props.instance_count
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

    def add_alarms(self, props: AlarmProps, *, topic: sns.ITopic | None = None) -> list[cloudwatch.Alarm]:
        """The alarms `props` sets (see :class:`AlarmProps`); `topic` is notified on ALARM and
        OK. Those on what a new model can break become the update's rollback alarms."""
        period = Duration.seconds(props.period_s)
        gpu = instances.gpus(self.props.instance_type) > 0
        # (id, threshold, description, metric, alarm above rather than at, a rollback alarm)
        specs = [
            # ModelLatency is published in microseconds.
            ("LatencyAlarm", None if props.latency_ms is None else props.latency_ms * 1000,
             f"Mean model latency above {props.latency_ms} ms", self.metric_model_latency, True, True),
            ("Errors5xxAlarm", props.errors_5xx, f"{props.errors_5xx} or more 5xx invocation errors per period",
             self.metric_invocation_5xx_errors, False, True),
            ("ModelErrorsAlarm", props.model_errors,
             f"{props.model_errors} or more invocations per period the model answered with an error or did not "
             "answer", self.metric_invocation_model_errors, False, True),
            ("DiskAlarm", props.disk_percent, f"ML storage volume more than {props.disk_percent}% full",
             self.metric_disk_utilization, True, False),
            ("GpuMemoryAlarm", props.gpu_memory_percent if gpu else None,
             f"GPU memory more than {props.gpu_memory_percent}% used", self.metric_gpu_memory_utilization, True, False),
        ]  # fmt: skip
        rollback: list[cloudwatch.Alarm] = []
        capacity: list[cloudwatch.Alarm] = []
        for construct_id, threshold, description, metric, strictly, rolls_back in specs:
            if threshold is None:
                continue
            alarm = self._alarm(construct_id, description, metric(period=period), threshold, props, strictly=strictly)
            (rollback if rolls_back else capacity).append(alarm)
        added = rollback + capacity
        if topic is not None:
            action = cw_actions.SnsAction(topic)
            for alarm in added:
                alarm.add_alarm_action(action)
                alarm.add_ok_action(action)
        self.alarms.extend(added)
        self.rollback_alarms.extend(rollback)
        self._set_deployment_config()
        if self.props.deployment.auto_rollback:
            # Deployment guardrails' guide: the execution role reads the rollback alarms' states.
            # Their ARNs from their names, not their attributes: the role's policy must exist
            # before the model, which comes before the endpoint the alarms watch.
            stack = Stack.of(self)
            arns = [
                stack.format_arn(
                    service="cloudwatch",
                    resource="alarm",
                    resource_name=self._alarm_names[alarm.node.id],
                    arn_format=ArnFormat.COLON_RESOURCE_NAME,
                )
                for alarm in rollback
            ]
            self.role.add_to_principal_policy(
                iam.PolicyStatement(actions=["cloudwatch:DescribeAlarms"], resources=arns)
            )
        return added

    def _alarm(
        self,
        construct_id: str,
        description: str,
        metric: cloudwatch.IMetric,
        threshold: float,
        props: AlarmProps,
        *,
        strictly: bool = False,
    ) -> cloudwatch.Alarm:
        # A name of its own, unique to the stack and path, used as written: the endpoint's update
        # policy names its rollback alarms, which name the endpoint in their dimensions; a
        # reference either way would make each wait for the other.
        name = f"{Names.unique_resource_name(self, max_length=200, separator='-')}-{construct_id}"
        self._alarm_names[construct_id] = name
        return cloudwatch.Alarm(
            self,
            construct_id,
            alarm_name=name,
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            evaluation_periods=props.evaluation_periods,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
            if strictly
            else cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )

    # --- the update policy ----------------------------------------------------------------------

    def _set_deployment_config(self) -> None:
        """The endpoint's DeploymentConfig from its props and rollback alarms."""
        deployment = self.props.deployment
        alarms = self.rollback_alarms if deployment.auto_rollback else []
        rollback = None
        if alarms:
            rollback = sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
                alarms=[sagemaker.CfnEndpoint.AlarmProperty(alarm_name=self._alarm_names[a.node.id]) for a in alarms]
            )
        if self.inference_component is not None:
            # The component carries the model: its updates are the ones that roll back.
            names = [self._alarm_names[a.node.id] for a in alarms]
            self.inference_component.deployment_config = component_deployment(deployment, names)
            return
        strategy = self.props.deployment_strategy
        self.endpoint.deployment_config = sagemaker.CfnEndpoint.DeploymentConfigProperty(
            auto_rollback_configuration=rollback,
            **_update_policy(strategy, deployment),
        )

    def _fail_rolled_back_updates(self) -> None:
        """After each update, read what the endpoint runs (its endpoint config; the model of its
        inference component); an SSM parameter that only accepts what the template asks for
        then fails the update if SageMaker rolled it back, and CloudFormation rolls the stack
        back to what the endpoint runs."""
        watched = self._watched()
        role, log_group = function_role(self, "UpdateCheck", f"Reads the {watched.what} runs after an update")
        describe = cr.AwsSdkCall(
            service="SageMaker",
            action=watched.action,
            parameters=watched.parameters,
            # A new physical id with each new config or model: the call runs after each update.
            physical_resource_id=cr.PhysicalResourceId.of(watched.expected),
            output_paths=[watched.field],
        )
        running = cr.AwsCustomResource(
            self,
            "RunningConfig",
            on_create=describe,
            on_update=describe,
            policy=cr.AwsCustomResourcePolicy.from_statements(
                [iam.PolicyStatement(actions=[watched.iam_action], resources=[watched.arn])]
            ),
            role=role,
            log_group=log_group,
            install_latest_aws_sdk=False,
        )
        running.node.add_dependency(watched.resource)
        self.update_check = ssm.StringParameter(
            self,
            "UpdateCheck",
            description=(
                f"The {watched.what} runs. An update fails here when SageMaker rolled the endpoint back to its "
                f"previous {watched.noun}: the value then does not match the pattern of the {watched.noun} the "
                "template asked for"
            ),
            string_value=running.get_response_field(watched.field),
            allowed_pattern=f"^{watched.expected}$",
        )

    def _watched(self) -> _Watched:
        """What an update changes and SageMaker may roll back: the endpoint's config, or the
        model of its inference component (whose own update the component's DeploymentConfig
        rolls back; the endpoint config stays)."""
        if self.inference_component is not None and self.component_name is not None:
            return _Watched(
                what="model the inference component",
                noun="model",
                expected=self.model.attr_model_name,
                action="describeInferenceComponent",
                parameters={"InferenceComponentName": self.component_name},
                field="Specification.ModelName",
                arn=self.inference_component.attr_inference_component_arn,
                resource=self.inference_component,
            )
        return _Watched(
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
        stack = Stack.of(self)
        log_groups = stack.format_arn(
            service="logs",
            resource="log-group",
            resource_name=f"{LOG_GROUP_PREFIX}/*",
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
            f"AwsSolutions-IAM5[Resource::{nag_arn(stack, 'logs', f'log-group:{LOG_GROUP_PREFIX}/*')}]",
            "The endpoint's log group name is generated by SageMaker from the endpoint name, "
            "which CloudFormation generates after this policy must exist",
        )
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::{nag_arn(stack, 'logs', f'log-group:{LOG_GROUP_PREFIX}/*:log-stream:*')}]",
            "Log streams are created per instance by SageMaker under the endpoint's log group",
        )


def _update_policy(strategy: str, deployment: DeploymentProps) -> dict[str, Any]:
    """The BlueGreenUpdatePolicy or RollingUpdatePolicy of `strategy` (DeploymentConfig's keys)."""
    percent = sagemaker.CfnEndpoint.CapacitySizeProperty
    if strategy == "rolling":
        return {
            "rolling_update_policy": sagemaker.CfnEndpoint.RollingUpdatePolicyProperty(
                maximum_batch_size=percent(type="CAPACITY_PERCENT", value=deployment.rolling_batch_percent),
                wait_interval_in_seconds=deployment.wait_interval_s,
                maximum_execution_timeout_in_seconds=deployment.max_execution_timeout_s,
            )
        }
    routing = sagemaker.CfnEndpoint.TrafficRoutingConfigProperty(
        type=strategy.upper().replace("-", "_"),
        wait_interval_in_seconds=deployment.wait_interval_s,
        canary_size=percent(type="CAPACITY_PERCENT", value=deployment.canary_percent) if strategy == "canary" else None,
        linear_step_size=percent(type="CAPACITY_PERCENT", value=deployment.linear_step_percent)
        if strategy == "linear"
        else None,
    )
    return {
        "blue_green_update_policy": sagemaker.CfnEndpoint.BlueGreenUpdatePolicyProperty(
            traffic_routing_configuration=routing,
            termination_wait_in_seconds=deployment.termination_wait_s,
            maximum_execution_timeout_in_seconds=deployment.max_execution_timeout_s,
        )
    }


@dataclass(frozen=True)
class _Watched:
    """A resource whose update SageMaker may roll back, and the field that shows it."""

    what: str
    noun: str
    expected: str
    action: str  # the SDK's name of the Describe call
    parameters: dict[str, str]
    field: str
    arn: str
    resource: Construct

    @property
    def iam_action(self) -> str:
        return f"sagemaker:{self.action[0].upper()}{self.action[1:]}"
