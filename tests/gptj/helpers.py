"""Helpers of the GPT-J tests: SageMaker's extraction, importing the handler, request bodies."""

from __future__ import annotations

import importlib.util
import json
import shutil
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HF_PYTHON = ROOT / ".venv-hf" / "bin" / "python"
DRIVER = Path(__file__).with_name("toolkit_driver.py")


def extract(tar_path: Path, model_dir: Path) -> Path:
    """What SageMaker does with ModelDataUrl before the container starts."""
    model_dir.mkdir(parents=True)
    with tarfile.open(tar_path, "r:gz") as tar:
        tar.extractall(model_dir, filter="data")
    return model_dir


def load_inference(model_dir: Path) -> ModuleType:
    """code/inference.py from an extracted payload, imported as the toolkit would."""
    spec = importlib.util.spec_from_file_location(f"gptj_inference_{id(model_dir)}", model_dir / "code/inference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def copy_payload(model_dir: Path, target: Path) -> Path:
    shutil.copytree(model_dir, target)
    return target


def request(inputs: Any = None, **parameters: Any) -> dict[str, str]:
    body: dict[str, Any] = {} if inputs is None else {"inputs": inputs}
    if parameters:
        body["parameters"] = parameters
    return {"body": json.dumps(body)}
