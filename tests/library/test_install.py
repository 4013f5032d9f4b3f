"""The library installed as a user installs it, in a fresh virtual environment outside this
repository, with the library reference's example app (docs/LIBRARY.md, linked from README) run
as it stands."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- example-app:"

pytestmark = pytest.mark.slow


def readme_app() -> str:
    # The example app moved from README into the library's reference with the construct table.
    text = (ROOT / "docs" / "LIBRARY.md").read_text()
    after = text[text.index(MARKER) :]
    match = re.search(r"```python\n(.*?)```", after, flags=re.S)
    assert match, "docs/LIBRARY.md's example app is gone"
    return match.group(1)


@pytest.fixture(scope="module")
def user_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with `pip install <repository>`; the repository's own pins as constraints,
    so that the test does not depend on what PyPI released last."""
    user = tmp_path_factory.mktemp("user")
    # What a `pip install <git URL>` would get (the package's files), away from this checkout:
    # a build writes into its source folder.
    source = user / "source"
    for name in ("pyproject.toml", "README.md"):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, source / name)
    for package in ("llm_inference_cdk", "llm_contracts"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    venv = user / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # --no-compile: the same files installed, without the bytecode of every module of
    # aws-cdk-lib written ahead (40 s of CPU on a cold cache, two thirds of the install), most
    # of which the app never imports; what it imports is compiled as it is imported.
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-compile", "-c", str(ROOT / "requirements.txt"), str(source)],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return python


def synth(python: Path, app: str, folder: Path) -> subprocess.CompletedProcess[str]:
    folder.mkdir()
    (folder / "app.py").write_text(app)
    env = {**os.environ, "CDK_OUTDIR": str(folder / "cdk.out"), "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    env.pop("PYTHONPATH", None)
    # Run from the user's own folder: nothing of this repository is importable but the installed package.
    return subprocess.run(
        [str(python), "app.py"], cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_readme_app_synthesizes_on_the_users_image_and_model_data(user_python: Path, tmp_path: Path) -> None:
    proc = synth(user_python, readme_app(), tmp_path / "app")
    assert proc.returncode == 0, proc.stderr[-3000:]
    template = json.loads((tmp_path / "app" / "cdk.out" / "MyModelStack.template.json").read_text())
    resources = template["Resources"].values()
    (model,) = [r for r in resources if r["Type"] == "AWS::SageMaker::Model"]
    container = model["Properties"]["PrimaryContainer"]
    assert container["Image"] == "111122223333.dkr.ecr.eu-west-1.amazonaws.com/my-llm:1.0"
    assert container["ModelDataUrl"] == "s3://my-models-bucket/my-llm/model.tar.gz"
    (target,) = [r for r in resources if r["Type"] == "AWS::ApplicationAutoScaling::ScalableTarget"]
    assert (target["Properties"]["MinCapacity"], target["Properties"]["MaxCapacity"]) == (1, 4)
    # The package came from the venv, not from this checkout.
    where = subprocess.run(
        [str(user_python), "-c", "import llm_inference_cdk; print(llm_inference_cdk.__file__)"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert str(user_python.parent.parent) in where


def test_min_above_max_fails_naming_both(user_python: Path, tmp_path: Path) -> None:
    app = readme_app().replace("min_capacity=1, max_capacity=4", "min_capacity=5, max_capacity=2")
    proc = synth(user_python, app, tmp_path / "app")
    assert proc.returncode != 0
    assert "AutoscalingProps: max_capacity=2 is invalid: allowed is at least min_capacity (5)" in proc.stderr
