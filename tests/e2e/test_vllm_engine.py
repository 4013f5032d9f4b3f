"""`cdk deploy GptjStack -c gptj.engine=vllm` on the local AWS answers InvokeEndpoint and
InvokeEndpointWithResponseStream from the real vLLM server (the CPU build of the image's vLLM
version, local_aws/images/vllm_entrypoint.py); a caller that leaves mid-stream and the engine dying are
handled as SageMaker handles them; a guarded update that refuses what the running model answers is
rolled back on its alarms. One deploy for the module: the engine's death comes last.

The engine starts eagerly (``gptj.enforce_eager``, vLLM's ``--enforce-eager``): about 40 s a
start instead of 90-180 s compiling its kernels, twice in the module (the deploy and the refused
update). Nothing here is about the compiled start: what the stack owns is the flags reaching the
engine (checked below), and the compile is vLLM's own; ``make demo-vllm`` starts it as users do.
Marked ``vllm`` as well as ``e2e``. Run with ``.venv/bin/python -m pytest -m vllm``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from local_aws import LocalAws
from local_aws.cli.cdk import Cdk
from local_aws.sagemaker import invocations
from local_aws.sagemaker.containers import VLLM_VENV, Container, _group_members, running_containers
from project_config import load_config
from tests.docs_pages import Body, bodies_for
from tests.e2e.helpers import (
    FUZZ_EXAMPLES,
    QUICK_UPDATES,
    VLLM_KEYS,
    Assembly,
    endpoint_container,
    fuzz_target,
    invoke,
    remove_unusable,
    server_sent_events,
    stream,
    unusable_endpoints,
)
from tests.e2e.oncall import (
    a_refusing_gptj_update_is_rolled_back,
    described,
    from_ok,
    model_errors_and_capacity_faults_fire_and_clear,
    oncall,
    rollback_alarms_fire_and_clear,
    runtime_errors,
    sent_to,
    stack_alarms,
    stall_fires_and_clears,
    stalled,
)
from tests.infra.helpers import ROOT, cdk_context, make_artifacts, synthesize
from tests.local_aws import fuzz

pytestmark = [pytest.mark.e2e, pytest.mark.vllm]

SEED_GPTJ_PROMPT = "Can you please let us know more details about your"
#: The deploy waits for InService: the eager server starts in about 40 s alone, minutes on a
#: loaded host.
DEPLOY_TIMEOUT_S = 900


@pytest.fixture(scope="module")
def vllm_artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny GPT-J payload (heads of 32: vLLM's CPU attention) and stand-ins for the other
    stacks' artifacts."""
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
    return artifacts


def vllm_app(root: Path, artifacts: Path, max_model_len: int) -> Assembly:
    """The app synthesized with the vllm engine and the context length `max_model_len`."""
    settings = {
        "project.artifacts_dir": str(artifacts),
        "gptj.engine": "vllm",
        "gptj.max_model_len": str(max_model_len),
        "gptj.enforce_eager": "true",
        # Alarms on one minute of data, as the other e2e deploys have them (QUICK_UPDATES).
        **{key: str(value) for key, value in QUICK_UPDATES.items() if key.startswith("gptj.")},
    }
    synthesized = synthesize(root, artifacts, may_leave_out=("LlmStack",), **settings)
    return Assembly(path=synthesized.outdir, config=load_config(cdk_context(**settings)))


@pytest.fixture(scope="module")
def vllm_assembly(tmp_path_factory: pytest.TempPathFactory, vllm_artifacts: Path) -> Assembly:
    return vllm_app(tmp_path_factory.mktemp("cdk.out-vllm"), vllm_artifacts, 256)


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


def test_the_seed_request_in_the_completion_shape_is_answered_as_documented(deployed: Cdk, local_aws: LocalAws) -> None:
    """loadtest/requests/gptj-vllm.json, the seed's GPT-J request in the image's own shape
    (docs/IMAGES.md), through InvokeEndpoint."""
    body = json.loads((ROOT / "loadtest" / "requests" / "gptj-vllm.json").read_text())["body"]
    assert body["prompt"] == SEED_GPTJ_PROMPT
    answer = invoke(local_aws, "GptjStack", body)
    assert answer["usage"]["completion_tokens"] == body["max_tokens"], answer
    assert answer["choices"][0]["finish_reason"] == "length" and answer["choices"][0]["text"], answer


def test_the_engine_got_the_stacks_flags_through_the_images_entrypoint(deployed: Cdk, local_aws: LocalAws) -> None:
    """SM_VLLM_* variables of the model's environment became the server's flags, the model the
    stand-in for /opt/ml/model (local_aws/images/vllm_entrypoint.py does what the image's does)."""
    container = endpoint_container(local_aws, "GptjStack")
    arguments = re.search(r"vLLM server arguments: (\[.*\])", container.log_tail(500_000))
    assert arguments is not None, container.log_tail()
    assert "'--max-num-seqs', '8'" in arguments[1] and "'--max-model-len', '256'" in arguments[1]
    assert "'--enforce-eager'" in arguments[1]
    assert f"'--model', '{container.model_dir}'" in arguments[1]


def test_the_chat_body_without_a_chat_template_is_the_servers_400(deployed: Cdk, local_aws: LocalAws) -> None:
    """GPT-J has no chat template: OpenAI's messages body gets vLLM's 400 (synthesis warned; gptj.chat_template
    gives one, as tests/e2e/test_llm_stack.py shows for the tiny Llama)."""
    with pytest.raises(ClientError) as raised:
        invoke(local_aws, "GptjStack", {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 4})
    response = raised.value.response
    assert response["Error"]["Code"] == "ModelError" and response.get("OriginalStatusCode") == 400, response
    assert "chat template" in str(response.get("OriginalMessage")), response


def test_the_toolkits_body_is_a_model_error_with_the_servers_4xx(deployed: Cdk, local_aws: LocalAws) -> None:
    """A client still sending the toolkit's {"inputs": ...} gets the engine's own 4xx, not a 5xx."""
    with pytest.raises(ClientError) as raised:
        invoke(local_aws, "GptjStack", {"inputs": SEED_GPTJ_PROMPT})
    response = raised.value.response
    assert response["Error"]["Code"] == "ModelError"
    assert 400 <= response.get("OriginalStatusCode", 0) < 500, response


def metric(container: Container, name: str) -> float:
    """The sum of a Prometheus sample of the vLLM server's /metrics (every label set)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{container.port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return sum(float(m[1]) for m in re.finditer(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE))


def test_a_completion_streams_through_invoke_endpoint_with_response_stream(deployed: Cdk, local_aws: LocalAws) -> None:
    request = {"prompt": SEED_GPTJ_PROMPT, "max_tokens": 16, "temperature": 0}
    answer = stream(local_aws, "GptjStack", {**request, "stream_options": {"include_usage": True}})
    assert answer["ContentType"].startswith("text/event-stream"), answer["ContentType"]
    parts = [event["PayloadPart"]["Bytes"] for event in answer["Body"]]
    assert len(parts) > 1, parts
    events = server_sent_events(parts)
    assert events[-1] == b"[DONE]", events[-3:]
    chunks = [json.loads(data) for data in events[:-1]]
    text = "".join(choice["text"] for chunk in chunks for choice in chunk["choices"])
    # include_usage: a last chunk without choices, with the whole answer's usage.
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 16, chunks[-1]
    # The same greedy request answered whole: the stream carried all of it, in order.
    whole = invoke(local_aws, "GptjStack", request)
    assert whole["usage"]["completion_tokens"] == 16
    assert text and text == whole["choices"][0]["text"], (text, whole)


def test_the_load_tester_streams_the_engines_answers(deployed: Cdk, local_aws: LocalAws, tmp_path: Path) -> None:
    """`python -m loadtest --stream` with loadtest/requests/gptj-vllm-stream.json, as a user runs it:
    time to first token and between tokens from vLLM's server-sent events."""
    request = ROOT / "loadtest" / "requests" / "gptj-vllm-stream.json"
    endpoint = local_aws.stack_outputs("GptjStack")["EndpointName"]
    command = [sys.executable, "-m", "loadtest", "--endpoint", endpoint, "--request", str(request), "--stream",
               "--concurrency", "2", "--seconds", "3", "--warmup", "1", "--metrics-wait", "0",
               "--out", str(tmp_path)]  # fmt: skip
    subprocess.run(command, env=local_aws.environment(), cwd=ROOT, check=True, capture_output=True, timeout=300)
    (level,) = json.loads((tmp_path / "report.json").read_text())["levels"]
    assert level["errors"] == {} and level["successes"] > 0, level
    streamed, per_request = level["stream"], json.loads(request.read_text())["body"]["max_tokens"]
    assert streamed["requests"] == level["successes"]
    # An event a token, but vLLM holds back a token that ends inside a UTF-8 character (random
    # weights pick such byte tokens) and sends it with the next; it may end with an event that
    # carries only the finish reason. Measured here: 616 events for 52 answers of 12 tokens.
    assert per_request * streamed["requests"] // 2 <= streamed["tokens"] <= (per_request + 1) * streamed["requests"]
    assert 0 < streamed["time_to_first_token_ms"]["p50"] < level["latency_ms"]["p50"]
    assert "time to first token" in (tmp_path / "report.md").read_text()


def test_a_caller_that_goes_away_mid_stream_stops_its_generation(deployed: Cdk, local_aws: LocalAws) -> None:
    """The caller closes the stream after two events; the engine aborts the request, so it
    generates far fewer tokens than it was asked for. A fast host finishes one tiny answer before
    the caller has read two events, so the work asked for grows (`n` answers of 240 tokens, no
    early end) until the caller leaves with at least half of it still to do; only then is the count
    telling (an engine that did not abort would generate all of it). Half, not three quarters: on a
    loaded host the local AWS relays the first events late, and a make test beside other deploys
    saw n=64 aborted at 4449 of 15360 tokens (29% done when the caller left)."""
    container = endpoint_container(local_aws, "GptjStack")
    max_tokens = 240  # within max_model_len 256 with the seed prompt
    for n in (1, 4, 16, 64):
        asked = n * max_tokens
        before = metric(container, "vllm:generation_tokens_total")
        body = {"prompt": SEED_GPTJ_PROMPT, "max_tokens": max_tokens, "n": n, "ignore_eos": True}
        answer = stream(local_aws, "GptjStack", body)
        events = iter(answer["Body"])
        next(events), next(events)
        answer["Body"].close()
        # clock: how long the engine took to stop is reported, not judged; the wait for it is a
        # generous minute, after which a request still running fails the assertion below.
        closed = time.monotonic()
        at_close = metric(container, "vllm:generation_tokens_total") - before
        while metric(container, "vllm:num_requests_running") > 0 and time.monotonic() - closed < 60:  # clock: the same
            time.sleep(0.01)
        stopped_after = time.monotonic() - closed  # clock: reported only
        generated = metric(container, "vllm:generation_tokens_total") - before
        print(f"n={n}: {at_close:.0f} tokens when the caller left, {generated:.0f} of {asked} when the "
              f"generation stopped {stopped_after:.3f} s later")  # fmt: skip
        assert metric(container, "vllm:num_requests_running") == 0
        if at_close < asked / 2:
            # The engine aborted the request: the rest of what was asked never generated.
            assert 1 <= generated < asked, (n, generated)
            return
    pytest.fail(f"even n={n} answers of {max_tokens} tokens were half done before the caller left")


def test_the_runtimes_fuzz_gets_what_aws_answers_and_leaves_the_engine_answering(
    deployed: Cdk, local_aws: LocalAws
) -> None:
    """tests/local_aws/fuzz.py on the vLLM endpoint (test_invoke_endpoint.py runs it on GPT-2 and
    the toolkit), streams cut by the caller among its cases; then the engine answers the seed
    request and has no request left running."""
    seeds = [
        {"prompt": SEED_GPTJ_PROMPT, "max_tokens": 4},
        {"prompt": SEED_GPTJ_PROMPT, "max_tokens": 8, "stream": True},
    ]
    unusable = unusable_endpoints(local_aws, "GptjStack")
    try:
        target = fuzz_target(local_aws, "GptjStack", seeds, VLLM_KEYS, ours=False, unusable=unusable)
        outcomes = fuzz.fuzz(target, "GptjStack-vllm", FUZZ_EXAMPLES)
    finally:
        remove_unusable(local_aws, "GptjStack")
    assert outcomes["InvokeEndpoint"]["200"] > 0 and outcomes["InvokeEndpoint"]["ValidationError"] > 0
    assert any(o.startswith("ModelError 4") for o in outcomes["InvokeEndpoint"]), outcomes
    answer = invoke(local_aws, "GptjStack", seeds[0])
    assert answer["usage"]["completion_tokens"] == 4, answer
    container = endpoint_container(local_aws, "GptjStack")
    # clock: a generous wait for the engine to finish what the fuzz left (moments here); a request
    # still running after it fails the assertion below
    deadline = time.monotonic() + 60
    while metric(container, "vllm:num_requests_running") > 0 and time.monotonic() < deadline:  # clock: the same
        time.sleep(0.1)
    assert metric(container, "vllm:num_requests_running") == 0


@pytest.mark.parametrize("body", bodies_for("gptj-vllm"), ids=lambda body: body.id)
def test_a_documented_body_is_answered_by_vllm(deployed: Cdk, local_aws: LocalAws, body: Body) -> None:
    """Every request body README and docs/ give for GPT-J on its default engine (and the load
    tester's request files for it) gets vLLM's answer, not an error (tests/docs_pages.py)."""
    if body.streamed:
        answer = stream(local_aws, "GptjStack", body.body)
        events = server_sent_events([event["PayloadPart"]["Bytes"] for event in answer["Body"]])
        assert events[-1] == b"[DONE]" and len(events) > 1, (body.where, events[-3:])
    else:
        answer = invoke(local_aws, "GptjStack", body.body)
        assert answer["choices"][0]["text"] and answer["usage"]["completion_tokens"] > 0, (body.where, answer)


def test_a_guarded_update_to_a_shorter_context_is_rolled_back_on_its_model_errors(
    deployed: Cdk, local_aws: LocalAws, vllm_artifacts: Path, tmp_path: Path
) -> None:
    """An update of the engine to a context of 64 tokens, whose new server refuses with 400 the
    requests the running one answers (prompt and max_tokens past max_model_len), is rolled back
    by the model-error alarm its refusals move; the endpoint answers from its old config."""
    shorter = vllm_app(tmp_path / "cdk.out", vllm_artifacts, 64)
    body = json.dumps({"prompt": SEED_GPTJ_PROMPT, "max_tokens": 100}).encode()
    a_refusing_gptj_update_is_rolled_back(deployed, local_aws, shorter, body, start_timeout_s=DEPLOY_TIMEOUT_S)


def test_each_alarm_with_a_fault_here_fires_on_it_and_the_oncall_queue_hears_it(
    deployed: Cdk, local_aws: LocalAws
) -> None:
    """On the vLLM engine: requests the engine refuses (its 400, past max_model_len) put the
    model-error alarm in ALARM, a file filling the instance's volume the disk alarm, the instance
    stalled (its processes stopped) longer than the threshold while a request waits the latency
    alarm; each back to OK without its fault, an SQS queue subscribed to the alarm topic hearing
    each. The 5xx alarm: the engine's death, the next test. The engine's
    alarms differ from the toolkit's (project_config/endpoint.py: FRAMEWORK_ALARMS): no GPU memory
    alarm (vLLM holds its share of GPU memory whatever the load) but one on its queue, a PromQL
    alarm on detailed observability's metric, which the local AWS stores but cannot evaluate.
    Before the engine's death, which ends the module."""
    alarms = stack_alarms(local_aws, "GptjStack")
    assert {"LatencyAlarm", "Errors5xxAlarm", "ModelErrorsAlarm", "DiskAlarm", "WaitingRequestsAlarm"} == set(alarms)
    # QUICK_UPDATES: one minute of errors is the fault.
    assert described(local_aws, alarms["ModelErrorsAlarm"])["EvaluationPeriods"] == 1

    def refused() -> None:
        with pytest.raises(ClientError) as raised:
            invoke(local_aws, "GptjStack", {"prompt": SEED_GPTJ_PROMPT, "max_tokens": 1000})
        assert raised.value.response.get("OriginalStatusCode") == 400, raised.value.response

    with oncall(local_aws, "GptjStack") as topic:
        model_errors_and_capacity_faults_fire_and_clear(local_aws, "GptjStack", topic, refused)
        stall_fires_and_clears(
            local_aws, "GptjStack", topic, lambda: invoke(local_aws, "GptjStack", {"prompt": "a", "max_tokens": 2})
        )


def test_the_engine_process_dying_is_a_5xx_then_a_quick_model_error_and_leaves_nothing_running(
    deployed: Cdk, local_aws: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Last: it kills the engine. vLLM V1 runs the engine in a process of its own
    (``VLLM::EngineCore``); when it dies, the API server answers the requests it holds with 500
    (its EngineDeadError), which put the 5xx alarm in ALARM, heard by the on-call queue, then
    shuts down and exits, and the local runtime (local_aws/sagemaker/runtime.py) finds the
    container exited at the next invocation."""
    container = endpoint_container(local_aws, "GptjStack")
    assert container.process is not None and container.run_dir is not None
    run_dir, group = str(container.run_dir), container.process.pid
    (engine,) = [pid for pid in _group_members(group) if psutil.Process(pid).name().startswith("VLLM::Engine")]
    # Every process of the container carries its marker: running_containers() sees the engine.
    assert {p.pid for p in running_containers() if p.run_dir == run_dir} == set(_group_members(group))
    errors = int(described(local_aws, stack_alarms(local_aws, "GptjStack")["Errors5xxAlarm"])["Threshold"])
    body = json.dumps({"prompt": "a", "max_tokens": 2}).encode()
    with oncall(local_aws, "GptjStack") as topic:
        from_ok(local_aws, "GptjStack", topic, ["Errors5xxAlarm"])
        with ThreadPoolExecutor(1) as pool:
            # The engine stopped first, so that the requests are surely in the server's hands.
            with stalled([psutil.Process(engine)]):
                sent = pool.submit(runtime_errors, local_aws, "GptjStack", [body] * errors)
                sent_to(container, errors)
                time.sleep(1)  # the server reads them and hands them to the (stopped) engine
                os.kill(engine, signal.SIGKILL)
                killed = time.monotonic()  # clock: for the report below, not judged
            statuses = sent.result(timeout=120)
        assert statuses == [500] * errors, statuses
        code = container.process.wait(timeout=60)
        exited_after = time.monotonic() - killed  # clock: reported only
        print(f"the API server exited with code {code} {exited_after:.1f} s after the engine was killed")
        rollback_alarms_fire_and_clear(local_aws, "GptjStack", topic, ["Errors5xxAlarm"])
    assert "engine core exited unexpectedly" in container.log_tail(200_000)
    assert container.ping() == 0  # nothing answers /ping
    # Quick: an invocation that waited for an answer would wait an hour here, past the client's
    # 60 s read timeout (a ReadTimeoutError, not the ModelError below; the client does not retry).
    monkeypatch.setattr(invocations, "INVOCATION_TIMEOUT_S", 3600)
    runtime = local_aws.client("sagemaker-runtime", config=Config(retries={"total_max_attempts": 1}))
    name = local_aws.stack_outputs("GptjStack")["EndpointName"]
    for call in (runtime.invoke_endpoint, runtime.invoke_endpoint_with_response_stream):
        with pytest.raises(ClientError) as raised:
            call(EndpointName=name, ContentType="application/json", Body=json.dumps({"prompt": "a", "max_tokens": 2}))
        response = raised.value.response
        assert response["Error"]["Code"] == "ModelError" and response["OriginalStatusCode"] == 0, response
        assert "could not get a response" in response["OriginalMessage"], response
    # The engine's worker and the server's resource tracker outlive the server: ended.
    assert _group_members(group) == []
    assert [p for p in running_containers() if p.run_dir == run_dir] == []
