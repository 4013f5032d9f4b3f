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


# --- Requests checked against the service's own model ------------------------------------------

# Patterns in botocore's models are Java regular expressions, some with \p{L}-style classes
# that only `regex` reads; AWS matches them against the whole value.
import json  # noqa: E402
from collections.abc import Callable, Iterator, Mapping  # noqa: E402
from functools import cache  # noqa: E402

import regex  # noqa: E402
from botocore.model import OperationModel, Shape  # noqa: E402
from botocore.validate import ParamValidator  # noqa: E402

#: What a request is: (service, operation, parameters), as boto3 would send it.
Request = tuple[str, str, dict[str, Any]]
Path = tuple[str | int, ...]


class Unresolved:
    """A value CloudFormation resolves at deploy time (Ref, Fn::*): not checked at synthesis."""

    def __repr__(self) -> str:
        return "<unresolved>"


UNRESOLVED = Unresolved()


@cache
def operation_model(service: str, operation: str) -> OperationModel:
    import botocore.session

    return botocore.session.get_session().get_service_model(service).operation_model(operation)


@dataclass(frozen=True)
class Problem:
    """One value that breaks one constraint, in the words of AWS's validation messages."""

    path: Path
    value: Any
    #: "Member must ..." as AWS's (Coral) messages say it.
    constraint: str
    missing: bool = False
    #: A sensitive member (botocore's model): AWS's message leaves its value out.
    sensitive: bool = False


def _show(value: Any) -> str:
    return "null" if value is None else f"'{value}'"


def _member_path(path: Path) -> str:
    # AWS's messages write members in lower camel case and list items as "<n>.member" (1-based).
    parts = [f"{p + 1}.member" if isinstance(p, int) else p[:1].lower() + p[1:] for p in path]
    return ".".join(parts)


def _size_problems(shape: Shape, value: Any, path: Path) -> Iterator[Problem]:
    meta, kind = shape.metadata, shape.type_name
    hidden = bool(meta.get("sensitive"))
    if kind in ("list", "map", "string", "blob") and isinstance(value, list | dict | str | bytes):
        if "min" in meta and len(value) < meta["min"]:
            yield Problem(
                path, value, f"Member must have length greater than or equal to {meta['min']}", sensitive=hidden
            )
        if "max" in meta and len(value) > meta["max"]:
            yield Problem(path, value, f"Member must have length less than or equal to {meta['max']}", sensitive=hidden)
    if kind in ("integer", "long", "float", "double") and isinstance(value, int | float):
        if "min" in meta and value < meta["min"]:
            yield Problem(
                path, value, f"Member must have value greater than or equal to {meta['min']}", sensitive=hidden
            )
        if "max" in meta and value > meta["max"]:
            yield Problem(path, value, f"Member must have value less than or equal to {meta['max']}", sensitive=hidden)


def _string_problems(shape: Shape, value: Any, path: Path) -> Iterator[Problem]:
    if shape.type_name != "string" or not isinstance(value, str):
        return
    hidden = bool(shape.metadata.get("sensitive"))
    if "pattern" in shape.metadata and _pattern(shape.metadata["pattern"]).fullmatch(value) is None:
        yield Problem(
            path,
            value,
            f"Member must satisfy regular expression pattern: {shape.metadata['pattern']}",
            sensitive=hidden,
        )
    if shape.enum and value not in shape.enum:
        yield Problem(path, value, f"Member must satisfy enum value set: [{', '.join(shape.enum)}]", sensitive=hidden)


def _model_problems(shape: Shape, value: Any, path: Path) -> Iterator[Problem]:
    """Lengths, ranges, patterns and enums of the model (botocore's validator checks types,
    required members and minimums only)."""
    if value is None or isinstance(value, Unresolved):
        return
    kind = shape.type_name
    if kind == "structure" and isinstance(value, dict):
        for name, member in shape.members.items():
            if name in value:
                yield from _model_problems(member, value[name], (*path, name))
        return
    yield from _size_problems(shape, value, path)
    yield from _string_problems(shape, value, path)
    if kind == "list" and isinstance(value, list):
        for i, item in enumerate(value):
            yield from _model_problems(shape.member, item, (*path, i))
    elif kind == "map" and isinstance(value, dict):
        for key, item in value.items():
            yield from _model_problems(shape.key, key, (*path, str(key)))
            yield from _model_problems(shape.value, item, (*path, str(key)))


@cache
def _pattern(java: str) -> Any:
    # Java writes the supplementary planes as a range of UTF-16 surrogate pairs.
    return regex.compile(java.replace(r"\uD800\uDC00-\uDBFF\uDFFF", r"\U00010000-\U0010FFFF"))


def _at(params: Any, dotted: str) -> Any:
    """The value botocore's validator names ("ProductionVariants[0].ModelName")."""
    value = params
    for part in regex.findall(r"[^.\[\]]+|\[\d+\]", dotted):
        if part.startswith("["):
            value = value[int(part[1:-1])] if isinstance(value, list) else None
        else:
            value = value.get(part) if isinstance(value, dict) else None
    return value


def _botocore_problems(shape: Shape, params: dict[str, Any]) -> Iterator[Problem]:
    report = ParamValidator().validate(params, shape)
    for kind, name, details in report._errors:
        where: Path = tuple(regex.findall(r"[^.\[\]]+", name)) if name else ()
        if kind == "missing required field":
            yield Problem((*where, details["required_name"]), None, "Member must not be null", missing=True)
        elif kind == "invalid type" and not isinstance(_at(params, name), Unresolved):
            yield Problem(where, details["param"], f"Member must be of type {', '.join(details['valid_types'])}")
        elif kind == "unknown field":
            yield Problem((*where, details["unknown_param"]), None, "Member is not a parameter of this request")


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


def _documented_refusal(service: str, operation: str, params: dict[str, Any]) -> Rejected | None:
    for path, constraint in DOCUMENTED.get((service, operation), []):
        for at, value in _values_at(params, path):
            if isinstance(constraint, DocumentedNumber):
                refused = constraint.check(value, _member_path(at))
            else:
                refused = constraint.check(value) if isinstance(value, str) else None
            if refused is not None:
                return refused
    return None


#: The error code each service answers a request that breaks its model with (a Coral-style
#: "N validation error(s) detected" message, as SageMaker, KMS, CloudWatch, IAM, CloudWatch Logs
#: and Application Auto Scaling answer; EC2 and SNS word theirs differently, below).
_VALIDATION_CODE = {
    "sagemaker": "ValidationException",
    # The runtime's model names its error ValidationError (aws/aws-sdk-js#4203 quotes one).
    "sagemaker-runtime": "ValidationError",
    "kms": "ValidationException",
    "application-autoscaling": "ValidationException",
    "ssm": "ValidationException",
    "cloudwatch": "ValidationError",
    "iam": "ValidationError",
    "logs": "InvalidParameterException",
}


def _refusal(service: str, problems: list[Problem]) -> Rejected:
    first = problems[0]
    member = ".".join(str(p) for p in first.path)
    if service == "ec2":
        # EC2's own words (EC2 API reference, "Error codes": MissingParameter, InvalidParameterValue).
        if first.missing:
            return Rejected("MissingParameter", f"The request must contain the parameter {member}")
        return Rejected("InvalidParameterValue", f"Value ({first.value}) for parameter {member} is invalid. "
                        f"{first.constraint}")  # fmt: skip
    if service == "sns":
        # SNS names the parameter only ("Invalid parameter: Topic Name"; SNS API reference, Errors).
        return Rejected("InvalidParameter", f"Invalid parameter: {member}")
    count = f"{len(problems)} validation error{'s' if len(problems) > 1 else ''} detected: "
    said = "; ".join(
        f"Value{'' if p.sensitive else ' ' + _show(p.value)} at '{_member_path(p.path)}' failed to satisfy "
        f"constraint: {p.constraint}"
        for p in problems
    )
    return Rejected(_VALIDATION_CODE.get(service, "ValidationException"), count + said)


def rest_parameters(
    service: str, operation: str, *, uri: Mapping[str, str], headers: Mapping[str, str], body: bytes
) -> dict[str, Any]:
    """A REST request's parameters as botocore's model names them: each member bound to the path
    (from `uri`, by its name there) or a header, and the payload member from `body`. A header
    of an integer member that is not a number stays text (a type problem)."""
    shape = operation_model(service, operation).input_shape
    params: dict[str, Any] = {}
    if shape is None:
        return params
    payload = shape.serialization.get("payload")
    for name, member in shape.members.items():
        where, key = member.serialization.get("location"), member.serialization.get("name", name)
        value: Any = None
        if where == "uri":
            value = uri.get(key)
        elif where == "header":
            value = headers.get(key)
            if value is not None and member.type_name in ("integer", "long") and regex.fullmatch(r"-?\d+", value):
                value = int(value)
        elif name == payload:
            value = body
        if value is not None:
            params[name] = value
    return params


def check_request(service: str, operation: str, params: dict[str, Any]) -> Rejected | None:
    """AWS's refusal of the request (the model's constraints, then the documented ones), or
    None if AWS accepts it as far as these checks see."""
    shape = operation_model(service, operation).input_shape
    if shape is None:
        return None
    problems = [*_botocore_problems(shape, params), *_model_problems(shape, params, ())]
    if problems:
        return _refusal(service, problems)
    return _documented_refusal(service, operation, params)


# --- CloudFormation resources as the requests CloudFormation makes -----------------------------

#: The name CloudFormation generates when a template names nothing: its generator is not
#: moto's (moto's can be longer than AWS allows), so a stand-in that every name rule accepts.
GENERATED_NAME = "generated-by-cloudformation"
#: An id CloudFormation knows once an earlier call of the resource answered.
_EARLIER_ID = "id-from-an-earlier-call"


def _is_intrinsic(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)).startswith(("Fn::", "Ref"))


def _holds_unresolved(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_holds_unresolved(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_unresolved(v) for v in value)
    return isinstance(value, Unresolved)


def _scalar(kind: str, value: Any) -> Any:
    if kind in ("integer", "long") and isinstance(value, str) and regex.fullmatch(r"-?\d+", value):
        return int(value)
    if kind in ("float", "double") and isinstance(value, str) and regex.fullmatch(r"-?\d+(\.\d*)?", value):
        return float(value)
    if kind in ("float", "double") and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind == "boolean" and isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if kind == "string" and isinstance(value, dict | list):
        # A policy or a dashboard given as an object; one that names another resource is left
        # to the service (its text is not what the template says).
        return UNRESOLVED if _holds_unresolved(value) else json.dumps(value)
    if kind == "string" and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


def coerce(shape: Shape, value: Any) -> Any:
    """A CloudFormation property value as the API request carries it: numbers and booleans from
    the strings CloudFormation passes, JSON documents as text, members the request does not have
    dropped (the resource's schema, not the API, decides about them), unresolved values marked."""
    if _is_intrinsic(value):
        return UNRESOLVED
    kind = shape.type_name
    if kind == "structure" and isinstance(value, dict):
        members = shape.members
        return {k: coerce(members[k], v) for k, v in value.items() if k in members}
    if kind == "list" and isinstance(value, list):
        return [coerce(shape.member, v) for v in value]
    if kind == "map" and isinstance(value, dict):
        return {k: coerce(shape.value, v) for k, v in value.items()}
    return _scalar(kind, value)


def _refers_to(node: Any, resources: set[str]) -> bool:
    """Whether a template fragment reads what a resource of `resources` made (Ref, Fn::GetAtt,
    or ${Resource} in Fn::Sub)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "Fn::GetAtt" or (key == "Ref" and value in resources):
                return True
            if key == "Fn::Sub":
                text = value[0] if isinstance(value, list) else value
                named = {m.split(".")[0] for m in regex.findall(r"\$\{([^}!]+)\}", str(text))}
                if named & resources:
                    return True
            if _refers_to(value, resources):
                return True
    elif isinstance(node, list):
        return any(_refers_to(item, resources) for item in node)
    return False


def made_by_the_emulator(template_value: Any, resolved: Any, resources: set[str]) -> Any:
    """`resolved`, with each value that came from another resource (a name or id moto made up,
    which AWS would have made valid) marked unresolved: only what the template itself says, and
    its parameters, is checked."""
    if _is_intrinsic(template_value) and _refers_to(template_value, resources):
        return UNRESOLVED
    if isinstance(template_value, dict) and isinstance(resolved, dict):
        return {k: made_by_the_emulator(template_value.get(k), v, resources) for k, v in resolved.items()}
    if isinstance(template_value, list) and isinstance(resolved, list):
        if len(template_value) != len(resolved):  # Fn::If with AWS::NoValue dropped an item
            return UNRESOLVED if _refers_to(template_value, resources) else resolved
        return [made_by_the_emulator(t, r, resources) for t, r in zip(template_value, resolved, strict=True)]
    return resolved


def _rule(rule: dict[str, Any]) -> dict[str, Any]:
    """A SecurityGroupIngress/Egress rule of CloudFormation as EC2's IpPermission."""
    described = {"Description": rule["Description"]} if "Description" in rule else {}
    permission: dict[str, Any] = {k: rule[k] for k in ("IpProtocol", "FromPort", "ToPort") if k in rule}
    if "CidrIp" in rule:
        permission["IpRanges"] = [{"CidrIp": rule["CidrIp"], **described}]
    if "CidrIpv6" in rule:
        permission["Ipv6Ranges"] = [{"CidrIpv6": rule["CidrIpv6"], **described}]
    for key in ("DestinationPrefixListId", "SourcePrefixListId"):
        if key in rule:
            permission["PrefixListIds"] = [{"PrefixListId": rule[key], **described}]
    for key in ("DestinationSecurityGroupId", "SourceSecurityGroupId"):
        if key in rule:
            permission["UserIdGroupPairs"] = [{"GroupId": rule[key], **described}]
    return permission


def _tags(props: dict[str, Any], key: str = "Key", value: str = "Value") -> list[dict[str, Any]]:
    return [{key: t.get("Key"), value: t.get("Value")} for t in props.get("Tags", []) if isinstance(t, dict)]


def _pick(props: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: props[k] for k in keys if k in props}


def _named(props: dict[str, Any], prop: str) -> Any:
    return props.get(prop, GENERATED_NAME)


def _sagemaker(operation: str, name: str, *, drop: tuple[str, ...] = ()) -> Callable[[dict[str, Any]], list[Request]]:
    def requests(props: dict[str, Any]) -> list[Request]:
        params = {k: v for k, v in props.items() if k not in drop}
        return [("sagemaker", operation, {**params, name: _named(props, name)})]

    return requests


def _security_group(props: dict[str, Any]) -> list[Request]:
    create = {
        "GroupName": _named(props, "GroupName"),
        "Description": props.get("GroupDescription"),
        **({"VpcId": props["VpcId"]} if "VpcId" in props else {}),
    }
    if props.get("Tags"):
        create["TagSpecifications"] = [{"ResourceType": "security-group", "Tags": _tags(props)}]
    made: list[Request] = [("ec2", "CreateSecurityGroup", create)]
    for prop, operation in (
        ("SecurityGroupEgress", "AuthorizeSecurityGroupEgress"),
        ("SecurityGroupIngress", "AuthorizeSecurityGroupIngress"),
    ):
        rules = _rules(props.get(prop))
        if rules:
            made.append(("ec2", operation, {"GroupId": _EARLIER_ID, "IpPermissions": [_rule(r) for r in rules]}))
    return made


def _security_group_rule(operation: str) -> Callable[[dict[str, Any]], list[Request]]:
    def requests(props: dict[str, Any]) -> list[Request]:
        group = _pick(props, "GroupId", "GroupName")
        return [("ec2", operation, {**group, "IpPermissions": [_rule(props)]})]

    return requests


def _topic(props: dict[str, Any]) -> list[Request]:
    attributes = _pick(props, "DisplayName", "KmsMasterKeyId", "FifoTopic", "SignatureVersion", "TracingConfig",
                       "ContentBasedDeduplication")  # fmt: skip
    params: dict[str, Any] = {"Name": _named(props, "TopicName"), "Tags": _tags(props)}
    if attributes:
        params["Attributes"] = {k: str(v).lower() if isinstance(v, bool) else v for k, v in attributes.items()}
    return [("sns", "CreateTopic", params)]


def _key(props: dict[str, Any]) -> list[Request]:
    create = _pick(props, "Description", "KeyUsage", "KeySpec", "Origin", "MultiRegion")
    if "KeyPolicy" in props:
        create["Policy"] = props["KeyPolicy"]
    if props.get("BypassPolicyLockoutSafetyCheck") is not None:
        create["BypassPolicyLockoutSafetyCheck"] = props["BypassPolicyLockoutSafetyCheck"]
    made: list[Request] = [("kms", "CreateKey", {**create, "Tags": _tags(props, "TagKey", "TagValue")})]
    if str(props.get("EnableKeyRotation")).lower() == "true":
        rotation = _pick(props, "RotationPeriodInDays")
        made.append(("kms", "EnableKeyRotation", {"KeyId": _EARLIER_ID, **rotation}))
    if "PendingWindowInDays" in props:
        # Used when the stack deletes the key: a value KMS refuses fails that deletion, so
        # CloudFormation's schema refuses it at creation (7-30).
        window = props["PendingWindowInDays"]
        made.append(("kms", "ScheduleKeyDeletion", {"KeyId": _EARLIER_ID, "PendingWindowInDays": window}))
    return made


def _alarm(props: dict[str, Any]) -> list[Request]:
    return [("cloudwatch", "PutMetricAlarm", {**props, "AlarmName": _named(props, "AlarmName")})]


def _dashboard(props: dict[str, Any]) -> list[Request]:
    return [("cloudwatch", "PutDashboard", {**props, "DashboardName": _named(props, "DashboardName")})]


def _role(props: dict[str, Any]) -> list[Request]:
    name = _named(props, "RoleName")
    create = _pick(
        props, "AssumeRolePolicyDocument", "Description", "MaxSessionDuration", "Path", "PermissionsBoundary"
    )
    made: list[Request] = [("iam", "CreateRole", {**create, "RoleName": name, "Tags": _tags(props)})]
    for policy in props.get("Policies", []):
        made.append(("iam", "PutRolePolicy", {"RoleName": name, **policy}))
    return made


def _policy(props: dict[str, Any]) -> list[Request]:
    document = {k: props.get(k) for k in ("PolicyName", "PolicyDocument")}
    return [("iam", "PutRolePolicy", {"RoleName": role, **document}) for role in props.get("Roles", [])]


def _log_group(props: dict[str, Any]) -> list[Request]:
    name = _named(props, "LogGroupName")
    create = {"logGroupName": name, **({"kmsKeyId": props["KmsKeyId"]} if "KmsKeyId" in props else {})}
    made: list[Request] = [("logs", "CreateLogGroup", create)]
    if "RetentionInDays" in props:
        made.append(("logs", "PutRetentionPolicy", {"logGroupName": name, "retentionInDays": props["RetentionInDays"]}))
    return made


def _scalable_target(props: dict[str, Any]) -> list[Request]:
    keys = ("ServiceNamespace", "ResourceId", "ScalableDimension", "MinCapacity", "MaxCapacity", "RoleARN")
    return [("application-autoscaling", "RegisterScalableTarget", _pick(props, *keys))]


def _scaling_policy(props: dict[str, Any]) -> list[Request]:
    params = {k: v for k, v in props.items() if k != "ScalingTargetId"}
    if "ScalingTargetId" in props:
        # The target names the scaled resource, which the target's own request was checked for.
        params = {"ServiceNamespace": "sagemaker", "ResourceId": _EARLIER_ID, "ScalableDimension":
                  "sagemaker:variant:DesiredInstanceCount", **params}  # fmt: skip
    return [("application-autoscaling", "PutScalingPolicy", params)]


def _parameter(props: dict[str, Any]) -> list[Request]:
    keys = ("Name", "Description", "Value", "Type", "AllowedPattern", "Tier", "Policies", "DataType")
    params = _pick(props, *keys)
    tags = props.get("Tags") or {}
    if isinstance(tags, dict) and tags:
        params["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]
    return [("ssm", "PutParameter", {"Name": GENERATED_NAME, **params})]


#: The requests CloudFormation makes for each resource type these stacks create (others pass
#: unchecked: docs/LOCAL_AWS_INPUTS.md lists them).
REQUESTS: dict[str, Callable[[dict[str, Any]], list[Request]]] = {
    "AWS::SageMaker::Model": _sagemaker("CreateModel", "ModelName"),
    "AWS::SageMaker::EndpointConfig": _sagemaker("CreateEndpointConfig", "EndpointConfigName"),
    "AWS::SageMaker::Endpoint": _sagemaker("CreateEndpoint", "EndpointName"),
    "AWS::SageMaker::InferenceComponent": _sagemaker(
        "CreateInferenceComponent", "InferenceComponentName", drop=("DeploymentConfig",)
    ),
    "AWS::EC2::SecurityGroup": _security_group,
    "AWS::EC2::SecurityGroupEgress": _security_group_rule("AuthorizeSecurityGroupEgress"),
    "AWS::EC2::SecurityGroupIngress": _security_group_rule("AuthorizeSecurityGroupIngress"),
    "AWS::SNS::Topic": _topic,
    "AWS::KMS::Key": _key,
    "AWS::CloudWatch::Alarm": _alarm,
    "AWS::CloudWatch::Dashboard": _dashboard,
    "AWS::IAM::Role": _role,
    "AWS::IAM::Policy": _policy,
    "AWS::Logs::LogGroup": _log_group,
    "AWS::ApplicationAutoScaling::ScalableTarget": _scalable_target,
    "AWS::ApplicationAutoScaling::ScalingPolicy": _scaling_policy,
    "AWS::SSM::Parameter": _parameter,
}


def requests_of(resource_type: str, properties: dict[str, Any]) -> list[Request]:
    """The API requests CloudFormation makes to create a resource of `resource_type`, with the
    properties coerced as the requests carry them."""
    make = REQUESTS.get(resource_type)
    if make is None:
        return []
    return [
        (service, operation, coerce(operation_model(service, operation).input_shape, params))
        for service, operation, params in make(properties)
    ]


def check_resource(resource_type: str, properties: dict[str, Any]) -> tuple[Request, Rejected] | None:
    """The first request of the resource that AWS refuses, with AWS's refusal."""
    for request in requests_of(resource_type, properties):
        refused = check_request(*request)
        if refused is not None:
            return request, refused
    return None


def template_problems(template: dict[str, Any]) -> list[str]:
    """Every resource of a synthesized template whose literal values AWS refuses, as
    '<logical id> <service> <operation>: <AWS's error>' (values CloudFormation resolves at deploy
    time are checked when the local AWS creates the resource)."""
    found = []
    for logical_id, resource in template.get("Resources", {}).items():
        refused = check_resource(resource.get("Type", ""), resource.get("Properties", {}))
        if refused is not None:
            (service, operation, _), error = refused
            found.append(f"{logical_id} {service} {operation}: {error}")
    return found
