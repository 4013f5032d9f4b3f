"""The container's `serve` run for real on the host (nginx + gunicorn + ONNX Runtime on the
tiny model), spoken to over HTTP: the API, batching of concurrent requests, every kind of
bad input, overload, and the process contract (SIGTERM, a dying child)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import tarfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import psutil
import pytest

from serving.gpt2.local import LocalServer, ping
from tests.gpt2.helpers import JSON, alive, children, cmdline, post


def invoke(port: int, payload: Any) -> tuple[int, dict[str, Any]]:
    status, body, _ = post(port, json.dumps(payload).encode())
    return status, body


def test_ping_is_ready_json(server: LocalServer) -> None:
    status, body = ping(server.port)
    assert status == 200
    assert body == {"status": "ready", "backend": "onnxruntime", "model": "tiny-random-gpt2"}


def test_seed_request(server: LocalServer) -> None:
    status, body = invoke(server.port, {"input": "amazon"})
    assert status == 200, body
    [output] = body["outputs"]
    assert output["input"] == "amazon" and output["prompt_tokens"] >= 1
    [completion] = output["completions"]
    # the default of the tiny build is 16 new tokens, unless the model ends the text first
    assert completion["finish_reason"] in ("length", "eos")
    assert completion["completion_tokens"] == 16 or completion["finish_reason"] == "eos"
    assert completion["generated_text"] == "amazon" + completion["text"]
    assert body["usage"] == {
        "prompt_tokens": output["prompt_tokens"],
        "completion_tokens": completion["completion_tokens"],
    }


def test_greedy_is_deterministic_and_sampling_returns_n(server: LocalServer) -> None:
    request = {"inputs": ["lithium battery", "neural network"], "parameters": {"max_new_tokens": 5}}
    first, second = invoke(server.port, request), invoke(server.port, request)
    assert first[0] == 200 and first[1]["outputs"] == second[1]["outputs"]
    status, body = invoke(
        server.port,
        {"inputs": "patent", "parameters": {"do_sample": True, "num_return_sequences": 3, "max_new_tokens": 4,
                                            "temperature": 0.8, "top_k": 20, "top_p": 0.9}},
    )  # fmt: skip
    assert status == 200
    assert [c["completion_tokens"] <= 4 for c in body["outputs"][0]["completions"]] == [True] * 3


def test_stop_string_cuts_the_completion(server: LocalServer) -> None:
    status, body = invoke(server.port, {"input": "amazon", "parameters": {"max_new_tokens": 20}})
    text = body["outputs"][0]["completions"][0]["text"]
    assert status == 200 and len(text) >= 3
    stop = text[1:3]  # greedy is deterministic: the same request must stop here
    status, body = invoke(server.port, {"input": "amazon", "parameters": {"max_new_tokens": 20, "stop": [stop]}})
    completion = body["outputs"][0]["completions"][0]
    assert completion["finish_reason"] == "stop"
    assert completion["text"] == text[: text.find(stop)]


Running = Callable[[dict[str, str]], AbstractContextManager[LocalServer]]

#: A server whose batch of 8 rows waits for its rows as long as the server lets it (10 s): 8
#: requests sent together are one batch on any host, since it runs once all 8 are in.
BATCH_OF_8 = {"GPT2_MAX_BATCH_SIZE": "8", "GPT2_MAX_QUEUE_DELAY_US": "10000000"}


def test_concurrent_requests_are_batched(server: LocalServer, running: Running) -> None:
    prompts = [f"query {i}" for i in range(8)]
    alone = {p: invoke(server.port, {"input": p, "parameters": {"max_new_tokens": 6}})[1] for p in prompts[:2]}
    with running(BATCH_OF_8) as batching:
        barrier = threading.Barrier(len(prompts))

        def call(prompt: str) -> tuple[int, dict[str, Any]]:
            barrier.wait()
            return invoke(batching.port, {"input": prompt, "parameters": {"max_new_tokens": 6}})

        with ThreadPoolExecutor(len(prompts)) as pool:
            results = list(pool.map(call, prompts))
    assert all(status == 200 for status, _ in results)
    sizes = [body["batch_size"] for _, body in results]
    assert sizes == [8] * 8, f"8 simultaneous requests were not one batch: batch sizes {sizes}"
    # a batched answer is the same as the answer alone (left padding is invisible)
    for prompt, (_, body) in zip(prompts, results, strict=True):
        if prompt in alone:
            assert body["outputs"] == alone[prompt]["outputs"]


LONG = "amazon " * 60  # far more than the tiny build's 42 tokens


def params(**given: Any) -> bytes:
    return json.dumps({"input": "a", "parameters": given}).encode()


BAD_REQUESTS: list[tuple[str, bytes, dict[str, str], int, str]] = [
    ("malformed JSON", b'{"input": "amazon"', JSON, 400, "not valid JSON"),
    # past Python's int conversion limit json.loads raises a plain ValueError, not JSONDecodeError
    ("5000 digits", b'{"input": "a", "parameters": {"top_k": ' + b"1" * 5000 + b"}}", JSON, 400, "digits"),
    ("NaN is not JSON", b'{"input": "a", "parameters": {"temperature": NaN}}', JSON, 400, "NaN is not a JSON number"),
    ("no content type", b'{"input": "amazon"}', {}, 415, "application/json"),
    ("wrong content type", b'{"input": "amazon"}', {"Content-Type": "text/plain"}, 415, "'text/plain'"),
    ("latin-1 charset", b'{"input": "amazon"}', {"Content-Type": "application/json; charset=latin-1"}, 415, "UTF-8"),
    ("empty body", b"", JSON, 400, "body is empty"),
    ("invalid UTF-8", b'{"input": "\xff\xfe"}', JSON, 400, "not valid UTF-8"),
    ("array body", b'["amazon"]', JSON, 400, "JSON array"),
    ("missing input", b'{"parameters": {}}', JSON, 400, "exactly one of"),
    ("both input forms", b'{"input": "a", "inputs": "b"}', JSON, 400, "exactly one of"),
    ("empty input", b'{"input": ""}', JSON, 400, "input is an empty string"),
    ("empty list", b'{"inputs": []}', JSON, 400, "non-empty"),
    ("number input", b'{"input": 42}', JSON, 400, "input is a JSON number"),
    ("null in list", b'{"inputs": ["a", null]}', JSON, 400, "inputs[1] is a JSON null"),
    ("unknown field", b'{"input": "a", "prompt": "b"}', JSON, 400, "unknown field 'prompt'"),
    ("unknown parameter", params(beams=2), JSON, 400, "unknown parameter 'beams'"),
    ("parameters not object", b'{"input": "a", "parameters": [1]}', JSON, 400, "parameters is a JSON array"),
    ("max_new_tokens zero", params(max_new_tokens=0), JSON, 400, "max_new_tokens=0"),
    ("max_new_tokens text", params(max_new_tokens="5"), JSON, 400, 'max_new_tokens="5"'),
    ("max_new_tokens bool", params(max_new_tokens=True), JSON, 400, "max_new_tokens=true"),
    ("max_new_tokens huge", params(max_new_tokens=1000), JSON, 400, "from 1 to 41"),
    ("temperature zero", params(do_sample=True, temperature=0), JSON, 400, "temperature=0"),
    # a denormal passed "> 0", then overflowed logits / T to NaN and failed every request in its batch
    ("temperature denormal", params(do_sample=True, temperature=1e-320), JSON, 400, "parameters.temperature=1e-320 is invalid: allowed is a number at least 0.01"),  # noqa: E501
    ("temperature below min", params(do_sample=True, temperature=0.005), JSON, 400, "temperature=0.005"),
    ("temperature above max", params(do_sample=True, temperature=100.5), JSON, 400, "at most 100.0"),
    ("temperature text", params(do_sample=True, temperature="hot"), JSON, 400, 'temperature="hot"'),
    ("top_p zero", params(do_sample=True, top_p=0), JSON, 400, "top_p=0 is invalid: allowed is a number greater than 0.0"),  # noqa: E501
    ("top_p above one", params(do_sample=True, top_p=1.5), JSON, 400, "top_p=1.5"),
    ("top_k negative", params(top_k=-1), JSON, 400, "top_k=-1"),
    ("top_k over vocabulary", params(top_k=10**9), JSON, 400, "top_k=1000000000"),
    ("do_sample text", params(do_sample="yes"), JSON, 400, 'do_sample="yes"'),
    ("n without sampling", params(num_return_sequences=2), JSON, 400, "needs parameters.do_sample"),
    ("n over batch", params(do_sample=True, num_return_sequences=11), JSON, 400, "from 1 to 10"),
    ("too many rows", json.dumps({"inputs": ["a"] * 6, "parameters": {"do_sample": True, "num_return_sequences": 2}}).encode(), JSON, 400, "at most 10 per request"),  # noqa: E501
    ("stop too many", params(stop=["a", "b", "c", "d", "e"]), JSON, 400, "at most 4 strings"),
    ("stop empty", params(stop=[""]), JSON, 400, "1 to 64 characters"),
    ("input too long", json.dumps({"input": LONG}).encode(), JSON, 400, "shorten it to at most 41 tokens"),
    ("prompt plus new too long", json.dumps({"input": "amazon web services", "parameters": {"max_new_tokens": 41}}).encode(), JSON, 400, "exceed the model's 42 tokens"),  # noqa: E501
    ("lone surrogate", b'{"input": "abc\\ud800"}', JSON, 400, "unpaired UTF-16 surrogate"),
    ("surrogate in stop", params(stop=["\ud800"]), JSON, 400, "parameters.stop[0] contains"),
    ("nested too deeply", b'{"input": "a", "parameters": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", JSON, 400, "too deeply"),  # noqa: E501
    ("over 6 MB", b'{"input": "' + b"a" * (6 * 1024 * 1024) + b'"}', JSON, 413, "6 MB"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "body", "headers", "status", "message"), BAD_REQUESTS, ids=[c[0] for c in BAD_REQUESTS]
)
def test_bad_input_gets_a_4xx_json_error(
    server: LocalServer, case: str, body: bytes, headers: dict[str, str], status: int, message: str
) -> None:
    got, answer, _ = post(server.port, body, headers)
    assert got == status, answer
    assert message in answer["error"]["message"], answer
    assert answer["error"]["code"]


def test_bad_input_loses_nothing(server: LocalServer) -> None:
    """After every bad request above, the same worker still answers: no 5xx, no restart."""
    assert server.process is not None
    before = children(server.process.pid)
    for _, body, headers, _, _ in BAD_REQUESTS:
        assert post(server.port, body, headers)[0] < 500
    assert children(server.process.pid) == before
    assert invoke(server.port, {"input": "amazon"})[0] == 200


def test_wrong_method_and_path(server: LocalServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/invocations")
    response = conn.getresponse()
    assert response.status == 405 and response.getheader("Allow") == "POST"
    assert json.loads(response.read())["error"]["code"] == "method_not_allowed"
    conn.request("GET", "/admin")
    response = conn.getresponse()
    assert response.status == 404 and "POST /invocations" in json.loads(response.read())["error"]["message"]
    conn.close()


def test_openapi_ships_with_the_container(server: LocalServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/openapi.json")
    spec = json.loads(conn.getresponse().read())
    conn.close()
    assert set(spec["paths"]) == {"/ping", "/invocations", "/openapi.json"}
    assert set(spec["paths"]["/invocations"]["post"]["responses"]) >= {"200", "400", "413", "415", "503"}


@pytest.mark.timing
def test_full_queue_and_deadline_answer_503_with_retry_after(running: Running) -> None:
    # batches of 4 rows, a queue of 4, a 3 s queue delay and a 1 s deadline: overload on demand
    env = {"GPT2_MAX_BATCH_SIZE": "4", "GPT2_MAX_QUEUE_SIZE": "4", "GPT2_MAX_QUEUE_DELAY_US": "3000000",
           "GPT2_REQUEST_TIMEOUT_S": "1"}  # fmt: skip
    three = json.dumps({"inputs": ["a", "b", "c"], "parameters": {"max_new_tokens": 2}}).encode()
    with running(env) as srv, ThreadPoolExecutor(2) as pool:
        # Two requests of three rows together: whichever comes first waits in the queue for a
        # fourth row, the other does not fit (in either order).
        both = [pool.submit(post, srv.port, three) for _ in range(2)]
        answers = sorted((status, body["error"]["code"], headers.get("Retry-After")) for status, body, headers in
                         (f.result() for f in both))  # fmt: skip
        # the queue delay (3 s) outlasts the deadline (1 s): answered before SageMaker would give up
        assert answers == [(503, "overloaded", "1"), (503, "timeout", "1")]
        # a full batch does not wait for the delay, and the server is still whole. Timing: the
        # 1 s deadline bounds this answer, 4 rows of 2 tokens of the tiny build. Its round trip
        # through nginx, measured on the 2-core dev host: 1.5-3 ms beside a running `make test`,
        # 1.6-26 ms with two CPU burners added (load 10): the deadline is 40 times the worst of
        # those; a deadline that ran from the 3 s delay would fail it, as it should.
        four = json.dumps({"inputs": ["a", "b", "c", "d"], "parameters": {"max_new_tokens": 2}}).encode()
        status, body, _ = post(srv.port, four)
        assert status == 200 and body["batch_size"] == 4


def test_sigterm_stops_everything(running: Running) -> None:
    with running({}) as srv:
        assert srv.process is not None
        tree = children(srv.process.pid)
        assert len(tree) >= 4  # nginx master + worker(s), gunicorn master + worker
        srv.process.send_signal(signal.SIGTERM)
        assert srv.process.wait(timeout=30) == 0
        assert not any(psutil.pid_exists(pid) for pid in tree)


@pytest.mark.parametrize("child", [b"nginx: master", b"gunicorn"])
def test_serve_exits_when_a_child_dies_and_leaves_nothing(running: Running, child: bytes) -> None:
    """Either server dying ends the container: serve exits non-zero, and nothing it started
    stays, neither the other server nor the dead one's workers (nginx workers outlive a killed
    master and hold the port)."""
    with running({}) as srv:
        assert srv.process is not None
        tree = children(srv.process.pid)
        masters = [p for p in tree if cmdline(p).startswith(b"nginx: master")]
        masters += sorted(p for p in tree if b"gunicorn" in cmdline(p))[:1]
        victim = next(p for p in masters if cmdline(p).find(child) >= 0)
        os.kill(victim, signal.SIGKILL)
        assert srv.process.wait(timeout=30) == 1
        left = [p for p in tree if alive(p)]
        assert left == [], f"processes of the container left: {left}"
        with socket.socket() as s:
            # No one listens any more (SO_REUSEADDR: closed connections may linger in TIME_WAIT).
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", srv.port))


def test_serve_killed_leaves_nothing(running: Running) -> None:
    """serve itself killed with SIGKILL (no handler runs, nothing of its own cleans up): the
    kernel's parent-death signal stops nginx and gunicorn, and their workers with them. Before,
    nginx's master and workers were left holding the port."""
    with running({}) as srv:
        assert srv.process is not None
        tree = children(srv.process.pid)
        assert any(cmdline(p).startswith(b"nginx: master") for p in tree)
        srv.process.kill()
        srv.process.wait(timeout=30)
        # clock: how long to wait for processes to end, not a bound on their speed (gunicorn's
        # graceful stop allows its workers 20 s).
        deadline = time.monotonic() + 60
        while (left := [p for p in tree if alive(p)]) and time.monotonic() < deadline:  # clock: the same deadline
            time.sleep(0.1)
        assert left == [], f"processes of the container left: {[cmdline(p) for p in left if alive(p)]}"


def test_altered_model_file_is_refused_by_name(model_tar: Path, tmp_path: Path, free_port: Callable[[], int]) -> None:
    with tarfile.open(model_tar) as tar:
        tar.extractall(tmp_path, filter="data")
    onnx = tmp_path / "model.onnx"
    onnx.write_bytes(onnx.read_bytes()[:-10] + b"0123456789")
    srv = LocalServer(model_dir=tmp_path, port=free_port(), env={"GPT2_BACKEND": "onnxruntime"}).start()
    try:
        with pytest.raises(RuntimeError, match=r"model\.onnx has sha256"):
            srv.wait_ready(timeout=90)
        status, body = srv.invoke({"input": "amazon"})
        assert status == 503 and body["error"]["code"] == "model_failed"
    finally:
        srv.stop()


@pytest.mark.parametrize("backend", ["auto", "onnxruntime"])
def test_gpu_instance_without_cuda_never_turns_healthy(
    model_tar: Path, free_port: Callable[[], int], backend: str
) -> None:
    """What Gpt2Stack sets on a GPU instance type: without CUDA (this host has
    none) the model fails to load and /ping stays 503, instead of serving from the CPU."""
    env = {"GPT2_REQUIRE_GPU": "true", "GPT2_BACKEND": backend}
    srv = LocalServer(model_tar, port=free_port(), env=env).start()
    try:
        with pytest.raises(RuntimeError, match=r"GPT2_REQUIRE_GPU=true.*CUDA does not start"):
            srv.wait_ready(timeout=90)
        assert ping(srv.port)[0] == 503
        status, body = srv.invoke({"input": "amazon"})
        assert status == 503 and body["error"]["code"] == "model_failed", body
    finally:
        srv.stop()


def test_bad_setting_stops_the_start_with_its_name(model_tar: Path, free_port: Callable[[], int]) -> None:
    srv = LocalServer(model_tar, port=free_port(), env={"GPT2_MAX_QUEUE_DELAY_US": "soon"}).start()
    assert srv.process is not None
    try:
        assert srv.process.wait(timeout=30) == 2
    finally:
        srv.stop()


def test_ping_is_503_until_loaded_and_warmed(model_dir: Path) -> None:
    from serving.gpt2.predictor import Predictor
    from serving.gpt2.settings import ServerSettings

    predictor = Predictor(ServerSettings(model_dir=model_dir, backend="onnxruntime", threads=1))
    status, body, headers = predictor.ping()
    assert (status, body["status"], headers["Retry-After"]) == (503, "loading", "5")
    predictor.load()
    assert predictor.ping()[0] == 200


def test_smallest_temperature_samples(server: LocalServer) -> None:
    """The lower bound itself is served: large logits over 0.01 do not overflow."""
    request = {
        "inputs": ["amazon", "patent"],
        "parameters": {"do_sample": True, "temperature": 0.01, "max_new_tokens": 4},
    }
    status, body = invoke(server.port, request)
    assert status == 200, body
    assert all(c["completion_tokens"] <= 4 for o in body["outputs"] for c in o["completions"])
