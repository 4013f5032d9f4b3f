"""AlarmTopic in a bare Stack(): CloudWatch may publish to it and use its key, over TLS only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aws_cdk import Stack
from aws_cdk.assertions import Template

from llm_inference_cdk import AlarmTopic, NotificationTopic

CLOUDWATCH = {"Service": "cloudwatch.amazonaws.com"}


def _statements(template: Template, resource_type: str, document: str) -> list[dict[str, Any]]:
    (resource,) = template.find_resources(resource_type).values()
    return list(resource["Properties"][document]["Statement"])


def test_cloudwatch_may_publish_this_accounts_alarms_to_the_topic() -> None:
    """A topic policy replaces SNS's default policy, which is what let CloudWatch publish: the
    policy must allow it itself, or every alarm action fails (written only to the alarm's
    history)."""
    stack = Stack()
    made = AlarmTopic(stack, "Alarms")
    template = Template.from_stack(stack)
    statements = _statements(template, "AWS::SNS::TopicPolicy", "PolicyDocument")
    (allow,) = [s for s in statements if s["Effect"] == "Allow"]
    assert allow["Principal"] == CLOUDWATCH
    assert allow["Action"] == "sns:Publish"
    assert stack.resolve(allow["Resource"]) == stack.resolve(made.topic_arn)
    assert set(allow["Condition"]) == {"StringEquals", "ArnLike"}
    assert set(allow["Condition"]["StringEquals"]) == {"aws:SourceAccount"}
    assert ":cloudwatch:" in str(allow["Condition"]["ArnLike"]["aws:SourceArn"])
    # The TLS deny stays, and denies everyone, CloudWatch included, over plain HTTP.
    (deny,) = [s for s in statements if s["Effect"] == "Deny"]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert deny["Principal"] in ("*", {"AWS": "*"})


def test_cloudwatch_may_use_the_topics_key_for_this_accounts_alarms() -> None:
    stack = Stack()
    AlarmTopic(stack, "Alarms")
    template = Template.from_stack(stack)
    (cloudwatch,) = [s for s in _statements(template, "AWS::KMS::Key", "KeyPolicy") if s.get("Principal") == CLOUDWATCH]
    assert cloudwatch["Effect"] == "Allow"
    assert sorted(cloudwatch["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert set(cloudwatch["Condition"]) == {"StringEquals", "ArnLike"}


@pytest.mark.parametrize(
    "make",
    [
        lambda stack: NotificationTopic(stack, "Answers", display_name="answers", what="answers"),
        lambda stack: AlarmTopic(stack, "Quiet", for_alarms=False),
    ],
)
def test_a_topic_no_alarm_notifies_lets_cloudwatch_in_nowhere(make: Callable[[Stack], object]) -> None:
    """An async endpoint's answer topics are published to by SageMaker with the execution role:
    neither the topic nor its key lets CloudWatch in."""
    stack = Stack()
    make(stack)
    template = Template.from_stack(stack)
    for resource_type, document in (("AWS::SNS::TopicPolicy", "PolicyDocument"), ("AWS::KMS::Key", "KeyPolicy")):
        assert not [s for s in _statements(template, resource_type, document) if s.get("Principal") == CLOUDWATCH]
