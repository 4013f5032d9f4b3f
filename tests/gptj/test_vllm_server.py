"""The payload served by the vllm engine: AWS's vLLM image's entrypoint and the real vLLM server
(the CPU build of the image's vLLM version, ``.venv-vllm``), started as the image starts it.

Marked ``vllm``: not in the default run (the server compiles its kernels for a minute or two at
every start). Run them with ``make .venv-vllm/.installed`` then ``.venv/bin/python -m pytest -m vllm``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from local_aws.containers import VLLM_VENV, VllmContainer
from project_config import from_cdk_json
from tests.gptj.helpers import SEED_PROMPT
from tests.infra.helpers import ROOT

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def stack_environment() -> dict[str, str]:
    """The container environment GptjStack gives its model on the vllm engine, with what the
    tiny model allows (its n_positions is 256)."""
    settings = from_cdk_json({"gptj.engine": "vllm", "gptj.max_model_len": "256"}).gptj
    return {**settings.container_environment(), **settings.endpoint.environment}


@pytest.fixture(scope="module")
def server(model_dir: Path) -> Iterator[VllmContainer]:
    if not (VLLM_VENV / ".installed").exists():
        pytest.fail(f"{VLLM_VENV} is missing: build it with `make .venv-vllm/.installed`")
    with VllmContainer(model_dir, environment=stack_environment()) as container:
        container.wait_ready(timeout=600)
        yield container


def test_the_seed_request_in_the_completion_shape(server: VllmContainer) -> None:
    body = json.loads((ROOT / "loadtest" / "requests" / "gptj-vllm.json").read_text())["body"]
    assert body["prompt"] == SEED_PROMPT
    response = server.invoke(json.dumps(body).encode())
    assert response.status == 200, response.body
    answer = json.loads(response.body)
    assert answer["object"] == "text_completion"
    assert answer["usage"]["completion_tokens"] == body["max_tokens"]
    assert answer["choices"][0]["finish_reason"] == "length" and answer["choices"][0]["text"]


def test_the_engine_got_the_stacks_flags(server: VllmContainer) -> None:
    log = server.log_tail(200_000)
    arguments = re.search(r"vLLM server arguments: (\[.*\])", log)
    assert arguments is not None, log
    assert "'--max-num-seqs', '8'" in arguments[1] and "'--max-model-len', '256'" in arguments[1]
    assert f"'--model', '{server.model_dir}'" in arguments[1]


def test_a_request_past_the_model_length_gets_a_400(server: VllmContainer) -> None:
    response = server.invoke(json.dumps({"prompt": SEED_PROMPT, "max_tokens": 1000}).encode())
    assert response.status == 400, response.body
    assert "maximum context length" in response.body.decode() or "max_model_len" in response.body.decode()


def test_the_toolkit_body_gets_a_4xx(server: VllmContainer) -> None:
    response = server.invoke(json.dumps({"inputs": SEED_PROMPT}).encode())
    assert 400 <= response.status < 500, response.body
