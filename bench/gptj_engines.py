"""GPT-J on its two engines, side by side: the Hugging Face toolkit (Multi Model Server, one
``generate`` at a time) against vLLM (continuous batching), each deployed as GptjStack with the
real CDK CLI on the local AWS and called through boto3's InvokeEndpoint by ``python -m loadtest``.

One GPT-J-architecture model with random weights (:data:`SHAPE`: GPT-J's head size and rotary
size, 6 layers of width 1024, the offline tokenizer's 512 tokens) is built once into a payload by
``python -m artifacts_builder gptj --model``; each engine serves that same payload in bfloat16
(the toolkit through ``GPTJ_DTYPE``, vLLM through ``gptj.dtype``: both 16-bit, as fp16 on a GPU).
Every request asks for exactly :data:`NEW_TOKENS` new tokens with greedy decoding (the
toolkit: ``min_length``; vLLM: ``ignore_eos``), checked on one answer of each engine before the
load. Levels of concurrency 1, 4 and 16; then vLLM again with ``"stream": true`` through
InvokeEndpointWithResponseStream for the time to first token (the toolkit cannot stream: its
first token comes with its last).

    python -m bench.gptj_engines              # about 10 minutes on 2 cores
    python -m bench.gptj_engines --quick      # the tiny model, 3 s per level: a smoke test

Results: ``bench/results/gptj_engines.json`` (the load tester's reports under
``bench/results/gptj_engines/``), Markdown tables on stdout (for docs/BENCHMARKS.md) and the plot
``docs/gptj_engines.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from bench.gpt2_endpoint import app_context, contention, cpu_model, cpu_seconds
from loadtest.report import plot, stream_table, table
from local_aws.cli.cdk import Cdk
from local_aws.sagemaker.containers import running_containers
from local_aws.server import LocalAws

ROOT = Path(__file__).resolve().parent.parent
STACK = "GptjStack"
PROMPT = "Can you please let us know more details about your"
NEW_TOKENS = 64
#: GPT-J 6B's 16 heads and rotary size, at a quarter of its width (heads of 64, which vLLM's CPU
#: attention takes) and 6 of its 28 layers: about 75M parameters, which 2 cores serve in seconds.
SHAPE = {"n_layer": 6, "n_embd": 1024, "n_head": 16, "rotary_dim": 64, "n_positions": 1024}
#: Each engine's settings: the same dtype; vLLM batches up to the highest concurrency.
ENGINES: dict[str, dict[str, str]] = {
    "hf-toolkit": {"gptj.engine": "hf-toolkit", "gptj.environment": json.dumps({"GPTJ_DTYPE": "bfloat16"})},
    "vllm": {"gptj.engine": "vllm", "gptj.dtype": "bfloat16", "gptj.max_num_seqs": "16"},
}
#: The goals of issue 23: vLLM's QPS at concurrency 16 over the toolkit's, and its first token at
#: concurrency 1 as a share of the whole answer's time.
QPS_RATIO_GOAL = 3.0
FIRST_TOKEN_SHARE_GOAL = 0.25


def bodies(engine: str, prompt_tokens: int, new_tokens: int) -> dict[str, dict[str, Any]]:
    """The request of each call kind, in the engine's own shape, exactly `new_tokens` long."""
    if engine == "hf-toolkit":
        parameters = {
            "max_new_tokens": new_tokens,
            "min_length": prompt_tokens + new_tokens,
            "do_sample": False,
            "return_full_text": False,
        }
        return {"invoke": {"inputs": PROMPT, "parameters": parameters}}
    body = {"prompt": PROMPT, "max_tokens": new_tokens, "ignore_eos": True, "temperature": 0}
    return {"invoke": body, "stream": {**body, "stream": True}}


def request_file(path: Path, body: Mapping[str, Any]) -> Path:
    document = {"content_type": "application/json", "accept": "application/json", "body": body}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path


def build(work: Path, quick: bool) -> Path:
    """The artifacts folder: the bench's GPT-J payload (rebuilt only when its shape changes) and
    the tiny GPT-2 and Inf2 payloads the app synthesizes beside it."""
    artifacts = work / ("artifacts-tiny" if quick else "artifacts")
    builder = [sys.executable, "-m", "artifacts_builder"]
    for component in ("gpt2", "inf2"):
        if not (artifacts / component / "manifest.json").exists():
            subprocess.run([*builder, component, "--tiny", "--out", str(artifacts)], cwd=ROOT, check=True)
    stamp = artifacts / "gptj" / "bench-shape.json"
    wanted = json.dumps({"tiny": True} if quick else SHAPE, sort_keys=True)
    if not stamp.exists() or stamp.read_text() != wanted:
        if quick:
            subprocess.run([*builder, "gptj", "--tiny", "--out", str(artifacts)], cwd=ROOT, check=True)
        else:
            from artifacts_builder.gptj import make_random_model

            source = make_random_model(work / "gptj-source", **SHAPE)
            subprocess.run([*builder, "gptj", "--model", str(source), "--out", str(artifacts)], cwd=ROOT, check=True)
        stamp.write_text(wanted)
    return artifacts


def prompt_tokens(artifacts: Path) -> int:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(artifacts / "gptj" / "model")
    return len(tokenizer(PROMPT)["input_ids"])


def answer_tokens(aws: LocalAws, endpoint: str, engine: str, body: Mapping[str, Any], artifacts: Path) -> int:
    """The new tokens of one answer: vLLM's usage, or the toolkit's text encoded again."""
    runtime = aws.client("sagemaker-runtime")
    raw = runtime.invoke_endpoint(EndpointName=endpoint, Body=json.dumps(body), ContentType="application/json")
    answer = json.loads(raw["Body"].read())
    if engine == "vllm":
        return int(answer["usage"]["completion_tokens"])
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(artifacts / "gptj" / "model")
    return len(tokenizer(answer[0]["generated_text"])["input_ids"])


def container_cpu_s() -> float:
    """CPU seconds so far of the endpoints' container processes, which this process has not
    reaped (so cpu_seconds() does not count them yet): user and system time, and those of the
    children each has reaped."""
    total = 0.0
    for process in running_containers():
        try:
            times = psutil.Process(process.pid).cpu_times()
        except psutil.NoSuchProcess:
            continue  # gone since the listing
        total += times.user + times.system + times.children_user + times.children_system
    return total


def busy() -> dict[str, float]:
    """cpu_seconds() with the containers' CPU counted as this benchmark's own."""
    now = cpu_seconds()
    return {**now, "own": now["own"] + container_cpu_s()}


def load_test(aws: LocalAws, endpoint: str, request: Path, args: argparse.Namespace, out: Path, *, stream: bool) -> Any:
    """The load tester's own command line, as a user runs it, pointed at the local AWS, and what
    else the host ran meanwhile (the containers live through the whole run: none is reaped)."""
    command = [sys.executable, "-m", "loadtest", "--endpoint", endpoint, "--request", str(request),
               "--concurrency", *map(str, args.concurrency), "--seconds", str(args.seconds),
               "--warmup", "4", "--read-timeout", "300", "--metrics-wait", "0", "--out", str(out),
               *(["--stream"] if stream else [])]  # fmt: skip
    bound = len(args.concurrency) * (args.seconds + 300) + 120
    before = busy()
    subprocess.run(command, env=aws.environment(), cwd=ROOT, check=True, stdout=subprocess.DEVNULL, timeout=bound)
    report = json.loads((out / "report.json").read_text())
    report["host_cpu"] = contention(before, busy())
    return report


def run(args: argparse.Namespace, artifacts: Path, work: Path) -> dict[str, Any]:
    """Each engine in turn: synthesize, deploy, check one answer's length, load-test (and stream),
    destroy; the local AWS stops (and its containers with it) on every path."""
    n_prompt = prompt_tokens(artifacts)
    results: dict[str, Any] = {}
    with LocalAws() as aws:
        cdk = Cdk(aws, timeout_s=args.cli_timeout)
        context = app_context(aws, artifacts)
        for i, engine in enumerate(args.engines):
            app = work / f"cdk.out-{engine}"
            cdk.synth(app, {**context, **ENGINES[engine]})
            if i == 0:
                cdk.bootstrap(app)
            started = time.monotonic()
            cdk.deploy(app, [STACK])
            try:
                deployed_s = time.monotonic() - started
                print(f"{engine}: {STACK} deployed in {deployed_s:.0f} s", file=sys.stderr)
                endpoint = aws.stack_outputs(STACK)["EndpointName"]
                requests = {
                    kind: request_file(work / f"{engine}-{kind}.json", body)
                    for kind, body in bodies(engine, n_prompt, args.new_tokens).items()
                }
                body = json.loads(requests["invoke"].read_text())["body"]
                tokens = answer_tokens(aws, endpoint, engine, body, artifacts)
                # The toolkit's count is its text encoded again: random tokens need not round-trip.
                print(f"{engine}: one answer holds {tokens} new tokens", file=sys.stderr)
                results[engine] = {"deploy_s": deployed_s, "answer_tokens": tokens, "settings": ENGINES[engine]}
                for kind, request in requests.items():
                    out = work / f"{engine}-{kind}"
                    results[engine][kind] = load_test(aws, endpoint, request, args, out, stream=kind == "stream")
            finally:
                cdk.destroy(app, [STACK])
    return results


def level(report: Mapping[str, Any], concurrency: int) -> Mapping[str, Any]:
    return next(x for x in report["levels"] if x["concurrency"] == concurrency)


def verdicts(results: Mapping[str, Any], new_tokens: int) -> list[str]:
    """The issue's two goals against what was measured (when both engines and the levels ran)."""
    lines = []
    if {"hf-toolkit", "vllm"} <= set(results):
        top = max(x["concurrency"] for x in results["vllm"]["invoke"]["levels"])
        toolkit, vllm = level(results["hf-toolkit"]["invoke"], top), level(results["vllm"]["invoke"], top)
        ratio = vllm["qps"] / toolkit["qps"] if toolkit["qps"] else float("inf")
        p50_v, p50_t = vllm["latency_ms"]["p50"], toolkit["latency_ms"]["p50"]
        met = ratio >= QPS_RATIO_GOAL and p50_v <= p50_t
        lines.append(
            f"c={top}: vLLM {vllm['qps']:.2f} QPS against the toolkit's {toolkit['qps']:.2f}: {ratio:.1f}x "
            f"(goal >= {QPS_RATIO_GOAL:g}x), p50 {p50_v:.0f} ms against {p50_t:.0f} ms (goal: no worse): "
            f"{'met' if met else 'NOT met'}"
        )
    if "stream" in results.get("vllm", {}):
        one = level(results["vllm"]["stream"], 1)
        first, whole = one["stream"]["time_to_first_token_ms"]["p50"], one["latency_ms"]["p50"]
        share = first / whole
        verdict = "met" if share <= FIRST_TOKEN_SHARE_GOAL else "NOT met"
        lines.append(
            f"c=1, streamed: first token p50 {first:.0f} ms of a whole {new_tokens}-token answer's {whole:.0f} ms: "
            f"{share:.0%} (goal <= {FIRST_TOKEN_SHARE_GOAL:.0%}): {verdict}"
        )
    return lines


def engine_table(results: Mapping[str, Any], new_tokens: int) -> str:
    """Both engines' InvokeEndpoint levels side by side, with tokens per second (every answer holds
    `new_tokens`, checked before the load)."""
    lines = [
        "| engine | concurrency | requests | QPS | p50 ms | p99 ms | tokens/s | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for engine, result in results.items():
        for x in result["invoke"]["levels"]:
            latency = x["latency_ms"] or {}
            errors = ", ".join(f"{k}: {n}" for k, n in x["errors"].items()) or "none"
            lines.append(
                f"| {engine} | {x['concurrency']} | {x['requests']} | {x['qps']:.2f} | {latency.get('p50', 0):.0f} "
                f"| {latency.get('p99', 0):.0f} | {x['successes'] / x['elapsed_s'] * new_tokens:.0f} | {errors} |"
            )
    return "\n".join(lines)


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--plot", type=Path, help="default: docs/gptj_engines.png (--quick: beside the results)")
    parser.add_argument("--engines", nargs="+", choices=list(ENGINES), default=list(ENGINES))
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 4, 16])
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each level (default 30)")
    parser.add_argument("--new-tokens", type=int, default=NEW_TOKENS)
    parser.add_argument("--cli-timeout", type=float, default=1200.0, help="bound on each CDK CLI call, seconds")
    parser.add_argument("--quick", action="store_true", help="the tiny model, 16 new tokens, 3 s per level")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.new_tokens = 3.0, min(args.new_tokens, 16)
    # A smoke test must not overwrite the results the documentation shows.
    args.name = "gptj_engines-quick" if args.quick else "gptj_engines"
    if args.plot is None:
        args.plot = args.out_dir / f"{args.name}.png" if args.quick else ROOT / "docs" / f"{args.name}.png"
    return args


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    # A timeout's or a user's SIGTERM unwinds through LocalAws's exit, which stops the endpoints'
    # containers (their own process groups: a signal to this process alone would leave them).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    work = args.out_dir / args.name
    artifacts = build(args.out_dir / "gptj_engines-build", args.quick)
    started, load_before = time.monotonic(), os.getloadavg()
    results = run(args, artifacts, work)
    windows = [r[kind]["host_cpu"] for r in results.values() for kind in ("invoke", "stream") if kind in r]
    seconds = sum(w["seconds"] for w in windows)
    others = sum(w["others_cpu_s"] for w in windows)
    cpus = len(os.sched_getaffinity(0))
    document = {
        "command": " ".join(["python", "-m", "bench.gptj_engines", *(argv if argv is not None else sys.argv[1:])]),
        "date": datetime.now(UTC).date().isoformat(),
        "machine": f"{len(os.sched_getaffinity(0))} CPUs ({cpu_model()}), {platform.platform()}",
        "model": "tiny" if args.quick else {**SHAPE, "vocab_size": 512, "dtype": "bfloat16", "weights": "random"},
        "new_tokens": args.new_tokens,
        "minutes": (time.monotonic() - started) / 60,
        "load_average_1_5_15_min": {"before": load_before, "after": os.getloadavg()},
        # Over the load tests, the benchmark's processes and the containers counted as its own.
        "host_cpu": {"seconds": seconds, "others_cpu_s": others, "others_share_of_cpus": others / (seconds * cpus)},
        "engines": results,
        "verdicts": verdicts(results, args.new_tokens),
    }
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{args.name}.json").write_text(json.dumps(document, indent=2) + "\n")
    series = {engine: r["invoke"]["levels"] for engine, r in results.items()}
    series.update({f"{engine}, streamed": r["stream"]["levels"] for engine, r in results.items() if "stream" in r})
    plot(series, args.plot, f"GPT-J-shaped model on each engine (local AWS), {args.new_tokens} new tokens")
    print(engine_table(results, args.new_tokens))
    for engine, result in results.items():
        if "stream" in result:
            print(f"\n{engine}, streamed (InvokeEndpointWithResponseStream):\n")
            print(table(result["stream"]["levels"]))
            print()
            print(stream_table(result["stream"]["levels"]))
    print()
    for line in document["verdicts"]:
        print(f"- {line}")
    shared = document["host_cpu"]
    print(
        f"- other processes on the host took {shared['others_share_of_cpus']:.1%} of its CPUs during the load tests "
        f"({shared['others_cpu_s']:.0f} CPU-s in {shared['seconds']:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
