"""The artifacts manifest: what was built, its sha256 and size, and with what.

Each component writes ``<out>/<component>/manifest.json``::

    {"schema": 1, "component": "gpt2", "files": {"model.tar.gz": {"sha256": "...", "size": 123}},
     "versions": {"torch": "2.13.0", ...}, ...component-specific keys}

The stacks read it to give S3 assets a precomputed hash (a multi-GB file is then never
re-read at synthesis), and serving code reads the manifest inside a payload to verify
every file before loading it. Standard library only: synthesis imports this module.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

SCHEMA = 1
MANIFEST_NAME = "manifest.json"
_CHUNK = 8 * 1024 * 1024


class ManifestError(RuntimeError):
    pass


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def file_entry(path: Path) -> dict[str, Any]:
    return {"sha256": sha256_file(path), "size": path.stat().st_size}


def library_versions(names: Iterable[str]) -> dict[str, str | None]:
    """Installed versions, read from package metadata (nothing is imported)."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def write_manifest(
    directory: Path,
    component: str,
    files: Mapping[str, Path] | Iterable[Path],
    *,
    known: Mapping[str, Mapping[str, Any]] | None = None,
    name: str = MANIFEST_NAME,
    **extra: Any,
) -> Path:
    """Hash `files` (relative names are the keys), add the `known` entries (hashed while
    they were written: a multi-GB file is not read twice) and write the manifest `name`
    atomically."""
    items = files.items() if isinstance(files, Mapping) else ((p.name, p) for p in files)
    entries = {name: file_entry(Path(path)) for name, path in items}
    entries.update({name: dict(entry) for name, entry in (known or {}).items()})
    manifest = {
        "schema": SCHEMA,
        "component": component,
        "files": dict(sorted(entries.items())),
        **extra,
    }
    target = directory / name
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, target)
    return target


def read_manifest(directory: Path, name: str = MANIFEST_NAME) -> dict[str, Any]:
    """The manifest `name` in `directory` (a payload folder names its own: llm_contracts.gptj)."""
    path = directory / name
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise ManifestError(f"{path} does not exist: build the artifacts first (python -m artifacts_builder)") from None
    except ValueError as exc:
        raise ManifestError(f"{path} is not valid JSON ({exc}): rebuild the artifacts") from None
    if manifest.get("schema") != SCHEMA or not isinstance(manifest.get("files"), dict):
        raise ManifestError(f"{path} has schema {manifest.get('schema')!r}, expected {SCHEMA}: rebuild the artifacts")
    return manifest  # type: ignore[no-any-return]


def entry_for(path: Path) -> dict[str, Any]:
    """The manifest entry of `path`, from the manifest in its folder. Checks the size only
    (cheap), so that a stale manifest is caught without reading a multi-GB file."""
    manifest = read_manifest(path.parent)
    entry = manifest["files"].get(path.name)
    if entry is None:
        raise ManifestError(f"{path.parent / MANIFEST_NAME} lists no {path.name}: rebuild the artifacts")
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ManifestError(f"{path} does not exist: build the artifacts first (python -m artifacts_builder)") from None
    if size != entry["size"]:
        raise ManifestError(
            f"{path} is {size} bytes but its manifest says {entry['size']}: the file changed after the "
            "manifest was written; rebuild the artifacts"
        )
    return entry  # type: ignore[no-any-return]


def verify_files(directory: Path, manifest: Mapping[str, Any]) -> None:
    """Check every file the manifest lists against its sha256; raise on the first mismatch."""
    for name, entry in manifest["files"].items():
        path = directory / name
        if not path.is_file():
            raise ManifestError(f"{path} is listed in the manifest but missing")
        actual = sha256_file(path)
        if actual != entry["sha256"]:
            raise ManifestError(
                f"{path} has sha256 {actual}, the manifest says {entry['sha256']}: the file was altered or "
                "truncated; refusing to load it"
            )
