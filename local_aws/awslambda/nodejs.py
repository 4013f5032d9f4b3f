"""Lambda's Node.js runtimes on this machine: one invocation, one ``node`` process.

Each invocation runs in an execution environment of its own, as a cold start does on Lambda: the
deployment package unpacked into a task root of its own, ``bootstrap.cjs`` (Lambda's runtime
interface client for one invocation) loading the handler the function names and calling it, in
a process session that is killed when the invocation ends (returned, failed or timed out), so
that nothing the handler started outlives it. What Lambda's runtimes give the handler:

* Lambda's environment variables (AWS_REGION, AWS_LAMBDA_FUNCTION_NAME, _HANDLER,
  LAMBDA_TASK_ROOT, AWS_LAMBDA_LOG_GROUP_NAME/LOG_STREAM_NAME, ...), the function's own, and the
  execution role's temporary credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
  AWS_SESSION_TOKEN), from the local AWS's STS;
* the AWS SDK for JavaScript v3 that Lambda's Node.js runtimes include, on NODE_PATH: the clients
  package.json pins, installed by ``npm ci`` (``make setup``) into node_modules;
* the timeout: past the function's Timeout the process is killed and Lambda's
  ``Task timed out after N seconds`` logged.

What differs from Lambda: the runtime identifier names the Node.js release (``nodejs24.x``), and
this machine's ``node`` runs the code whatever it names (``INIT_START`` in the log says which);
the SDK's calls go to the local AWS (AWS_ENDPOINT_URL), and the host of CloudFormation's
response URL is routed to it; MemorySize is reported, not enforced.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from local_aws.awslambda.code import unpack
from local_aws.awslambda.functions import Function

PROJECT_ROOT = Path(__file__).resolve().parents[2]
BOOTSTRAP = Path(__file__).with_name("bootstrap.cjs")
#: Where `npm ci` puts the SDK clients package.json pins (Lambda's /var/runtime/node_modules).
SDK_MODULES = PROJECT_ROOT / "node_modules"
#: The runtimes this machine runs: Lambda's Node.js identifiers.
NODE_RUNTIME = re.compile(r"^nodejs(\d+)\.x$")


class RuntimeUnavailable(RuntimeError):
    """The function cannot run here: no Node.js, no SDK, or a runtime this machine does not run."""


@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    secret_access_key: str
    session_token: str


@dataclass(frozen=True)
class Network:
    """Where the function's calls go: the local AWS's endpoint, and hosts it answers for."""

    endpoint_url: str
    #: (host pattern, ``127.0.0.1:<port>``): TLS connections to a matching host reach that
    #: address in plain TCP.
    routes: tuple[tuple[str, str], ...] = ()


@dataclass
class Invocation:
    """One invocation's outcome: ``status`` is ``success``, ``error`` (the handler's error or an
    init error) or ``timeout``."""

    request_id: str
    status: str
    log_stream: str
    payload: Any = None
    error_type: str = ""
    error_message: str = ""
    trace: list[str] = field(default_factory=list)
    #: The log events Lambda writes for it, (epoch milliseconds, message), in order.
    events: list[tuple[int, str]] = field(default_factory=list)
    duration_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "success"

    def error_document(self) -> dict[str, Any]:
        """Lambda's response to an invocation whose function failed."""
        return {"errorType": self.error_type, "errorMessage": self.error_message, "trace": self.trace}


def _millis() -> int:
    return int(time.time() * 1000)


def log_stream_name() -> str:
    return f"{datetime.now(UTC):%Y/%m/%d}/[$LATEST]{uuid.uuid4().hex}"


class NodeRuntime:
    """Runs invocations in ``node`` processes; :meth:`stop_all` ends those still running."""

    def __init__(self) -> None:
        self._running: dict[int, subprocess.Popen[bytes]] = {}
        self._lock = threading.Lock()
        self._version: str | None = None

    def node(self) -> str:
        found = shutil.which("node")
        if found is None:
            raise RuntimeUnavailable("Node.js is not on PATH: the local AWS runs Lambda's Node.js functions with it")
        return found

    def node_version(self) -> str:
        if self._version is None:
            done = subprocess.run([self.node(), "--version"], capture_output=True, text=True, timeout=30, check=True)
            self._version = done.stdout.strip()
        return self._version

    def check(self, function: Function) -> None:
        if function.runtime is None or not NODE_RUNTIME.match(function.runtime):
            raise RuntimeUnavailable(
                f"{function.name} runs on {function.runtime or 'a container image'}: the local AWS runs Lambda's "
                "Node.js runtimes (nodejs<N>.x) only"
            )
        if not (SDK_MODULES / "@aws-sdk" / "client-s3" / "package.json").is_file():
            raise RuntimeUnavailable(
                f"the AWS SDK for JavaScript that Lambda's Node.js runtimes include is missing from {SDK_MODULES}: "
                "run `npm ci` (make setup)"
            )

    def run(
        self, function: Function, event: Any, *, credentials: Credentials, network: Network, request_id: str
    ) -> Invocation:
        """Invoke `function` once with `event`; never raises for what the function does."""
        self.check(function)
        stream = log_stream_name()
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="local-lambda-") as scratch:
            work = Path(scratch)
            task_root = work / "task"
            unpack(function.code, task_root)
            (work / "tmp").mkdir()
            (work / "event.json").write_text(json.dumps(event))
            result_file, output_file = work / "result.json", work / "output.log"
            deadline = time.time() + function.timeout_s
            env = self._environment(function, credentials, network, task_root, work / "tmp", stream)
            env.update(
                {
                    "LOCAL_LAMBDA_EVENT": str(work / "event.json"),
                    "LOCAL_LAMBDA_RESULT": str(result_file),
                    "LOCAL_LAMBDA_REQUEST_ID": request_id,
                    "LOCAL_LAMBDA_DEADLINE_MS": str(int(deadline * 1000)),
                    "LOCAL_LAMBDA_INVOKED_ARN": function.arn,
                    "LOCAL_LAMBDA_ROUTES": json.dumps(network.routes),
                }
            )
            first = _millis()
            with output_file.open("wb") as output, self._process(env, task_root, output) as process:
                timed_out = self._wait(process, deadline)
            duration_ms = (time.monotonic() - started) * 1000
            outcome = json.loads(result_file.read_text()) if result_file.is_file() else None
            lines = output_file.read_bytes().decode(errors="replace").split("\n")  # no newline translation
        invocation = self._outcome(request_id, stream, outcome, timed_out, function, process.returncode)
        invocation.duration_ms = duration_ms
        invocation.events = self._events(function, invocation, first, lines)
        return invocation

    def _environment(
        self, function: Function, credentials: Credentials, network: Network, task_root: Path, tmp: Path, stream: str
    ) -> dict[str, str]:
        node_dir = str(Path(self.node()).parent)
        return {
            **function.environment,
            # Lambda's own variables, which a function's may not override.
            "PATH": os.pathsep.join([node_dir, "/usr/local/bin", "/usr/bin", "/bin"]),
            "LANG": "en_US.UTF-8",
            "TZ": ":UTC",
            "TMPDIR": str(tmp),
            "AWS_REGION": function.region,
            "AWS_DEFAULT_REGION": function.region,
            "AWS_EXECUTION_ENV": f"AWS_Lambda_{function.runtime}",
            "AWS_LAMBDA_FUNCTION_NAME": function.name,
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(function.memory_mb),
            "AWS_LAMBDA_LOG_GROUP_NAME": function.log_group,
            "AWS_LAMBDA_LOG_STREAM_NAME": stream,
            "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
            "AWS_ACCESS_KEY_ID": credentials.access_key_id,
            "AWS_SECRET_ACCESS_KEY": credentials.secret_access_key,
            "AWS_SESSION_TOKEN": credentials.session_token,
            "LAMBDA_TASK_ROOT": str(task_root),
            "LAMBDA_RUNTIME_DIR": str(BOOTSTRAP.parent),
            "_HANDLER": function.handler,
            "NODE_PATH": os.pathsep.join([str(SDK_MODULES), str(task_root)]),
            # The local AWS stands in for every AWS endpoint the SDK would call.
            "AWS_ENDPOINT_URL": network.endpoint_url,
            # This project's own markers (a test session's, tests/leaks.py) follow its processes.
            **{k: v for k, v in os.environ.items() if k.startswith("LLM_INFERENCE_")},
        }

    @contextlib.contextmanager
    def _process(self, env: Mapping[str, str], task_root: Path, output: Any) -> Iterator[subprocess.Popen[bytes]]:
        process = subprocess.Popen(
            [self.node(), str(BOOTSTRAP)],
            cwd=task_root,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        with self._lock:
            self._running[process.pid] = process
        try:
            yield process
        finally:
            # The invocation is over: its environment goes, with whatever the handler started.
            _kill_group(process)
            with self._lock:
                self._running.pop(process.pid, None)

    @staticmethod
    def _wait(process: subprocess.Popen[bytes], deadline: float) -> bool:
        """Wait for the process until `deadline` (epoch seconds); whether it ran past it."""
        try:
            process.wait(timeout=max(0.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            _kill_group(process)
            process.wait()
            return True
        return False

    def _outcome(
        self,
        request_id: str,
        stream: str,
        outcome: dict[str, Any] | None,
        timed_out: bool,
        function: Function,
        returncode: int | None,
    ) -> Invocation:
        if timed_out:
            message = f"RequestId: {request_id} Error: Task timed out after {function.timeout_s:.2f} seconds"
            return Invocation(request_id, "timeout", stream, error_type="Sandbox.Timedout", error_message=message)
        if outcome is None:
            message = f"RequestId: {request_id} Error: Runtime exited with error: exit status {returncode}"
            return Invocation(request_id, "error", stream, error_type="Runtime.ExitError", error_message=message)
        if outcome["ok"]:
            return Invocation(request_id, "success", stream, payload=outcome["payload"])
        return Invocation(
            request_id,
            "error",
            stream,
            error_type=outcome["errorType"],
            error_message=outcome["errorMessage"],
            trace=outcome["trace"],
        )

    def _events(
        self, function: Function, invocation: Invocation, first: int, lines: list[str]
    ) -> list[tuple[int, str]]:
        """The log events of the invocation: Lambda's platform lines around the function's output
        (one event per line; a console message's newlines, written as carriage returns, restored)."""
        request_id = invocation.request_id
        major = (NODE_RUNTIME.match(function.runtime or "") or ["", "?"])[1]
        events = [(first, f"INIT_START Runtime Version: nodejs:{major} (local AWS: Node.js {self.node_version()})")]
        events.append((first, f"START RequestId: {request_id} Version: $LATEST"))
        now = _millis()
        events += [(_stamp(line, now), line.replace("\r", "\n")) for line in lines if line]
        if invocation.status == "timeout":
            stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            events.append((now, f"{stamp} {request_id} Task timed out after {function.timeout_s:.2f} seconds"))
        events.append((now, f"END RequestId: {request_id}"))
        status = "" if invocation.ok else f"\tStatus: {invocation.status}\tError Type: {invocation.error_type}"
        duration = invocation.duration_ms
        events.append(
            (
                now,
                f"REPORT RequestId: {request_id}\tDuration: {duration:.2f} ms\tBilled Duration: {int(duration) + 1} ms"
                f"\tMemory Size: {function.memory_mb} MB{status}",
            )
        )
        return events

    def stop_all(self) -> None:
        """End every invocation still running (the local AWS stops or forgets its account)."""
        with self._lock:
            running = list(self._running.values())
        for process in running:
            _kill_group(process)


_CONSOLE_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z\t")


def _stamp(line: str, default: int) -> int:
    """The time a console line says it was written (epoch milliseconds), else `default`."""
    found = _CONSOLE_STAMP.match(line)
    if found is None:
        return default
    return int(datetime.fromisoformat(found.group(1)).replace(tzinfo=UTC).timestamp() * 1000)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
