"""`python -m artifacts_builder gptj`: the archive, its manifests, the formats and refusals."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from artifacts_builder import gptj
from artifacts_builder.__main__ import build_parser
from artifacts_builder.__main__ import main as cli
from llm_contracts.gptj import PAYLOAD_MANIFEST
from llm_contracts.manifest import entry_for, library_versions, read_manifest, verify_files
from tests.gptj.helpers import extract, load_inference


def test_cli_defaults() -> None:
    args = build_parser().parse_args(["gptj"])
    assert (args.out, args.format, args.tiny) == (Path("artifacts"), "safetensors", False)
    assert (args.model, args.revision) == ("EleutherAI/gpt-j-6B", "float16")
    assert (args.shard_size_mb, args.tarball) == (gptj.DEFAULT_SHARD_MB, False)


SHARDS = [f"model-0000{i}-of-00004.safetensors" for i in range(1, 5)]


def test_payload_folder_holds_the_sagemaker_layout(tiny_build: Path) -> None:
    names = {p.relative_to(tiny_build / "model").as_posix() for p in (tiny_build / "model").rglob("*") if p.is_file()}
    assert {*SHARDS, "model.safetensors.index.json", "config.json", "tokenizer.json", "code/inference.py"} <= names
    assert PAYLOAD_MANIFEST in names
    assert not any(name.endswith(".pt") or name.startswith("code/requirements") for name in names)


def test_tarball_holds_the_same_files(tiny_build: Path, tmp_path: Path) -> None:
    extracted = extract(tiny_build / "model.tar.gz", tmp_path / "x")
    folder = tiny_build / "model"
    files = sorted(p.relative_to(folder) for p in folder.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(extracted) for p in extracted.rglob("*") if p.is_file())
    assert all((folder / f).read_bytes() == (extracted / f).read_bytes() for f in files)


def test_shards_respect_the_size_and_the_index_maps_every_weight(tiny_build: Path) -> None:
    from safetensors import safe_open

    folder = tiny_build / "model"
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    seen = {}
    for shard in SHARDS:
        with safe_open(folder / shard, "pt") as f:
            keys = list(f.keys())
            seen.update({k: shard for k in keys})
            data = sum(f.get_tensor(k).numel() * f.get_tensor(k).element_size() for k in keys)
        # Only a shard of one tensor may pass the limit (a tensor is never split).
        assert data <= 100_000 or len(keys) == 1
    assert index["weight_map"] == seen
    assert index["metadata"]["total_size"] == sum((folder / s).stat().st_size for s in SHARDS) - sum(
        8 + int.from_bytes((folder / s).read_bytes()[:8], "little") for s in SHARDS
    )


def test_outer_manifest_is_what_the_stack_reads(tiny_build: Path) -> None:
    entry = entry_for(tiny_build / "model.tar.gz")
    verify_files(tiny_build, read_manifest(tiny_build))  # every entry, including those not hashed twice
    manifest = read_manifest(tiny_build)
    assert manifest["component"] == "gptj" and manifest["format"] == "safetensors"
    assert manifest["versions"]["transformers"] == library_versions(["transformers"])["transformers"]
    assert entry["size"] == (tiny_build / "model.tar.gz").stat().st_size
    folder = tiny_build / "model"
    assert {f"model/{p.relative_to(folder).as_posix()}" for p in folder.rglob("*") if p.is_file()} == set(
        manifest["files"]
    ) - {"model.tar.gz"}


def test_payload_manifest_lists_every_file(model_dir: Path) -> None:
    payload = read_manifest(model_dir, PAYLOAD_MANIFEST)
    on_disk = {p.relative_to(model_dir).as_posix() for p in model_dir.rglob("*") if p.is_file()} - {PAYLOAD_MANIFEST}
    assert set(payload["files"]) == on_disk
    verify_files(model_dir, payload)  # every sha256 and size recorded while streaming is right
    assert payload["format"] == "safetensors" and payload["weights"] == SHARDS
    assert set(payload["versions"]) == {"torch", "transformers", "tokenizers", "safetensors"}


def test_same_inputs_give_the_same_payload(tiny_build: Path, tmp_path: Path, gptj_build: Callable[..., Path]) -> None:
    """Each file's sha256 is its S3 asset hash: a rebuild must not force a re-upload."""
    gptj_build(model="", revision="", tiny=True, fmt="safetensors", out=tmp_path, shard_bytes=100_000, tarball=True)
    assert read_manifest(tmp_path / "gptj")["files"] == read_manifest(tiny_build)["files"]


def test_rebuild_without_tarball_removes_the_stale_one(tmp_path: Path, gptj_build: Callable[..., Path]) -> None:
    gptj_build(model="", revision="", tiny=True, fmt="safetensors", out=tmp_path, tarball=True)
    gptj_build(model="", revision="", tiny=True, fmt="safetensors", out=tmp_path)
    assert not (tmp_path / "gptj" / "model.tar.gz").exists()
    assert "model.tar.gz" not in read_manifest(tmp_path / "gptj")["files"]
    assert (tmp_path / "gptj" / "model" / "model.safetensors").is_file()  # one shard: no index, HF's own name


def test_shard_size_out_of_range_names_the_limit(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert cli(["gptj", "--tiny", "--shard-size-mb", "5000", "--out", str(tmp_path)]) == 2
    assert "--shard-size-mb 5000 is invalid: use 1 to 4096" in capsys.readouterr().err


def test_streamed_safetensors_equal_the_source(tmp_path: Path, gptj_build: Callable[..., Path]) -> None:
    """From a .bin checkpoint in fp32 with GPT-J's old buffers, as the hub's older revisions
    are: the payload holds every weight the model has, in fp16, and nothing else."""
    import torch
    from safetensors.torch import load_file

    source = gptj.make_random_model(tmp_path / "src", **gptj.TINY)
    weights = load_file(source / "model.safetensors")
    (source / "model.safetensors").unlink()
    fp32 = {name: t.float() for name, t in weights.items()}
    fp32["transformer.h.0.attn.masked_bias"] = torch.tensor(-1e9)
    torch.save(fp32, source / "pytorch_model.bin")
    payload = gptj_build(model=str(source), revision="", tiny=False, fmt="safetensors", out=tmp_path / "out")
    built = load_file(payload / "model.safetensors")
    assert set(built) == set(weights)
    for name, tensor in weights.items():
        assert built[name].dtype == torch.float16 and torch.equal(built[name], tensor.half()), name
    assert read_manifest(tmp_path / "out" / "gptj")["model"]["source"] == str(source)


def test_checkpoint_missing_a_weight_is_refused(tmp_path: Path, gptj_build: Callable[..., Path]) -> None:
    from safetensors.torch import load_file, save_file

    source = gptj.make_random_model(tmp_path / "src", **gptj.TINY)
    weights = load_file(source / "model.safetensors")
    del weights["lm_head.weight"]
    save_file(weights, source / "model.safetensors")
    with pytest.raises(gptj.BuildError, match=r"lm_head\.weight"):
        gptj_build(model=str(source), revision="", tiny=False, fmt="safetensors", out=tmp_path / "out")
    assert not (tmp_path / "out" / "gptj" / "model").exists()


def test_missing_model_folder_names_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["gptj", "--model", str(tmp_path / "nope"), "--out", str(tmp_path)]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_torch_save_refused_when_versions_differ_from_the_image(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    toolkit = ["-c", "gptj.engine=hf-toolkit"]
    assert cli(["gptj", "--tiny", "--format", "torch-save", "--out", str(tmp_path), *toolkit]) == 2
    err = capsys.readouterr().err
    here = library_versions(["transformers"])["transformers"]
    assert "torch-save is refused" in err and f"transformers {here} here vs 4.51.3 in the image" in err
    assert "--format safetensors" in err
    assert not (tmp_path / "gptj" / "model").exists()


def test_torch_save_refused_for_the_vllm_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The default engine: no -c needed.
    assert cli(["gptj", "--tiny", "--format", "torch-save", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--format torch-save is for gptj.engine=hf-toolkit: the vllm engine loads safetensors only" in err
    assert not (tmp_path / "gptj" / "model").exists()


@pytest.mark.parametrize(
    ("local", "ok"),
    [({"torch": "2.6.0+cu124", "transformers": "4.51.3"}, True), ({"torch": "2.6.0", "transformers": "4.51.2"}, False)],
)
def test_torch_save_version_match_ignores_build_tags(local: dict[str, Any], ok: bool) -> None:
    container = {"torch": "2.6.0", "transformers": "4.51.3"}
    if ok:
        gptj.check_torch_save_versions(local, container)
    else:
        with pytest.raises(gptj.BuildError, match=r"transformers 4\.51\.2 here vs 4\.51\.3"):
            gptj.check_torch_save_versions(local, container)


@pytest.fixture(scope="module")
def torch_save_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A torch-save payload, built where the configured image's versions are this
    environment's: a custom image of these versions (no Deep Learning Container has them)."""
    here = library_versions(["torch", "transformers"])
    out = tmp_path_factory.mktemp("torch-save")
    args = [
        "gptj.engine=hf-toolkit",
        f"gptj.pytorch_version={here['torch']}".split("+")[0],
        f"gptj.transformers_version={here['transformers']}",
        "gptj.image_uri=123456789012.dkr.ecr.us-east-1.amazonaws.com/my-gptj:1",
    ]
    assert cli(["gptj", "--tiny", "--format", "torch-save", "--out", str(out), *(f"-c{a}" for a in args)]) == 0
    return out / "gptj" / "model"


def test_torch_save_payload_serves(torch_save_dir: Path) -> None:
    assert read_manifest(torch_save_dir, PAYLOAD_MANIFEST)["format"] == "torch-save"
    inference = load_inference(torch_save_dir)
    model = inference.model_fn(str(torch_save_dir))
    (out,) = inference.predict_fn({"inputs": "Hello", "parameters": {"max_new_tokens": 4}}, model)
    assert out["generated_text"].startswith("Hello")


class _Payload:
    """Unpickling this runs code: the marker file shows whether it ever did."""

    marker = ""

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path(self.marker).touch, ())


def test_swapped_pickle_is_never_unpickled(torch_save_dir: Path, tmp_path: Path) -> None:
    import shutil

    model_dir = Path(shutil.copytree(torch_save_dir, tmp_path / "model"))
    marker = tmp_path / "code-ran"
    payload = _Payload()
    payload.marker = str(marker)
    size = (model_dir / "model.pt").stat().st_size
    # Padded to the real file's size (unpickling stops at the pickle's end), so that only the
    # sha256 can tell the two apart.
    (model_dir / "model.pt").write_bytes(pickle.dumps(payload).ljust(size, b"\0"))
    inference = load_inference(model_dir)
    with pytest.raises(inference.IntegrityError, match=r"model\.pt has sha256 [0-9a-f]{64}, the manifest says"):
        inference.model_fn(str(model_dir))
    assert not marker.exists()


def test_manifest_naming_a_path_outside_the_payload_is_refused(model_dir: Path, tmp_path: Path) -> None:
    import shutil

    copy = Path(shutil.copytree(model_dir, tmp_path / "model"))
    manifest = json.loads((copy / PAYLOAD_MANIFEST).read_text())
    manifest["files"]["../outside"] = {"sha256": "0" * 64, "size": 1}
    (copy / PAYLOAD_MANIFEST).write_text(json.dumps(manifest))
    inference = load_inference(copy)
    with pytest.raises(inference.IntegrityError, match="outside the model folder"):
        inference.verify_payload(copy)
