"""A stand-in serving image for the local SageMaker runtime's tests: a real process with
SageMaker's container contract (``/ping`` and ``/invocations`` on ``SAGEMAKER_BIND_TO_PORT``)
that tells what it was given. It is configured through the Model's environment:

* ``ECHO_VERSION``: returned with every answer (tells two endpoint configs apart);
* ``ECHO_PING_AFTER_S``: ``/ping`` answers 503 until this many seconds after the start;
* ``ECHO_PING_AFTER_FILE``: ``/ping`` answers 503 until this file exists (a test says when);
* ``ECHO_EXIT_CODE``: exit at once with this code (a container that never becomes healthy).
* ``ECHO_CHILD``: start a child process that outlives the server (a model server's worker).

A request ``{"status": N}`` is answered with status N; ``{"sleep_s": S}`` waits S seconds first;
``{"hold": folder}`` creates ``arrived`` in the folder and waits for ``release`` there first (at
most GATE_WAIT_S), so that a test knows the request is in the container's hands until it lets go.
A request of content type ``application/x-echo-raw`` is answered with its own bytes, as they came;
any other body that is not JSON is described (its length and sha256) in the answer.
A request ``{"parts": [...]}`` is answered with HTTP/1.1 chunked transfer, one chunk per part,
``part_delay_s`` apart; ``cut_after: N`` closes the connection after N parts without the last
chunk (a broken answer); ``log: path`` appends ``sent N`` after each part and ``gone after N``
when a write fails (the caller went away), then stops sending. ``gate: folder`` sends the first
part with the answer's headers and holds each next part N until the caller opens its gate, the
file ``open-N`` in the folder (or ``open-all``), marking ``sending-N`` there before it sends part
N: a test that opens gate N only once it has seen part N-1 proves an order of events, not a
speed (tests/local_aws/helpers.py: Gates). A gate not opened within GATE_WAIT_S ends the answer
without its last chunk (a broken stream), so that a caller that never reads on is not waited for.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

STARTED = time.monotonic()  # clock: paces ECHO_PING_AFTER_S, a delay this stand-in serves, no bound
#: The content type whose requests are answered with their own bytes.
RAW = "application/x-echo-raw"
MODEL_DIR = Path(os.environ["SM_MODEL_DIR"])
#: How long a gated answer holds a part for its gate (a generous wait: a caller opens it within
#: moments of reading the part before).
GATE_WAIT_S = 120
#: How often a held part looks at its gate.
GATE_POLL_S = 0.005


def wait_for(*files: Path) -> bool:
    """Whether one of `files` appeared within GATE_WAIT_S (counted in looks, not read off a clock)."""
    for _ in range(int(GATE_WAIT_S / GATE_POLL_S)):
        if any(file.exists() for file in files):
            return True
        time.sleep(GATE_POLL_S)
    return False


class Handler(BaseHTTPRequestHandler):
    # Chunked answers need HTTP/1.1; every other answer has a Content-Length.
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def answer(self, status: int, document: object, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        # clock: ECHO_PING_AFTER_S's delay, which this stand-in serves: no bound on the host
        ready = time.monotonic() - STARTED >= float(os.environ.get("ECHO_PING_AFTER_S", "0"))
        if "ECHO_PING_AFTER_FILE" in os.environ:
            ready = ready and Path(os.environ["ECHO_PING_AFTER_FILE"]).exists()
        self.answer(200 if ready else 503, {"ready": ready})

    def do_POST(self) -> None:
        data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Type") == RAW:
            self.send_response(200)
            self.send_header("Content-Type", RAW)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        body = data.decode(errors="replace")
        try:
            request = json.loads(data)
        except ValueError:
            request = None
        if isinstance(request, dict) and "sleep_s" in request:
            time.sleep(float(request["sleep_s"]))
        if isinstance(request, dict) and "hold" in request:
            (Path(request["hold"]) / "arrived").touch()
            wait_for(Path(request["hold"]) / "release")
        if isinstance(request, dict) and "parts" in request:
            self.stream(request)
            return
        if isinstance(request, dict) and "status" in request:
            self.answer(int(request["status"]), {"error": f"asked for {request['status']}"})
            return
        attributes = self.headers.get("X-Amzn-SageMaker-Custom-Attributes")
        # Its own within the 1,024 characters the runtime's model allows an answer's CustomAttributes
        # (what SageMaker does with a longer one is not documented).
        echoed = f"echoed={attributes}"[:1024]
        self.answer(
            200,
            {
                "version": os.environ.get("ECHO_VERSION"),
                "pid": os.getpid(),
                # The GPUs it was given (the NVIDIA container runtime's variable).
                "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "cpus": sorted(os.sched_getaffinity(0)),
                "body": body,
                "body_sha256": hashlib.sha256(data).hexdigest(),
                "body_length": len(data),
                "session_id": self.headers.get("X-Amzn-SageMaker-Session-Id"),
                "content_type": self.headers.get("Content-Type"),
                "accept": self.headers.get("Accept"),
                "custom_attributes": attributes,
                "model_files": sorted(p.relative_to(MODEL_DIR).as_posix() for p in MODEL_DIR.rglob("*") if p.is_file()),
            },
            {"X-Amzn-SageMaker-Custom-Attributes": echoed} if attributes else None,
        )

    def stream(self, request: dict[str, object]) -> None:
        parts = [str(p) for p in request["parts"]]  # type: ignore[attr-defined]
        delay = float(request.get("part_delay_s", 0))  # type: ignore[arg-type]
        cut_after = request.get("cut_after")
        log = Path(str(request["log"])) if "log" in request else None
        gate = Path(str(request["gate"])) if "gate" in request else None
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        head = b""
        if gate is None:
            self.end_headers()
        else:  # the headers go out with the first part, in one write
            wfile, self.wfile = self.wfile, io.BytesIO()
            self.end_headers()
            head, self.wfile = self.wfile.getvalue(), wfile  # type: ignore[attr-defined]
        for sent, part in enumerate(parts):
            if cut_after is not None and sent >= int(cut_after):  # type: ignore[call-overload]
                self.close_connection = True
                self.wfile.write(head)
                self.wfile.flush()
                self.connection.shutdown(2)
                return
            if gate is not None:
                if sent and not wait_for(gate / f"open-{sent}", gate / "open-all"):
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                (gate / f"sending-{sent}").touch()
            data = part.encode()
            try:
                self.wfile.write(head + b"%x\r\n%s\r\n" % (len(data), data))
                head = b""
                self.wfile.flush()
            except OSError:
                if log is not None:
                    with log.open("a") as out:
                        out.write(f"gone after {sent}\n")
                self.close_connection = True
                return
            if log is not None:
                with log.open("a") as out:
                    out.write(f"sent {sent + 1}\n")
            time.sleep(delay)
        self.wfile.write(head + b"0\r\n\r\n")


def main() -> None:
    if "ECHO_EXIT_CODE" in os.environ:
        sys.exit(int(os.environ["ECHO_EXIT_CODE"]))
    if "ECHO_CHILD" in os.environ:
        # In the container's process group, as a model server's workers are.
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    server = ThreadingHTTPServer(("127.0.0.1", int(os.environ["SAGEMAKER_BIND_TO_PORT"])), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # A start-up line, as a model server logs one (tests read it in CloudWatch Logs).
    print(f"echo: listening on port {server.server_port}", flush=True)
    print("echo: a line on stderr", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
