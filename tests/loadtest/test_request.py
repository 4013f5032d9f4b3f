"""The request file: what it sends, and a one-line refusal naming the fault otherwise."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from loadtest.request import MAX_BODY_BYTES, RequestFileError, load_request

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "request.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def test_a_json_body_is_sent_serialized_as_json(tmp_path: Path) -> None:
    body = {"input": "amazon", "parameters": {"max_new_tokens": 4}}
    request = load_request(write(tmp_path, {"body": body, "accept": "application/json"}))
    assert json.loads(request.body) == body
    assert request.content_type == "application/json" and request.accept == "application/json"
    assert request.describe()["bytes"] == len(request.body)


def test_body_text_is_sent_as_it_stands(tmp_path: Path) -> None:
    request = load_request(write(tmp_path, {"body_text": '{"input": "amazon"', "content_type": "application/json"}))
    assert request.body == b'{"input": "amazon"'
    assert request.content_type == "application/json"


def test_body_base64_is_sent_as_bytes(tmp_path: Path) -> None:
    raw = bytes(range(256))
    request = load_request(write(tmp_path, {"body_base64": base64.b64encode(raw).decode(), "custom_attributes": "a=1"}))
    assert request.body == raw
    assert request.content_type == "application/octet-stream" and request.custom_attributes == "a=1"


@pytest.mark.parametrize("name", ["gpt2.json", "gptj.json"])
def test_the_shipped_request_files_load(name: str) -> None:
    request = load_request(ROOT / "loadtest" / "requests" / name)
    assert request.content_type == "application/json" and json.loads(request.body)


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ('{"body": {"input": "amazon"}', "is not JSON"),
        ("[1, 2]", "holds a JSON list, not an object"),
        ({"input": "amazon"}, "unknown keys ['input']"),
        ({"content_type": "application/json"}, "has 0 of body"),
        ({"body": {}, "body_text": "{}"}, "has 2 of body"),
        ({"body_text": 3}, "body_text must be a string"),
        ({"body_base64": "not base64!"}, "body_base64 is not base64"),
        ({"body": {}, "content_type": 5}, "content_type=5 is not a string"),
        ({"body_text": "x" * (MAX_BODY_BYTES + 1)}, "exceeds InvokeEndpoint's limit"),
    ],
)
def test_a_request_file_that_cannot_be_sent_is_refused(tmp_path: Path, document: object, expected: str) -> None:
    path = write(tmp_path, document)
    with pytest.raises(RequestFileError) as raised:
        load_request(path)
    message = str(raised.value)
    assert expected in message and str(path) in message
    assert "\n" not in message


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RequestFileError, match="cannot be read"):
        load_request(tmp_path / "nothing.json")
