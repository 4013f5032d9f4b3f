"""LoRA adapters as adapter inference components, measured on the vLLM CPU build (issue 40).

A tiny Llama (artifacts_builder's, bfloat16) serves as the base component of an endpoint on the
local AWS, with four tiny random adapters (rank 8 over every projection) registered as adapter
components. Three figures, each with the goal it is held to:

* **throughput** with requests spread round-robin over 1, 2 and 4 adapters, against the base
  alone (concurrency 8, every request 16 new tokens, greedy): goal, 4 adapters at least half the
  base's QPS (vLLM batches requests for different adapters together, up to ``max_loras``);
* **time to serve one more fine-tune**: CreateInferenceComponent of an adapter until its first
  answer, against the same fine-tune merged into the base's weights and deployed as a model on a
  new endpoint (CreateModel, CreateEndpoint, a component, its first answer): goal, a fifth or less;
* **memory**: the adapter's archive against the merged model's payload, and the engine's RSS
  before and after the four adapters: goal, an adapter 5% or less of a merged copy.

    python -m bench.lora_adapters              # about 6 minutes on 2 cores
    python -m bench.lora_adapters --seconds 5  # a smoke test

Results: ``bench/results/lora_adapters.json`` and Markdown on stdout (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from artifacts_builder.llm import build as build_llm
from artifacts_builder.lora import build as build_adapter
from artifacts_builder.lora import make_tiny_adapter
from bench.gpt2_endpoint import cpu_model
from llm_contracts.lora import ADAPTER_CONFIG, ADAPTER_WEIGHTS, environment
from local_aws.clock import Clock
from local_aws.sagemaker.runtime import hosting_plane
from local_aws.server import LocalAws

ROOT = Path(__file__).resolve().parent.parent
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker"
ROLE = "arn:aws:iam::123456789012:role/sagemaker"
BUCKET = "lora-bench"
ADAPTERS = ("a1", "a2", "a3", "a4")
NEW_TOKENS = 16
CONCURRENCY = 8
GOALS = {"qps_4_adapters_over_base": 0.5, "adapter_over_merged_seconds": 0.2, "adapter_over_merged_bytes": 0.05}
VARIANT = {
    "VariantName": "AllTraffic", "InstanceType": "ml.g5.xlarge", "InitialInstanceCount": 1,
    "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 1, "MaxInstanceCount": 1},
    "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"},
}  # fmt: skip
COMPUTE = {"NumberOfAcceleratorDevicesRequired": 1, "MinMemoryRequiredInMb": 1024}


def _wait_component(sm: Any, name: str) -> None:
    # clock: a bound on an engine's start, not a figure: the figures time their own spans.
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:  # clock: the same bound
        status = sm.describe_inference_component(InferenceComponentName=name)["InferenceComponentStatus"]
        if status not in ("Creating", "Updating"):
            if status != "InService":
                raise RuntimeError(f"{name} is {status}")
            return
        time.sleep(0.2)
    raise TimeoutError(name)


def _model(aws: LocalAws, name: str, prefix: str, env: dict[str, str]) -> None:
    aws.client("sagemaker").create_model(
        ModelName=name, ExecutionRoleArn=ROLE,
        PrimaryContainer={"Image": IMAGE, "Environment": env, "ModelDataSource": {"S3DataSource": {
            "S3Uri": f"s3://{BUCKET}/{prefix}/", "S3DataType": "S3Prefix", "CompressionType": "None"}}},
    )  # fmt: skip


def _endpoint_with_component(aws: LocalAws, endpoint: str, component: str, model: str) -> None:
    sm = aws.client("sagemaker")
    sm.create_endpoint_config(EndpointConfigName=endpoint, ProductionVariants=[VARIANT], ExecutionRoleArn=ROLE)
    sm.create_endpoint(EndpointName=endpoint, EndpointConfigName=endpoint)
    sm.get_waiter("endpoint_in_service").wait(EndpointName=endpoint, WaiterConfig={"Delay": 1, "MaxAttempts": 300})
    sm.create_inference_component(
        InferenceComponentName=component, EndpointName=endpoint, VariantName="AllTraffic",
        Specification={"ModelName": model, "ComputeResourceRequirements": COMPUTE,
                       "StartupParameters": {"ContainerStartupHealthCheckTimeoutInSeconds": 600}},
        RuntimeConfig={"CopyCount": 1},
    )  # fmt: skip
    _wait_component(sm, component)


def _invoke(aws: LocalAws, endpoint: str, component: str) -> str:
    body = {"prompt": "Summarize the ticket:", "max_tokens": NEW_TOKENS, "temperature": 0, "ignore_eos": True}
    answer = aws.client("sagemaker-runtime").invoke_endpoint(
        EndpointName=endpoint, InferenceComponentName=component, ContentType="application/json", Body=json.dumps(body)
    )
    return str(json.loads(answer["Body"].read())["choices"][0]["text"])


def _upload(aws: LocalAws, folder: Path, prefix: str) -> None:
    s3 = aws.client("s3")
    for file in sorted(folder.rglob("*")):
        if file.is_file():
            s3.put_object(Bucket=BUCKET, Key=f"{prefix}/{file.relative_to(folder)}", Body=file.read_bytes())


def throughput(aws: LocalAws, targets: list[str], seconds: float) -> dict[str, Any]:
    """QPS with CONCURRENCY callers, each request to the next of `targets` in turn."""
    done, errors, lock = [0], [0], threading.Lock()
    turn = iter(range(10**9))
    # clock: the arm's length; QPS is requests over the time measured here.
    stop_at = time.monotonic() + seconds

    def caller() -> None:
        while time.monotonic() < stop_at:  # clock: the same arm
            with lock:
                target = targets[next(turn) % len(targets)]
            try:
                _invoke(aws, "ep", target)
                with lock:
                    done[0] += 1
            except Exception:  # a bench counts what fails rather than stop
                with lock:
                    errors[0] += 1

    started = time.monotonic()  # clock: the arm's measured time
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        for _ in range(CONCURRENCY):
            pool.submit(caller)
    elapsed = time.monotonic() - started  # clock: the same
    return {"targets": targets, "requests": done[0], "errors": errors[0], "qps": done[0] / elapsed}


def merged_payload(base: Path, adapter: Path, out: Path) -> Path:
    """The base's payload with the adapter's delta (alpha/r * B @ A) added to each weight it adapts."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(base, out)
    config = json.loads((adapter / ADAPTER_CONFIG).read_text())
    scale = float(config["lora_alpha"]) / float(config["r"])
    lora = load_file(str(adapter / ADAPTER_WEIGHTS))
    for shard in sorted(out.glob("*.safetensors")):
        weights = load_file(str(shard))
        for name in list(weights):
            a = lora.get(f"base_model.model.{name.removesuffix('.weight')}.lora_A.weight")
            b = lora.get(f"base_model.model.{name.removesuffix('.weight')}.lora_B.weight")
            if a is not None and b is not None:
                delta = scale * (b.float() @ a.float())
                weights[name] = (weights[name].float() + delta).to(weights[name].dtype)
        save_file(weights, str(shard), metadata={"format": "pt"})
    (out / "payload-manifest.json").unlink(missing_ok=True)  # the merged weights are another model's
    return out


@contextmanager
def local_aws_with_base(work: Path) -> Iterator[tuple[LocalAws, Path, dict[str, Path], dict[str, Path]]]:
    base = build_llm(out=work / "base", model=None, tiny="llama")
    sources = {name: make_tiny_adapter(base, work / f"src-{name}", seed=i) for i, name in enumerate(ADAPTERS, 1)}
    archives = {n: build_adapter(s, base, work / "adapters", name=n, max_rank=8) for n, s in sources.items()}
    with LocalAws(aws_managed_policies=False, clock=Clock(speed=0)) as aws:
        aws.client("s3").create_bucket(Bucket=BUCKET)
        _upload(aws, base, "base")
        for name, archive in archives.items():
            aws.client("s3").put_object(Bucket=BUCKET, Key=f"adapters/{name}.tar.gz", Body=archive.read_bytes())
        env = {"SM_VLLM_ENFORCE_EAGER": "true", "SM_VLLM_MAX_NUM_SEQS": str(CONCURRENCY),
               **environment(max_loras=4, max_rank=8, max_cpu_loras=4)}  # fmt: skip
        _model(aws, "base", "base", env)
        _endpoint_with_component(aws, "ep", "base", "base")
        yield aws, base, sources, archives


def _engine_rss(aws: LocalAws) -> int:
    hosted = hosting_plane().find((aws.account, aws.region, "inference-component/base"))
    assert hosted is not None and hosted.live is not None
    (container,) = hosted.live.instances["AllTraffic"]
    assert container.process is not None
    leader = psutil.Process(container.process.pid)
    return sum(p.memory_info().rss for p in [leader, *leader.children(recursive=True)])


def run(seconds: float, work: Path) -> dict[str, Any]:
    with local_aws_with_base(work) as (aws, base, sources, archives):
        sm = aws.client("sagemaker")
        rss_before = _engine_rss(aws)
        timings = {}
        for name in ADAPTERS:
            started = time.monotonic()  # clock: the figure: create until the first answer
            sm.create_inference_component(
                InferenceComponentName=name, EndpointName="ep",
                Specification={"BaseInferenceComponentName": "base",
                               "Container": {"ArtifactUrl": f"s3://{BUCKET}/adapters/{name}.tar.gz"}},
            )  # fmt: skip
            _wait_component(sm, name)
            _invoke(aws, "ep", name)
            timings[name] = time.monotonic() - started  # clock: the same figure
        rss_after = _engine_rss(aws)
        arms = [throughput(aws, ["base"], seconds)]
        for k in (1, 2, 4):
            arms.append(throughput(aws, list(ADAPTERS[:k]), seconds))
        merged = merged_payload(base, sources["a1"], work / "merged")
        _upload(aws, merged, "merged")
        _model(aws, "merged", "merged", {"SM_VLLM_ENFORCE_EAGER": "true"})
        started = time.monotonic()  # clock: the figure: a merged model's endpoint until its first answer
        _endpoint_with_component(aws, "ep-merged", "merged", "merged")
        _invoke(aws, "ep-merged", "merged")
        merged_s = time.monotonic() - started  # clock: the same figure
        same = _invoke(aws, "ep-merged", "merged") == _invoke(aws, "ep", "a1")
    adapter_bytes = archives["a1"].stat().st_size
    merged_bytes = sum(f.stat().st_size for f in merged.rglob("*") if f.is_file())
    base_qps = arms[0]["qps"]
    return {
        "throughput": arms,
        "qps_4_adapters_over_base": arms[-1]["qps"] / base_qps,
        "adapter_seconds": timings,
        "merged_seconds": merged_s,
        "adapter_over_merged_seconds": timings["a1"] / merged_s,
        "merged_answers_as_the_adapter": same,
        "adapter_bytes": adapter_bytes,
        "merged_bytes": merged_bytes,
        "adapter_over_merged_bytes": adapter_bytes / merged_bytes,
        "engine_rss_mb": {"before": rss_before / 1e6, "after_4_adapters": rss_after / 1e6},
    }


def markdown(document: dict[str, Any]) -> str:
    lines = ["| requests spread over | requests | QPS | errors |", "|---|---:|---:|---:|"]
    for arm in document["throughput"]:
        over = "the base alone" if arm["targets"] == ["base"] else f"{len(arm['targets'])} adapter(s)"
        lines.append(f"| {over} | {arm['requests']} | {arm['qps']:.2f} | {arm['errors']} |")
    goals = document["goals"]
    lines += [
        "",
        f"- 4 adapters over the base alone: {document['qps_4_adapters_over_base']:.2f} (goal >= "
        f"{goals['qps_4_adapters_over_base']})",
        f"- one more adapter to its first answer: {document['adapter_seconds']['a1']:.1f} s; the merged model on a "
        f"new endpoint: {document['merged_seconds']:.1f} s; ratio {document['adapter_over_merged_seconds']:.3f} "
        f"(goal <= {goals['adapter_over_merged_seconds']})",
        f"- the adapter's archive {document['adapter_bytes'] / 1e6:.2f} MB, the merged payload "
        f"{document['merged_bytes'] / 1e6:.2f} MB: {document['adapter_over_merged_bytes']:.3f} (goal <= "
        f"{goals['adapter_over_merged_bytes']}); engine RSS {document['engine_rss_mb']['before']:.0f} MB, with 4 "
        f"adapters {document['engine_rss_mb']['after_4_adapters']:.0f} MB",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="length of each throughput arm (default 40)")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    work = args.out_dir / "lora_adapters"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    result = run(args.seconds, work)
    document = {
        "command": " ".join(["python", "-m", "bench.lora_adapters", *(argv if argv is not None else sys.argv[1:])]),
        "date": datetime.now(UTC).date().isoformat(),
        "machine": f"{len(os.sched_getaffinity(0))} CPUs ({cpu_model()})",
        "goals": GOALS,
        **result,
    }
    (args.out_dir / "lora_adapters.json").write_text(json.dumps(document, indent=2) + "\n")
    print(markdown(document))
    return 0


if __name__ == "__main__":
    sys.exit(main())
