"""`python -m artifacts_builder inf2`: the bundle, its manifests, and refusals."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from artifacts_builder import inf2 as inf2_builder
from artifacts_builder.inf2 import run
from llm_contracts.inf2 import DEFAULT_MODEL, HUB_FILES, PINNED_REVISIONS
from llm_contracts.manifest import file_entry, read_manifest, sha256_file, verify_files

from .helpers import ROOT, FakeHub, builder_args


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


def test_the_bundle_is_also_unpacked_for_an_s3_prefix(tiny_artifacts: Path) -> None:
    """SageMaker takes the bundle as an uncompressed S3 prefix: the folder beside the tarball
    holds its files byte for byte, each listed with its sha256 in the inner manifest, which
    S3PrefixModelData ships."""
    folder = tiny_artifacts / "inf2" / "bundle"
    unpacked = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert unpacked == members(tiny_artifacts / "inf2" / "bundle.tar.gz")
    inner = read_manifest(folder)
    verify_files(folder, inner)
    assert set(inner["files"]) == set(unpacked) - {"manifest.json"}
    assert not (tiny_artifacts / "inf2" / ".staging").exists()


def test_the_same_settings_give_the_same_bundle(tiny_artifacts: Path, tmp_path: Path) -> None:
    assert run(builder_args(tmp_path, "--tiny")) == 0
    assert sha256_file(tmp_path / "inf2" / "bundle.tar.gz") == sha256_file(tiny_artifacts / "inf2" / "bundle.tar.gz")


@pytest.fixture
def opt_13b_hub(tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeHub:
    """The hub, answering for facebook/opt-13b at its pinned commit (with a tiny model's files)."""
    hub = FakeHub(tiny_model_dir, into=tmp_path, repo=DEFAULT_MODEL, commit=PINNED_REVISIONS[DEFAULT_MODEL])
    monkeypatch.setattr(inf2_builder, "hub_api", lambda: hub)
    return hub


def test_a_hub_bundle_pins_the_commit_and_lists_each_file_sha256(opt_13b_hub: FakeHub, tmp_path: Path) -> None:
    assert run(builder_args(tmp_path / "out")) == 0
    files = members(tmp_path / "out" / "inf2" / "bundle.tar.gz")
    commit = PINNED_REVISIONS[DEFAULT_MODEL]
    props = properties(files["serving.properties"])
    assert props["option.model_id"] == DEFAULT_MODEL and props["option.revision"] == commit
    listed = json.loads(files[HUB_FILES])
    assert (listed["repo"], listed["revision"]) == (DEFAULT_MODEL, commit)
    repo = opt_13b_hub.folder
    # What the server loads, in one format of weights: no README, no TensorFlow or Flax copies.
    wanted = {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"}
    assert set(listed["files"]) == wanted & {p.name for p in repo.iterdir()}
    assert listed["files"] == {name: file_entry(repo / name) for name in listed["files"]}
    # The weights' sha256 is the hub's own (Git LFS names its objects by it): not downloaded here.
    assert "model.safetensors" not in opt_13b_hub.downloads and "config.json" in opt_13b_hub.downloads
    assert HUB_FILES in json.loads(files["manifest.json"])["files"]  # verified with the bundle at load
    assert read_manifest(tmp_path / "out" / "inf2")["model"]["revision"] == commit


def test_the_commit_must_be_what_the_hub_has(tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    commit = PINNED_REVISIONS[DEFAULT_MODEL]
    hub = FakeHub(tiny_model_dir, into=tmp_path, repo=DEFAULT_MODEL, commit=commit, resolves_to="f" * 40)
    monkeypatch.setattr(inf2_builder, "hub_api", lambda: hub)
    assert run(builder_args(tmp_path / "out")) == 2
    assert f"inf2.model_revision='{commit}' is invalid: the hub resolves it to 'ffff" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("given", "message"),
    [
        # Another hub model: its commit is required (only facebook/opt-13b's is pinned).
        (["inf2.model_id=facebook/opt-1.3b"], "inf2.model_revision=None is invalid: allowed is the commit of "
                                              "facebook/opt-1.3b on the Hugging Face hub"),
        # A branch can move: a commit is required.
        (["inf2.model_revision=main"], "inf2.model_revision='main' is invalid: allowed is a full commit hash"),
    ],
)  # fmt: skip
def test_a_hub_model_needs_a_commit(
    given: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [arg for setting in given for arg in ("-c", setting)]
    assert run(builder_args(tmp_path, *args)) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "inf2" / "bundle.tar.gz").exists()


def test_a_bundled_model_refuses_a_model_id_of_its_own(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(builder_args(tmp_path, "--tiny", "-c", f"inf2.model_id={DEFAULT_MODEL}")) == 2
    assert (
        f"inf2.model_id='{DEFAULT_MODEL}' is invalid: allowed is unset or 'tiny-random-opt', the model the bundle ships"
        in capsys.readouterr().err
    )


def test_hub_bundle_renders_overrides_and_extra_properties(opt_13b_hub: FakeHub, tmp_path: Path) -> None:
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
        "revision": PINNED_REVISIONS[DEFAULT_MODEL],
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
