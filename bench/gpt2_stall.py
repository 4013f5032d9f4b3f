"""How long one large request holds back /ping and the other requests (issue 16 item 1).

The container's `serve` (nginx + gunicorn + ONNX Runtime) runs on the tiny GPT-2 built for
128 positions (``--tiny --max-length 128``: inputs of up to 1651 characters can fit). For each
shape of body near the 6 MB limit (a long string, a long text of words, a string of escapes, many
inputs, many parameters, one key many times, many small arrays, deep nesting, a long number,
whitespace around a valid request, and the largest valid request: max_batch_size inputs of the
longest text that fits), one client sends that body `--repeats` times in a row while a second
sends GET /ping every 5 ms and a third sends one-token requests ({"input": "amazon"}) one after
another. Reported: the large request's status and time, and the time of every /ping and of every
small request while the large ones ran; and the same two with no large request (idle).

    python -m bench.gpt2_stall                 # about 1 minute
    python -m bench.gpt2_stall --repeats 1     # quicker (and for a server that stalls: seconds a request)

Results: ``bench/results/gpt2_stall.json`` and a Markdown table on stdout (for docs/BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from bench.gpt2_serving import ROOT, build, percentile
from serving.gpt2.local import LocalServer

LIMIT = 6 * 1024 * 1024 - 64
SMALL = json.dumps({"input": "amazon", "parameters": {"max_new_tokens": 1}}).encode()


def fill(head: bytes, item: bytes, tail: bytes) -> bytes:
    """`head`, as many `item`s as bring the body to the limit, `tail`."""
    return head + item * ((LIMIT - len(head) - len(tail)) // len(item)) + tail


def shapes(longest_token: str, max_rows: int, max_prompt_tokens: int) -> dict[str, bytes]:
    keys = b", ".join(b'"p%07d": 1' % i for i in range(LIMIT // 15 - 4))
    largest_valid = {"inputs": [longest_token * max_prompt_tokens] * max_rows, "parameters": {"max_new_tokens": 1}}
    return {
        "long string": fill(b'{"input": "', b"a", b'"}'),
        "long text of words": fill(b'{"input": "', b"amazon ", b'"}'),
        "long string of escapes": fill(b'{"input": "', b"\\u00e9", b'"}'),
        "many inputs": fill(b'{"inputs": [', b'"a", ', b'"a"]}'),
        "many parameters": b'{"input": "a", "parameters": {' + keys + b"}}",
        "one key many times": fill(b'{"input": "a", "parameters": {', b'"top_k": 1, ', b'"top_k": 1}}'),
        "many empty arrays": fill(b'{"input": "a", "parameters": {"stop": [', b"[], ", b"[]]}}"),
        "deep nesting": b'{"input": "a", "parameters": ' + b"[" * (LIMIT // 2 - 20) + b"]" * (LIMIT // 2 - 20) + b"}",
        "long number": fill(b'{"input": "a", "parameters": {"top_k": ', b"1", b"}}"),
        "whitespace around a valid request": fill(SMALL[:-1], b" ", b"}"),
        "largest valid request": json.dumps(largest_valid).encode(),
    }


class Probe:
    """Sends one kind of request over one keep-alive connection, again and again, from a process
    of its own (so that the client's own GIL does not time the server), until stopped; keeps each
    one's time (seconds) and status."""

    def __init__(self, port: int, method: str, path: str, body: bytes | None, pause_s: float) -> None:
        context = multiprocessing.get_context("fork")
        self._stop = context.Event()
        self._ready = context.Event()
        self._results: multiprocessing.Queue[tuple[list[float], list[int]]] = context.Queue()
        self._process = context.Process(target=self._run, args=(port, method, path, body, pause_s), daemon=True)
        self.times: list[float] = []
        self.statuses: list[int] = []

    def start(self) -> None:
        self._process.start()
        self._ready.wait()

    def stop(self) -> None:
        self._stop.set()
        self.times, self.statuses = self._results.get(timeout=300)
        self._process.join()

    def _run(self, port: int, method: str, path: str, body: bytes | None, pause_s: float) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        headers = {"Content-Type": "application/json"}
        times, statuses = [], []
        self._ready.set()
        while not self._stop.is_set():
            started = time.perf_counter()
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            times.append(time.perf_counter() - started)
            statuses.append(response.status)
            if response.will_close:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            self._stop.wait(pause_s)
        conn.close()
        self._results.put((times, statuses))


def large(port: int, body: bytes) -> tuple[int, float, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    started = time.perf_counter()
    conn.request("POST", "/invocations", body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    answer = json.loads(response.read())
    elapsed = time.perf_counter() - started
    conn.close()
    return response.status, elapsed, answer.get("error", {}).get("code", "")


def summary(times: list[float]) -> dict[str, float]:
    return {
        "count": len(times),
        "p50_ms": 1000 * percentile(times, 0.5),
        "p99_ms": 1000 * percentile(times, 0.99),
        "max_ms": 1000 * max(times),
    }


def measure(port: int, body: bytes | None, repeats: int) -> dict[str, Any]:
    """/ping and small requests, timed while `body` is sent `repeats` times in a row (None: for
    two seconds of nothing else)."""
    pings = Probe(port, "GET", "/ping", None, 0.005)
    smalls = Probe(port, "POST", "/invocations", SMALL, 0.0)
    pings.start()
    smalls.start()
    results = []
    if body is None:
        time.sleep(2.0)
    else:
        results = [large(port, body) for _ in range(repeats)]
    for probe in (pings, smalls):
        probe.stop()
    assert set(pings.statuses) == {200} and set(smalls.statuses) == {200}, (pings.statuses, smalls.statuses)
    return {"large": results, "ping": summary(pings.times), "small": summary(smalls.times)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument(
        "--repeats", type=int, default=20, help="large requests of each shape, one after another (default 20)"
    )
    parser.add_argument("--port", type=int, default=18182)
    args = parser.parse_args(argv)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    model_dir = build(args.out_dir / "artifacts-tiny-128", ["--tiny", "--max-length", "128"])
    generation = json.loads((model_dir / "generation.json").read_text())
    vocab = json.loads((model_dir / "tokenizer" / "tokenizer.json").read_text())
    longest = max([*vocab["model"]["vocab"], *(t["content"] for t in vocab["added_tokens"])], key=len)
    bodies = shapes(longest, generation["max_batch_size"], generation["max_total_length"] - 1)
    env = {"GPT2_BACKEND": "onnxruntime", "GPT2_THREADS": "1"}
    rows: dict[str, Any] = {}
    with LocalServer(model_dir=model_dir, port=args.port, env=env, log=args.out_dir / "gpt2_stall_server.log") as srv:
        srv.wait_ready(timeout=120)
        rows["idle"] = measure(srv.port, None, 0)
        for name, body in bodies.items():
            rows[name] = measure(srv.port, body, args.repeats)
            print(row_text(name, len(body), rows[name]), flush=True)
    report = {
        "command": " ".join([Path(sys.executable).name, "-m", "bench.gpt2_stall", *(argv or sys.argv[1:])]),
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} CPUs, {platform.platform()}",
        "sizes": {name: len(body) for name, body in bodies.items()},
        "results": rows,
    }
    (args.out_dir / "gpt2_stall.json").write_text(json.dumps(report, indent=2) + "\n")
    print()
    print(table(report))
    return 0


def row_text(name: str, size: int, row: dict[str, Any]) -> str:
    statuses = sorted({f"{status} {code}".strip() for status, _, code in row["large"]})
    large_ms = 1000 * max(elapsed for _, elapsed, _ in row["large"])
    return (
        f"| {name} | {size} | {', '.join(statuses)} | {large_ms:.0f} | {row['ping']['count']} | "
        f"{row['ping']['p50_ms']:.1f} | {row['ping']['p99_ms']:.1f} | {row['ping']['max_ms']:.1f} | "
        f"{row['small']['count']} | {row['small']['p50_ms']:.1f} | {row['small']['max_ms']:.1f} |"
    )


def table(report: dict[str, Any]) -> str:
    lines = [
        "| body | bytes | its answer | its slowest ms | pings | ping p50 ms | ping p99 ms | ping max ms "
        "| small requests | small p50 ms | small max ms |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in report["results"].items():
        if name == "idle":
            lines.append(
                f"| (none: idle) | | | | {row['ping']['count']} | {row['ping']['p50_ms']:.1f} | "
                f"{row['ping']['p99_ms']:.1f} | {row['ping']['max_ms']:.1f} | {row['small']['count']} | "
                f"{row['small']['p50_ms']:.1f} | {row['small']['max_ms']:.1f} |"
            )
        else:
            lines.append(row_text(name, report["sizes"][name], row))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
