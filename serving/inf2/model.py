"""DJL Serving handler: a decoder model (OPT) on Inferentia2 through transformers-neuronx.

Request (``POST /invocations`` or ``/predictions/<model>``), as in the seed plus options::

    {"text": ["Hello, I am a language model,", "..."],   # or one string
     "seq_length": 128,          # total tokens per sequence, prompt included (the seed's field)
     "max_new_tokens": 64,       # or this, counted after the longest prompt (not both)
     "do_sample": true, "top_k": 50, "top_p": 1.0, "temperature": 1.0}

Response: ``{"outputs": [prompt + continuation, ...], "details": [{"generated_text",
"generated_tokens", "finish_reason"}, ...]}``. A bad request gets a 400 with the reason.

The core (settings, parsing, validation, batching, generation call, decoding) imports
neither ``djl_python`` nor a Neuron package: it runs on a CPU with any generator that
honours :class:`Generator`. Only :func:`load_neuron` needs the Inferentia2 container.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any, Protocol

LOG = logging.getLogger(__name__)

REQUEST_KEYS = ("text", "seq_length", "max_new_tokens", "do_sample", "top_k", "top_p", "temperature")
# transformers-neuronx names the precision `amp`; serving.properties uses DJL's names.
AMP = {"fp16": "f16", "bf16": "bf16", "fp32": "f32"}
INNER_MANIFEST = "manifest.json"
#: The bundle's list of the hub files the handler downloads, with their sha256 and size (the
#: builder's llm_contracts.inf2.HUB_FILES: the handler imports nothing of the project).
HUB_FILES = "hub-files.json"
#: What the hub's revisions must be: a commit, whose files never change (a branch can move).
COMMIT = re.compile(r"^[0-9a-f]{40}$")
#: The marker of a finished cache entry: written after the entry's folder got its final name.
COMPLETE = ".complete"
TORCH_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}
#: DJL's predict timeout when neither serving.properties nor the image sets one (djl-serving
#: v0.29.0, engines/python/.../PyEnv.java getPredictTimeout: option.predict_timeout, else the
#: PREDICT_TIMEOUT variable, which the LMI neuronx image sets to 240, else 120).
DJL_DEFAULT_PREDICT_TIMEOUT_S = 120
#: Part of the predict timeout kept back for tokenizing, decoding and the answer's way back:
#: a call that outlives the timeout makes DJL kill the Python worker and load the model again.
DEADLINE_MARGIN = 0.1
MIN_MARGIN_S = 5.0


class RequestError(ValueError):
    """A request this server refuses; `code` is the HTTP status."""

    def __init__(self, message: str, code: int = 400) -> None:
        super().__init__(message)
        self.code = code


class SettingsError(ValueError):
    """A serving.properties value the handler cannot use: the model fails to load."""


def _int_property(props: Mapping[str, str], key: str, default: int, lo: int, hi: int) -> int:
    raw = props.get(key, default)
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = lo - 1
    if not lo <= value <= hi:
        raise SettingsError(f"serving.properties option.{key}={raw!r} is invalid: allowed is a whole number {lo}-{hi}")
    return value


@dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """The handler's settings, from ``inputs.get_properties()`` (serving.properties, with
    DJL's ``option.`` prefix removed, plus ``model_dir``)."""

    model_id: str
    model_dir: str
    tensor_parallel_degree: int
    n_positions: int
    dtype: str
    batch_size: int
    max_new_tokens: int = 64
    max_texts: int = 64
    compiled_graph_path: str | None = None
    #: The hub commit of a hub model id (refused unless a 40-character commit); part of the cache keys.
    revision: str | None = None
    #: How long DJL lets one call of the handler run before it restarts the worker.
    predict_timeout_s: int = DJL_DEFAULT_PREDICT_TIMEOUT_S

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ServerConfig:
        dtype = props.get("dtype", "fp16")
        if dtype not in AMP:
            raise SettingsError(f"serving.properties option.dtype={dtype!r} is invalid: allowed is fp16, bf16, fp32")
        model_id = props.get("model_id") or ""
        if not model_id:
            raise SettingsError("serving.properties has no option.model_id: set a model id or a folder")
        n_positions = _int_property(props, "n_positions", 512, 16, 32_768)
        timeout_default = os.environ.get("PREDICT_TIMEOUT") or DJL_DEFAULT_PREDICT_TIMEOUT_S
        return cls(
            model_id=model_id,
            model_dir=props.get("model_dir", "/opt/ml/model"),
            tensor_parallel_degree=_int_property(props, "tensor_parallel_degree", 2, 1, 128),
            n_positions=n_positions,
            dtype=dtype,
            batch_size=_int_property(props, "batch_size", 1, 1, 256),
            max_new_tokens=_int_property(props, "max_new_tokens", min(64, n_positions - 1), 1, n_positions - 1),
            max_texts=_int_property(props, "max_texts", 64, 1, 4096),
            compiled_graph_path=props.get("compiled_graph_path") or None,
            revision=props.get("revision") or None,
            predict_timeout_s=_int_property(
                {"predict_timeout": str(props.get("predict_timeout") or timeout_default)},
                "predict_timeout",
                0,
                10,
                86_400,
            ),
        )

    @property
    def budget_s(self) -> float:
        """The seconds one call of the handler may spend generating."""
        timeout = self.predict_timeout_s
        return timeout - max(MIN_MARGIN_S, DEADLINE_MARGIN * timeout)

    @property
    def model_source(self) -> str:
        """A folder when `model_id` names one (absolute, or inside the model dir), else a hub id."""
        for candidate in (Path(self.model_id), Path(self.model_dir) / self.model_id):
            if candidate.is_absolute() and candidate.is_dir():
                return str(candidate)
        return self.model_id


@dataclass(frozen=True)
class Sampling:
    do_sample: bool = True
    top_k: int = 50
    top_p: float = 1.0
    temperature: float = 1.0


@dataclass(frozen=True)
class GenerationRequest:
    texts: tuple[str, ...]
    seq_length: int | None = None
    max_new_tokens: int | None = None
    sampling: Sampling = field(default_factory=Sampling)


def _number(body: Mapping[str, Any], key: str, default: Any, kind: type, lo: float, hi: float, what: str) -> Any:
    value = body.get(key, default)
    ok_type = isinstance(value, int | float) if kind is float else isinstance(value, kind)
    if (isinstance(value, bool) and kind is not bool) or not ok_type:
        raise RequestError(f"{key}={value!r} is invalid: allowed is {what}")
    if kind is not bool and not lo <= value <= hi:
        raise RequestError(f"{key}={value!r} is invalid: allowed is {what}")
    return kind(value)


def parse_request(body: Any, config: ServerConfig) -> GenerationRequest:
    """Validate a decoded JSON body; every refusal names the field, the value and what is allowed."""
    if not isinstance(body, dict):
        raise RequestError('the body must be a JSON object such as {"text": ["Hello,"], "max_new_tokens": 32}')
    unknown = sorted(set(body) - set(REQUEST_KEYS))
    if unknown:
        raise RequestError(f"unknown field {unknown[0]!r}: allowed fields are {', '.join(REQUEST_KEYS)}")
    text = body.get("text")
    texts = [text] if isinstance(text, str) else text
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t.strip() for t in texts):
        raise RequestError(f"text={text!r} is invalid: allowed is a non-empty string or a list of them")
    if len(texts) > config.max_texts:
        raise RequestError(f"text has {len(texts)} prompts: allowed is at most {config.max_texts} per request")
    for i, one in enumerate(texts):
        # JSON escapes can carry lone surrogates (\ud800): not Unicode text, and the tokenizer raises.
        try:
            one.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise RequestError(
                f"text[{i}] contains {one[exc.start : exc.end]!r}, an unpaired UTF-16 surrogate: "
                "send valid Unicode text"
            ) from None
    if "seq_length" in body and "max_new_tokens" in body:
        raise RequestError("seq_length and max_new_tokens were both given: send one of them")
    positions = config.n_positions
    seq_length = (
        _number(body, "seq_length", None, int, 2, positions, f"a whole number from 2 to n_positions={positions}")
        if "seq_length" in body
        else None
    )
    max_new = (
        _number(body, "max_new_tokens", None, int, 1, positions - 1, f"a whole number from 1 to {positions - 1}")
        if "max_new_tokens" in body
        else None
    )
    sampling = Sampling(
        do_sample=_number(body, "do_sample", True, bool, 0, 1, "true or false"),
        top_k=_number(body, "top_k", 50, int, 1, 10_000, "a whole number from 1 to 10000"),
        top_p=_number(body, "top_p", 1.0, float, 1e-6, 1.0, "a number above 0 and at most 1"),
        temperature=_number(body, "temperature", 1.0, float, 1e-3, 100.0, "a number from 0.001 to 100"),
    )
    return GenerationRequest(texts=tuple(texts), seq_length=seq_length, max_new_tokens=max_new, sampling=sampling)


class Generator(Protocol):
    """Generates continuations for a batch of at most `batch_size` token-id prompts."""

    batch_size: int

    def check(self, sampling: Sampling) -> None:
        """Raise RequestError for sampling settings this generator cannot honour."""

    def generate(self, prompts: Sequence[Sequence[int]], sequence_length: int, sampling: Sampling) -> list[list[int]]:
        """The new tokens of each prompt; `sequence_length` counts the longest prompt too."""


def _left_pad(prompts: Sequence[Sequence[int]], pad_id: int) -> tuple[list[list[int]], list[int]]:
    width = max(len(p) for p in prompts)
    pads = [width - len(p) for p in prompts]
    return [[pad_id] * n + list(p) for n, p in zip(pads, prompts, strict=True)], pads


def _until_eos(tokens: Sequence[int], eos_id: int | None) -> list[int]:
    """Rows of a batch keep running after their own end-of-sequence token; cut there."""
    out = []
    for token in tokens:
        out.append(int(token))
        if token == eos_id:
            break
    return out


class TransformersGenerator:
    """A transformers causal LM on the CPU or GPU (tests, and the reference for the Neuron path)."""

    def __init__(self, model: Any, *, pad_id: int, eos_id: int | None, batch_size: int) -> None:
        self.model = model
        self.pad_id = pad_id
        self.eos_id = eos_id
        self.batch_size = batch_size

    def check(self, sampling: Sampling) -> None:
        return None

    def generate(self, prompts: Sequence[Sequence[int]], sequence_length: int, sampling: Sampling) -> list[list[int]]:
        import torch

        rows, pads = _left_pad(prompts, self.pad_id)
        input_ids = torch.tensor(rows)
        mask = torch.tensor([[0] * n + [1] * (len(row) - n) for n, row in zip(pads, rows, strict=True)])
        options: dict[str, Any] = {"do_sample": sampling.do_sample}
        if sampling.do_sample:
            options.update(top_k=sampling.top_k, top_p=sampling.top_p, temperature=sampling.temperature)
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=input_ids,
                attention_mask=mask,
                max_new_tokens=sequence_length - input_ids.shape[1],
                min_new_tokens=1,
                pad_token_id=self.pad_id,
                eos_token_id=self.eos_id,
                **options,
            )
        return [_until_eos(row[input_ids.shape[1] :].tolist(), self.eos_id) for row in out]


class NeuronGenerator:
    """transformers-neuronx's ``<Model>ForSampling.sample``: a fixed compiled batch, left
    padding marked with ``start_ids``, sampling settings as far as its signature goes."""

    def __init__(self, model: Any, *, pad_id: int, eos_id: int | None, batch_size: int) -> None:
        self.model = model
        self.pad_id = pad_id
        self.eos_id = eos_id
        self.batch_size = batch_size
        # OPT's sampler takes top_k only; newer model classes also top_p and temperature.
        self.accepts = set(inspect.signature(model.sample).parameters)

    def check(self, sampling: Sampling) -> None:
        for name, neutral in (("top_p", 1.0), ("temperature", 1.0)):
            value = getattr(sampling, name)
            if value != neutral and name not in self.accepts:
                raise RequestError(f"{name}={value!r} is not supported by this model's Neuron sampler: leave it out")

    def generate(self, prompts: Sequence[Sequence[int]], sequence_length: int, sampling: Sampling) -> list[list[int]]:
        import torch

        n = len(prompts)
        # The graphs were compiled for exactly `batch_size` rows: fill with copies, drop them after.
        filled = list(prompts) + [prompts[-1]] * (self.batch_size - n)
        rows, pads = _left_pad(filled, self.pad_id)
        options: dict[str, Any] = {"top_k": sampling.top_k if sampling.do_sample else 1}
        if sampling.do_sample:
            options.update({k: getattr(sampling, k) for k in ("top_p", "temperature") if k in self.accepts})
        with torch.inference_mode():
            out = self.model.sample(
                torch.tensor(rows),
                sequence_length=sequence_length,
                start_ids=torch.tensor(pads, dtype=torch.int32),
                **options,
            )
        width = len(rows[0])
        return [_until_eos(row[width:].tolist(), self.eos_id) for row in out[:n]]


@dataclass
class _Prepared:
    index: int
    prompts: list[list[int]]
    request: GenerationRequest


@dataclass
class _Pass:
    """One generate call: up to `batch_size` (request, prompt index) rows of one setting."""

    rows: list[tuple[_Prepared, int]]
    sequence_length: int
    sampling: Sampling


@dataclass(frozen=True)
class PassCost:
    """How long one generate call takes: a fixed cost per call plus a cost per position.

    A call's time is not proportional to its length: each call also pays for its prompt's
    prefill and the host's round trip whatever the length. Counting that per position made a
    short call's rate, stretched to a long sequence, overstate it (a 16-position call on a busy
    host put 512 positions at 46 s, past a 45 s budget, and refused a request that took 34 s)."""

    overhead_s: float = 0.0
    per_position_s: float = 0.0

    @classmethod
    def fit(cls, short: tuple[int, float], full: tuple[int, float]) -> PassCost:
        """The line through two timed calls of different lengths, neither part below zero."""
        (n1, t1), (n2, t2) = sorted((short, full))
        per = max((t2 - t1) / (n2 - n1), 0.0) if n2 > n1 else t2 / n2
        return cls(max(t2 - per * n2, 0.0), per)

    def seconds(self, positions: int) -> float:
        return self.overhead_s + self.per_position_s * positions


class TextGenerator:
    """Tokenize, check lengths, batch, generate, decode, within DJL's predict timeout.

    `cost` is how long one generate call takes for a sequence length (:meth:`calibrate`
    measures it on the loaded model; `seconds_per_token` gives a cost with no fixed part).
    With it a request that alone would run past the timeout is refused up front, and a DJL
    batch is cut short before a call that would not finish in time (its requests are
    answered 503). The last call's time against the cost says how much slower the host is
    now than when calibrated, and scales every estimate by that (never below 1)."""

    def __init__(
        self,
        tokenizer: Any,
        generator: Generator,
        config: ServerConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        seconds_per_token: float = 0.0,
    ) -> None:
        self.tokenizer = tokenizer
        self.generator = generator
        self.config = config
        self.clock = clock
        self.cost = PassCost(0.0, seconds_per_token)
        self._slowdown = 1.0

    def _timed_pass(self, positions: int) -> float:
        pad = getattr(self.tokenizer, "eos_token_id", None) or 0
        started = self.clock()
        self.generator.generate([[pad]], positions, Sampling(do_sample=False))
        return self.clock() - started

    def calibrate(self) -> PassCost:
        """Time a short pass and a full-length one (the slowest call there is) of the compiled batch."""
        full = self.config.n_positions
        short = max(full // 8, 1)
        self.cost = PassCost.fit((short, self._timed_pass(short)), (full, self._timed_pass(full)))
        self._slowdown = 1.0
        LOG.info("a pass of %d positions takes %.2f s (%.2f s of it whatever the length); each call may generate for "
                 "%.0f s of the %d s predict timeout", full, self.cost.seconds(full), self.cost.overhead_s,
                 self.config.budget_s, self.config.predict_timeout_s)  # fmt: skip
        return self.cost

    def _estimate(self, sequence_length: int) -> float:
        return self.cost.seconds(sequence_length) * self._slowdown

    def _observe(self, sequence_length: int, seconds: float) -> None:
        expected = self.cost.seconds(sequence_length)
        if expected > 0:
            self._slowdown = max(seconds / expected, 1.0)
        else:  # not calibrated: the first call's own rate, fixed part and all (an overstatement, on the safe side)
            self.cost = PassCost(0.0, seconds / sequence_length)

    def _prepare(self, index: int, body: Any) -> _Prepared:
        request = parse_request(body, self.config)
        self.generator.check(request.sampling)
        prompts = [list(self.tokenizer(text)["input_ids"]) for text in request.texts]
        longest = max(len(p) for p in prompts)
        limit = self.config.n_positions
        if request.seq_length is not None and request.seq_length <= longest:
            raise RequestError(
                f"seq_length={request.seq_length} is invalid: it counts the prompt, and the longest prompt is "
                f"{longest} tokens; send a larger seq_length or a shorter prompt"
            )
        new = request.max_new_tokens if request.max_new_tokens is not None else self.config.max_new_tokens
        if request.seq_length is None and longest + new > limit:
            raise RequestError(
                f"the longest prompt ({longest} tokens) plus max_new_tokens={new} exceeds n_positions={limit}: "
                f"shorten the prompt or ask for at most {max(limit - longest, 0)} new tokens",
                413 if longest >= limit else 400,
            )
        self._check_time(len(prompts), request.seq_length or longest + new)
        return _Prepared(index, prompts, GenerationRequest(request.texts, request.seq_length, new, request.sampling))

    def _check_time(self, prompts: int, sequence_length: int) -> None:
        """Refuse a request that alone would keep the handler past the predict timeout."""
        per_pass = self._estimate(sequence_length)
        passes = -(-prompts // self.generator.batch_size)
        budget = self.config.budget_s
        if per_pass == 0 or passes * per_pass <= budget:
            return
        fit = int(budget // per_pass) * self.generator.batch_size
        fix = (
            f"send at most {fit} prompts of this length per request"
            if fit
            else f"ask for fewer tokens (a sequence of {sequence_length} positions takes about {per_pass:.0f} s)"
        )
        timeout = self.config.predict_timeout_s
        raise RequestError(
            f"text has {prompts} prompts of up to {sequence_length} positions: about {passes * per_pass:.0f} s of "
            f"generation, more than the {budget:.0f} s a request may take (predict_timeout={timeout} s); {fix}",
            413,
        )

    def _passes(self, accepted: Sequence[_Prepared]) -> list[_Pass]:
        """Prompts of requests that share their generation settings go together, `batch_size` at a time."""
        groups: dict[tuple[Any, ...], list[tuple[_Prepared, int]]] = {}
        for prepared in accepted:
            req = prepared.request
            key = (req.seq_length, req.max_new_tokens, req.sampling)
            groups.setdefault(key, []).extend((prepared, i) for i in range(len(prepared.prompts)))
        passes = []
        for (seq_length, max_new, sampling), rows in groups.items():
            for start in range(0, len(rows), self.generator.batch_size):
                chunk = rows[start : start + self.generator.batch_size]
                longest = max(len(p.prompts[i]) for p, i in chunk)
                passes.append(_Pass(chunk, seq_length if seq_length is not None else longest + max_new, sampling))
        return passes

    def run(self, bodies: Sequence[Any]) -> list[dict[str, Any] | RequestError]:
        """One result or refusal per request body."""
        deadline = self.clock() + self.config.budget_s
        results: list[dict[str, Any] | RequestError] = []
        accepted: list[_Prepared] = []
        for index, body in enumerate(bodies):
            try:
                accepted.append(self._prepare(index, body))
                results.append({})
            except RequestError as exc:
                results.append(exc)
            except Exception as exc:  # a fault with this request only: the rest of DJL's batch goes on
                LOG.exception("request %d of the batch could not be prepared", index)
                results.append(RequestError(f"the request could not be prepared: {type(exc).__name__}: {exc}", 500))
        generated: dict[tuple[int, int], list[int]] = {}
        passes = self._passes(accepted)
        for n, one in enumerate(passes):
            if self.clock() + self._estimate(one.sequence_length) > deadline:
                late = {p.index for later in passes[n:] for p, _ in later.rows}
                LOG.warning("%d requests of the batch left out: they would finish past the predict timeout", len(late))
                for index in late:
                    results[index] = RequestError(
                        f"this request came in a batch that would run past the model server's predict timeout "
                        f"({self.config.predict_timeout_s} s) and was left out: send it again (fewer prompts or "
                        "fewer new tokens per request finish sooner)",
                        503,
                    )
                break
            started = self.clock()
            prompts = [p.prompts[i] for p, i in one.rows]
            out = self.generator.generate(prompts, one.sequence_length, one.sampling)
            self._observe(one.sequence_length, self.clock() - started)
            for (p, i), tokens in zip(one.rows, out, strict=True):
                generated[(p.index, i)] = tokens
        for prepared in accepted:
            if not isinstance(results[prepared.index], RequestError):
                results[prepared.index] = self._response(prepared, generated)
        return results

    def _response(self, prepared: _Prepared, generated: Mapping[tuple[int, int], list[int]]) -> dict[str, Any]:
        eos = getattr(self.tokenizer, "eos_token_id", None)
        outputs, details = [], []
        for i, prompt in enumerate(prepared.prompts):
            new = generated[(prepared.index, i)]
            outputs.append(self.tokenizer.decode(prompt + new, skip_special_tokens=True))
            details.append(
                {
                    "generated_text": self.tokenizer.decode(new, skip_special_tokens=True),
                    "generated_tokens": len(new),
                    "finish_reason": "eos" if new and new[-1] == eos else "length",
                }
            )
        return {"outputs": outputs, "details": details}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 23):
            digest.update(chunk)
    return digest.hexdigest()


def verify_bundle(model_dir: Path) -> None:
    """Check every file the bundle's own manifest lists: refuse to serve an altered bundle."""
    manifest_path = model_dir / INNER_MANIFEST
    if not manifest_path.is_file():
        return
    for name, entry in json.loads(manifest_path.read_text())["files"].items():
        if not (model_dir / name).is_file():
            raise SettingsError(f"{model_dir / name} is listed in the bundle's manifest but missing: redeploy it")
        if _sha256(model_dir / name) != entry["sha256"]:
            raise SettingsError(f"{model_dir / name} does not match the bundle's manifest: redeploy the bundle")


def model_identity(config: ServerConfig) -> dict[str, Any]:
    """What determines the weights: for a model folder, the sha256 of each of its files (from
    the bundle's own manifest when it lists them, which :func:`verify_bundle` checked, else
    read here); for a hub id, the id and the revision."""
    source = config.model_source
    folder = Path(source)
    if not folder.is_dir():
        return {"hub": config.model_id, "revision": config.revision or "main"}
    model_dir = Path(config.model_dir)
    manifest_path = model_dir / INNER_MANIFEST
    if manifest_path.is_file() and folder.resolve().is_relative_to(model_dir.resolve()):
        prefix = folder.resolve().relative_to(model_dir.resolve()).as_posix()
        prefix = "" if prefix == "." else prefix + "/"
        listed = json.loads(manifest_path.read_text())["files"]
        files = {name[len(prefix) :]: entry["sha256"] for name, entry in listed.items() if name.startswith(prefix)}
        if "config.json" in files:
            return {"files": dict(sorted(files.items()))}
    files = {
        path.relative_to(folder).as_posix(): _sha256(path)
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != INNER_MANIFEST
    }
    return {"files": files}


def neuronx_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("transformers-neuronx")
    except metadata.PackageNotFoundError:
        return "unknown"


def cache_keys(config: ServerConfig, *, identity: Mapping[str, Any], neuronx: str) -> tuple[str, str]:
    """(split checkpoint, compiled graphs) folder names: a readable prefix and a digest of
    everything that determines the entry, so that other weights, another dtype or other
    compile settings never reuse an entry made for different ones."""

    def digest(parts: Mapping[str, Any]) -> str:
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]

    split_parts = {"model": identity, "dtype": config.dtype, "transformers_neuronx": neuronx}
    graph_parts = {
        **split_parts,
        "tensor_parallel_degree": config.tensor_parallel_degree,
        "n_positions": config.n_positions,
        "batch_size": config.batch_size,
    }
    split = f"{config.dtype}-{digest(split_parts)}"
    graphs = (
        f"tp{config.tensor_parallel_degree}-n{config.n_positions}-b{config.batch_size}-{config.dtype}-"
        f"{digest(graph_parts)}"
    )
    return split, graphs


def is_complete(target: Path) -> bool:
    return (target / COMPLETE).is_file()


def build_once(target: Path, build: Callable[[Path], None], *, prune: bool = False) -> Path:
    """`target`, built by `build` into ``<target>.partial`` unless complete already: the
    folder is renamed when `build` returns and only then marked complete, so an interrupted
    build leaves a ``.partial`` folder or an unmarked one, both rebuilt the next time.
    With `prune`, a new entry removes the other entries of its folder (a split OPT-13B is
    26 GB: a few redeployed bundles would fill the volume)."""
    if is_complete(target):
        return target
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    build(partial)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(partial, target)
    with open(target / COMPLETE, "w") as f:
        f.write("complete\n")
        f.flush()
        os.fsync(f.fileno())
    if prune:
        for other in target.parent.iterdir():
            if other != target and other.is_dir():
                shutil.rmtree(other, ignore_errors=True)
    return target


def dtype_argument(transformers_version: str) -> str:
    """``from_pretrained``'s precision keyword: ``dtype`` from transformers 4.56, before it
    ``torch_dtype`` (the DJL neuronx images ship 4.3x-4.4x)."""
    major, minor = (int("".join(c for c in part if c.isdigit()) or 0) for part in transformers_version.split(".")[:2])
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


#: Downloads files of a hub repository at a commit: (repo id, commit, file names) -> their folder.
Downloader = Callable[[str, str, Sequence[str]], str]


def hub_snapshot(repo_id: str, revision: str, names: Sequence[str]) -> str:
    """The files `names` of `repo_id` at commit `revision`, downloaded by huggingface_hub into its
    cache (the image's HF_HOME, which run-container.sh mounts from the volume): a file already
    there is not downloaded again."""
    from huggingface_hub import snapshot_download

    return str(snapshot_download(repo_id=repo_id, revision=revision, allow_patterns=list(names)))


def hub_file_list(config: ServerConfig) -> dict[str, dict[str, Any]]:
    """The files of the hub model the bundle lists, with their sha256 and size; refuses a model
    whose revision is no commit or whose files the bundle does not list."""
    where = f"{config.model_id} (option.revision={config.revision!r})"
    if not COMMIT.match(config.revision or ""):
        raise SettingsError(
            f"serving.properties option.revision={config.revision!r} is invalid: allowed is the 40-character "
            f"commit of {config.model_id} whose files {HUB_FILES} lists (a branch or tag can move)"
        )
    path = Path(config.model_dir) / HUB_FILES
    if not path.is_file():
        raise SettingsError(f"{path} is missing: {where} is served only with the sha256 of its files; rebuild the "
                            "bundle with python -m artifacts_builder inf2")  # fmt: skip
    record = json.loads(path.read_text())
    if (record.get("repo"), record.get("revision")) != (config.model_id, config.revision):
        raise SettingsError(f"{path} lists {record.get('repo')}@{record.get('revision')}, not {where}: rebuild the "
                            "bundle")  # fmt: skip
    return dict(record["files"])


def verify_hub_files(folder: Path, expected: Mapping[str, Mapping[str, Any]], *, where: str) -> None:
    """Each file of `expected` in `folder` has its size and sha256; a file that does not is
    deleted (with the cache's object it links to), so that the next load downloads it again."""
    for name, entry in expected.items():
        path = folder / name
        if not path.is_file():
            raise SettingsError(f"{name} of {where} was not downloaded; the next load tries again")
        size = path.stat().st_size
        digest = _sha256(path) if size == entry["size"] else None
        if digest == entry["sha256"]:
            continue
        stored = path.resolve()
        path.unlink()
        stored.unlink(missing_ok=True)
        found = f"sha256 {digest}" if digest is not None else f"{size} bytes"
        raise SettingsError(
            f"{name} of {where} has {found}, where the bundle lists sha256 {entry['sha256']} ({entry['size']} "
            "bytes): refused and deleted, so that the next load downloads it again"
        )


def model_files(config: ServerConfig, *, weights: bool, download: Downloader = hub_snapshot) -> str:
    """A folder that holds the model's files: the bundle's own model folder (verify_bundle checked
    it), or for a hub model the files the bundle lists (`weights`: all of them, else the config's
    and the tokenizer's), downloaded at its commit and each checked against its sha256."""
    source = config.model_source
    if Path(source).is_dir():
        return source
    assert config.revision is not None  # hub_file_list refuses a model without one
    listed = hub_file_list(config)
    names = sorted(n for n in listed if weights or not n.endswith((".safetensors", ".bin")))
    folder = Path(download(config.model_id, config.revision, names))
    verify_hub_files(folder, {n: listed[n] for n in names}, where=f"{config.model_id}@{config.revision}")
    return str(folder)


def load_for_split(config: ServerConfig, source: str | None = None) -> Any:
    """The transformers model, loaded straight in the serving precision (OPT-13B: ~26 GB of
    host memory, not ~52 GB in fp32). As the seed left them: the blocks' attention and MLP
    and the head in that precision, the rest (layer norms, position embeddings) in fp32;
    transformers-neuronx casts the host-side embedding output to the serving precision."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    dtype = getattr(torch, TORCH_DTYPES[config.dtype])
    options: dict[str, Any] = {"low_cpu_mem_usage": True, dtype_argument(transformers.__version__): dtype}
    model = AutoModelForCausalLM.from_pretrained(source or model_files(config, weights=True), **options)
    serving = {id(p) for p in model.lm_head.parameters()}
    for block in model.model.decoder.layers:
        for module in (block.self_attn, block.fc1, block.fc2):
            serving.update(id(p) for p in module.parameters())
    for param in model.parameters():
        if id(param) not in serving:
            param.data = param.data.to(torch.float32)
    return model


def load_neuron(config: ServerConfig) -> TextGenerator:
    """Load onto the NeuronCores (the Inferentia2 container only)."""
    from transformers import AutoTokenizer
    from transformers_neuronx.module import save_pretrained_split
    from transformers_neuronx.opt.model import OPTForSampling

    cache = Path(config.compiled_graph_path or os.environ.get("NEURON_CACHE_DIR", "/tmp/neuron-cache"))  # noqa: S108
    split_key, graph_key = cache_keys(config, identity=model_identity(config), neuronx=neuronx_version())
    # The split layout is written once to the instance volume: a restart reuses it instead
    # of converting 26 GB again.
    checkpoint = build_once(
        cache / "split" / split_key,
        lambda folder: save_pretrained_split(load_for_split(config), str(folder)),
        prune=True,
    )
    model = OPTForSampling.from_pretrained(
        str(checkpoint),
        batch_size=config.batch_size,
        amp=AMP[config.dtype],
        tp_degree=config.tensor_parallel_degree,
        n_positions=config.n_positions,
    )
    graphs = cache / "graphs" / graph_key
    # Compiling OPT-13B takes tens of minutes; the graphs saved on the volume load in seconds.
    if hasattr(model, "load") and is_complete(graphs):
        model.load(str(graphs))
    model.to_neuron()
    if hasattr(model, "save") and not is_complete(graphs):
        build_once(graphs, lambda folder: model.save(str(folder)), prune=True)
    tokenizer = AutoTokenizer.from_pretrained(model_files(config, weights=False))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    generator = NeuronGenerator(model, pad_id=pad, eos_id=tokenizer.eos_token_id, batch_size=config.batch_size)
    service = TextGenerator(tokenizer, generator, config)
    # Measured once per copy: the bound on each call's work follows this model and instance.
    service.calibrate()
    return service


def load_service(
    props: Mapping[str, str], loader: Callable[[ServerConfig], TextGenerator] | None = None
) -> TextGenerator:
    config = ServerConfig.from_properties(props)
    verify_bundle(Path(config.model_dir))
    if not Path(config.model_source).is_dir():
        hub_file_list(config)  # a hub model without a commit or without its files' sha256: refused now
    LOG.info("loading %s (tp=%d, n_positions=%d, batch=%d)", config.model_id, config.tensor_parallel_degree,
             config.n_positions, config.batch_size)  # fmt: skip
    return (loader or load_neuron)(config)


def _body(item: Any) -> Any:
    try:
        return item.get_as_json()
    except (ValueError, AttributeError) as exc:
        return RequestError(f"the body is not valid UTF-8 JSON ({exc})")


def _error_body(error: RequestError) -> dict[str, Any]:
    """The body of DJL's own ``Output.error``: code, reason phrase, message."""
    return {"code": error.code, "message": HTTPStatus(error.code).phrase, "error": str(error)}


def respond(service: TextGenerator, inputs: Any, output_type: Any) -> Any:
    """The DJL response: one request alone, or one slot per request when DJL batched them.

    A request alone gets its own status. DJL 0.29.0's static batching (djl-serving v0.29.0,
    engines/python/.../PyPredictor.java batchPredict) gives every request of a batch the
    batch Output's code, message and properties (its ``batch_<i>_*`` properties are read only
    in rolling-batch mode): so a refused request of a batch is answered HTTP 200 with the
    error body of a lone refusal, ``{"code", "message", "error"}``, while its batch-mates
    get their results."""
    items = inputs.get_batches()
    bodies = [_body(item) for item in items]
    valid = [b for b in bodies if not isinstance(b, RequestError)]
    ran = iter(service.run(valid))
    results = [b if isinstance(b, RequestError) else next(ran) for b in bodies]
    if not inputs.is_batch():
        result = results[0]
        if isinstance(result, RequestError):
            return output_type().error(str(result), result.code, message=HTTPStatus(result.code).phrase)
        return output_type().add_property("content-type", "application/json").add_as_json(result)
    # Every request of the batch gets these properties as its headers: all the bodies are JSON.
    outputs = output_type().add_property("content-type", "application/json")
    for i, result in enumerate(results):
        body = _error_body(result) if isinstance(result, RequestError) else result
        outputs.add_as_json(body, key="data", batch_index=i)
    return outputs


_service: TextGenerator | None = None


def handle(inputs: Any) -> Any:
    """DJL's entry point: loads on the first call, answers None to the empty warm-up call."""
    from djl_python import Output

    global _service
    if _service is None:
        _service = load_service(inputs.get_properties())
    if inputs.is_empty():
        return None
    return respond(_service, inputs, Output)
