"""GPT-J payload: fp16 weights, tokenizer, ``code/inference.py`` and a manifest, for either
engine: AWS's vLLM container (the default) or the Hugging Face inference container, whose
toolkit runs ``code/inference.py``.

Layout: ``<out>/gptj/model/`` holds the payload exactly as the container sees it under
``/opt/ml/model``. GptjStack ships that folder uncompressed (SageMaker ``ModelDataSource``
with ``CompressionType: None``): nothing is extracted before the container starts, which is
most of a tarball's cold start (docs/BENCHMARKS.md). ``--tarball`` also packs it into
``<out>/gptj/model.tar.gz``, SageMaker's classic format, for ``gptj.model_data`` pointing at it.

Formats (``--format``):

* ``safetensors`` (default): shards of at most ``--shard-size-mb`` (``model-00001-of-0000N``
  plus ``model.safetensors.index.json``, the Hugging Face layout), written tensor by tensor.
  They load under any transformers version and unpickle nothing, and shards let the endpoint
  verify their sha256 on every core at once. Also the fastest to cold-load: see the GPT-J
  section of docs/BENCHMARKS.md.
* ``torch-save``: the seed's ``torch.save(model)`` pickle, kept for parity. A pickle only loads
  under the transformers (and torch) it was written with, so it is refused unless the local
  versions equal those of the container image configured in cdk.json.

Memory stays bounded by one tensor (plus a read buffer) for safetensors: nothing holds the
whole model; each file is hashed as it is written.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from artifacts_builder.tarball import pack_directory
from llm_contracts.gptj import PAYLOAD_MANIFEST, mms_manifest_lookalikes
from llm_contracts.manifest import SCHEMA, file_entry, library_versions, write_manifest

COMPONENT = "gptj"
DEFAULT_MODEL = "EleutherAI/gpt-j-6B"
DEFAULT_REVISION = "float16"
FORMATS = {"safetensors": "model.safetensors", "torch-save": "model.pt"}
SAFETENSORS_INDEX = "model.safetensors.index.json"
PAYLOAD_DIR = "model"
TARBALL = "model.tar.gz"
#: Default shard size: small enough that a few shards per core can be hashed in parallel at
#: load, and far below S3's 5 GB single-request copy (the stack copies each file once).
DEFAULT_SHARD_MB = 512
MAX_SHARD_MB = 4096
INFERENCE_PY = Path(__file__).resolve().parent.parent / "serving" / "gptj" / "code" / "inference.py"
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
VERSIONED = ("torch", "transformers", "tokenizers", "safetensors")
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
}
_ST_CODES = {v: k for k, v in _ST_DTYPES.items()}
_ST_ITEMSIZE = {"F16": 2, "BF16": 2, "F32": 4, "F64": 8, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


class BuildError(RuntimeError):
    """A payload that cannot be built as asked; the message says why and what to do."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help=f"a Hugging Face model id or a local folder with config, tokenizer and weights (default: {DEFAULT_MODEL})",
    )
    parser.add_argument(
        "--revision", default=DEFAULT_REVISION, help=f"hub revision (default: {DEFAULT_REVISION}, fp16 weights)"
    )
    parser.add_argument("--tiny", action="store_true", help="a tiny random-weight GPT-J built offline (tests, demo)")
    parser.add_argument(
        "--format", choices=sorted(FORMATS), default="safetensors", help="weights format (default: safetensors)"
    )
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
        "--tarball",
        action="store_true",
        help=f"also pack the payload into {TARBALL} (default: only the folder, which the stack ships uncompressed)",
    )
    parser.add_argument(
        "--compresslevel",
        type=int,
        choices=range(10),
        default=0,
        metavar="0-9",
        help="gzip level of model.tar.gz (default: 0, stored: fp16 weights barely compress, and level 1 "
        "already costs minutes per 10 GB to build and seconds of every cold start to inflate)",
    )
    parser.add_argument(
        "--context",
        "-c",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a cdk.json setting as `cdk synth -c` does, e.g. gptj.transformers_version=4.51.3",
    )


def _parse_context(pairs: Sequence[str]) -> dict[str, str]:
    from project_config import ConfigError, parse_context_pairs

    try:
        return parse_context_pairs(pairs)
    except ConfigError as exc:
        raise BuildError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    try:
        payload = build(
            model=args.model,
            revision=args.revision,
            tiny=args.tiny,
            fmt=args.format,
            out=args.out,
            shard_bytes=args.shard_size_mb * 1024 * 1024,
            tarball=args.tarball,
            compresslevel=args.compresslevel,
            context=_parse_context(args.context),
        )
    except BuildError as exc:
        print(f"gptj: error: {exc}", file=sys.stderr)
        return 2
    size = sum(p.stat().st_size for p in payload.rglob("*") if p.is_file())
    tar = payload.parent / TARBALL
    also = f" and {tar}" if tar.exists() else ""
    print(f"gptj: wrote {payload}/ ({size / 1e9:.3f} GB){also}; peak RSS {_peak_rss() / 1e9:.3f} GB")
    return 0


def build(
    *,
    model: str,
    revision: str,
    tiny: bool,
    fmt: str,
    out: Path,
    shard_bytes: int = DEFAULT_SHARD_MB * 1024 * 1024,
    tarball: bool = False,
    compresslevel: int = 0,
    context: dict[str, str] | None = None,
) -> Path:
    """Build ``<out>/gptj/model/`` (and, with `tarball`, ``<out>/gptj/model.tar.gz``) and
    ``<out>/gptj/manifest.json``; returns the payload folder. A failed build leaves the
    previous payload as it was."""
    if not 1 <= shard_bytes <= MAX_SHARD_MB * 1024 * 1024:
        raise BuildError(
            f"--shard-size-mb {shard_bytes / 2**20:g} is invalid: use 1 to {MAX_SHARD_MB} (the stack copies each "
            "file with one S3 request, which takes at most 5 GB)"
        )
    versions = library_versions(VERSIONED)
    if fmt == "torch-save":
        check_torch_save_versions(versions, container_versions(context or {}))
    folder = out / COMPONENT
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".work-", dir=folder) as work_dir:
        work = Path(work_dir)
        if tiny:
            source, model_info = make_random_model(work / "source", **TINY), {"source": "tiny-random", "tiny": True}
        else:
            source, model_info = resolve_source(model, revision, work), {"source": model, "revision": revision}
        entries = [*_side_entries(source), _file_entry("code/inference.py", INFERENCE_PY)]
        weights = safetensors_entries(source, shard_bytes) if fmt == "safetensors" else [torch_save_entry(source, work)]
        entries += weights
        staging = work / PAYLOAD_DIR
        extra = {"format": fmt, "weights": [e.name for e in weights if e.name.endswith((".safetensors", ".pt"))]}
        payload = write_payload(staging, entries, extra={**extra, "versions": versions, "model": model_info})
        packed = pack_directory(staging, work / TARBALL, compresslevel=compresslevel) if tarball else None
        _swap_in(staging, folder / PAYLOAD_DIR, work / "previous")
        tar_path = folder / TARBALL
        if packed is not None:
            os.replace(packed, tar_path)
        else:
            tar_path.unlink(missing_ok=True)  # a stale archive would not match this payload
    target = folder / PAYLOAD_DIR
    files = {f"{PAYLOAD_DIR}/{name}": entry for name, entry in payload["files"].items()}
    files[f"{PAYLOAD_DIR}/{PAYLOAD_MANIFEST}"] = file_entry(target / PAYLOAD_MANIFEST)
    if tarball:
        files[TARBALL] = file_entry(tar_path)
    write_manifest(folder, COMPONENT, {}, known=files, format=fmt, versions=versions, model=model_info, payload=payload)
    return target


def _swap_in(staging: Path, target: Path, previous: Path) -> None:
    """Replace `target` with `staging` by two renames; the old folder comes back if the second fails."""
    if target.exists():
        os.replace(target, previous)
    try:
        os.replace(staging, target)
    except OSError:
        if previous.exists():
            os.replace(previous, target)
        raise


# --- versions and the torch-save refusal --------------------------------------------------


def container_versions(context: dict[str, str]) -> dict[str, str]:
    """torch and transformers of the Hugging Face image the stack deploys, from cdk.json
    (plus `-c` overrides), parsed by the same code as at synthesis."""
    from project_config import ConfigError, from_cdk_json

    try:
        image = from_cdk_json(context).gptj.hf_image
    except ConfigError as exc:
        raise BuildError(str(exc)) from None
    if image is None:
        raise BuildError(
            "--format torch-save is for gptj.engine=hf-toolkit: the vllm engine loads safetensors only "
            "(build with the default --format safetensors)"
        )
    return {"torch": image.pytorch_version, "transformers": image.transformers_version}


def _release(version: str | None) -> tuple[int, ...] | None:
    """`2.6.0+cu124` and `2.6` are the same release for unpickling; a local tag is not."""
    if version is None:
        return None
    match = re.match(r"^(\d+(?:\.\d+)*)", version)
    if match is None:
        return None
    parts = [int(p) for p in match.group(1).split(".")]
    while len(parts) < 3:
        parts.append(0)
    return tuple(parts)


def check_torch_save_versions(local: dict[str, str | None], container: dict[str, str]) -> None:
    mismatched = [
        f"{name} {local.get(name)} here vs {want} in the image"
        for name, want in container.items()
        if _release(local.get(name)) != _release(want)
    ]
    if mismatched:
        wanted = " ".join(f"{name}=={want}" for name, want in container.items())
        raise BuildError(
            "--format torch-save is refused: a pickled model only loads under the torch and transformers it "
            f"was saved with, and {'; '.join(mismatched)}. Build with the default --format safetensors "
            f"(loads under any version), or run the builder in an environment with {wanted} (the versions "
            "are gptj.pytorch_version and gptj.transformers_version in cdk.json)"
        )


# --- sources --------------------------------------------------------------------------------

#: The tiny model of tests and the demo: every GPT-J code path, a few hundred KB. Heads of 32:
#: vLLM's CPU attention (the vllm engine run locally) takes head sizes of 32 and up, not 16.
TINY: dict[str, Any] = {"n_layer": 2, "n_embd": 64, "n_head": 2, "rotary_dim": 8, "n_positions": 256}


def make_random_model(
    out_dir: Path,
    *,
    n_layer: int,
    n_embd: int,
    n_head: int,
    rotary_dim: int,
    n_positions: int,
    vocab_size: int | None = None,
    seed: int = 0,
) -> Path:
    """A GPT-J-architecture fp16 model with random weights and the offline tokenizer of
    `artifacts_builder.tiny`, saved as a hub snapshot would be (safetensors)."""
    import torch
    from transformers import GPTJConfig, GPTJForCausalLM

    from artifacts_builder.tiny import train_tokenizer

    tokenizer = train_tokenizer(out_dir)
    eos = tokenizer.eos_token_id
    config = GPTJConfig(
        vocab_size=vocab_size or len(tokenizer),
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        rotary_dim=rotary_dim,
        bos_token_id=eos,
        eos_token_id=eos,
    )
    torch.manual_seed(seed)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float16)  # initialise in fp16: a float32 copy would double the memory
    try:
        model = GPTJForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    model.generation_config.pad_token_id = eos
    model.save_pretrained(out_dir)
    return out_dir


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


def _file_entry(name: str, path: Path) -> Entry:
    return Entry(name, path.stat().st_size, _file_chunks(path))


def _side_entries(source: Path) -> list[Entry]:
    # Copied verbatim rather than re-saved: a tokenizer re-saved by transformers 5 can name a
    # class that the image's transformers 4.x does not have.
    entries = [_file_entry(name, source / name) for name in SIDE_FILES if (source / name).is_file()]
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


def _read_safetensors_header(path: Path) -> tuple[int, dict[str, Any]]:
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    header.pop("__metadata__", None)
    return 8 + length, header


def _source_tensors(source: Path) -> tuple[list[_Tensor], list[Any]]:
    """The checkpoint's tensors, readable one at a time. Safetensors are streamed as raw bytes
    straight from the file (no mmap, so the build's RSS does not grow with the model);
    a PyTorch .bin is opened with mmap and `weights_only=True`."""
    shards = sorted(source.glob("*.safetensors"))
    if shards:
        tensors: list[_Tensor] = []
        for shard in shards:
            base, header = _read_safetensors_header(shard)
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


def _to_fp16(t: _Tensor) -> _Tensor:
    """fp32/bf16 checkpoints become fp16 one tensor at a time (the payload is fp16 by design)."""
    if t.dtype not in ("F32", "BF16", "F64"):
        return t

    def chunks() -> Iterator[memoryview]:
        import torch

        raw = bytearray().join(t.data())
        src = torch.frombuffer(raw, dtype=getattr(torch, _ST_DTYPES[t.dtype])) if raw else torch.empty(0)
        yield from _tensor_chunks(src.to(torch.float16))()

    return _Tensor(t.name, "F16", t.shape, chunks)


def _expected_keys(source: Path) -> set[str]:
    """The state-dict keys the model class has, from its config on the meta device (no memory)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(source)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
    return set(model.state_dict())


def safetensors_entries(source: Path, shard_bytes: int) -> list[Entry]:
    """The weights as safetensors shards of at most `shard_bytes` (a larger tensor gets a
    shard of its own), each a stream: a header computed from shapes alone, then each tensor's
    bytes in turn; several shards come with the Hugging Face index. Keys the model does not
    have (GPT-J's old `attn.bias` and `attn.masked_bias` buffers) are dropped; a missing key
    fails the build here, not at load."""
    tensors, keep_alive = _source_tensors(source)
    expected = _expected_keys(source)
    present = {t.name for t in tensors}
    missing = sorted(expected - present)
    if missing:
        raise BuildError(
            f"{source} lacks {len(missing)} weights the model needs ({', '.join(missing[:5])}...): "
            "the checkpoint does not match its config.json"
        )
    # Wider items first: every tensor then starts at a multiple of its item size (the header is
    # padded to 8 bytes), which the loader's zero-copy views need.
    tensors = sorted(
        (_to_fp16(t) for t in tensors if t.name in expected), key=lambda t: (-_ST_ITEMSIZE[t.dtype], t.name)
    )
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
        return [_shard_entry(FORMATS["safetensors"], shards[0], keep_alive)]
    names = [f"model-{i:05d}-of-{len(shards):05d}.safetensors" for i in range(1, len(shards) + 1)]
    index = {
        "metadata": {"total_size": sum(_nbytes(t) for t in tensors)},
        "weight_map": {t.name: name for name, shard in zip(names, shards, strict=True) for t in shard},
    }
    data = (json.dumps(index, indent=2, sort_keys=True) + "\n").encode()
    entries = [_shard_entry(name, shard, keep_alive) for name, shard in zip(names, shards, strict=True)]
    return [*entries, Entry(SAFETENSORS_INDEX, len(data), lambda: iter([data]))]


def _nbytes(t: _Tensor) -> int:
    n = _ST_ITEMSIZE[t.dtype]
    for dim in t.shape:
        n *= dim
    return n


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


def torch_save_entry(source: Path, work: Path) -> Entry:
    """The seed's pickle of the whole module. Needs the model in memory once (no more)."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    # `dtype` replaced `torch_dtype` in transformers 4.56; this path runs under the image's version.
    key = "dtype" if _release(transformers.__version__) >= (4, 56, 0) else "torch_dtype"  # type: ignore[operator]
    model = AutoModelForCausalLM.from_pretrained(source, **{key: torch.float16})
    path = work / FORMATS["torch-save"]
    torch.save(model, path)
    del model
    return _file_entry(FORMATS["torch-save"], path)


# --- the payload --------------------------------------------------------------------------------


class _Progress:
    def __init__(self, total: int, stream: IO[str] = sys.stderr) -> None:
        self.total, self.done, self.stream = total, 0, stream
        self.started = self.last = time.monotonic()

    def add(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.last >= 2 or self.done == self.total:
            self.last = now
            rate = self.done / max(now - self.started, 1e-9) / 1e6
            pct = 100 * self.done / max(self.total, 1)
            print(
                f"gptj: packed {self.done / 1e9:.2f}/{self.total / 1e9:.2f} GB ({pct:.0f}%, {rate:.0f} MB/s)",
                file=self.stream,
                flush=True,
            )


def write_payload(folder: Path, entries: list[Entry], *, extra: dict[str, Any]) -> dict[str, Any]:
    """Write `entries` into `folder`, hashing each file as it is written, then the payload
    manifest (sha256 and size of every file); returns the manifest."""
    clashes = mms_manifest_lookalikes([*(e.name for e in entries), PAYLOAD_MANIFEST])
    if clashes:
        raise BuildError(
            f"the payload would hold {', '.join(clashes)}, which the image's model server (Multi Model Server) "
            "reads as its own manifest and refuses to start on: rename or leave out that file"
        )
    progress = _Progress(sum(e.size for e in entries))
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
    manifest = {"schema": SCHEMA, "component": "gptj-payload", "files": files, **extra}
    (folder / PAYLOAD_MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
