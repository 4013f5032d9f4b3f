"""GPT-J text generation for the Hugging Face inference toolkit (SageMaker).

The toolkit imports this module from ``/opt/ml/model/code`` and calls ``model_fn`` once,
then ``input_fn -> predict_fn -> output_fn`` per request. An exception raised by any of the
last three becomes a 400 response carrying ``str(exc)``: that is the toolkit's error
mechanism, so every bad request raises :class:`RequestError` with a message that names the
value and the fix. The toolkit answers a fault of the server with 400 too, so such faults
never reach the endpoint's 5xx alarm: they show in the endpoint's logs.

Request (as in the seed)::

    {"inputs": "prompt", "parameters": {"max_new_tokens": 32, "num_beams": 5, "stop": ["###"], ...}}

Response: ``[{"generated_text": "..."}]``.

This file runs inside the image, where the project's ``artifacts_builder`` is not installed,
so it carries its own small sha256 check of the payload's ``payload-manifest.json`` (standard
library only) instead of importing the builder's. The manifest is not called
``manifest.json``: the image's model server would take that for its own manifest and refuse to
start (``llm_contracts/gptj.py`` says which names it takes).

A payload that cannot be loaded (a file that does not match its sha256, a missing file, a
model that does not build) stops the model server: left running, Multi Model Server would
keep the worker READY, answer ``/ping`` with 200 and load (and hash) the whole payload again
for every request. Stopped, nothing answers on the port, SageMaker's health check fails, and
the deployment fails or rolls back. ``/ping`` cannot be held at unhealthy while the model
loads: MMS 1.1.11 answers it with HTTP 200 as soon as its front end listens, before any
worker has loaded the model (docs/IMAGES.md, "GPT-J: the payload and its requests", says what
that means).

Settings (environment of the SageMaker model):

* ``GPTJ_DTYPE``: ``auto`` (fp16 on a GPU, float32 on a CPU, where fp16 kernels are slow), or
  ``float16`` / ``bfloat16`` / ``float32``.
* ``GPTJ_MAX_NEW_TOKENS``: the most tokens one request may ask for (default 512), which keeps a
  request inside the model server's 60 s timeout.
* ``GPTJ_MAX_BEAMS``: the most beams (default 8): beams multiply the KV cache on the GPU.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import mmap
import os
import signal
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

logger = logging.getLogger(__name__)

#: llm_contracts.gptj.PAYLOAD_MANIFEST (this file cannot import it inside the image).
MANIFEST = "payload-manifest.json"
#: The main class of Multi Model Server's front end, on its command line.
MMS_FRONT_END = b"com.amazonaws.ml.mms.ModelServer"
WEIGHT_SUFFIXES = {"safetensors": ".safetensors", "torch-save": ".pt"}
_CHUNK = 1024 * 1024
JSON = "application/json"
DTYPES = ("auto", "float16", "bfloat16", "float32")
# safetensors dtype codes of the tensors a payload may hold.
_ST_DTYPES = {"F16": "float16", "BF16": "bfloat16", "F32": "float32", "I64": "int64", "BOOL": "bool", "U8": "uint8"}


class IntegrityError(RuntimeError):
    """The payload on disk is not the one the builder wrote."""


class RequestError(ValueError):
    """A request that cannot be served as sent; the toolkit answers it with a 400."""


# --- integrity -------------------------------------------------------------------------
#
# Every file is checked against the manifest before anything is built from it. The weight
# shards are hashed several at once (reads and hashlib both release the GIL); each verified
# shard is then mapped, and its pages, which the hash has just brought into the page cache,
# back the model's tensors directly: the weights are read from disk once, for hashing and
# loading together.


def _listing(root: Path) -> tuple[dict[str, Any], dict[str, tuple[Path, dict[str, Any]]]]:
    """The manifest and, for each file it lists, its path and entry; sizes checked (cheap)."""
    try:
        manifest = json.loads((root / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        raise IntegrityError(
            f"{root / MANIFEST} cannot be read ({exc}): the payload was not built by "
            "`python -m artifacts_builder gptj`; rebuild and redeploy it"
        ) from None
    files = manifest.get("files")
    fmt = manifest.get("format")
    weights = manifest.get("weights")
    if (
        not isinstance(files, dict)
        or fmt not in WEIGHT_SUFFIXES
        or not isinstance(weights, list)
        or not weights
        or not all(isinstance(w, str) and w in files and w.endswith(WEIGHT_SUFFIXES[fmt]) for w in weights)
    ):
        raise IntegrityError(
            f"{root / MANIFEST} lists no weights of a known format (format={fmt!r}, weights={weights!r}; expected "
            f"one of {sorted(WEIGHT_SUFFIXES)}): rebuild the payload with `python -m artifacts_builder gptj`"
        )
    listed: dict[str, tuple[Path, dict[str, Any]]] = {}
    for name, entry in sorted(files.items()):
        path = (root / name).resolve()
        if root not in path.parents:
            raise IntegrityError(f"{root / MANIFEST} names {name!r}, outside the model folder: refusing to load")
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise IntegrityError(f"{path} is listed in the manifest but missing: the payload is incomplete") from None
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("size"), int)
            or not isinstance(entry.get("sha256"), str)
        ):
            raise IntegrityError(
                f"{root / MANIFEST} has no size and sha256 for {name!r}: rebuild the payload with "
                "`python -m artifacts_builder gptj`"
            )
        if size != entry["size"]:
            raise IntegrityError(
                f"{path} is {size} bytes, the manifest says {entry['size']}: the file was altered or truncated; "
                "refusing to load it (rebuild and redeploy the payload)"
            )
        listed[name] = (path, entry)
    return dict(manifest), listed


def _hash_open(path: Path) -> tuple[str, BinaryIO, os.stat_result]:
    """sha256 of `path`, read through a handle that stays open (the caller closes it): what is
    later mapped or unpickled is read through this very handle, not by the path again."""
    f = open(path, "rb", buffering=0)  # noqa: SIM115 (handed to the caller, open)
    try:
        before = os.fstat(f.fileno())
        # Small reads: each chunk is hashed while it is still in the CPU cache (16 MB chunks were
        # 1.5x slower here, hashing through a memory map slower still: docs/BENCHMARKS.md).
        digest = hashlib.sha256()
        buffer = bytearray(_CHUNK)
        view = memoryview(buffer)
        while n := f.readinto(buffer):
            digest.update(view[:n])
    except BaseException:
        f.close()
        raise
    return digest.hexdigest(), f, before


def _map(f: BinaryIO) -> mmap.mmap | None:
    """A private, writable map of the verified file (None for an empty one): its pages are the
    ones the hash has just read into the page cache, so tensors built on it cost no copy.
    (A private map still shows later writes to the file in pages it has not copied yet; only
    processes of the container can write to /opt/ml/model.)"""
    if os.fstat(f.fileno()).st_size == 0:
        return None
    return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)


def _mismatch(path: Path, actual: str, expected: str) -> IntegrityError:
    return IntegrityError(
        f"{path} has sha256 {actual}, the manifest says {expected}: the file was altered; "
        "refusing to load it (rebuild and redeploy the payload)"
    )


class _Verifier:
    """Hashes the listed files on a thread pool; `result()` returns the open, verified handles
    of the `keep` files once every sha256 matched (the caller closes them), or raises
    IntegrityError naming the first file (by name) that did not match."""

    def __init__(self, listed: dict[str, tuple[Path, dict[str, Any]]], keep: set[str]) -> None:
        self._listed, self._keep = listed, keep
        # Two threads per core: each waits on the disk part of the time, and several files read
        # at once keep more requests in flight than one sequential read (docs/BENCHMARKS.md).
        workers = max(1, min(len(listed), 2 * (os.cpu_count() or 1)))
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="verify")
        # Largest first, so that no big file starts last on an otherwise idle pool.
        order = sorted(listed, key=lambda name: -listed[name][1]["size"])
        self._futures = {name: self._pool.submit(_hash_open, listed[name][0]) for name in order}

    def result(self) -> dict[str, BinaryIO]:
        kept: dict[str, BinaryIO] = {}
        error: BaseException | None = None
        try:
            self._pool.shutdown(wait=True)
            for name in sorted(self._futures):
                path, entry = self._listed[name]
                try:
                    actual, f, before = self._futures[name].result()
                except BaseException as exc:  # re-raised below, once every handle is closed
                    error = error or exc
                    continue
                after = os.fstat(f.fileno())
                if actual != entry["sha256"]:
                    error = error or _mismatch(path, actual, entry["sha256"])
                elif (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
                    error = error or IntegrityError(f"{path} changed while it was verified: refusing to load it")
                if name in self._keep:
                    kept[name] = f
                else:
                    f.close()
        finally:
            if error is not None:
                for f in kept.values():
                    f.close()
        if error is not None:
            raise error
        return kept


def verify_payload(model_dir: str | Path) -> dict[str, Any]:
    """Check every file the manifest lists (size, then sha256) and return the manifest.
    Raises IntegrityError naming the first file that differs."""
    manifest, listed = _listing(Path(model_dir).resolve())
    _Verifier(listed, keep=set()).result()
    return manifest


# --- loading ---------------------------------------------------------------------------------


def _release(version: str) -> tuple[int, ...]:
    parts = []
    for part in version.split("+")[0].split(".")[:3]:
        digits = "".join(c for c in part if c.isdigit()) or "0"
        parts.append(int(digits))
    return tuple(parts)


def _dtype(torch: Any, on_gpu: bool) -> Any:
    name = os.environ.get("GPTJ_DTYPE", "auto")
    if name not in DTYPES:
        raise ValueError(f"GPTJ_DTYPE={name!r} is invalid: use one of {', '.join(DTYPES)}")
    if name == "auto":
        return torch.float16 if on_gpu else torch.float32
    return getattr(torch, name)


def _env_int(name: str, default: int, lo: int, hi: int) -> int:
    raw = os.environ.get(name, str(default))
    try:
        value = int(raw)
    except ValueError:
        value = lo - 1
    if not lo <= value <= hi:
        raise ValueError(f"{name}={raw!r} is invalid: use a whole number from {lo} to {hi}")
    return value


def _tensors(torch: Any, name: str, mapped: mmap.mmap | None) -> dict[str, Any]:
    """The tensors of one verified safetensors file, as views of its map (no copy)."""
    if mapped is None or len(mapped) < 8:
        raise IntegrityError(f"{name} is not a safetensors file (shorter than its header)")
    length = int.from_bytes(mapped[:8], "little")
    header = json.loads(mapped[8 : 8 + length])
    header.pop("__metadata__", None)
    # (frombuffer refuses an empty view: a shard may hold only zero-size tensors, or none.)
    data = (
        torch.frombuffer(mapped, dtype=torch.uint8, offset=8 + length)
        if len(mapped) > 8 + length
        else torch.empty(0, dtype=torch.uint8)
    )
    tensors = {}
    for key, info in header.items():
        start, end = info["data_offsets"]
        dtype = getattr(torch, _ST_DTYPES[info["dtype"]])
        tensors[key] = data[start:end].view(dtype).reshape(info["shape"])
    return tensors


@contextlib.contextmanager
def _parameters_on_meta(torch: Any) -> Iterator[None]:
    """Build a module with its parameters on the meta device (no memory, no random init) and
    its buffers real: the verified weights are assigned afterwards, while buffers such as
    GPT-J's rotary tables are computed at construction and are not in the checkpoint."""
    original = torch.nn.Module.register_parameter

    def register(module: Any, name: str, param: Any) -> None:
        original(module, name, param)
        if param is not None:
            kept = module._parameters[name]
            module._parameters[name] = type(kept)(kept.to("meta"), requires_grad=kept.requires_grad)

    torch.nn.Module.register_parameter = register
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = original


def _skeleton(model_dir: Path, dtype: Any) -> Any:
    """The model from its (verified) config.json, parameters on the meta device: built while
    the weights are still being hashed."""
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    key = "dtype" if _release(transformers.__version__) >= (4, 56, 0) else "torch_dtype"
    config = AutoConfig.from_pretrained(model_dir, local_files_only=True)
    with _parameters_on_meta(torch):
        model = AutoModelForCausalLM.from_config(config, **{key: dtype})  # type: ignore[no-untyped-call]
    if (model_dir / "generation_config.json").is_file():
        model.generation_config = GenerationConfig.from_pretrained(model_dir, local_files_only=True)
    return model


def _assign(model: Any, weights: list[str], maps: dict[str, Any]) -> Any:
    """The verified weights, as views of their maps, in place of the meta parameters."""
    import torch

    state: dict[str, Any] = {}
    for name in weights:
        state.update(_tensors(torch, name, maps[name]))
    # strict: a checkpoint that lacks a weight must fail here, not generate from meta tensors.
    model.load_state_dict(state, strict=True, assign=True)
    return model


def _gpu_id(context: Any) -> int:
    properties = getattr(context, "system_properties", None) or {}
    gpu = properties.get("gpu_id")
    return int(gpu) if gpu is not None else 0


def _model_server_pid() -> int | None:
    """The pid of Multi Model Server's front end among this worker's ancestors (the worker's
    parent is MMS's Python server process, whose parent is the Java front end), or None when
    this code does not run under MMS (tests that call the handler directly)."""
    pid = os.getppid()
    for _ in range(8):
        if pid <= 1:
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        if MMS_FRONT_END in cmdline:
            return pid
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state: the parent's pid
    return None


def _stop_serving(error: BaseException) -> None:
    """A payload that cannot be loaded must not be served: stop the model server (see the
    module's docstring for why)."""
    pid = _model_server_pid()
    stopping = f"; stopping the model server (pid {pid}) so that the endpoint's health check fails" if pid else ""
    # On stderr: MMS logs its workers' stdout at INFO and their stderr at WARN.
    print(f"ERROR: GPT-J cannot be loaded, so this container must not serve: {error}{stopping}", file=sys.stderr)
    sys.stderr.flush()
    if pid is not None:
        os.kill(pid, signal.SIGTERM)


def model_fn(model_dir: str, context: Any = None) -> dict[str, Any]:
    """Load the payload (`_load`); on any failure stop the model server and re-raise."""
    try:
        return _load(model_dir, context)
    except Exception as exc:
        _stop_serving(exc)
        raise


def _load(model_dir: str, context: Any = None) -> dict[str, Any]:
    """Verify, then load the weights (fp16 onto this worker's GPU where there is one) and the
    tokenizer, and warm up with one token so the first request does not pay for it.

    `context` is the model server's: its `gpu_id` spreads the workers of a multi-GPU instance
    over the GPUs (the stack allows one worker per GPU; each holds its own copy).

    The small files are verified first; then, while the weight files are hashed in the
    background, the tokenizer and the model (parameters on the meta device) are built from
    the verified small files.
    Safetensors weights are built straight from the verified maps; a pickle is only unpickled
    after its own sha256 matched."""
    started = time.perf_counter()
    root = Path(model_dir).resolve()
    manifest, listed = _listing(root)
    weights = list(manifest["weights"])
    small = {name: listed[name] for name in listed if name not in weights}
    _Verifier(small, keep=set()).result()
    verifier = _Verifier({name: listed[name] for name in weights}, keep=set(weights))

    import torch
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(root, local_files_only=True)
        on_gpu = torch.cuda.is_available()
        device = torch.device("cuda", _gpu_id(context)) if on_gpu else torch.device("cpu")
        if on_gpu:
            # Work that names no device (the CUDA context, generate's temporaries) lands on this
            # worker's GPU too, not on GPU 0 beside another worker's weights.
            torch.cuda.set_device(device)
        dtype = _dtype(torch, on_gpu)
        skeleton = _skeleton(root, dtype) if manifest["format"] == "safetensors" else None
    finally:
        handles = verifier.result()  # raises IntegrityError on a mismatch
    verified = time.perf_counter()

    try:
        if manifest["format"] == "torch-save":
            # Safe only because the sha256 of this exact file matched the manifest just above;
            # read through the handle that was hashed (/proc/self/fd keeps mmap working).
            source = f"/proc/self/fd/{handles[weights[0]].fileno()}"
            model = torch.load(source, map_location=device, weights_only=False, mmap=not on_gpu)
        else:
            model = _assign(skeleton, weights, {name: _map(handles[name]) for name in weights})
    finally:
        for handle in handles.values():
            handle.close()  # a map keeps its own reference to the file
    model = model.to(device=device, dtype=dtype).eval()
    loaded = time.perf_counter()
    with torch.inference_mode():
        warm = tokenizer("Hello", return_tensors="pt").to(device)
        model.generate(**warm, max_new_tokens=1, do_sample=False, pad_token_id=tokenizer.eos_token_id)
    timings = {
        "verify_s": verified - started,
        "load_s": loaded - verified,
        "first_token_s": time.perf_counter() - loaded,
    }
    logger.info("GPT-J ready on %s (%s, %s): %s", device, manifest["format"], dtype, timings)
    return {
        "timings": timings,
        "model": model,
        "tokenizer": tokenizer,
        "device": device,
        "max_positions": int(model.config.n_positions),
        "vocab_size": int(model.config.vocab_size),
        "max_new_tokens": _env_int("GPTJ_MAX_NEW_TOKENS", 512, 1, 2048),
        "max_beams": _env_int("GPTJ_MAX_BEAMS", 8, 1, 32),
    }


# --- requests ------------------------------------------------------------------------------------


def input_fn(input_data: str | bytes, content_type: str) -> dict[str, Any]:
    """Decode the JSON body; everything else about it is checked in `predict_fn`, which
    knows the model's limits."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media != JSON:
        raise RequestError(f"Content-Type {content_type!r} is not supported: send {JSON}")
    if isinstance(input_data, bytes | bytearray):
        try:
            input_data = input_data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RequestError(f"the body is not UTF-8 ({exc}): send UTF-8 encoded JSON") from None
    try:
        body = json.loads(input_data)
    except ValueError as exc:
        raise RequestError(f'the body is not valid JSON ({exc}): send {{"inputs": "..."}}') from None
    if not isinstance(body, dict):
        raise RequestError(f'the body is a JSON {type(body).__name__}, expected an object such as {{"inputs": "..."}}')
    return body


def _int(params: dict[str, Any], name: str, lo: int, hi: int) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise RequestError(f"parameters.{name}={value!r} is invalid: use a whole number from {lo} to {hi}")
    return value


def _float(params: dict[str, Any], name: str, lo: float, hi: float, *, lo_open: bool = False) -> float | None:
    value = params.get(name)
    if value is None:
        return None
    ok = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
    if not ok or value > hi or value < lo or (lo_open and value == lo):
        low = f"greater than {lo:g} and" if lo_open else f"from {lo:g} to"
        raise RequestError(f"parameters.{name}={value!r} is invalid: use a number {low} at most {hi:g}")
    return float(value)


def _bool(params: dict[str, Any], name: str) -> bool | None:
    value = params.get(name)
    if value is not None and not isinstance(value, bool):
        raise RequestError(f"parameters.{name}={value!r} is invalid: use true or false")
    return value


PARAMETERS = (
    "max_length",
    "max_new_tokens",
    "min_length",
    "num_beams",
    "temperature",
    "top_k",
    "top_p",
    "do_sample",
    "eos_token_id",
    "stop",
    "return_full_text",
)
SAMPLING = ("temperature", "top_k", "top_p")


# Complex on purpose: one check per request parameter, in the order docs/IMAGES.md documents them.
def parse_request(body: dict[str, Any], model: dict[str, Any], prompt_tokens: Any) -> dict[str, Any]:  # noqa: C901
    """Check `body["parameters"]` against the model's limits and turn it into `generate`
    arguments plus the two output options (`stop`, `return_full_text`)."""
    params = body.get("parameters", {})
    if not isinstance(params, dict):
        raise RequestError(f'parameters={params!r} is invalid: use a JSON object such as {{"max_new_tokens": 32}}')
    unknown = sorted(set(params) - set(PARAMETERS))
    if unknown:
        raise RequestError(f"parameters {unknown} are not supported: use only {', '.join(PARAMETERS)}")
    n_prompt = int(prompt_tokens)
    positions = model["max_positions"]
    cap = model["max_new_tokens"]
    out: dict[str, Any] = {}

    max_length = _int(params, "max_length", 1, positions)
    max_new = _int(params, "max_new_tokens", 1, cap)
    if max_length is not None and max_new is not None:
        raise RequestError("parameters max_length and max_new_tokens were both given: give only one")
    if max_length is not None:
        if max_length <= n_prompt:
            raise RequestError(
                f"parameters.max_length={max_length} leaves no room after the prompt's {n_prompt} tokens: "
                f"raise it above {n_prompt}, or use max_new_tokens"
            )
        if max_length - n_prompt > cap:
            raise RequestError(
                f"parameters.max_length={max_length} asks for {max_length - n_prompt} new tokens, more than "
                f"the {cap} allowed: lower it to at most {n_prompt + cap}"
            )
        max_new = max_length - n_prompt
    if max_new is None:
        max_new = min(50, cap)
    if n_prompt + max_new > positions:
        raise RequestError(
            f"the prompt's {n_prompt} tokens plus {max_new} new tokens exceed the model's {positions} "
            f"positions: shorten the prompt or ask for at most {max(positions - n_prompt, 0)} new tokens"
        )
    out["max_new_tokens"] = max_new

    min_length = _int(params, "min_length", 0, positions)
    if min_length is not None:
        if min_length > n_prompt + max_new:
            raise RequestError(
                f"parameters.min_length={min_length} is more than the prompt ({n_prompt} tokens) plus the "
                f"{max_new} new tokens allowed: lower it or raise max_new_tokens"
            )
        out["min_length"] = min_length

    out["num_beams"] = _int(params, "num_beams", 1, model["max_beams"]) or 1
    do_sample = _bool(params, "do_sample")
    sampling = {name: params[name] for name in SAMPLING if params.get(name) is not None}
    if do_sample is False and sampling:
        raise RequestError(
            f"parameters {sorted(sampling)} only apply when sampling, and do_sample is false: "
            "drop them, or set do_sample to true"
        )
    # As GPT-J's text-generation defaults did in the seed: asking for a temperature means sampling.
    out["do_sample"] = bool(do_sample) or bool(sampling)
    temperature = _float(params, "temperature", 0.0, 100.0, lo_open=True)
    if temperature is not None:
        out["temperature"] = temperature
    top_k = _int(params, "top_k", 0, model["vocab_size"])
    if top_k is not None:
        out["top_k"] = top_k
    top_p = _float(params, "top_p", 0.0, 1.0, lo_open=True)
    if top_p is not None:
        out["top_p"] = top_p

    eos = params.get("eos_token_id")
    if eos is not None:
        ids = eos if isinstance(eos, list) else [eos]
        vocab = model["vocab_size"]
        bad = [i for i in ids if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < vocab]
        if not ids or bad or len(ids) > 16:
            raise RequestError(
                f"parameters.eos_token_id={eos!r} is invalid: use a token id from 0 to {vocab - 1}, or a list "
                "of 1 to 16 of them"
            )
        out["eos_token_id"] = ids

    stop = params.get("stop")
    if stop is not None:
        stops = [stop] if isinstance(stop, str) else stop
        ok = isinstance(stops, list) and 1 <= len(stops) <= 8
        if not ok or not all(isinstance(s, str) and 1 <= len(s) <= 64 for s in stops):
            raise RequestError(
                f'parameters.stop={stop!r} is invalid: use a string such as "###", or a list of 1 to 8 '
                "strings of 1 to 64 characters"
            )
        out["stop"] = stops
    full_text = _bool(params, "return_full_text")
    out["return_full_text"] = True if full_text is None else full_text
    return out


def predict_fn(data: dict[str, Any], model: dict[str, Any]) -> list[dict[str, str]]:
    if "stream" in data:
        # Multi Model Server builds whole responses (sagemaker-inference-toolkit#137).
        raise RequestError(
            "stream is not supported: this model server (the Hugging Face toolkit's Multi Model Server) "
            'answers whole responses only; send the request without "stream" (InvokeEndpointWithResponseStream '
            "then gets the whole answer as one part)"
        )
    unknown = sorted(set(data) - {"inputs", "parameters"})
    if unknown:
        raise RequestError(f'the body has unknown fields {unknown}: send only "inputs" and "parameters"')
    if "inputs" not in data:
        raise RequestError('the body has no "inputs": send {"inputs": "your prompt"}')
    prompt = data["inputs"]
    if not isinstance(prompt, str) or not prompt:
        raise RequestError(f"inputs={prompt!r} is invalid: send the prompt as a non-empty string")

    import torch

    tokenizer = model["tokenizer"]
    encoded = tokenizer(prompt, return_tensors="pt")
    n_prompt = encoded["input_ids"].shape[1]
    if n_prompt == 0:
        raise RequestError("inputs encodes to no tokens: send a non-empty prompt")
    options = parse_request(data, model, n_prompt)
    stops: list[str] = options.pop("stop", [])
    full_text: bool = options.pop("return_full_text")
    kwargs = {**options, "pad_token_id": tokenizer.eos_token_id}
    if stops:
        kwargs.update(stop_strings=stops, tokenizer=tokenizer)
    out_of_memory = False
    try:
        with torch.inference_mode():
            output = model["model"].generate(**encoded.to(model["device"]), **kwargs)
    except torch.cuda.OutOfMemoryError:
        out_of_memory = True
    if out_of_memory:
        # The cache of this request's beams did not fit beside the weights. Outside the except
        # block the traceback, whose frames hold those tensors, is gone: emptying the cache now
        # frees what the request took, so that the next one starts clean.
        torch.cuda.empty_cache()
        raise RequestError(
            f"the request needs more GPU memory than is free ({n_prompt} prompt tokens + "
            f"{kwargs['max_new_tokens']} new tokens x {kwargs['num_beams']} beams): ask for fewer beams or "
            "new tokens (the endpoint's limits: GPTJ_MAX_BEAMS, GPTJ_MAX_NEW_TOKENS)"
        )
    generated = output[0, n_prompt:]
    # The requested eos token ended the text, like a stop sequence: leave it out the same way.
    if "eos_token_id" in options and len(generated) and int(generated[-1]) in options["eos_token_id"]:
        generated = generated[:-1]
    text = tokenizer.decode(generated, skip_special_tokens=True)
    # Cut at the first stop sequence and leave it out, as the seed's few-shot prompts expect.
    cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=len(text))
    text = text[:cut]
    return [{"generated_text": prompt + text if full_text else text}]


def output_fn(prediction: list[dict[str, str]], accept: str) -> str:
    media = (accept or JSON).split(";")[0].strip().lower()
    if media not in (JSON, "*/*"):
        raise RequestError(f"Accept {accept!r} is not supported: accept {JSON}")
    return json.dumps(prediction)
