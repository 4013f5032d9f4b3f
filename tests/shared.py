"""What the pytest-xdist workers of one run make once between them: a build that every worker
would otherwise repeat for itself (each is a session of its own), made by the first to ask,
under a file lock in the run's shared temporary folder, and read by the others."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """The folder `name` that `make(folder)` fills, made once a run: by this session alone
    without workers, else by the first worker to ask (the others wait for it). A `make` that
    fails leaves no folder, so the next worker to ask fails the same way instead of reading a
    part. The folder is shared: whoever reads it must not change it."""
    base = tmp_path_factory.getbasetemp()
    # A worker's base is `popen-gwN` under the run's own folder, which the workers share.
    shared = base.parent if base.name.startswith("popen-gw") else base
    folder = shared / f"shared-{name}"
    with FileLock(str(folder) + ".lock"):
        if not folder.exists():
            partial = shared / f"shared-{name}.partial"
            shutil.rmtree(partial, ignore_errors=True)  # what a failed make left
            partial.mkdir()
            make(partial)
            partial.rename(folder)
    return folder
