"""`serve` puts the image's CUDA compat libraries first exactly when the host driver is older."""

from __future__ import annotations

from pathlib import Path

import pytest

from serving.gpt2 import cuda_compat

DRIVER_470 = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.256.02  Thu May  2 14:37:44 UTC 2024\nGCC version: 7.3\n"
)


@pytest.fixture
def compat_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "compat"
    folder.mkdir()
    (folder / "libcuda.so.570.86.10").write_bytes(b"")
    (folder / "libcuda.so.1").symlink_to("libcuda.so.570.86.10")
    return folder


def driver(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "version"
    path.write_text(text)
    return path


def test_an_older_host_driver_gets_the_compat_libraries_first(tmp_path: Path, compat_dir: Path) -> None:
    path = cuda_compat.library_path(
        {"LD_LIBRARY_PATH": "/usr/lib"}, compat_dir=compat_dir, driver_file=driver(tmp_path, DRIVER_470)
    )
    assert path == f"{compat_dir}:/usr/lib"
    assert cuda_compat.library_path({}, compat_dir=compat_dir, driver_file=driver(tmp_path, DRIVER_470)) == str(
        compat_dir
    )


@pytest.mark.parametrize(
    "text", [DRIVER_470.replace("470.256.02", "570.86.10"), DRIVER_470.replace("470.256.02", "575.51.03")]
)
def test_a_driver_as_new_as_the_compat_libraries_is_left_alone(tmp_path: Path, compat_dir: Path, text: str) -> None:
    assert cuda_compat.library_path({}, compat_dir=compat_dir, driver_file=driver(tmp_path, text)) is None


def test_no_gpu_or_no_compat_libraries_changes_nothing(tmp_path: Path, compat_dir: Path) -> None:
    assert cuda_compat.library_path({}, compat_dir=compat_dir, driver_file=tmp_path / "missing") is None
    assert cuda_compat.library_path({}, compat_dir=tmp_path / "none", driver_file=driver(tmp_path, DRIVER_470)) is None
    # Already first: not added twice.
    already = {"LD_LIBRARY_PATH": f"{compat_dir}:/usr/lib"}
    assert cuda_compat.library_path(already, compat_dir=compat_dir, driver_file=driver(tmp_path, DRIVER_470)) is None
