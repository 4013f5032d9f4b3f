"""SNS: the CloudFormation types of a subscription and a topic policy, which stock moto lacks
(registered by ``cloudformation.missing_resource_types_exist``)."""

from __future__ import annotations

import json
from typing import Any, ClassVar

from moto.sns.models import sns_backends

from local_aws.patches.base import EmulatedResource


class Subscription(EmulatedResource):
    """AWS::SNS::Subscription, on moto's SNS (an e-mail subscription waits for confirmation)."""

    TYPE: ClassVar[str] = "AWS::SNS::Subscription"

    def __init__(self, arn: str) -> None:
        self.subscription_arn = arn

    @property
    def physical_resource_id(self) -> str:
        return self.subscription_arn

    @classmethod
    def create(cls, name: str, properties: dict[str, Any], account_id: str, region_name: str) -> Subscription:
        backend = sns_backends[account_id][region_name]
        subscription = backend.subscribe(properties["TopicArn"], properties["Endpoint"], properties["Protocol"])
        return cls(subscription.arn)

    def delete(self, account_id: str, region_name: str) -> None:
        sns_backends[account_id][region_name].unsubscribe(self.subscription_arn)


class TopicPolicy(EmulatedResource):
    """AWS::SNS::TopicPolicy: the access policy of each topic it names, on moto's SNS."""

    TYPE: ClassVar[str] = "AWS::SNS::TopicPolicy"

    def __init__(self, name: str, topics: list[str], region_name: str) -> None:
        self.name, self.topics, self.region_name = name, topics, region_name

    @property
    def physical_resource_id(self) -> str:
        return self.name

    @classmethod
    def create(cls, name: str, properties: dict[str, Any], account_id: str, region_name: str) -> TopicPolicy:
        backend = sns_backends[account_id][region_name]
        document = json.dumps(properties["PolicyDocument"])
        for topic in properties["Topics"]:
            backend.set_topic_attribute(topic, "policy", document)
        return cls(name, list(properties["Topics"]), region_name)

    def replaced_by(self, properties: dict[str, Any]) -> bool:
        return False  # the policy is set again on the same topics

    def delete(self, account_id: str, region_name: str) -> None:
        # CloudFormation puts back the topic's default policy; the topic may be gone already.
        backend = sns_backends[account_id][region_name]
        for arn in self.topics:
            topic = backend.topics.get(arn)
            if topic is not None:
                topic._policy_json = topic._create_default_topic_policy(region_name, account_id, topic.name)
