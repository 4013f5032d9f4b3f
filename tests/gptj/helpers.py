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


SEED_PROMPT = "Can you please let us know more details about your"
#: The shard the tampering tests damage (the tiny payload has several, as GPT-J 6B's has).
SHARD = "model-00002-of-00004.safetensors"
FEW_SHOT = """key: markets
tweet: Take feedback from nature and markets, not from people.
###
key: children
tweet: Maybe we die so we can come back as children.
###
key: startups
tweet: Startups should not worry about how to put out fires, they should worry about how to start them.
###
key: hugging face
tweet:"""

GOOD = {
    "default": request(SEED_PROMPT),
    "default_again": request(SEED_PROMPT),
    "beams": request(SEED_PROMPT, num_beams=5),
    # The seed's parameterized request: max_length and a temperature (sampling, as GPT-J's
    # text-generation defaults made it then).
    "parameterized": request(SEED_PROMPT, max_length=200, temperature=0.9),
    "long": request(SEED_PROMPT, min_length=200, max_length=200),
    "few_shot": request(
        FEW_SHOT, max_length=len(FEW_SHOT) // 4 + 25, temperature=4.0, stop="###", return_full_text=False
    ),
    "sampling_all": request(SEED_PROMPT, do_sample=True, top_k=20, top_p=0.9, temperature=0.7, max_new_tokens=8),
    "short": request(SEED_PROMPT, max_new_tokens=5, return_full_text=False),
}

# Each bad request, and a word its error message must contain (the value's name).
BAD: dict[str, tuple[dict[str, str], str]] = {
    "no inputs": (request(None, max_new_tokens=3), '"inputs"'),
    "inputs not a string": (request(123), "inputs=123"),
    "empty inputs": (request(""), "inputs=''"),
    "parameters not an object": ({"body": json.dumps({"inputs": "a", "parameters": [1]})}, "parameters=[1]"),
    "unknown parameter": (request("a", max_tokens=3), "max_tokens"),
    "stream": ({"body": json.dumps({"inputs": "a", "stream": True})}, "stream is not supported"),
    "unknown field": ({"body": json.dumps({"inputs": "a", "params": {}})}, "params"),
    "max_new_tokens zero": (request("a", max_new_tokens=0), "max_new_tokens=0"),
    "max_new_tokens too many": (request("a", max_new_tokens=10**6), "max_new_tokens=1000000"),
    "max_new_tokens as text": (request("a", max_new_tokens="10"), "max_new_tokens='10'"),
    "max_new_tokens as bool": (request("a", max_new_tokens=True), "max_new_tokens=True"),
    "max_length under prompt": (request(SEED_PROMPT, max_length=2), "max_length=2"),
    "max_length beyond positions": (request("a", max_length=10**5), "max_length=100000"),
    "both lengths": (request("a", max_length=20, max_new_tokens=5), "max_length and max_new_tokens"),
    "min_length too long": (request("a", min_length=200, max_new_tokens=5), "min_length=200"),
    "num_beams too many": (request("a", num_beams=100), "num_beams=100"),
    "temperature zero": (request("a", temperature=0), "temperature=0"),
    "temperature negative": (request("a", temperature=-1), "temperature=-1"),
    "temperature text": (request("a", temperature="hot"), "temperature='hot'"),
    "temperature NaN": ({"body": '{"inputs": "a", "parameters": {"temperature": NaN}}'}, "temperature=nan"),
    "top_p above one": (request("a", top_p=1.5), "top_p=1.5"),
    "top_k negative": (request("a", top_k=-1), "top_k=-1"),
    "do_sample text": (request("a", do_sample="yes"), "do_sample='yes'"),
    "sampling without do_sample": (request("a", do_sample=False, temperature=0.5), "do_sample"),
    "eos_token_id out of vocabulary": (request("a", eos_token_id=10**9), "eos_token_id=1000000000"),
    "eos_token_id empty list": (request("a", eos_token_id=[]), "eos_token_id=[]"),
    "stop empty": (request("a", stop=""), "stop=''"),
    "stop not strings": (request("a", stop=[1]), "stop=[1]"),
    "return_full_text text": (request("a", return_full_text="no"), "return_full_text='no'"),
    "body not JSON": ({"body": "inputs=hello"}, "not valid JSON"),
    "body a list": ({"body": json.dumps(["a"])}, "JSON list"),
    "CSV content type": ({"body": "a,b", "content_type": "text/csv"}, "text/csv"),
    "CSV accept": ({**request("a", max_new_tokens=2), "accept": "text/csv"}, "text/csv"),
}
