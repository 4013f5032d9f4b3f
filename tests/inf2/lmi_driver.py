"""Runs under the environments pinned to the LMI neuronx image (.venv-lmi310, .venv-lmi), started
by tests/inf2/test_lmi_runtime.py: a JSON spec on stdin, one JSON line of results on stdout.

``{"mode": "tokenizer", "model_dir": ..., "prompts": [...]}`` loads a bundle's tokenizer and
config with the image's transformers and tokenizers (no torch needed) and reports ids and texts.

``{"mode": "handler", "bundle_dir": ..., "cache_dir": ..., "batches": [[body, ...], ...]}`` serves
the bundle's own model.py as the image would: the bundle's serving.properties through the warm-up
call, then each list of bodies as one DJL batch (local_aws/images/djl.py mirrors DJL 0.29.0's
engine and front end). Only transformers-neuronx is replaced: its Neuron graphs need
NeuronCores, so `OPTForSampling` here samples with the image's transformers on the CPU
(local_aws/images/neuronx_cpu.py).

Standard library at import: it must start under Python 3.10 without torch.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: The DJL Serving and transformers-neuronx stand-ins, which the local LMI container runs too.
LOCAL_AWS = HERE.parents[1] / "local_aws"
#: Where run-container.sh mounts the bundle in the container.
CONTAINER_MODEL_DIR = "/opt/ml/model"


def versions() -> dict[str, str]:
    from importlib import metadata

    found = {"python": ".".join(map(str, sys.version_info[:3]))}
    for name in ("transformers", "tokenizers", "huggingface_hub", "torch"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[name] = metadata.version(name)
    return found


def tokenizer_mode(spec: dict[str, Any]) -> dict[str, Any]:
    from transformers import AutoConfig, AutoTokenizer

    config = AutoConfig.from_pretrained(spec["model_dir"])
    tokenizer = AutoTokenizer.from_pretrained(spec["model_dir"])
    ids = [tokenizer(p)["input_ids"] for p in spec["prompts"]]
    facts = ("model_type", "num_attention_heads", "num_hidden_layers", "hidden_size", "vocab_size", "eos_token_id")
    return {
        "versions": versions(),
        "tokenizer_class": type(tokenizer).__name__,
        "config": {k: getattr(config, k) for k in facts},
        "eos_token_id": tokenizer.eos_token_id,
        "ids": ids,
        "decoded": [tokenizer.decode(i, skip_special_tokens=True) for i in ids],
    }


def load_file(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def handler_mode(spec: dict[str, Any]) -> dict[str, Any]:
    bundle = Path(spec["bundle_dir"])
    djl = load_file("djl_python", LOCAL_AWS / "images" / "djl.py")
    calls: list[dict[str, Any]] = []
    load_file("neuronx_cpu", LOCAL_AWS / "images" / "neuronx_cpu.py").install(calls)
    os.environ["PREDICT_TIMEOUT"] = "240"  # the image's (pytorch-inf2.Dockerfile)
    # DJL imports the bundle's model.py as the module "model" (service_loader.load_model_service).
    model = load_file("model", bundle / "model.py")
    props = dict(line.split("=", 1) for line in (bundle / "serving.properties").read_text().splitlines() if line)
    # The container sees the bundle at /opt/ml/model; here it is unpacked elsewhere.
    props["option.model_id"] = props["option.model_id"].replace(CONTAINER_MODEL_DIR, str(bundle), 1)
    # run-container.sh's OPTION_COMPILED_GRAPH_PATH, which DJL adds as option.compiled_graph_path.
    props.setdefault("option.compiled_graph_path", spec["cache_dir"])
    warm_up = djl.load(model.handle, props, str(bundle))
    responses = [
        [
            {"status": r.status, "headers": r.headers, "body": r.json()}
            for r in djl.predict(model.handle, b, str(bundle))
        ]
        for b in spec["batches"]
    ]
    return {"versions": versions(), "warm_up": warm_up.code, "calls": calls, "responses": responses}


def main() -> None:
    spec = json.loads(sys.stdin.read())
    result = tokenizer_mode(spec) if spec["mode"] == "tokenizer" else handler_mode(spec)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
