"""A hub model on the instance: serving/inf2/model.py downloads the files the bundle lists at the
bundle's commit, through huggingface_hub's own snapshot_download (here from a local hub cache,
offline: the hub cannot be reached), and checks each file's size and sha256 before it loads one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from llm_contracts.inf2 import HUB_FILES
from llm_contracts.manifest import file_entry

from .helpers import COMMIT, hub_cache

REPO = "acme/tiny-opt"
WEIGHTS = "model.safetensors"


@pytest.fixture
def hub(tiny_model_dir: Path, tmp_path: Path) -> dict[str, Any]:
    """A bundle that lists the tiny model's files for REPO at COMMIT, and a hub cache holding them."""
    names = sorted(p.name for p in tiny_model_dir.iterdir() if p.is_file())
    bundle = tmp_path / "opt-ml-model"
    bundle.mkdir()
    listed = {name: file_entry(tiny_model_dir / name) for name in names}
    (bundle / HUB_FILES).write_text(json.dumps({"repo": REPO, "revision": COMMIT, "files": listed}))
    snapshot = hub_cache(tmp_path / "hub", repo=REPO, commit=COMMIT, files={n: tiny_model_dir / n for n in names})
    return {"bundle": bundle, "cache": tmp_path / "hub", "snapshot": snapshot, "names": names}


def config(model_py: ModuleType, bundle: Path, **props: str) -> Any:
    return model_py.ServerConfig.from_properties(
        {"model_id": REPO, "revision": COMMIT, "model_dir": str(bundle), "dtype": "fp16", **props}
    )


class Offline:
    """huggingface_hub's snapshot_download from the local cache, offline; records what it is asked."""

    def __init__(self, cache: Path) -> None:
        self.cache = cache
        self.asked: list[list[str]] = []

    def __call__(self, repo_id: str, revision: str, names: Sequence[str]) -> str:
        from huggingface_hub import snapshot_download

        self.asked.append(list(names))
        return str(snapshot_download(repo_id=repo_id, revision=revision, allow_patterns=list(names),
                                     cache_dir=self.cache, local_files_only=True))  # fmt: skip


def test_the_listed_files_are_downloaded_checked_and_loaded(model_py: ModuleType, hub: dict[str, Any]) -> None:
    download = Offline(hub["cache"])
    cfg = config(model_py, hub["bundle"])
    folder = model_py.model_files(cfg, weights=True, download=download)
    assert Path(folder) == hub["snapshot"]
    # The tokenizer's load asks for no weights.
    assert model_py.model_files(cfg, weights=False, download=download) == folder
    assert download.asked == [hub["names"], [n for n in hub["names"] if n != WEIGHTS]]
    model = model_py.load_for_split(cfg, folder)
    assert model.config.num_attention_heads == 24


@pytest.mark.parametrize("damage", ["changed", "truncated"])
def test_a_file_that_differs_is_refused_and_deleted(model_py: ModuleType, hub: dict[str, Any], damage: str) -> None:
    link = hub["snapshot"] / WEIGHTS
    blob = link.resolve()
    data = blob.read_bytes()
    blob.write_bytes(data[:-1] + bytes([data[-1] ^ 1]) if damage == "changed" else data[:-10])
    with pytest.raises(model_py.SettingsError) as err:
        model_py.model_files(config(model_py, hub["bundle"]), weights=True, download=Offline(hub["cache"]))
    message = str(err.value)
    expected = json.loads((hub["bundle"] / HUB_FILES).read_text())["files"][WEIGHTS]
    assert message.startswith(f"{WEIGHTS} of {REPO}@{COMMIT} has ") and expected["sha256"] in message
    assert ("sha256 " if damage == "changed" else f"{len(data) - 10} bytes") in message
    # Gone from the cache, link and object: the next load downloads it again instead of failing for good.
    assert not link.exists() and not link.is_symlink() and not blob.exists()


def test_a_listed_file_that_was_not_downloaded_is_refused(model_py: ModuleType, hub: dict[str, Any]) -> None:
    (hub["snapshot"] / "config.json").unlink()
    with pytest.raises(model_py.SettingsError, match=r"^config.json of acme/tiny-opt@0123.* was not downloaded"):
        model_py.model_files(config(model_py, hub["bundle"]), weights=False, download=Offline(hub["cache"]))


@pytest.mark.parametrize(
    ("props", "listing", "refused"),
    [
        ({"revision": "main"}, None, r"option.revision='main' is invalid: allowed is the 40-character commit"),
        ({}, "missing", r"hub-files.json is missing: acme/tiny-opt .* is served only with the sha256 of its files"),
        ({}, {"repo": REPO, "revision": "f" * 40}, r"lists acme/tiny-opt@ffff.*, not acme/tiny-opt"),
    ],
)
def test_a_hub_model_without_its_commit_and_files_is_refused_before_loading(
    model_py: ModuleType, hub: dict[str, Any], props: dict[str, str], listing: Any, refused: str
) -> None:
    if listing == "missing":
        (hub["bundle"] / HUB_FILES).unlink()
    elif listing is not None:
        (hub["bundle"] / HUB_FILES).write_text(json.dumps({**listing, "files": {}}))
    loads: list[Any] = []
    properties = {"model_id": REPO, "revision": COMMIT, "model_dir": str(hub["bundle"]), **props}
    with pytest.raises(model_py.SettingsError, match=refused):
        model_py.load_service(properties, loader=loads.append)
    assert loads == []


def test_the_real_download_asks_huggingface_hub_for_the_listed_files(
    model_py: ModuleType, hub: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import huggingface_hub

    asked: list[dict[str, Any]] = []

    def snapshot_download(**kwargs: Any) -> str:
        asked.append(kwargs)
        return str(hub["snapshot"])

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    model_py.model_files(config(model_py, hub["bundle"]), weights=False)
    assert asked == [{"repo_id": REPO, "revision": COMMIT, "allow_patterns": [n for n in hub["names"] if n != WEIGHTS]}]
