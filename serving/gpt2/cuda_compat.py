"""CUDA forward compatibility for a bring-your-own container on SageMaker.

The image's CUDA (12.8) is newer than the driver of SageMaker's default inference AMIs (470 on
g4dn/g5/p4d, 535 on g6/p5). Since NVIDIA Container Toolkit 1.17.4 the host no longer mounts the
image's CUDA compatibility libraries, so the container must put them first on the library path
itself, and only when the host driver is older than they are (AWS: "Updating inference
containers to comply with the NVIDIA Container Toolkit"). Without this, CUDA fails to start on
a 470 host and the server would quietly fall back to the CPU.

A version comparison alone is not enough: forward compatibility works only on data-center GPUs
and on some driver branches, and elsewhere the compat libcuda fails to initialise (error 803
or 804) where the host's own driver would have run CUDA 12 under minor-version compatibility
(driver >= 525). So, as NVIDIA's own container entrypoint does, the compat libraries are used
only after `cuInit` succeeded through them in a child process.

    python3 -m serving.gpt2.cuda_compat --require   # the image build: fail if the image has none
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

COMPAT_ROOT = Path("/usr/local/cuda/compat")
#: Where images keep the compat libcuda: CUDA's own images directly in compat/, NGC images (the
#: TensorRT base) in compat/lib.real/, which NGC's entrypoint (not ours) links as compat/lib.
COMPAT_SUBDIRS = ("", "lib.real", "lib")
DRIVER_FILE = Path("/proc/driver/nvidia/version")
#: CUDA 12.x runs on an older driver of at least this branch without compat libraries.
MINOR_VERSION_COMPAT_BRANCH = 525
# The proprietary module says "Kernel Module  470.256.02", the open one "Open Kernel Module for
# x86_64  570.86.10".
_DRIVER = re.compile(r"^NVRM.*?Kernel Module.*?\s([0-9]+(?:\.[0-9]+)+)\b", re.MULTILINE)
_PROBE = "import ctypes; print(int(ctypes.CDLL('libcuda.so.1').cuInit(0)))"
PROBE_TIMEOUT_S = 60


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def host_driver(driver_file: Path = DRIVER_FILE) -> str | None:
    """The host's driver version as it prints it (470.256.02), or None without an NVIDIA driver."""
    try:
        match = _DRIVER.search(driver_file.read_text())
    except OSError:  # no NVIDIA driver on this host: nothing to do
        return None
    return match.group(1) if match else None


def find_compat_dir(root: Path = COMPAT_ROOT) -> Path | None:
    return next((root / sub for sub in COMPAT_SUBDIRS if (root / sub / "libcuda.so.1").exists()), None)


def compat_driver_version(compat_dir: Path) -> tuple[int, ...] | None:
    """The driver version the compat libcuda stands in for: libcuda.so.1 -> libcuda.so.570.86.10."""
    link = compat_dir / "libcuda.so.1"
    try:
        target = link.readlink().name if link.is_symlink() else link.resolve(strict=True).name
    except OSError:
        return None
    version = target.removeprefix("libcuda.so.")
    return _version(version) if version != target else None


def probe(library_path: str) -> str | None:
    """None when `cuInit` succeeds in a child process whose loader searches `library_path` first
    (a failing or crashing libcuda must not take the server with it), else why it did not."""
    env = {**os.environ, "LD_LIBRARY_PATH": library_path}
    command = [sys.executable, "-c", _PROBE]
    try:
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"cuInit did not return within {PROBE_TIMEOUT_S} s"
    except OSError as exc:  # the interpreter itself could not start: say so, do not crash `serve`
        return f"the probe could not run ({exc})"
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        return f"libcuda.so.1 did not load ({lines[-1] if lines else f'exit status {result.returncode}'})"
    code = result.stdout.strip()
    return None if code == "0" else f"cuInit returned {code}"


@dataclass(frozen=True)
class Decision:
    #: The LD_LIBRARY_PATH the servers need, or None to leave it as it is.
    library_path: str | None
    #: What `serve` logs, or None when there is nothing to say.
    message: str | None = None


def _fix(driver: str) -> str:
    return (
        f"the host's NVIDIA driver {driver} cannot run the image's CUDA 12 and the server would fall back to "
        "the CPU: set gpt2.inference_ami_version to an AMI with a newer driver (e.g. "
        "al2-ami-sagemaker-inference-gpu-3-1, driver 550)"
    )


def decide(
    environ: Mapping[str, str],
    *,
    root: Path = COMPAT_ROOT,
    driver_file: Path = DRIVER_FILE,
    run_probe: Callable[[str], str | None] = probe,
) -> Decision:
    driver = host_driver(driver_file)
    if driver is None:
        return Decision(None)
    host = _version(driver)
    current = environ.get("LD_LIBRARY_PATH", "")
    chosen = [Path(e) for e in current.split(":") if e and Path(e).is_relative_to(root)]
    if any((folder / "libcuda.so.1").exists() for folder in chosen):
        return Decision(None)  # an entrypoint already put compat libraries first
    compat_dir = find_compat_dir(root)
    compat = compat_driver_version(compat_dir) if compat_dir else None
    if compat_dir is None or compat is None:
        return Decision(None, None if host[0] >= MINOR_VERSION_COMPAT_BRANCH else f"error: {_fix(driver)}")
    if host >= compat:
        return Decision(None)
    candidate = f"{compat_dir}:{current}" if current else str(compat_dir)
    failure = run_probe(candidate)
    if failure is None:
        message = f"the host's NVIDIA driver {driver} is older than the image's CUDA: LD_LIBRARY_PATH={candidate}"
        return Decision(candidate, message)
    refused = f"CUDA's compat libraries in {compat_dir} do not start on this host ({failure})"
    if host[0] >= MINOR_VERSION_COMPAT_BRANCH:
        return Decision(None, f"{refused}; the host's own driver runs CUDA 12 under minor-version compatibility")
    return Decision(None, f"error: {refused}: {_fix(driver)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="CUDA forward compatibility for the GPT-2 container")
    parser.add_argument("--require", action="store_true", help="exit 1 unless the image holds compat libraries")
    parser.add_argument("--root", type=Path, default=COMPAT_ROOT)
    args = parser.parse_args(argv)
    folder = find_compat_dir(args.root)
    if args.require and (folder is None or compat_driver_version(folder) is None):
        searched = ", ".join(str(args.root / sub) for sub in COMPAT_SUBDIRS)
        print(
            f"no CUDA compat libcuda.so.1 -> libcuda.so.<driver> in {searched}: the image could not run on "
            "SageMaker's default 470 driver; install the base image's cuda-compat package or update COMPAT_SUBDIRS",
            file=sys.stderr,
        )
        return 1
    print(folder or "none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
