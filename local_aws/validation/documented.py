"""Constraints AWS documents that botocore's service model does not carry (security-group and
rule descriptions, topic names, key deletion windows, log retention days, EC2 tag lengths), each
with its source, and the requests and members each applies to."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from local_aws.validation.base import Path, Rejected, member_path


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


@dataclass(frozen=True)
class DocumentedNumber:
    """A constraint on a number that AWS documents and its botocore model does not carry: a
    range, or a set of allowed values."""

    minimum: int | None = None
    maximum: int | None = None
    allowed: tuple[int, ...] = ()
    #: The error code; the message is the service's validation message for the member.
    code: str = "ValidationException"
    source: str = ""

    def check(self, value: Any, member: str = "") -> Rejected | None:
        if not isinstance(value, int) or isinstance(value, bool):
            return None
        if self.allowed and value not in self.allowed:
            constraint = f"Member must satisfy enum value set: [{', '.join(map(str, self.allowed))}]"
        elif self.minimum is not None and value < self.minimum:
            constraint = f"Member must have value greater than or equal to {self.minimum}"
        elif self.maximum is not None and value > self.maximum:
            constraint = f"Member must have value less than or equal to {self.maximum}"
        else:
            return None
        return Rejected(
            self.code, f"1 validation error detected: Value '{value}' at '{member}' failed to satisfy constraint: "
            f"{constraint}"
        )  # fmt: skip


KMS_PENDING_WINDOW = DocumentedNumber(
    minimum=7,
    maximum=30,
    source="KMS API reference, ScheduleKeyDeletion PendingWindowInDays: 7 to 30 days (the model says 1-365); "
    "CloudFormation's AWS::KMS::Key PendingWindowInDays: 7-30",
)
LOGS_RETENTION_DAYS = DocumentedNumber(
    allowed=(1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653),
    code="InvalidParameterException",
    source="CloudWatch Logs API reference, PutRetentionPolicy retentionInDays (the model has no enum)",
)
SNS_TOPIC_NAME = Documented(
    what="topic name",
    characters="A-Za-z0-9_-",
    max_length=256,
    code="InvalidParameter",
    message="Invalid parameter: Topic Name",
    source="SNS API reference, CreateTopic Name: 1-256 ASCII letters, numbers, underscores and hyphens (a FIFO "
    "topic's ends in .fifo); the model carries no pattern. These stacks make no FIFO topic.",
)
EC2_TAG_KEY = Documented(
    what="tag key",
    characters=None,
    max_length=128,
    code="InvalidParameterValue",
    message="Tag key exceeds the maximum length of 128 characters",
    source="EC2 User Guide, Tag restrictions: keys up to 128 Unicode characters, values up to 256, at most 50 tags; "
    "EC2's exact message is not documented",
)
EC2_TAG_VALUE = Documented(
    what="tag value",
    characters=None,
    max_length=256,
    code="InvalidParameterValue",
    message="Tag value exceeds the maximum length of 256 characters",
    source=EC2_TAG_KEY.source,
)


def rules_of(rules: Any) -> list[dict[str, Any]]:
    """The rules of a security group's SecurityGroupIngress or SecurityGroupEgress property."""
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
                for i, rule in enumerate(rules_of(props.get(direction))):
                    check(logical_id, f"{direction}[{i}].Description", rule.get("Description"), EC2_RULE_DESCRIPTION)
        elif kind in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress"):
            check(logical_id, "Description", props.get("Description"), EC2_RULE_DESCRIPTION)
    return found


#: The documented constraints the models do not carry, by request and member path ("*": any
#: item of a list).
DOCUMENTED: dict[tuple[str, str], list[tuple[Path, Documented | DocumentedNumber]]] = {
    ("ec2", "CreateSecurityGroup"): [
        (("Description",), EC2_GROUP_DESCRIPTION),
        (("TagSpecifications", "*", "Tags", "*", "Key"), EC2_TAG_KEY),
        (("TagSpecifications", "*", "Tags", "*", "Value"), EC2_TAG_VALUE),
    ],
    ("kms", "ScheduleKeyDeletion"): [(("PendingWindowInDays",), KMS_PENDING_WINDOW)],
    ("logs", "PutRetentionPolicy"): [(("retentionInDays",), LOGS_RETENTION_DAYS)],
    ("sns", "CreateTopic"): [(("Name",), SNS_TOPIC_NAME)],
    **{
        ("ec2", operation): [
            (("IpPermissions", "*", ranges, "*", "Description"), EC2_RULE_DESCRIPTION)
            for ranges in ("IpRanges", "Ipv6Ranges", "PrefixListIds", "UserIdGroupPairs")
        ]
        for operation in ("AuthorizeSecurityGroupEgress", "AuthorizeSecurityGroupIngress")
    },
}


def _values_at(params: Any, path: Path, at: Path = ()) -> Iterator[tuple[Path, Any]]:
    if not path:
        yield at, params
        return
    head, rest = path[0], path[1:]
    if head == "*" and isinstance(params, list):
        for i, item in enumerate(params):
            yield from _values_at(item, rest, (*at, i))
    elif isinstance(params, dict) and head in params:
        yield from _values_at(params[head], rest, (*at, head))


def documented_refusal(service: str, operation: str, params: dict[str, Any]) -> Rejected | None:
    """AWS's refusal of the request by a documented constraint, or None."""
    for path, constraint in DOCUMENTED.get((service, operation), []):
        for at, value in _values_at(params, path):
            if isinstance(constraint, DocumentedNumber):
                refused = constraint.check(value, member_path(at))
            else:
                refused = constraint.check(value) if isinstance(value, str) else None
            if refused is not None:
                return refused
    return None
