"""`serve` puts the image's CUDA compat libraries first exactly when the host driver is older
and CUDA actually starts through them; otherwise it leaves the library path alone and says why.

The probe runs for real: a stand-in libcuda, compiled here, answers `cuInit` like the real one
on a host where forward compatibility works (0) or is refused (804)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from serving.gpt2 import cuda_compat

DRIVER_470 = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.256.02  Thu May  2 14:37:44 UTC 2024\nGCC version: 7.3\n"
)
DRIVER_535_OPEN = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.216.03  Release Build  "
    "(dvs-builder@U16-I3-B03-4-3)  Thu Oct 24 2024\nGCC version: 10.5\n"
)
COMPAT_VERSION = "570.86.10"
needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler to build a stand-in libcuda")


def driver(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "version"
    path.write_text(text)
    return path


def compat_root(tmp_path: Path, *, sub: str = "lib.real", cu_init: int | None = None) -> Path:
    """An image's compat folder, laid out as NGC images keep it (compat/lib.real/). With
    `cu_init`, its libcuda is a real shared object whose cuInit returns that code."""
    root = tmp_path / "compat"
    folder = root / sub if sub else root
    folder.mkdir(parents=True)
    library = folder / f"libcuda.so.{COMPAT_VERSION}"
    if cu_init is None:
        library.write_bytes(b"")
    else:
        source = tmp_path / "cuda.c"
        source.write_text(f"int cuInit(unsigned int flags) {{ (void)flags; return {cu_init}; }}\n")
        subprocess.run(["cc", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    (folder / "libcuda.so.1").symlink_to(library.name)
    return root


def never_probe(path: str) -> str | None:
    raise AssertionError(f"probed {path} though nothing needed it")


@needs_cc
def test_an_older_driver_gets_the_compat_libraries_when_cuda_starts_through_them(tmp_path: Path) -> None:
    root = compat_root(tmp_path, cu_init=0)
    decision = cuda_compat.decide({"LD_LIBRARY_PATH": "/usr/lib"}, root=root, driver_file=driver(tmp_path, DRIVER_470))
    assert decision.library_path == f"{root / 'lib.real'}:/usr/lib"
    assert decision.message and "older than the image's CUDA" in decision.message


@needs_cc
def test_compat_refused_on_a_470_host_names_the_ami_fix(tmp_path: Path) -> None:
    root = compat_root(tmp_path, cu_init=804)  # CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE
    decision = cuda_compat.decide({}, root=root, driver_file=driver(tmp_path, DRIVER_470))
    assert decision.library_path is None
    assert decision.message is not None
    assert decision.message.startswith("error:")
    assert "cuInit returned 804" in decision.message
    assert "470.256.02" in decision.message and "gpt2.inference_ami_version" in decision.message


@needs_cc
def test_compat_refused_on_a_535_host_keeps_the_host_driver(tmp_path: Path) -> None:
    """CUDA 12 runs on 535 under minor-version compatibility: the refusal is no error there."""
    root = compat_root(tmp_path, cu_init=804)
    decision = cuda_compat.decide({}, root=root, driver_file=driver(tmp_path, DRIVER_535_OPEN))
    assert decision.library_path is None
    assert decision.message and "minor-version compatibility" in decision.message
    assert not decision.message.startswith("error:")


def test_a_library_that_is_no_libcuda_is_refused_without_crashing(tmp_path: Path) -> None:
    root = compat_root(tmp_path)  # an empty file where libcuda should be
    decision = cuda_compat.decide({}, root=root, driver_file=driver(tmp_path, DRIVER_470))
    assert decision.library_path is None
    assert decision.message and "did not load" in decision.message


@pytest.mark.parametrize("version", [COMPAT_VERSION, "575.51.03"])
def test_a_driver_as_new_as_the_compat_libraries_is_left_alone(tmp_path: Path, version: str) -> None:
    root = compat_root(tmp_path)
    text = DRIVER_470.replace("470.256.02", version)
    decision = cuda_compat.decide({}, root=root, driver_file=driver(tmp_path, text), run_probe=never_probe)
    assert decision == cuda_compat.Decision(None)


def test_no_gpu_changes_nothing(tmp_path: Path) -> None:
    root = compat_root(tmp_path)
    decision = cuda_compat.decide({}, root=root, driver_file=tmp_path / "missing", run_probe=never_probe)
    assert decision == cuda_compat.Decision(None)


def test_an_entrypoint_that_already_chose_is_respected(tmp_path: Path) -> None:
    root = compat_root(tmp_path)
    (root / "lib").symlink_to("lib.real")  # what NGC's entrypoint makes when it enables compat
    environ = {"LD_LIBRARY_PATH": f"/usr/lib:{root / 'lib'}"}
    decision = cuda_compat.decide(environ, root=root, driver_file=driver(tmp_path, DRIVER_470), run_probe=never_probe)
    assert decision == cuda_compat.Decision(None)


def test_a_compat_entry_that_holds_no_library_does_not_count(tmp_path: Path) -> None:
    """An image's ENV may list compat/lib, which only NGC's entrypoint (not ours) creates."""
    root = compat_root(tmp_path)
    environ = {"LD_LIBRARY_PATH": f"{root / 'lib'}:/usr/lib"}
    decision = cuda_compat.decide(
        environ, root=root, driver_file=driver(tmp_path, DRIVER_470), run_probe=lambda path: None
    )
    assert decision.library_path == f"{root / 'lib.real'}:{root / 'lib'}:/usr/lib"


def test_a_probe_that_cannot_start_is_a_refusal_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_compat.sys, "executable", str(tmp_path / "no-python-here"))
    assert (failure := cuda_compat.probe("/nowhere")) is not None
    assert failure.startswith("the probe could not run")


def test_no_compat_libraries_is_an_error_only_where_the_host_cannot_run_cuda_12(tmp_path: Path) -> None:
    empty = tmp_path / "none"
    old = cuda_compat.decide({}, root=empty, driver_file=driver(tmp_path, DRIVER_470), run_probe=never_probe)
    assert old.library_path is None and old.message and old.message.startswith("error:")
    recent = cuda_compat.decide({}, root=empty, driver_file=driver(tmp_path, DRIVER_535_OPEN), run_probe=never_probe)
    assert recent == cuda_compat.Decision(None)


@pytest.mark.parametrize("sub", ["", "lib.real"])
def test_both_image_layouts_are_found(tmp_path: Path, sub: str) -> None:
    root = compat_root(tmp_path, sub=sub)
    assert cuda_compat.find_compat_dir(root) == (root / sub if sub else root)
    assert cuda_compat.compat_driver_version(root / sub if sub else root) == (570, 86, 10)


def test_the_image_build_fails_without_compat_libraries(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "serving.gpt2.cuda_compat", "--require", "--root"]
    missing = subprocess.run([*command, str(tmp_path / "none")], capture_output=True, text=True)
    assert missing.returncode == 1
    assert "no CUDA compat libcuda.so.1" in missing.stderr and "lib.real" in missing.stderr
    present = subprocess.run([*command, str(compat_root(tmp_path))], capture_output=True, text=True)
    assert present.returncode == 0, present.stderr
    assert present.stdout.strip().endswith("compat/lib.real")
