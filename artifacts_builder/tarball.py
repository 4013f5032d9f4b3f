"""Reproducible ``.tar.gz`` archives: the same files give the same bytes, so the same sha256.

An S3 asset's hash is its archive's sha256: an archive that changes on every rebuild (file
times, the builder's uid and user name, directory order, the gzip header's timestamp)
replaces the model and restarts the endpoint although nothing changed. Here members are
sorted by name, every time is 0, owners are root with no names, modes are 0644 (0755 for
folders), and the gzip header carries mtime 0 and no file name. Standard library only.
"""

from __future__ import annotations

import gzip
import os
import tarfile
from collections.abc import Callable
from pathlib import Path


def normalize(member: tarfile.TarInfo) -> tarfile.TarInfo:
    """A `tarfile` filter: nothing of the build machine, the builder or the time."""
    member.mtime = 0
    member.uid = member.gid = 0
    member.uname = member.gname = ""
    member.mode = 0o755 if member.isdir() else 0o644
    member.pax_headers = {}
    return member


def pack_directory(
    source: Path,
    tar_path: Path,
    *,
    compresslevel: int = 1,
    directories: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Write `source`'s files (and, with `directories`, its folders) to `tar_path`, reproducibly.

    The archive is written next to its final name and renamed, so a reader never sees half a
    file. `progress` is called with (bytes done, bytes in all) after each file.
    """
    entries = sorted(
        (p for p in source.rglob("*") if p.is_file() or (directories and p.is_dir())),
        key=lambda p: p.relative_to(source).as_posix(),
    )
    total = sum(p.stat().st_size for p in entries if p.is_file())
    done = 0
    tmp = tar_path.with_name(tar_path.name + ".partial")
    try:
        with (
            open(tmp, "wb") as raw,
            # tarfile's own "w:gz" stamps the current time and the file name into the gzip header.
            gzip.GzipFile(filename="", mode="wb", compresslevel=compresslevel, fileobj=raw, mtime=0) as gz,
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
        ):
            for path in entries:
                tar.add(path, arcname=path.relative_to(source).as_posix(), recursive=False, filter=normalize)
                if path.is_file():
                    done += path.stat().st_size
                    if progress is not None:
                        progress(done, total)
        os.replace(tmp, tar_path)
    finally:
        tmp.unlink(missing_ok=True)
    return tar_path
