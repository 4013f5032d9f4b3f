"""LlmStack for real: a tiny random-weight Llama and a tiny Qwen, each built offline by
``python -m artifacts_builder llm --tiny``, synthesized by the CDK CLI with ``-c llm.model=<its
payload folder>``, deployed on the local AWS and answered through InvokeEndpoint and streamed
through InvokeEndpointWithResponseStream by the CPU build of the image's vLLM, in OpenAI's
completion and chat shapes; then destroyed, leaving nothing running.

The Llama has no chat template and is given one (``llm.chat_template``); the Qwen has its own
(ChatML) and runs tensor-parallel over two ranks (``llm.tensor_parallel_size=2`` on
ml.g5.12xlarge: the CPU build runs one rank a core). The KV cache vLLM reports at start is the
memory check's own figure a token (llm_contracts/causal_lm.py).

One deploy a model, shared by its tests; the engines start eagerly (``llm.enforce_eager``: about
40 s instead of 90-130 here). Marked ``vllm`` as well as ``e2e``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from llm_contracts.causal_lm import ModelFacts
from llm_contracts.manifest import PAYLOAD_MANIFEST, read_manifest
from local_aws import LocalAws
from local_aws.cli.cdk import Cdk
from local_aws.sagemaker.containers import VLLM_VENV, VllmContainer, running_containers
from tests.e2e.helpers import endpoint_container, invoke, server_sent_events, stream

pytestmark = [pytest.mark.e2e, pytest.mark.vllm]

STACK = "LlmStack"
#: A chat template for the Llama, which has none (inline, as llm.chat_template takes it; on one line:
#: the CDK CLI cuts a -c value at its first newline, so Jinja writes the newline).
LLAMA_TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}{{ '\\n' }}{% endfor %}assistant:"
#: Each model's settings beside its payload.
MODELS: dict[str, dict[str, str]] = {
    "llama": {"llm.chat_template": LLAMA_TEMPLATE},
    "qwen2": {"llm.instance_type": "ml.g5.12xlarge", "llm.tensor_parallel_size": "2"},
}
DEPLOY_TIMEOUT_S = 600
MESSAGES = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Hello, I am"}]
#: Random weights may pick the end-of-sequence token at any step: vLLM's own parameter makes each
#: answer as long as asked.
FULL_LENGTH = {"ignore_eos": True}
#: The local AWS once bootstrapped for this module's deploys.
BOOTSTRAPPED: list[LocalAws] = []


@dataclass
class Deployed:
    kind: str
    payload: Path
    aws: LocalAws

    def container(self) -> VllmContainer:
        container = endpoint_container(self.aws, STACK)
        assert isinstance(container, VllmContainer)
        return container


@pytest.fixture(scope="module")
def payloads(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each tiny model's payload, built in process as `python -m artifacts_builder llm --tiny KIND` builds it
    (one import of torch for both)."""
    from artifacts_builder.llm import build

    out = tmp_path_factory.mktemp("llm-artifacts")
    return {kind: build(model=None, tiny=kind, out=out / kind) for kind in MODELS}


@pytest.fixture(scope="module")
def llm_cdk(local_aws: LocalAws) -> Cdk:
    if not (VLLM_VENV / ".installed").exists():
        pytest.fail(f"{VLLM_VENV} is missing: build it with `make .venv-vllm/.installed`")
    return Cdk(local_aws, timeout_s=DEPLOY_TIMEOUT_S)


@pytest.fixture(scope="module", params=sorted(MODELS))
def deployed(
    request: pytest.FixtureRequest,
    local_aws: LocalAws,
    llm_cdk: Cdk,
    payloads: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Deployed]:
    """`cdk synth LlmStack -c llm.model=<the tiny payload>` by the CLI, `cdk deploy`; destroyed after."""
    kind, payload = request.param, payloads[request.param]
    out = tmp_path_factory.mktemp(f"llm-{kind}")
    context = {
        # No other payload is built there: the other stacks are left out of the synthesis.
        "project.artifacts_dir": str(out / "empty"),
        "llm.model": str(payload),
        "llm.enforce_eager": "true",
        **MODELS[kind],
    }
    assembly = out / "cdk.out"
    synthesized = llm_cdk.run("synth", STACK, "--quiet", "--output", str(assembly), *_context(context))
    assert "Gpt2Stack is left out" in synthesized.output, synthesized.output
    if not BOOTSTRAPPED:
        llm_cdk.bootstrap(assembly)
        BOOTSTRAPPED.append(local_aws)
    llm_cdk.deploy(assembly, [STACK])
    try:
        yield Deployed(kind=kind, payload=payload, aws=local_aws)
    finally:
        llm_cdk.destroy(assembly, [STACK])
        assert not running_containers(), "the endpoint's vLLM server outlived its stack"


def _context(context: dict[str, str]) -> list[str]:
    return [arg for key, value in context.items() for arg in ("-c", f"{key}={value}")]


def rendered_prompt_tokens(payload: Path, template: str | None) -> int:
    """How many tokens MESSAGES make once the template renders them (the model's own where
    `template` is None), by the payload's own tokenizer."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(payload)
    ids = tokenizer.apply_chat_template(MESSAGES, chat_template=template, add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):
        ids = ids["input_ids"]
    return len(ids)


def test_the_completion_shape_is_answered(deployed: Deployed) -> None:
    answer = invoke(deployed.aws, STACK, {"prompt": "Hello, I am a language model,", "max_tokens": 8, **FULL_LENGTH})
    assert answer["object"] == "text_completion", answer
    assert answer["usage"]["completion_tokens"] == 8 and answer["choices"][0]["text"], answer
    assert answer["system_fingerprint"].startswith("vllm-0.30.0"), answer


def test_the_chat_shape_is_answered_through_the_template(deployed: Deployed) -> None:
    """The Llama's given template, the Qwen's own: the prompt vLLM counted is the rendering's."""
    answer = invoke(deployed.aws, STACK, {"messages": MESSAGES, "max_tokens": 8, **FULL_LENGTH})
    assert answer["object"] == "chat.completion", answer
    assert answer["choices"][0]["message"]["role"] == "assistant", answer
    assert answer["usage"]["completion_tokens"] == 8, answer
    template = MODELS[deployed.kind].get("llm.chat_template")
    assert answer["usage"]["prompt_tokens"] == rendered_prompt_tokens(deployed.payload, template), answer


@pytest.mark.parametrize("shape", ["completion", "chat"])
def test_both_shapes_stream(deployed: Deployed, shape: str) -> None:
    body: dict[str, Any] = {
        "max_tokens": 12,
        "temperature": 0,
        "stream_options": {"include_usage": True},
        **FULL_LENGTH,
    }
    body |= {"prompt": "Hello, I am"} if shape == "completion" else {"messages": MESSAGES}
    answer = stream(deployed.aws, STACK, body)
    assert answer["ContentType"].startswith("text/event-stream"), answer["ContentType"]
    parts = [event["PayloadPart"]["Bytes"] for event in answer["Body"]]
    events = server_sent_events(parts)
    assert len(parts) > 1 and events[-1] == b"[DONE]", events[-3:]
    chunks = [json.loads(data) for data in events[:-1]]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 12, chunks[-1]
    if shape == "completion":
        streamed = "".join(c["text"] for chunk in chunks for c in chunk["choices"])
    else:
        assert chunks[0]["object"] == "chat.completion.chunk", chunks[0]
        streamed = "".join(c["delta"].get("content") or "" for chunk in chunks for c in chunk["choices"])
    # The same greedy request answered whole: the stream carried all of it, in order.
    whole = invoke(deployed.aws, STACK, {k: v for k, v in body.items() if k != "stream_options"})
    choice = whole["choices"][0]
    assert streamed and streamed == (choice["text"] if shape == "completion" else choice["message"]["content"])


def test_the_engine_runs_the_stacks_settings(deployed: Deployed) -> None:
    """The SM_VLLM_* flags through the image's entrypoint: the tensor-parallel degree (the CPU build
    runs two ranks), the eager start, the template; and vLLM's KV cache a token is the memory
    check's own figure (its KV cache space over the tokens it reports)."""
    container = deployed.container()
    log = container.log_tail(2_000_000)
    arguments = re.search(r"vLLM server arguments: (\[.*\])", log)
    assert arguments is not None, log[-3000:]
    assert "'--enforce-eager'" in arguments[1]
    degree = int(MODELS[deployed.kind].get("llm.tensor_parallel_size", "1"))
    assert ("'--tensor-parallel-size', '2'" in arguments[1]) == (degree == 2)
    assert ("'--chat-template'" in arguments[1]) == (deployed.kind == "llama")
    assert f"tensor_parallel_size={degree}," in log
    reported = re.search(r"KV cache size: ([\d,]+) tokens", log)
    assert reported is not None, log[-3000:]
    tokens = int(reported[1].replace(",", ""))
    facts = ModelFacts.from_payload(deployed.payload, read_manifest(deployed.payload, PAYLOAD_MANIFEST)["files"])
    estimate = facts.kv_bytes_per_token(2, degree)  # bfloat16
    print(f"{deployed.kind}: vLLM's KV cache {tokens} tokens in {container.kv_cache_gib} GiB a rank; the check's "
          f"{estimate} bytes a token")  # fmt: skip
    assert tokens * estimate == container.kv_cache_gib * 2**30
