"""The deployed endpoints answer InvokeEndpoint from their own containers (the local AWS's
SageMaker runtime: local_aws/sagemaker/runtime.py), with SageMaker's errors, and stop with the stack."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from local_aws import LocalAws
from local_aws.cli.cdk import Cdk
from local_aws.sagemaker.containers import running_containers
from project_config import HfToolkitEngine
from tests.docs_pages import Body, bodies_for
from tests.e2e.helpers import (
    FUZZ_EXAMPLES,
    GPT2_KEYS,
    TOOLKIT_KEYS,
    Assembly,
    fuzz_target,
    invoke,
    remove_unusable,
    unusable_endpoints,
)
from tests.e2e.oncall import (
    model_errors_and_capacity_faults_fire_and_clear,
    oncall,
    toolkit_overload_fires_and_clears,
)
from tests.local_aws import fuzz

pytestmark = pytest.mark.e2e

SEED_GPTJ_PROMPT = "Can you please let us know more details about your"
ENDPOINT_STACKS = ["Gpt2Stack", "GptjStack"]


@pytest.fixture(scope="module")
def deployed(bootstrapped: Cdk, base: Assembly) -> Iterator[Cdk]:
    bootstrapped.deploy(base.path, ENDPOINT_STACKS)
    try:
        yield bootstrapped
    finally:
        bootstrapped.destroy(base.path, ENDPOINT_STACKS)


def model_error(call: object) -> dict[str, object]:
    with pytest.raises(ClientError) as raised:
        call()  # type: ignore[operator]
    return raised.value.response  # type: ignore[return-value]


def test_gpt2_answers_the_seed_request(deployed: Cdk, local_aws: LocalAws) -> None:
    answer = invoke(local_aws, "Gpt2Stack", {"input": "amazon"})
    (output,) = answer["outputs"]
    assert output["input"] == "amazon" and output["completions"], answer
    assert all(c["generated_text"].startswith("amazon") for c in output["completions"])


def test_gptj_answers_the_seed_request(deployed: Cdk, local_aws: LocalAws) -> None:
    (answer,) = invoke(local_aws, "GptjStack", {"inputs": SEED_GPTJ_PROMPT, "parameters": {"max_new_tokens": 12}})
    text = answer["generated_text"]
    assert text.startswith(SEED_GPTJ_PROMPT) and len(text) > len(SEED_GPTJ_PROMPT), answer


@pytest.mark.parametrize(
    ("stack", "body", "expected"),
    [
        ("Gpt2Stack", b'{"input": "amazon"', "not valid JSON"),
        ("GptjStack", b'{"parameters": {}}', "inputs"),
    ],
)
def test_a_bad_request_is_a_model_error_with_the_containers_400(
    deployed: Cdk, local_aws: LocalAws, stack: str, body: bytes, expected: str
) -> None:
    response = model_error(lambda: invoke(local_aws, stack, body))
    assert response["Error"]["Code"] == "ModelError"
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 424
    assert response["OriginalStatusCode"] == 400
    error = json.loads(response["OriginalMessage"])
    assert expected in json.dumps(error), error
    # The container is still there and answers the next request.
    assert invoke(local_aws, "Gpt2Stack", {"input": "amazon"})["outputs"]


def test_an_unknown_endpoint_is_a_validation_error(deployed: Cdk, local_aws: LocalAws) -> None:
    runtime = local_aws.client("sagemaker-runtime")
    response = model_error(lambda: runtime.invoke_endpoint(EndpointName="no-such-endpoint", Body=b"{}"))
    assert response["Error"]["Code"] == "ValidationError"
    assert "no-such-endpoint" in response["Error"]["Message"]


def test_gpt2_streams_its_tokens(deployed: Cdk, local_aws: LocalAws) -> None:
    from local_aws.cli.demo import stream_lines

    name = local_aws.stack_outputs("Gpt2Stack")["EndpointName"]
    lines = list(stream_lines(local_aws, name, {"input": "amazon", "parameters": {"max_new_tokens": 8}}))
    end = lines[-1]["end"]
    assert [line["token"]["text"] for line in lines[:-1]] and len(lines) - 1 == end["completion_tokens"]
    assert (
        end["text"]
        == invoke(local_aws, "Gpt2Stack", {"input": "amazon", "parameters": {"max_new_tokens": 8}})["outputs"][0][
            "completions"
        ][0]["text"]
    )


def test_gptj_refuses_a_stream_and_answers_whole_through_the_streaming_call(deployed: Cdk, local_aws: LocalAws) -> None:
    runtime = local_aws.client("sagemaker-runtime")
    name = local_aws.stack_outputs("GptjStack")["EndpointName"]
    request = {"inputs": SEED_GPTJ_PROMPT, "parameters": {"max_new_tokens": 4}}
    response = model_error(
        lambda: runtime.invoke_endpoint_with_response_stream(
            EndpointName=name, ContentType="application/json", Body=json.dumps({**request, "stream": True})
        )
    )
    assert response["Error"]["Code"] == "ModelError" and response["OriginalStatusCode"] == 400
    assert "stream is not supported" in response["OriginalMessage"]
    # Without the flag, the model server's whole answer arrives as one part.
    answer = runtime.invoke_endpoint_with_response_stream(
        EndpointName=name, ContentType="application/json", Body=json.dumps(request)
    )
    parts = [event["PayloadPart"]["Bytes"] for event in answer["Body"]]
    assert len(parts) == 1 and json.loads(parts[0])[0]["generated_text"].startswith(SEED_GPTJ_PROMPT)


# --- AWS's own SDK: sagemaker-core's resources, as a user of the local AWS points them at it ------


@pytest.fixture(name="sdk_session")
def sdk_session_fixture(local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A boto3 session for sagemaker-core made as its user makes one for the local AWS: from the
    environment `python -m local_aws` prints (AWS_ENDPOINT_URL, the fake credentials, the region)."""
    import boto3

    for key, value in local_aws.environment({}).items():
        monkeypatch.setenv(key, value)
    return boto3.Session()


def sdk_endpoint(local_aws: LocalAws, session: Any) -> Any:
    """Gpt2Stack's endpoint, as sagemaker-core's Endpoint.get reads it."""
    from sagemaker.core.resources import Endpoint

    return Endpoint.get(local_aws.stack_outputs("Gpt2Stack")["EndpointName"], session=session, region=local_aws.region)


#: A request GPT-2 answers with up to 8 tokens, whole or streamed.
EIGHT_TOKENS = {"input": "amazon", "parameters": {"max_new_tokens": 8}}


def gpt2_text(local_aws: LocalAws) -> str:
    """GPT-2's answer to EIGHT_TOKENS, through boto3."""
    return str(invoke(local_aws, "Gpt2Stack", EIGHT_TOKENS)["outputs"][0]["completions"][0]["text"])


def test_sagemaker_core_reads_the_deployed_endpoint_its_config_and_model(
    deployed: Cdk, local_aws: LocalAws, sdk_session: Any
) -> None:
    """Endpoint.get, EndpointConfig.get and Model.get validate each answer against their pydantic
    models of botocore's shapes (DataCaptureConfig: {} and VpcConfig: {} failed them)."""
    from sagemaker.core.resources import EndpointConfig, Model

    endpoint = sdk_endpoint(local_aws, sdk_session)
    assert endpoint.endpoint_status == "InService" and endpoint.endpoint_arn.endswith(endpoint.endpoint_name.lower())
    (variant,) = endpoint.production_variants
    config = EndpointConfig.get(endpoint.endpoint_config_name, session=sdk_session, region=local_aws.region)
    (configured,) = config.production_variants
    assert configured.variant_name == variant.variant_name and variant.current_instance_count >= 1
    model = Model.get(configured.model_name, session=sdk_session, region=local_aws.region)
    assert model.primary_container.image and model.execution_role_arn.startswith(f"arn:aws:iam::{local_aws.account}:")


def test_sagemaker_core_invokes_the_deployed_endpoint(deployed: Cdk, local_aws: LocalAws, sdk_session: Any) -> None:
    endpoint = sdk_endpoint(local_aws, sdk_session)
    answer = endpoint.invoke(body=json.dumps(EIGHT_TOKENS), content_type="application/json", accept="application/json")
    assert answer.invoked_production_variant == endpoint.production_variants[0].variant_name
    assert answer.content_type == "application/json"
    (output,) = json.loads(answer.body.read())["outputs"]
    assert output["completions"][0]["text"] == gpt2_text(local_aws)


def test_sagemaker_cores_streamed_call_gets_the_stream_its_own_codec_then_fails_on(
    deployed: Cdk, local_aws: LocalAws, sdk_session: Any
) -> None:
    """sagemaker-core 2.27's Endpoint.invoke_with_response_stream hands the EventStream botocore
    parsed to its codec's transform, which reads it as a dict (sagemaker/core/utils/code_injection/
    codec.py): it fails so on AWS too, whatever the answer, since botocore parses every answer of
    this operation into an EventStream. The stream it was handed holds GPT-2's tokens, the same
    as the whole answer's. (Once sagemaker-core reads its stream, this fails: read it from the
    call's answer then.)"""
    from sagemaker.core.utils.utils import SageMakerClient

    endpoint = sdk_endpoint(local_aws, sdk_session)
    # The client sagemaker-core calls through (one per session and region).
    runtime = SageMakerClient(session=sdk_session, region_name=local_aws.region).get_client("sagemaker-runtime")
    answers: list[dict[str, Any]] = []
    runtime.meta.events.register(
        "after-call.sagemaker-runtime.InvokeEndpointWithResponseStream", lambda **call: answers.append(call["parsed"])
    )
    request = json.dumps({**EIGHT_TOKENS, "stream": True})
    with pytest.raises(AttributeError, match="'EventStream' object has no attribute 'get'"):
        endpoint.invoke_with_response_stream(body=request, content_type="application/json")
    (answer,) = answers
    assert answer["InvokedProductionVariant"] == endpoint.production_variants[0].variant_name
    lines = [json.loads(line) for line in b"".join(e["PayloadPart"]["Bytes"] for e in answer["Body"]).splitlines()]
    tokens, end = [line["token"]["text"] for line in lines[:-1]], lines[-1]["end"]
    assert tokens and len(tokens) == end["completion_tokens"]
    assert end["text"] == gpt2_text(local_aws)


GPT2_SEEDS = [{"input": "amazon"}, {"input": "amazon", "parameters": {"max_new_tokens": 4}, "stream": True}]
GPTJ_SEEDS = [{"inputs": SEED_GPTJ_PROMPT, "parameters": {"max_new_tokens": 4}}]


@pytest.mark.parametrize(
    ("stack", "seeds", "keys", "ours"),
    [("Gpt2Stack", GPT2_SEEDS, GPT2_KEYS, True), ("GptjStack", GPTJ_SEEDS, TOOLKIT_KEYS, False)],
)
def test_the_runtimes_fuzz_gets_what_aws_answers_and_leaves_the_endpoint_answering(
    deployed: Cdk, local_aws: LocalAws, stack: str, seeds: list[object], keys: tuple[str, ...], ours: bool
) -> None:
    """tests/local_aws/fuzz.py on the deployed endpoint (the GPT-2 container's own 5xx would be a
    bug of ours: it may answer only 4xx), with endpoints missing, deleted and failed beside it;
    then the endpoint answers its seed requests and runs the one container it ran before."""
    before = {p.run_dir for p in running_containers()}
    unusable = unusable_endpoints(local_aws, stack)
    try:
        target = fuzz_target(local_aws, stack, seeds, keys, ours=ours, unusable=unusable)
        outcomes = fuzz.fuzz(target, stack, FUZZ_EXAMPLES)
    finally:
        remove_unusable(local_aws, stack)
    assert outcomes["InvokeEndpoint"]["ValidationError"] > 0 and outcomes["InvokeEndpoint"]["413"] > 0
    assert any(o.startswith("ModelError 4") for o in outcomes["InvokeEndpoint"]), outcomes
    for seed in seeds[:1]:
        assert invoke(local_aws, stack, seed)
    assert {p.run_dir for p in running_containers()} == before


#: Which stack answers a documented body here: both deployed on the toolkit engine.
STACK_OF = {"gpt2": "Gpt2Stack", "gptj-toolkit": "GptjStack"}


@pytest.mark.parametrize("body", bodies_for(*STACK_OF), ids=lambda body: body.id)
def test_a_documented_body_is_answered_by_its_endpoint(deployed: Cdk, local_aws: LocalAws, body: Body) -> None:
    """Every request body README and docs/ give for GPT-2 or the toolkit's GPT-J (and the load
    tester's request files) gets an answer, not an error (tests/docs_pages.py finds them)."""
    stack = STACK_OF[body.endpoint]
    if body.streamed:
        runtime = local_aws.client("sagemaker-runtime")
        answer = runtime.invoke_endpoint_with_response_stream(
            EndpointName=local_aws.stack_outputs(stack)["EndpointName"],
            ContentType="application/json",
            Body=json.dumps(body.body),
        )
        lines = b"".join(event["PayloadPart"]["Bytes"] for event in answer["Body"]).splitlines()
        assert json.loads(lines[-1])["end"]["completion_tokens"] > 0, (body.where, lines[-3:])
    elif body.endpoint == "gpt2":
        (output,) = invoke(local_aws, stack, body.body)["outputs"]
        assert output["completions"], body.where
    else:
        (answer,) = invoke(local_aws, stack, body.body)
        assert answer["generated_text"].startswith(body.body["inputs"]), body.where


#: A bad request of each stack: the container's 400, an invocation model error.
BAD_REQUEST = {"Gpt2Stack": b'{"input": "amazon"', "GptjStack": b'{"parameters": {}}'}


@pytest.mark.parametrize("stack", ENDPOINT_STACKS)
def test_each_alarm_fires_on_its_fault_and_the_oncall_queue_hears_it(
    deployed: Cdk, local_aws: LocalAws, stack: str
) -> None:
    """Through the real invocations and the instance use the local AWS measures, each alarm goes
    into ALARM on its fault and back to OK without it, and an SQS queue subscribed to the alarm
    topic hears both. (GPT-2's latency and 5xx alarms: tests/e2e/test_guardrails.py, by a model
    that fails its requests; GPT-J's: the next test.)"""
    with oncall(local_aws, stack) as topic:
        # Model errors: requests the container refuses; then the ML storage volume filling up
        # (DiskUtilization, from what the instance holds), GPU memory (fed).
        model_errors_and_capacity_faults_fire_and_clear(
            local_aws, stack, topic, lambda: model_error(lambda: invoke(local_aws, stack, BAD_REQUEST[stack]))
        )


def test_the_toolkits_latency_and_5xx_alarms_fire_when_its_model_server_is_overloaded(
    deployed: Cdk, local_aws: LocalAws, base: Assembly
) -> None:
    """GPT-J's model server overloaded (its worker stalled while more requests arrive than its
    queue holds): the refused ones' 503s put the 5xx alarm in ALARM, the others' wait the latency
    alarm, each heard by the on-call queue and back to OK."""
    engine = base.config.gptj.engine
    assert isinstance(engine, HfToolkitEngine)
    with oncall(local_aws, "GptjStack") as topic:
        toolkit_overload_fires_and_clears(local_aws, "GptjStack", topic, engine.model_server_workers)
