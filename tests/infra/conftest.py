"""Synthesis fixtures: stand-in artifacts, and the app synthesized once per set of overrides."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.infra.helpers import Synthesized, make_artifacts, synthesize


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_artifacts(tmp_path_factory.mktemp("artifacts"))


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory, artifacts: Path) -> Callable[..., Synthesized]:
    """Synthesize with overrides; each distinct set of overrides is synthesized once."""
    cache: dict[str, Synthesized] = {}

    def run(**overrides: Any) -> Synthesized:
        key = json.dumps(overrides, sort_keys=True)
        if key not in cache:
            cache[key] = synthesize(tmp_path_factory.mktemp("cdk.out"), artifacts, **overrides)
        return cache[key]

    return run
