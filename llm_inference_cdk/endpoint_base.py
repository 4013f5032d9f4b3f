"""What every SageMaker endpoint offers, one this app makes or one imported by name: its name,
ARN and variant, ``grant_invoke`` and the ``metric_*`` SageMaker publishes for it.

aws-cdk's ``aws-sagemaker-alpha`` has the same seam (endpoint.ts: ``EndpointBase`` with
``grantInvoke`` and the metrics, ``Endpoint.fromEndpointName`` returning an ``IEndpoint``);
it formats an imported endpoint's ARN from the name as given, which IAM then compares
case-sensitively with the ARN SageMaker writes in lower case: :meth:`SageMakerEndpoint.from_endpoint_name`
lower-cases the name.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from aws_cdk import Duration, Stack, Token
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from constructs import Construct

from llm_inference_cdk.endpoint_props import SAGEMAKER_NAME, SAGEMAKER_NAME_ALLOWED
from llm_inference_cdk.props import Problem, PropError

#: Namespace of the per-instance metrics SageMaker publishes (CPU, memory, GPU, disk).
INSTANCE_NAMESPACE = "/aws/sagemaker/Endpoints"


@runtime_checkable
class ISageMakerEndpoint(Protocol):
    """A SageMaker endpoint, made by this app or imported: what a user grants and watches."""

    @property
    def endpoint_name(self) -> str: ...

    @property
    def endpoint_arn(self) -> str: ...

    @property
    def variant_name(self) -> str: ...

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant: ...

    def metric(self, metric_name: str, **options: Any) -> cloudwatch.Metric: ...


class SageMakerEndpointBase(Construct):
    """The grants and metrics of an endpoint, from its name, ARN and variant (and, in
    inference-component mode, its component), which subclasses provide."""

    @property
    def endpoint_name(self) -> str:
        raise NotImplementedError

    @property
    def endpoint_arn(self) -> str:
        """The endpoint's ARN as SageMaker writes it (the name in lower case)."""
        raise NotImplementedError

    @property
    def variant_name(self) -> str:
        raise NotImplementedError

    @property
    def component_name(self) -> str | None:
        """The inference component's name (inference-component mode only)."""
        return None

    @property
    def component_arn(self) -> str | None:
        """The inference component's ARN (inference-component mode only)."""
        return None

    # --- grants -----------------------------------------------------------------------------

    def grant_invoke(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let `grantee` call this endpoint and nothing else: InvokeEndpoint (and
        InvokeEndpointWithResponseStream, which the same action covers), on the endpoint's ARN
        and, in inference-component mode, on the component's."""
        arns = [self.endpoint_arn]
        if self.component_arn is not None:
            arns.append(self.component_arn)
        return iam.Grant.add_to_principal(grantee=grantee, actions=["sagemaker:InvokeEndpoint"], resource_arns=arns)

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

    def metric_invocation_failures(self, **options: Any) -> cloudwatch.Metric:
        """Queued requests that failed for any reason: the model's errors, and requests SageMaker
        could not read or answer (sum; async endpoints only, which publish no InvocationModelErrors)."""
        return self.metric("InvocationFailures", **options)

    def metric_invocations_processed(self, **options: Any) -> cloudwatch.Metric:
        """Queued requests processed (sum; async endpoints only, which publish no Invocations; the
        metric's name is ``InvocationsProcesssed``, as SageMaker spells it)."""
        return self.metric("InvocationsProcesssed", **options)

    def metric_time_in_backlog(self, **options: Any) -> cloudwatch.Metric:
        """Time a queued request waited before it was processed, microseconds (average; async
        endpoints only, which publish no OverheadLatency)."""
        return self.metric("TimeInBacklog", **{"statistic": "Average", **options})

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


class ImportedSageMakerEndpoint(SageMakerEndpointBase):
    """An endpoint that exists outside this app (see :meth:`SageMakerEndpoint.from_endpoint_name`
    and :meth:`SageMakerEndpoint.from_endpoint_attributes`): its grants and metrics, nothing
    it would have to own."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        endpoint_arn: str | None = None,
        variant_name: str = "AllTraffic",
    ) -> None:
        owner = "SageMakerEndpoint.from_endpoint_attributes" if endpoint_arn else "SageMakerEndpoint.from_endpoint_name"
        named = not Token.is_unresolved(endpoint_name)
        problems: list[Problem] = []
        if named and not SAGEMAKER_NAME.match(endpoint_name):
            problems.append(Problem(owner, "endpoint_name", endpoint_name, SAGEMAKER_NAME_ALLOWED))
        if endpoint_arn is None and not named:
            problems.append(
                Problem(
                    owner,
                    "endpoint_name",
                    endpoint_name,
                    "a name known at synthesis: SageMaker writes it in lower case in the endpoint's ARN, which "
                    "CloudFormation cannot do to a token; pass endpoint_arn (the endpoint's Ref, or DescribeEndpoint's "
                    "EndpointArn) to SageMakerEndpoint.from_endpoint_attributes",
                )
            )
        if not Token.is_unresolved(variant_name) and not SAGEMAKER_NAME.match(variant_name):
            problems.append(Problem(owner, "variant_name", variant_name, SAGEMAKER_NAME_ALLOWED))
        if problems:
            raise PropError.of(problems)
        super().__init__(scope, construct_id)
        self._endpoint_name, self._variant_name = endpoint_name, variant_name
        # SageMaker writes the endpoint's name in lower case in its ARN, and IAM compares ARNs
        # case-sensitively: a policy on the name as given would deny a mixed-case endpoint.
        self._endpoint_arn = endpoint_arn or Stack.of(self).format_arn(
            service="sagemaker", resource="endpoint", resource_name=endpoint_name.lower()
        )

    @property
    def endpoint_name(self) -> str:
        return self._endpoint_name

    @property
    def endpoint_arn(self) -> str:
        return self._endpoint_arn

    @property
    def variant_name(self) -> str:
        return self._variant_name
