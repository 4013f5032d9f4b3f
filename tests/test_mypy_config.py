"""mypy analyses only the library modules this project imports (pyproject.toml, the overrides
under [tool.mypy]). A module skipped there is Any to the checker: a call into it would go
unchecked. These tests keep the list and the imports in step."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: What mypy checks (the Makefile's MYPY_CODE and MYPY_IMAGES): the repository's Python files,
#: less what pyproject's mypy `exclude` and the environments hold.
SKIPPED_PARTS = {"tests", "node_modules", "cdk.out", "results", "__pycache__", "build", "artifacts"}


def _overrides() -> tuple[list[str], set[str]]:
    """(the skipped patterns, the modules analysed in spite of them)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    skipped: list[str] = []
    kept: set[str] = set()
    for override in config.get("overrides", []):
        modules = override["module"] if isinstance(override["module"], list) else [override["module"]]
        if override.get("follow_imports") == "skip":
            skipped.extend(modules)
        elif override.get("follow_imports") == "normal":
            kept.update(modules)
    return skipped, kept


def _analysed(module: str, kept: set[str]) -> bool:
    """mypy's rule: a ``foo.*`` pattern matches ``foo`` and everything under it."""
    return any(module == k or (k.endswith(".*") and (module == k[:-2] or module.startswith(k[:-1]))) for k in kept)


def _project_files() -> Iterator[Path]:
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [s for s in subfolders if s not in SKIPPED_PARTS and not s.startswith(".")]
        yield from (Path(folder) / f for f in files if f.endswith(".py"))


def _imports() -> tuple[set[str], dict[str, set[str]]]:
    """(the aws_cdk modules imported, the names imported from transformers' top level with
    the files that import them)."""
    cdk: set[str] = set()
    transformers: dict[str, set[str]] = {}
    for path in _project_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                cdk.update(a.name for a in node.names if a.name.startswith("aws_cdk."))
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module == "aws_cdk":
                    cdk.update(f"aws_cdk.{a.name}" for a in node.names if a.name.islower())
                elif node.module.startswith("aws_cdk."):
                    cdk.add(node.module)
                elif node.module == "transformers":
                    for alias in node.names:
                        transformers.setdefault(alias.name, set()).add(str(path.relative_to(ROOT)))
    return cdk, transformers


def test_every_aws_cdk_module_the_project_imports_is_analysed() -> None:
    skipped, kept = _overrides()
    assert "aws_cdk.*" in skipped, "pyproject.toml no longer skips aws-cdk-lib's unused modules: drop this test"
    imported, _ = _imports()
    missing = sorted(m for m in imported if not _analysed(m, kept))
    assert not missing, f"add {missing} to the follow_imports = 'normal' override in pyproject.toml"
    listed = {k for k in kept if k.startswith("aws_cdk.") and k != "aws_cdk._jsii"}
    unused = sorted(listed - imported)
    assert not unused, f"nothing imports {unused} any more: remove them from pyproject.toml's mypy overrides"


def test_every_transformers_model_the_project_imports_is_analysed() -> None:
    """A class of a skipped model folder would be reported by mypy as missing from transformers,
    which reads like a wrong name: this says which folder to add instead."""
    spec = importlib.util.find_spec("transformers")  # its files, without importing it (3 s)
    if spec is None or spec.origin is None:
        pytest.skip("no transformers in this venv")
    models = Path(spec.origin).parent / "models"
    _, kept = _overrides()
    _, names = _imports()
    class_names = {name for name in names if name[:1].isupper()}
    defined = re.compile(r"^class (" + "|".join(map(re.escape, class_names)) + r")\b", re.MULTILINE)
    home: dict[str, str] = {}
    for source in models.glob("*/*.py"):
        for name in defined.findall(source.read_text(errors="replace")):
            home.setdefault(name, source.parent.name)
    wrong = {
        name: (f"transformers.models.{home[name]}", sorted(names[name]))
        for name in class_names
        if name in home and not _analysed(f"transformers.models.{home[name]}", kept)
    }
    assert not wrong, f"add these model folders to pyproject.toml's mypy overrides: {wrong}"
    # The check is live: the classes this project builds are found where they are defined.
    assert home.get("GPT2LMHeadModel") == "gpt2", home


@pytest.mark.parametrize(
    ("module", "analysed"),
    [
        ("aws_cdk", True),
        ("aws_cdk.aws_sagemaker", True),
        ("aws_cdk.aws_quicksight", False),
        ("transformers.models", True),
        ("transformers.models.gpt2", True),
        ("transformers.models.gpt2.modeling_gpt2", True),
        ("transformers.models.llama.modeling_llama", False),
    ],
)
def test_the_overrides_read_as_mypy_reads_them(module: str, analysed: bool) -> None:
    _, kept = _overrides()
    assert _analysed(module, kept) is analysed
