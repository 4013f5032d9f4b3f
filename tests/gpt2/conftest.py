"""Shared fixtures: one tiny GPT-2 build per session, and real `serve` processes over it."""

from __future__ import annotations

import tarfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from artifacts_builder import gpt2 as builder
from serving.gpt2.local import LocalServer, free_port
from tests.gpt2.helpers import Quantized
from tests.shared import made_once


def build(out: Path, *extra: str) -> int:
    """The builder's own parser and entry point (what `python -m artifacts_builder gpt2` runs)."""
    return builder.main(["--tiny", "--out", str(out), *extra])


@pytest.fixture(name="build")
def build_fixture() -> Callable[..., int]:
    return build


@pytest.fixture(name="free_port")
def free_port_fixture() -> Callable[[], int]:
    return free_port


def _build_tiny(out: Path) -> None:
    assert build(out) == 0


@pytest.fixture(scope="session")
def tiny_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny GPT-2 build, one for the run's workers (tests/shared.py): read, never changed."""
    return made_once(tmp_path_factory, "gpt2-tiny-artifacts", _build_tiny)


@pytest.fixture(scope="session")
def model_tar(tiny_out: Path) -> Path:
    return tiny_out / "gpt2" / "model.tar.gz"


def _extract(tar_path: Path, target: Path) -> Path:
    with tarfile.open(tar_path) as tar:
        tar.extractall(target, filter="data")
    return target


@pytest.fixture(scope="session")
def model_dir(model_tar: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _extract(model_tar, tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="session")
def quantized(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Quantized]:
    """The build for a `--cpu-precision` (and `--target-instance-type`, default: this host), made
    once per session, precision and target."""
    builds: dict[tuple[str, str | None], Quantized] = {}

    def get(precision: str, target: str | None = None) -> Quantized:
        if (precision, target) not in builds:
            name = f"{precision}-{target or 'host'}"
            out = tmp_path_factory.mktemp(f"artifacts-{name}")
            extra = ["--target-instance-type", target] if target else []
            assert build(out, "--cpu-precision", precision, *extra) == 0
            tar = out / "gpt2" / "model.tar.gz"
            model = _extract(tar, tmp_path_factory.mktemp(f"model-{name}"))
            builds[precision, target] = Quantized(out, tar, model)
        return builds[precision, target]

    return get


@pytest.fixture(scope="session")
def qemu_haswell() -> list[str]:
    """The command prefix that runs an x86-64 program on an emulated Haswell: AVX2, no AVX-512
    and no VNNI, the CPU of the SageMaker families whose int8 products saturate (qemu-user, a
    Debian package `make system-deps` installs)."""
    import platform
    import shutil

    if platform.machine() != "x86_64":
        pytest.skip("qemu-x86_64 -cpu Haswell emulates an x86-64 CPU for x86-64 programs")
    qemu = shutil.which("qemu-x86_64")
    assert qemu, "qemu-x86_64 is missing: `make system-deps` installs Debian's qemu-user"
    return [qemu, "-cpu", "Haswell-noTSX"]


#: (test, the branch it took) for each test whose outcome depends on this host's CPU.
_HOST_BRANCHES: list[tuple[str, str]] = []


@pytest.fixture(name="host_u8s8_saturates")
def host_u8s8_saturates_fixture(request: pytest.FixtureRequest) -> bool:
    """Whether this host's uint8 x int8 products saturate (no VNNI, AVX-VNNI or AMX on x86):
    what a test whose right answer depends on the CPU asserts by. The branch taken is listed at
    the end of the run."""
    from serving.gpt2.backends import CPUINFO, int8_dot_flags, u8s8_saturates

    saturates = u8s8_saturates()
    assert saturates is not None, f"{CPUINFO} cannot be read: these tests need to know the CPU"
    flags = ", ".join(int8_dot_flags() or ["Arm"])
    branch = "no int8 dot product (the AVX2 branch)" if saturates else f"an int8 dot product ({flags})"
    _HOST_BRANCHES.append((request.node.nodeid, branch))
    return saturates


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _HOST_BRANCHES:
        terminalreporter.write_sep("-", "tests that took this host's CPU branch")
        for nodeid, branch in _HOST_BRANCHES:
            terminalreporter.write_line(f"{nodeid}: {branch}")


@contextmanager
def running(model_tar: Path, env: dict[str, str]) -> Iterator[LocalServer]:
    """`serve` on a free port over `model_tar`, ready (/ping 200), stopped on exit."""
    with LocalServer(model_tar, port=free_port(), env={"GPT2_BACKEND": "onnxruntime", **env}) as srv:
        srv.wait_ready(timeout=90)
        yield srv


@pytest.fixture(name="running")
def running_fixture(model_tar: Path) -> Callable[[dict[str, str]], AbstractContextManager[LocalServer]]:
    return lambda env: running(model_tar, env)


@pytest.fixture(name="running_tar")
def running_tar_fixture() -> Callable[[Path, dict[str, str]], AbstractContextManager[LocalServer]]:
    """`serve` over a payload of the test's choosing."""
    return running


@pytest.fixture(scope="session")
def server(model_tar: Path) -> Iterator[LocalServer]:
    """The container's `serve` (nginx + gunicorn) on the tiny model, ONNX Runtime on the CPU.
    A 100 ms queue delay makes the batching of concurrent requests certain in tests."""
    with running(model_tar, {"GPT2_MAX_QUEUE_DELAY_US": "100000", "GPT2_THREADS": "1"}) as srv:
        yield srv
