"""An answer checked against botocore's model of its operation's output, as AWS's answers keep it:
every member the shape requires is there, no member the shape lacks is (botocore's parsers drop
such a member without a word, so this reads the body as it was sent, JSON or XML), each value of
its type (a timestamp as the protocol writes it), within its lengths and ranges, off no pattern
or enum. What AWS leaves out it leaves out: a member it has no value for is absent, never null.

Used by the local AWS on its own answers (``local_aws.patches.protocol``): an answer that breaks
its shape is a fault of the emulator (local_aws/faults.py)."""

from __future__ import annotations

import base64
import binascii
import email.utils
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any
from xml.etree import ElementTree

from botocore.model import OperationModel, Shape, StructureShape
from moto.core.utils import get_service_model

from local_aws.validation.model import _size_problems, _string_problems

#: Where a value is in an answer: member names (as the model names them), and list items by index.
Where = tuple[str | int, ...]


@dataclass(frozen=True)
class Violation:
    """One value of an answer that AWS would not send."""

    where: Where
    problem: str
    #: Of a value off its enum: the enum's shape and the value (AWS answers some beyond the model).
    off_enum: tuple[str, str] | None = None

    def __str__(self) -> str:
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in self.where).lstrip(".")
        return f"{path or '(the answer)'}: {self.problem}"


#: The values AWS answers beyond the enum of botocore's model, by service and enum shape, each
#: with its source.
BEYOND_THE_MODEL: dict[tuple[str, str], frozenset[str]] = {
    # A stack a CREATE change set makes is in REVIEW_IN_PROGRESS, and DescribeStackEvents answers
    # an event of the stack in that status (StackEvents[0] of a new stack: what aws-sam-cli reads;
    # ministackorg/ministack#890 and floci-io/floci#1431 added it to their emulators for it).
    ("cloudformation", "ResourceStatus"): frozenset({"REVIEW_IN_PROGRESS"}),
    # "For an internet gateway, the state is available when attached to a VPC" (the EC2 API
    # reference, InternetGatewayAttachment), though the enum it shares lists attaching, attached,
    # detaching and detached.
    ("ec2", "AttachmentStatus"): frozenset({"available"}),
}

#: The protocols whose bodies this reads (botocore's names; moto's for JSON asked of a query service).
JSON_PROTOCOLS = frozenset({"json", "rest-json"})
XML_PROTOCOLS = frozenset({"query", "ec2"})
CHECKED_PROTOCOLS = JSON_PROTOCOLS | XML_PROTOCOLS


def answer_violations(
    service: str, operation: str, protocol: str, headers: Mapping[str, str], body: str | bytes | None
) -> list[Violation]:
    """What breaks the output shape of `service`'s `operation` in its successful answer, sent in
    `protocol` with `headers` and `body` (of a raw payload, or a stream, whose `body` is None, only
    the headers are read)."""
    model = get_service_model(service).operation_model(operation)
    shape = model.output_shape
    found: list[Violation] = []
    if shape is not None and protocol == "rest-json":
        found += _header_violations(shape, headers)
    if _raw_payload(shape) or body is None:
        return found
    text = body.decode("utf-8") if isinstance(body, bytes) else body
    if protocol in JSON_PROTOCOLS:
        found += _json_answer(model, shape, text, protocol)
    elif protocol in XML_PROTOCOLS:
        found += _xml_answer(model, shape, text, protocol)
    return [
        v
        for v in found
        if v.off_enum is None or v.off_enum[1] not in BEYOND_THE_MODEL.get((service, v.off_enum[0]), ())
    ]


# --- What is not in the body ----------------------------------------------------------------------


def _raw_payload(shape: StructureShape | None) -> bool:
    """Whether the body is a payload of bytes or events, none of the model's members."""
    if shape is None:
        return False
    payload = shape.serialization.get("payload")
    return payload is not None and shape.members[payload].type_name != "structure"


def _in_body(shape: StructureShape) -> dict[str, Shape]:
    """The members of a REST answer's body (the others are its headers or status)."""
    return {n: m for n, m in shape.members.items() if m.serialization.get("location") is None}


def _header_violations(shape: StructureShape, headers: Mapping[str, str]) -> Iterator[Violation]:
    sent = {k.lower(): v for k, v in headers.items()}
    for name, member in shape.members.items():
        if member.serialization.get("location") != "header":
            continue
        value = sent.get(str(member.serialization.get("name", name)).lower())
        if value is None:
            if name in shape.required_members:
                yield Violation((name,), "a required member (a header) is missing")
            continue
        yield from _text_violations(member, value, (name,), timestamps="rfc822")


# --- JSON ----------------------------------------------------------------------------------------


def _json_answer(model: OperationModel, shape: StructureShape | None, text: str, protocol: str) -> list[Violation]:
    if not text.strip():
        # No body: right for an operation with nothing to answer, and for one whose members are all
        # optional (botocore reads an empty body as {}).
        return [] if shape is None else list(_missing((), shape, {}, _in_body(shape)))
    try:
        value = json.loads(text)
    except ValueError as exc:
        return [Violation((), f"the body is not JSON ({exc})")]
    if shape is None:
        return [] if value == {} else [Violation((), f"the operation answers nothing, but the body is {text[:200]}")]
    payload = shape.serialization.get("payload")
    if payload is not None:
        return list(_json_violations(shape.members[payload], value, (payload,)))
    return list(_json_structure(shape, value, (), _in_body(shape)))


def _json_name(name: str, member: Shape) -> str:
    return str(member.serialization.get("name", name))


def _missing(
    where: Where, shape: StructureShape, present: Mapping[str, Any], members: Mapping[str, Shape]
) -> Iterator[Violation]:
    for name in shape.required_members:
        if name in members and _json_name(name, members[name]) not in present:
            yield Violation((*where, name), "a required member is missing")


def _json_structure(
    shape: StructureShape, value: Any, where: Where, members: Mapping[str, Shape]
) -> Iterator[Violation]:
    if not isinstance(value, dict):
        yield Violation(where, f"a structure ({shape.name}) answered as {type(value).__name__}")
        return
    if shape.is_document_type:
        return
    by_name = {_json_name(n, m): (n, m) for n, m in members.items()}
    for key, item in value.items():
        if key not in by_name:
            if not (shape.is_tagged_union and key == "__type"):
                yield Violation((*where, key), f"{shape.name} has no such member")
            continue
        name, member = by_name[key]
        yield from _json_violations(member, item, (*where, name))
    yield from _missing(where, shape, value, members)
    if shape.is_tagged_union and sum(1 for k in value if k in by_name) != 1:
        yield Violation(where, f"a union ({shape.name}) with {len(value)} members set, not one")


def _json_violations(shape: Shape, value: Any, where: Where) -> Iterator[Violation]:
    kind = shape.type_name
    if value is None:
        yield Violation(where, "null: AWS leaves out a member it has no value for")
    elif kind == "structure":
        assert isinstance(shape, StructureShape)
        yield from _json_structure(shape, value, where, shape.members)
    elif kind in ("list", "map"):
        yield from _json_collection(shape, value, where)
    elif kind == "timestamp":
        yield from _json_timestamp(shape, value, where)
    elif kind in ("string", "blob") and isinstance(value, str):
        yield from _text_violations(shape, value, where, timestamps="")
    elif _json_scalar(kind, value):
        yield from _sizes(shape, value, where)
    else:
        yield Violation(where, f"{_a(kind)} answered as {type(value).__name__} {json.dumps(value)[:80]}")


def _json_collection(shape: Any, value: Any, where: Where) -> Iterator[Violation]:
    kind = shape.type_name
    if not isinstance(value, list if kind == "list" else dict):
        yield Violation(where, f"{_a(kind)} answered as {type(value).__name__}")
        return
    yield from _sizes(shape, value, where)
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield from _json_violations(shape.member, item, (*where, i))
        return
    for key, item in value.items():
        yield from _text_violations(shape.key, key, (*where, key), timestamps="")
        yield from _json_violations(shape.value, item, (*where, key))


def _json_scalar(kind: str, value: Any) -> bool:
    """Whether `value` is a boolean's or a number's as JSON writes it."""
    if kind == "boolean":
        return isinstance(value, bool)
    if kind in ("integer", "long"):
        return isinstance(value, int) and not isinstance(value, bool)
    return kind in ("float", "double") and _is_json_number(value)


def _is_json_number(value: Any) -> bool:
    # JSON has no NaN or infinity: AWS's JSON protocols write them as strings.
    if isinstance(value, str):
        return value in ("NaN", "Infinity", "-Infinity")
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _json_timestamp(shape: Shape, value: Any, where: Where) -> Iterator[Violation]:
    written = shape.serialization.get("timestampFormat", "unixTimestamp")
    if written == "unixTimestamp":
        if not (isinstance(value, int | float) and not isinstance(value, bool)):
            yield Violation(where, f"a timestamp answered as {json.dumps(value)[:80]}, not seconds since the epoch")
    elif not isinstance(value, str) or _timestamp(value, written) is None:
        yield Violation(where, f"a timestamp answered as {json.dumps(value)[:80]}, not {written}")


# --- XML -----------------------------------------------------------------------------------------


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _xml_answer(model: OperationModel, shape: StructureShape | None, text: str, protocol: str) -> list[Violation]:
    try:
        root = ElementTree.fromstring(text)  # noqa: S314 -- the local AWS's own answer
    except ElementTree.ParseError as exc:
        return [Violation((), f"the body is not XML ({exc})")]
    if _local(root.tag) != f"{model.name}Response":
        return [Violation((), f"the answer's root is <{_local(root.tag)}>, not <{model.name}Response>")]
    if protocol == "ec2":
        # EC2 writes the members in the root, beside the request's id.
        if shape is None:
            return [
                Violation((_local(e.tag),), "the operation answers nothing")
                for e in root
                if _local(e.tag) != "requestId"
            ]
        return list(_xml_structure(shape, root, (), ignore=("requestId",)))
    wrapper = shape.serialization.get("resultWrapper") if shape is not None else None
    found: list[Violation] = []
    result = None
    for child in root:
        name = _local(child.tag)
        if name == "ResponseMetadata":
            continue
        if name == wrapper and result is None:
            result = child
        elif not (shape is None and name == f"{model.name}Result" and len(child) == 0):
            found.append(Violation((name,), f"<{model.name}Response> has no such member"))
    if shape is not None:
        found += _xml_structure(shape, result if result is not None else ElementTree.Element(str(wrapper)), ())
    return found


def _xml_key(name: str, member: Shape) -> str:
    """The element a structure's member is written as (botocore's _member_key_name)."""
    if member.type_name == "list" and member.serialization.get("flattened"):
        named = member.member.serialization.get("name")
        if named is not None:
            return str(named)
    return str(member.serialization.get("name", name))


def _xml_structure(
    shape: StructureShape, element: ElementTree.Element, where: Where, ignore: tuple[str, ...] = ()
) -> Iterator[Violation]:
    keys = {_xml_key(n, m): (n, m) for n, m in shape.members.items() if not m.serialization.get("xmlAttribute")}
    children: dict[str, list[ElementTree.Element]] = {}
    for child in element:
        children.setdefault(_local(child.tag), []).append(child)
    for key, elements in children.items():
        if key in ignore:
            continue
        if key not in keys:
            yield Violation((*where, key), f"{shape.name} has no such member")
            continue
        name, member = keys[key]
        flattened = member.type_name in ("list", "map") and member.serialization.get("flattened")
        if flattened:
            yield from _xml_violations(member, elements, (*where, name))
        elif len(elements) > 1:
            yield Violation((*where, name), f"written {len(elements)} times")
        else:
            yield from _xml_violations(member, elements[0], (*where, name))
    for name in shape.required_members:
        if _xml_key(name, shape.members[name]) not in children:
            yield Violation((*where, name), "a required member is missing")


def _xml_violations(shape: Shape, node: Any, where: Where) -> Iterator[Violation]:
    kind = shape.type_name
    if kind == "structure":
        assert isinstance(shape, StructureShape)
        yield from _xml_structure(shape, node, where)
    elif kind == "list":
        yield from _xml_list(shape, node, where)
    elif kind == "map":
        yield from _xml_map(shape, node, where)
    elif len(node):
        yield Violation(where, f"{_a(kind)} written with elements inside")
    else:
        yield from _text_violations(shape, node.text or "", where, timestamps="iso8601")


def _xml_list(shape: Any, node: Any, where: Where) -> Iterator[Violation]:
    if isinstance(node, list):  # flattened: the items themselves
        items = node
    else:
        item_name = shape.member.serialization.get("name", "member")
        items = [child for child in node if _local(child.tag) == item_name]
        for child in node:
            if _local(child.tag) != item_name:
                yield Violation((*where, _local(child.tag)), f"a list's item written as <{_local(child.tag)}>")
    yield from _sizes(shape, items, where)
    for i, item in enumerate(items):
        yield from _xml_violations(shape.member, item, (*where, i))


def _xml_map(shape: Any, node: Any, where: Where) -> Iterator[Violation]:
    entries = node if isinstance(node, list) else [c for c in node if _local(c.tag) == "entry"]
    key_name = shape.key.serialization.get("name", "key")
    value_name = shape.value.serialization.get("name", "value")
    for entry in entries:
        parts = {_local(c.tag): c for c in entry}
        if set(parts) != {key_name, value_name}:
            yield Violation(where, f"a map entry written with {sorted(parts)}")
            continue
        key = parts[key_name].text or ""
        yield from _text_violations(shape.key, key, (*where, key), timestamps="")
        yield from _xml_violations(shape.value, parts[value_name], (*where, key))


# --- Scalars as text, and sizes -----------------------------------------------------------------


def _text_violations(shape: Shape, text: str, where: Where, *, timestamps: str) -> Iterator[Violation]:
    """A scalar written as text: an XML element's, a header's, or a JSON string (``timestamps``
    empty: a JSON string is a string's or a blob's)."""
    kind = shape.type_name
    if kind == "string":
        for problem in (*_size_problems(shape, text, ()), *_string_problems(shape, text, ())):
            off_enum = (shape.name, text) if problem.constraint.startswith("Member must satisfy enum") else None
            yield Violation(where, f"{text[:80]!r}: {problem.constraint}", off_enum)
    elif kind == "timestamp":
        written = shape.serialization.get("timestampFormat", timestamps)
        if _timestamp(text, written) is None:
            yield Violation(where, f"a timestamp written as {text[:80]!r}, not {written}")
    else:
        value = _scalar(kind, text)
        if value is None:
            yield Violation(where, f"{_a(kind)} written as {text[:80]!r}")
        elif kind != "blob":
            yield from _sizes(shape, value, where)


_INTEGER = re.compile(r"-?\d+")
_BOOLEANS = {"true": True, "false": False}


def _scalar(kind: str, text: str) -> Any:
    """The value of a blob, number or boolean written as `text`, else None."""
    if kind == "blob":
        try:
            return base64.b64decode(text, validate=True)
        except binascii.Error:
            return None
    if kind in ("integer", "long"):
        return int(text) if _INTEGER.fullmatch(text) else None
    if kind in ("float", "double"):
        try:
            return float(text)
        except ValueError:
            return None
    return _BOOLEANS.get(text) if kind == "boolean" else None


def _sizes(shape: Shape, value: Any, where: Where) -> Iterator[Violation]:
    for problem in _size_problems(shape, value, ()):
        yield Violation(where, problem.constraint)


@cache
def _iso8601() -> re.Pattern[str]:
    return re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:?\d{2})")


def _timestamp(text: str, written: str) -> datetime | float | None:
    """The time `text` writes in the format `written` (botocore's names), else None."""
    if written == "iso8601":
        if _iso8601().fullmatch(text) is None:
            return None
        return datetime.fromisoformat(text[:19])
    if written == "rfc822":
        try:
            return email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
    if written == "unixTimestamp":
        try:
            return float(text)
        except ValueError:
            return None
    return None


def _a(kind: str) -> str:
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"
