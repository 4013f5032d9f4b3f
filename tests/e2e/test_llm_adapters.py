"""Issue 40 end to end: `cdk deploy LlmStack` on the local AWS with a tiny Llama in
inference-component mode and two LoRA adapters (``-c llm.adapters=["support","legal"]``), each
built offline as ``python -m artifacts_builder lora --tiny-seed N`` builds it; the base and each
adapter answer differently through InvokeEndpoint and InvokeEndpointWithResponseStream from the
CPU build of the image's vLLM. Then a third adapter is added and one removed, each by a stack
update, while the same engine process serves; then destroyed, leaving nothing running."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from local_aws import LocalAws
from local_aws.cli.cdk import Cdk
from local_aws.sagemaker.containers import VLLM_VENV, running_containers
from local_aws.sagemaker.runtime import hosting_plane

pytestmark = [pytest.mark.e2e, pytest.mark.vllm]

STACK = "LlmStack"
PROMPT = {"prompt": "The ticket says", "max_tokens": 8, "temperature": 0, "ignore_eos": True}
ADAPTERS = {"support": 1, "legal": 2, "finance": 3}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama's payload and three adapters beside it, as the builder's command line writes them."""
    from artifacts_builder.__main__ import main
    from artifacts_builder.llm import build

    out = tmp_path_factory.mktemp("adapters-artifacts")
    payload = build(model=None, tiny="llama", out=out)
    for name, seed in ADAPTERS.items():
        assert main(["lora", "--name", name, "--tiny-seed", str(seed), "--out", str(out)]) == 0
    return payload


class Deployer:
    def __init__(self, aws: LocalAws, cdk: Cdk, payload: Path, work: Path) -> None:
        self.aws, self.cdk, self.payload, self.work = aws, cdk, payload, work
        self.assembly = work / "cdk.out"
        self.bootstrapped = False

    def deploy(self, adapters: list[str]) -> None:
        context = {
            "project.artifacts_dir": str(self.work / "empty"),
            "llm.model": str(self.payload),
            "llm.enforce_eager": "true",
            "llm.endpoint_mode": "inference-component",
            "llm.adapters": json.dumps(adapters),
            "llm.max_lora_rank": "8",
        }
        args = [arg for key, value in context.items() for arg in ("-c", f"{key}={value}")]
        self.cdk.run("synth", STACK, "--quiet", "--output", str(self.assembly), *args)
        if not self.bootstrapped:  # idempotent: the group's other modules may have bootstrapped the account
            self.cdk.bootstrap(self.assembly)
            self.bootstrapped = True
        self.cdk.deploy(self.assembly, [STACK])

    def outputs(self) -> dict[str, str]:
        return self.aws.stack_outputs(STACK)

    def text(self, component: str, *, streamed: bool = False) -> str:
        runtime, endpoint = self.aws.client("sagemaker-runtime"), self.outputs()["EndpointName"]
        if not streamed:
            answer = runtime.invoke_endpoint(EndpointName=endpoint, InferenceComponentName=component,
                                             ContentType="application/json", Body=json.dumps(PROMPT))  # fmt: skip
            return str(json.loads(answer["Body"].read())["choices"][0]["text"])
        answer = runtime.invoke_endpoint_with_response_stream(
            EndpointName=endpoint, InferenceComponentName=component, ContentType="application/json",
            Body=json.dumps({**PROMPT, "stream": True}),
        )  # fmt: skip
        raw = b"".join(e["PayloadPart"]["Bytes"] for e in answer["Body"] if "PayloadPart" in e).decode()
        events = [line[len("data: ") :] for line in raw.splitlines() if line.startswith("data: ")]
        return "".join(json.loads(e)["choices"][0]["text"] for e in events if e != "[DONE]")

    def adapter(self, name: str) -> str:
        return self.outputs()[f"AdapterComponentName{name}"]

    def engine_pid(self) -> int:
        base = self.outputs()["InferenceComponentName"]
        hosted = hosting_plane().find((self.aws.account, self.aws.region, f"inference-component/{base}"))
        assert hosted is not None and hosted.live is not None
        (container,) = hosted.live.instances[next(iter(hosted.live.instances))]
        assert container.process is not None
        return container.process.pid


@pytest.fixture(scope="module")
def deployed(local_aws: LocalAws, built: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployer]:
    if not (VLLM_VENV / ".installed").exists():
        pytest.fail(f"{VLLM_VENV} is missing: build it with `make .venv-vllm/.installed`")
    cdk = Cdk(local_aws, timeout_s=600)
    deployer = Deployer(local_aws, cdk, built, tmp_path_factory.mktemp("llm-adapters"))
    deployer.deploy(["support", "legal"])
    try:
        yield deployer
    finally:
        cdk.destroy(deployer.assembly, [STACK])
        assert not running_containers(), "the engine outlived its stack"


def test_the_base_and_each_adapter_answer_differently_whole_and_streamed(deployed: Deployer) -> None:
    names = {
        "base": deployed.outputs()["InferenceComponentName"],
        **{n: deployed.adapter(n) for n in ("support", "legal")},
    }
    answers = {label: deployed.text(component) for label, component in names.items()}
    assert len(set(answers.values())) == 3, answers
    for label, component in names.items():
        assert deployed.text(component) == answers[label]  # greedy: the same every time
        assert deployed.text(component, streamed=True) == answers[label]


def test_an_adapter_is_added_and_one_removed_by_stack_updates_on_the_same_engine(deployed: Deployer) -> None:
    pid, base = deployed.engine_pid(), deployed.outputs()["InferenceComponentName"]
    answer = deployed.text(base)
    legal = deployed.adapter("legal")
    deployed.deploy(["support", "legal", "finance"])
    assert deployed.engine_pid() == pid
    assert deployed.text(deployed.adapter("finance")) not in (answer, deployed.text(legal))
    deployed.deploy(["support", "finance"])
    assert deployed.engine_pid() == pid and deployed.text(base) == answer
    with pytest.raises(ClientError) as gone:
        deployed.text(legal)
    assert gone.value.response["Error"]["Code"] == "ValidationError"
    assert "AdapterComponentNamelegal" not in deployed.outputs()
    deployed.deploy(["support", "legal"])  # as the module found it
