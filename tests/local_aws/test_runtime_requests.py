"""The SageMaker runtime's three calls as a caller in AWS sends them, through boto3 and the real
server: a body is bytes, whatever they are; the request's headers are checked against botocore's
``sagemaker-runtime`` model; every error comes back in the service's own shape."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from local_aws import LocalAws
from local_aws.sagemaker.runtime import hosting_plane
from tests.local_aws.helpers import client, echo_for_the_module, echo_launcher, endpoint_status

RAW = "application/x-echo-raw"
#: Bytes that are not UTF-8, a JSON document and a form's body, side by side.
BODIES = {
    "every byte": bytes(range(256)),
    "random": os.urandom(4096),
    "latin-1": "caf\xe9".encode("latin-1"),
    "empty-ish": b"\x00",
}


@pytest.fixture(scope="module")
def echo(aws: LocalAws) -> Iterator[str]:
    with echo_for_the_module(aws, "bytes") as name:
        yield name


def error(call: Any) -> dict[str, Any]:
    with pytest.raises(ClientError) as raised:
        call()
    return raised.value.response  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", sorted(BODIES))
def test_a_body_of_any_bytes_reaches_the_container_and_comes_back_byte_for_byte(
    aws: LocalAws, echo: str, kind: str
) -> None:
    body = BODIES[kind]
    runtime = client(aws, "sagemaker-runtime")
    answer = runtime.invoke_endpoint(EndpointName=echo, Body=body, ContentType=RAW, Accept="*/*")
    assert answer["ContentType"] == RAW
    assert answer["Body"].read() == body
    seen = json.loads(runtime.invoke_endpoint(EndpointName=echo, Body=body, ContentType="image/png")["Body"].read())
    assert seen["body_sha256"] == hashlib.sha256(body).hexdigest() and seen["content_type"] == "image/png"


def test_a_streamed_body_of_any_bytes_reaches_the_container(aws: LocalAws, echo: str) -> None:
    body = BODIES["every byte"]
    answer = client(aws, "sagemaker-runtime").invoke_endpoint_with_response_stream(
        EndpointName=echo, Body=body, ContentType=RAW
    )
    assert b"".join(event["PayloadPart"]["Bytes"] for event in answer["Body"]) == body


def test_an_async_input_of_any_bytes_reaches_the_container(aws: LocalAws, echo: str) -> None:
    body = BODIES["random"]
    s3 = client(aws, "s3")
    s3.create_bucket(Bucket="bytes-io")
    s3.put_object(Bucket="bytes-io", Key="in", Body=body)
    sm = client(aws, "sagemaker")
    variants = sm.describe_endpoint_config(EndpointConfigName=f"{echo}-config")["ProductionVariants"]
    sm.create_endpoint_config(
        EndpointConfigName="bytes-async",
        ProductionVariants=[{k: v for k, v in variants[0].items() if k != "CurrentServerlessConfig"}],
        AsyncInferenceConfig={"OutputConfig": {"S3OutputPath": "s3://bytes-io/out/"}},
    )
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(hosting_plane(), "launcher", echo_launcher)
        sm.create_endpoint(EndpointName="bytes-async", EndpointConfigName="bytes-async")
        assert endpoint_status(aws, "bytes-async", settle=True) == "InService"
    answer = client(aws, "sagemaker-runtime").invoke_endpoint_async(
        EndpointName="bytes-async", InputLocation="s3://bytes-io/in", ContentType=RAW
    )
    key = answer["OutputLocation"].removeprefix("s3://bytes-io/")
    # clock: a generous wait for an answer written within moments; its expiry only ends a wait
    # for an answer that never comes.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # clock: the same wait
        try:
            assert s3.get_object(Bucket="bytes-io", Key=key)["Body"].read() == body
            return
        except ClientError:
            time.sleep(0.1)
    pytest.fail("the async answer was never written")


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/x-www-form-urlencoded", b"Action=InvokeEndpointAsync&EndpointName=elsewhere"),
        ("text/plain", b"EndpointName=elsewhere"),
        (
            "multipart/form-data; boundary=x",
            b'--x\r\nContent-Disposition: form-data; name="EndpointName"\r\n\r\nelse\r\n--x--',
        ),
    ],
)
def test_a_body_that_reads_as_a_form_is_the_containers_and_names_nothing(
    aws: LocalAws, echo: str, content_type: str, body: bytes
) -> None:
    answer = client(aws, "sagemaker-runtime").invoke_endpoint(EndpointName=echo, Body=body, ContentType=content_type)
    seen = json.loads(answer["Body"].read())
    assert seen["body_sha256"] == hashlib.sha256(body).hexdigest() and seen["content_type"] == content_type


@pytest.mark.parametrize(
    ("call", "options", "member"),
    [
        ("invoke_endpoint", {"CustomAttributes": "a" * 1025}, "Value at 'customAttributes'"),
        ("invoke_endpoint", {"ContentType": "x" * 1025}, "at 'contentType'"),
        ("invoke_endpoint", {"Accept": "é"}, "at 'accept' failed to satisfy constraint: Member must satisfy regular"),
        ("invoke_endpoint", {"TargetVariant": "-x"}, "at 'targetVariant'"),
        ("invoke_endpoint", {"InferenceId": "x" * 65}, "at 'inferenceId'"),
        ("invoke_endpoint", {"InferenceComponentName": "a_b"}, "at 'inferenceComponentName'"),
        ("invoke_endpoint", {"SessionId": "a b"}, "at 'sessionId'"),
        ("invoke_endpoint_with_response_stream", {"CustomAttributes": "a" * 1025}, "at 'customAttributes'"),
        ("invoke_endpoint_async", {"InputLocation": "s3://b/k", "InvocationTimeoutSeconds": 3601}, "invocationTimeout"),
        ("invoke_endpoint_async", {"InputLocation": "ftp://b/k"}, "at 'inputLocation'"),
    ],
)
def test_a_request_off_the_model_is_a_validation_error(
    aws: LocalAws, echo: str, call: str, options: dict[str, Any], member: str
) -> None:
    body = {} if call == "invoke_endpoint_async" else {"Body": b"{}"}
    response = error(lambda: getattr(client(aws, "sagemaker-runtime"), call)(EndpointName=echo, **body, **options))
    assert response["Error"]["Code"] == "ValidationError", response
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert response["Error"]["Message"].startswith("1 validation error detected: ")
    assert member in response["Error"]["Message"], response["Error"]["Message"]


def test_custom_attributes_of_1024_characters_reach_the_container(aws: LocalAws, echo: str) -> None:
    attributes = "a" * 1024
    answer = client(aws, "sagemaker-runtime").invoke_endpoint(
        EndpointName=echo, Body=b"{}", CustomAttributes=attributes
    )
    assert json.loads(answer["Body"].read())["custom_attributes"] == attributes


@pytest.mark.parametrize("name", ["a/b", "a b", "-a", "a" * 64])
def test_an_endpoint_name_off_its_pattern_is_a_validation_error(aws: LocalAws, echo: str, name: str) -> None:
    for call in ("invoke_endpoint", "invoke_endpoint_with_response_stream"):
        response = error(lambda: getattr(client(aws, "sagemaker-runtime"), call)(EndpointName=name, Body=b"{}"))  # noqa: B023
        assert response["Error"]["Code"] == "ValidationError", response
        assert "at 'endpointName'" in response["Error"]["Message"]


@pytest.mark.parametrize("call", ["invoke_endpoint", "invoke_endpoint_with_response_stream"])
def test_a_body_over_6_mb_is_refused_with_413_before_the_container(aws: LocalAws, echo: str, call: str) -> None:
    runtime = client(aws, "sagemaker-runtime")
    response = error(lambda: getattr(runtime, call)(EndpointName=echo, Body=b"x" * (6 * 1024 * 1024 + 1)))
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 413
    assert response["Error"] == {"Code": "413", "Message": "HTTP content length exceeded 6291456 bytes."}
    exactly = getattr(runtime, call)(EndpointName=echo, Body=b"x" * (6 * 1024 * 1024), ContentType=RAW)
    received = exactly["Body"].read() if "Body" in exactly and hasattr(exactly["Body"], "read") else None
    assert received is None or len(received) == 6 * 1024 * 1024


def test_an_error_of_the_local_aws_itself_is_internal_failure_in_json_and_is_kept(
    aws: LocalAws, echo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from local_aws.host import HOST

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a stand-in for a bug of the emulator")

    monkeypatch.setattr(hosting_plane(), "find", broken)
    response = error(lambda: client(aws, "sagemaker-runtime").invoke_endpoint(EndpointName=echo, Body=b"{}"))
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 500
    assert response["Error"]["Code"] == "InternalFailure"
    assert "a stand-in for a bug of the emulator" in response["Error"]["Message"]
    (fault,) = HOST.faults.take()
    assert fault.service == "sagemakerruntime" and "RuntimeError" in fault.error
    assert "raise RuntimeError" in fault.traceback


@pytest.mark.parametrize("call", ["invoke_endpoint", "invoke_endpoint_with_response_stream"])
def test_a_key_error_inside_routing_is_internal_failure_not_the_callers_validation_error(
    aws: LocalAws, echo: str, monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    """A KeyError or IndexError of the local AWS's own on the invoke path is its fault (500
    InternalFailure, recorded), not a 400 ValidationError counted as nothing: the runtime's refusals
    are typed (local_aws/sagemaker/runtime.py ``Unroutable``), and no built-in error is one."""
    from local_aws.host import HOST

    def planted(*args: object, **kwargs: object) -> None:
        raise KeyError("a planted lookup of the emulator's own")

    monkeypatch.setattr(hosting_plane(), "route", planted)
    response = error(lambda: getattr(client(aws, "sagemaker-runtime"), call)(EndpointName=echo, Body=b"{}"))
    assert (response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]) == (500, "InternalFailure")
    (fault,) = HOST.faults.take()
    assert fault.service == "sagemakerruntime" and fault.error.startswith("KeyError")
