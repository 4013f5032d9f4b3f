"""The GPT-2 container runs as an unprivileged user (issue 16 item 9).

The image is never built here (no Docker engine): its Dockerfile is checked as text (and linted
by hadolint in `make lint`), and `serve` is run for real as an unprivileged user, as the image's
USER runs it: nginx, gunicorn and the model worker start, answer and stop with nothing writable to
them but /tmp and their home, over a model folder that root owns and they can only read, as
SageMaker mounts /opt/ml/model.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from serving.gpt2.local import LocalServer, extract_model

DOCKERFILE = Path(__file__).resolve().parents[2] / "serving" / "gpt2" / "Dockerfile"
#: The user `serve` runs as here: any user but root would do; this one exists everywhere.
USER = "nobody"


def instructions(text: str) -> list[tuple[str, str]]:
    """(instruction, arguments) of a Dockerfile, continuation lines joined, comments left out."""
    joined = re.sub(r"\\\n(?:\s*#[^\n]*\n)*", " ", text)
    pairs = []
    for line in joined.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            keyword, _, rest = line.strip().partition(" ")
            pairs.append((keyword.upper(), rest.strip()))
    return pairs


def test_the_image_runs_serve_as_an_unprivileged_user() -> None:
    steps = instructions(DOCKERFILE.read_text())
    users = [i for i, (keyword, _) in enumerate(steps) if keyword == "USER"]
    assert users, "the Dockerfile has no USER: the container runs as root"
    user = steps[users[-1]][1]
    # Numeric, so that a platform requiring a non-root user can tell without the image's passwd.
    assert re.fullmatch(r"[1-9][0-9]*:[1-9][0-9]*", user), f"USER {user} is not a numeric non-root uid:gid"
    uid, gid = user.split(":")
    # The user exists, with that uid and group, and a home of its own, which HOME names.
    runs = " ".join(arg for keyword, arg in steps if keyword == "RUN")
    assert re.search(rf"groupadd [^&]*--gid {gid} (\S+)", runs), f"no group with gid {gid} is created"
    useradd = re.search(rf"useradd [^&]*--uid {uid} [^&]*--home-dir (\S+) --create-home", runs)
    assert useradd, f"no user with uid {uid} and a home is created"
    env = " ".join(arg for keyword, arg in steps if keyword == "ENV")
    assert f"HOME={useradd.group(1)}" in env, "HOME is not the user's home: its caches would go to /root"
    # What it runs, it runs as that user: no instruction after USER switches back.
    assert [keyword for keyword, _ in steps[users[-1] :]] == ["USER", "EXPOSE", "ENTRYPOINT", "CMD"]
    # The code stays root's: the user can read it, not change it.
    assert "chown" not in runs


def python_for(user: str) -> list[str] | None:
    """An interpreter of this Python that `user` can run, child processes included (serve starts
    gunicorn with its own interpreter), with this environment's packages; None if there is none.
    This venv's interpreter may lie under /root, which another user cannot reach: the system's
    Python of the same version then runs with the venv's packages on its path."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    packages = os.pathsep.join(dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib")))
    probe = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import gunicorn, onnxruntime'], check=True)"
    for candidate in (sys.executable, f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"):
        command = [*run_as(user), "env", f"PYTHONPATH={packages}", candidate]
        if Path(candidate).exists() and subprocess.run([*command, "-c", probe], capture_output=True).returncode == 0:
            return command
    return None


def run_as(user: str) -> list[str]:
    """Run as `user`, its group only, with no capability and no way to gain one."""
    return ["setpriv", f"--reuid={user}", f"--regid={pwd.getpwnam(user).pw_gid}", "--clear-groups",
            "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]  # fmt: skip


def ids_and_capabilities(pid: int) -> tuple[set[str], set[str], str]:
    """(the real, effective, saved and file-system uids, the same gids, the effective capabilities)."""
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return set(status["Uid"].split()), set(status["Gid"].split()), status["CapEff"].strip()


def processes_of_group(pgid: int) -> dict[int, str]:
    """pid: command line of each process of the group (serve leads its own, and its children join it)."""
    found = {}
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) == pgid:
                found[process.pid] = " ".join(process.cmdline())
        except (psutil.Error, OSError):
            continue  # ended meanwhile
    return found


def snapshot(folder: Path) -> dict[str, tuple[int, int, int]]:
    """Each entry's mode, size and modification time: a write shows in one of them."""
    stats = {str(path.relative_to(folder)): path.stat() for path in folder.rglob("*")}
    return {name: (s.st_mode, s.st_size, s.st_mtime_ns) for name, s in stats.items()}


@pytest.fixture(name="world_readable_dir")
def world_readable_dir_fixture() -> Iterator[Path]:
    """A folder another user can reach (pytest's own temporary folders are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="gpt2-unprivileged-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_serve_runs_as_an_unprivileged_user(
    model_tar: Path, world_readable_dir: Path, free_port: Callable[[], int]
) -> None:
    if os.geteuid() != 0:
        pytest.skip("not run as root: every other test of serve already runs it unprivileged")
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv (util-linux) to run serve as another user")
    python = python_for(USER)
    if python is None:
        pytest.skip(f"no Python {sys.version_info.major}.{sys.version_info.minor} that {USER} can run")
    user = pwd.getpwnam(USER)
    # The model as SageMaker leaves it: extracted by root, which the server may read and not write.
    model_dir = extract_model(model_tar, world_readable_dir / "model")
    before = snapshot(model_dir)
    home = world_readable_dir / "home"
    home.mkdir()
    os.chown(home, user.pw_uid, user.pw_gid)
    # Docker's runtime gives the container's stdout and stderr to its user (runc chowns them), and
    # nginx reopens /dev/stdout for its access log: the log file is the user's here likewise.
    log = world_readable_dir / "serve.log"
    log.touch()
    os.chown(log, user.pw_uid, user.pw_gid)
    env = {"GPT2_BACKEND": "onnxruntime", "HOME": str(home)}
    server = LocalServer(model_dir=model_dir, port=free_port(), env=env, log=log, command=python)
    with server:
        server.wait_ready(timeout=90)
        assert server.invoke({"input": "amazon", "parameters": {"max_new_tokens": 2}})[0] == 200
        assert server.invoke({"input": ""})[0] == 400
        assert server.process is not None
        processes = processes_of_group(server.process.pid)
        # serve, nginx's master and workers, gunicorn's master and its worker: none of them root.
        commands = " | ".join(processes.values())
        assert "nginx: master" in commands and "nginx: worker" in commands and "gunicorn" in commands, commands
        for pid, command in processes.items():
            assert ids_and_capabilities(pid) == ({str(user.pw_uid)}, {str(user.pw_gid)}, "0" * 16), command
    assert server.process.returncode == 0, log.read_text()[-3000:]
    output = log.read_text()
    assert '"GET /ping HTTP/1.1" 200' in output  # the access log was written
    for trouble in ("Permission denied", "[emerg]", "[alert]", "[crit]", "Traceback"):
        assert trouble not in output, output[-3000:]
    assert snapshot(model_dir) == before, "the server wrote to the model folder"
