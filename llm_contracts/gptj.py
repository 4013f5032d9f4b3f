"""The GPT-J payload, as the builder writes it and the Hugging Face image's model server reads it.

The payload folder is what SageMaker puts in ``/opt/ml/model``. Multi Model Server 1.1.11,
which the image's toolkit starts on that folder, looks for a manifest of its own before it
loads anything (``ModelArchive.load`` in its front end): ``MAR-INF/MANIFEST.json`` if that
exists, else ``MANIFEST.json`` at the top, else the first file whose name equals
``MANIFEST.json`` ignoring case, at the top or one folder down (``findFile(dir, name, true)``).
A file found by that search is read as a version-0.1 manifest and, not being one, stops the
server (``LegacyManifest.migrate``: NullPointerException, "Model server stopped."). So the
payload's integrity manifest must never be named ``manifest.json``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import PurePosixPath

from llm_contracts import manifest

#: The payload's own list of files with their sha256 and size (the library's payload manifest,
#: llm_contracts.manifest); ``code/inference.py`` verifies every file against it before it
#: builds anything.
PAYLOAD_MANIFEST = manifest.PAYLOAD_MANIFEST
#: Multi Model Server's own manifest name, matched ignoring case.
MMS_MANIFEST = "MANIFEST.json"


def mms_manifest_lookalikes(relative_paths: Iterable[str]) -> list[str]:
    """The payload files that Multi Model Server 1.1.11 would read as its own manifest: those
    named ``MANIFEST.json`` in any case, at the top of the model folder or one folder down,
    unless the payload carries MMS's real ``MAR-INF/MANIFEST.json``."""
    paths = [PurePosixPath(p) for p in relative_paths]
    if PurePosixPath("MAR-INF", MMS_MANIFEST) in paths:
        return []
    return sorted(str(p) for p in paths if len(p.parts) <= 2 and p.name.lower() == MMS_MANIFEST.lower())
