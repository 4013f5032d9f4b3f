"""Reading one cdk.json section into props: the key, the value, and a clear error.

Every section is a JSON object of settings; ``-c section.key=value`` on the CLI wins over
cdk.json and arrives as text, read as JSON unless the setting is a string. A section module
builds its props classes with :func:`read_props`: each field is read from the key of its
name (or the one `keys` maps it to); a field the section does not set takes the section's
default from `defaults`, else the props class's own. The props class checks the values and
raises a PropError listing each field it refuses; :func:`read_props` turns that into a
:class:`ConfigError` with one line per key: ``gpt2.max_capacity=2 is invalid: allowed is at
least min_capacity (5)``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from llm_inference_cdk.props import PropError

#: Relative paths in the configuration are relative to the project root (where cdk.json is).
PROJECT_ROOT = Path(__file__).resolve().parents[1]

T = TypeVar("T")


class ConfigError(ValueError):
    """A context value that cannot be used; the message names key, value and what is allowed."""


def parse_value(raw: str) -> Any:
    """A `-c key=value` from the CLI arrives as a string: read it as JSON where it is JSON."""
    try:
        return json.loads(raw)
    except (ValueError, TypeError):
        return raw


def parse_context_pairs(pairs: Sequence[str]) -> dict[str, str]:
    """``-c KEY=VALUE`` pairs of a CLI, kept as text exactly as the CDK CLI passes them (the
    settings read JSON where a setting wants it); ConfigError on a pair without ``=``."""
    context: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"-c {pair!r} is invalid: allowed is KEY=VALUE such as gptj.max_capacity=3")
        context[key] = value
    return context


class Section:
    """One context section; every key read is recorded, and :meth:`done` refuses the others."""

    def __init__(self, name: str, raw: Any, overrides: Mapping[str, Any] | None = None) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{name}={raw!r} is invalid: allowed is a JSON object of settings")
        self.name = name
        self._raw = dict(raw)
        self._overrides = dict(overrides or {})
        self._read: set[str] = set()

    @property
    def keys_read(self) -> set[str]:
        """The keys read so far (what :meth:`done` allows)."""
        return set(self._read)

    def key(self, key: str) -> str:
        return f"{self.name}.{key}"

    def fail(self, key: str, value: Any, allowed: str) -> ConfigError:
        return ConfigError(f"{self.key(key)}={value!r} is invalid: allowed is {allowed}")

    def has(self, key: str) -> bool:
        self._read.add(key)
        return self._overrides.get(key, self._raw.get(key)) is not None

    def get(self, key: str, *, as_text: bool = False) -> Any:
        """The value of `key` (None when unset): a `-c` override wins over cdk.json."""
        self._read.add(key)
        given = self._overrides.get(key)
        if given is not None:
            return parse_value(given) if isinstance(given, str) and not as_text else given
        return self._raw.get(key)

    def is_null(self, key: str) -> bool:
        """Whether `key` is given as null (JSON's ``null`` in cdk.json, ``-c key=null``): for an
        optional setting, none of it, where an unset key takes the default."""
        self._read.add(key)
        given = self._overrides.get(key)  # as get() reads it: an override of None is no override
        if given is not None:
            return isinstance(given, str) and parse_value(given) is None
        return key in self._raw and self._raw[key] is None

    def check(self, key: str, value: Any, ok: bool, allowed: str) -> None:
        if not ok:
            raise self.fail(key, value, allowed)

    # Typed reads for settings that are not props (yet): the value, or `default` when unset.

    def integer(self, key: str, default: int, *, lo: int, hi: int) -> int:
        value = self.get(key)
        value = default if value is None else value
        ok = isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi
        self.check(key, value, ok, f"a whole number from {lo} to {hi}")
        return int(value)

    def string(self, key: str, default: str, *, pattern: re.Pattern[str] | None = None, what: str = "") -> str:
        value = self.get(key, as_text=True)
        value = default if value is None else value
        ok = isinstance(value, str) and bool(value) and (pattern is None or bool(pattern.match(value)))
        self.check(key, value, ok, what or "a non-empty string")
        return str(value)

    def optional_string(self, key: str, *, pattern: re.Pattern[str] | None = None, what: str = "") -> str | None:
        return self.string(key, "", pattern=pattern, what=what) if self.has(key) else None

    def choice(self, key: str, default: str, allowed: tuple[str, ...]) -> str:
        value = self.get(key)
        value = default if value is None else value
        self.check(key, value, value in allowed, "one of " + ", ".join(allowed))
        return str(value)

    def string_map(self, key: str, *, key_pattern: re.Pattern[str], what: str) -> dict[str, str]:
        value = self.get(key)
        value = {} if value is None else value
        ok = isinstance(value, Mapping) and all(
            isinstance(k, str) and key_pattern.match(k) and isinstance(v, str) and len(v) <= 256
            for k, v in value.items()
        )
        self.check(key, value, ok, what)
        return dict(value)

    def done(self) -> None:
        given = {**self._raw, **self._overrides}
        unknown = sorted(set(given) - self._read)
        if unknown:
            raise ConfigError(
                f"{self.key(unknown[0])}={given[unknown[0]]!r} is invalid: unknown setting; "
                f"allowed keys of {self.name!r} are " + ", ".join(sorted(self._read))
            )


class Problems:
    """The checks of one moment, recorded rather than raised, so that its ConfigError lists every
    problem at once, a line each (as :func:`read_props` does for a props class's fields); it
    checks as :meth:`Section.check` does, under the same keys."""

    def __init__(self, section: Section) -> None:
        self.section = section
        self._lines: list[str] = []

    def key(self, key: str) -> str:
        return self.section.key(key)

    def check(self, key: str, value: Any, ok: bool, allowed: str) -> None:
        if not ok:
            self._lines.append(str(self.section.fail(key, value, allowed)))

    def raise_any(self) -> None:
        """ConfigError listing every problem recorded (nothing when none was)."""
        if self._lines:
            raise ConfigError("\n".join(self._lines))


def _classes(hint: Any) -> set[Any]:
    """The classes a resolved field type admits: ``Path | None`` -> {Path, NoneType}."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return set(typing.get_args(hint))
    return {hint}


def field_classes(cls: type) -> dict[str, set[Any]]:
    """Each field of `cls` and the classes its type admits, from the resolved annotations (the
    modules use ``from __future__ import annotations``: a field's ``type`` is only its text)."""
    hints = typing.get_type_hints(cls)
    return {field.name: _classes(hints[field.name]) for field in dataclasses.fields(cls)}


def _read_field(
    section: Section, name: str, key: str, classes: set[Any], defaults: Mapping[str, Any]
) -> dict[str, Any]:
    """Field `name`'s value from `key` of `section` (None where null and the field optional),
    else its default in `defaults`; empty where neither: the class's own default applies."""
    if type(None) in classes and section.is_null(key):
        return {name: None}
    # A string setting stays text even where it parses as JSON (a version such as 4.51).
    value = section.get(key, as_text=bool(classes - {type(None)}) and classes - {type(None)} <= {str, Path})
    if value is None:
        return {name: defaults[name]} if name in defaults else {}
    if Path in classes:
        section.check(
            key, value, isinstance(value, str) and bool(value), "a path, absolute or relative to the project root"
        )
        value = PROJECT_ROOT / value
    return {name: value}


def read_props(
    section: Section,
    cls: type[T],
    *,
    keys: Mapping[str, str] | None = None,
    defaults: Mapping[str, Any] | None = None,
    only: Sequence[str] | None = None,
    owners: Mapping[str, Mapping[str, str]] | None = None,
    **given: Any,
) -> T:
    """`cls` built from `section`: the fields in `given` as given, those in `only` (default:
    all others) from their keys, the rest left to `cls`'s defaults. Path fields are relative to
    the project root. A refusal becomes a ConfigError with a line per key: a problem of `cls`
    names the key of its field (`keys`), one of a props class in `owners` (a rule of `cls`
    that faults a field of its parts) the key that class's map gives."""
    keys, defaults = dict(keys or {}), dict(defaults or {})
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    wanted = set(names if only is None else only) - set(given)
    values = dict(given)
    for name, classes in field_classes(cls).items():
        if name in wanted:
            values.update(_read_field(section, name, keys.get(name, name), classes, defaults))
    try:
        return cls(**values)
    except PropError as exc:
        owner_keys = {**(owners or {}), cls.__name__: keys}
        if any(problem.owner not in owner_keys for problem in exc.problems):
            raise
        lines = [str(section.fail(owner_keys[p.owner].get(p.prop, p.prop), p.value, p.allowed)) for p in exc.problems]
        raise ConfigError("\n".join(lines)) from None
    except ValueError as exc:
        # A settings class of its own (serving's): one problem, named by its `prop`.
        prop = getattr(exc, "prop", None)
        if prop is None or prop not in names:
            raise
        raise section.fail(
            keys.get(prop, prop), getattr(exc, "value", None), getattr(exc, "allowed", str(exc))
        ) from None
