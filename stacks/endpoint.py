"""What both SageMaker stacks do with their section's settings: the endpoint, its alarm topic,
its dashboard, their outputs."""

from __future__ import annotations

import dataclasses
from typing import Protocol

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_sns as sns

from llm_inference_cdk import (
    AlarmTopic,
    ContainerImage,
    ModelData,
    SageMakerEndpoint,
    SageMakerEndpointProps,
    ServiceDashboard,
)


class EndpointSection(Protocol):
    @property
    def endpoint(self) -> SageMakerEndpointProps: ...

    @property
    def alarm_topic_arn(self) -> str | None: ...

    @property
    def alarm_email(self) -> str | None: ...

    def container_environment(self) -> dict[str, str]: ...


def add_endpoint(
    stack: Stack, settings: EndpointSection, image: ContainerImage, model_data: ModelData
) -> SageMakerEndpoint:
    """The endpoint with the stack's container environment over the user's `environment`
    (the configuration refuses a clash), its alarms notifying the stack's topic, its dashboard,
    and the outputs EndpointName, ModelDataUrl, AlarmTopicArn and DashboardUrl (and the mode's:
    InferenceComponentName, AsyncBucket)."""
    environment = {**settings.endpoint.environment, **settings.container_environment()}
    topic = alarm_topic(stack, settings)
    endpoint = SageMakerEndpoint(
        stack,
        "Endpoint",
        image=image,
        model_data=model_data,
        props=dataclasses.replace(settings.endpoint, environment=environment),
        alarm_topic=topic,
    )
    CfnOutput(stack, "EndpointName", value=endpoint.endpoint_name)
    if endpoint.component_name is not None:
        CfnOutput(stack, "InferenceComponentName", value=endpoint.component_name)
    if endpoint.async_output is not None:
        CfnOutput(stack, "AsyncBucket", value=endpoint.async_output.bucket.bucket_name)
    CfnOutput(stack, "ModelDataUrl", value=endpoint.model_data_url)
    dashboard = ServiceDashboard(stack, "Dashboard", rows=endpoint.dashboard_widgets())
    CfnOutput(stack, "DashboardUrl", value=dashboard.url)
    return endpoint


class Notifications(Protocol):
    @property
    def alarm_topic_arn(self) -> str | None: ...

    @property
    def alarm_email(self) -> str | None: ...


def alarm_topic(stack: Stack, settings: Notifications) -> sns.ITopic:
    """The topic the stack's alarms notify: the one `alarm_topic_arn` names, else the stack's
    own (subscribed to `alarm_email`); its ARN is the output AlarmTopicArn."""
    if settings.alarm_topic_arn is not None:
        topic = sns.Topic.from_topic_arn(stack, "AlarmTopic", settings.alarm_topic_arn)
    else:
        topic = AlarmTopic(stack, "Alarms", email=settings.alarm_email).topic
    CfnOutput(stack, "AlarmTopicArn", value=topic.topic_arn)
    return topic
