"""The binary event stream (``application/vnd.amazon.eventstream``) that AWS's streaming APIs
answer with, written as botocore reads it (botocore/eventstream.py, ``EventStreamBuffer``).

A message is a prelude (total length and headers length, 4-byte big-endian each, then the
CRC32 of those 8 bytes), the headers, the payload, and the CRC32 of everything before it. A
header is its name's length (1 byte), the name, a type (7: a string) and the value's length
(2 bytes) and value. An event carries ``:message-type: event``, ``:event-type`` (the member of
the stream's union, ``PayloadPart``) and ``:content-type``; an error in the stream carries
``:message-type: exception`` and ``:exception-type`` (``ModelStreamError``) with a JSON payload
of the exception's shape, which botocore raises as ``EventStreamError``.
"""

from __future__ import annotations

import json
import struct
from binascii import crc32
from collections.abc import Mapping

#: botocore refuses a message whose headers or payload are longer (botocore/eventstream.py).
MAX_HEADERS_BYTES = 128 * 1024
MAX_PAYLOAD_BYTES = 24 * 1024 * 1024
_STRING = 7


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return struct.pack(">B", len(raw_name)) + raw_name + struct.pack(">BH", _STRING, len(raw_value)) + raw_value


def message(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One event stream message with string headers."""
    encoded = b"".join(_header(k, v) for k, v in headers.items())
    if len(encoded) > MAX_HEADERS_BYTES or len(payload) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"headers of {len(encoded)} bytes or a payload of {len(payload)} bytes do not fit a message")
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    prelude += struct.pack(">I", crc32(prelude) & 0xFFFFFFFF)
    body = prelude + encoded + payload
    return body + struct.pack(">I", crc32(body) & 0xFFFFFFFF)


def event(event_type: str, payload: bytes, content_type: str = "application/octet-stream") -> bytes:
    return message({":message-type": "event", ":event-type": event_type, ":content-type": content_type}, payload)


def exception(exception_type: str, fields: Mapping[str, object]) -> bytes:
    headers = {":message-type": "exception", ":exception-type": exception_type, ":content-type": "application/json"}
    return message(headers, json.dumps(fields).encode())


def payload_parts(data: bytes) -> list[bytes]:
    """``PayloadPart`` events carrying `data` (more than one only past a message's limit)."""
    step = MAX_PAYLOAD_BYTES
    return [event("PayloadPart", data[i : i + step]) for i in range(0, len(data), step)]
