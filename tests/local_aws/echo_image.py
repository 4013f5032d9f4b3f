"""A stand-in serving image for the local SageMaker runtime's tests: a real process with
SageMaker's container contract (``/ping`` and ``/invocations`` on ``SAGEMAKER_BIND_TO_PORT``)
that tells what it was given. It is configured through the Model's environment:

* ``ECHO_VERSION``: returned with every answer (tells two endpoint configs apart);
* ``ECHO_PING_AFTER_S``: ``/ping`` answers 503 until this many seconds after the start;
* ``ECHO_EXIT_CODE``: exit at once with this code (a container that never becomes healthy).

A request ``{"status": N}`` is answered with status N; ``{"sleep_s": S}`` waits S seconds first.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

STARTED = time.monotonic()
MODEL_DIR = Path(os.environ["SM_MODEL_DIR"])


class Handler(BaseHTTPRequestHandler):
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
        ready = time.monotonic() - STARTED >= float(os.environ.get("ECHO_PING_AFTER_S", "0"))
        self.answer(200 if ready else 503, {"ready": ready})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if isinstance(request, dict) and "sleep_s" in request:
            time.sleep(float(request["sleep_s"]))
        if isinstance(request, dict) and "status" in request:
            self.answer(int(request["status"]), {"error": f"asked for {request['status']}"})
            return
        attributes = self.headers.get("X-Amzn-SageMaker-Custom-Attributes")
        self.answer(
            200,
            {
                "version": os.environ.get("ECHO_VERSION"),
                "body": body,
                "content_type": self.headers.get("Content-Type"),
                "accept": self.headers.get("Accept"),
                "custom_attributes": attributes,
                "model_files": sorted(p.relative_to(MODEL_DIR).as_posix() for p in MODEL_DIR.rglob("*") if p.is_file()),
            },
            {"X-Amzn-SageMaker-Custom-Attributes": f"echoed={attributes}"} if attributes else None,
        )


def main() -> None:
    if "ECHO_EXIT_CODE" in os.environ:
        sys.exit(int(os.environ["ECHO_EXIT_CODE"]))
    server = ThreadingHTTPServer(("127.0.0.1", int(os.environ["SAGEMAKER_BIND_TO_PORT"])), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server.serve_forever()


if __name__ == "__main__":
    main()
