"""``"stream": true`` through the real `serve` (nginx + gunicorn + the batcher): JSON lines sent
chunked as tokens are generated (serving/gpt2/streaming.py), batched with other requests, errors
before the first token as statuses."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from botocore.exceptions import ClientError

from local_aws import LocalAws
from local_aws.cli.demo import stream_lines
from serving.gpt2.batching import DynamicBatcher, Job
from serving.gpt2.generation import Completion, SamplingParams, StopCheck, decode_loop
from serving.gpt2.local import LocalServer
from serving.gpt2.streaming import TokenStream, visible_text
from tests.gpt2.helpers import JSON, post


def stream(port: int, request: dict[str, Any]) -> tuple[int, dict[str, str], list[dict[str, Any]]]:
    """(status, headers, JSON lines) of a streamed request."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST", "/invocations", body=json.dumps({**request, "stream": True}).encode(), headers=JSON)
        response = conn.getresponse()
        raw = response.read()
        headers = dict(response.getheaders())
        if response.status != 200:
            return response.status, headers, [json.loads(raw)]
        return response.status, headers, [json.loads(line) for line in raw.splitlines()]
    finally:
        conn.close()


def test_visible_text_holds_back_what_the_next_tokens_may_change() -> None:
    assert visible_text("abc", []) == ("abc", False)
    assert visible_text("ab\ufffd", []) == ("ab", False)  # an incomplete character
    assert visible_text("hello wo", ["world"]) == ("hello ", False)  # may become the stop string
    assert visible_text("hello world!", ["world"]) == ("hello ", True)


def test_a_streamed_answer_is_chunked_json_lines_with_the_same_completion(server: LocalServer) -> None:
    request = {"input": "amazon", "parameters": {"max_new_tokens": 12}}
    status, headers, lines = stream(server.port, request)
    assert status == 200
    assert headers["Content-Type"] == "application/jsonlines"
    assert headers.get("Transfer-Encoding") == "chunked" and "Content-Length" not in headers
    end = lines[-1]["end"]
    tokens = [line["token"] for line in lines[:-1]]
    assert len(tokens) == end["completion_tokens"] > 0
    assert "".join(t["text"] for t in tokens) + end["tail"] == end["text"]
    whole = post(server.port, json.dumps(request).encode())[1]["outputs"][0]["completions"][0]
    assert (end["text"], end["finish_reason"]) == (whole["text"], whole["finish_reason"])
    assert end["prompt_tokens"] == post(server.port, json.dumps(request).encode())[1]["outputs"][0]["prompt_tokens"]


def test_a_stop_string_ends_the_stream_without_sending_it(server: LocalServer) -> None:
    whole = post(server.port, json.dumps({"input": "amazon", "parameters": {"max_new_tokens": 20}}).encode())[1]
    text = whole["outputs"][0]["completions"][0]["text"]
    stop = text[2:4]
    _, _, lines = stream(server.port, {"input": "amazon", "parameters": {"max_new_tokens": 20, "stop": [stop]}})
    end = lines[-1]["end"]
    assert end["finish_reason"] == "stop" and end["text"] == text[: text.find(stop)]
    assert stop not in "".join(line["token"]["text"] for line in lines[:-1])


def test_a_streamed_request_batches_with_others(running: Any) -> None:
    # A batch of 6 rows that waits for its rows as long as the server lets it (10 s): it runs once
    # the 6 requests sent together are in, on any host.
    barrier = threading.Barrier(6)
    with running({"GPT2_MAX_BATCH_SIZE": "6", "GPT2_MAX_QUEUE_DELAY_US": "10000000"}) as server:

        def streamed() -> int:
            barrier.wait()
            _, _, lines = stream(server.port, {"input": "query", "parameters": {"max_new_tokens": 6}})
            return int(lines[-1]["end"]["batch_size"])

        def whole(i: int) -> int:
            barrier.wait()
            request = json.dumps({"input": f"q {i}", "parameters": {"max_new_tokens": 6}}).encode()
            return int(post(server.port, request)[1]["batch_size"])

        with ThreadPoolExecutor(6) as pool:
            mine = pool.submit(streamed)
            others = [pool.submit(whole, i) for i in range(5)]
            sizes = [mine.result(), *(f.result() for f in others)]
    assert sizes == [6] * 6, f"the streamed request did not run with the others: batch sizes {sizes}"


def test_errors_before_the_stream_are_json_statuses(server: LocalServer) -> None:
    # past the model's maximum length: refused before any token (the tiny build's 42 tokens)
    status, headers, (answer,) = stream(server.port, {"input": "amazon " * 60})
    assert (status, answer["error"]["code"]) == (400, "input_too_long")
    assert headers["Content-Type"] == "application/json"
    status, _, (answer,) = stream(server.port, {"inputs": ["a", "b"]})
    assert status == 400 and "stream=true streams one completion" in answer["error"]["message"]
    status, answer, _ = post(server.port, b'{"input": "a", "stream": "yes"}')
    assert status == 400 and 'stream="yes" is invalid' in answer["error"]["message"]


# --- The batcher side, with a model that takes a while per step -----------------------------------


class SlowModel:
    """A StepModel of a model that takes 20 ms a step (a real GPT-2 on a CPU takes about that; the
    tiny build is done before a caller could leave): each step's greedy token is 7, or it raises
    from step `fail_at` on. A gated model takes each step only once :meth:`allow` let it (a test
    sets the pace by what it has read, not by time)."""

    def __init__(self, fail_at: int | None = None, *, gated: bool = False) -> None:
        self.steps = 0
        self.fail_at = fail_at
        self._allowed = threading.Semaphore(0) if gated else None

    def allow(self, steps: int = 1) -> None:
        assert self._allowed is not None
        self._allowed.release(steps)

    def forward(self, input_ids: Any, attention_mask: Any, position_ids: Any, past: Any) -> tuple[Any, Any]:
        if self._allowed is None:
            time.sleep(0.02)
        else:
            self._allowed.acquire()
        self.steps += 1
        if self.fail_at is not None and self.steps >= self.fail_at:
            raise RuntimeError("the device fell over")
        logits = np.zeros((input_ids.shape[0], 16), dtype=np.float32)
        logits[:, 7] = 1.0
        return logits, None


class SlowBackend:
    name = "slow"

    def __init__(self, model: SlowModel) -> None:
        self.model = model
        #: Set when a generation has returned.
        self.returned = threading.Event()

    def generate(
        self, prompts: Sequence[Sequence[int]], params: Sequence[SamplingParams], stop: StopCheck | None = None
    ) -> list[Completion]:
        try:
            return decode_loop(self.model, prompts, params, eos_token_id=0, rng=np.random.default_rng(0), stop=stop)
        finally:
            self.returned.set()


class Letters:
    def decode(self, ids: list[int]) -> str:
        return "".join(chr(ord("a") + i) for i in ids)


def streamed(model: SlowModel, max_new_tokens: int) -> tuple[DynamicBatcher, TokenStream, Job, SlowBackend]:
    backend = SlowBackend(model)
    batcher = DynamicBatcher(backend, max_batch_size=4, max_queue_delay_s=0.0, max_queue_rows=8, max_total_length=512)  # type: ignore[arg-type]
    # clock: the job's deadline as the server sets one, a generous minute for what ends within a
    # second here; no bound on the host's speed.
    deadline = time.monotonic() + 60
    job = Job(prompts=[[1, 2]], params=[SamplingParams(max_new_tokens=max_new_tokens)], deadline=deadline)
    stream = TokenStream(Letters(), [], job)
    batcher.submit(job).add_done_callback(stream.on_done)
    stream.wait_first(60)
    stream.bind(job, batcher, on_result=lambda _: None, end={}, idle_timeout_s=60)
    return batcher, stream, job, backend


def test_a_caller_that_goes_away_stops_its_generation() -> None:
    # The model takes a step only when this test has read the token before: after three, the
    # caller goes away while the fourth step waits; then the model may take 100 more, which a
    # generation that ignored the caller's going would take (and then wait for more, for good).
    model = SlowModel(gated=True)
    model.allow()  # the first token's step (the prefill)
    batcher, stream, job, backend = streamed(model, max_new_tokens=400)
    try:
        lines = iter(stream)
        first = []
        for _ in range(3):
            first.append(json.loads(next(lines)))
            if len(first) < 3:
                model.allow()
        assert [line["token"]["text"] for line in first] == ["h", "h", "h"]
        stream.close()  # what the server does when the caller's connection is gone
        model.allow(100)
        assert backend.returned.wait(60), "the generation went on after its caller left"
        # The three read, and the step that was waiting when the caller left: its token ended it.
        assert model.steps == 4
        assert job.future.cancelled() or len(job.future.result().completions[0].tokens) == 4
    finally:
        model.allow(1000)  # whatever a failed test left waiting
        batcher.stop()


def test_a_failure_after_the_first_token_is_the_last_line() -> None:
    batcher, stream, _, _ = streamed(SlowModel(fail_at=4), max_new_tokens=20)
    try:
        lines = [json.loads(line) for line in stream]
    finally:
        batcher.stop()
    assert "token" in lines[0]
    assert lines[-1]["error"]["code"] == "generation_failed"
    assert all("token" in line for line in lines[:-1])


# --- Through the local AWS: InvokeEndpointWithResponseStream with boto3 ------------------------------


@pytest.fixture(scope="module")
def endpoint(model_tar: Path) -> Iterator[tuple[LocalAws, str]]:
    """The GPT-2 image on an endpoint of the local AWS (its container: `serve` on this host)."""
    with LocalAws(aws_managed_policies=False) as aws:
        aws.client("s3").create_bucket(Bucket="models")
        aws.client("s3").upload_file(str(model_tar), "models", "gpt2/model.tar.gz")
        sm = aws.client("sagemaker")
        sm.create_model(
            ModelName="gpt2",
            ExecutionRoleArn=f"arn:aws:iam::{aws.account}:role/sagemaker",
            PrimaryContainer={
                "Image": aws.ecr_image_uri("gpt2", "1"),
                "ModelDataUrl": "s3://models/gpt2/model.tar.gz",
                "Environment": {"GPT2_BACKEND": "onnxruntime", "GPT2_THREADS": "1"},
            },
        )
        variant = {
            "VariantName": "AllTraffic",
            "ModelName": "gpt2",
            "InstanceType": "ml.c6i.large",
            "InitialInstanceCount": 1,
        }
        sm.create_endpoint_config(EndpointConfigName="gpt2", ProductionVariants=[variant])
        sm.create_endpoint(EndpointName="gpt2", EndpointConfigName="gpt2")
        sm.get_waiter("endpoint_in_service").wait(EndpointName="gpt2", WaiterConfig={"Delay": 1, "MaxAttempts": 120})
        yield aws, "gpt2"


def test_boto3_reads_the_stream_through_the_local_aws(endpoint: tuple[LocalAws, str]) -> None:
    aws, name = endpoint
    runtime = aws.client("sagemaker-runtime")
    request = {"input": "amazon", "parameters": {"max_new_tokens": 10}}
    answer = runtime.invoke_endpoint_with_response_stream(
        EndpointName=name, Body=json.dumps({**request, "stream": True}), ContentType="application/json"
    )
    assert answer["ContentType"] == "application/jsonlines"
    raw = b"".join(event["PayloadPart"]["Bytes"] for event in answer["Body"])
    lines = [json.loads(line) for line in raw.splitlines()]
    end = lines[-1]["end"]
    assert len(lines) - 1 == end["completion_tokens"]
    assert list(stream_lines(aws, name, request)) == lines  # what `make demo` prints, line by line
    whole = json.loads(
        runtime.invoke_endpoint(EndpointName=name, Body=json.dumps(request), ContentType="application/json")[
            "Body"
        ].read()
    )
    assert end["text"] == whole["outputs"][0]["completions"][0]["text"]


def test_a_request_past_the_models_length_is_a_model_error_before_the_stream(endpoint: tuple[LocalAws, str]) -> None:
    aws, name = endpoint
    with pytest.raises(ClientError) as raised:
        aws.client("sagemaker-runtime").invoke_endpoint_with_response_stream(
            EndpointName=name,
            Body=json.dumps({"input": "amazon " * 60, "stream": True}),
            ContentType="application/json",
        )
    response = raised.value.response
    assert response["Error"]["Code"] == "ModelError" and response["OriginalStatusCode"] == 400
    assert "input_too_long" in response["OriginalMessage"]


@pytest.mark.timing
def test_a_streamed_request_past_its_deadline_before_the_first_token_is_a_503(running: Any) -> None:
    # a 3 s queue delay and a 1 s deadline: the lone request's first token never comes in time
    env = {"GPT2_MAX_BATCH_SIZE": "4", "GPT2_MAX_QUEUE_DELAY_US": "3000000", "GPT2_REQUEST_TIMEOUT_S": "1"}
    with running(env) as srv:
        status, headers, (answer,) = stream(srv.port, {"input": "a", "parameters": {"max_new_tokens": 2}})
        assert (status, answer["error"]["code"], headers.get("Retry-After")) == (503, "timeout", "1")
        assert headers["Content-Type"] == "application/json"
        # the server is whole: a full batch does not wait for the delay. Timing: the 1 s deadline
        # bounds this answer (4 rows of 2 tokens of the tiny build), the same margin as
        # tests/gpt2/test_server.py's test_full_queue_and_deadline_answer_503_with_retry_after.
        four = json.dumps({"inputs": ["a", "b", "c", "d"], "parameters": {"max_new_tokens": 2}}).encode()
        assert post(srv.port, four)[0] == 200
