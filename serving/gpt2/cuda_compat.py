"""CUDA forward compatibility for a bring-your-own container on SageMaker.

The image's CUDA (12.8) is newer than the driver of SageMaker's default inference AMIs (470 or
550 on g4dn/g5). Since NVIDIA Container Toolkit 1.17.4 the host no longer mounts the image's
CUDA compatibility libraries, so the container must put them first on the library path itself,
and only when the host driver is older than they are (AWS: "Updating inference containers to
comply with the NVIDIA Container Toolkit"). Without this, CUDA fails to start and the server
would quietly fall back to the CPU.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

COMPAT_DIR = Path("/usr/local/cuda/compat")
DRIVER_FILE = Path("/proc/driver/nvidia/version")
_DRIVER = re.compile(r"^NVRM.*Kernel Module\s+([0-9.]+)", re.MULTILINE)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def host_driver_version(driver_file: Path = DRIVER_FILE) -> tuple[int, ...] | None:
    try:
        match = _DRIVER.search(driver_file.read_text())
    except OSError:  # no NVIDIA driver on this host: nothing to do
        return None
    return _version(match.group(1)) if match else None


def compat_driver_version(compat_dir: Path = COMPAT_DIR) -> tuple[int, ...] | None:
    """The driver version the compat libcuda stands in for: libcuda.so.1 -> libcuda.so.570.86.10."""
    link = compat_dir / "libcuda.so.1"
    try:
        target = link.readlink().name if link.is_symlink() else link.resolve(strict=True).name
    except OSError:
        return None
    version = target.removeprefix("libcuda.so.")
    return _version(version) if version != target else None


def library_path(
    environ: Mapping[str, str], *, compat_dir: Path = COMPAT_DIR, driver_file: Path = DRIVER_FILE
) -> str | None:
    """The LD_LIBRARY_PATH the servers need, or None to leave it as it is."""
    host, compat = host_driver_version(driver_file), compat_driver_version(compat_dir)
    if host is None or compat is None or host >= compat:
        return None
    current = environ.get("LD_LIBRARY_PATH", "")
    if str(compat_dir) in current.split(":"):
        return None
    return f"{compat_dir}:{current}" if current else str(compat_dir)
