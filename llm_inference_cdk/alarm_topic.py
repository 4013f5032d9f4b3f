"""Encrypted SNS topics: a stack's alarms' (CloudWatch may use its key and publish), and others' (an
async endpoint's answers), HTTPS only, with an optional e-mail subscription."""

from __future__ import annotations

import re

from aws_cdk import ArnFormat, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from llm_inference_cdk.props import Check, PropError

#: An address SNS can send to: one @, a dotted domain, no spaces.
EMAIL = Check(
    lambda v: isinstance(v, str) and re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", v) is not None,
    "an e-mail address such as oncall@example.com",
)


class NotificationTopic(Construct):
    """An SNS topic encrypted with a KMS key of its own (rotated yearly), HTTPS only, for the
    notices `what` names; only principals of the account that are granted may publish
    (``topic.grant_publish``).

    :param display_name: the topic's display name, what an e-mail subscriber sees as the sender.
    :param what: what the key encrypts, for its description ("the notices of this endpoint's async
        answers").
    :param email: an address subscribed to the topic (default: none; the subscription waits
        until its owner confirms it from the mail SNS sends).
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, display_name: str, what: str, email: str | None = None
    ) -> None:
        super().__init__(scope, construct_id)
        if email is not None and not EMAIL(email):
            raise PropError(type(self).__name__, "email", email, EMAIL.allowed)
        self.key = kms.Key(
            self,
            "Key",
            enable_key_rotation=True,
            description=f"Encrypts {what}",
            # Notifications are delivered at once: nothing stays encrypted under it.
            removal_policy=RemovalPolicy.DESTROY,
            pending_window=Duration.days(7),
        )
        self.topic = sns.Topic(self, "Topic", display_name=display_name, master_key=self.key, enforce_ssl=True)
        if email is not None:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))

    @property
    def topic_arn(self) -> str:
        return self.topic.topic_arn


class AlarmTopic(NotificationTopic):
    """An SNS topic for alarm and OK notifications (a :class:`NotificationTopic` CloudWatch may
    publish to).

    SNS encrypts it with a KMS key of its own (an AWS-managed key cannot be used: CloudWatch
    needs the key policy to let it encrypt what it publishes), rotated yearly. The topic policy
    and the key policy let CloudWatch publish and use the key only for alarms of this account
    and region: a topic policy replaces SNS's default policy (which let any principal of the
    account publish), so without its own allow every alarm action would fail, written only to
    the alarm's history (AWS knowledge center "cloudwatch-receive-sns-for-alarm-trigger").
    The policy names the account's alarms, not the stack's: listing each alarm's ARN would
    make the policy wait for alarms created after it, and an alarm added later by a user of
    the topic would be refused.

    :param email: an address subscribed to the topic (default: none; the subscription waits
        until its owner confirms it from the mail SNS sends).
    :param for_alarms: whether CloudWatch alarms publish to the topic (default: True; False is
        a :class:`NotificationTopic` named as an alarm topic: prefer that class).
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, email: str | None = None, for_alarms: bool = True
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            display_name="LLM inference alarms",
            what="the alarm notifications of this stack's SNS topic",
            email=email,
        )
        if not for_alarms:
            return
        stack = Stack.of(self)
        alarms = stack.format_arn(
            service="cloudwatch", resource="alarm", resource_name="*", arn_format=ArnFormat.COLON_RESOURCE_NAME
        )
        # CloudWatch names the alarm (aws:SourceArn) and its account (aws:SourceAccount) in the
        # requests it makes for the alarm's actions: the confused-deputy guard of AWS's docs.
        from_alarms = {"StringEquals": {"aws:SourceAccount": stack.account}, "ArnLike": {"aws:SourceArn": alarms}}
        cloudwatch = iam.ServicePrincipal("cloudwatch.amazonaws.com")
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[cloudwatch],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],  # in a key policy, "*" is this key
                conditions=from_alarms,
            )
        )
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                principals=[cloudwatch],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions=from_alarms,
            )
        )
