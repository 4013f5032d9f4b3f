"""The configuration reference's tables (docs/CONFIGURATION.md, README's configuration rows
until they moved there) say what the code does: every key exists, every default is the code's
own (read from the configuration cdk.json gives when it sets nothing), and the values a row
allows (its choices, its range) are those the code allows (read from the code's refusal)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest

from llm_inference_cdk.endpoint_props import MODES
from project_config import PROJECT_ROOT, ConfigError, inf2_sagemaker, load_config, settings_of
from project_config.endpoint import ALARM_KEYS, ASYNC_KEYS, COMPONENT_KEYS, DEPLOYMENT_KEYS, mode_keys
from project_config.engines import engine_keys
from tests.infra.helpers import ROOT

#: The configuration reference, and the sections whose table it keeps in the `| key | default ... |` form.
REFERENCE = ROOT / "docs" / "CONFIGURATION.md"
TABLES = {"project": ["project"], "gpt2`, `gptj` and `llm": ["gpt2", "gptj", "llm", "inf2"], "inf2": ["inf2"]}


def rows() -> dict[str, dict[str, tuple[str, str]]]:
    """{section: {key: (the reference's default cell, its meaning cell)}}."""
    text = REFERENCE.read_text()
    found: dict[str, dict[str, tuple[str, str]]] = {}
    for heading, sections in TABLES.items():
        body = text[text.index(f"## `{heading}`") :]
        body = body[body.index("| --- |") :]
        body = body[: body.index("\n\n")]
        for row in body.splitlines()[1:]:
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", row.strip().strip("|"))]
            key = cells[0].strip("`")
            for section, cell in zip(sections, cells[1 : 1 + len(sections)], strict=True):
                if cell != "—":
                    found.setdefault(section, {})[key] = (cell, cells[-1])
    return found


def tables() -> dict[str, dict[str, str]]:
    """{section: {key: the reference's default cell}}."""
    return {section: {key: cell for key, (cell, _) in keys.items()} for section, keys in rows().items()}


def code_default(settings: Any, key: str) -> Any:
    """The value `key` has in `settings` (a section's dataclass tree), wherever it is held."""
    # Keys named otherwise than their prop (the modes' props share names: one map at a time).
    names = {v: k for keys in (ALARM_KEYS, DEPLOYMENT_KEYS, COMPONENT_KEYS, ASYNC_KEYS) for k, v in keys.items()}
    name = names.get(key, "mode" if key == "endpoint_mode" else key)
    if key == "engine":
        return settings.engine.name  # a typed choice, named by its value
    todo = [settings]
    while todo:
        node = todo.pop(0)
        fields = {f.name for f in dataclasses.fields(node)}
        if name in fields or isinstance(getattr(type(node), name, None), property):
            return getattr(node, name)
        todo += [getattr(node, f) for f in fields if dataclasses.is_dataclass(getattr(node, f))]
    raise KeyError(key)


def in_mode_of(section: str, key: str) -> dict[str, Any]:
    """The context that reads `key`: an endpoint mode's own settings exist only in that mode, an
    engine's only with that engine."""
    if section == "gptj" and key in set(engine_keys("hf-toolkit")) - set(engine_keys("vllm")):
        return {section: {"engine": "hf-toolkit"}}
    if section == "inf2" and key in inf2_sagemaker.endpoint_keys() - {"instance_type", "volume_size_gb"}:
        return {section: {"platform": "sagemaker", **({"endpoint_mode": "async"} if key in mode_keys("async") else {})}}
    for mode in MODES[1:]:
        if section in ("gpt2", "gptj", "llm") and key in mode_keys(mode) - mode_keys("realtime"):
            return {section: {"endpoint_mode": mode}}
    return {}


def documented(cell: str, value: Any) -> bool:
    if cell == "unset":
        return value is None
    match = re.fullmatch(r"`(.*)`", cell)
    assert match, f"the reference's default {cell!r} is neither unset nor a literal"
    literal = match.group(1)
    if isinstance(value, Path):
        return value == PROJECT_ROOT / literal
    if isinstance(value, str):
        return value == literal
    # A list setting is held as a tuple (frozen settings).
    return bool(json.loads(literal) == (list(value) if isinstance(value, tuple) else value))


CASES = [(section, key, cell) for section, rows in tables().items() for key, cell in rows.items()]


@pytest.mark.parametrize(("section", "key", "cell"), CASES, ids=[f"{s}.{k}" for s, k, _ in CASES])
def test_readme_default_is_the_codes(section: str, key: str, cell: str) -> None:
    value = code_default(getattr(load_config(in_mode_of(section, key)), section), key)
    if cell.startswith("`<artifacts_dir>"):
        assert value == PROJECT_ROOT / "artifacts" / cell.strip("`").removeprefix("<artifacts_dir>/")
    else:
        assert documented(cell, value), f"{REFERENCE.name}: {section}.{key} defaults to {cell}; the code: {value!r}"


@pytest.mark.parametrize("section", ["project", "gpt2", "gptj", "llm", "inf2"])
def test_every_setting_of_a_section_is_in_its_table(section: str) -> None:
    """The keys the configuration reads are the keys the reference lists: a setting missing from the
    table would be one nobody finds, one missing from the code a promise it does not keep."""
    assert set(tables()[section]) == keys_read(section)


def keys_read(section: str) -> set[str]:
    """Every key the configuration reads from `section` (what Section.done checks given keys against)."""
    return settings_of(section)


def code_allows(section: str, key: str) -> str:
    """What the configuration allows for `key`, in its own words: the end of its refusal of a
    value no setting takes ("" where any value is taken, as for a path)."""
    context = {f"{s}.{k}": v for s, keys in in_mode_of(section, key).items() for k, v in keys.items()}
    try:
        load_config({**context, f"{section}.{key}": "not-a-value-of-any-setting"})
    except ConfigError as exc:
        return str(exc).split("allowed is ", 1)[1]
    return ""


def documented_choices(meaning: str) -> list[str]:
    """The first list of literals a meaning cell gives (`a`, `b` or `c`), asides in parentheses
    left out."""
    while (plain := re.sub(r"\([^()]*\)", "", meaning)) != meaning:
        meaning = plain
    match = re.search(r"`[^`]+`(?:\s*(?:,|or|, or)\s*`[^`]+`)+", meaning)
    return re.findall(r"`([^`]+)`", match.group(0)) if match else []


MEANINGS = [(section, key, meaning) for section, keys in rows().items() for key, (_, meaning) in keys.items()]


@pytest.mark.parametrize(("section", "key", "meaning"), MEANINGS, ids=[f"{s}.{k}" for s, k, _ in MEANINGS])
def test_the_values_a_row_allows_are_the_codes(section: str, key: str, meaning: str) -> None:
    """A setting with choices lists them all; a number states its range, as the code has them."""
    allowed = code_allows(section, key)
    if allowed.startswith("one of "):
        choices = {c for c in allowed.removeprefix("one of ").split(", ") if c != "or unset"}
        assert set(documented_choices(meaning)) == choices, f"{section}.{key}: the code allows {allowed}"
    elif (numbers := re.search(r"\bfrom (\d[\d.]*) to (\d[\d.]*)", allowed)) is not None:
        stated = re.search(r"(\d[\d.]*)–(\d[\d.]*)", meaning)
        assert stated is not None, f"{section}.{key}: the row states no range; the code allows {allowed}"
        assert (float(stated[1]), float(stated[2])) == (float(numbers[1]), float(numbers[2])), (
            f"{section}.{key}: the row says {stated[0]}; the code allows {allowed}"
        )
