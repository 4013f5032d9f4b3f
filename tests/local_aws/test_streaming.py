"""InvokeEndpointWithResponseStream on the local AWS, through boto3 and the real HTTP path: the
container's chunked answer as botocore's event stream, its faults and limits, and a caller
that goes away (docs/LOCAL_AWS_STREAMING.md)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.eventstream import EventStreamBuffer
from botocore.exceptions import ClientError, EventStreamError

from local_aws import LocalAws, eventstream
from local_aws.sagemaker import invocations
from tests.local_aws.helpers import (
    Gates,
    client,
    create_stack,
    delete_stack,
    echo_for_the_module,
    endpoint_named,
    error_of,
    physical_ids,
)


@pytest.fixture(scope="module")
def echo(aws: LocalAws) -> Iterator[str]:
    with echo_for_the_module(aws, "stream") as name:
        yield name


def call(aws: LocalAws, name: str, request: object, **options: Any) -> dict[str, Any]:
    runtime = client(aws, "sagemaker-runtime")
    body = request if isinstance(request, bytes) else json.dumps(request).encode()
    answer: dict[str, Any] = runtime.invoke_endpoint_with_response_stream(
        EndpointName=name, Body=body, ContentType="application/json", **options
    )
    return answer


def parts(answer: dict[str, Any]) -> Iterator[bytes]:
    """The bytes of each PayloadPart."""
    for event in answer["Body"]:
        yield event["PayloadPart"]["Bytes"]


def raw_messages(answer: dict[str, Any]) -> list[tuple[dict[str, Any], bytes]]:
    """The answer's event stream messages as botocore's decoder reads them off the wire."""
    buffer = EventStreamBuffer()
    buffer.add_data(answer["Body"]._raw_stream.read())
    return [(m.headers, m.payload) for m in buffer]


def test_the_encoder_round_trips_through_botocores_decoder() -> None:
    buffer = EventStreamBuffer()
    buffer.add_data(eventstream.event("PayloadPart", b"\x00tok\xff") + eventstream.exception("X", {"Message": "m"}))
    first, second = list(buffer)
    assert first.headers == {
        ":message-type": "event",
        ":event-type": "PayloadPart",
        ":content-type": "application/octet-stream",
    }
    assert first.payload == b"\x00tok\xff"
    assert second.headers[":exception-type"] == "X" and json.loads(second.payload) == {"Message": "m"}


def test_each_chunk_arrives_as_a_payload_part_as_it_is_sent(aws: LocalAws, echo: str, tmp_path: Path) -> None:
    # The container sends each chunk only once this caller has read the one before (Gates): a
    # stream held back until its end would hold the container at its second chunk for good.
    gates = Gates(tmp_path / "gates")
    answer = call(aws, echo, gates.request(["one ", "two ", "three"]), CustomAttributes="t=1")
    assert answer["ContentType"] == "text/plain"
    assert answer["InvokedProductionVariant"] == "AllTraffic"
    received = []
    for data in parts(answer):
        received.append((gates.sent(), data))  # how many chunks the container had sent by then
        gates.open(len(received))
    # Each chunk was a part of its own, here before the container sent the next.
    assert received == [(1, b"one "), (2, b"two "), (3, b"three")]


def test_a_whole_answer_is_one_part(aws: LocalAws, echo: str) -> None:
    received = list(parts(call(aws, echo, {"q": 1})))
    assert len(received) == 1
    assert json.loads(received[0])["body"] == '{"q": 1}'


def test_an_answer_the_container_cuts_is_a_model_stream_error(aws: LocalAws, echo: str) -> None:
    answer = call(aws, echo, {"parts": ["a", "b", "c", "d"], "cut_after": 2})
    received = []
    with pytest.raises(EventStreamError) as raised:
        for data in parts(answer):
            received.append(data)
    assert b"".join(received) == b"ab"
    assert raised.value.response["Error"]["Code"] == "ModelStreamError"
    (*_, (headers, payload)) = raw_messages(call(aws, echo, {"parts": ["a", "b", "c"], "cut_after": 1}))
    assert headers[":exception-type"] == "ModelStreamError"
    assert json.loads(payload)["ErrorCode"] == "StreamBroken"


def test_an_answer_past_the_time_limit_is_a_model_stream_error(
    aws: LocalAws, echo: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(invocations, "STREAM_TIMEOUT_S", 1.0)
    # The container sends "a" with its answer's headers (already there when the limit starts to
    # count) and holds "b" until its gate opens, which is only after the stream ended: the limit
    # is what ends it, with what came before it, however slow the host.
    gates = Gates(tmp_path / "gates")
    try:
        messages = raw_messages(call(aws, echo, gates.request(["a", "b", "c"])))
    finally:
        gates.open_all()
    headers, payload = messages[-1]
    assert headers[":exception-type"] == "ModelStreamError"
    assert json.loads(payload)["ErrorCode"] == "ModelInvocationTimeExceeded"
    assert "AllTraffic did not complete sending the inference response" in json.loads(payload)["Message"]
    assert [data for _, data in messages[:-1]] == [b"a"]


def test_an_error_status_before_the_stream_is_a_model_error(aws: LocalAws, echo: str) -> None:
    with pytest.raises(ClientError) as raised:
        call(aws, echo, {"status": 422})
    assert raised.value.response["Error"]["Code"] == "ModelError"
    assert raised.value.response["OriginalStatusCode"] == 422


def test_a_missing_endpoint_is_a_validation_error(aws: LocalAws, echo: str) -> None:
    assert error_of(lambda: call(aws, "nowhere", {})) == "ValidationError"


def test_a_caller_that_goes_away_ends_the_containers_answer(aws: LocalAws, echo: str, tmp_path: Path) -> None:
    log = tmp_path / "sent.log"
    # 2000 parts 50 ms apart: 100 s to send them all, against the 60 s given below to end them.
    answer = call(aws, echo, {"parts": ["x"] * 2000, "part_delay_s": 0.05, "log": str(log)})
    events = iter(answer["Body"])
    next(events), next(events)
    answer["Body"].close()
    # clock: a generous wait for what takes a fraction of a second here (the local AWS's next
    # write to the caller fails, and it closes the container's connection); an answer not ended
    # would run 40 s past it.
    deadline = time.monotonic() + 60
    while "gone" not in log.read_text() and time.monotonic() < deadline:  # clock: the same wait
        time.sleep(0.1)
    lines = log.read_text().split()
    assert "gone" in lines, lines[-3:]  # "gone after N": its write failed before its end
    time.sleep(0.5)
    assert log.read_text().split() == lines  # nothing sent since


def test_an_inference_component_streams_its_own_containers_answer(aws: LocalAws) -> None:
    from tests.local_aws.test_patches import component_stack

    assert create_stack(aws, "ic-stream", component_stack("1")) is None
    try:
        endpoint = endpoint_named(aws, physical_ids(aws, "ic-stream")["Endpoint"])
        body = {"parts": ["a", "b"]}
        answer = call(aws, endpoint, body, InferenceComponentName="echo-ic")
        assert b"".join(parts(answer)) == b"ab"
        # an endpoint of components called without naming one, as InvokeEndpoint
        assert error_of(lambda: call(aws, endpoint, body)) == "ValidationError"
    finally:
        delete_stack(aws, "ic-stream")
