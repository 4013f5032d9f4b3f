"""Issue 40: adapter inference components on the local AWS, adapters_endpoint by the real vLLM CPU build
(the image's version, .venv-vllm): a tiny Llama as the base component, tiny random LoRA adapters
(artifacts_builder/lora.py) as adapter components, each registered with the base's copy through
vLLM's SageMaker route (POST /adapters) and invoked by its own InferenceComponentName, whole and
streamed; one added later without the engine restarting, one deleted; what AWS rules out refused.
One endpoint for the module (the engine starts in about 40 s: LoRA turns vLLM's compile off)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from artifacts_builder.llm import build as build_llm
from artifacts_builder.lora import build as build_adapter
from artifacts_builder.lora import make_tiny_adapter
from llm_contracts.lora import environment
from local_aws import LocalAws
from local_aws.sagemaker.runtime import hosting_plane
from tests.local_aws.helpers import ROLE_ARN, component_variant

pytestmark = pytest.mark.vllm

VLLM_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker"
BUCKET = "adapters-test"
BASE = "base"
PROMPT = {"prompt": "The capital of France is", "max_tokens": 8, "temperature": 0}


def _wait(sm: Any, name: str, *, timeout_s: float = 300) -> str:
    import time

    # clock: a deadline for the engine's start (about 40 s here); a test asserts the status it ends on.
    deadline = time.monotonic() + timeout_s
    while True:
        status = str(sm.describe_inference_component(InferenceComponentName=name)["InferenceComponentStatus"])
        # clock: the same deadline
        if status not in ("Creating", "Updating") or time.monotonic() > deadline:
            return status
        time.sleep(0.5)


@pytest.fixture(scope="module")
def adapters_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalAws, dict[str, str]]]:
    """A local AWS with the base component InService and three adapter archives in S3 (name -> URL)."""
    from local_aws.clock import Clock

    work = tmp_path_factory.mktemp("adapters")
    payload = build_llm(out=work / "base", model=None, tiny="llama")
    archives = {}
    for seed, name in enumerate(("support", "legal", "finance"), start=1):
        source = make_tiny_adapter(payload, work / f"src-{name}", seed=seed)
        archives[name] = build_adapter(source, payload, work / "adapters", name=name, max_rank=8)
    with LocalAws(aws_managed_policies=False, clock=Clock(speed=0)) as aws:
        s3, sm = aws.client("s3"), aws.client("sagemaker")
        s3.create_bucket(Bucket=BUCKET)
        for file in sorted(payload.rglob("*")):
            if file.is_file():
                s3.put_object(Bucket=BUCKET, Key=f"base/{file.relative_to(payload)}", Body=file.read_bytes())
        urls = {}
        for name, archive in archives.items():
            s3.put_object(Bucket=BUCKET, Key=f"adapters/{name}.tar.gz", Body=archive.read_bytes())
            urls[name] = f"s3://{BUCKET}/adapters/{name}.tar.gz"
        env = {"SM_VLLM_ENFORCE_EAGER": "true", "SM_VLLM_MAX_NUM_SEQS": "4",
               **environment(max_loras=2, max_rank=8, max_cpu_loras=4)}  # fmt: skip
        sm.create_model(
            ModelName="tiny-llama",
            ExecutionRoleArn=ROLE_ARN,
            PrimaryContainer={
                "Image": VLLM_IMAGE,
                "Environment": env,
                "ModelDataSource": {
                    "S3DataSource": {
                        "S3Uri": f"s3://{BUCKET}/base/",
                        "S3DataType": "S3Prefix",
                        "CompressionType": "None",
                    }
                },
            },
        )
        sm.create_endpoint_config(EndpointConfigName="cfg", ProductionVariants=[component_variant()],
                                  ExecutionRoleArn=ROLE_ARN)  # fmt: skip
        sm.create_endpoint(EndpointName="ep", EndpointConfigName="cfg")
        sm.get_waiter("endpoint_in_service").wait(EndpointName="ep", WaiterConfig={"Delay": 1, "MaxAttempts": 120})
        sm.create_inference_component(
            InferenceComponentName=BASE,
            EndpointName="ep",
            VariantName="AllTraffic",
            Specification={
                "ModelName": "tiny-llama",
                "ComputeResourceRequirements": {"NumberOfAcceleratorDevicesRequired": 1, "MinMemoryRequiredInMb": 1024},
                "StartupParameters": {"ContainerStartupHealthCheckTimeoutInSeconds": 300},
            },
            RuntimeConfig={"CopyCount": 1},
        )
        assert _wait(sm, BASE) == "InService"
        yield aws, urls


def _adapter(aws: LocalAws, name: str, url: str, **extra: Any) -> None:
    aws.client("sagemaker").create_inference_component(
        InferenceComponentName=name,
        EndpointName="ep",
        Specification={"BaseInferenceComponentName": BASE, "Container": {"ArtifactUrl": url}, **extra},
    )


def _text(aws: LocalAws, component: str) -> str:
    answer = aws.client("sagemaker-runtime").invoke_endpoint(
        EndpointName="ep", InferenceComponentName=component, ContentType="application/json", Body=json.dumps(PROMPT)
    )
    return str(json.loads(answer["Body"].read())["choices"][0]["text"])


def _streamed(aws: LocalAws, component: str) -> str:
    answer = aws.client("sagemaker-runtime").invoke_endpoint_with_response_stream(
        EndpointName="ep", InferenceComponentName=component, ContentType="application/json",
        Body=json.dumps({**PROMPT, "stream": True}),
    )  # fmt: skip
    raw = b"".join(e["PayloadPart"]["Bytes"] for e in answer["Body"] if "PayloadPart" in e).decode()
    texts = []
    for line in raw.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            texts.append(json.loads(line[len("data: ") :])["choices"][0]["text"])
    return "".join(texts)


def _engine_pid(aws: LocalAws) -> int:
    hosted = hosting_plane().find((aws.account, aws.region, f"inference-component/{BASE}"))
    assert hosted is not None and hosted.live is not None
    (container,) = hosted.live.instances["AllTraffic"]
    assert container.process is not None
    return container.process.pid


def test_each_adapter_answers_differently_from_its_base_and_the_other_whole_and_streamed(
    adapters_endpoint: tuple[LocalAws, dict[str, str]],
) -> None:
    aws, urls = adapters_endpoint
    sm = aws.client("sagemaker")
    for name in ("support", "legal"):
        _ensure(aws, name, urls[name])
        described = sm.describe_inference_component(InferenceComponentName=name)
        assert described["Specification"]["BaseInferenceComponentName"] == BASE
    answers = {name: _text(aws, name) for name in (BASE, "support", "legal")}
    assert len(set(answers.values())) == 3, answers
    for name, text in answers.items():
        assert _text(aws, name) == text  # greedy: the same answer every time
        assert _streamed(aws, name) == text


def test_an_adapter_added_later_is_served_without_the_engine_restarting_and_a_deleted_one_is_gone(
    adapters_endpoint: tuple[LocalAws, dict[str, str]],
) -> None:
    aws, urls = adapters_endpoint
    sm = aws.client("sagemaker")
    pid = _engine_pid(aws)
    before = _text(aws, BASE)
    _adapter(aws, "finance", urls["finance"])
    assert _wait(sm, "finance") == "InService"
    assert _text(aws, "finance") not in (before, "")
    sm.delete_inference_component(InferenceComponentName="finance")
    with pytest.raises(ClientError) as gone:
        _text(aws, "finance")
    assert gone.value.response["Error"]["Code"] == "ValidationError"
    assert _text(aws, BASE) == before
    assert _engine_pid(aws) == pid  # the same engine process throughout


def test_what_aws_rules_out_for_an_adapter_is_refused(adapters_endpoint: tuple[LocalAws, dict[str, str]]) -> None:
    aws, urls = adapters_endpoint
    refusals = {
        "compute": {"ComputeResourceRequirements": {"MinMemoryRequiredInMb": 1024}},
        "no-archive": {"Container": {"ArtifactUrl": f"s3://{BUCKET}/adapters/support"}},
    }
    for name, extra in refusals.items():
        with pytest.raises(ClientError) as refused:
            _adapter(aws, name, urls["support"], **extra)
        assert refused.value.response["Error"]["Code"] == "ValidationException", refused.value.response
    assert "Could not find inference component" in _refused_on(aws, "orphan", "nothing", urls["support"])
    _ensure(aws, "support", urls["support"])
    assert "is an adapter inference component" in _refused_on(aws, "stacked", "support", urls["legal"])


def _refused_on(aws: LocalAws, name: str, base: str, url: str) -> str:
    """What SageMaker answers an adapter component `name` on `base`."""
    with pytest.raises(ClientError) as refused:
        aws.client("sagemaker").create_inference_component(
            InferenceComponentName=name, EndpointName="ep",
            Specification={"BaseInferenceComponentName": base, "Container": {"ArtifactUrl": url}},
        )  # fmt: skip
    return str(refused.value)


def _ensure(aws: LocalAws, name: str, url: str) -> None:
    """The adapter component `name` InService (made now unless an earlier test made it)."""
    found = aws.client("sagemaker").list_inference_components()["InferenceComponents"]
    if name not in {c["InferenceComponentName"] for c in found}:
        _adapter(aws, name, url)
    assert _wait(aws.client("sagemaker"), name) == "InService"
