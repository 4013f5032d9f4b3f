"""The local SageMaker runtime (local_aws/sagemaker/runtime.py) through the SageMaker API, as a user's
client sees it: updates that switch only to a healthy container, SageMaker's limits on an
invocation, the model data laid out as /opt/ml/model, and no process left behind."""

from __future__ import annotations

import io
import json
import os
import signal
import tarfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from local_aws import LocalAws
from local_aws.sagemaker import invocations
from local_aws.sagemaker.containers import ContainerError, running_containers
from local_aws.sagemaker.runtime import hosting_plane, lay_out
from tests.local_aws.helpers import ECHO_IMAGE, client, echo_config, echo_endpoint, endpoint_status


def echo_processes() -> list[str]:
    return [p.run_dir for p in running_containers() if "echo_image.py" in p.cmdline]


def ask(aws: LocalAws, name: str, request: object) -> dict[str, object]:
    answer = client(aws, "sagemaker-runtime").invoke_endpoint(EndpointName=name, Body=json.dumps(request).encode())
    return json.loads(answer["Body"].read())  # type: ignore[no-any-return]


def update(aws: LocalAws, name: str, config: str, **environment: str) -> None:
    """A new model and endpoint config, and UpdateEndpoint to it (what a stack update does)."""
    echo_config(aws, config, environment)
    client(aws, "sagemaker").update_endpoint(EndpointName=name, EndpointConfigName=config)


def wait_until(check: Callable[[], object], what: str) -> None:
    """Until `check()` is true; a failure after a generous minute for what takes moments here."""
    deadline = time.monotonic() + 60  # clock: a generous wait, whose expiry only fails what never happens
    while not check():
        assert time.monotonic() < deadline, f"not within a minute: {what}"  # clock: the same wait
        time.sleep(0.05)


@pytest.fixture
def fresh(aws: LocalAws) -> LocalAws:
    aws.reset()
    return aws


def test_an_update_switches_once_the_new_container_answers_ping(fresh: LocalAws, tmp_path: Path) -> None:
    echo_endpoint(fresh, "echo", {"ECHO_VERSION": "v1"})
    assert endpoint_status(fresh, "echo", settle=True) == "InService"
    (old,) = echo_processes()
    # The new container answers /ping only once this test says so (an order, not a delay).
    healthy = tmp_path / "healthy"
    update(fresh, "echo", "v2", ECHO_VERSION="v2", ECHO_PING_AFTER_FILE=str(healthy))
    assert endpoint_status(fresh, "echo") == "Updating"
    # While the new container starts, the old one answers every request.
    answered_while_updating = [ask(fresh, "echo", {})["version"] for _ in range(3)]
    assert endpoint_status(fresh, "echo") == "Updating"
    assert answered_while_updating == ["v1"] * 3
    healthy.touch()
    assert endpoint_status(fresh, "echo", settle=True) == "InService"
    assert ask(fresh, "echo", {})["version"] == "v2"
    assert client(fresh, "sagemaker").describe_endpoint(EndpointName="echo")["EndpointConfigName"] == "v2"
    (new,) = echo_processes()
    assert new != old, "the old container was stopped once the new one took over"


def test_an_invocation_in_flight_when_the_endpoint_switches_is_answered(fresh: LocalAws, tmp_path: Path) -> None:
    echo_endpoint(fresh, "echo", {"ECHO_VERSION": "v1"})
    endpoint_status(fresh, "echo", settle=True)
    # The request is held in the old container (its "arrived") until the endpoint has switched.
    answers: list[object] = []
    slow = threading.Thread(target=lambda: answers.append(ask(fresh, "echo", {"hold": str(tmp_path)})["version"]))
    slow.start()
    try:
        wait_until(lambda: (tmp_path / "arrived").exists(), "the request reached the old container")
        update(fresh, "echo", "v2", ECHO_VERSION="v2")
        assert endpoint_status(fresh, "echo", settle=True) == "InService"
        assert ask(fresh, "echo", {})["version"] == "v2"
    finally:
        (tmp_path / "release").touch()
        slow.join(60)
    assert answers == ["v1"], "the old container finished the request before it was stopped"


def test_a_failed_update_leaves_the_endpoint_on_its_config(fresh: LocalAws) -> None:
    echo_endpoint(fresh, "echo", {"ECHO_VERSION": "v1"})
    endpoint_status(fresh, "echo", settle=True)
    update(fresh, "echo", "broken", ECHO_EXIT_CODE="3")
    assert endpoint_status(fresh, "echo", settle=True) == "InService"
    described = client(fresh, "sagemaker").describe_endpoint(EndpointName="echo")
    assert "exited (code 3)" in described["FailureReason"]
    assert ask(fresh, "echo", {})["version"] == "v1"
    assert len(echo_processes()) == 1


def test_deleting_an_endpoint_that_is_still_starting_stops_its_container(fresh: LocalAws) -> None:
    # Its container would wait an hour for /ping: a delete that waited for its start would run
    # past the client's 60 s read timeout and fail the call, where it takes moments.
    echo_config(fresh, "slow-config", {"ECHO_PING_AFTER_S": "7200"}, startup_timeout_s=3600)
    client(fresh, "sagemaker").create_endpoint(EndpointName="slow", EndpointConfigName="slow-config")
    wait_until(echo_processes, "the container started")
    client(fresh, "sagemaker").delete_endpoint(EndpointName="slow")
    assert echo_processes() == []


def test_an_invocation_past_the_limit_is_a_model_error_and_the_container_lives_on(
    fresh: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SageMaker's limit is 60 s; the same path, with a shorter wait, for an answer that takes 60
    # times as long (no host is slow enough to see it come first).
    monkeypatch.setattr(invocations, "INVOCATION_TIMEOUT_S", 0.5)
    echo_endpoint(fresh, "echo")
    endpoint_status(fresh, "echo", settle=True)
    runtime = client(fresh, "sagemaker-runtime")
    with pytest.raises(runtime.exceptions.ModelError, match="timed out"):
        runtime.invoke_endpoint(EndpointName="echo", Body=b'{"sleep_s": 30}')
    assert ask(fresh, "echo", {"q": 1})["body"] == '{"q": 1}'


def test_a_container_that_crashes_after_in_service_is_a_quick_model_error_and_leaves_nothing(
    fresh: LocalAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    echo_endpoint(fresh, "echo", {"ECHO_CHILD": "1"})
    assert endpoint_status(fresh, "echo", settle=True) == "InService"
    hosted = hosting_plane().find((fresh.account, fresh.region, "echo"))
    assert hosted is not None and hosted.live is not None
    (container,) = hosted.live.containers.values()
    assert container.process is not None
    run_dir = str(container.run_dir)
    wait_until(lambda: len([p for p in running_containers() if p.run_dir == run_dir]) == 2, "its worker started")
    os.kill(container.process.pid, signal.SIGKILL)  # the server dies; its child lives on
    container.process.wait(timeout=10)
    assert [p for p in running_containers() if p.run_dir == run_dir], "the stand-in worker should outlive the server"
    # Quick: an invocation that waited for an answer would wait an hour here, past the client's
    # 60 s read timeout (a ReadTimeoutError, not the ModelError below).
    monkeypatch.setattr(invocations, "INVOCATION_TIMEOUT_S", 3600)
    runtime = client(fresh, "sagemaker-runtime")
    for call in (runtime.invoke_endpoint, runtime.invoke_endpoint_with_response_stream):
        with pytest.raises(runtime.exceptions.ModelError) as raised:
            call(EndpointName="echo", Body=b"{}")
        response = raised.value.response
        assert response["OriginalStatusCode"] == 0, response
        assert "could not get a response from the echo endpoint" in response["OriginalMessage"], response
    assert [p for p in running_containers() if p.run_dir == run_dir] == []
    assert endpoint_status(fresh, "echo") == "InService"


def test_an_endpoint_that_never_answers_ping_fails_after_its_startup_timeout(fresh: LocalAws) -> None:
    from local_aws.sagemaker.runtime import VariantSpec, hosting_plane

    key = (fresh.account, fresh.region, "never")
    spec = VariantSpec("AllTraffic", ECHO_IMAGE, {"ECHO_PING_AFTER_S": "60"}, {}, 1)
    settled = threading.Event()
    hosted = hosting_plane().deploy(key, "c", [spec], lambda data, folder: None, lambda _: settled.set())
    assert settled.wait(30)
    assert hosted.status == "Failed" and "did not answer 200 within 1 s" in (hosted.failure_reason or "")
    hosting_plane().delete(key)
    assert echo_processes() == []


def test_model_data_is_laid_out_as_sagemaker_does(tmp_path: Path) -> None:
    objects: dict[tuple[str, str], bytes] = {
        ("bucket", "prefix/config.json"): b"{}",
        ("bucket", "prefix/code/inference.py"): b"# code",
        ("bucket", "other/file"): b"not under the prefix",
    }
    tar_bytes = io.BytesIO()
    with tarfile.open(fileobj=tar_bytes, mode="w:gz") as tar:
        info = tarfile.TarInfo("model.onnx")
        info.size = 4
        tar.addfile(info, io.BytesIO(b"onnx"))
    objects[("bucket", "model.tar.gz")] = tar_bytes.getvalue()

    def read(bucket: str, key: str) -> bytes:
        return objects[(bucket, key)]

    def keys(bucket: str, prefix: str) -> list[str]:
        return sorted(k for b, k in objects if b == bucket and k.startswith(prefix))

    def files(folder: Path) -> dict[str, bytes]:
        return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}

    lay_out({"ModelDataUrl": "s3://bucket/model.tar.gz"}, (tar_dir := tmp_path / "tar"), read, keys)
    assert files(tar_dir) == {"model.onnx": b"onnx"}
    prefix = {"S3DataSource": {"S3Uri": "s3://bucket/prefix/", "S3DataType": "S3Prefix", "CompressionType": "None"}}
    lay_out({"ModelDataSource": prefix}, (prefix_dir := tmp_path / "prefix"), read, keys)
    assert files(prefix_dir) == {"config.json": b"{}", "code/inference.py": b"# code"}
    objects[("bucket", "prefix/../../escape")] = b"!"
    with pytest.raises(ContainerError, match="outside /opt/ml/model"):
        lay_out({"ModelDataSource": prefix}, tmp_path / "escape", read, keys)


def test_a_reset_of_moto_drops_the_endpoints_and_stops_their_containers(fresh: LocalAws) -> None:
    """Endpoints are kept per account and region as moto keeps its resources: its own reset
    (/moto-api/reset, not LocalAws.reset) forgets them and stops their containers."""
    echo_endpoint(fresh, "echo")
    echo_endpoint(fresh, "echo-2")
    assert endpoint_status(fresh, "echo", settle=True) == endpoint_status(fresh, "echo-2", settle=True) == "InService"
    assert len(echo_processes()) == 2
    urllib.request.urlopen(urllib.request.Request(f"{fresh.endpoint}/moto-api/reset", method="POST")).close()
    assert hosting_plane().find((fresh.account, fresh.region, "echo")) is None
    assert hosting_plane().hosted() == []
    wait_until(lambda: not echo_processes(), "the containers stopped")


def test_stopping_the_local_aws_stops_every_container() -> None:
    with LocalAws(aws_managed_policies=False) as aws:
        echo_endpoint(aws, "echo")
        assert endpoint_status(aws, "echo", settle=True) == "InService"
        assert echo_processes()
    assert echo_processes() == []
