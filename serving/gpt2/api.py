"""Strict request validation for ``POST /invocations``.

Every problem becomes an :class:`ApiError` with a 4xx status and a message that names the
field, the value and what is allowed; nothing a client sends can reach the model unchecked.
The limits here are the ones ``openapi.json`` documents (a test keeps the two in step).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from json import JSONDecodeError
from typing import Any

from serving.gpt2 import bounded_json
from serving.gpt2.generation import ModelInfo, SamplingParams

MAX_PAYLOAD_BYTES = 6 * 1024 * 1024
MAX_STOP_SEQUENCES = 4
MAX_STOP_CHARS = 64
#: Below 0.01 sampling is greedy in all but name (logits / T tends to a one-hot), and ever
#: smaller values only approach float overflow: ask for do_sample=false instead.
MIN_TEMPERATURE = 0.01
MAX_TEMPERATURE = 100.0
PARAMETERS = ("max_new_tokens", "num_return_sequences", "do_sample", "temperature", "top_k", "top_p", "stop")
TOP_LEVEL = ("input", "inputs", "parameters", "stream")
#: A valid request nests three levels deep ({"parameters": {"stop": [...]}}); a few more let the
#: messages name what is wrong in a body that nests a little too much.
MAX_JSON_DEPTH = 8


@dataclass
class ApiError(Exception):
    status: int
    code: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message}}


def invalid(message: str) -> ApiError:
    return ApiError(400, "invalid_request", message)


@dataclass(frozen=True, kw_only=True)
class GenerationRequest:
    prompts: list[str]
    #: None: the model's default, shortened to what the prompt leaves room for.
    max_new_tokens: int | None
    num_return_sequences: int
    do_sample: bool
    temperature: float
    top_k: int
    top_p: float
    stop: list[str]
    #: Answer tokens as they are generated (JSON lines, chunked): one completion only.
    stream: bool = False

    def params(self, max_new_tokens: int) -> SamplingParams:
        return SamplingParams(
            max_new_tokens=max_new_tokens,
            do_sample=self.do_sample,
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
        )


def check_content_type(content_type: str | None) -> None:
    media, _, rest = (content_type or "").partition(";")
    if media.strip().lower() != "application/json":
        raise ApiError(
            415,
            "unsupported_media_type",
            f"Content-Type {content_type or '(none)'!r} is not supported: send the body as JSON with "
            "Content-Type: application/json",
        )
    for param in rest.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"').lower() not in ("utf-8", "utf8"):
            raise ApiError(
                415,
                "unsupported_media_type",
                f"charset {value.strip()!r} is not supported: send UTF-8 "
                "(Content-Type: application/json; charset=utf-8)",
            )


def max_json_values(max_rows: int) -> int:
    """The JSON values the largest valid request holds, at least: the body, `max_rows` inputs in
    a list, the parameters object with its values, and stop's list of strings. A body with more is
    refused before it is read further (bounded_json.py)."""
    return max_rows + len(TOP_LEVEL) + len(PARAMETERS) + MAX_STOP_SEQUENCES + 1


def decode_body(raw: bytes, max_rows: int) -> Any:
    """The JSON document of the body, read with work bounded by what a request of a server of
    `max_rows` rows can hold."""
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise ApiError(
            413, "payload_too_large", f"the body is {len(raw)} bytes; at most {MAX_PAYLOAD_BYTES} (6 MB) are accepted"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise invalid(f"the body is not valid UTF-8 (byte {exc.start}: {raw[exc.start : exc.start + 1]!r})") from None
    try:
        return bounded_json.loads(text, max_values=max_json_values(max_rows), max_depth=MAX_JSON_DEPTH)
    except bounded_json.EmptyDocument:
        raise invalid('the body is empty: send a JSON object such as {"inputs": "amazon"}') from None
    except JSONDecodeError as exc:
        raise invalid(f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except bounded_json.NotJsonConstant as exc:
        # json.loads would accept NaN and Infinity, which are not JSON.
        raise invalid(f"the body is not valid JSON: {exc.name} is not a JSON number") from None
    except bounded_json.DuplicateKey as exc:
        raise invalid(f"the body gives the key {_preview(exc.key)} twice in one object: give each field once") from None
    except bounded_json.LimitExceeded as exc:
        raise invalid(
            f"the body {exc}: a request holds at most {max_rows} inputs and {len(PARAMETERS)} parameters, "
            f"nested at most {MAX_JSON_DEPTH} levels"
        ) from None


def _text(value: str, where: str) -> None:
    """JSON escapes can carry lone surrogates (\\ud800), which are not Unicode text and
    cannot be tokenized or sent back."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise invalid(
            f"{where} contains {value[exc.start : exc.end]!r}, an unpaired UTF-16 surrogate: send valid Unicode text"
        ) from None


#: Items of an array or object a message shows.
PREVIEW_ITEMS = 8


def _preview(value: Any, limit: int = 80) -> str:
    """`value` as JSON, cut after `limit` characters: a message never costs more than its
    length, whatever the client sent (json.dumps of a 6 MB value held the worker for a second)."""
    if isinstance(value, str):
        text = json.dumps(value[: limit + 1])
    elif isinstance(value, list):
        text = "[" + ", ".join(_preview(item, limit) for item in value[:PREVIEW_ITEMS]) + "]"
    elif isinstance(value, dict):
        items = list(value.items())[:PREVIEW_ITEMS]
        text = "{" + ", ".join(f"{_preview(k, limit)}: {_preview(v, limit)}" for k, v in items) + "}"
    else:
        text = json.dumps(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def _integer(params: dict[str, Any], name: str, default: int, lo: int, hi: int) -> int:
    """A JSON number with a whole value within [lo, hi]: 3.0 and 3e0 are 3, as JSON Schema's
    "integer" (the OpenAPI description's type) counts them."""
    value = params.get(name, default)
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole or not lo <= value <= hi:
        raise invalid(f"parameters.{name}={_preview(value)} is invalid: allowed is a whole number from {lo} to {hi}")
    return int(value)


def _number(
    params: dict[str, Any], name: str, default: float, *, lo: float, hi: float, lo_inclusive: bool = True
) -> float:
    """A finite JSON number within [lo, hi] (or (lo, hi] when not `lo_inclusive`)."""
    value = params.get(name, default)
    above_lo = isinstance(value, int | float) and (value >= lo if lo_inclusive else value > lo)
    if isinstance(value, bool) or not isinstance(value, int | float) or not (above_lo and value <= hi):
        lower = f"at least {lo}" if lo_inclusive else f"greater than {lo}"
        raise invalid(f"parameters.{name}={_preview(value)} is invalid: allowed is a number {lower} and at most {hi}")
    return float(value)


def max_prompt_chars(info: ModelInfo, max_token_chars: int | None) -> int | None:
    """The characters of the longest input that can fit: the prompt's tokens (at most
    max_total_length - 1) times the most characters one token stands for. A longer input is
    refused before it is tokenized (tokenizing 6 MB took 10 s). None: no such bound is known."""
    return None if max_token_chars is None else (info.max_total_length - 1) * max_token_chars


def _prompts(payload: dict[str, Any], info: ModelInfo, max_rows: int, max_chars: int | None) -> list[str]:
    """The inputs, each a non-empty string that can fit the model; at most `max_rows` of them."""
    if ("input" in payload) == ("inputs" in payload):
        raise invalid('give exactly one of "input" (the seed\'s form) or "inputs" (a string or a list of strings)')
    key = "input" if "input" in payload else "inputs"
    value = payload[key]
    prompts = [value] if isinstance(value, str) or key == "input" else value
    if not isinstance(prompts, list) or not prompts:
        raise invalid(f"{key} is {_preview(value)}: give a non-empty string or a non-empty list of strings")
    if len(prompts) > max_rows:
        raise invalid(
            f"{key} has {len(prompts)} items; this server runs at most {max_rows} completions per request: "
            "send fewer inputs per request"
        )
    for i, prompt in enumerate(prompts):
        where = key if len(prompts) == 1 and not isinstance(value, list) else f"{key}[{i}]"
        if not isinstance(prompt, str):
            raise invalid(f"{where} is a JSON {_type_name(prompt)}: give a string")
        if not prompt:
            raise invalid(f"{where} is an empty string: give the text to complete")
        if max_chars is not None and len(prompt) > max_chars:
            longest = info.max_total_length - 1
            raise ApiError(
                400,
                "input_too_long",
                f"{where} is {len(prompt)} characters, more than this model's {longest} tokens of prompt can hold "
                f"(at most {max_chars} characters): shorten it to at most {longest} tokens",
            )
        _text(prompt, where)
    return prompts


# Complex on purpose: one check per request parameter, in the order the API documents them.
def parse_request(  # noqa: C901
    payload: Any, info: ModelInfo, max_rows: int, max_prompt_chars: int | None = None
) -> GenerationRequest:
    """Check the JSON document; `max_rows` is the largest batch the server runs, `max_prompt_chars`
    the longest input that can fit the model (see max_prompt_chars)."""
    if not isinstance(payload, dict):
        raise invalid(f'the body is a JSON {_type_name(payload)}; send an object such as {{"inputs": "amazon"}}')
    unknown = sorted(set(payload) - set(TOP_LEVEL))
    if unknown:
        raise invalid(f"unknown field {unknown[0]!r}: allowed fields are input, inputs, parameters and stream")
    prompts = _prompts(payload, info, max_rows, max_prompt_chars)

    params = payload.get("parameters", {})
    if not isinstance(params, dict):
        raise invalid(f"parameters is a JSON {_type_name(params)}: give an object")
    unknown = sorted(set(params) - set(PARAMETERS))
    if unknown:
        raise invalid(f"unknown parameter {unknown[0]!r}: allowed are {', '.join(PARAMETERS)}")
    max_new = None
    if "max_new_tokens" in params:
        max_new = _integer(params, "max_new_tokens", 1, 1, info.max_total_length - 1)
    n = _integer(params, "num_return_sequences", 1, 1, max_rows)
    do_sample = params.get("do_sample", False)
    if not isinstance(do_sample, bool):
        raise invalid(f"parameters.do_sample={_preview(do_sample)} is invalid: allowed is true or false")
    if n > 1 and not do_sample:
        raise invalid(
            f"parameters.num_return_sequences={n} needs parameters.do_sample=true: greedy decoding would "
            f"return {n} identical completions"
        )
    temperature = _number(params, "temperature", 1.0, lo=MIN_TEMPERATURE, hi=MAX_TEMPERATURE)
    top_k = _integer(params, "top_k", 0, 0, info.vocab_size)
    top_p = _number(params, "top_p", 1.0, lo=0.0, hi=1.0, lo_inclusive=False)
    stop = params.get("stop", [])
    stop_list = [stop] if isinstance(stop, str) else stop
    if (
        not isinstance(stop_list, list)
        or len(stop_list) > MAX_STOP_SEQUENCES
        or not all(isinstance(s, str) and 0 < len(s) <= MAX_STOP_CHARS for s in stop_list)
    ):
        raise invalid(
            f"parameters.stop={_preview(stop, 120)} is invalid: allowed is a string or a list of at most "
            f"{MAX_STOP_SEQUENCES} strings of 1 to {MAX_STOP_CHARS} characters"
        )
    for i, text in enumerate(stop_list):
        _text(text, f"parameters.stop[{i}]")
    stream = payload.get("stream", False)
    if not isinstance(stream, bool):
        raise invalid(f"stream={_preview(stream)} is invalid: allowed is true or false")
    if stream and len(prompts) * n > 1:
        raise invalid(
            f"stream=true streams one completion; this request asks for {len(prompts)} inputs x "
            f"num_return_sequences {n}: send one input and num_return_sequences 1, or stream=false"
        )
    if len(prompts) * n > max_rows:
        raise invalid(
            f"{len(prompts)} inputs x num_return_sequences {n} = {len(prompts) * n} completions; this server "
            f"runs at most {max_rows} per request: send fewer inputs per request"
        )
    return GenerationRequest(
        prompts=prompts,
        max_new_tokens=max_new,
        num_return_sequences=n,
        do_sample=do_sample,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        stop=stop_list,
        stream=stream,
    )


def completion_budget(prompt_tokens: int, requested: int | None, info: ModelInfo, where: str) -> int:
    """max_new_tokens for one prompt: the request's, or the default shortened to fit."""
    room = info.max_total_length - prompt_tokens
    if room < 1:
        raise ApiError(
            400,
            "input_too_long",
            f"{where} is {prompt_tokens} tokens; this model takes at most {info.max_total_length} tokens of prompt "
            f"and completion together: shorten it to at most {info.max_total_length - 1} tokens",
        )
    if requested is None:
        return min(info.default_max_new_tokens, room)
    if requested > room:
        raise invalid(
            f"{where} is {prompt_tokens} tokens and parameters.max_new_tokens={requested}: together they exceed "
            f"the model's {info.max_total_length} tokens; ask for at most {room} new tokens or shorten the input"
        )
    return requested


def describe(template: dict[str, Any], limits: dict[str, int | None]) -> dict[str, Any]:
    """The OpenAPI description with this server's limits filled in: every schema whose ``x-fill``
    names a limit (``{"maxItems": "max_rows"}``) gets that keyword set to its value (a limit
    that is None stays out)."""

    def fill(node: Any) -> Any:
        if isinstance(node, list):
            return [fill(item) for item in node]
        if not isinstance(node, dict):
            return node
        filled = {key: fill(value) for key, value in node.items()}
        for keyword, name in node.get("x-fill", {}).items():
            if limits[name] is not None:
                filled[keyword] = limits[name]
        return filled

    result: dict[str, Any] = fill(template)
    return result
