"""The seed's JMeter measurement, redone: GPT-2 latency and QPS through the real server.

For each backend (ONNX Runtime on the fp32 graph, on the weight-only int8 graph of a
``--cpu-precision int8`` build and on the int8 weights-and-activations graph of an
``int8-dynamic`` build, PyTorch eager) and with dynamic batching on and off, the
container's `serve` (nginx + gunicorn) is started on the 124M GPT-2 architecture with random
weights (``GPT2Config()`` defaults; nothing comes from the hub) and driven by closed-loop
clients at concurrency 1, 4 and 16: mean, p50 and p95 latency and QPS. The server overhead
(HTTP, JSON, queue) is the difference between a one-token request through the server and the
same call made directly on the backend.

    python -m bench.gpt2_serving                 # full run, about 10 minutes on 2 cores
    python -m bench.gpt2_serving --quick         # fewer requests, for a smoke test

Results: ``bench/results/gpt2_serving.json``, a Markdown table on stdout (for
docs/BENCHMARKS.md) and the plot ``docs/gpt2_serving.png``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

from serving.gpt2.local import LocalServer

ROOT = Path(__file__).resolve().parent.parent


# About 16 tokens with the offline tokenizer, as the seed's short search queries.
PROMPT = "patent search query autocompletion for lithium battery cathode material"
#: Benchmark label: (GPT2_BACKEND, the builder's --cpu-precision of the payload it serves).
BACKENDS = {"onnxruntime": ("onnxruntime", "fp32"), "onnxruntime-int8": ("onnxruntime", "int8"),
            "onnxruntime-int8-dynamic": ("onnxruntime", "int8-dynamic"), "torch": ("torch", "fp32")}  # fmt: skip


def builder_digest() -> str:
    """What decides a build besides its options: the builder's and the graph's code. A build
    made by other code is made again, never benchmarked as if it were this one."""
    digest = hashlib.sha256()
    for path in sorted([*(ROOT / "artifacts_builder").glob("*.py"), ROOT / "serving" / "gpt2" / "generation.py"]):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def build(out: Path, options: list[str]) -> Path:
    """Build once per set of options and builder code (the builder itself is the documented
    CLI) and extract."""
    tar = out / "gpt2" / "model.tar.gz"
    marker = out / "gpt2" / ("built" + "_".join(options).replace("-", "") + "_" + builder_digest())
    if not marker.exists():
        cmd = [sys.executable, "-m", "artifacts_builder.gpt2", *options, "--no-tensorrt", "--out", str(out)]
        subprocess.run(cmd, check=True, cwd=ROOT)
        marker.touch()
    model_dir = out / "model"
    if not (model_dir / "manifest.json").exists() or model_dir.stat().st_mtime < tar.stat().st_mtime:
        with tarfile.open(tar) as t:
            t.extractall(model_dir, filter="data")
    return model_dir


def cpu() -> dict[str, Any]:
    """The host's processor and its int8 instructions, which decide how the int8-dynamic graph
    is built (8- or 7-bit weights) and how fast its products run."""
    from serving.gpt2.backends import CPUINFO, int8_dot_flags, u8s8_saturates

    try:
        lines = CPUINFO.read_text().splitlines()
        models = {line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")}
    except OSError:
        models = set()
    return {
        "model": ", ".join(sorted(models)) or platform.processor() or "unknown",
        "int8_dot_product": int8_dot_flags() or [],
        "u8s8_saturates": u8s8_saturates(),
    }


def build_124m(out_dir: Path, precision: str, max_batch: int = 16) -> Path:
    """The 124M architecture (random weights, seeded: every precision gets the same ones) built
    for one `--cpu-precision`, in a folder per precision that the bounds benchmark reuses."""
    options = ["--random-weights", "--max-batch-size", str(max(16, max_batch)), "--max-length", "64"]
    if precision == "fp32":
        return build(out_dir / "artifacts-124m", options)
    return build(out_dir / f"artifacts-124m-{precision}", [*options, "--cpu-precision", precision])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def load(server: LocalServer, concurrency: int, requests: int, new_tokens: int) -> dict[str, Any]:
    """Closed loop: `concurrency` clients, each sends its next request when the last returns."""
    payload = {"input": PROMPT, "parameters": {"max_new_tokens": new_tokens}}
    latencies: list[float] = []
    tokens: list[int] = []
    batches: list[int] = []
    errors: list[int] = []
    lock = threading.Lock()
    remaining = [requests]

    def client() -> None:
        while True:
            with lock:
                if remaining[0] == 0:
                    return
                remaining[0] -= 1
            started = time.perf_counter()
            status, body = server.invoke(payload)
            elapsed = time.perf_counter() - started
            with lock:
                if status != 200:
                    errors.append(status)
                    continue
                latencies.append(elapsed)
                tokens.append(body["usage"]["completion_tokens"])
                batches.append(body["batch_size"])

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    return {
        "concurrency": concurrency,
        "requests": len(latencies),
        "errors": errors,
        "qps": len(latencies) / wall,
        "mean_ms": 1000 * statistics.mean(latencies),
        "p50_ms": 1000 * percentile(latencies, 0.5),
        "p95_ms": 1000 * percentile(latencies, 0.95),
        "mean_new_tokens": statistics.mean(tokens),
        "mean_batch": statistics.mean(batches),
    }


def overhead(model_dir: Path, port: int, reps: int, threads: int, log: Path) -> dict[str, float]:
    """Median one-token request through nginx + gunicorn + batcher, minus the same backend
    call made directly in this process with the same thread count."""
    from serving.gpt2.backends import OnnxRuntimeBackend
    from serving.gpt2.generation import ModelInfo, SamplingParams
    from serving.gpt2.predictor import Tokenizer

    env = {"GPT2_BACKEND": "onnxruntime", "GPT2_MAX_BATCH_SIZE": "1", "GPT2_MAX_QUEUE_DELAY_US": "0",
           "GPT2_THREADS": str(threads)}  # fmt: skip
    payload = {"input": PROMPT, "parameters": {"max_new_tokens": 1}}
    with LocalServer(model_dir=model_dir, port=port, env=env, log=log) as server:
        server.wait_ready(timeout=600)
        served = timed(lambda: server.invoke(payload), reps)
    backend = OnnxRuntimeBackend(model_dir, ModelInfo.load(model_dir), threads=threads)
    ids = Tokenizer(model_dir / "tokenizer").encode(PROMPT)
    direct = timed(lambda: backend.generate([ids], [SamplingParams(max_new_tokens=1)]), reps)
    return {
        "served_p50_ms": 1000 * statistics.median(served),
        "direct_p50_ms": 1000 * statistics.median(direct),
        "overhead_ms": 1000 * (statistics.median(served) - statistics.median(direct)),
    }


def timed(call: Any, reps: int) -> list[float]:
    for _ in range(5):
        call()
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return times


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (qps_ax, lat_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    for run in results:
        label = f"{run['backend']}, batching {'on' if run['batching'] else 'off'}"
        xs = [p["concurrency"] for p in run["points"]]
        qps_ax.plot(xs, [p["qps"] for p in run["points"]], marker="o", label=label)
        lat_ax.plot(xs, [p["p50_ms"] for p in run["points"]], marker="o", label=label)
    for ax, title in ((qps_ax, "throughput (QPS)"), (lat_ax, "p50 latency (ms)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(
            [p["concurrency"] for p in results[0]["points"]], [str(p["concurrency"]) for p in results[0]["points"]]
        )
        ax.set_xlabel("concurrent clients")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    qps_ax.legend(fontsize=8)
    fig.suptitle("GPT-2 124M (random weights), 32 new tokens, through nginx + gunicorn, 2 CPU cores")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| backend | batching | concurrency | requests | QPS | mean ms | p50 ms | p95 ms | mean batch |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in results:
        for p in run["points"]:
            lines.append(
                f"| {run['backend']} | {'on' if run['batching'] else 'off'} | {p['concurrency']} | {p['requests']} | "
                f"{p['qps']:.2f} | {p['mean_ms']:.0f} | {p['p50_ms']:.0f} | {p['p95_ms']:.0f} | {p['mean_batch']:.1f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--plot", type=Path, default=ROOT / "docs" / "gpt2_serving.png")
    parser.add_argument("--backends", nargs="+", choices=list(BACKENDS), default=list(BACKENDS))
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 4, 16])
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--requests", type=int, default=2, help="requests per client per point (default 2)")
    parser.add_argument(
        "--min-requests", type=int, default=16, help="at least this many per point (default 16: less noise at c=1)"
    )
    parser.add_argument("--max-queue-delay-us", type=int, default=20_000)
    parser.add_argument("--overhead-reps", type=int, default=200)
    parser.add_argument("--port", type=int, default=18181)
    parser.add_argument("--quick", action="store_true", help="1 request per client, 4 per point, 40 overhead reps")
    args = parser.parse_args(argv)
    if args.quick:
        args.requests, args.min_requests, args.overhead_reps = 1, 4, 40
    max_batch = max(args.concurrency)
    threads = len(os.sched_getaffinity(0))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    log = args.out_dir / "gpt2_server.log"
    # One build per precision serves every run: the server's GPT2_MAX_BATCH_SIZE may be lower
    # than the build's. fp32 is always built: the overhead on the 124M model runs on it.
    precisions = sorted({"fp32"} | {BACKENDS[b][1] for b in args.backends})
    model_dirs = {precision: build_124m(args.out_dir, precision, max_batch) for precision in precisions}
    results = []
    for backend in args.backends:
        server_backend, precision = BACKENDS[backend]
        for batching in (True, False):
            env = {
                "GPT2_BACKEND": server_backend,
                "GPT2_MAX_BATCH_SIZE": str(max_batch if batching else 1),
                "GPT2_MAX_QUEUE_DELAY_US": str(args.max_queue_delay_us if batching else 0),
                "GPT2_MAX_QUEUE_SIZE": str(4 * max_batch),
                "GPT2_THREADS": str(threads),
            }
            with LocalServer(model_dir=model_dirs[precision], port=args.port, env=env, log=log) as server:
                server.wait_ready(timeout=600)
                load(server, 1, 2, args.new_tokens)  # warm the whole path
                points = []
                for c in args.concurrency:
                    point = load(server, c, max(args.min_requests, args.requests * c), args.new_tokens)
                    mode = "on " if batching else "off"
                    print(
                        f"{backend:16} batching {mode} c={c:<3} qps {point['qps']:6.2f}  "
                        f"p50 {point['p50_ms']:7.0f} ms  p95 {point['p95_ms']:7.0f} ms  "
                        f"batch {point['mean_batch']:.1f}  tokens {point['mean_new_tokens']:.1f}",
                        flush=True,
                    )
                    points.append(point)
            results.append({"backend": backend, "batching": batching, "points": points})
    # The HTTP/JSON/queue cost does not depend on the model: measured on the tiny model, where
    # the model call is ~2 ms and the noise of a shared machine does not swamp a few ms.
    tiny_dir = build(args.out_dir / "artifacts-tiny", ["--tiny"])
    over = overhead(tiny_dir, args.port, args.overhead_reps, threads, log)
    over_124m = overhead(model_dirs["fp32"], args.port, max(10, args.overhead_reps // 4), threads, log)
    summary = targets(results, over)
    report = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": f"{platform.machine()}, {threads} CPUs, {platform.platform()}",
        "cpu": cpu(),
        "new_tokens": args.new_tokens,
        "results": results,
        "overhead": over,
        "overhead_124m": over_124m,
        "targets": summary,
    }
    (args.out_dir / "gpt2_serving.json").write_text(json.dumps(report, indent=2) + "\n")
    plot(results, args.plot)
    print()
    host = report["cpu"]
    print(f"CPU: {host['model']}; int8 dot product: {', '.join(host['int8_dot_product']) or 'none'}")
    print(table(results))
    print()
    for line in summary:
        print(f"- {line}")
    print(
        f"- the same on the 124M model: {over_124m['overhead_ms']:.1f} ms ({over_124m['served_p50_ms']:.1f} served "
        f"vs {over_124m['direct_p50_ms']:.1f} direct)"
    )
    return 0


def targets(results: list[dict[str, Any]], over: dict[str, float]) -> list[str]:
    def point(backend: str, batching: bool, c: int) -> dict[str, Any] | None:
        for run in results:
            if run["backend"] == backend and run["batching"] == batching:
                return next((p for p in run["points"] if p["concurrency"] == c), None)
        return None

    lines = []
    names = {"onnxruntime": "ONNX Runtime fp32", "onnxruntime-int8": "ONNX Runtime int8 (weight-only)",
             "onnxruntime-int8-dynamic": "ONNX Runtime int8 (dynamic)"}  # fmt: skip
    for ort_name, label in names.items():
        # Like for like: each batching mode compares the two backends under the same server settings,
        # each with its own verdict (at c=1 batching on can only add its queue delay, never merge).
        for batching in (False, True):
            ort, torch = point(ort_name, batching, 1), point("torch", batching, 1)
            if ort and torch:
                ratio = ort["qps"] / torch["qps"]
                verdict = "met" if ratio >= 2.5 else "NOT met"
                lines.append(
                    f"{label} vs PyTorch eager, batching {'on' if batching else 'off'}, c=1: {ratio:.2f}x QPS "
                    f"({ort['qps']:.2f} vs {torch['qps']:.2f}; target >= 2.5x): {verdict}"
                )
        lone, busy = point(ort_name, True, 1), point(ort_name, True, 16)
        if lone and busy:
            gain, slow = busy["qps"] / lone["qps"], busy["p50_ms"] / lone["p50_ms"]
            ok = gain >= 3 and slow <= 2.5
            lines.append(
                f"{label}, batching on, c=16 vs c=1: {gain:.2f}x QPS (target >= 3x), p50 {slow:.2f}x a lone "
                f"request (target <= 2.5x): {'met' if ok else 'NOT met'}"
            )
    lines.append(
        f"server overhead (tiny model, one-token request, medians): {over['overhead_ms']:.1f} ms "
        f"({over['served_p50_ms']:.1f} served vs {over['direct_p50_ms']:.1f} direct; target < 5 ms): "
        f"{'met' if over['overhead_ms'] < 5 else 'NOT met'}"
    )
    return lines


if __name__ == "__main__":
    sys.exit(main())
