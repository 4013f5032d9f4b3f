"""The two limits behind the GPT-2 CPU graphs' serving targets, measured per graph.

The serving benchmark (``bench/gpt2_serving.py``) checks the targets through the real server;
this script measures what decides them, without HTTP or the decoding loop:

1. The memory floor of the fp32 graph. A lone request's decode step reads every fp32 weight
   once, so 32 tokens cannot take less than 32 reads of the weights at the machine's read
   bandwidth (timed here as a 2-thread sum over as many bytes). The c=1 target needs a lone
   request within 1 / (2.5 x PyTorch's c=1 QPS), read from the serving benchmark's last run.
2. How batching scales for each graph (fp32, weight-only int8, int8 weights and activations):
   the time of one decode step at 1, 4 and 16 rows, through the server's ONNX Runtime backend
   (no HTTP, no decoding loop). The p50 target asks a batch of 16 to take at most 2.5x a lone
   request, so a step of 16 rows may cost at most about 2.5x a step of one row.

    python -m bench.gpt2_bounds          # under a minute with the serving benchmark's builds

Results: ``bench/results/gpt2_bounds.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.gpt2_serving import build_124m
from serving.gpt2.generation import ONNX_FP32, ONNX_INT8, ONNX_INT8_DYNAMIC

ROOT = Path(__file__).resolve().parent.parent


ROWS = (1, 4, 16)
PAST = 24  # decode steps from the middle of a 16-token prompt + 32 new tokens


def read_floor_ms(nbytes: int, threads: int, reps: int) -> float:
    """Best time to read `nbytes` of fp32 once, on `threads` threads (a sum touches every byte)."""
    import torch

    torch.set_num_threads(threads)
    data = torch.rand(nbytes // 4)
    data.sum()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        data.sum()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def matmul_weight_bytes(path: Path) -> int:
    """Bytes of the fp32 weights that every decode step multiplies by (layers and LM head)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    initializers = {t.name: t for t in model.graph.initializer}
    total = 0
    for node in model.graph.node:
        if node.op_type in ("Gemm", "MatMul") and node.input[1] in initializers:
            total += numpy_helper.to_array(initializers[node.input[1]]).nbytes
    return total


def step_ms(model_dir: Path, onnx_file: str, rows: int, threads: int, reps: int) -> float:
    """Median time of a decode step of `rows` rows after a prompt of PAST tokens, through the
    server's own ONNX Runtime backend (its session settings and KV cache handling), without
    the decoding loop around it."""
    import numpy as np

    from serving.gpt2.backends import OnnxRuntimeBackend
    from serving.gpt2.generation import ModelInfo

    backend = OnnxRuntimeBackend(model_dir, ModelInfo.load(model_dir), threads=threads, onnx_file=onnx_file)
    ids = np.ones((rows, PAST), np.int64)
    mask = np.ones_like(ids)
    _, past = backend.forward(ids, mask, np.tile(np.arange(PAST), (rows, 1)), None)
    times = []
    for step in range(3 + reps):  # each step adds one position: 3 warm-ups, then the timed ones
        mask = np.ones((rows, PAST + step + 1), np.int64)
        start = time.perf_counter()
        _, past = backend.forward(np.ones((rows, 1), np.int64), mask, np.full((rows, 1), PAST + step), past)
        times.append(time.perf_counter() - start)
    return statistics.median(times[3:]) * 1e3


def torch_lone_ms(serving: Path) -> float | None:
    """PyTorch eager's lone-request mean latency (batching off, c=1) from the serving benchmark."""
    if not serving.exists():
        return None
    for run in json.loads(serving.read_text())["results"]:
        if run["backend"] == "torch" and not run["batching"]:
            return float(next(p["mean_ms"] for p in run["points"] if p["concurrency"] == 1))
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--new-tokens", type=int, default=32)
    args = parser.parse_args(argv)
    threads = len(os.sched_getaffinity(0))
    # The serving benchmark's builds: built once, reused by both.
    graphs = {
        "fp32": (build_124m(args.out_dir, "fp32"), ONNX_FP32),
        "int8 weight-only": (build_124m(args.out_dir, "int8"), ONNX_INT8),
        "int8 dynamic": (build_124m(args.out_dir, "int8-dynamic"), ONNX_INT8_DYNAMIC),
    }

    weights = matmul_weight_bytes(graphs["fp32"][0] / ONNX_FP32)
    floor = read_floor_ms(weights, threads, args.reps)
    torch_ms = torch_lone_ms(args.out_dir / "gpt2_serving.json")
    report: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "threads": threads,
        "fp32_weight_mb": round(weights / 1e6, 1),
        "fp32_read_ms": round(floor, 2),
        "read_gb_per_s": round(weights / floor / 1e6, 1),
        # A prefill and new_tokens - 1 decode steps: each reads every weight once.
        "fp32_lone_floor_ms": round(floor * args.new_tokens, 0),
        "torch_lone_ms": torch_ms,
        "c1_budget_ms": round(torch_ms / 2.5, 0) if torch_ms else None,
        "step_ms": {},
    }
    print(
        f"fp32 weights {weights / 1e6:.0f} MB, read once in {floor:.2f} ms ({report['read_gb_per_s']} GB/s): "
        f"{args.new_tokens} tokens >= {report['fp32_lone_floor_ms']:.0f} ms"
    )
    if torch_ms:
        print(f"c=1 target: a lone request <= {torch_ms:.0f} / 2.5 = {report['c1_budget_ms']:.0f} ms")
    for name, (model_dir, onnx_file) in graphs.items():
        times = {rows: step_ms(model_dir, onnx_file, rows, threads, args.reps) for rows in ROWS}
        report["step_ms"][name] = {str(rows): round(ms, 2) for rows, ms in times.items()}
        cells = "  ".join(f"{rows:>2} rows {ms:6.1f} ms" for rows, ms in times.items())
        print(f"{name:30} {cells}  16 rows / 1 row {times[16] / times[1]:.2f}x")
    (args.out_dir / "gpt2_bounds.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
