"""`python -m artifacts_builder inf2`: the bundle, its manifests, and refusals."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

from artifacts_builder.inf2 import run
from llm_contracts.manifest import read_manifest, sha256_file, verify_files

from .helpers import ROOT, builder_args


def members(bundle: Path) -> dict[str, bytes]:
    with tarfile.open(bundle) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def properties(text: bytes) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.decode().splitlines())


def test_tiny_bundle_holds_properties_handler_model_and_manifests(tiny_artifacts: Path, tmp_path: Path) -> None:
    folder = tiny_artifacts / "inf2"
    manifest = read_manifest(folder)
    bundle = folder / "bundle.tar.gz"
    assert manifest["files"]["bundle.tar.gz"]["sha256"] == sha256_file(bundle)
    files = members(bundle)
    assert files["model.py"] == (ROOT / "serving" / "inf2" / "model.py").read_bytes()
    props = properties(files["serving.properties"])
    assert props == manifest["serving_properties"]
    # cdk.json's settings, with the model pointed at the bundle's own folder.
    assert props["option.tensor_parallel_degree"] == "8" and props["option.entryPoint"] == "model.py"
    assert props["option.model_id"] == "/opt/ml/model/model" and props["engine"] == "Python"
    assert props["batch_size"] == props["option.batch_size"] == "4" and props["max_batch_delay"] == "100"
    # DJL reads it from here (PyModel.java); the handler keeps every call inside it.
    assert props["option.predict_timeout"] == "240" and props["option.model_loading_timeout"] == "3600"
    assert json.loads(files["model/config.json"])["num_attention_heads"] == 24
    assert manifest["model"]["facts"]["num_attention_heads"] == 24
    assert b"transformers-neuronx" in files["requirements.txt"]
    with tarfile.open(bundle) as tar:
        tar.extractall(tmp_path, filter="data")
    verify_files(tmp_path, json.loads((tmp_path / "manifest.json").read_text()))
    assert set(json.loads((tmp_path / "manifest.json").read_text())["files"]) == set(files) - {"manifest.json"}


def test_the_same_settings_give_the_same_bundle(tiny_artifacts: Path, tmp_path: Path) -> None:
    assert run(builder_args(tmp_path, "--tiny")) == 0
    assert sha256_file(tmp_path / "inf2" / "bundle.tar.gz") == sha256_file(tiny_artifacts / "inf2" / "bundle.tar.gz")


def test_hub_bundle_renders_overrides_and_extra_properties(tmp_path: Path) -> None:
    extra = json.dumps({"option.context_length_estimate": "128"})
    code = run(builder_args(tmp_path, "-c", "inf2.tensor_parallel_degree=4", "-c", f"inf2.extra_properties={extra}",
                            "-c", 'inf2.requirements=["sentencepiece==0.2.0"]'))  # fmt: skip
    assert code == 0
    files = members(tmp_path / "inf2" / "bundle.tar.gz")
    props = properties(files["serving.properties"])
    assert props["option.model_id"] == "facebook/opt-13b" and props["option.tensor_parallel_degree"] == "4"
    assert props["option.context_length_estimate"] == "128"
    assert files["requirements.txt"].decode().endswith("sentencepiece==0.2.0\n")
    assert not any(name.startswith("model/") for name in files)
    assert read_manifest(tmp_path / "inf2")["model"] == {
        "source": "hub",
        "name": "facebook/opt-13b",
        "facts": read_manifest(tmp_path / "inf2")["model"]["facts"],
    }


def test_a_local_model_folder_is_shipped_and_its_heads_checked(tiny_model_dir: Path, tmp_path: Path) -> None:
    assert run(builder_args(tmp_path / "ok", "--model-dir", str(tiny_model_dir))) == 0
    assert "model/model.safetensors" in members(tmp_path / "ok" / "inf2" / "bundle.tar.gz")
    config = json.loads((tiny_model_dir / "config.json").read_text())
    odd = tmp_path / "odd-heads"
    odd.mkdir()
    (odd / "config.json").write_text(json.dumps({**config, "num_attention_heads": 12}))
    assert run(builder_args(tmp_path / "bad", "--model-dir", str(odd))) == 2
    assert not (tmp_path / "bad" / "inf2" / "bundle.tar.gz").exists()


def test_bad_settings_fail_the_build_with_the_key(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "artifacts_builder", "inf2", "--out", str(tmp_path), "-c",
         "inf2.tensor_parallel_degree=3"],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert "inf2.tensor_parallel_degree=3 is invalid" in result.stderr
    assert not (tmp_path / "inf2" / "bundle.tar.gz").exists()
    assert run(builder_args(tmp_path, "-c", "inf2.model_id=acme/unknown")) == 2
