"""A JSON reader whose work is bounded by limits given up front.

``json.loads`` reads a document whole, in C, holding the GIL: 6 MB of small values (``[[], [],
...]``, ``{"p0": 1, ...}``) held every other thread of a worker (its other requests, its batcher)
for up to 1.2 s. A request is small by construction (at most max_batch_size inputs and seven
parameters), so this reader stops at the first value past a budget, the first nesting past a
depth and the first number past a length, and each of its steps is short: whitespace is skipped
64 KB at a time, a string is read by json's own C scanner in one pass (about 20 ms for a 6 MB
string, the longest step), and the GIL is free to pass between steps. It reads what
``json.loads`` reads and refuses what it refuses, with its messages, and also refuses a key given
twice in one object (``json.loads`` keeps the last).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from json import JSONDecodeError
from json import decoder as _decoder
from json.scanner import NUMBER_RE
from typing import Any

#: json's own string scanner (C): the string from after its opening quote, and the position after
#: its closing one; its errors are json.loads's. (typeshed does not list it.)
scanstring: Callable[[str, int, bool], tuple[str, int]] = _decoder.scanstring  # type: ignore[attr-defined]

WHITESPACE = re.compile(r"[ \t\n\r]*")
#: Characters of whitespace skipped per step.
WHITESPACE_STEP = 65536
#: Python's own limit on the digits of an integer read from text: longer numbers are refused
#: before they are scanned (a 6 MB number took 130 ms to scan and convert).
MAX_NUMBER_CHARS = 4300
LITERALS = {"null": None, "true": True, "false": False}
CONSTANTS = ("NaN", "Infinity", "-Infinity")


class LimitExceeded(ValueError):
    """The document is past one of the limits; the message says which, as the end of a
    sentence that starts with "the body"."""


class DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class NotJsonConstant(ValueError):
    """NaN or Infinity, which json.loads accepts and JSON does not have."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class EmptyDocument(ValueError):
    pass


def loads(text: str, *, max_values: int, max_depth: int) -> Any:
    """The value of `text`, which holds at most `max_values` values (every string, number,
    literal, array and object counts one; keys do not) nested at most `max_depth` deep."""
    return _Reader(text, max_values, max_depth).document()


class _Reader:
    def __init__(self, text: str, max_values: int, max_depth: int) -> None:
        self.text = text
        self.max_values = max_values
        self.values_left = max_values
        self.max_depth = max_depth

    def document(self) -> Any:
        if self.text.startswith("\ufeff"):
            raise JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", self.text, 0)
        pos = self.skip(0)
        if pos == len(self.text):
            raise EmptyDocument()
        value, pos = self.value(pos, 0)
        pos = self.skip(pos)
        if pos != len(self.text):
            raise JSONDecodeError("Extra data", self.text, pos)
        return value

    def skip(self, pos: int) -> int:
        """The position of the first non-whitespace character from `pos`."""
        while True:
            end = WHITESPACE.match(self.text, pos, pos + WHITESPACE_STEP).end()  # type: ignore[union-attr]
            if end < pos + WHITESPACE_STEP:
                return end
            pos = end

    def value(self, pos: int, depth: int) -> tuple[Any, int]:
        self.values_left -= 1
        if self.values_left < 0:
            raise LimitExceeded(f"holds more than {self.max_values} JSON values (strings, numbers, arrays, objects)")
        char = self.text[pos : pos + 1]
        if char == '"':
            return scanstring(self.text, pos + 1, True)
        if char in ("{", "["):
            if depth == self.max_depth:
                raise LimitExceeded(f"nests arrays or objects too deeply (more than {self.max_depth} levels)")
            return self.object(pos + 1, depth + 1) if char == "{" else self.array(pos + 1, depth + 1)
        for word, literal in LITERALS.items():
            if self.text.startswith(word, pos):
                return literal, pos + len(word)
        return self.number(pos)

    def number(self, pos: int) -> tuple[Any, int]:
        match = NUMBER_RE.match(self.text, pos, pos + MAX_NUMBER_CHARS + 1)
        if match is None:
            for name in CONSTANTS:
                if self.text.startswith(name, pos):
                    raise NotJsonConstant(name)
            raise JSONDecodeError("Expecting value", self.text, pos)
        if match.end() - pos > MAX_NUMBER_CHARS:
            raise LimitExceeded(f"holds a number of more than {MAX_NUMBER_CHARS} characters (digits, sign, exponent)")
        integer, fraction, exponent = match.groups()
        if fraction or exponent:
            return float(integer + (fraction or "") + (exponent or "")), match.end()
        return int(integer), match.end()

    def object(self, pos: int, depth: int) -> tuple[dict[str, Any], int]:
        result: dict[str, Any] = {}
        done, pos = self.opened(pos, "}")
        while not done:
            if self.text[pos : pos + 1] != '"':
                raise JSONDecodeError("Expecting property name enclosed in double quotes", self.text, pos)
            key, pos = scanstring(self.text, pos + 1, True)
            if key in result:
                raise DuplicateKey(key)
            pos = self.skip(pos)
            if self.text[pos : pos + 1] != ":":
                raise JSONDecodeError("Expecting ':' delimiter", self.text, pos)
            result[key], pos = self.value(self.skip(pos + 1), depth)
            done, pos = self.after_item(pos, "}")
        return result, pos

    def array(self, pos: int, depth: int) -> tuple[list[Any], int]:
        result: list[Any] = []
        done, pos = self.opened(pos, "]")
        while not done:
            item, pos = self.value(pos, depth)
            result.append(item)
            done, pos = self.after_item(pos, "]")
        return result, pos

    def opened(self, pos: int, closer: str) -> tuple[bool, int]:
        """Just inside an array or object: (True, past `closer`) if it is empty, else (False, at
        its first item)."""
        pos = self.skip(pos)
        return (True, pos + 1) if self.text[pos : pos + 1] == closer else (False, pos)

    def after_item(self, pos: int, closer: str) -> tuple[bool, int]:
        """After an item: (True, past `closer`) at the end, else (False, at the next item)."""
        pos = self.skip(pos)
        char = self.text[pos : pos + 1]
        if char == closer:
            return True, pos + 1
        if char != ",":
            raise JSONDecodeError("Expecting ',' delimiter", self.text, pos)
        return False, self.skip(pos + 1)
