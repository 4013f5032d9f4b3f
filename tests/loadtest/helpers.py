"""A stand-in for SageMaker's runtime on 127.0.0.1: each request gets the next canned HTTP
answer, so that boto3 parses the wire format AWS sends (headers, status, JSON body) into the
exceptions the load tester classifies."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import boto3

from loadtest.invokers import client_config

REGION = "us-east-1"
ACCOUNT = "123456789012"


@dataclass(frozen=True)
class Canned:
    status: int
    body: bytes = b"{}"
    headers: dict[str, str] = field(default_factory=dict)
    #: Seconds to wait before answering (past the client's read timeout: a timeout).
    delay: float = 0.0


def ok(answer: Any = None) -> Canned:
    return Canned(200, json.dumps(answer or {"outputs": []}).encode(), {"Content-Type": "application/json"})


def aws_error(status: int, code: str, **members: Any) -> Canned:
    """An error as SageMaker's runtime (rest-json) sends it: the code in x-amzn-ErrorType."""
    members = members or {"message": f"{code} from the stand-in"}
    body = json.dumps(members).encode()
    return Canned(
        status, body, {"x-amzn-ErrorType": f"{code}:http://internal.amazon.com/", "Content-Type": "application/json"}
    )


def model_error(original_status: int, message: str = '{"error": "bad"}') -> Canned:
    """InvokeEndpoint's ModelError: the container answered `original_status` (0: no answer in time)."""
    kind = "CLIENT" if 400 <= original_status < 500 else "SERVER"
    return aws_error(
        424,
        "ModelError",
        Message=f'Received {kind.lower()} error ({original_status}) from primary with message "{message}".',
        ErrorCode=f"{kind}_ERROR_FROM_MODEL",
        LogStreamArn=f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/sagemaker/Endpoints/e",
        OriginalMessage=message,
        OriginalStatusCode=original_status,
    )


#: What SageMaker answers when the container does not answer within 60 s.
SAGEMAKER_TIMEOUT = model_error(
    0, "Your invocation timed out while waiting for a response from container primary. Review the latency metrics."
)


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up (its read timeout) closed the connection: nothing to report."""


class CannedRuntime:
    """The stand-in server; a context manager. `answers` are used in turn, round and round."""

    def __init__(self, answers: Sequence[Canned]) -> None:
        self.answers = itertools.cycle(list(answers))
        self.received: list[tuple[str, dict[str, str]]] = []
        self._lock = threading.Lock()
        runtime = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with runtime._lock:
                    runtime.received.append((self.path, dict(self.headers)))
                    answer = next(runtime.answers)
                time.sleep(answer.delay)
                self.send_response(answer.status)
                for key, value in answer.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> CannedRuntime:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()

    def client(self, *, read_timeout: float = 5.0) -> Any:
        return boto3.client(
            "sagemaker-runtime",
            endpoint_url=self.url,
            region_name=REGION,
            aws_access_key_id="test",
            aws_secret_access_key="test",
            config=client_config(1, read_timeout),
        )


def environment(url: str) -> dict[str, str]:
    """Variables that point boto3 at `url` with fake credentials and nothing of the host's."""
    return {
        "AWS_ENDPOINT_URL": url,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


def level(concurrency: int = 1, **overrides: Any) -> dict[str, Any]:
    """A level's summary as the runner writes it, with `overrides`."""
    base: dict[str, Any] = {
        "concurrency": concurrency,
        "seconds": 10.0,
        "started_at": "2026-12-01T10:00:05.000Z",
        "ended_at": "2026-12-01T10:00:15.000Z",
        "elapsed_s": 10.0,
        "requests": 0,
        "successes": 0,
        "errors": {},
        "error_examples": {},
        "qps": 0.0,
        "latency_ms": None,
        "interrupted": False,
    }
    return {**base, **overrides}


def lines(text: str) -> Iterator[str]:
    return (line for line in text.splitlines() if line.strip())
