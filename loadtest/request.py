"""The request file: one InvokeEndpoint request, as JSON.

    {"content_type": "application/json", "accept": "application/json", "body": {"input": "amazon"}}

Exactly one of ``body`` (any JSON value, sent serialized), ``body_text`` (a string sent as it
stands, UTF-8: a body that is not JSON, or deliberately broken JSON) and ``body_base64``
(bytes). ``content_type`` defaults to what the body key implies; ``accept`` and
``custom_attributes`` (InvokeEndpoint's CustomAttributes) are optional.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: InvokeEndpoint refuses larger payloads.
MAX_BODY_BYTES = 6 * 1024 * 1024
#: Each body key and the content type it implies.
BODY_KEYS = {"body": "application/json", "body_text": "text/plain", "body_base64": "application/octet-stream"}
OPTIONAL_KEYS = ("content_type", "accept", "custom_attributes")
FORMAT = (
    '{"content_type": "application/json", "body": <any JSON>} (or "body_text": "<text>", "body_base64": "<base64>")'
)


class RequestFileError(ValueError):
    """The request file cannot be sent; the message names the file, the fault and the fix."""


@dataclass(frozen=True)
class Request:
    body: bytes
    content_type: str
    accept: str | None = None
    custom_attributes: str | None = None
    #: Where it was read from (for the report).
    source: str = ""

    def describe(self) -> dict[str, Any]:
        """What the report says about the request (not the body: it may be large or private)."""
        return {"file": self.source, "bytes": len(self.body), "content_type": self.content_type, "accept": self.accept}


def load_request(path: Path) -> Request:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RequestFileError(f"request file {path} cannot be read ({exc}): give a readable UTF-8 JSON file") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RequestFileError(
            f"request file {path} is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): write it as {FORMAT}"
        ) from None
    return parse_request(document, str(path))


def parse_request(document: Any, source: str) -> Request:
    if not isinstance(document, dict):
        raise RequestFileError(f"request file {source} holds a JSON {type(document).__name__}, not an object: {FORMAT}")
    unknown = sorted(set(document) - set(BODY_KEYS) - set(OPTIONAL_KEYS))
    if unknown:
        allowed = ", ".join([*BODY_KEYS, *OPTIONAL_KEYS])
        raise RequestFileError(f"request file {source} has unknown keys {unknown}: allowed are {allowed}")
    given = [key for key in BODY_KEYS if key in document]
    if len(given) != 1:
        raise RequestFileError(
            f"request file {source} has {len(given)} of body, body_text, body_base64 ({given}): give exactly one"
        )
    body = _body(given[0], document[given[0]], source)
    if len(body) > MAX_BODY_BYTES:
        raise RequestFileError(
            f"request file {source}: a body of {len(body)} bytes exceeds InvokeEndpoint's limit of "
            f"{MAX_BODY_BYTES}: send a smaller one"
        )
    for key in OPTIONAL_KEYS:
        if document.get(key) is not None and not isinstance(document[key], str):
            raise RequestFileError(f"request file {source}: {key}={document[key]!r} is not a string")
    return Request(
        body=body,
        content_type=document.get("content_type") or BODY_KEYS[given[0]],
        accept=document.get("accept"),
        custom_attributes=document.get("custom_attributes"),
        source=source,
    )


def _body(key: str, value: Any, source: str) -> bytes:
    if key == "body":
        return json.dumps(value).encode()
    if not isinstance(value, str):
        raise RequestFileError(f"request file {source}: {key} must be a string, not a JSON {type(value).__name__}")
    if key == "body_text":
        return value.encode()
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error as exc:
        raise RequestFileError(f"request file {source}: body_base64 is not base64 ({exc})") from None
