"""The ``project`` section: where the artifacts are, tags, and an optional fixed environment."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from llm_inference_cdk.props import optional, prop, string_map, text, validate
from project_config.reader import PROJECT_ROOT, Section, read_props

_TAG_KEY = re.compile(r"^(?!aws:)[\w .:/=+\-@]{1,128}$")


@dataclass(frozen=True, kw_only=True)
class ProjectSettings:
    #: Where the artifacts builder wrote its outputs (relative to the project root).
    artifacts_dir: Path = prop(PROJECT_ROOT / "artifacts")
    #: Tags on every resource.
    tags: Mapping[str, str] = prop(
        factory=lambda: {"project": "llm-inference-cdk"},
        check=string_map(
            _TAG_KEY,
            max_value=256,
            max_items=50,
            what="an object of tag keys (1-128 characters, not starting with 'aws:') to values (at most 256 "
            "characters)",
        ),
    )
    #: The account to pin the stacks to (None: environment-agnostic stacks).
    account: str | None = prop(None, check=optional(text(re.compile(r"^[0-9]{12}$"), what="a 12-digit AWS account id")))
    #: The region to pin the stacks to (None: environment-agnostic stacks).
    region: str | None = prop(
        None,
        check=optional(
            text(re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-[0-9]$"), what="an AWS region name such as us-east-1")
        ),
    )

    def __post_init__(self) -> None:
        validate(self)


def read(section: Section) -> ProjectSettings:
    settings = read_props(section, ProjectSettings)
    section.done()
    return settings
