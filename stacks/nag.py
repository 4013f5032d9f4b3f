"""cdk-nag acknowledgments: every suppression carries the reason it is safe."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct


def acknowledge(construct: IConstruct, rule_id: str, reason: str) -> None:
    """Suppress one finding (`AwsSolutions-IAM5[Resource::*]`, ...) on `construct`."""
    Validations.of(construct).acknowledge(Acknowledgment(id=rule_id, reason=reason))
