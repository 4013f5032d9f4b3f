"""Serving containers run on this host as SageMaker runs their images.

SageMaker copies the model data into ``/opt/ml/model``, sets the Model's environment and
runs the image's ``serve`` with ``SAGEMAKER_BIND_TO_PORT``; it waits for ``GET /ping`` to
answer 200, sends ``POST /invocations``, and stops the container with SIGTERM, then SIGKILL.
:class:`Container` does the same with the image's own server code on this host: the model
under a base folder laid out like ``/opt/ml``, every process in a session of its own, and
a stop that leaves no process, socket or temporary file behind (the run folder is removed).

:class:`HuggingFaceContainer` is the Hugging Face PyTorch inference image: the toolkit's real
``serve`` (Multi Model Server 1.1.11, Java front end and Python workers) under ``.venv-hf``.
:class:`VllmContainer` is AWS's vLLM image for SageMaker: its entrypoint's arguments and the
real vLLM OpenAI server, from the CPU build of the image's vLLM version under ``.venv-vllm``.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import psutil

#: The entrypoints run by path under the images' own interpreters (.venv-hf, .venv-vllm), which
#: have no local_aws package to import them from: plain files in local_aws/images/.
LOCAL_AWS = Path(__file__).resolve().parents[1]
PROJECT_ROOT = LOCAL_AWS.parent
HF_VENV = PROJECT_ROOT / ".venv-hf"
HF_ENTRYPOINT = LOCAL_AWS / "images" / "hf_entrypoint.py"
VLLM_VENV = PROJECT_ROOT / ".venv-vllm"
VLLM_ENTRYPOINT = LOCAL_AWS / "images" / "vllm_entrypoint.py"
#: Multi Model Server refuses a port of Short.MAX_VALUE (32767) or more ("Invalid port number").
MMS_PORT_LIMIT = 32767
#: SageMaker sends SIGKILL this long after SIGTERM.
STOP_GRACE_S = 30.0
#: Set in every container's environment to ``<pid of the process that started it>:<run folder>``:
#: :func:`running_containers` finds the processes of containers by it, whatever they
#: re-parented to.
CONTAINER_MARKER = "LLM_INFERENCE_CONTAINER"


class ContainerError(RuntimeError):
    """The container exited, or never answered /ping with 200; the message ends with its log."""


def venv_python(venv: Path, built: str) -> Path:
    """The interpreter of the environment pinned to an image; ContainerError naming the make
    target that builds it (`built`: what it is) when it is missing."""
    python = venv / "bin" / "python"
    if not python.exists():
        raise ContainerError(f"{python} is missing: build {built} with `make {venv.name}/.installed`")
    return python


def free_port(low: int = 20000, high: int = MMS_PORT_LIMIT - 1) -> int:
    """A TCP port of 127.0.0.1 in [low, high] that nothing listens on right now (the OS's own
    ephemeral ports lie above what Multi Model Server accepts)."""
    for _ in range(200):
        port = random.randint(low, high)  # noqa: S311 (a port number, not a secret)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise ContainerError(f"no free TCP port between {low} and {high} on 127.0.0.1")


@dataclass(frozen=True)
class Response:
    status: int
    content_type: str
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ContainerProcess:
    pid: int
    #: The process that started the container (a local AWS).
    owner: int
    run_dir: str
    cmdline: str


def running_containers(owner: int | None = None) -> list[ContainerProcess]:
    """Every live process of a container that process `owner` started (default: this one;
    other processes on the host, other test sessions among them, have their own).

    A container's processes carry :data:`CONTAINER_MARKER` in their environment, but a process
    that renames itself with setproctitle overwrites the memory /proc/PID/environ reads (vLLM's
    ``VLLM::EngineCore`` did until VllmContainer set ``SPT_NOENV``): those are found as members of
    the session the container's main process leads (every container starts a session of its own)."""
    owner = os.getpid() if owner is None else owner
    marked: dict[int, str] = {}
    sessions: dict[int, int] = {}
    commands: dict[int, str] = {}
    for process in psutil.process_iter():
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                continue  # exited, waiting to be reaped
            sessions[process.pid] = os.getsid(process.pid)
            commands[process.pid] = " ".join(process.cmdline())
            mark = process.environ().get(CONTAINER_MARKER)
        except (psutil.Error, OSError):
            continue  # gone since the listing, or not ours to read
        started_by, _, run_dir = (mark or "").partition(":")
        if started_by == str(owner):
            marked[process.pid] = run_dir
    found = []
    for pid, session in sorted(sessions.items()):
        run_dir = marked.get(pid) or marked.get(session)
        if run_dir is not None:
            found.append(ContainerProcess(pid, owner, run_dir, commands[pid]))
    return found


def _group_members(pgid: int) -> list[int]:
    """Processes whose process group is `pgid` (they may have been re-parented)."""
    members = []
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) == pgid:
                members.append(pid)
        except OSError:
            continue  # gone since the listing
    return members


class Container:
    """One serving container's processes; a context manager that stops it on exit.

    :param model_dir: the model files, copied to ``<run>/opt/ml/model`` at start (SageMaker
        copies them too: the container may not write into the caller's folder); or a function
        that fills that folder (the local SageMaker runtime downloads the model data into it).
    :param environment: the Model's container environment.
    :param port: the port SageMaker would give (default: a free one).
    :param log: a file for the container's output (default: one in the run folder, kept for
        error messages and removed at stop).
    """

    def __init__(
        self,
        model_dir: Path | Callable[[Path], None],
        *,
        environment: Mapping[str, str] | None = None,
        port: int | None = None,
        log: Path | None = None,
    ) -> None:
        self.source = model_dir
        self.environment = dict(environment or {})
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.run_dir: Path | None = None
        self._log = log
        #: The host CPUs its processes are bound to (an inference component's copy's cores), else
        #: every one this process may use.
        self.cpus: tuple[int, ...] | None = None
        #: A folder the image's compile caches share with the other containers of this local AWS
        #: (docs/LOCAL_AWS.md, "What differs from AWS"); None: the container's own, removed at stop.
        self.compile_cache: Path | None = None

    # --- what differs per image -------------------------------------------------------------

    def command(self, run_dir: Path) -> Sequence[str]:
        raise NotImplementedError

    def prepare(self, run_dir: Path) -> None:
        """Lay out what the image has before its command runs (the run folder and its tmp exist)."""

    def process_environment(self, run_dir: Path) -> dict[str, str]:
        """The environment `command` runs in: the Model's, plus SageMaker's own variables."""
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            # This project's own variables (a test session's marker: tests/leaks.py).
            **{k: v for k, v in os.environ.items() if k.startswith("LLM_INFERENCE_")},
            **self.environment,
            "SAGEMAKER_BIND_TO_PORT": str(self.port),
            CONTAINER_MARKER: f"{os.getpid()}:{run_dir}",
        }

    # --- lifecycle ----------------------------------------------------------------------------

    @property
    def base_dir(self) -> Path:
        """The folder that stands in for /opt/ml."""
        if self.run_dir is None:
            raise ContainerError("the container is not started")
        return self.run_dir / "opt" / "ml"

    @property
    def model_dir(self) -> Path:
        return self.base_dir / "model"

    @property
    def log(self) -> Path:
        if self._log is not None:
            return self._log
        if self.run_dir is None:
            raise ContainerError("the container is not started")
        return self.run_dir / "container.log"

    def start(self) -> Container:
        self.run_dir = Path(tempfile.mkdtemp(prefix="container-"))
        # In the image every user reaches its own /tmp and /opt/ml: nginx's workers, which run
        # unprivileged when the master is root, connect to gunicorn's socket under TMPDIR.
        self.run_dir.chmod(0o755)
        (self.run_dir / "tmp").mkdir()
        (self.run_dir / "tmp").chmod(0o1777)
        if callable(self.source):
            self.model_dir.mkdir(parents=True)
            self.source(self.model_dir)
        else:
            shutil.copytree(self.source, self.model_dir, symlinks=False)
        self.prepare(self.run_dir)
        with open(self.log, "ab") as out:
            # A session of its own: stop() can find and end every process the image starts,
            # including those its front end re-parents or leaves behind.
            # Bound to its cores from its first instruction, as a container's cgroup binds it
            # (taskset: what it and every process it starts may run on; sched_getaffinity sees them).
            bound = ["taskset", "--cpu-list", ",".join(map(str, self.cpus))] if self.cpus else []
            self.process = subprocess.Popen(
                [*bound, *self.command(self.run_dir)],
                env=self.process_environment(self.run_dir),
                cwd=self.run_dir,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        return self

    def exited(self) -> bool:
        """Whether the container's main process has ended (or was never started)."""
        return self.process is None or self.process.poll() is not None

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except (OSError, ContainerError):  # stopped meanwhile: its run folder is gone
            return ""

    def ping(self, timeout: float = 2.0) -> int:
        """The HTTP status of GET /ping; 0 when nothing answers."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/ping", timeout=timeout) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except OSError:
            return 0

    def wait_ready(self, timeout: float) -> float:
        """Wait until /ping answers 200, as SageMaker does within the startup health-check
        timeout; returns the seconds waited. ContainerError if the container exits first or
        the timeout passes."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.process is None or self.process.poll() is not None:
                code = None if self.process is None else self.process.returncode
                raise ContainerError(
                    f"the container exited (code {code}) before /ping answered 200:\n{self.log_tail()}"
                )
            if self.ping() == 200:
                return time.monotonic() - started
            time.sleep(0.2)
        raise ContainerError(f"/ping did not answer 200 within {timeout:.0f} s:\n{self.log_tail()}")

    def invoke(
        self,
        body: bytes,
        *,
        content_type: str = "application/json",
        accept: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 60.0,
    ) -> Response:
        """POST /invocations as SageMaker forwards an InvokeEndpoint call."""
        sent = {"Content-Type": content_type, **(headers or {})}
        if accept is not None:
            sent["Accept"] = accept
        return self.call("POST", "/invocations", body, headers=sent, timeout=timeout)

    def call(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 60.0,
    ) -> Response:
        """A request to the container's server as SageMaker makes it (its answer, whatever its status)."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=body, headers=dict(headers or {}), method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (loopback)
                return Response(
                    int(response.status),
                    response.headers.get("Content-Type", ""),
                    response.read(),
                    dict(response.headers),
                )
        except urllib.error.HTTPError as exc:
            return Response(int(exc.code), exc.headers.get("Content-Type", ""), exc.read(), dict(exc.headers))

    def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """SIGTERM, then SIGKILL after `grace_s`, as SageMaker stops a container; then end
        whatever of its session is still running and remove the run folder. Returns the
        exit code of the container's main process (None if it was never started)."""
        code = None
        process, self.process = self.process, None
        if process is not None:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=grace_s)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
            code = process.returncode
            self._end_session(process.pid)
        if self.run_dir is not None:
            shutil.rmtree(self.run_dir, ignore_errors=True)
            self.run_dir = None
        return code

    @staticmethod
    def _end_session(pgid: int) -> None:
        """SIGKILL what is left of the container's process group (in the image, the container's
        end does this), and wait until it is gone."""
        deadline = time.monotonic() + 10
        while members := _group_members(pgid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            if time.monotonic() > deadline:
                raise ContainerError(f"processes {members} of the container survived SIGKILL")
            time.sleep(0.05)

    def __enter__(self) -> Container:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class HuggingFaceContainer(Container):
    """The Hugging Face PyTorch inference image: the toolkit's ``serve`` under ``.venv-hf``
    (local_aws/images/hf_entrypoint.py says how it differs from the image's entrypoint)."""

    def command(self, run_dir: Path) -> Sequence[str]:
        python = venv_python(HF_VENV, "the environment pinned to the Hugging Face image")
        if shutil.which("java") is None:
            raise ContainerError(
                "java is not on PATH: the image's model server (Multi Model Server) has a Java front end; "
                "install a Java runtime (Debian: apt-get install default-jre-headless, or `make system-deps`)"
            )
        return [str(python), str(HF_ENTRYPOINT), str(run_dir / "mms.properties")]

    def process_environment(self, run_dir: Path) -> dict[str, str]:
        env = super().process_environment(run_dir)
        tmp = str(run_dir / "tmp")
        env.update(
            {
                # `multi-model-server` is on the image's PATH.
                "PATH": os.pathsep.join([str(HF_VENV / "bin"), env["PATH"]]),
                "SAGEMAKER_BASE_DIR": str(self.base_dir),
                # The image sets TEMP=/tmp; MMS puts its worker sockets under TEMP (Java's
                # java.io.tmpdir) and its pid file under Python's temporary folder.
                "TEMP": tmp,
                "TMPDIR": tmp,
                "HOME": str(run_dir),
                # As the image's Dockerfile sets them.
                "PYTHONUNBUFFERED": "1",
                "PYTHONDONTWRITEBYTECODE": "1",
                # The endpoint's container has no network (enable_network_isolation).
                "HF_HUB_OFFLINE": "1",
            }
        )
        if "JAVA_HOME" in os.environ:
            env["JAVA_HOME"] = os.environ["JAVA_HOME"]
        return env


class Gpt2Container(Container):
    """This project's GPT-2 image: ``serving/gpt2/serve`` (nginx + gunicorn) with this project's
    interpreter, which has what the image installs but a CUDA torch."""

    def command(self, run_dir: Path) -> Sequence[str]:
        return [sys.executable, str(PROJECT_ROOT / "serving" / "gpt2" / "serve")]

    def process_environment(self, run_dir: Path) -> dict[str, str]:
        env = super().process_environment(run_dir)
        env.update(
            {
                "SM_MODEL_DIR": str(self.model_dir),
                "GPT2_ENGINE_CACHE": str(run_dir / "tmp" / "gpt2-engine"),
                "TMPDIR": str(run_dir / "tmp"),
                # As serving/gpt2/Dockerfile sets them.
                "PYTHONUNBUFFERED": "1",
                "PYTHONDONTWRITEBYTECODE": "1",
            }
        )
        if env.get("GPT2_REQUIRE_GPU") == "true" and not Path("/dev/nvidia0").exists():
            # The variant's instance type promises a GPU that this host cannot give: serve from
            # the CPU here (on SageMaker the container would refuse to, and /ping stay 503).
            env["GPT2_REQUIRE_GPU"] = "false"
        return env


def cpu_binding(degree: str | None, cores: int | Sequence[int] | None = None) -> str:
    """vLLM's CPU build's VLLM_CPU_OMP_THREADS_BIND for a tensor-parallel `degree`: the cores
    (a count from 0, or the container's own CPU ids) split into as many ranges, one per rank,
    ``|``-separated (vllm/v1/worker/cpu_worker.py reads one range a rank); a rank of its own for
    each needs as many cores as ranks."""
    ids = list(cores) if isinstance(cores, Sequence) else list(range(cores or os.cpu_count() or 1))
    ranks = int(degree) if degree and degree.isdigit() else 1
    if ranks > len(ids):
        raise ContainerError(
            f"SM_VLLM_TENSOR_PARALLEL_SIZE={ranks}: vLLM's CPU build binds each rank to cores of its own, and this "
            f"container has {len(ids)}"
        )
    share = len(ids) // ranks
    chunks = [ids[r * share : (r + 1) * share] for r in range(ranks)]
    return "|".join(_cpu_list(chunk) for chunk in chunks)


def _user_name(environment: Mapping[str, str]) -> str:
    """The name Python's ``getpass.getuser()`` gives in a process with `environment`, as torch
    names its folder (sanitized as torch does)."""
    for variable in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        if environment.get(variable):
            name = environment[variable]
            break
    else:
        name = pwd.getpwuid(os.getuid()).pw_name
    return re.sub(r'[\\/:*?"<>|]', "_", name)


def _cpu_list(ids: list[int]) -> str:
    """``2-5`` for a run of ids, else ``1,3``."""
    if len(ids) > 1 and ids == list(range(ids[0], ids[-1] + 1)):
        return f"{ids[0]}-{ids[-1]}"
    return ",".join(str(i) for i in ids)


class VllmContainer(Container):
    """AWS's vLLM image for SageMaker: local_aws/images/vllm_entrypoint.py (the image's entrypoint,
    and how it differs) starts ``vllm.entrypoints.openai.api_server`` under ``.venv-vllm``, the
    CPU build of the image's vLLM version."""

    #: GiB of KV cache the CPU engine takes (its default asks for 0.9 of the free memory).
    kv_cache_gib = 1

    def command(self, run_dir: Path) -> Sequence[str]:
        return [str(venv_python(VLLM_VENV, "the CPU build of the image's vLLM")), str(VLLM_ENTRYPOINT)]

    def _binding(self) -> str:
        """The ranks' cores; ``nobind`` when the copy sees fewer GPUs than ranks, which the
        engine refuses before it binds anything (local_aws/images/vllm_entrypoint.py)."""
        degree = self.environment.get("SM_VLLM_TENSOR_PARALLEL_SIZE")
        visible = self.environment.get("CUDA_VISIBLE_DEVICES")
        ranks = int(degree) if degree and degree.isdigit() else 1
        if visible is not None and ranks > len([d for d in visible.split(",") if d.strip()]):
            return "nobind"
        return cpu_binding(degree, self.cpus)

    def process_environment(self, run_dir: Path) -> dict[str, str]:
        env = super().process_environment(run_dir)
        tmp = str(run_dir / "tmp")
        env.update(
            {
                "SAGEMAKER_BASE_DIR": str(self.base_dir),
                "TMPDIR": tmp,
                "HOME": str(run_dir),
                "PYTHONUNBUFFERED": "1",
                # The endpoint's container has no network (enable_network_isolation).
                "HF_HUB_OFFLINE": "1",
                "VLLM_NO_USAGE_STATS": "1",
                # What stands in for the GPU's memory fraction on the CPU build, and every core
                # (its default binds one of two cores here), shared out among the ranks of a
                # tensor-parallel engine.
                "VLLM_CPU_KVCACHE_SPACE": str(self.kv_cache_gib),
                "VLLM_CPU_OMP_THREADS_BIND": self._binding(),
                # vLLM names its processes (VLLM::EngineCore, VLLM::Worker) with setproctitle,
                # which overwrites /proc/PID/environ unless this is set (setproctitle's README):
                # without it running_containers() and tests/leaks.py cannot see the engine.
                "SPT_NOENV": "1",
                # Its compile caches: the local AWS's shared folder, else the run folder's.
                "VLLM_CACHE_ROOT": str(self._caches(run_dir) / "vllm-cache"),
                "TORCHINDUCTOR_CACHE_DIR": str(self._caches(run_dir) / "inductor-cache"),
            }
        )
        return env

    def _caches(self, run_dir: Path) -> Path:
        return self.compile_cache if self.compile_cache is not None else run_dir / "tmp"

    def prepare(self, run_dir: Path) -> None:
        """With a shared compile cache, the C++ header torch's inductor precompiles for the
        engine's first request (about 150 MB, 10 s of g++ on 2 cores) is shared too: torch keeps
        it under ``$TMPDIR/torchinductor_<user>/`` whatever ``TORCHINDUCTOR_CACHE_DIR`` says
        (torch/_inductor/codecache.py ``_HEADER_DIR``); torch locks what it writes there."""
        if self.compile_cache is None:
            return
        headers = self.compile_cache / "torchinductor"
        headers.mkdir(parents=True, exist_ok=True)
        (run_dir / "tmp" / f"torchinductor_{_user_name(self.environment)}").symlink_to(headers)
