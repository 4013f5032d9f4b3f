"""An endpoint's asynchronous inference: where answers and failures go (the endpoint's own
bucket and topics), and the instance count's scaling on the queue, down to zero and back."""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from llm_inference_cdk.alarm_topic import NotificationTopic
from llm_inference_cdk.endpoint_props import AsyncInferenceProps
from llm_inference_cdk.nag import acknowledge
from llm_inference_cdk.scaling import VARIANT_INSTANCES, out_of_zero, target_tracking
from llm_inference_cdk.storage import private_bucket

INPUT_PREFIX, OUTPUT_PREFIX, FAILURE_PREFIX = "input/", "output/", "failure/"


class AsyncOutput(Construct):
    """The bucket that holds requests (``input/``), answers (``output/``) and failures
    (``failure/``), encrypted, TLS only, public access blocked, with objects expiring after
    `retention_days`; and the encrypted topics SageMaker announces each answer and failure on.
    The execution role may write answers and failures and publish to the topics."""

    def __init__(self, scope: Construct, construct_id: str, *, role: iam.IRole, retention_days: int = 30) -> None:
        super().__init__(scope, construct_id)
        # Requests and answers are transient (they expire): the stack's deletion empties the
        # bucket (CDK's auto-delete function) and deletes it.
        self.bucket = private_bucket(
            self,
            "Bucket",
            holds="transient requests and answers that expire",
            auto_delete_objects=True,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(retention_days))],
        )
        # SageMaker publishes each answer's notice with the execution role (granted below).
        self.success = NotificationTopic(
            self, "Success", display_name="LLM inference: async answers", what="the notices of this endpoint's answers"
        )
        self.error = NotificationTopic(
            self, "Error", display_name="LLM inference: async failures", what="the notices of this endpoint's failures"
        )
        # SageMaker reads each request and writes each answer with the execution role.
        iam.Grant.add_to_principal(
            grantee=role, actions=["s3:GetObject"], resource_arns=[self.bucket.arn_for_objects(f"{INPUT_PREFIX}*")]
        )
        # AWS's async prerequisites: an answer may be a multipart upload, which SageMaker aborts
        # when it fails.
        iam.Grant.add_to_principal(
            grantee=role,
            actions=["s3:PutObject", "s3:AbortMultipartUpload"],
            resource_arns=[
                self.bucket.arn_for_objects(f"{OUTPUT_PREFIX}*"),
                self.bucket.arn_for_objects(f"{FAILURE_PREFIX}*"),
            ],
        )
        for topic in (self.success, self.error):
            topic.topic.grant_publish(role)
        self._acknowledge_prefixes(role)

    def _acknowledge_prefixes(self, role: iam.IRole) -> None:
        bucket = Stack.of(self).get_logical_id(self.bucket.node.default_child)  # type: ignore[arg-type]
        for prefix, why in (
            (INPUT_PREFIX, "SageMaker reads each request from the prefix callers put them under"),
            (OUTPUT_PREFIX, "SageMaker writes each answer under its own generated key"),
            (FAILURE_PREFIX, "SageMaker writes each failure under its own generated key"),
        ):
            acknowledge(role, f"AwsSolutions-IAM5[Resource::<{bucket}.Arn>/{prefix}*]", why)
        acknowledge(
            role,
            "AwsSolutions-IAM5[Action::kms:GenerateDataKey*]",
            "Publishing to the encrypted topics needs data keys of their keys (CDK's grant_publish), on "
            "those keys alone",
        )

    def config(self, props: AsyncInferenceProps) -> sagemaker.CfnEndpointConfig.AsyncInferenceConfigProperty:
        cfg = sagemaker.CfnEndpointConfig
        return cfg.AsyncInferenceConfigProperty(
            output_config=cfg.AsyncInferenceOutputConfigProperty(
                s3_output_path=self.bucket.s3_url_for_object(OUTPUT_PREFIX),
                s3_failure_path=self.bucket.s3_url_for_object(FAILURE_PREFIX),
                notification_config=cfg.AsyncInferenceNotificationConfigProperty(
                    success_topic=self.success.topic_arn, error_topic=self.error.topic_arn
                ),
            ),
            client_config=cfg.AsyncInferenceClientConfigProperty(
                max_concurrent_invocations_per_instance=props.max_concurrent_invocations_per_instance
            )
            if props.max_concurrent_invocations_per_instance is not None
            else None,
        )

    def grant_submit(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let `grantee` put requests under ``input/``."""
        return iam.Grant.add_to_principal(
            grantee=grantee, actions=["s3:PutObject"], resource_arns=[self.bucket.arn_for_objects(f"{INPUT_PREFIX}*")]
        )

    def grant_read_results(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let `grantee` read answers and failures, and list those two prefixes: without
        s3:ListBucket, S3 answers a look at an answer not written yet with 403, not 404, and a
        caller polling for it could not tell waiting from being refused."""
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["s3:ListBucket"],
            resource_arns=[self.bucket.bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{OUTPUT_PREFIX}*", f"{FAILURE_PREFIX}*"]}},
        )
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["s3:GetObject"],
            resource_arns=[
                self.bucket.arn_for_objects(f"{OUTPUT_PREFIX}*"),
                self.bucket.arn_for_objects(f"{FAILURE_PREFIX}*"),
            ],
        )


def scale_backlog(
    scope: Construct, endpoint_name: str, variant_name: str, props: AsyncInferenceProps
) -> appscaling.CfnScalableTarget:
    """Target tracking of the queue per instance between min_instances and max_instances; with
    min_instances=0, a step policy on HasBacklogWithoutCapacity starts the first instance
    (SageMaker's async autoscaling guide)."""
    policy = appscaling.CfnScalingPolicy
    target = target_tracking(
        scope,
        "BacklogScaling",
        "BacklogScalingPolicy",
        dimension=VARIANT_INSTANCES,
        resource_id=f"endpoint/{endpoint_name}/variant/{variant_name}",
        bounds=(props.min_instances, props.max_instances),
        policy_name="BacklogPerInstance",
        target_value=props.target_backlog_per_instance,
        cooldowns_s=(props.scale_in_cooldown_s, props.scale_out_cooldown_s),
        custom_metric=policy.CustomizedMetricSpecificationProperty(
            metric_name="ApproximateBacklogSizePerInstance",
            namespace="AWS/SageMaker",
            dimensions=[policy.MetricDimensionProperty(name="EndpointName", value=endpoint_name)],
            statistic="Average",
        ),
    )
    if props.min_instances == 0:
        out_of_zero(
            scope,
            target,
            alarm_id="BacklogWithoutCapacityAlarm",
            description="Requests are queued and no instance runs: start one (the way back from zero)",
            metric=cloudwatch.Metric(
                namespace="AWS/SageMaker",
                metric_name="HasBacklogWithoutCapacity",
                dimensions_map={"EndpointName": endpoint_name},
                statistic="Average",
                period=Duration.minutes(1),
            ),
            evaluation_periods=2,
            cooldown_s=props.scale_out_cooldown_s,
            aggregation="Average",
        )
    return target
