"""Every answer of the container is JSON with a documented status, the errors nginx answers
itself included (malformed HTTP, over-long request lines and headers, bad chunking, a body over
6 MB, a worker that dies with the request, an upstream that is gone), spoken to over raw sockets
so that nothing on the client side tidies the request up."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from serving.gpt2.local import LocalServer
from serving.gpt2.predictor import OPENAPI
from tests.gpt2.helpers import children, cmdline

Running = Callable[[dict[str, str]], AbstractContextManager[LocalServer]]
BODY = b'{"input": "amazon", "parameters": {"max_new_tokens": 2}}'


def request(method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b"") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: localhost", *(f"{k}: {v}" for k, v in (headers or {}).items())]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def exchange(port: int, raw: bytes, method: str = "GET") -> tuple[int, dict[str, str], bytes, bool]:
    """Send `raw` as it is; (status, headers, body, whether the server ends the connection)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(raw)
        response = http.client.HTTPResponse(sock, method=method)
        response.begin()
        body = response.read()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, body, response.will_close


JSON = {"Content-Type": "application/json"}
# (case, raw request, status, error code, the server closes the connection after answering)
CASES: list[tuple[str, bytes, int, str, bool]] = [
    ("not HTTP", b"GARBAGE\r\n\r\n", 400, "bad_request", True),
    ("bad method characters", b"G@T /ping HTTP/1.1\r\nHost: x\r\n\r\n", 400, "bad_request", True),
    ("HTTP/1.1 without Host", b"GET /ping HTTP/1.1\r\n\r\n", 400, "bad_request", True),
    ("request line over 8 KB", request("GET", "/" + "a" * 9000), 414, "uri_too_long", True),
    ("header over 8 KB", request("GET", "/ping", {"X-Long": "a" * 9000}), 400, "header_too_large", True),
    ("headers over 32 KB", request("GET", "/ping", {f"X-{i}": "a" * 4000 for i in range(9)}), 400,
     "header_too_large", True),
    ("bad chunk size", request("POST", "/invocations", {**JSON, "Transfer-Encoding": "chunked"})
     + b"ZZ\r\nabc\r\n0\r\n\r\n", 400, "bad_request", True),
    ("Content-Length and chunked", request("POST", "/invocations", {"Content-Length": "5",
     "Transfer-Encoding": "chunked"}) + b"0\r\n\r\n", 400, "bad_request", True),
    ("Content-Length not a number", request("POST", "/invocations", {"Content-Length": "abc"}), 400,
     "bad_request", True),
    ("gzip transfer coding", request("POST", "/invocations", {"Transfer-Encoding": "gzip"}), 501,
     "not_implemented", True),
    ("HTTP/2.0 request line", b"GET /ping HTTP/2.0\r\nHost: x\r\n\r\n", 505, "http_version_not_supported", True),
    ("body over 6 MB", request("POST", "/invocations", {**JSON, "Content-Length": str(7 * 1024 * 1024)}), 413,
     "payload_too_large", True),
    ("TRACE", request("TRACE", "/invocations"), 405, "method_not_allowed", True),
    ("nginx's error location", request("GET", "/_errors/nginx"), 404, "not_found", False),
    ("POST /ping", request("POST", "/ping", body=b"{}"), 405, "method_not_allowed", False),
    ("GET /invocations", request("GET", "/invocations"), 405, "method_not_allowed", False),
    ("unknown path", request("GET", "/admin"), 404, "not_found", False),
]  # fmt: skip


@pytest.mark.parametrize(("case", "raw", "status", "code", "closes"), CASES, ids=[c[0] for c in CASES])
def test_nginx_and_app_errors_are_json(
    server: LocalServer, case: str, raw: bytes, status: int, code: str, closes: bool
) -> None:
    got, headers, body, closed = exchange(server.port, raw)
    assert (got, headers["content-type"]) == (status, "application/json"), body[:300]
    answer = json.loads(body)
    assert answer["error"]["code"] == code and answer["error"]["message"], answer
    # nginx ends the connection after an error it answers itself (Connection: close: it cannot
    # trust what follows in the stream); the app's own errors keep it open.
    assert closed == closes


def test_gunicorn_never_answers_what_nginx_let_through(server: LocalServer) -> None:
    """gunicorn's own limits (a 4094-byte request line, 100 headers) were lower than nginx's and
    answered with HTML pages: requests within nginx's limits now reach the app."""
    long_line = request("POST", "/invocations?" + "a" * 6000, JSON, BODY)
    many_headers = request("POST", "/invocations", {**JSON, **{f"X-Header-{i}": "a" for i in range(200)}}, BODY)
    for raw in (long_line, many_headers):
        status, headers, body, _ = exchange(server.port, raw)
        assert (status, headers["content-type"]) == (200, "application/json"), body[:300]
        assert json.loads(body)["outputs"]


def test_http_09_gets_the_body_alone(server: LocalServer) -> None:
    """What nginx cannot do: an HTTP/0.9 request (no version) gets an HTTP/0.9 answer, which
    has no status line and no headers; the body is still the JSON."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"GET /ping\r\n")
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    assert not raw.startswith(b"HTTP/")
    assert json.loads(raw)["status"] == "ready"


def test_every_status_above_is_documented() -> None:
    """On the operation of the request's path, or, for a request that names none, on every one;
    another path's 404 is in the description's text."""
    spec = json.loads(OPENAPI.read_text())
    operations = {path: next(iter(ops.values())) for path, ops in spec["paths"].items()}
    for case, raw, status, _, _ in CASES:
        words = raw.split(b"\r\n", 1)[0].decode(errors="replace").split(" ")
        path = words[1].split("?")[0] if len(words) > 1 else ""
        if status == 404:
            assert path not in operations and "any other path answers 404" in spec["info"]["description"]
            continue
        for where in [path] if path in operations else operations:
            assert str(status) in operations[where]["responses"], f"{case}: {status} on {where} is not in openapi.json"


def gunicorn_worker(srv: LocalServer) -> int:
    assert srv.process is not None
    tree = children(srv.process.pid)
    master = min(p for p in tree if b"gunicorn" in cmdline(p))
    return max(children(master))


def test_a_worker_dying_with_the_request_answers_503_retry_after(running: Running) -> None:
    """The request waits in the queue (a 5 s queue delay) when its worker is killed: nginx's 502
    becomes the documented 503 with Retry-After, and gunicorn's new worker serves again."""
    with running({"GPT2_MAX_QUEUE_DELAY_US": "5000000"}) as srv:
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(exchange, srv.port, request("POST", "/invocations", JSON, BODY), "POST")
            time.sleep(1.0)  # the request is in the worker, waiting 5 s for the batch to fill
            os.kill(gunicorn_worker(srv), signal.SIGKILL)
            status, headers, body, _ = waiting.result(timeout=30)
        assert (status, headers.get("retry-after"), headers["content-type"]) == (503, "5", "application/json")
        assert json.loads(body)["error"]["code"] == "unavailable"
        # gunicorn's new worker loads the model (503 loading, with Retry-After, until then) and serves.
        # clock: a generous wait for a worker that loads the tiny model within seconds here
        deadline = time.monotonic() + 90
        while (answer := exchange(srv.port, request("POST", "/invocations", JSON, BODY), "POST"))[0] != 200:
            # clock: the same wait
            assert (answer[0], answer[1].get("retry-after")) == (503, "5") and time.monotonic() < deadline, answer
            time.sleep(0.1)


def test_upstream_gone_answers_503_retry_after(running: Running) -> None:
    """gunicorn's socket gone (nothing listens behind nginx): 503 with Retry-After, as JSON."""
    with running({}) as srv:
        assert srv.process is not None
        master = next(cmdline(p).split() for p in children(srv.process.pid) if cmdline(p).startswith(b"nginx: master"))
        run_dir = Path(master[master.index(b"-p") + 1].decode())
        (run_dir / "gunicorn.sock").unlink()
        status, headers, body, _ = exchange(srv.port, request("POST", "/invocations", JSON, BODY), "POST")
        assert (status, headers.get("retry-after"), headers["content-type"]) == (503, "5", "application/json")
        assert json.loads(body)["error"]["code"] == "unavailable"
