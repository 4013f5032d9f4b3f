"""The one place where the project's configuration is read, shared by the CDK app
(``stacks``, ``app.py``), the artifacts builder and the local AWS: each reads the settings
``cdk synth`` would see, through :func:`load_config` or :func:`from_cdk_json`, and none of
them imports the others (tests/test_imports.py).

`cdk.json` context (one section per stack, plus `project`) is parsed into frozen, validated
dataclasses that the stacks receive as keyword-only arguments; no construct calls
``try_get_context``. Each section has a module of its own here, with its dataclasses and its
reader together; a setting is defined once, by its field (default and check), mostly in the
construct library's props (``llm_inference_cdk``), whose errors are reported under the
``cdk.json`` key that set the value.

Every setting can be overridden on the command line with a dotted key, for example
``cdk deploy GptjStack -c gptj.instance_type=ml.g5.2xlarge``; the value is read as JSON when it
parses as JSON, else as a plain string. A bad value raises :class:`ConfigError`, whose
message names the key, the value and what is allowed, and synthesis stops there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_contracts.aws import ECR_IMAGE
from project_config import gpt2, gptj, inf2, llm, project
from project_config.engines import HfToolkitEngine, VllmEngine
from project_config.gpt2 import Gpt2Settings
from project_config.gptj import GptjSettings
from project_config.inf2 import Inf2Settings, ModelServerSettings
from project_config.llm import LlmSettings
from project_config.project import ProjectSettings
from project_config.reader import PROJECT_ROOT, ConfigError, Section, parse_context_pairs, parse_value

SECTIONS = ("project", "gpt2", "gptj", "llm", "inf2")
_SECTION_LIKE = re.compile(r"^[a-z][a-z0-9_]*$")

__all__ = [
    "PROJECT_ROOT",
    "SECTIONS",
    "AppConfig",
    "ConfigError",
    "Gpt2Settings",
    "GptjSettings",
    "HfToolkitEngine",
    "Inf2Settings",
    "LlmSettings",
    "ModelServerSettings",
    "ProjectSettings",
    "VllmEngine",
    "from_cdk_json",
    "load_config",
    "parse_context_pairs",
    "parse_value",
    "settings_of",
]


@dataclass(frozen=True, kw_only=True)
class AppConfig:
    project: ProjectSettings
    gpt2: Gpt2Settings
    gptj: LlmSettings
    llm: LlmSettings
    inf2: Inf2Settings


def load_config(context: Mapping[str, Any]) -> AppConfig:
    """Parse every section of `context` (``app.node.get_all_context()``): the sections of
    cdk.json and the dotted overrides (``gptj.instance_type``) given with ``-c``."""
    return _read(context)[0]


def _read(context: Mapping[str, Any]) -> tuple[AppConfig, dict[str, Section]]:
    """The configuration, and each section as read (which keys it read)."""
    for key in context:
        head, dot, _ = key.partition(".")
        # A key that looks like ours but names no section is a typo (`gtpj.max_capacity`) or a
        # setting given without its section (`-c max_capacity=3`, which nothing would read); CDK's
        # own keys (`aws:cdk:...`, `@aws-cdk/...`, `availability-zones:...`) never take this shape.
        if head not in SECTIONS and _SECTION_LIKE.match(head):
            if dot:
                raise ConfigError(
                    f"{key}={context[key]!r} is invalid: {head!r} is no section; allowed sections are "
                    + ", ".join(SECTIONS)
                )
            owners = [s for s in SECTIONS if head in settings_of(s)]
            allowed = (
                "a setting with its section: " + " or ".join(f"{s}.{head}" for s in owners)
                if owners
                else f"a setting of a section ({', '.join(SECTIONS)}), given as section.key"
            )
            raise ConfigError(f"{key}={context[key]!r} is invalid: allowed is {allowed}")

    sections: dict[str, Section] = {}

    def section(name: str) -> Section:
        raw = context.get(name)
        if isinstance(raw, str):
            raw = parse_value(raw)
        prefix = f"{name}."
        overrides = {k.removeprefix(prefix): v for k, v in context.items() if k.startswith(prefix)}
        sections[name] = Section(name, raw, overrides)
        return sections[name]

    settings = project.read(section("project"))
    artifacts = settings.artifacts_dir
    config = AppConfig(
        project=settings,
        gpt2=gpt2.read(section("gpt2"), artifacts),
        gptj=gptj.read(section("gptj"), artifacts),
        llm=llm.read_section(section("llm"), artifacts),
        inf2=inf2.read(section("inf2"), artifacts),
    )
    _check_zone_in_region(config)
    _check_images_in_region(config)
    return config, sections


def _check_zone_in_region(config: AppConfig) -> None:
    """A zone of another region than the pinned one would fail the deployment (EC2 knows no such
    zone there); an unpinned stack's region is only known at deploy time."""
    zone, region = config.inf2.availability_zone, config.project.region
    if zone is not None and region is not None and zone[:-1] != region:
        raise ConfigError(
            f"inf2.availability_zone={zone!r} is invalid: allowed is a zone of project.region {region} "
            f"(such as {region}a), or unset project.region"
        )


def _check_images_in_region(config: AppConfig) -> None:
    """SageMaker pulls a model's image from ECR in the model's own region only (CreateModel
    fails otherwise), so a pinned SageMaker stack's image URI must name that region. (The inf2
    host pulls with docker, which reaches another region's registry.)"""
    region = config.project.region
    if region is None:
        return
    images = (("gpt2", config.gpt2.image_uri), ("gptj", config.gptj.image_uri), ("llm", config.llm.image_uri))
    for key, uri in ((f"{section}.image_uri", uri) for section, uri in images):
        match = ECR_IMAGE.match(uri) if uri is not None else None
        if match is not None and match["region"] != region:
            raise ConfigError(
                f"{key}={uri!r} is invalid: allowed is an image in ECR of project.region {region} "
                f"({match['account']}.dkr.ecr.{region}.amazonaws.com/{match['repository']}...), as SageMaker "
                "pulls a model's image from its own region only, or unset project.region"
            )


def settings_of(section: str) -> set[str]:
    """The keys a section reads (with nothing given: every key is read once)."""
    return _read({})[1][section].keys_read


def from_cdk_json(overrides: Mapping[str, Any] | None = None, *, path: Path = PROJECT_ROOT / "cdk.json") -> AppConfig:
    """The configuration as `cdk synth` would see it, for tools run outside the CDK app
    (the artifacts builder, the local AWS): cdk.json's context plus dotted overrides."""
    context = json.loads(path.read_text()).get("context", {})
    return load_config({**context, **(overrides or {})})
