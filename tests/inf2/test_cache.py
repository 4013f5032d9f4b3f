"""model.py's caches on the instance volume (split checkpoint, compiled graphs): their keys,
the atomic build, and the load in the serving precision. CPU only: no Neuron package."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from llm_contracts.manifest import write_manifest


def server_config(model_py: ModuleType, model_dir: Path, **props: str) -> Any:
    base = {"model_id": "model", "model_dir": str(model_dir), "dtype": "fp16", "tensor_parallel_degree": "8",
            "n_positions": "512", "batch_size": "4"}  # fmt: skip
    return model_py.ServerConfig.from_properties({**base, **props})


def bundle(root: Path, weights: bytes, *, manifest: bool = True) -> Path:
    """An unpacked bundle as the instance sees it: /opt/ml/model with the model in model/."""
    model = root / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"model_type": "opt"}))
    (model / "model.safetensors").write_bytes(weights)
    (root / "serving.properties").write_text("option.model_id=/opt/ml/model/model\n")
    if manifest:
        files = {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}
        write_manifest(root, "inf2-bundle", files)
    return root


def keys(model_py: ModuleType, config: Any, neuronx: str = "0.11.351") -> tuple[str, str]:
    return model_py.cache_keys(config, identity=model_py.model_identity(config), neuronx=neuronx)  # type: ignore[no-any-return]


@pytest.mark.parametrize("manifest", [True, False])
def test_other_weights_under_the_same_model_id_get_other_keys(
    model_py: ModuleType, tmp_path: Path, manifest: bool
) -> None:
    old = server_config(model_py, bundle(tmp_path / "old", b"weights v1", manifest=manifest))
    new = server_config(model_py, bundle(tmp_path / "new", b"weights v2", manifest=manifest))
    same = server_config(model_py, bundle(tmp_path / "same", b"weights v1", manifest=manifest))
    assert old.model_source.endswith("/model") and new.model_id == old.model_id
    split_old, graphs_old = keys(model_py, old)
    split_new, graphs_new = keys(model_py, new)
    assert split_old != split_new and graphs_old != graphs_new
    assert keys(model_py, same) == (split_old, graphs_old)
    assert keys(model_py, old) == (split_old, graphs_old)


def test_the_bundle_manifest_is_used_when_it_lists_the_model(model_py: ModuleType, tmp_path: Path) -> None:
    root = bundle(tmp_path / "b", b"weights")
    config = server_config(model_py, root)
    identity = model_py.model_identity(config)
    listed = json.loads((root / "manifest.json").read_text())["files"]
    assert identity == {
        "files": {name: listed[f"model/{name}"]["sha256"] for name in ("config.json", "model.safetensors")}
    }
    # Without the manifest the files are hashed on the spot, with the same result.
    (root / "manifest.json").unlink()
    assert model_py.model_identity(config) == identity


def test_every_setting_that_shapes_the_graphs_is_in_their_key(model_py: ModuleType, tmp_path: Path) -> None:
    root = bundle(tmp_path / "b", b"weights")
    split, graphs = keys(model_py, server_config(model_py, root))
    assert graphs.startswith("tp8-n512-b4-fp16-")
    for change in ({"tensor_parallel_degree": "4"}, {"n_positions": "1024"}, {"batch_size": "1"}):
        other_split, other_graphs = keys(model_py, server_config(model_py, root, **change))
        assert other_split == split and other_graphs != graphs, change
    bf16_split, bf16_graphs = keys(model_py, server_config(model_py, root, dtype="bf16"))
    assert bf16_split != split and bf16_graphs != graphs
    assert keys(model_py, server_config(model_py, root), neuronx="0.12.0") != (split, graphs)


def test_hub_models_are_keyed_by_id_and_revision(model_py: ModuleType, tmp_path: Path) -> None:
    def hub(**props: str) -> tuple[str, str]:
        return keys(model_py, server_config(model_py, tmp_path, **{"model_id": "facebook/opt-13b", **props}))

    assert model_py.model_identity(server_config(model_py, tmp_path, model_id="facebook/opt-13b")) == {
        "hub": "facebook/opt-13b",
        "revision": "main",
    }
    assert hub() == hub() and hub() != hub(model_id="facebook/opt-6.7b") and hub() != hub(revision="abc123")
    # A cache of the old fixed-name layout is never mistaken for an entry of the new one.
    assert "/" not in hub()[0] and "facebook" not in hub()[0]


def test_build_once_renames_then_marks_complete(model_py: ModuleType, tmp_path: Path) -> None:
    calls: list[Path] = []

    def build(folder: Path) -> None:
        calls.append(folder)
        assert folder.name.endswith(".partial")
        (folder / "graph.neff").write_bytes(b"neff")

    target = tmp_path / "graphs" / "key-a"
    assert model_py.build_once(target, build) == target
    assert model_py.is_complete(target) and (target / "graph.neff").read_bytes() == b"neff"
    assert not target.with_name("key-a.partial").exists()
    model_py.build_once(target, build)
    assert len(calls) == 1  # complete: reused, not rebuilt


def test_an_interrupted_build_is_not_treated_as_complete(model_py: ModuleType, tmp_path: Path) -> None:
    target = tmp_path / "split" / "key-a"

    def crash(folder: Path) -> None:
        (folder / "half-written.bin").write_bytes(b"x")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        model_py.build_once(target, crash)
    assert target.with_name("key-a.partial").is_dir() and not target.exists()
    assert not model_py.is_complete(target) and not model_py.is_complete(target.with_name("key-a.partial"))
    # A folder renamed but killed before its marker (or an old unmarked cache) is rebuilt too.
    target.mkdir()
    (target / "stale.bin").write_bytes(b"old")
    assert not model_py.is_complete(target)
    model_py.build_once(target, lambda folder: (folder / "good.bin").write_bytes(b"good"))
    assert sorted(p.name for p in target.iterdir()) == [".complete", "good.bin"]
    assert not target.with_name("key-a.partial").exists()


def test_a_new_entry_prunes_the_others(model_py: ModuleType, tmp_path: Path) -> None:
    parent = tmp_path / "split"
    old = model_py.build_once(parent / "old", lambda f: (f / "w").write_bytes(b"1"))
    model_py.build_once(parent / "new", lambda f: (f / "w").write_bytes(b"2"), prune=True)
    assert not old.exists() and [p.name for p in parent.iterdir()] == ["new"]
    # Reusing a complete entry removes nothing.
    model_py.build_once(parent / "other", lambda f: None)
    model_py.build_once(parent / "new", lambda f: None, prune=True)
    assert sorted(p.name for p in parent.iterdir()) == ["new", "other"]


@pytest.mark.parametrize(
    ("version", "keyword"),
    [("4.36.2", "torch_dtype"), ("4.41.0", "torch_dtype"), ("4.55.4", "torch_dtype"), ("4.56.0", "dtype"),
     ("4.57.0.dev0", "dtype"), ("5.0.0rc1", "dtype"), ("5.23.0", "dtype")],
)  # fmt: skip
def test_the_dtype_keyword_follows_the_transformers_version(model_py: ModuleType, version: str, keyword: str) -> None:
    assert model_py.dtype_argument(version) == keyword


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_the_model_loads_in_the_serving_precision(
    model_py: ModuleType, tiny_model_dir: Path, tmp_path: Path, dtype: str
) -> None:
    shutil.copytree(tiny_model_dir, tmp_path / "model")
    config = server_config(model_py, tmp_path, dtype=dtype)
    model = model_py.load_for_split(config)
    wanted = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    decoder = model.model.decoder
    for block in decoder.layers:
        assert block.self_attn.q_proj.weight.dtype == wanted and block.fc1.weight.dtype == wanted
        assert block.fc2.bias.dtype == wanted
        assert block.self_attn_layer_norm.weight.dtype == torch.float32
    assert model.lm_head.weight.dtype == wanted
    assert decoder.embed_positions.weight.dtype == torch.float32
