"""cdk-nag acknowledgments: every suppression carries the reason it is safe."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Stack, Token, Validations
from constructs import IConstruct


def acknowledge(construct: IConstruct, rule_id: str, reason: str) -> None:
    """Suppress one finding (`AwsSolutions-IAM5[Resource::*]`, ...) on `construct`."""
    Validations.of(construct).acknowledge(Acknowledgment(id=rule_id, reason=reason))


def nag_arn(stack: Stack, service: str, resource: str) -> str:
    """An ARN of `stack`'s account and region as cdk-nag prints it in finding ids:
    pseudo parameters as ``<AWS::Region>``, concrete values as themselves."""
    region = "<AWS::Region>" if Token.is_unresolved(stack.region) else stack.region
    account = "<AWS::AccountId>" if Token.is_unresolved(stack.account) else stack.account
    return f"arn:<AWS::Partition>:{service}:{region}:{account}:{resource}"
