"""Synthesis fixtures: stand-in artifacts, and the app synthesized once per set of overrides."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.infra.helpers import Synthesized, make_artifacts, synthesize, synthesize_some


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_artifacts(tmp_path_factory.mktemp("artifacts"))


@pytest.fixture(name="synth_some")
def synth_some_fixture() -> Callable[..., tuple[Synthesized, dict[str, str]]]:
    """`synthesize_some`: the app over artifacts of the test's own, each stack that cannot be
    synthesized left out with its reason."""
    return synthesize_some


@pytest.fixture(name="synthesize_at")
def synthesize_at_fixture() -> Callable[..., Synthesized]:
    """`synthesize`: the whole app, into an output folder and over artifacts of the test's own."""
    return synthesize


@pytest.fixture(name="full_app")
def full_app_fixture(tmp_path: Path, artifacts: Path) -> tuple[Any, dict[str, Any]]:
    """The app with its three stacks over the stand-in artifacts, built but not synthesized
    (the test adds to it, then synthesizes)."""
    from aws_cdk import App

    from app import build_app
    from tests.infra.helpers import cdk_context

    app = App(context=cdk_context(**{"project.artifacts_dir": str(artifacts)}), outdir=str(tmp_path))
    _, stacks, skipped = build_app(app)
    assert not skipped, skipped
    return app, stacks


@pytest.fixture(scope="session")
def sdk_image_uris() -> Any:
    """The SageMaker SDK's own image-URI lookup (seconds to import), which the library's tables
    must agree with."""
    from sagemaker.core import image_uris

    return image_uris


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
