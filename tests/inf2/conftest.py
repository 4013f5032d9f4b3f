"""Fixtures of the inf2 tests: the tiny OPT, the fake djl_python, built artifacts."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from .helpers import ROOT, builder_args, cdk_context, stand_in_artifacts

# The driver that runs under the LMI image's environments loads files as DJL does; so do the fixtures.
from .lmi_driver import load_file as load_module

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def fake_djl() -> ModuleType:
    return load_module("inf2_fake_djl", ROOT / "local_aws" / "images" / "djl.py")


@pytest.fixture
def djl_python(fake_djl: ModuleType, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """model.py's `from djl_python import Output` finds the fake."""
    monkeypatch.setitem(sys.modules, "djl_python", fake_djl)
    return fake_djl


@pytest.fixture(scope="session")
def model_py() -> ModuleType:
    """serving/inf2/model.py, loaded as DJL loads it: a file in the model folder."""
    return load_module("inf2_model", ROOT / "serving" / "inf2" / "model.py")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from artifacts_builder.inf2 import build_tiny_model

    target = tmp_path_factory.mktemp("tiny-opt")
    build_tiny_model(target)
    return target


@pytest.fixture(scope="session")
def tiny_model(tiny_model_dir: Path) -> tuple[Any, Any]:
    from transformers import AutoTokenizer, OPTForCausalLM

    return OPTForCausalLM.from_pretrained(tiny_model_dir).eval(), AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="session")
def tiny_artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`python -m artifacts_builder inf2 --tiny` with cdk.json's settings."""
    from artifacts_builder.inf2 import run

    out = tmp_path_factory.mktemp("artifacts")
    assert run(builder_args(out, "--tiny")) == 0
    stand_in_artifacts(out)
    return out


@pytest.fixture(scope="session")
def synth_inf2(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., dict[str, Any]]:
    """Synthesize the app (cdk-nag included) and return Inf2Stack's template."""

    def run(artifacts: Path, **overrides: Any) -> dict[str, Any]:
        from aws_cdk import App

        from app import build_app

        outdir = tmp_path_factory.mktemp("cdk.out")
        app = App(context=cdk_context(artifacts, **overrides), outdir=str(outdir))
        build_app(app)
        app.synth()
        return json.loads((outdir / "Inf2Stack.template.json").read_text())  # type: ignore[no-any-return]

    return run


@pytest.fixture(scope="session")
def tiny_template(synth_inf2: Callable[..., dict[str, Any]], tiny_artifacts: Path) -> dict[str, Any]:
    return synth_inf2(tiny_artifacts)
