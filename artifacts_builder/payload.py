"""A model's payload as the vLLM engine (and GPT-J's toolkit handler) load it from ``/opt/ml/model``:
safetensors shards written tensor by tensor (PyTorch ``.bin`` weights read with
``weights_only=True``: a pickle is never shipped), the config and tokenizer files copied verbatim,
and the payload manifest with each file's sha256, hashed as it is written. Shared by the builders
of GPT-J (``artifacts_builder/gptj.py``) and of any causal language model (``artifacts_builder/llm.py``).

Memory stays bounded by one tensor (plus a read buffer): nothing holds the whole model.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import resource
import shlex
import struct
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from llm_contracts.causal_lm import SAFETENSORS_BITS, PayloadError, safetensors_header
from llm_contracts.gptj import mms_manifest_lookalikes
from llm_contracts.manifest import PAYLOAD_MANIFEST, SCHEMA

#: The one-shard name and the index of several (the Hugging Face layout).
SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
#: Default shard size: small enough that a few shards per core can be hashed in parallel at
#: load, and far below S3's 5 GB single-request copy (the stack copies each file once).
DEFAULT_SHARD_MB = 512
MAX_SHARD_MB = 4096
# Everything a tokenizer or config may need at load time; weights are handled separately.
SIDE_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
)
_CHUNK = 8 * 1024 * 1024
# safetensors dtype codes for the torch dtypes a causal LM checkpoint holds.
_ST_DTYPES = {
    "F16": "float16",
    "BF16": "bfloat16",
    "F32": "float32",
    "F64": "float64",
    "I64": "int64",
    "I32": "int32",
    "I16": "int16",
    "I8": "int8",
    "U8": "uint8",
    "BOOL": "bool",
    "U16": "uint16",
    "U32": "uint32",
    "U64": "uint64",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
}
_ST_CODES = {v: k for k, v in _ST_DTYPES.items()}


class BuildError(RuntimeError):
    """A payload that cannot be built as asked; the message says why and what to do."""


def check_shard_size(shard_bytes: int) -> None:
    if not 1 <= shard_bytes <= MAX_SHARD_MB * 1024 * 1024:
        raise BuildError(
            f"--shard-size-mb {shard_bytes / 2**20:g} is invalid: use 1 to {MAX_SHARD_MB} (the stack copies each "
            "file with one S3 request, which takes at most 5 GB)"
        )


def add_payload_arguments(parser: argparse.ArgumentParser, *, example: str) -> None:
    """The options every payload builder takes: --out, --shard-size-mb and -c (`example`: a key=value)."""
    parser.add_argument("--out", type=Path, default=Path("artifacts"), help="output folder (default: artifacts)")
    parser.add_argument(
        "--shard-size-mb",
        type=int,
        default=DEFAULT_SHARD_MB,
        metavar="MB",
        help=f"largest safetensors shard, MB (default: {DEFAULT_SHARD_MB}; at most {MAX_SHARD_MB}); "
        "a tensor larger than this gets a shard of its own",
    )
    parser.add_argument(
        "--context",
        "-c",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"override a cdk.json setting as `cdk synth -c` does, e.g. {example}",
    )


def parse_context(pairs: Sequence[str]) -> dict[str, str]:
    """``-c KEY=VALUE`` pairs, as the CDK CLI passes them."""
    from project_config import ConfigError, parse_context_pairs

    try:
        return parse_context_pairs(pairs)
    except ConfigError as exc:
        raise BuildError(str(exc)) from None


def deploy_command(stack: str, settings: Mapping[str, str], context: Mapping[str, str], out: Path) -> str:
    """The ``npx cdk deploy`` line, run from the project root, that deploys `stack` with what the
    builder wrote into `out`: `settings` first (what the payload was built from, which synthesis
    checks it against), then the builder's own ``-c`` pairs (synthesis checks the payload again
    with the settings it was built for: the instance type, the length), and the artifacts folder
    where `out` is not the one the configuration names (a relative one is the project root's)."""
    from project_config import ConfigError, from_cdk_json
    from project_config.reader import PROJECT_ROOT

    pairs = {**settings, **{key: value for key, value in context.items() if key not in settings}}
    try:
        configured = from_cdk_json(context).project.artifacts_dir
    except ConfigError as exc:
        raise BuildError(str(exc)) from None
    written = out.resolve()
    if written != configured.resolve():
        pairs["project.artifacts_dir"] = str(
            written.relative_to(PROJECT_ROOT) if written.is_relative_to(PROJECT_ROOT) else written
        )
    return shlex.join(["npx", "cdk", "deploy", stack, *(w for k, v in pairs.items() for w in ("-c", f"{k}={v}"))])


def swap_in(staging: Path, target: Path, previous: Path) -> None:
    """Replace `target` with `staging` by two renames; the old folder comes back if the second fails."""
    if target.exists():
        os.replace(target, previous)
    try:
        os.replace(staging, target)
    except OSError:
        if previous.exists():
            os.replace(previous, target)
        raise


def resolve_source(model: str, revision: str, work: Path) -> Path:
    """A local folder as is; otherwise a hub snapshot of config, tokenizer and weights only
    (safetensors when the revision has them, else the PyTorch .bin)."""
    path = Path(model)
    if path.is_dir():
        return path
    if path.exists() or model.startswith((".", "/")):
        raise BuildError(f"--model {model!r} is not a folder: give a model folder or a Hugging Face model id")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError

    base = ["*.json", "*.txt"]
    try:
        folder = Path(snapshot_download(model, revision=revision, allow_patterns=[*base, "*.safetensors"]))
        if not any(folder.glob("*.safetensors")):
            folder = Path(snapshot_download(model, revision=revision, allow_patterns=[*base, "pytorch_model*.bin"]))
    except (HfHubHTTPError, OSError) as exc:
        raise BuildError(
            f"cannot download {model!r} at revision {revision!r} from the Hugging Face hub ({exc}); check the id "
            "and revision and the network, or pass --model with a local folder (or --tiny for an offline model)"
        ) from None
    return folder


# --- payload entries --------------------------------------------------------------------------


@dataclass
class Entry:
    """One file of the payload: its name, size, and a function that yields its bytes once."""

    name: str
    size: int
    chunks: Callable[[], Iterator[bytes | memoryview]]


def _file_chunks(path: Path, start: int = 0, length: int | None = None) -> Callable[[], Iterator[bytes]]:
    def chunks() -> Iterator[bytes]:
        remaining = path.stat().st_size - start if length is None else length
        with open(path, "rb") as f:
            f.seek(start)
            while remaining > 0:
                chunk = f.read(min(_CHUNK, remaining))
                if not chunk:
                    raise BuildError(f"{path} ended early (was it modified during the build?)")
                remaining -= len(chunk)
                yield chunk

    return chunks


def file_entry(name: str, path: Path) -> Entry:
    return Entry(name, path.stat().st_size, _file_chunks(path))


def side_entries(source: Path, names: tuple[str, ...] = SIDE_FILES) -> list[Entry]:
    # Copied verbatim rather than re-saved: a tokenizer re-saved by transformers 5 can name a
    # class that the image's transformers 4.x does not have.
    entries = [file_entry(name, source / name) for name in names if (source / name).is_file()]
    missing = {"config.json"} - {e.name for e in entries}
    if missing or not any(e.name.startswith(("tokenizer", "vocab")) for e in entries):
        raise BuildError(f"{source} lacks config.json or tokenizer files: give a complete model folder")
    return entries


@dataclass
class _Tensor:
    name: str
    dtype: str  # safetensors code of the stored dtype
    shape: list[int]
    data: Callable[[], Iterator[bytes | memoryview]]


def _source_tensors(source: Path) -> tuple[list[_Tensor], list[Any]]:
    """The checkpoint's tensors, readable one at a time. Safetensors are streamed as raw bytes
    straight from the file (no mmap, so the build's RSS does not grow with the model);
    a PyTorch .bin is opened with mmap and `weights_only=True`."""
    shards = sorted(source.glob("*.safetensors"))
    if shards:
        tensors: list[_Tensor] = []
        for shard in shards:
            try:
                base, header = safetensors_header(shard)
            except PayloadError as exc:
                raise BuildError(str(exc)) from None
            for name, info in header.items():
                start, end = info["data_offsets"]
                chunks = _file_chunks(shard, base + start, end - start)
                tensors.append(_Tensor(name, info["dtype"], list(info["shape"]), chunks))
        return tensors, []
    bins = sorted(source.glob("pytorch_model*.bin"))
    if not bins:
        raise BuildError(f"{source} has no *.safetensors or pytorch_model*.bin weights")
    import torch

    keep_alive = []
    tensors = []
    for shard in bins:
        state = torch.load(shard, map_location="cpu", mmap=True, weights_only=True)
        keep_alive.append(state)
        for name, tensor in state.items():
            code = _ST_CODES[str(tensor.dtype).removeprefix("torch.")]
            tensors.append(_Tensor(name, code, list(tensor.shape), _tensor_chunks(tensor)))
    return tensors, keep_alive


def _tensor_chunks(tensor: Any) -> Callable[[], Iterator[memoryview]]:
    def chunks() -> Iterator[memoryview]:
        import torch

        flat = tensor.contiguous().reshape(-1).view(torch.uint8)
        yield memoryview(flat.numpy())

    return chunks


def to_fp16(t: _Tensor) -> _Tensor:
    """fp32/bf16 checkpoints become fp16 one tensor at a time (the payload is fp16 by design)."""
    if t.dtype not in ("F32", "BF16", "F64"):
        return t

    def chunks() -> Iterator[memoryview]:
        import torch

        raw = bytearray().join(t.data())
        src = torch.frombuffer(raw, dtype=getattr(torch, _ST_DTYPES[t.dtype])) if raw else torch.empty(0)
        yield from _tensor_chunks(src.to(torch.float16))()

    return _Tensor(t.name, "F16", t.shape, chunks)


@dataclass(frozen=True)
class ExpectedKeys:
    """The state-dict keys of a model class (:func:`expected_keys`), and how transformers' loader
    reads a checkpoint's keys as those: the two differ where an architecture's checkpoints keep
    older names (GPT-NeoX's output embedding is stored as ``embed_out``, which transformers 5
    calls ``lm_head``) or the base model's keys (facebook/opt-* store ``decoder.*`` for the
    model's ``model.decoder.*``). The payload keeps the checkpoint's names: vLLM's loader of each
    architecture reads those."""

    #: The model's keys, and those of them a checkpoint may leave out: weights tied to another
    #: (an LM head that is the embedding).
    keys: frozenset[str]
    optional: frozenset[str]
    #: A checkpoint key -> the model key it loads as.
    loaded: Callable[[str], str]
    #: A model key -> the name transformers saves it under (to name a missing weight as the
    #: checkpoint would).
    stored: Callable[[str], str]


def expected_keys(source: Path) -> ExpectedKeys:
    """The state-dict keys the model class has, from its config on the meta device (no memory),
    with the key mapping of transformers' own loader (``from_pretrained``): its conversion mapping
    for the class (and its legacy renamings), then the base model's prefix added or dropped."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.conversion_mapping import get_model_conversion_mapping
    from transformers.core_model_loading import WeightConverter, WeightRenaming, apply_renamings, rename_source_key

    config = AutoConfig.from_pretrained(source)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
    meta = model.state_dict()
    prefix = model.base_model_prefix
    mapping = get_model_conversion_mapping(model)
    renamings = [m for m in mapping if isinstance(m, WeightRenaming)]
    converters = [m for m in mapping if isinstance(m, WeightConverter)]
    # What save_pretrained writes: the renamings reversed, in reverse order (a converter's many
    # tensors have no one name: the model's key stands for them).
    saved = [m.reverse_transform() for m in get_model_conversion_mapping(model, add_legacy=False)[::-1]]
    saved_renamings = [m for m in saved if isinstance(m, WeightRenaming)]

    def loaded(key: str) -> str:
        # As convert_and_load_state_dict_in_model does: a key the mapping would rename away from
        # one the model has only gets the prefix.
        renamed, _ = rename_source_key(key, renamings, converters, prefix, meta)
        if renamed not in meta and key in meta:
            renamed, _ = rename_source_key(key, [], [], prefix, meta)
        return renamed

    def stored(key: str) -> str:
        return apply_renamings(key, saved_renamings)

    tied = frozenset(getattr(model, "all_tied_weights_keys", None) or {})
    return ExpectedKeys(frozenset(meta), tied, loaded, stored)


def safetensors_entries(
    source: Path,
    shard_bytes: int,
    *,
    expected: ExpectedKeys | None,
    only_expected: bool = False,
    convert: Callable[[_Tensor], _Tensor] | None = None,
) -> list[Entry]:
    """The weights as safetensors shards of at most `shard_bytes` (a larger tensor gets a
    shard of its own), each a stream: a header computed from shapes alone, then each tensor's
    bytes in turn; several shards come with the Hugging Face index. A key of `expected` (the
    model's keys, and those it may leave out: :func:`expected_keys`; None: not checked) that
    no checkpoint key loads as fails the build here, not at load; with `only_expected`, keys that
    load as none of the model's are dropped (GPT-J's old ``attn.bias`` buffers). `convert` changes each tensor
    (GPT-J's fp16)."""
    tensors, keep_alive = _source_tensors(source)
    if expected is not None:
        loads_as = {t.name: expected.loaded(t.name) for t in tensors}
        missing = sorted(expected.stored(k) for k in expected.keys - expected.optional - set(loads_as.values()))
        if missing:
            more = ", ..." if len(missing) > 5 else ""
            raise BuildError(
                f"{source} lacks {len(missing)} weights the model needs ({', '.join(missing[:5])}{more}): "
                "the checkpoint does not match its config.json"
            )
        if only_expected:
            tensors = [t for t in tensors if loads_as[t.name] in expected.keys]
    # Wider items first: every tensor then starts at a multiple of its item size (the header is
    # padded to 8 bytes), which the loader's zero-copy views need.
    tensors = sorted((convert(t) if convert else t for t in tensors), key=lambda t: (-_itemsize(t.dtype), t.name))
    shards: list[list[_Tensor]] = [[]]
    filled = 0
    for t in tensors:
        size = _nbytes(t)
        if shards[-1] and filled + size > shard_bytes:
            shards.append([])
            filled = 0
        shards[-1].append(t)
        filled += size
    if len(shards) == 1:
        return [_shard_entry(SAFETENSORS_FILE, shards[0], keep_alive)]
    names = [f"model-{i:05d}-of-{len(shards):05d}.safetensors" for i in range(1, len(shards) + 1)]
    index = {
        "metadata": {"total_size": sum(_nbytes(t) for t in tensors)},
        "weight_map": {t.name: name for name, shard in zip(names, shards, strict=True) for t in shard},
    }
    data = (json.dumps(index, indent=2, sort_keys=True) + "\n").encode()
    entries = [_shard_entry(name, shard, keep_alive) for name, shard in zip(names, shards, strict=True)]
    return [*entries, Entry(SAFETENSORS_INDEX, len(data), lambda: iter([data]))]


def _itemsize(dtype: str) -> float:
    """Bytes of one element of a safetensors dtype (F4: half a byte)."""
    return SAFETENSORS_BITS[dtype] / 8


def _nbytes(t: _Tensor) -> int:
    return math.ceil(math.prod(t.shape) * SAFETENSORS_BITS[t.dtype] / 8)


def _shard_entry(name: str, tensors: list[_Tensor], keep_alive: list[Any]) -> Entry:
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for t in tensors:
        header[t.name] = {"dtype": t.dtype, "shape": t.shape, "data_offsets": [offset, offset + _nbytes(t)]}
        offset += _nbytes(t)
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the format wants the data 8-byte aligned
    prefix = struct.pack("<Q", len(encoded)) + encoded

    def chunks() -> Iterator[bytes | memoryview]:
        _ = keep_alive  # the mmapped .bin state dicts must outlive the stream
        yield prefix
        for t in tensors:
            yield from t.data()

    return Entry(name, len(prefix) + offset, chunks)


# --- the payload --------------------------------------------------------------------------------


class _Progress:
    def __init__(self, total: int, label: str, stream: IO[str] = sys.stderr) -> None:
        self.total, self.done, self.label, self.stream = total, 0, label, stream
        self.started = self.last = time.monotonic()

    def add(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last >= 2 or self.done == self.total:
            self.last = now
            rate = self.done / max(now - self.started, 1e-9) / 1e6
            pct = 100 * self.done / max(self.total, 1)
            print(
                f"{self.label}: packed {self.done / 1e9:.2f}/{self.total / 1e9:.2f} GB ({pct:.0f}%, {rate:.0f} MB/s)",
                file=self.stream,
                flush=True,
            )


def write_payload(
    folder: Path, entries: list[Entry], *, extra: dict[str, Any], component: str = "gptj", for_mms: bool = True
) -> dict[str, Any]:
    """Write `entries` into `folder`, hashing each file as it is written, then the payload
    manifest (sha256 and size of every file; its ``component`` is ``<component>-payload``);
    returns the manifest. `for_mms`: a payload the toolkit's Multi Model Server may serve."""
    clashes = mms_manifest_lookalikes([*(e.name for e in entries), PAYLOAD_MANIFEST]) if for_mms else []
    if clashes:
        raise BuildError(
            f"the payload would hold {', '.join(clashes)}, which the image's model server (Multi Model Server) "
            "reads as its own manifest and refuses to start on: rename or leave out that file"
        )
    progress = _Progress(sum(e.size for e in entries), component)
    files: dict[str, dict[str, Any]] = {}
    for entry in entries:
        path = folder / entry.name
        path.parent.mkdir(parents=True, exist_ok=True)
        digest, count = hashlib.sha256(), 0
        with open(path, "wb") as f:
            for chunk in entry.chunks():
                f.write(chunk)
                digest.update(chunk)
                count += len(chunk)
                progress.add(len(chunk))
        if count != entry.size:
            raise BuildError(f"{entry.name}: expected {entry.size} bytes, the source gave {count}")
        files[entry.name] = {"sha256": digest.hexdigest(), "size": entry.size}
    manifest = {"schema": SCHEMA, "component": f"{component}-payload", "files": files, **extra}
    (folder / PAYLOAD_MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
