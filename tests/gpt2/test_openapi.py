"""The OpenAPI description states every limit the server enforces (issue 16 item 4): a request
valid against its schema (as the container serves it, with its model's limits filled in) is
answered, or refused only for a reason its Request description lists; a request invalid against
it is refused with a 4xx JSON error naming the value. Each limit is tried at its edge and just
past it, through the real `serve`."""

from __future__ import annotations

import http.client
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from serving.gpt2 import api
from serving.gpt2.local import LocalServer
from serving.gpt2.predictor import OPENAPI, Tokenizer
from tests.gpt2.helpers import post

#: The tiny build's longest token (its end-of-text marker, 13 characters); the server fills in
#: 41 x 13 = 533 characters as an input's maxLength.
LONGEST = "<|endoftext|>"


@cache
def served(port: int) -> dict[str, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/openapi.json")
        return dict(json.loads(conn.getresponse().read()))
    finally:
        conn.close()


def validator(spec: dict[str, Any]) -> Draft202012Validator:
    resource = Resource.from_contents(spec, default_specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource("urn:gpt2-openapi", resource)
    return Draft202012Validator({"$ref": "urn:gpt2-openapi#/components/schemas/Request"}, registry=registry)


def body(params: dict[str, Any] | None = None, **fields: Any) -> bytes:
    request = fields or {"input": "a"}
    if params is not None:
        request["parameters"] = params
    return json.dumps(request).encode()


ONE = {"max_new_tokens": 1}
SAMPLE = {"do_sample": True, "max_new_tokens": 1}
# (case, body, valid against the schema, status, what the answer's message names)
CASES: list[tuple[str, bytes, bool, int, str]] = [
    # at each limit: valid, answered
    ("input at maxLength", body(ONE, input=LONGEST * 41), True, 200, ""),
    ("inputs at maxItems", body(ONE, inputs=["a"] * 10), True, 200, ""),
    ("max_new_tokens at maximum", body({"max_new_tokens": 41}), True, 200, ""),
    ("num_return_sequences at maximum", body({**SAMPLE, "num_return_sequences": 10}), True, 200, ""),
    ("temperature at minimum", body({**SAMPLE, "temperature": 0.01}), True, 200, ""),
    ("temperature at maximum", body({**SAMPLE, "temperature": 100}), True, 200, ""),
    ("top_k at maximum", body({**SAMPLE, "top_k": 512}), True, 200, ""),
    ("top_p at maximum", body({**SAMPLE, "top_p": 1}), True, 200, ""),
    ("top_p just above 0", body({**SAMPLE, "top_p": 1e-9}), True, 200, ""),
    ("stop at maxItems of maxLength", body({**ONE, "stop": ["x" * 64] * 4}), True, 200, ""),
    ("integers written as 2.0", body({"max_new_tokens": 2.0, "top_k": 5.0, "num_return_sequences": 2.0,
                                      "do_sample": True}), True, 200, ""),
    ("an integer written as 1e1", b'{"input": "a", "parameters": {"max_new_tokens": 1e1}}', True, 200, ""),
    # just past each limit: invalid, refused naming the value
    ("input past maxLength", body(ONE, input=LONGEST * 41 + "a"), False, 400, "input is 534 characters"),
    ("empty input", body(input=""), False, 400, "input is an empty string"),
    ("inputs past maxItems", body(inputs=["a"] * 11), False, 400, "inputs has 11 items"),
    ("no inputs", body(inputs=[]), False, 400, "inputs is []"),
    ("input and inputs", body(input="a", inputs="b"), False, 400, "exactly one of"),
    ("max_new_tokens past maximum", body({"max_new_tokens": 42}), False, 400, "max_new_tokens=42"),
    ("max_new_tokens below minimum", body({"max_new_tokens": 0}), False, 400, "max_new_tokens=0"),
    ("max_new_tokens not whole", body({"max_new_tokens": 2.5}), False, 400, "max_new_tokens=2.5"),
    ("num_return_sequences past maximum", body({**SAMPLE, "num_return_sequences": 11}), False, 400,
     "num_return_sequences=11"),
    ("num_return_sequences without sampling", body({"num_return_sequences": 2}), False, 400,
     "num_return_sequences=2 needs parameters.do_sample=true"),
    ("temperature below minimum", body({**SAMPLE, "temperature": 0.0099}), False, 400, "temperature=0.0099"),
    ("temperature past maximum", body({**SAMPLE, "temperature": 100.01}), False, 400, "temperature=100.01"),
    ("top_k past maximum", body({"top_k": 513}), False, 400, "top_k=513"),
    ("top_k below minimum", body({"top_k": -1}), False, 400, "top_k=-1"),
    ("top_p at 0", body({**SAMPLE, "top_p": 0}), False, 400, "top_p=0"),
    ("top_p past maximum", body({**SAMPLE, "top_p": 1.0000001}), False, 400, "top_p=1.0000001"),
    ("stop past maxItems", body({"stop": ["x"] * 5}), False, 400, 'parameters.stop=["x", "x", "x", "x", "x"]'),
    ("stop past maxLength", body({"stop": "x" * 65}), False, 400, 'parameters.stop="xxxxxxxx'),
    ("empty stop", body({"stop": [""]}), False, 400, 'parameters.stop=[""]'),
    ("do_sample not a boolean", body({"do_sample": "yes"}), False, 400, 'do_sample="yes"'),
    ("unpaired surrogate", b'{"input": "a\\ud800"}', False, 400, "'\\ud800', an unpaired UTF-16 surrogate"),
    ("unknown field", body(input="a", prompt="b"), False, 400, "unknown field 'prompt'"),
    ("unknown parameter", body({"beams": 2}), False, 400, "unknown parameter 'beams'"),
    ("stream of two inputs", body(ONE, inputs=["a", "b"], stream=True), False, 400,
     "stream=true streams one completion"),
    ("stream of two sequences", body({**SAMPLE, "num_return_sequences": 2}, input="a", stream=True), False, 400,
     "stream=true streams one completion"),
    ("stream not a boolean", body(ONE, input="a", stream="yes"), False, 400, 'stream="yes" is invalid'),
    # valid, refused only for a reason the Request schema's description lists
    ("inputs x num_return_sequences past max_rows", body({**SAMPLE, "num_return_sequences": 2}, inputs=["a"] * 6),
     True, 400, "6 inputs x num_return_sequences 2 = 12 completions"),
    ("tokens + max_new_tokens past max_total_length", body({"max_new_tokens": 41}, input="amazon web services"),
     True, 400, "exceed the model's 42 tokens"),
    ("more tokens than max_total_length - 1", body(input="ab " * 100), True, 400, "shorten it to at most 41 tokens"),
    ("a key twice", b'{"input": "a", "input": "b"}', True, 400, 'gives the key "input" twice'),
    ("a number of 4301 characters", b'{"input": "a", "parameters": {"temperature": 1.' + b"0" * 4299 + b"}}", True,
     400, "a number of more than 4300 characters"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "raw", "valid", "status", "message"), CASES, ids=[c[0] for c in CASES])
def test_schema_and_server_agree_at_each_limit(
    server: LocalServer, case: str, raw: bytes, valid: bool, status: int, message: str
) -> None:
    assert validator(served(server.port)).is_valid(json.loads(raw)) == valid
    got, answer, _ = post(server.port, raw)
    assert got == status, answer
    if status != 200:
        assert message in answer["error"]["message"], answer


def test_the_served_description_fills_in_the_models_limits(server: LocalServer, model_dir: Path) -> None:
    generation = json.loads((model_dir / "generation.json").read_text())
    schemas = served(server.port)["components"]["schemas"]
    params = schemas["Parameters"]["properties"]
    assert schemas["Request"]["properties"]["inputs"]["oneOf"][1]["maxItems"] == generation["max_batch_size"]
    assert params["num_return_sequences"]["maximum"] == generation["max_batch_size"]
    assert params["max_new_tokens"]["maximum"] == generation["max_total_length"] - 1
    assert params["top_k"]["maximum"] == generation["vocab_size"]
    tokenizer = Tokenizer(model_dir / "tokenizer")
    assert tokenizer.max_token_chars == len(LONGEST)
    assert schemas["Text"]["maxLength"] == (generation["max_total_length"] - 1) * len(LONGEST)
    # Every limit the file leaves to the container is filled in, and nothing else differs.
    template = json.loads(OPENAPI.read_text())
    assert api.describe(template, {name: None for name in ("max_rows", "max_new_tokens", "vocab_size",
                                                           "max_prompt_chars")}) == template  # fmt: skip


def test_openapi_documents_the_limits_the_validator_enforces() -> None:
    schemas = json.loads(OPENAPI.read_text())["components"]["schemas"]
    params = schemas["Parameters"]["properties"]
    assert set(params) == set(api.PARAMETERS) and schemas["Parameters"]["maxProperties"] == len(api.PARAMETERS)
    assert set(schemas["Request"]["properties"]) == set(api.TOP_LEVEL)
    assert params["stop"]["oneOf"][1]["maxItems"] == api.MAX_STOP_SEQUENCES
    assert schemas["StopText"]["maxLength"] == api.MAX_STOP_CHARS
    assert (params["temperature"]["minimum"], params["temperature"]["maximum"]) == (
        api.MIN_TEMPERATURE,
        api.MAX_TEMPERATURE,
    )
    assert (params["top_p"]["exclusiveMinimum"], params["top_p"]["maximum"]) == (0, 1)
    assert "4300 characters" in schemas["Request"]["description"]
    assert str(api.bounded_json.MAX_NUMBER_CHARS) in schemas["Request"]["description"]
