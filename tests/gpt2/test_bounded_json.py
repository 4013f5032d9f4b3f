"""The bounded reader reads what json.loads reads, refuses what it refuses at the same place,
and stops at its limits (bounded_json.py)."""

from __future__ import annotations

import json
import random
import string
from typing import Any

import pytest

from serving.gpt2 import bounded_json

FIXED = ['{}', '[]', '{"a": [1, 2.5, -3e2, true, false, null, "x\\u00e9\\ud83d\\ude00"]}', ' \n{"a" : {"b": [ ]} } \t',
         '1', '"s"', '-0', '0.5e-3', '1E5', '[-1.5E-2]', '{"":0}', '"\\ud800"', '[1,]', '{"a":1,}', '{"a" 1}',
         '{a:1}', '[1 2]', '01', '1.', '.5', '-', '"\\x"', '"a\nb"', '[', '{', 'tru', '[1]x', '{"a":1}{',
         '\ufeff{}']  # fmt: skip


def generated(count: int) -> list[str]:
    """Random documents, and each with one character dropped and one inserted (seeded)."""
    rng = random.Random(16)

    def value(depth: int) -> Any:
        roll = rng.random()
        if depth > 3 or roll < 0.3:
            return rng.choice([1, -2.5, 1e10, 'a\u00e9"\\', True, None, 0, ""])
        if roll < 0.6:
            return [value(depth + 1) for _ in range(rng.randint(0, 4))]
        return {"".join(rng.choices(string.ascii_letters, k=3)) + str(i): value(depth + 1) for i in range(4)}

    docs = []
    for _ in range(count):
        text = json.dumps(value(0), indent=rng.choice([None, 0, 2]))
        cut = rng.randrange(len(text))
        docs += [text, text[:cut] + text[cut + 1 :], text[:cut] + rng.choice('[]{},:"0 ') + text[cut:]]
    return docs


def outcome(read: Any, text: str) -> tuple[Any, ...]:
    try:
        return ("value", read(text))
    except json.JSONDecodeError as exc:
        return ("error", exc.msg, exc.pos)
    except bounded_json.EmptyDocument:  # json.loads's error for a document of whitespace alone
        return ("error", "Expecting value", len(text))


def test_reads_and_refuses_as_json_loads() -> None:
    def bounded(text: str) -> Any:
        return bounded_json.loads(text, max_values=10**6, max_depth=100)

    for text in FIXED + generated(1000):
        assert outcome(bounded, text) == outcome(json.loads, text), text


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("   ", bounded_json.EmptyDocument),
        ('{"a": 1, "a": 2}', bounded_json.DuplicateKey),
        ("[NaN]", bounded_json.NotJsonConstant),
        ("-Infinity", bounded_json.NotJsonConstant),
        ("[1, 2, 3, 4]", bounded_json.LimitExceeded),  # five values: the array and four numbers
        ("[[[[1]]]]", bounded_json.LimitExceeded),  # four levels
        ("1" * 4301, bounded_json.LimitExceeded),
    ],
)
def test_refuses_past_its_limits(text: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        bounded_json.loads(text, max_values=4, max_depth=3)


def test_stops_at_the_first_value_past_the_budget() -> None:
    """A document of a million values is refused once the budget is spent, its rest unread:
    what follows the budget may even be invalid."""
    with pytest.raises(bounded_json.LimitExceeded, match="more than 25 JSON values"):
        bounded_json.loads("[" + "1," * 1_000_000 + "oops", max_values=25, max_depth=3)
