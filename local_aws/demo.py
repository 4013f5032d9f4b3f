"""`python -m local_aws.demo` (what `make demo` runs after building the tiny artifacts):
the project's main job, `cdk deploy` then `cdk destroy` of the three stacks, for real,
against a local AWS on 127.0.0.1. Each step says what it does and how long it took; the
local AWS is stopped on every exit path, so nothing is left running."""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from llm_contracts.gptj import PAYLOAD_MANIFEST
from local_aws.cdk import PROJECT_ROOT, Cdk
from local_aws.server import LocalAws, seed_neuron_dlami

STACKS = ("Gpt2Stack", "GptjStack", "Inf2Stack")
SEED_GPTJ_PROMPT = "Can you please let us know more details about your"


@contextmanager
def step(title: str, why: str) -> Iterator[None]:
    print(f"\n==> {title}\n    {why}", flush=True)
    started = time.monotonic()
    yield
    print(f"    done in {time.monotonic() - started:.1f} s", flush=True)


def model_environment(aws: LocalAws, stack: str) -> dict[str, str]:
    """The container environment of the model behind the stack's endpoint, as deployed."""
    sagemaker = aws.client("sagemaker")
    endpoint = sagemaker.describe_endpoint(EndpointName=aws.stack_outputs(stack)["EndpointName"])
    config = sagemaker.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    model = sagemaker.describe_model(ModelName=config["ProductionVariants"][0]["ModelName"])
    return dict(model["PrimaryContainer"].get("Environment", {}))


def download_model_data(aws: LocalAws, model_data_url: str, into: Path) -> Path:
    """Fetch the ``model.tar.gz`` the endpoint received from the bootstrap bucket."""
    bucket, key = model_data_url.removeprefix("s3://").split("/", 1)
    target = into / "model.tar.gz"
    aws.client("s3").download_file(bucket, key, str(target))
    return target


def download_prefix(aws: LocalAws, prefix_url: str, into: Path) -> Path:
    """Copy every object under ``prefix_url`` to ``into``, named by the rest of its key: what
    SageMaker does with an uncompressed S3Prefix model data source before the container starts."""
    bucket, prefix = prefix_url.removeprefix("s3://").split("/", 1)
    s3 = aws.client("s3")
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            target = into / obj["Key"].removeprefix(prefix)
            target.parent.mkdir(parents=True, exist_ok=True)
            s3.download_file(bucket, obj["Key"], str(target))
    return into


def request_gptj(model_dir: Path, environment: dict[str, str], prompt: str = SEED_GPTJ_PROMPT) -> str:
    """Serve ``model_dir`` with the Hugging Face image's own model server (the toolkit's
    ``serve``: Multi Model Server under ``.venv-hf``), with the Model's environment, as
    SageMaker starts the container; send it the seed's request, stop it, and return a line to
    print."""
    from local_aws.containers import HuggingFaceContainer

    body = json.dumps({"inputs": prompt, "parameters": {"max_new_tokens": 12}})
    with HuggingFaceContainer(model_dir, environment=environment) as container:
        container.wait_ready(timeout=180)
        response = container.invoke(body.encode())
    if response.status != 200:
        raise RuntimeError(f"POST /invocations answered {response.status}: {response.body[:500]!r}")
    return f"{body} -> {response.body.decode()[:300]}"


def request_gpt2(model_tar: Path, prompt: str = "amazon") -> str:
    """Serve ``model_tar`` (the very ``model.tar.gz`` Gpt2Stack's endpoint received, downloaded
    back from the local AWS) with the GPT-2 container's own `serve` (nginx + gunicorn) on a
    free port, send it the seed's request, stop it, and return a line to print."""
    from serving.gpt2.local import LocalServer, free_port

    with LocalServer(model_tar, port=free_port(), log=model_tar.with_suffix(".serve.log")) as server:
        server.wait_ready(timeout=180)
        status, body = server.invoke({"input": prompt})
    if status != 200:
        raise RuntimeError(f"POST /invocations answered {status}: {body}")
    return f"{json.dumps({'input': prompt})} -> {json.dumps(body)[:300]}"


def run(artifacts: Path, app: Path, workdir: Path, timeout_s: float) -> None:
    with LocalAws() as aws:
        cdk = Cdk(aws, timeout_s=timeout_s)
        print(f"local AWS: {aws.endpoint} (account {aws.account}, region {aws.region})")
        with step("Seed the Neuron DLAMI parameter", "Inf2Stack resolves its AMI from this public SSM parameter"):
            image = seed_neuron_dlami(aws)
            print(f"    -> {image}")

        # No Docker engine builds and publishes the GPT-2 image asset here: give its URI.
        gpt2_image = aws.ecr_image_uri("llm-inference-gpt2", "demo")
        context = {"project.artifacts_dir": str(artifacts.resolve()), "gpt2.image_uri": gpt2_image}
        with step("cdk synth --all", "synthesize the three stacks once; deploy and destroy reuse cdk.out"):
            cdk.synth(app, context)
        with step("cdk bootstrap", "create the CDK toolkit stack: asset bucket, publishing and deploy roles"):
            cdk.bootstrap(app)
        try:
            with step(
                "cdk deploy --all",
                "publish the payloads, copy GPT-J's files under their S3 prefix, create each stack by change set",
            ):
                cdk.deploy(app)
            for stack in STACKS:
                print(f"\n    {stack} outputs:")
                for key, value in aws.stack_outputs(stack).items():
                    print(f"      {key} = {value}")
            with step("GPT-2 request", "serve the model.tar.gz the endpoint received and ask it one question"):
                gpt2_model_url = aws.stack_outputs("Gpt2Stack")["ModelDataUrl"]
                model_tar = download_model_data(aws, gpt2_model_url, workdir)
                digest = hashlib.sha256(model_tar.read_bytes()).hexdigest()
                print(f"    downloaded {gpt2_model_url} (sha256 {digest[:16]}...)")
                answer = request_gpt2(model_tar)
                print(f"    -> {answer}")
            with step(
                "GPT-J request",
                "serve the files the endpoint's S3 prefix holds with the Hugging Face image's model server",
            ):
                gptj_url = aws.stack_outputs("GptjStack")["ModelDataUrl"]
                model_dir = download_prefix(aws, gptj_url, workdir / "gptj-model")
                files = sorted(p.relative_to(model_dir).as_posix() for p in model_dir.rglob("*") if p.is_file())
                print(f"    downloaded {len(files)} files under {gptj_url}: {', '.join(files)}")
                print(f"    -> {request_gptj(model_dir, model_environment(aws, 'GptjStack'))}")
        finally:
            with step("cdk destroy --all --force", "delete every stack and everything it created"):
                cdk.destroy(app)
        left = [s["StackName"] for s in aws.client("cloudformation").describe_stacks()["Stacks"]]
        print(f"\nstacks left: {json.dumps(left)} (the CDK toolkit stack stays, as after a real bootstrap)")
    print("local AWS stopped")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local_aws.demo", description=__doc__)
    parser.add_argument("--artifacts", type=Path, default=PROJECT_ROOT / "artifacts", help="built artifacts")
    parser.add_argument(
        "--cdk-out", type=Path, default=PROJECT_ROOT / "cdk.out", help="where the synthesized app is left"
    )
    parser.add_argument("--timeout", type=float, default=240.0, help="bound on each CDK CLI call, seconds")
    args = parser.parse_args(argv)
    for component, name in (("gpt2", "model.tar.gz"), ("gptj", f"model/{PAYLOAD_MANIFEST}"), ("inf2", "bundle.tar.gz")):
        if not (args.artifacts / component / name).is_file():
            print(f"{args.artifacts / component / name} is missing: run `make artifacts` first", file=sys.stderr)
            return 2
    # moto notes every type it has no model for (AWS::CDK::Metadata, the bootstrap bucket's
    # policy); the demo's own lines are what the reader follows.
    logging.getLogger("moto").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message="Tried to parse", category=UserWarning)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="llm-inference-demo-") as workdir:
        run(args.artifacts, args.cdk_out, Path(workdir), args.timeout)
    print(f"demo finished in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
