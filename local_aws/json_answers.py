"""A JSON answer as AWS writes it, whatever the service: a member that has no value is left out,
never written as null (``local_aws.patches.protocol`` rewrites the answers of moto's handlers that
write their JSON themselves)."""

from __future__ import annotations

import json
from typing import Any

from moto.core.utils import get_service_model


def without_nulls(shape: Any, value: Any) -> Any:
    """`value` of `shape` without the members of its structures that are null (a member the shape
    does not know is kept, but not as null; a document, a map or a list is kept as it is, its
    structures aside)."""
    kind = None if shape is None else shape.type_name
    if kind == "structure" and isinstance(value, dict) and not shape.is_document_type:
        members = {m.serialization.get("name", n): m for n, m in shape.members.items()}
        return {k: without_nulls(members.get(k), v) for k, v in value.items() if v is not None}
    if kind == "list" and isinstance(value, list):
        return [without_nulls(shape.member, v) for v in value]
    if kind == "map" and isinstance(value, dict):
        return {k: without_nulls(shape.value, v) for k, v in value.items()}
    return value


def leave_out_nulls(service: str, operation: str, body: str | bytes) -> str | bytes:
    """The JSON body of `service`'s answer to `operation` without its null members (as it came
    when it has none, is no JSON, or is a payload of bytes)."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    if "null" not in text:
        return body
    shape = get_service_model(service).operation_model(operation).output_shape
    if shape is None:
        return body
    payload = shape.serialization.get("payload")
    if payload is not None:
        shape = shape.members[payload]
        if shape.type_name != "structure":
            return body
    try:
        value = json.loads(text)
    except ValueError:
        return body
    written = json.dumps(without_nulls(shape, value))
    return written.encode() if isinstance(body, bytes) else written
