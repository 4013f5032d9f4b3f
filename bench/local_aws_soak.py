"""The local AWS under a long load: its memory and its throughput with SageMaker's metrics plane
on, against the same run with the plane off (issue 39).

Gpt2Stack (the tiny model) is deployed with the real CDK CLI on a local AWS in this process;
then ``python -m loadtest --concurrency 32`` runs against its endpoint in rounds of two arms:
the metrics plane off (``local_aws.sagemaker.metrics`` publishes nothing), then on. A host's
speed drifts over minutes (a 2-core VM's neighbours, its caches), so each round's on/off ratio
compares two adjacent arms, and the QPS target reads the median of the rounds' ratios. During
each arm this process's RSS (the local AWS: its server, runtime and CloudWatch; the endpoint's
container is another process) is read every second. The targets: RSS flat (its growth over the
arm within 10% of its start) and the QPS with the plane on within 10% of the QPS with it off.

    python -m bench.local_aws_soak                # about 18 minutes on 2 cores (2 rounds, 240 s an arm)
    python -m bench.local_aws_soak --seconds 20   # a smoke test

Results: ``bench/results/local_aws_soak.json`` and a Markdown table on stdout (for
docs/BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from bench.gpt2_endpoint import app_context, cpu_model, request_file
from bench.gpt2_serving import build
from local_aws.cli.cdk import Cdk
from local_aws.sagemaker import metrics
from local_aws.server import LocalAws

ROOT = Path(__file__).resolve().parent.parent
STACK = "Gpt2Stack"
#: The targets (issue 39): RSS growth over an arm, and QPS with the plane on against off.
RSS_GROWTH_TARGET = 0.10
#: A round's arms, in order: the plane off, then on.
PLANES = (("off", False), ("on", True))
QPS_TARGET = 0.10


@contextlib.contextmanager
def metrics_plane(on: bool, account: str, region: str) -> Iterator[None]:
    """SageMaker's metrics of the account's region published (the local AWS as it runs) or not,
    for the arm's length."""
    backend = metrics.metrics_backends[account][region]
    before = backend.publishing
    backend.publishing = on
    try:
        yield
    finally:
        backend.publishing = before


class RssSampler:
    """This process's RSS every `interval_s`, in a thread, while it runs."""

    def __init__(self, interval_s: float = 1.0) -> None:
        self.interval_s = interval_s
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._process = psutil.Process()

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            self.samples.append((time.monotonic() - started, self._process.memory_info().rss))
            self._stop.wait(self.interval_s)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def arm(aws: LocalAws, endpoint: str, request: Path, args: argparse.Namespace, out: Path, on: bool) -> dict[str, Any]:
    """One arm: the load tester's own command line at one concurrency, with the plane `on`."""
    command = [sys.executable, "-m", "loadtest", "--endpoint", endpoint, "--request", str(request),
               "--concurrency", str(args.concurrency), "--seconds", str(args.seconds), "--metrics-wait", "0",
               "--out", str(out)]  # fmt: skip
    with metrics_plane(on, aws.account, aws.region), RssSampler() as rss:
        subprocess.run(command, env=aws.environment(), cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                       timeout=args.seconds + 300)  # fmt: skip
    (level,) = json.loads((out / "report.json").read_text())["levels"]
    mb = [r / 1e6 for _, r in rss.samples]
    # The first 10 s are the load's ramp (connections, the container's pools): growth is read after.
    settled = [m for t, m in rss.samples if t >= 10] or [rss.samples[-1][1]]
    start, end = settled[0] / 1e6, settled[-1] / 1e6
    return {
        "metrics_plane": "on" if on else "off",
        "requests": level["requests"],
        "qps": level["qps"],
        "latency_ms": {k: level["latency_ms"][k] for k in ("p50", "p99", "max")},
        "errors": level.get("errors", {}),
        "rss_mb": {"min": min(mb), "max": max(mb), "settled_start": start, "end": end},
        "rss_growth": (end - start) / start,
        "bytes_per_request": (end - start) * 1e6 / max(level["requests"], 1),
    }


def run(args: argparse.Namespace, artifacts: Path, work: Path) -> dict[str, Any]:
    request = request_file(work / "request.json", args.new_tokens)
    with LocalAws() as aws:
        cdk = Cdk(aws, timeout_s=args.cli_timeout)
        app = work / "cdk.out"
        cdk.synth(app, app_context(aws, artifacts))
        cdk.bootstrap(app)
        cdk.deploy(app, [STACK])
        try:
            endpoint = aws.stack_outputs(STACK)["EndpointName"]
            arms = [
                arm(aws, endpoint, request, args, work / f"round-{n}-plane-{name}", on)
                for n in range(args.rounds)
                for name, on in PLANES
            ]
        finally:
            cdk.destroy(app, [STACK])
    ratios = [on["qps"] / off["qps"] for off, on in zip(arms[::2], arms[1::2], strict=True)]
    ratio = statistics.median(ratios)
    return {
        "arms": arms,
        "qps_on_vs_off_by_round": ratios,
        "qps_on_vs_off": ratio,
        "rss_flat": all(abs(a["rss_growth"]) <= RSS_GROWTH_TARGET for a in arms),
        "qps_within_target": ratio >= 1 - QPS_TARGET,
    }


def table(document: dict[str, Any]) -> str:
    lines = [
        "| metrics plane | requests | QPS | p50 ms | p99 ms | max ms | RSS after ramp -> end (MB) | growth "
        "| bytes/request |",
        "|---|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for a in document["arms"]:
        rss = a["rss_mb"]
        lines.append(
            f"| {a['metrics_plane']} | {a['requests']:,} | {a['qps']:.1f} | {a['latency_ms']['p50']:.1f} | "
            f"{a['latency_ms']['p99']:.1f} | {a['latency_ms']['max']:.0f} | {rss['settled_start']:.0f} -> "
            f"{rss['end']:.0f} | {a['rss_growth']:+.1%} | {a['bytes_per_request']:.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=240.0, help="length of each arm (default 240)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of an arm off then on (default 2)")
    parser.add_argument("--new-tokens", type=int, default=8)
    parser.add_argument("--cli-timeout", type=float, default=1200.0)
    args = parser.parse_args(argv)
    # A SIGTERM unwinds through LocalAws's exit, which stops the endpoint's container.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    model_dir = build(args.out_dir / "artifacts-tiny", ["--tiny"])
    started = time.monotonic()
    result = run(args, model_dir.parent, args.out_dir / "local_aws_soak")
    document = {
        "command": " ".join(["python", "-m", "bench.local_aws_soak", *(argv if argv is not None else sys.argv[1:])]),
        "date": datetime.now(UTC).date().isoformat(),
        "machine": f"{len(os.sched_getaffinity(0))} CPUs ({cpu_model()})",
        "minutes": (time.monotonic() - started) / 60,
        **result,
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "local_aws_soak.json").write_text(json.dumps(document, indent=2) + "\n")
    print(table(document))
    rounds = ", ".join(f"{r:.2f}" for r in document["qps_on_vs_off_by_round"])
    print(f"QPS on/off {document['qps_on_vs_off']:.2f}, the median of the rounds' {rounds} (target >= "
          f"{1 - QPS_TARGET:.2f}); RSS flat within {RSS_GROWTH_TARGET:.0%}: {document['rss_flat']}")  # fmt: skip
    return 0 if document["rss_flat"] and document["qps_within_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
