"""CloudWatch's statistics of one period's data, as the CloudWatch User Guide defines them
("CloudWatch statistics definitions", Statistics-definitions.md of awsdocs/amazon-cloudwatch-user-guide):
SampleCount, Sum, Average, Minimum, Maximum, and the extended statistics (percentiles ``p99``,
trimmed mean ``tm90``/``TM(a:b)``, winsorized mean ``wm``/``WM``, trimmed count ``tc``/``TC``,
trimmed sum ``ts``/``TS``, interquartile mean ``IQM``, percentile rank ``PR(a:b)``), which need
the raw values: a statistic set stands for raw values only when its values are all equal
(SampleCount 1, or Minimum = Maximum and Sum = Minimum x SampleCount), and none is available
when any value is negative ("Requirements to use percentiles, trimmed mean, and some other
statistics")."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

BASIC = ("SampleCount", "Sum", "Average", "Minimum", "Maximum")


@dataclass(frozen=True)
class StatisticSet:
    """What PutMetricData's StatisticValues holds."""

    count: float
    total: float
    minimum: float
    maximum: float

    def as_values(self) -> list[float] | None:
        """The raw values this set stands for, if it can (its values all equal)."""
        if self.count == 1 and self.minimum == self.maximum == self.total:
            return [self.total]
        if self.minimum == self.maximum and math.isclose(self.total, self.minimum * self.count):
            return [self.minimum] * int(self.count)
        return None


@dataclass(frozen=True)
class Distribution:
    """Values with how often each came, as PutMetricData's Values and Counts carry them (what an
    AWS service publishes of a minute: local_aws/cloudwatch/metrics.py), beside their exact
    count, sum, minimum and maximum: where the values were many, they are rounded."""

    stats: StatisticSet
    counted: tuple[tuple[float, int], ...]

    def as_values(self) -> list[float]:
        return [value for value, count in self.counted for _ in range(count)]


@dataclass(frozen=True)
class Samples:
    """One period's data of one metric: raw values, statistic sets and distributions."""

    values: tuple[float, ...] = ()
    sets: tuple[StatisticSet, ...] = field(default=())
    distributions: tuple[Distribution, ...] = field(default=())

    @property
    def count(self) -> float:
        return len(self.values) + sum(s.count for s in self.statistic_sets())

    def statistic_sets(self) -> list[StatisticSet]:
        """The statistic sets, the distributions' among them."""
        return [*self.sets, *(d.stats for d in self.distributions)]

    def raw(self) -> list[float] | None:
        """Every value, sorted, or None where CloudWatch has no raw values to compute from."""
        found = list(self.values)
        for d in self.distributions:
            found += d.as_values()
        for s in self.sets:
            values = s.as_values()
            if values is None:
                return None
            found += values
        if any(v < 0 for v in found):
            return None
        return sorted(found)


def samples_of(data: Iterable[Any]) -> Samples:
    """The samples of moto's data (a raw value's ``value``, a statistic set's ``sum``, ``min``,
    ``max`` and ``sample_count``) and of the minutes AWS's services publish (their
    ``distribution()``)."""
    values, sets, distributions = [], [], []
    for datum in data:
        if hasattr(datum, "value"):
            values.append(float(datum.value))
        elif hasattr(datum, "distribution"):
            distributions.append(datum.distribution())
        else:
            sets.append(StatisticSet(datum.sample_count, datum.sum, datum.min, datum.max))
    return Samples(tuple(values), tuple(sets), tuple(distributions))


@dataclass(frozen=True)
class Statistic:
    """A statistic by its CloudWatch name (``Average``, ``p99``, ``TM(10%:90%)``)."""

    name: str
    compute: Callable[[Samples], float | None] = field(repr=False, compare=False)
    #: The percentile (0-1) of a ``pNN`` statistic, else None.
    percentile: float | None = None

    def of(self, samples: Samples) -> float | None:
        """The statistic of `samples`, None when they have none (no data, or no raw values)."""
        if samples.count == 0:
            return None
        return self.compute(samples)

    def low_sample_count(self, samples: Samples) -> bool:
        """Whether `samples` are too few for this percentile to be statistically significant
        (CloudWatch User Guide, "Percentile-based CloudWatch alarms and low data samples":
        fewer than 10/(1-p) for p of 0.5 and more, 10/p below)."""
        p = self.percentile
        if p is None or p in (0.0, 1.0):
            return False
        return samples.count < (10 / (1 - p) if p >= 0.5 else 10 / p)


def _basic(samples: Samples, name: str) -> float | None:
    count = samples.count
    sets = samples.statistic_sets()
    total = sum(samples.values) + sum(s.total for s in sets)
    if name == "SampleCount":
        return count
    if name == "Sum":
        return total
    if name == "Average":
        return total / count
    lows = [*samples.values, *(s.minimum for s in sets)]
    highs = [*samples.values, *(s.maximum for s in sets)]
    return min(lows) if name == "Minimum" else max(highs)


def _nearest_rank(values: Sequence[float], p: float) -> float:
    """The value `p` (0-1) of the data is at or below: the highest of the lowest p of values
    ("p99 is the maximum value of the remaining 99%")."""
    rank = max(1, math.ceil(p * len(values)))
    return values[min(rank, len(values)) - 1]


_NUMBER = r"\d+(?:\.\d{1,10})?"
_PERCENTILE = re.compile(rf"^p({_NUMBER})$")
_SHORT = re.compile(rf"^(tm|wm|tc|ts)({_NUMBER})$")
_RANGED = re.compile(rf"^(TM|WM|TC|TS|PR)\(({_NUMBER}%?)?:({_NUMBER}%?)?\)$")


def _bound(text: str | None) -> tuple[float | None, bool]:
    """A boundary of a range: (number, whether a percentage)."""
    if not text:
        return None, False
    return float(text.rstrip("%")), text.endswith("%")


def _kept(values: list[float], low: str | None, high: str | None) -> tuple[list[float], float, float]:
    """The values within the range, and the range's edges as values (what a winsorized mean
    clamps to): by rank for percentages, else values above `low` and at most `high`."""
    lo, lo_percent = _bound(low)
    hi, hi_percent = _bound(high)
    if lo_percent or hi_percent:
        n = len(values)
        first = math.floor((lo or 0.0) / 100 * n)
        last = math.ceil((100.0 if hi is None else hi) / 100 * n)
        kept = values[first:last]
        if not kept:
            return [], values[0], values[-1]
        return kept, kept[0], kept[-1]
    kept = [v for v in values if (lo is None or v > lo) and (hi is None or v <= hi)]
    return kept, (values[0] if lo is None else lo), (values[-1] if hi is None else hi)


def _ranged(kind: str, low: str | None, high: str | None) -> Callable[[Samples], float | None]:
    def compute(samples: Samples) -> float | None:
        values = samples.raw()
        if not values:
            return None
        if kind == "PR":
            lo, _ = _bound(low)
            hi, _ = _bound(high)
            inside = [v for v in values if (lo is None or v > lo) and (hi is None or v <= hi)]
            return 100.0 * len(inside) / len(values)
        kept, edge_low, edge_high = _kept(values, low, high)
        if kind == "TC":
            return float(len(kept))
        if kind == "TS":
            return float(sum(kept))
        if kind == "WM":
            clamped = [min(max(v, edge_low), edge_high) for v in values]
            return sum(clamped) / len(clamped)
        return sum(kept) / len(kept) if kept else None  # TM

    return compute


def parse(name: str) -> Statistic:
    """The statistic CloudWatch names `name`; ValueError for one it does not define."""
    if name in BASIC:
        return Statistic(name, lambda s: _basic(s, name))
    if name == "IQM":
        return Statistic(name, _ranged("TM", "25%", "75%"))
    found = _PERCENTILE.match(name)
    if found:
        p = float(found.group(1)) / 100
        if not 0 <= p <= 1:
            raise ValueError(f"{name}: a percentile is between p0 and p100")

        def percentile(samples: Samples) -> float | None:
            values = samples.raw()
            return _nearest_rank(values, p) if values else None

        return Statistic(name, percentile, percentile=p)
    found = _SHORT.match(name)
    if found:
        kind, bound = found.group(1).upper(), found.group(2)
        if not 0 < float(bound) <= 100:
            raise ValueError(f"{name}: the boundary is a percentage above 0, at most 100")
        return Statistic(name, _ranged(kind, None, f"{bound}%"))
    found = _RANGED.match(name)
    if found and (found.group(2) or found.group(3)):
        kinds = {bound.endswith("%") for bound in found.group(2, 3) if bound}
        if len(kinds) == 1:
            return Statistic(name, _ranged(found.group(1), found.group(2), found.group(3)))
    raise ValueError(
        f"{name!r} is not a CloudWatch statistic: SampleCount, Sum, Average, Minimum, Maximum, pNN, tmNN, wmNN, "
        "tcNN, tsNN, IQM, or TM/WM/TC/TS/PR(low:high) with both bounds values or both percentages"
    )
