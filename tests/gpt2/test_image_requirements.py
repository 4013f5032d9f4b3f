"""The GPT-2 image's Python packages exist for the image's Python and platform, and its torch
is a CUDA build that the image's CUDA runs.

No Docker engine builds the image here, so the pins are checked the way `docker build` would
meet them: pip resolves serving/gpt2/requirements.txt for the base image's Python and glibc
against PyPI itself (this machine's own pip configuration, which adds a local wheel folder and
index, turned off). torch comes from PyTorch's index, unreachable from here: its pin is checked
against the published builds that serving/gpt2/requirements-torch.txt records with its sources.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IMAGE = ROOT / "serving" / "gpt2"
PYPI = "https://pypi.org/simple"
#: glibc of the base image's Ubuntu release (the manylinux tags its wheels may carry).
GLIBC_OF_UBUNTU = {"22.04": 35, "24.04": 39}


def base_image() -> dict[str, str]:
    """CUDA, Ubuntu and Python of the base image, from the Dockerfile's note above its FROM line."""
    text = (IMAGE / "Dockerfile").read_text()
    match = re.search(r"\(\d+\.\d+: TensorRT [\d.]+, CUDA (\d+\.\d+), Ubuntu ([\d.]+), Python (\d+\.\d+)\)", text)
    assert match, "the Dockerfile no longer says which CUDA, Ubuntu and Python its base image has"
    cuda, ubuntu, python = match.groups()
    return {"cuda": cuda, "ubuntu": ubuntu, "python": python}


def pins(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            name, _, version = line.partition("==")
            assert version, f"{path.name}: {line!r} is not pinned with =="
            found[_normalize(name)] = version
    return found


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def resolve(requirements: Path, python: str, glibc: int, report: Path) -> dict[str, str]:
    """What `pip install -r requirements` would install on the image, from PyPI alone."""
    platforms = [f"--platform=manylinux_2_{minor}_x86_64" for minor in range(glibc, 16, -1)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # no local wheel folder, extra index or constraints
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
         "--report", str(report), "--only-binary=:all:", f"--python-version={python}",
         "--implementation=cp", f"--abi=cp{python.replace('.', '')}", *platforms,
         "--platform=manylinux2014_x86_64", f"--index-url={PYPI}", "-r", str(requirements)],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, f"pip cannot resolve {requirements.name} for Python {python}:\n{proc.stderr[-3000:]}"
    installs = json.loads(report.read_text())["install"]
    return {_normalize(i["metadata"]["name"]): i["metadata"]["version"] for i in installs}


@pytest.mark.slow
def test_pypi_requirements_resolve_for_the_image_and_are_all_pinned(tmp_path: Path) -> None:
    image = base_image()
    resolved = resolve(
        IMAGE / "requirements.txt", image["python"], GLIBC_OF_UBUNTU[image["ubuntu"]], tmp_path / "report.json"
    )
    # Nothing pulls PyPI's torch (a CUDA 13 build) over the image's own.
    assert "torch" not in resolved and not any(name.endswith("-cu13") for name in resolved), sorted(resolved)
    assert resolved == pins(IMAGE / "requirements.txt")


def test_torch_is_a_published_cuda_build_the_image_runs() -> None:
    text = (IMAGE / "requirements-torch.txt").read_text()
    (version,) = re.findall(r"^torch==(\S+)$", text, flags=re.M)
    release, _, label = version.partition("+")
    assert re.fullmatch(r"cu\d+", label), f"torch=={version} has no CUDA label: pip would take PyPI's build"
    assert re.search(rf"^--index-url https://download\.pytorch\.org/whl/{label}$", text, flags=re.M)
    published = re.search(rf"^# Published CUDA builds of torch {re.escape(release)}: ((?:cu\d+ ?)+)\.", text, re.M)
    assert published, f"requirements-torch.txt records no published builds of torch {release}"
    assert label in published.group(1).split(), f"torch {release} has no {label} build: {published.group(1)}"
    major, minor = int(label[2:-1]), int(label[-1])
    image_major, image_minor = (int(n) for n in base_image()["cuda"].split("."))
    # A CUDA runtime runs on the same major's driver API of an equal or newer minor version.
    assert (major, minor) <= (image_major, image_minor) and major == image_major, (label, base_image()["cuda"])


def test_image_build_checks_the_cuda_of_its_torch() -> None:
    dockerfile = (IMAGE / "Dockerfile").read_text()
    label = re.findall(r"^torch==\S+\+cu(\d+)$", (IMAGE / "requirements-torch.txt").read_text(), flags=re.M)[0]
    assert f"torch.version.cuda == '{label[:-1]}.{label[-1]}'" in dockerfile
    assert dockerfile.index("requirements-torch.txt") < dockerfile.index("requirements.txt \\")
