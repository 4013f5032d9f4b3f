"""The Makefile's installer (.ci/uv_pip.py) gives uv pip's configuration as pip resolves it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def uv_pip() -> ModuleType:
    spec = importlib.util.spec_from_file_location("uv_pip", ROOT / ".ci" / "uv_pip.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pip_s_files_and_variables_become_uv_s_variables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "pip.conf"
    config.write_text(
        "[global]\nfind-links = /from/the/file\nextra-index-url =\n  file:///one/simple\n  file:///two/simple\n"
        "constraint = /c.txt\n[install]\nconstraint = /install/c.txt\n"
    )
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    monkeypatch.setenv("PIP_FIND_LINKS", "/wheels /more-wheels")
    monkeypatch.delenv("PIP_CONSTRAINT", raising=False)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    module = uv_pip()
    env = module.uv_environment(module.pip_config(sys.executable))
    # A PIP_* variable wins over the files, [install] over [global]; uv's separators.
    assert env["UV_FIND_LINKS"] == "/wheels,/more-wheels"
    assert env["UV_CONSTRAINT"] == "/install/c.txt"
    assert env["UV_EXTRA_INDEX_URL"] == "file:///one/simple file:///two/simple"
    assert env["UV_INDEX_STRATEGY"] == "unsafe-best-match" and env["UV_COMPILE_BYTECODE"] == "1"
