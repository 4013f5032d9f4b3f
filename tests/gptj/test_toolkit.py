"""code/inference.py served by the Hugging Face inference toolkit (the container's own handler
code) under the container's transformers, from a payload built with this project's
transformers and extracted as SageMaker lays it out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llm_contracts.gptj import PAYLOAD_MANIFEST
from project_config import from_cdk_json
from tests.gptj.helpers import BAD, GOOD, SEED_PROMPT, SHARD, copy_payload, load_inference, request


def _tamper(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01  # one bit of the last tensor: the kind of damage nothing else would notice
    path.write_bytes(bytes(data))


@pytest.fixture(scope="module")
def served(model_dir: Path, serve: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("tampered")
    flipped = copy_payload(model_dir, tmp / "flipped")
    _tamper(flipped / SHARD)
    truncated = copy_payload(model_dir, tmp / "truncated")
    weights = truncated / SHARD
    weights.write_bytes(weights.read_bytes()[:-8])
    no_manifest = copy_payload(model_dir, tmp / "no-manifest")
    (no_manifest / PAYLOAD_MANIFEST).unlink()
    good_then_bad = [*GOOD.values(), *(r for r, _ in BAD.values()), GOOD["default"]]
    probe = [request(SEED_PROMPT, max_new_tokens=3)]
    result = serve(
        [
            {"model_dir": model_dir, "requests": good_then_bad},
            {"model_dir": flipped, "requests": probe},
            {"model_dir": truncated, "requests": probe},
            {"model_dir": no_manifest, "requests": probe},
        ]
    )
    good, flipped_r, truncated_r, no_manifest_r = result["scenarios"]
    responses = good["responses"]
    return {
        "versions": result["versions"],
        "load_error": good["load_error"],
        "good": dict(zip(GOOD, responses[: len(GOOD)], strict=True)),
        "bad": dict(zip(BAD, responses[len(GOOD) : -1], strict=True)),
        "after_bad": responses[-1],
        "flipped": flipped_r,
        "truncated": truncated_r,
        "no_manifest": no_manifest_r,
    }


def _text(response: dict[str, Any]) -> str:
    assert response["code"] == 200, response
    (item,) = json.loads(response["body"])
    return str(item["generated_text"])


def test_served_under_the_container_versions(served: dict[str, Any]) -> None:
    image = from_cdk_json({"gptj.engine": "hf-toolkit"}).gptj.engine
    assert served["versions"]["transformers"] == image.transformers_version
    assert served["load_error"] is None


def test_seed_default_request_is_greedy(served: dict[str, Any]) -> None:
    text = _text(served["good"]["default"])
    assert text.startswith(SEED_PROMPT) and len(text) > len(SEED_PROMPT)
    assert _text(served["good"]["default_again"]) == text


def test_same_answer_as_the_build_environment(served: dict[str, Any], model_dir: Path) -> None:
    """Greedy output under the image's transformers equals that under the project's: the
    payload means the same model on both sides of the version skew."""
    inference = load_inference(model_dir)
    model = inference.model_fn(str(model_dir))
    here = inference.predict_fn(json.loads(GOOD["default"]["body"]), model)
    assert here == json.loads(served["good"]["default"]["body"])


@pytest.mark.parametrize("name", ["beams", "parameterized", "long", "sampling_all"])
def test_seed_requests_succeed(served: dict[str, Any], name: str) -> None:
    assert _text(served["good"][name]).startswith(SEED_PROMPT)


def test_long_generation_is_longer(served: dict[str, Any]) -> None:
    # min_length forces every one of the ~190 new tokens; the default stops at 50.
    assert len(_text(served["good"]["long"])) > len(_text(served["good"]["default"]))


def test_few_shot_returns_only_new_text_without_stop(served: dict[str, Any]) -> None:
    text = _text(served["good"]["few_shot"])
    assert not text.startswith("key:") and "###" not in text


def test_return_full_text_false(served: dict[str, Any]) -> None:
    short = _text(served["good"]["short"])
    full = _text(served["good"]["default"])
    assert not short.startswith(SEED_PROMPT) and full.startswith(SEED_PROMPT + short)


@pytest.mark.parametrize("name", list(BAD))
def test_bad_request_gets_400_naming_the_value(served: dict[str, Any], name: str) -> None:
    response = served["bad"][name]
    assert response["code"] == 400, response
    assert BAD[name][1] in response["message"], response["message"]


def test_worker_serves_after_bad_requests(served: dict[str, Any]) -> None:
    assert _text(served["after_bad"]) == _text(served["good"]["default"])


@pytest.mark.parametrize(
    ("case", "words"),
    [("flipped", ["sha256", SHARD]), ("truncated", ["bytes", SHARD])],
)
def test_altered_weights_are_refused(served: dict[str, Any], case: str, words: list[str]) -> None:
    scenario = served[case]
    assert scenario["load_error"] is not None and all(w in scenario["load_error"] for w in words)
    (response,) = scenario["responses"]
    # In process, without the model server to stop (test_model_server.py), the toolkit retries
    # model_fn on each request, and each answer carries the refusal.
    assert response["code"] == 400 and "refusing to load" in response["message"], response
    assert all(w in response["message"] for w in words)


def test_payload_without_manifest_is_refused(served: dict[str, Any]) -> None:
    (response,) = served["no_manifest"]["responses"]
    assert response["code"] == 400 and PAYLOAD_MANIFEST in response["message"], response


@pytest.fixture(scope="module")
def stops(served: dict[str, Any], model_dir: Path, serve: Any) -> dict[str, Any]:
    """Stop sequences and an eos id taken from the greedy continuation itself, so that
    they are certain to occur in it."""
    from transformers import AutoTokenizer

    continuation = _text(served["good"]["default"])[len(SEED_PROMPT) :]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    ids = tokenizer(SEED_PROMPT + continuation)["input_ids"]
    n_prompt = len(tokenizer(SEED_PROMPT)["input_ids"])
    stop = continuation[10:14]
    cut = continuation.find(stop)
    eos_id = ids[n_prompt + 5]
    requests = [
        request(SEED_PROMPT, stop=stop, return_full_text=False),
        request(SEED_PROMPT, stop=["not in the text at all", stop], return_full_text=False),
        request(SEED_PROMPT, eos_token_id=eos_id, return_full_text=False),
    ]
    (scenario,) = serve([{"model_dir": model_dir, "requests": requests}])["scenarios"]
    return {
        "expected_cut": continuation[:cut],
        "eos_id": eos_id,
        "first_eos": ids[n_prompt:].index(eos_id),
        "ids": ids,
        "n_prompt": n_prompt,
        "tokenizer": tokenizer,
        "responses": scenario["responses"],
    }


def test_stop_sequence_cuts_the_text(stops: dict[str, Any]) -> None:
    single, listed, _ = stops["responses"]
    assert _text(single) == stops["expected_cut"]
    assert _text(listed) == stops["expected_cut"]


def test_eos_token_id_ends_generation(stops: dict[str, Any]) -> None:
    text = _text(stops["responses"][2])
    n_prompt, first = stops["n_prompt"], stops["first_eos"]
    assert text == stops["tokenizer"].decode(stops["ids"][n_prompt : n_prompt + first])
