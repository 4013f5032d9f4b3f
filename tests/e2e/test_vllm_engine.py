"""`cdk deploy GptjStack -c gptj.engine=vllm` on the local AWS answers InvokeEndpoint from the
real vLLM server (the CPU build of the image's vLLM version, local_aws/vllm_entrypoint.py).

Marked ``vllm`` as well as ``e2e``: minutes (the server compiles its kernels at every start).
Run with ``.venv/bin/python -m pytest -m vllm``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError

from local_aws import LocalAws
from local_aws.cdk import Cdk
from local_aws.containers import VLLM_VENV, running_containers
from project_config import load_config
from tests.e2e.helpers import Assembly, invoke
from tests.infra.helpers import ROOT, cdk_context, make_artifacts, synthesize

pytestmark = [pytest.mark.e2e, pytest.mark.vllm]

SEED_GPTJ_PROMPT = "Can you please let us know more details about your"
#: The vLLM server starts in about three minutes here: the deploy waits for InService.
DEPLOY_TIMEOUT_S = 900


@pytest.fixture(scope="module")
def vllm_assembly(tmp_path_factory: pytest.TempPathFactory) -> Assembly:
    """The tiny GPT-J payload (heads of 32: vLLM's CPU attention) and stand-ins for the other
    stacks' artifacts, synthesized with the vllm engine."""
    if not (VLLM_VENV / ".installed").exists():
        pytest.fail(f"{VLLM_VENV} is missing: build it with `make .venv-vllm/.installed`")
    artifacts = tmp_path_factory.mktemp("vllm-artifacts")
    subprocess.run(
        [sys.executable, "-m", "artifacts_builder", "gptj", "--tiny", "--out", str(artifacts)],
        check=True,
        capture_output=True,
        cwd=ROOT,
        timeout=300,
    )
    make_artifacts(artifacts, ("gpt2", "inf2"))
    settings = {"project.artifacts_dir": str(artifacts), "gptj.engine": "vllm", "gptj.max_model_len": "256"}
    synthesized = synthesize(tmp_path_factory.mktemp("cdk.out-vllm"), artifacts, **settings)
    return Assembly(path=synthesized.outdir, config=load_config(cdk_context(**settings)))


@pytest.fixture(scope="module")
def deployed(local_aws: LocalAws, vllm_assembly: Assembly) -> Iterator[Cdk]:
    cdk = Cdk(local_aws, timeout_s=DEPLOY_TIMEOUT_S)
    cdk.bootstrap(vllm_assembly.path)
    cdk.deploy(vllm_assembly.path, ["GptjStack"])
    try:
        yield cdk
    finally:
        cdk.destroy(vllm_assembly.path, ["GptjStack"])
        assert not running_containers(), "the endpoint's vLLM server outlived its stack"


def test_the_completion_body_is_answered_by_vllm(deployed: Cdk, local_aws: LocalAws) -> None:
    answer = invoke(local_aws, "GptjStack", {"prompt": SEED_GPTJ_PROMPT, "max_tokens": 12})
    assert answer["object"] == "text_completion", answer
    assert answer["usage"]["completion_tokens"] == 12 and answer["choices"][0]["text"], answer
    assert answer["system_fingerprint"].startswith("vllm-0.30.0"), answer


def test_a_request_past_max_model_len_is_a_model_error_with_the_servers_400(deployed: Cdk, local_aws: LocalAws) -> None:
    with pytest.raises(ClientError) as raised:
        invoke(local_aws, "GptjStack", {"prompt": SEED_GPTJ_PROMPT, "max_tokens": 1000})
    response = raised.value.response
    assert response["Error"]["Code"] == "ModelError"
    assert response.get("OriginalStatusCode") == 400, response
    assert "max_model_len" in str(response.get("OriginalMessage")), response


def test_the_deployed_model_runs_the_vllm_image(deployed: Cdk, local_aws: LocalAws) -> None:
    sm = local_aws.client("sagemaker")
    endpoint = sm.describe_endpoint(EndpointName=local_aws.stack_outputs("GptjStack")["EndpointName"])
    config = sm.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    model = sm.describe_model(ModelName=config["ProductionVariants"][0]["ModelName"])
    assert "/vllm:0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker" in model["PrimaryContainer"]["Image"]
    assert model["PrimaryContainer"]["Environment"]["SM_VLLM_MAX_MODEL_LEN"] == "256"
