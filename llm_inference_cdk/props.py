"""Typed, validated props: each setting is one field with its default and its check together.

A props class is a frozen, keyword-only dataclass whose fields are declared with :func:`prop`
(the default, documented with a ``#:`` comment where it is defined, and the check that says
what is allowed). Its ``__post_init__`` calls :func:`validate`, which checks every field and
then runs the class's rules that span several fields (a generator yielding :func:`invalid`
for each prop it faults); it raises one :class:`PropError` that lists every problem, one line
each, naming the class, the prop, the value and what is allowed. The rules run once every
field has passed its own check, since they rely on the fields' types and ranges (pydantic's
model validators, which run after its field validators, do the same).

The CDK app reads its ``cdk.json`` settings into these same classes (``project_config``), so a
rule is written once: the app turns a PropError's prop into the ``cdk.json`` key that set it.
Standard library only: the app's configuration and the artifacts builder import this module
without loading the AWS CDK.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    """One prop that cannot be used: the class, the prop, the value and what is allowed."""

    owner: str
    prop: str
    value: Any
    allowed: str

    def __str__(self) -> str:
        return f"{self.owner}: {self.prop}={self.value!r} is invalid: allowed is {self.allowed}"


class PropError(ValueError):
    """Props that cannot be used: the message has one line per problem (:attr:`problems`), each
    naming the class, the prop, the value and what is allowed. ``owner``, ``prop``, ``value``
    and ``allowed`` are the first problem's."""

    def __init__(self, owner: str, prop: str, value: Any, allowed: str, *, more: Sequence[Problem] = ()) -> None:
        self.problems: tuple[Problem, ...] = (Problem(owner, prop, value, allowed), *more)
        super().__init__("\n".join(str(problem) for problem in self.problems))
        self.owner, self.prop, self.value, self.allowed = owner, prop, value, allowed

    @classmethod
    def of(cls, problems: Sequence[Problem]) -> PropError:
        """One error listing `problems` (at least one)."""
        first, *rest = problems
        return cls(first.owner, first.prop, first.value, first.allowed, more=rest)


@dataclass(frozen=True)
class Check:
    """A test a value must pass, and the words for what passes."""

    test: Callable[[Any], bool]
    allowed: str

    def __call__(self, value: Any) -> bool:
        return self.test(value)


def prop(default: Any = dataclasses.MISSING, *, check: Check | None = None, factory: Any = dataclasses.MISSING) -> Any:
    """A field of a props class: its default (or `factory` for a mutable one; neither: the
    prop is required) and its check."""
    metadata = {"check": check}
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def validate(props: Any, rules: Callable[[], Iterable[PropError]] | None = None) -> None:
    """Check every field of `props` against its check, then, if all pass, run `rules` (the
    class's rules across fields, yielding an error for each they find); one PropError listing
    every problem found."""
    problems = [
        Problem(type(props).__name__, field.name, getattr(props, field.name), check.allowed)
        for field in dataclasses.fields(props)
        if (check := field.metadata.get("check")) is not None and not check(getattr(props, field.name))
    ]
    if not problems and rules is not None:
        problems = [problem for error in rules() for problem in error.problems]
    if problems:
        raise PropError.of(problems)


def invalid(props: Any, name: str, allowed: str) -> PropError:
    """The PropError for a rule that spans fields, blamed on field `name`."""
    return PropError(type(props).__name__, name, getattr(props, name), allowed)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --- checks --------------------------------------------------------------------------------


def integer(lo: int, hi: int) -> Check:
    return Check(lambda v: is_int(v) and lo <= v <= hi, f"a whole number from {lo} to {hi}")


def number(lo: float, hi: float) -> Check:
    return Check(
        lambda v: isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and lo <= v <= hi,
        f"a number from {lo:g} to {hi:g}",
    )


def boolean() -> Check:
    return Check(lambda v: isinstance(v, bool), "true or false")


def one_of(*choices: str) -> Check:
    return Check(lambda v: v in choices, "one of " + ", ".join(choices))


def text(pattern: re.Pattern[str] | None = None, *, what: str = "a non-empty string") -> Check:
    return Check(lambda v: isinstance(v, str) and bool(v) and (pattern is None or bool(pattern.match(v))), what)


def string_map(key: re.Pattern[str], *, max_value: int, max_items: int, what: str) -> Check:
    def test(value: Any) -> bool:
        return (
            isinstance(value, Mapping)
            and len(value) <= max_items
            and all(isinstance(k, str) and key.match(k) and isinstance(v, str) and len(v) <= max_value
                    for k, v in value.items())
        )  # fmt: skip

    return Check(test, what)


def instance_of(cls: type) -> Check:
    return Check(lambda v: isinstance(v, cls), f"a {cls.__name__}")


def optional(check: Check) -> Check:
    """`check`, or None (unset)."""
    return Check(lambda v: v is None or check(v), f"{check.allowed}, or unset")
