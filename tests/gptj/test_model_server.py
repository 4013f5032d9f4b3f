"""The payload served by the Hugging Face image's own model server, started as the image starts it.

The image's entrypoint runs the toolkit's ``serve``: Multi Model Server 1.1.11 (a Java front
end with Python workers) on ``/opt/ml/model``. These tests run that very code under
``.venv-hf`` (local_aws/sagemaker/containers.py: the model under a base folder laid out like
``/opt/ml``, the environment GptjStack sets, ``SAGEMAKER_BIND_TO_PORT``) with the payload
the builder makes, and talk to it over HTTP as SageMaker does.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from artifacts_builder import gptj
from llm_contracts.gptj import PAYLOAD_MANIFEST, mms_manifest_lookalikes
from local_aws.sagemaker.containers import Container, HuggingFaceContainer, _group_members
from project_config import from_cdk_json
from tests.gptj.helpers import BAD, FEW_SHOT, SEED_PROMPT, SHARD, load_inference

pytestmark = pytest.mark.slow

#: The seed's requests (its default, beam search, parameterized and few-shot examples).
SEED_REQUESTS = {
    "default": {"inputs": SEED_PROMPT},
    "beams": {"inputs": SEED_PROMPT, "parameters": {"num_beams": 5, "max_new_tokens": 8}},
    "parameterized": {"inputs": SEED_PROMPT, "parameters": {"max_length": 40, "temperature": 0.9}},
    "few_shot": {
        "inputs": FEW_SHOT,
        "parameters": {"max_new_tokens": 25, "temperature": 4.0, "stop": "###", "return_full_text": False},
    },
}


def stack_environment() -> dict[str, str]:
    """The container environment GptjStack gives its SageMaker model on the toolkit engine."""
    settings = from_cdk_json({"gptj.engine": "hf-toolkit"}).gptj
    return {**settings.container_environment(), **settings.endpoint.environment}


def files_of(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def run_until_exit(container: Container, timeout: float = 90.0) -> int:
    assert container.process is not None
    return container.process.wait(timeout=timeout)


@pytest.fixture(scope="module")
def server(model_dir: Path) -> Iterator[HuggingFaceContainer]:
    with HuggingFaceContainer(model_dir, environment=stack_environment()) as container:
        container.wait_ready(timeout=120)
        yield container


def test_payload_holds_no_file_the_model_server_reads_as_its_manifest(model_dir: Path) -> None:
    assert PAYLOAD_MANIFEST in files_of(model_dir)
    assert mms_manifest_lookalikes(files_of(model_dir)) == []
    # code/inference.py runs in the image, where llm_contracts is not installed: its copy must match.
    assert load_inference(model_dir).MANIFEST == PAYLOAD_MANIFEST


@pytest.mark.parametrize(
    ("files", "found"),
    [
        (["manifest.json", "config.json"], ["manifest.json"]),
        (["code/Manifest.JSON"], ["code/Manifest.JSON"]),
        (["a/b/manifest.json"], []),  # two folders down: beyond MMS's search
        (["manifest.json", "MAR-INF/MANIFEST.json"], []),  # MMS's own manifest wins
        ([PAYLOAD_MANIFEST, "code/inference.py"], []),
    ],
)
def test_model_server_manifest_rule(files: list[str], found: list[str]) -> None:
    assert mms_manifest_lookalikes(files) == found


def test_builder_refuses_a_file_the_model_server_would_take_for_its_manifest(tmp_path: Path) -> None:
    entry = gptj.Entry("code/MANIFEST.json", 2, lambda: iter([b"{}"]))
    with pytest.raises(gptj.BuildError, match=r"code/MANIFEST.json, which the image's model server"):
        gptj.write_payload(tmp_path / "model", [entry], extra={})
    assert not (tmp_path / "model" / PAYLOAD_MANIFEST).exists()


def test_a_manifest_json_stops_the_real_model_server(model_dir: Path, tmp_path: Path) -> None:
    """The break this payload layout avoids, shown on the real server: the old name makes MMS
    read the payload's manifest as its own and stop before it listens."""
    old = Path(shutil.copytree(model_dir, tmp_path / "model"))
    (old / PAYLOAD_MANIFEST).rename(old / "manifest.json")
    container = HuggingFaceContainer(old, environment=stack_environment()).start()
    try:
        run_until_exit(container)
        log = container.log_tail(100_000)
        assert "LegacyManifest.migrate" in log and "Model server stopped." in log, log[-3000:]
        assert container.ping() == 0
    finally:
        container.stop()


@pytest.mark.parametrize("name", sorted(SEED_REQUESTS))
def test_seed_requests_through_the_model_server(server: HuggingFaceContainer, name: str) -> None:
    request = SEED_REQUESTS[name]
    response = server.invoke(json.dumps(request).encode())
    assert response.status == 200, response
    assert response.content_type.startswith("application/json")
    [answer] = json.loads(response.body)
    text = answer["generated_text"]
    assert isinstance(text, str) and text
    full_text = request.get("parameters", {}).get("return_full_text", True)
    assert text.startswith(request["inputs"]) == full_text
    if name == "few_shot":
        assert "###" not in text


@pytest.mark.parametrize(
    "bad", ["no inputs", "max_new_tokens too many", "temperature NaN", "body not JSON", "CSV content type", "stream"]
)
def test_bad_requests_get_a_400_naming_the_value(server: HuggingFaceContainer, bad: str) -> None:
    request, expected = BAD[bad]
    response = server.invoke(request["body"].encode(), content_type=request.get("content_type", "application/json"))
    assert response.status == 400, response
    error = json.loads(response.body)
    assert error["code"] == 400 and expected in error["message"], error
    assert server.ping() == 200  # the worker is still there
    assert server.invoke(json.dumps(SEED_REQUESTS["default"]).encode()).status == 200


def test_accept_other_than_json_gets_a_400(server: HuggingFaceContainer) -> None:
    response = server.invoke(json.dumps(SEED_REQUESTS["default"]).encode(), accept="text/csv")
    assert response.status == 400 and "text/csv" in json.loads(response.body)["message"]


def test_tampered_payload_stops_the_model_server_after_one_refusal(model_dir: Path, tmp_path: Path) -> None:
    """A shard that does not match its sha256: the worker refuses it once, stops the model
    server, and nothing answers on the port any more, so SageMaker's health check fails (and no
    request can make the worker hash the weights again)."""
    tampered = Path(shutil.copytree(model_dir, tmp_path / "model"))
    with open(tampered / SHARD, "r+b") as f:
        f.seek(-4, 2)
        last = f.read(4)
        f.seek(-4, 2)
        f.write(bytes(b ^ 0xFF for b in last))
    container = HuggingFaceContainer(tampered, environment=stack_environment()).start()
    try:
        run_until_exit(container)
        log = container.log_tail(200_000)
        refusals = [line for line in log.splitlines() if "GPT-J cannot be loaded" in line]
        assert len(refusals) == 1, log[-3000:]
        # At WARN, the level MMS gives a worker's stderr (its stdout is logged at INFO).
        assert "[WARN ]" in refusals[0] and f"{SHARD} has sha256" in refusals[0], refusals
        assert "stopping the model server" in refusals[0]
        assert container.ping() == 0
    finally:
        container.stop()


def test_stopping_leaves_no_process_socket_or_pid_file(model_dir: Path) -> None:
    container = HuggingFaceContainer(model_dir, environment=stack_environment()).start()
    container.wait_ready(timeout=120)
    assert container.process is not None and container.run_dir is not None
    pgid, run_dir = container.process.pid, container.run_dir
    # MMS keeps its worker socket and pid file in the container's temporary folder.
    held = {p.name for p in (run_dir / "tmp").iterdir()}
    assert ".model_server.pid" in held and any(name.startswith(".mms.sock") for name in held), held
    assert len(_group_members(pgid)) >= 3  # the toolkit's serve, the Java front end, the worker(s)
    container.stop()
    assert _group_members(pgid) == []
    assert not run_dir.exists()
    assert container.ping() == 0
