"""`python -m local_aws.cli.demo` (what `make demo` runs after building the tiny artifacts):
the project's main job, `cdk deploy` then `cdk destroy` of the three stacks, for real,
against a local AWS on 127.0.0.1. Each step says what it does and how long it took; the
local AWS is stopped on every exit path, so nothing is left running."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from llm_contracts.gptj import PAYLOAD_MANIFEST
from local_aws.cli.cdk import PROJECT_ROOT, Cdk
from local_aws.server import LocalAws, seed_neuron_dlami

STACKS = ("Gpt2Stack", "GptjStack", "Inf2Stack")
SEED_GPTJ_PROMPT = "Can you please let us know more details about your"


@contextmanager
def step(title: str, why: str) -> Iterator[None]:
    print(f"\n==> {title}\n    {why}", flush=True)
    started = time.monotonic()
    yield
    print(f"    done in {time.monotonic() - started:.1f} s", flush=True)


def invoke(aws: LocalAws, stack: str, request: Mapping[str, object]) -> str:
    """Call the stack's endpoint through the SageMaker runtime API, as a client in AWS would:
    the local AWS forwards it to the container the endpoint started. Returns a line to print."""
    name = aws.stack_outputs(stack)["EndpointName"]
    endpoint = aws.client("sagemaker").describe_endpoint(EndpointName=name)
    body = json.dumps(request)
    answer = aws.client("sagemaker-runtime").invoke_endpoint(
        EndpointName=name, ContentType="application/json", Accept="application/json", Body=body
    )
    text = answer["Body"].read().decode()
    return (
        f"{name} ({endpoint['EndpointStatus']}, variant {answer['InvokedProductionVariant']}): {body} -> {text[:300]}"
    )


def streamed_lines(aws: LocalAws, name: str, request: Mapping[str, object]) -> Iterator[bytes]:
    """Call endpoint `name` with InvokeEndpointWithResponseStream (`request` with ``"stream":
    true``), as a client in AWS would: each line of the container's answer as soon as the
    PayloadPart that ends it arrives (a part may hold less or more than a line)."""
    answer = aws.client("sagemaker-runtime").invoke_endpoint_with_response_stream(
        EndpointName=name, ContentType="application/json", Body=json.dumps({**request, "stream": True})
    )
    pending = b""
    for event in answer["Body"]:
        pending += event.get("PayloadPart", {}).get("Bytes", b"")
        *lines, pending = pending.split(b"\n")
        yield from lines


def stream_lines(aws: LocalAws, name: str, request: Mapping[str, object]) -> Iterator[dict[str, Any]]:
    """Each JSON line of the GPT-2 container's streamed answer (serving/gpt2/streaming.py)."""
    for line in streamed_lines(aws, name, request):
        yield json.loads(line)


def print_stream(aws: LocalAws, stack: str, request: Mapping[str, object]) -> None:
    """Each token as it arrives, with the milliseconds since the call."""
    print(f"    {json.dumps(request)} ->")
    started = time.monotonic()
    for line in stream_lines(aws, aws.stack_outputs(stack)["EndpointName"], request):
        at = (time.monotonic() - started) * 1000
        if "token" in line:
            print(f"    {at:8.1f} ms  token {line['token']['id']:>5}  {line['token']['text']!r}", flush=True)
        elif "end" in line:
            end = line["end"]
            print(f"    {at:8.1f} ms  end ({end['finish_reason']}, batch {end['batch_size']}): {end['text']!r}")
        else:
            print(f"    {at:8.1f} ms  error: {line['error']}")


def sse_texts(aws: LocalAws, name: str, request: Mapping[str, object]) -> Iterator[str]:
    """Call endpoint `name` with InvokeEndpointWithResponseStream and yield each piece of text the
    vLLM server's server-sent events carry (``data: {"choices": [{"text": ...}]}``, until
    ``data: [DONE]``), as soon as its PayloadPart arrives."""
    for line in streamed_lines(aws, name, request):
        data = line.strip().removeprefix(b"data:").strip()
        if data and data != b"[DONE]":
            yield "".join(choice.get("text", "") for choice in json.loads(data).get("choices", []))


@contextmanager
def deployed(
    artifacts: Path, app: Path, timeout_s: float, *, extra: Mapping[str, str], stacks: list[str], why: str
) -> Iterator[LocalAws]:
    """A local AWS with `stacks` (empty: all three) synthesized with `extra` settings, bootstrapped
    and deployed; on every exit path they are destroyed and the local AWS stopped."""
    with LocalAws() as aws:
        cdk = Cdk(aws, timeout_s=timeout_s)
        print(f"local AWS: {aws.endpoint} (account {aws.account}, region {aws.region})")
        with step("Seed the Neuron DLAMI parameter", "Inf2Stack resolves its AMI from this public SSM parameter"):
            print(f"    -> {seed_neuron_dlami(aws)}")
        # No Docker engine builds and publishes the GPT-2 image asset here: give its URI.
        context = {
            "project.artifacts_dir": str(artifacts.resolve()),
            "gpt2.image_uri": aws.ecr_image_uri("llm-inference-gpt2", "demo"),
            **extra,
        }
        settings = "".join(f" -c {key}={value}" for key, value in extra.items())
        with step(f"cdk synth --all{settings}", "synthesize the app once; deploy and destroy reuse cdk.out"):
            cdk.synth(app, context)
        with step("cdk bootstrap", "create the CDK toolkit stack: asset bucket, publishing and deploy roles"):
            cdk.bootstrap(app)
        targets = stacks or ["--all"]
        try:
            with step(f"cdk deploy {' '.join(targets)}", why):
                cdk.deploy(app, targets)
            yield aws
        finally:
            with step(f"cdk destroy {' '.join(targets)} --force", "delete the stacks and everything they created"):
                cdk.destroy(app, targets)
        left = [s["StackName"] for s in aws.client("cloudformation").describe_stacks()["Stacks"]]
        print(f"\nstacks left: {json.dumps(left)} (the CDK toolkit stack stays, as after a real bootstrap)")
    print("local AWS stopped")


def run_vllm(artifacts: Path, app: Path, timeout_s: float) -> None:
    """GptjStack alone on the vllm engine: its endpoint runs the vLLM server (the CPU build of the
    image's version, from .venv-vllm), and one GPT-J answer arrives token by token."""
    why = (
        "the endpoint starts vLLM as the image's entrypoint does (SM_VLLM_* flags, /opt/ml/model); it is "
        "InService once /ping answers, after vLLM has compiled its kernels (minutes on a CPU)"
    )
    extra = {"gptj.engine": "vllm"}  # the default engine, named: the demo is about it
    with deployed(artifacts, app, timeout_s, extra=extra, stacks=["GptjStack"], why=why) as aws:
        name = aws.stack_outputs("GptjStack")["EndpointName"]
        with step(
            "GPT-J streamed request",
            'InvokeEndpointWithResponseStream with the OpenAI completion body and "stream": true: vLLM sends '
            "server-sent events as it generates, each arriving here in a PayloadPart",
        ):
            request = {"prompt": SEED_GPTJ_PROMPT, "max_tokens": 24}
            print(f"    {json.dumps(request)} ->")
            started = time.monotonic()
            for text in sse_texts(aws, name, request):
                print(f"    {(time.monotonic() - started) * 1000:8.1f} ms  {text!r}", flush=True)


def run(artifacts: Path, app: Path, timeout_s: float) -> None:
    why = (
        "publish the payloads, copy GPT-J's files under their S3 prefix, create each stack by change set;"
        " each endpoint starts its model's container and is InService once it answers /ping"
    )
    # GPT-J on the toolkit engine, which starts in seconds on a CPU; the default engine (vllm)
    # compiles its kernels for a minute or more: `make demo-vllm` shows it.
    extra = {"gptj.engine": "hf-toolkit"}
    with deployed(artifacts, app, timeout_s, extra=extra, stacks=[], why=why) as aws:
        for stack in STACKS:
            print(f"\n    {stack} outputs:")
            for key, value in aws.stack_outputs(stack).items():
                print(f"      {key} = {value}")
        with step("GPT-2 request", "InvokeEndpoint: the endpoint's container (nginx + gunicorn) answers"):
            print(f"    -> {invoke(aws, 'Gpt2Stack', {'input': 'amazon'})}")
        with step(
            "GPT-2 streamed request",
            'InvokeEndpointWithResponseStream with "stream": true: each token is a line the container sends '
            "as it is generated, arriving here as a PayloadPart of the event stream",
        ):
            print_stream(aws, "Gpt2Stack", {"input": "amazon", "parameters": {"max_new_tokens": 16}})
        with step("GPT-J request", "InvokeEndpoint: the Hugging Face image's model server answers"):
            request = {"inputs": SEED_GPTJ_PROMPT, "parameters": {"max_new_tokens": 12}}
            print(f"    -> {invoke(aws, 'GptjStack', request)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local_aws.cli.demo", description=__doc__)
    parser.add_argument("--artifacts", type=Path, default=PROJECT_ROOT / "artifacts", help="built artifacts")
    parser.add_argument(
        "--cdk-out", type=Path, default=PROJECT_ROOT / "cdk.out", help="where the synthesized app is left"
    )
    parser.add_argument("--timeout", type=float, default=240.0, help="bound on each CDK CLI call, seconds")
    parser.add_argument(
        "--engine",
        choices=("hf-toolkit", "vllm"),
        default="hf-toolkit",
        help="vllm: GptjStack alone on the vLLM engine, one answer streamed (make demo-vllm)",
    )
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
    if args.engine == "vllm":
        # vLLM compiles its kernels before /ping answers: minutes on a CPU.
        run_vllm(args.artifacts, args.cdk_out, max(args.timeout, 900.0))
    else:
        run(args.artifacts, args.cdk_out, args.timeout)
    print(f"demo finished in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
