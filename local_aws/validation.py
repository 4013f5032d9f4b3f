"""What AWS refuses in a request, checked as AWS checks it: the constraints AWS documents for
the values this project's stacks send, each with its source.

Shared by the local AWS (its patch ``local_aws.patches.inputs`` answers a refused request with
AWS's error, and fails a CloudFormation resource with it) and by the synthesis tests, which run
the same checks on every literal value of the synthesized templates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any


class Rejected(Exception):
    """A request AWS refuses: the error code and message it answers with (HTTP 400)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


@dataclass(frozen=True)
class Documented:
    """A constraint on a string that AWS documents and its botocore model does not carry."""

    #: What the value is, as the message calls it.
    what: str
    #: The characters allowed (a character class, without the brackets), or None.
    characters: str | None
    max_length: int
    #: AWS's error code and message for a value that breaks the constraint.
    code: str
    message: str
    #: Where the constraint and the message are documented or reported.
    source: str
    #: Whether a character beyond ASCII is reported with EC2's own message (GroupDescription).
    ascii_message: str | None = None

    def check(self, value: str) -> Rejected | None:
        if self.ascii_message is not None and not value.isascii():
            return Rejected(self.code, self.ascii_message.replace("{value}", value))
        if len(value) > self.max_length or (
            self.characters is not None and not re.fullmatch(f"[{self.characters}]*", value)
        ):
            return Rejected(self.code, self.message.replace("{value}", value))
        return None


# EC2's character set for security-group names and descriptions and for rule descriptions, in a
# VPC: a-z, A-Z, 0-9, spaces and ._-:/()#,@[]+=&;{}!$* (the EC2 API reference: CreateSecurityGroup's
# GroupDescription, IpRange.Description; the same text is in botocore's ec2 model documentation,
# which carries no pattern).
_EC2_CHARACTERS = r"a-zA-Z0-9 ._\-:/()#,@\[\]+=&;{}!$*"
_EC2_SET = "a-zA-Z0-9. _-:/()#,@[]+=&;{}!$*"

EC2_GROUP_DESCRIPTION = Documented(
    what="security group description",
    characters=_EC2_CHARACTERS,
    max_length=255,
    code="InvalidParameterValue",
    message=f"Invalid security group description. Valid descriptions are strings less than 256 characters "
    f"from the following set:  {_EC2_SET}",
    ascii_message="Value ({value}) for parameter GroupDescription is invalid. Character sets beyond ASCII are "
    "not supported.",
    source="EC2 API reference, CreateSecurityGroup GroupDescription (up to 255 characters of a-z, A-Z, 0-9, "
    "spaces and ._-:/()#,@[]+=&;{}!$*); the messages as AWS answers them: cds-snc/notification-terraform#561, "
    "hashicorp/terraform-provider-aws#43854",
)
EC2_RULE_DESCRIPTION = Documented(
    what="security group rule description",
    characters=_EC2_CHARACTERS,
    max_length=255,
    code="InvalidParameterValue",
    message=f"Invalid rule description. Valid descriptions are strings less than 256 characters from the "
    f"following set:  {_EC2_SET}",
    source="EC2 API reference, IpRange.Description (up to 255 characters of a-z, A-Z, 0-9, spaces and "
    "._-:/()#,@[]+=&;{}!$*); the message as AWS answers it: aws-cloudformation/cfn-lint#173, "
    "agentic-community/mcp-gateway-registry#1728",
)


def _rules(rules: Any) -> list[dict[str, Any]]:
    return [rule for rule in rules if isinstance(rule, dict)] if isinstance(rules, list) else []


def security_group_problems(template: dict[str, Any]) -> list[str]:
    """Every literal security-group or rule description of `template` that EC2 refuses, as
    '<logical id> <property>: <AWS's error>' (values CloudFormation resolves at deploy time are
    checked when the local AWS creates the resource)."""
    found: list[str] = []

    def check(logical_id: str, where: str, value: Any, constraint: Documented) -> None:
        refused = constraint.check(value) if isinstance(value, str) else None
        if refused is not None:
            found.append(f"{logical_id} {where}={value!r}: {refused}")

    for logical_id, resource in template.get("Resources", {}).items():
        props = resource.get("Properties", {})
        kind = resource.get("Type")
        if kind == "AWS::EC2::SecurityGroup":
            check(logical_id, "GroupDescription", props.get("GroupDescription"), EC2_GROUP_DESCRIPTION)
            for direction in ("SecurityGroupIngress", "SecurityGroupEgress"):
                for i, rule in enumerate(_rules(props.get(direction))):
                    check(logical_id, f"{direction}[{i}].Description", rule.get("Description"), EC2_RULE_DESCRIPTION)
        elif kind in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress"):
            check(logical_id, "Description", props.get("Description"), EC2_RULE_DESCRIPTION)
    return found
