"""Percentiles and the kinds of error, from botocore's own parsing of what SageMaker sends."""

from __future__ import annotations

import math
import random

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from botocore.retries.standard import ThrottledRetryableChecker

from loadtest.invokers import AsyncFailure, AsyncInvoker, AsyncTimeout, SageMakerInvoker, Target
from loadtest.request import Request
from loadtest.stats import THROTTLING_CODES, classify, error_message, latency_summary, percentile
from tests.loadtest.helpers import SAGEMAKER_TIMEOUT, Canned, CannedRuntime, aws_error, model_error, ok

REQUEST = Request(body=b'{"input": "amazon"}', content_type="application/json")


@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 99, 100, 101, 1000])
@pytest.mark.parametrize("p", [1, 50, 90, 99, 100])
def test_percentile_is_the_nearest_rank(n: int, p: float) -> None:
    values = sorted(random.Random(n).uniform(0, 100) for _ in range(n))
    value = percentile(values, p)
    assert value in values  # measured, never interpolated
    # At least p% of the values are at or below it, and fewer than p% below it.
    assert sum(v <= value for v in values) >= p / 100 * n
    assert sum(v < value for v in values) < p / 100 * n


def test_percentiles_of_one_to_a_hundred_are_the_ranks() -> None:
    values = [float(i) for i in range(1, 101)]
    assert [percentile(values, p) for p in (50, 90, 99, 100)] == [50.0, 90.0, 99.0, 100.0]


def test_percentile_refuses_no_values_and_bad_ranks() -> None:
    with pytest.raises(ValueError, match="at least one"):
        percentile([], 50)
    with pytest.raises(ValueError, match="p=0"):
        percentile([1.0], 0)
    with pytest.raises(ValueError, match="p=101"):
        percentile([1.0], 101)


def test_latency_summary_in_milliseconds() -> None:
    seconds = [random.Random(3).uniform(0.01, 0.5) for _ in range(57)]
    summary = latency_summary(seconds)
    assert summary is not None
    ms = sorted(1000 * s for s in seconds)
    assert summary["mean"] == pytest.approx(sum(ms) / len(ms))
    assert summary["max"] == max(ms)
    assert summary["p50"] <= summary["p90"] <= summary["p99"] <= summary["max"]
    assert summary["p99"] == ms[math.ceil(0.99 * len(ms)) - 1]
    assert latency_summary([]) is None


def test_throttling_codes_include_botocores() -> None:
    """botocore's list of throttling codes (which its retries use) is ours too."""
    assert set(ThrottledRetryableChecker._THROTTLED_ERROR_CODES) <= THROTTLING_CODES


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        (model_error(400), "ModelError 400"),
        (model_error(503, '{"error": {"code": "overloaded"}}'), "ModelError 503"),
        (SAGEMAKER_TIMEOUT, "timeout"),
        (aws_error(400, "ThrottlingException"), "throttling"),
        (Canned(429, b""), "throttling"),  # a bare 429, as a proxy or load balancer answers
        (aws_error(429, "ModelNotReadyException"), "other (ModelNotReadyException)"),
        (aws_error(400, "ValidationError"), "other (ValidationError)"),
        (aws_error(503, "ServiceUnavailable"), "other (ServiceUnavailable)"),
        (aws_error(500, "InternalFailure"), "other (InternalFailure)"),
        (Canned(200, b"{}", delay=2.0), "timeout"),  # past the client's read timeout
    ],
)
def test_errors_are_classified_from_what_boto3_parses(answer: Canned, kind: str) -> None:
    with CannedRuntime([answer]) as runtime:
        invoke = SageMakerInvoker(runtime.client(read_timeout=0.5), Target("e"), REQUEST)
        with pytest.raises(Exception) as raised:
            invoke()
    assert classify(raised.value) == kind


def test_a_model_errors_message_is_the_containers() -> None:
    with (
        CannedRuntime([model_error(400, '{"error": "input is missing"}')]) as runtime,
        pytest.raises(ClientError) as raised,
    ):
        SageMakerInvoker(runtime.client(), Target("e"), REQUEST)()
    assert error_message(raised.value) == '{"error": "input is missing"}'
    assert len(error_message(raised.value, limit=10)) == 10


def test_nothing_listening_is_another_error() -> None:
    with CannedRuntime([ok()]) as runtime:
        client = runtime.client()
    # The server is gone: nothing listens on its port any more.
    with pytest.raises(EndpointConnectionError) as raised:
        SageMakerInvoker(client, Target("e"), REQUEST)()
    assert classify(raised.value) == "other (EndpointConnectionError)"


def test_an_answer_is_a_success() -> None:
    with CannedRuntime([ok({"outputs": [1]})]) as runtime:
        assert SageMakerInvoker(runtime.client(), Target("e", "component-1"), REQUEST)() is None
    ((path, headers),) = runtime.received
    assert path == "/endpoints/e/invocations"
    assert headers["X-Amzn-SageMaker-Inference-Component"] == "component-1"
    assert headers["Content-Type"] == "application/json"


class _Runtime:
    def invoke_endpoint_async(self, **arguments: object) -> dict[str, str]:
        self.arguments = arguments
        return {"OutputLocation": "s3://b/output/1.out", "FailureLocation": "s3://b/failure/1-error.out"}


class _S3:
    """Objects appear after `after` looks, at the locations in `written`."""

    def __init__(self, written: dict[str, bytes], after: int = 2) -> None:
        self.written, self.after, self.looks = written, after, 0

    def head_object(self, Bucket: str, Key: str) -> dict[str, object]:
        self.looks += 1
        if self.looks > self.after and f"s3://{Bucket}/{Key}" in self.written:
            return {}
        raise ClientError({"Error": {"Code": "404", "Message": "Not Found"}}, "HeadObject")

    def get_object(self, Bucket: str, Key: str) -> dict[str, object]:
        import io

        return {"Body": io.BytesIO(self.written[f"s3://{Bucket}/{Key}"])}


def async_invoker(s3: _S3, timeout_s: float = 5.0) -> tuple[AsyncInvoker, _Runtime]:
    runtime = _Runtime()
    request = Request(body=b"{}", content_type="application/json", accept=None, custom_attributes=None)
    invoker = AsyncInvoker(runtime, s3, Target("e"), request, "s3://b/input/r.body", timeout_s=timeout_s, poll_s=0)
    return invoker, runtime


def test_an_async_request_waits_for_its_answer_and_counts_its_failure_or_timeout() -> None:
    invoker, runtime = async_invoker(_S3({"s3://b/output/1.out": b"answer"}))
    invoker()
    assert runtime.arguments["InputLocation"] == "s3://b/input/r.body"
    assert runtime.arguments["InvocationTimeoutSeconds"] == 5
    failing, _ = async_invoker(_S3({"s3://b/failure/1-error.out": b"Received client error (400)"}))
    with pytest.raises(AsyncFailure) as failed:
        failing()
    assert classify(failed.value) == "async failure" and "400" in error_message(failed.value)
    silent, _ = async_invoker(_S3({}), timeout_s=0.05)
    with pytest.raises(AsyncTimeout) as waited:
        silent()
    assert classify(waited.value) == "timeout"
