"""The runtime's fuzz (tests/local_aws/fuzz.py) against the echo image, with endpoints in every
state: InService, missing, deleted, still starting, failed, and an asynchronous one. The e2e
tests run the same fuzz against the GPT-2 container and both GPT-J engines."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError

from local_aws import LocalAws
from local_aws.sagemaker.async_inference import pending_async
from local_aws.sagemaker.containers import running_containers
from local_aws.sagemaker.runtime import hosting_plane
from tests.local_aws import fuzz
from tests.local_aws.helpers import (
    ECHO_IMAGE,
    client,
    echo_config,
    echo_endpoint,
    echo_launcher,
    endpoint_status,
)

SEEDS = [b'{"q": 1}', b'{"input": "amazon"}']
#: Cases per operation (the time they take: docs/LOCAL_AWS.md).
EXAMPLES = {"InvokeEndpoint": 100, "InvokeEndpointWithResponseStream": 40, "InvokeEndpointAsync": 40}


@pytest.fixture(scope="module")
def endpoints(aws: LocalAws) -> Iterator[dict[str, str]]:
    """Endpoints in every state, in a fresh account."""
    aws.reset()
    sm = client(aws, "sagemaker")
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(hosting_plane(), "launcher", echo_launcher)
        echo_endpoint(aws, "live")
        echo_endpoint(aws, "gone")
        echo_endpoint(aws, "starting", {"ECHO_PING_AFTER_S": "600"})
        sm.create_model(
            ModelName="no-data",
            ExecutionRoleArn=f"arn:aws:iam::{aws.account}:role/sagemaker",
            PrimaryContainer={"Image": ECHO_IMAGE, "ModelDataUrl": "s3://fuzz-nowhere/model.tar.gz"},
        )
        config = sm.describe_endpoint_config(EndpointConfigName="live-config")["ProductionVariants"][0]
        variant = {k: config[k] for k in ("VariantName", "InstanceType", "InitialInstanceCount")}
        sm.create_endpoint_config(
            EndpointConfigName="no-data", ProductionVariants=[{**variant, "ModelName": "no-data"}]
        )
        sm.create_endpoint(EndpointName="failed", EndpointConfigName="no-data")
        client(aws, "s3").create_bucket(Bucket="fuzz-io")
        echo_config(aws, "async-model")
        sm.create_endpoint_config(
            EndpointConfigName="async",
            ProductionVariants=[{**variant, "ModelName": "async-model-model"}],
            AsyncInferenceConfig={
                "OutputConfig": {"S3OutputPath": "s3://fuzz-io/out/", "S3FailurePath": "s3://fuzz-io/failed/"}
            },
        )
        sm.create_endpoint(EndpointName="async", EndpointConfigName="async")
        for name in ("live", "gone", "async"):
            assert endpoint_status(aws, name, settle=True) == "InService"
        assert endpoint_status(aws, "failed", settle=True) == "Failed"
        sm.delete_endpoint(EndpointName="gone")
        yield {"missing": "never-created", "deleted": "gone", "starting": "starting", "failed": "failed"}
    aws.reset()


def target(aws: LocalAws, endpoint: str, unusable: dict[str, str], **options: object) -> fuzz.Target:
    def container() -> object:
        hosted = hosting_plane().find((aws.account, aws.region, endpoint))
        assert hosted is not None and hosted.live is not None
        return hosted.live.containers["AllTraffic"]

    return fuzz.Target(
        aws=aws,
        endpoint=endpoint,
        variant="AllTraffic",
        container=container,  # type: ignore[arg-type]
        seeds=[*SEEDS, b'{"status": 422}'],
        keys=("q", "input", "inputs"),
        unusable={name: state for state, name in unusable.items()},
        **options,  # type: ignore[arg-type]
    )


def test_every_runtime_call_is_answered_as_aws_answers_it(aws: LocalAws, endpoints: dict[str, str]) -> None:
    live = target(aws, "live", endpoints)
    outcomes = fuzz.fuzz(live, "echo", {op: n for op, n in EXAMPLES.items() if op != "InvokeEndpointAsync"})
    assert {"200", "ModelError 422", "ValidationError", "413"} <= set(outcomes["InvokeEndpoint"])
    assert outcomes["InvokeEndpointWithResponseStream"]["stream cut by the caller"] > 0
    # Afterwards the endpoint answers its seeds, and nothing the cut streams left is running.
    runtime = client(aws, "sagemaker-runtime")
    for body in SEEDS:
        assert runtime.invoke_endpoint(EndpointName="live", Body=body)["Body"].read()


def test_async_requests_are_each_answered_or_failed(aws: LocalAws, endpoints: dict[str, str]) -> None:
    s3 = client(aws, "s3")
    inputs = []
    for i, body in enumerate([*SEEDS, b'{"status": 400}', bytes(range(256))]):
        s3.put_object(Bucket="fuzz-io", Key=f"in/{i}", Body=body)
        inputs.append(f"s3://fuzz-io/in/{i}")
    queue = target(aws, "async", endpoints, inputs=inputs, is_async=True)
    outcomes = fuzz.fuzz(queue, "echo-async", {"InvokeEndpointAsync": EXAMPLES["InvokeEndpointAsync"],
                                               "InvokeEndpoint": 20})  # fmt: skip
    assert outcomes["InvokeEndpointAsync"]["202"] > 0 and outcomes["InvokeEndpointAsync"]["ValidationError"] > 0
    # clock: a generous wait for a queue that empties within seconds; its expiry only ends a wait
    # for a request left pending for good.
    deadline = time.monotonic() + 120
    while pending_async() and time.monotonic() < deadline:  # clock: the same wait
        time.sleep(0.1)
    assert pending_async() == [], "an accepted async request was neither answered nor failed"
    for output, failure in queue.accepted:
        written = []
        for url in (output, failure):
            bucket, _, key = url.removeprefix("s3://").partition("/")
            try:
                s3.head_object(Bucket=bucket, Key=key)
                written.append(url)
            except ClientError:
                pass
        assert written, (output, failure)


def test_after_the_fuzz_only_the_endpoints_in_service_or_starting_run_a_container(
    aws: LocalAws, endpoints: dict[str, str]
) -> None:
    hosted = {
        str(container.run_dir)
        for name in ("live", "async", "starting")
        if (found := hosting_plane().find((aws.account, aws.region, name))) is not None
        for deployment in (found.live, found.pending)
        if deployment is not None
        for container in deployment.containers.values()
    }
    running = {p.run_dir for p in running_containers() if "echo_image.py" in p.cmdline}
    assert running <= hosted and len(running) >= 2, (running, hosted)
