"""Metric math for alarms on an expression (CloudWatch User Guide, "Use metric math",
using-metric-math.md of awsdocs/amazon-cloudwatch-user-guide): time series of the alarm's
periods, oldest first, a missing period None; numbers; ``+ - * / ^``, comparisons and
``AND``/``OR`` (1 or 0, per period); ``FILL(ts, value | ts | REPEAT | LINEAR)``, ``IF(c, a, b)``,
``ABS``, ``CEIL``, ``FLOOR``, and ``MIN``/``MAX``/``SUM``/``AVG`` (of one series a number, of an
array ``[a, b]`` a series). A function the local AWS does not know is an :class:`ExpressionError`.

``FILL`` of a series with no data in the alarm's range yields no data (what the Inf2 health
alarm assumes; no AWS page we found says what FILL does there: README's "What only AWS can show").
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

Series = list[float | None]
Value = float | Series | list[Series]


class ExpressionError(ValueError):
    pass


_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)|([A-Za-z_][A-Za-z0-9_]*)|(>=|<=|==|!=|[-+*/^()\[\],<>]))")


def _tokens(expression: str) -> list[str]:
    found, at = [], 0
    text = expression.strip()
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None or match.end() == at:
            raise ExpressionError(f"cannot read {text[at:]!r} in {expression!r}")
        found.append(match.group(match.lastindex or 0))
        at = match.end()
    return found


@dataclass
class _Parser:
    tokens: list[str]
    series: Mapping[str, Series]
    periods: int
    at: int = 0

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token.upper() != expected):
            raise ExpressionError(f"expected {expected or 'more'} at {' '.join(self.tokens[self.at :]) or 'the end'}")
        self.at += 1
        return token

    def expression(self) -> Value:
        return self.joined("OR", self.conjunction, lambda a, b: float(bool(a) or bool(b)))

    def conjunction(self) -> Value:
        return self.joined("AND", self.comparison, lambda a, b: float(bool(a) and bool(b)))

    def joined(self, word: str, operand: Callable[[], Value], op: Callable[[float, float], float]) -> Value:
        left = operand()
        while (self.peek() or "").upper() == word:
            self.take()
            left = _pointwise(op, left, operand())
        return left

    def comparison(self) -> Value:
        left = self.sum()
        compare = _COMPARE.get(self.peek() or "")
        if compare is not None:
            self.take()
            left = _pointwise(lambda a, b: float(compare(a, b)), left, self.sum())
        return left

    def sum(self) -> Value:
        left = self.product()
        while self.peek() in ("+", "-"):
            op = operator.add if self.take() == "+" else operator.sub
            left = _pointwise(op, left, self.product())
        return left

    def product(self) -> Value:
        left = self.power()
        while self.peek() in ("*", "/"):
            op = operator.mul if self.take() == "*" else _divide
            left = _pointwise(op, left, self.power())
        return left

    def power(self) -> Value:
        left = self.unary()
        while self.peek() == "^":
            self.take()
            left = _pointwise(operator.pow, left, self.unary())
        return left

    def unary(self) -> Value:
        if self.peek() == "-":
            self.take()
            return _pointwise(operator.mul, -1.0, self.unary())
        return self.atom()

    def atom(self) -> Value:
        token = self.take()
        if token == "(":
            inner = self.expression()
            self.take(")")
            return inner
        if token == "[":
            items = [self.expression()]
            while self.peek() == ",":
                self.take()
                items.append(self.expression())
            self.take("]")
            return [_as_series(i, self.periods) for i in items]
        if token[0].isdigit():
            return float(token)
        if self.peek() == "(":
            self.take()
            args: list[Value | str] = []
            if self.peek() != ")":
                args.append(self.argument())
                while self.peek() == ",":
                    self.take()
                    args.append(self.argument())
            self.take(")")
            return self.call(token.upper(), args)
        if token not in self.series:
            raise ExpressionError(f"{token!r} names no query of the alarm ({', '.join(sorted(self.series))})")
        return list(self.series[token])

    def argument(self) -> Value | str:
        if (self.peek() or "").upper() in ("REPEAT", "LINEAR"):
            return self.take().upper()
        return self.expression()

    def call(self, name: str, args: list[Value | str]) -> Value:
        values = [a for a in args if not isinstance(a, str)]
        if name == "FILL" and len(args) == 2:
            return _fill(_as_series(values[0], self.periods), args[1], self.periods)
        if name == "IF" and len(values) in (2, 3):
            condition, then = (_as_series(v, self.periods) for v in values[:2])
            otherwise = _as_series(values[2], self.periods) if len(values) == 3 else [None] * self.periods
            return [None if c is None else (a if c else b) for c, a, b in zip(condition, then, otherwise, strict=True)]
        if name in _UNARY and len(values) == 1:
            return _pointwise(lambda a, _: _UNARY[name](a), values[0], 0.0)
        if name in _AGGREGATE and len(values) == 1:
            return _aggregate(_AGGREGATE[name], values[0], self.periods)
        raise ExpressionError(f"the local AWS does not evaluate {name}() with {len(args)} argument(s)")


def _divide(a: float, b: float) -> float | None:
    return None if b == 0 else a / b


_COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt, "<": operator.lt, ">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
}  # fmt: skip
_UNARY: dict[str, Callable[[float], float]] = {"ABS": abs, "CEIL": math.ceil, "FLOOR": math.floor}
_AGGREGATE: dict[str, Callable[[list[float]], float]] = {
    "MIN": min, "MAX": max, "SUM": sum, "AVG": lambda v: sum(v) / len(v),
}  # fmt: skip


def _is_array(value: Value) -> bool:
    return isinstance(value, list) and bool(value) and isinstance(value[0], list)


def _as_series(value: Value, periods: int) -> Series:
    if isinstance(value, float):
        return [value] * periods
    if _is_array(value):
        raise ExpressionError("an array of series where one series is expected")
    return cast(Series, value)


def _pointwise(op: Callable[[float, float], float | None], a: Value, b: Value) -> Value:
    if isinstance(a, float) and isinstance(b, float):
        found = op(a, b)
        return math.nan if found is None else float(found)
    n = len(a) if not isinstance(a, float) else len(b)  # type: ignore[arg-type]
    left, right = _as_series(a, n), _as_series(b, n)
    return [None if x is None or y is None else op(x, y) for x, y in zip(left, right, strict=True)]


def _aggregate(fn: Callable[[list[float]], float], value: Value, periods: int) -> Value:
    if isinstance(value, float):
        return value
    if _is_array(value):  # an array: one series, per period
        arrays = cast(list[Series], value)
        out: Series = []
        for i in range(periods):
            at_i = [v for v in (s[i] for s in arrays) if v is not None]
            out.append(fn(at_i) if at_i else None)
        return out
    present = [v for v in cast(Series, value) if v is not None]
    return fn(present) if present else math.nan


def _fill(series: Series, filler: Value | str, periods: int) -> Series:
    present = [i for i, v in enumerate(series) if v is not None]
    if not present:
        return series  # nothing to fill from (see the module's docstring)
    if filler == "REPEAT":
        out, last = [], series[present[0]]
        for v in series:
            last = v if v is not None else last
            out.append(last)
        return out
    if filler == "LINEAR":
        out = list(series)
        for i, v in enumerate(series):
            if v is None:
                before = max((p for p in present if p < i), default=None)
                after = min((p for p in present if p > i), default=None)
                if before is None or after is None:
                    out[i] = series[before if before is not None else after]  # type: ignore[index]
                else:
                    a, b = series[before], series[after]
                    out[i] = a + (b - a) * (i - before) / (after - before)  # type: ignore[operator]
        return out
    fill = _as_series(filler, periods)  # type: ignore[arg-type]
    return [v if v is not None else f for v, f in zip(series, fill, strict=True)]


def evaluate(expression: str, series: Mapping[str, Series], periods: int) -> Series:
    """The series `expression` makes of the queries' `series` (each `periods` long)."""
    parser = _Parser(_tokens(expression), series, periods)
    value = parser.expression()
    if parser.peek() is not None:
        raise ExpressionError(f"unexpected {parser.peek()!r} in {expression!r}")
    if isinstance(value, float):
        return [None if math.isnan(value) else value] * periods
    if _is_array(value):
        raise ExpressionError(f"{expression!r} yields several series: an alarm watches one")
    return [None if v is None or math.isnan(v) else v for v in cast(Series, value)]


def check(expression: str, ids: Sequence[str]) -> None:
    """Raise ExpressionError if the local AWS cannot evaluate `expression` over queries `ids`."""
    evaluate(expression, {i: [1.0] for i in ids}, 1)
