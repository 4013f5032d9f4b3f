"""Serve a ``model.tar.gz`` on this machine exactly as the endpoint does: extract it as
SageMaker extracts it into ``/opt/ml/model``, then run the container's ``serve``.

Command line (``make serve-gpt2``)::

    python -m serving.gpt2.local --model-tar artifacts/gpt2/model.tar.gz --port 8080
    python -m serving.gpt2.local --wait --port 8080 --timeout 120   # exits 0 once /ping is 200

From Python (tests, the end-to-end demo)::

    with LocalServer(Path("artifacts/gpt2/model.tar.gz"), port=8080) as server:
        server.wait_ready(timeout=120)
        server.invoke({"input": "amazon"})
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

SERVE = Path(__file__).with_name("serve")


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def extract_model(tar_path: Path, model_dir: Path) -> Path:
    """Unpack `tar_path` into `model_dir` (refusing links and paths outside it)."""
    model_dir.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tar_path, "r:gz") as tar:
        tar.extractall(model_dir, filter="data")
    return model_dir


def ping(port: int, host: str = "127.0.0.1", timeout: float = 2.0) -> tuple[int, dict[str, Any]]:
    """(status, body) of GET /ping; (0, {}) when nothing answers yet."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/ping", timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            body = json.loads(exc.read() or b"{}")
        except ValueError:
            body = {}
        return exc.code, body
    except (OSError, ValueError):
        return 0, {}


def wait_for_ping(
    port: int, *, timeout: float, host: str = "127.0.0.1", process: subprocess.Popen[bytes] | None = None
) -> dict[str, Any]:
    """Poll /ping until it answers 200 (the model is loaded and warmed); its body is returned.
    Raises TimeoutError with the last answer, or RuntimeError if `process` exits or the model failed."""
    deadline = time.monotonic() + timeout
    last: tuple[int, dict[str, Any]] = (0, {})
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"serve exited with code {process.returncode} before /ping answered 200")
        last = ping(port, host)
        if last[0] == 200:
            return last[1]
        if last[1].get("status") == "failed":
            raise RuntimeError(f"the model failed to load: {last[1].get('error')}")
        time.sleep(0.2)
    raise TimeoutError(f"GET http://{host}:{port}/ping did not answer 200 within {timeout} s (last: {last})")


class LocalServer:
    """`serve` on `port` over an extracted `model_tar` (or an already extracted `model_dir`)."""

    def __init__(
        self,
        model_tar: Path | None = None,
        *,
        port: int,
        model_dir: Path | None = None,
        env: Mapping[str, str] | None = None,
        log: Path | None = None,
        command: Sequence[str] | None = None,
    ) -> None:
        """`log`: a file for the server's output (access log included); None: this process's.
        `command`: the interpreter that runs `serve`, with what runs it (another user, in a test);
        None: this one."""
        if (model_tar is None) == (model_dir is None):
            raise ValueError("give exactly one of model_tar or model_dir")
        self.port = port
        self.model_tar = model_tar
        self.model_dir = model_dir
        self.env = dict(env or {})
        self.log = log
        self.command = [sys.executable] if command is None else list(command)
        self.process: subprocess.Popen[bytes] | None = None
        self._tmp: Path | None = None

    def start(self) -> LocalServer:
        if self.model_tar is not None:
            self._tmp = Path(tempfile.mkdtemp(prefix="gpt2-model-"))
            self.model_dir = extract_model(self.model_tar, self._tmp / "model")
        env = {**os.environ, **self.env, "SM_MODEL_DIR": str(self.model_dir), "SAGEMAKER_BIND_TO_PORT": str(self.port)}
        command = [*self.command, str(SERVE)]
        if self.log is None:
            self.process = subprocess.Popen(command, env=env)
        else:
            with open(self.log, "ab") as out:
                self.process = subprocess.Popen(command, env=env, stdout=out, stderr=out)
        return self

    def wait_ready(self, timeout: float = 120.0) -> dict[str, Any]:
        return wait_for_ping(self.port, timeout=timeout, process=self.process)

    def invoke(self, payload: Any, timeout: float = 60.0) -> tuple[int, dict[str, Any]]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/invocations",
            data=json.dumps(payload).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (our own http URL)
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def stop(self, timeout: float = 30.0) -> int | None:
        code = None
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                code = self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                code = self.process.wait()
        elif self.process is not None:
            code = self.process.returncode
        if self.process is not None:
            # serve leads its own process group and ends it at exit; if serve itself was killed,
            # what it started is still in that group.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
        return code

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serving.gpt2.local", description=__doc__.splitlines()[0])
    parser.add_argument("--model-tar", type=Path, help="the model.tar.gz the endpoint receives")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--wait", action="store_true", help="only wait until /ping answers 200, then exit 0")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds --wait waits (default 120)")
    args = parser.parse_args(argv)
    if args.wait:
        try:
            print(json.dumps(wait_for_ping(args.port, timeout=args.timeout)))
        except (TimeoutError, RuntimeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0
    if args.model_tar is None or not args.model_tar.is_file():
        parser.error(
            f"--model-tar {args.model_tar} is not a file: build it with `python -m artifacts_builder gpt2 --tiny`"
        )
    server = LocalServer(args.model_tar, port=args.port).start()

    def forward(signum: int, _frame: object) -> None:
        if server.process is not None and server.process.poll() is None:
            server.process.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    assert server.process is not None
    code = server.process.wait()
    server.stop()
    return code


if __name__ == "__main__":
    sys.exit(main())
