"""GPT-J fixtures: the tiny payload, built once (in shards, as the real model is) and laid
out as SageMaker lays out the stack's uncompressed model data, and the environment pinned to
the container's versions that serves it through the toolkit."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from artifacts_builder import gptj
from tests.gptj.helpers import DRIVER, HF_PYTHON, ROOT

#: Small enough that the tiny model's weights come in several shards, as GPT-J 6B's do.
TINY_SHARD_BYTES = 100_000


@pytest.fixture(name="gptj_build")
def gptj_build_fixture() -> Callable[..., Path]:
    """The builder's `gptj.build`, for a test that builds a payload of its own."""
    return gptj.build


@pytest.fixture(scope="session")
def tiny_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`python -m artifacts_builder gptj --tiny --tarball --out DIR`, in process; returns DIR/gptj."""
    out = tmp_path_factory.mktemp("artifacts")
    gptj.build(
        model=gptj.DEFAULT_MODEL,
        revision=gptj.DEFAULT_REVISION,
        tiny=True,
        fmt="safetensors",
        out=out,
        shard_bytes=TINY_SHARD_BYTES,
        tarball=True,
    )
    return out / "gptj"


@pytest.fixture(scope="session")
def model_dir(tiny_build: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """/opt/ml/model as SageMaker fills it from the stack's S3 prefix: the payload folder's
    files, copied as they are (CompressionType None)."""
    return Path(shutil.copytree(tiny_build / "model", tmp_path_factory.mktemp("opt-ml") / "model"))


@pytest.fixture(scope="session")
def serve() -> Any:
    """Run scenarios through the toolkit under .venv-hf (transformers of the image)."""
    if not HF_PYTHON.exists():
        pytest.fail(
            f"{HF_PYTHON} is missing: build the environment pinned to the container with "
            "`make .venv-hf/.installed` (make test does it first)"
        )

    def run(scenarios: list[dict[str, Any]]) -> dict[str, Any]:
        spec = {"scenarios": [{**s, "model_dir": str(s["model_dir"])} for s in scenarios]}
        proc = subprocess.run(
            [str(HF_PYTHON), str(DRIVER)],
            input=json.dumps(spec),
            capture_output=True,
            text=True,
            timeout=300,
            cwd=ROOT,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        return dict(json.loads(proc.stdout.strip().splitlines()[-1]))

    return run
