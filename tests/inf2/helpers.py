"""Helpers of the inf2 tests."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def builder_args(out: Path, *extra: str) -> argparse.Namespace:
    from artifacts_builder.__main__ import build_parser

    return build_parser().parse_args(["inf2", "--out", str(out), *extra])


def stand_in_artifacts(root: Path) -> None:
    """The other stacks only hash and upload their payloads: small stand-ins do."""
    from tests.infra.helpers import make_artifacts

    make_artifacts(root, components=("gpt2", "gptj"))


def cdk_context(artifacts: Path, **overrides: Any) -> dict[str, Any]:
    context: dict[str, Any] = json.loads((ROOT / "cdk.json").read_text())["context"]
    return {**context, "project.artifacts_dir": str(artifacts), **overrides}


#: A commit of a made-up hub repository (40 hex digits, as the hub's).
COMMIT = "0123456789abcdef0123456789abcdef01234567"
#: Files a hub repository holds besides the model's own, which the builder must leave out.
DECOYS = {"README.md": b"# model card\n", "tf_model.h5": b"tf", "flax_model.msgpack": b"flax", ".gitattributes": b"*"}


class FakeHub:
    """The two calls the builder makes of huggingface_hub's HfApi, answered from a local model
    folder as the hub answers for one commit: the metadata through huggingface_hub's own
    ModelInfo (weights are Git LFS objects named by their sha256; other files are plain Git blobs,
    for which the hub gives no sha256), and downloads from the folder, recorded."""

    def __init__(
        self, model: Path, *, into: Path, repo: str, commit: str = COMMIT, resolves_to: str | None = None
    ) -> None:
        """The repository holds a copy of `model` (made in `into`) and the DECOYS."""
        import shutil

        self.folder = Path(shutil.copytree(model, into / "hub-repository"))
        self.repo, self.commit, self.resolves_to = repo, commit, resolves_to or commit
        self.downloads: list[str] = []
        for name, data in DECOYS.items():
            (self.folder / name).write_bytes(data)

    def model_info(self, repo_id: str, *, revision: str | None = None, files_metadata: bool = False) -> Any:
        import hashlib

        from huggingface_hub.hf_api import ModelInfo

        assert (repo_id, revision, files_metadata) == (self.repo, self.commit, True)
        siblings = []
        for path in sorted(p for p in self.folder.rglob("*") if p.is_file()):
            data = path.read_bytes()
            entry: dict[str, Any] = {"rfilename": path.relative_to(self.folder).as_posix(), "size": len(data),
                                     "blobId": hashlib.sha1(data, usedforsecurity=False).hexdigest()}  # fmt: skip
            if path.suffix in (".safetensors", ".bin", ".h5", ".msgpack"):
                entry["lfs"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "pointerSize": 134}
            siblings.append(entry)
        return ModelInfo(id=repo_id, sha=self.resolves_to, siblings=siblings)

    def hf_hub_download(self, repo_id: str, filename: str, *, revision: str | None = None) -> str:
        # A branch's files are downloaded at the commit it resolved to, as the llm builder does.
        assert repo_id == self.repo and revision in (self.commit, self.resolves_to)
        self.downloads.append(filename)
        return str(self.folder / filename)


def hub_cache(cache: Path, *, repo: str, commit: str, files: dict[str, Path]) -> Path:
    """A Hugging Face hub cache holding `files` of `repo` at `commit`, laid out as huggingface_hub
    lays it out (snapshots/<commit>/<name> links to blobs/<sha256>); returns the snapshot folder."""
    import hashlib
    import shutil

    storage = cache / f"models--{repo.replace('/', '--')}"
    snapshot = storage / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (storage / "blobs").mkdir()
    for name, source in files.items():
        blob = storage / "blobs" / hashlib.sha256(source.read_bytes()).hexdigest()
        shutil.copyfile(source, blob)
        (snapshot / name).symlink_to(Path("..", "..", "blobs", blob.name))
    return snapshot
