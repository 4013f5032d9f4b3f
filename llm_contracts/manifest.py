"""The artifacts manifest and the payload manifest: what a folder holds, its sha256 and size.

Each component of the artifacts builder writes ``<out>/<component>/manifest.json``::

    {"schema": 1, "component": "gpt2", "files": {"model.tar.gz": {"sha256": "...", "size": 123}},
     "versions": {"torch": "2.13.0", ...}, ...component-specific keys}

The stacks read it to give S3 assets a precomputed hash (a multi-GB file is then never
re-read at synthesis), and serving code reads the manifest inside a payload to verify
every file before loading it. Standard library only: synthesis imports this module.

**The payload manifest** (:data:`PAYLOAD_MANIFEST`, ``payload-manifest.json``) is the same
format at the top of a model folder that ``llm_inference_cdk.S3PrefixModelData`` ships
uncompressed to S3, and the library's contract for any such folder, whoever builds it:

* ``schema``: ``1``;
* ``component``: a free label of what built it (:func:`write_payload_manifest` writes
  ``"payload"``; the artifacts builder ``"gptj-payload"``);
* ``files``: every file to ship, by its path relative to the folder (``/``-separated, no
  ``.``, ``..`` or empty segments, at most 5 GB each: one S3 CopyObject), each
  ``{"sha256": "<64 hex digits>", "size": <bytes>}``; the manifest itself is not listed.

Other keys are kept and ignored. :func:`write_payload_manifest` writes one for a folder.
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
#: The payload manifest's file name in a model folder (see the module's docstring).
PAYLOAD_MANIFEST = "payload-manifest.json"
#: What to do about a missing or stale artifacts manifest.
BUILD_ARTIFACTS = "build the artifacts first (python -m artifacts_builder)"
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


def read_manifest(directory: Path, name: str = MANIFEST_NAME, *, fix: str = BUILD_ARTIFACTS) -> dict[str, Any]:
    """The manifest `name` in `directory` (a payload folder names its own: :data:`PAYLOAD_MANIFEST`);
    ManifestError naming `fix` when it is missing or not a manifest."""
    path = directory / name
    try:
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        raise ManifestError(f"{path} does not exist: {fix}") from None
    except ValueError as exc:
        raise ManifestError(f"{path} is not valid JSON ({exc}): {fix}") from None
    if (
        not isinstance(manifest, dict)
        or manifest.get("schema") != SCHEMA
        or not isinstance(manifest.get("files"), dict)
    ):
        schema = manifest.get("schema") if isinstance(manifest, dict) else None
        raise ManifestError(
            f"{path} has schema {schema!r} or no files, expected schema {SCHEMA} with a files object: {fix}"
        )
    return manifest


def write_payload_manifest(folder: Path, *, name: str = PAYLOAD_MANIFEST, component: str = "payload") -> Path:
    """Write the payload manifest of `folder`: every file under it (but the manifest), hashed.
    Reads each file once; for multi-GB weights, hash them as they are written and pass their
    entries to :func:`write_manifest` as `known` instead."""
    files = {
        path.relative_to(folder).as_posix(): path
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name not in (name, f"{Path(name).stem}.json.tmp")
    }
    return write_manifest(folder, component, files, name=name)


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
