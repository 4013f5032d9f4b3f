"""The seed's GPT-2 measurement redone through the client path: boto3 InvokeEndpoint on a
deployed Gpt2Stack, load-tested with ``python -m loadtest``.

The 124M GPT-2 architecture with random weights is built as ``bench/gpt2_serving.py`` builds it
(``GPT2Config()`` defaults, fp32 graph for ONNX Runtime, nothing from the hub), ``Gpt2Stack`` is
deployed with the real CDK CLI on the local AWS (its endpoint runs the container's ``serve``:
nginx + gunicorn + ONNX Runtime on this host's CPUs, since no GPU serves TensorRT here), and
the load tester runs at concurrency 1, 4 and 16 with dynamic batching on (the stack's defaults)
and off (``-c gpt2.max_batch_size=1 -c gpt2.max_queue_delay_us=0``: the stack deployed again).
Then, at concurrency 1 on the batching-off endpoint (no queue delay on either path), the client
path (boto3 + the local SageMaker runtime) against direct HTTP to the same container: one-token
requests, one of each path in turn, so that drift in the model's time cancels out; a third path,
InvokeEndpoint of an endpoint that does not exist, times boto3 and the local AWS with no
container at all. The three are timed again with moto's routing scan cached, to show how much of
the overhead that scan is (a diagnosis: the local AWS runs without it).

    python -m bench.gpt2_endpoint                # about 7 minutes on 2 cores (builds the 124M once)
    python -m bench.gpt2_endpoint --quick        # the tiny model, 3 s per level: a smoke test

Results: ``bench/results/gpt2_endpoint.json`` (the load tester's reports under
``bench/results/gpt2_endpoint/``), a Markdown table on stdout (for docs/BENCHMARKS.md) and the
plot ``docs/gpt2_endpoint.png``.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from bench.gpt2_serving import PROMPT, build, build_124m
from loadtest.invokers import SageMakerInvoker, Target, client_config
from loadtest.report import plot, table
from loadtest.request import Request, load_request
from loadtest.stats import latency_summary
from local_aws.cli.cdk import Cdk
from local_aws.sagemaker.runtime import hosting_plane
from local_aws.server import LocalAws

ROOT = Path(__file__).resolve().parent.parent
STACK = "Gpt2Stack"
#: The stack's settings of each run: batching as the stack ships it, and none at all.
MODES = {
    "on": {},
    "off": {"gpt2.max_batch_size": "1", "gpt2.max_queue_delay_us": "0"},
}
#: The model's part of a one-token request is small and steady: what is left is the path's.
OVERHEAD_TARGET_MS = 5.0


def cpu_seconds() -> dict[str, float]:
    """CPU time so far: the whole host's busy time and steal (/proc/stat), and this process's with
    its reaped children (the CDK CLI, the load tester, the endpoint's container)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    tick = os.sysconf("SC_CLK_TCK")
    own = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return {
        "host_busy": (user + nice + system + irq + softirq) / tick,
        "steal": steal / tick,
        "own": sum(r.ru_utime + r.ru_stime for r in own),
        "wall": time.monotonic(),
    }


def contention(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """How much of the host's CPUs other work took while the benchmark ran (the host may be
    shared: its latencies grow with this)."""
    delta = {key: after[key] - before[key] for key in before}
    cpus = len(os.sched_getaffinity(0))
    return {
        "seconds": delta["wall"],
        "own_cpu_s": delta["own"],
        "others_cpu_s": max(0.0, delta["host_busy"] - delta["own"]),
        "others_share_of_cpus": max(0.0, delta["host_busy"] - delta["own"]) / (delta["wall"] * cpus),
        "steal_share_of_cpus": delta["steal"] / (delta["wall"] * cpus),
    }


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def request_file(path: Path, new_tokens: int) -> Path:
    body = {"input": PROMPT, "parameters": {"max_new_tokens": new_tokens}}
    document = {"content_type": "application/json", "accept": "application/json", "body": body}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path


def load_test(aws: LocalAws, endpoint: str, request: Path, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """The load tester's own command line, as a user runs it, pointed at the local AWS."""
    command = [sys.executable, "-m", "loadtest", "--endpoint", endpoint, "--request", str(request),
               "--concurrency", *map(str, args.concurrency), "--seconds", str(args.seconds),
               "--metrics-wait", "0", "--out", str(out)]  # fmt: skip
    bound = len(args.concurrency) * (args.seconds + 70) + 120
    subprocess.run(command, env=aws.environment(), cwd=ROOT, check=True, stdout=subprocess.DEVNULL, timeout=bound)
    return json.loads((out / "report.json").read_text())  # type: ignore[no-any-return]


class DirectInvoker:
    """POST /invocations straight to the container, on one kept-alive connection."""

    def __init__(self, port: int, request: Request) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=70)
        self.request = request

    def __call__(self) -> None:
        headers = {"Content-Type": self.request.content_type, "Accept": self.request.accept or "*/*"}
        self.connection.request("POST", "/invocations", body=self.request.body, headers=headers)
        answer = self.connection.getresponse()
        body = answer.read()
        if answer.status != 200:
            raise RuntimeError(f"the container answered {answer.status}: {body[:200]!r}")


def container_port(aws: LocalAws, endpoint: str) -> int:
    """The port the local runtime gave the endpoint's container."""
    hosted = hosting_plane().find((aws.account, aws.region, endpoint))
    if hosted is None or hosted.live is None:
        raise RuntimeError(f"endpoint {endpoint} has no running container in the local runtime")
    (container,) = hosted.live.containers.values()
    return container.port


def interleaved(paths: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Seconds of each call of each path, one call of every path a round; which goes first
    rotates, so that neither drift nor a cache warmed by the previous call favours one."""
    names = list(paths)
    for _ in range(5):
        for name in names:
            paths[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for i in range(rounds):
        k = i % len(names)
        for name in names[k:] + names[:k]:
            started = time.perf_counter()
            paths[name]()
            times[name].append(time.perf_counter() - started)
    return times


def refused(aws: LocalAws) -> Callable[[], None]:
    """InvokeEndpoint of an endpoint that does not exist: boto3 and the local AWS, no container."""
    client = aws.client("sagemaker-runtime", config=client_config(1))

    def call() -> None:
        try:
            client.invoke_endpoint(EndpointName="no-such-endpoint", Body=b"{}", ContentType="application/json")
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ValidationError":
                raise
        else:
            raise RuntimeError("InvokeEndpoint of an endpoint that does not exist answered")

    return call


def summary_of(seconds: list[float]) -> dict[str, float]:
    summary = latency_summary(seconds)
    if summary is None:
        raise ValueError("no request was timed: --overhead-rounds must be at least 1")
    return summary


def overhead(aws: LocalAws, endpoint: str, one_token: Request, rounds: int) -> dict[str, Any]:
    """The client path against direct HTTP at concurrency 1, and boto3 + the local AWS alone."""
    client = SageMakerInvoker(aws.client("sagemaker-runtime", config=client_config(1)), Target(endpoint), one_token)
    direct = DirectInvoker(container_port(aws, endpoint), one_token)
    times = interleaved({"direct": direct, "client": client, "refused": refused(aws)}, rounds)
    summaries = {name: summary_of(values) for name, values in times.items()}
    differences = [c - d for c, d in zip(times["client"], times["direct"], strict=True)]
    return {
        "rounds": rounds,
        **{f"{name}_ms": summary for name, summary in summaries.items()},
        "overhead_p50_ms": summaries["client"]["p50"] - summaries["direct"]["p50"],
        "paired_difference_median_ms": 1000 * statistics.median(differences),
    }


@contextlib.contextmanager
def moto_scan_cached() -> Iterator[None]:
    """moto's server lists its own package folder (about 180 entries, a stat each) to route every
    request; cached, the list is read once. A diagnosis of the overhead, never its verdict: the
    local AWS runs without it."""
    import moto.backends

    original = moto.backends.list_of_moto_modules
    modules = tuple(original())
    moto.backends.list_of_moto_modules = lambda: iter(modules)
    try:
        yield
    finally:
        moto.backends.list_of_moto_modules = original


def app_context(aws: LocalAws, artifacts: Path) -> dict[str, str]:
    """The settings every benchmark's app is synthesized with on the local AWS: its payloads, and
    a GPT-2 image URI in place of the image asset no Docker engine builds here."""
    return {"project.artifacts_dir": str(artifacts.resolve()), "gpt2.image_uri": aws.ecr_image_uri("gpt2", "bench")}


def run(args: argparse.Namespace, artifacts: Path, work: Path) -> dict[str, Any]:
    """Deploy, load-test with batching on, destroy; deploy with batching off, load-test,
    measure the overhead, destroy; the local AWS stops (and its containers with it) on every
    path."""
    request = request_file(work / "request.json", args.new_tokens)
    one_token = request_file(work / "one-token.json", 1)
    reports: dict[str, Any] = {}
    with LocalAws() as aws:
        cdk = Cdk(aws, timeout_s=args.cli_timeout)
        context = app_context(aws, artifacts)
        apps = {mode: work / f"cdk.out-{mode}" for mode in MODES}
        for mode, settings in MODES.items():
            cdk.synth(apps[mode], {**context, **settings})
        cdk.bootstrap(apps["on"])
        # Each mode is a stack of its own, deployed and destroyed: an update would bake under
        # the stack's deployment guardrails (update_wait_s, 10 minutes by default) first.
        for mode in MODES:
            started = time.monotonic()
            cdk.deploy(apps[mode], [STACK])
            try:
                print(f"batching {mode}: {STACK} deployed in {time.monotonic() - started:.0f} s", file=sys.stderr)
                endpoint = aws.stack_outputs(STACK)["EndpointName"]
                reports[mode] = load_test(aws, endpoint, request, args, work / f"batching-{mode}")
                if mode == "off":  # no queue delay on either path
                    over = overhead(aws, endpoint, load_request(one_token), args.overhead_rounds)
                    with moto_scan_cached():
                        cached = overhead(aws, endpoint, load_request(one_token), args.overhead_rounds)
                    over["moto_scan_cached"] = cached
            finally:
                cdk.destroy(apps[mode], [STACK])
    return {"reports": reports, "overhead": over}


def summary_lines(over: dict[str, Any]) -> list[str]:
    verdict = "met" if over["overhead_p50_ms"] < OVERHEAD_TARGET_MS else "NOT met"
    client, direct, alone = (over[f"{name}_ms"]["p50"] for name in ("client", "direct", "refused"))
    cached = over["moto_scan_cached"]
    return [
        f"client path overhead at c=1 (one-token requests, {over['rounds']} of each path, in turn): "
        f"p50 {client:.1f} ms through boto3 + the local runtime vs {direct:.1f} ms direct: "
        f"{over['overhead_p50_ms']:.1f} ms (target < {OVERHEAD_TARGET_MS:g} ms): {verdict}; "
        f"median of the paired differences {over['paired_difference_median_ms']:.1f} ms",
        f"boto3 + the local AWS alone (InvokeEndpoint refused with ValidationError, no container): p50 {alone:.1f} ms",
        f"the same, moto's routing scan of its package folder cached (a diagnosis, not the local AWS as it runs): "
        f"overhead {cached['overhead_p50_ms']:.1f} ms at p50 ({cached['client_ms']['p50']:.1f} vs "
        f"{cached['direct_ms']['p50']:.1f} ms), boto3 + the local AWS alone {cached['refused_ms']['p50']:.1f} ms",
    ]


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--plot", type=Path, help="default: docs/gpt2_endpoint.png (--quick: beside the results)")
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 4, 16])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each level (default 20)")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument(
        "--cpu-precision",
        choices=["fp32", "int8", "int8-dynamic"],
        default="fp32",
        help="the graph ONNX Runtime serves (the builder's --cpu-precision; default fp32, the builder's default)",
    )
    parser.add_argument("--overhead-rounds", type=int, default=200, help="requests of each path (default 200)")
    parser.add_argument("--cli-timeout", type=float, default=1200.0, help="bound on each CDK CLI call, seconds")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the tiny model (8 new tokens: it holds 42), 3 s per level, 20 overhead rounds",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.overhead_rounds, args.new_tokens = 3.0, 20, min(args.new_tokens, 8)
    # A smoke test must not overwrite the results the documentation shows.
    args.name = "gpt2_endpoint-quick" if args.quick else "gpt2_endpoint"
    args.model = "tiny" if args.quick else f"124M {args.cpu_precision}"
    if args.plot is None:
        args.plot = args.out_dir / f"{args.name}.png" if args.quick else ROOT / "docs" / f"{args.name}.png"
    return args


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Build (or reuse) the payload, then the run, with what else the host ran meanwhile."""
    if args.quick:
        model_dir = build(args.out_dir / "artifacts-tiny", ["--tiny"])
    else:
        model_dir = build_124m(args.out_dir, args.cpu_precision)
    started, load_before, cpu_before = time.monotonic(), os.getloadavg(), cpu_seconds()
    result = run(args, model_dir.parent, args.out_dir / args.name)
    return {
        "date": datetime.now(UTC).date().isoformat(),
        "machine": f"{len(os.sched_getaffinity(0))} CPUs ({cpu_model()}), {platform.platform()}",
        "model": f"{args.model}, random weights, ONNX Runtime" if not args.quick else "tiny",
        "settings": MODES,
        "minutes": (time.monotonic() - started) / 60,
        "load_average_1_5_15_min": {"before": load_before, "after": os.getloadavg()},
        "host_cpu": contention(cpu_before, cpu_seconds()),
        **result,
    }


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    # A timeout's or a user's SIGTERM unwinds through LocalAws's exit, which stops the endpoints'
    # containers (their own process groups: a signal to this process alone would leave them).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    document = {"command": " ".join(["python", "-m", "bench.gpt2_endpoint", *(argv or sys.argv[1:])]), **measure(args)}
    (args.out_dir / f"{args.name}.json").write_text(json.dumps(document, indent=2) + "\n")
    reports = document["reports"]
    title = f"GPT-2 {args.model} through InvokeEndpoint (local AWS), {args.new_tokens} new tokens"
    plot({f"batching {mode}": reports[mode]["levels"] for mode in MODES}, args.plot, title)
    levels = [level for mode in MODES for level in reports[mode]["levels"]]
    print(table(levels, ("batching", [mode for mode in MODES for _ in reports[mode]["levels"]])))
    print()
    for line in summary_lines(document["overhead"]):
        print(f"- {line}")
    shared = document["host_cpu"]
    print(
        f"- other processes on the host took {shared['others_share_of_cpus']:.0%} of its CPUs during the run "
        f"({shared['others_cpu_s']:.0f} CPU-s in {shared['seconds']:.0f} s; steal {shared['steal_share_of_cpus']:.0%})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
