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
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from artifacts_builder.payload import (
    DEFAULT_SHARD_MB,
    SAFETENSORS_FILE,
    SIDE_FILES,
    BuildError,
    Entry,
    add_payload_arguments,
    check_shard_size,
    expected_keys,
    file_entry,
    parse_context,
    peak_rss,
    resolve_source,
    safetensors_entries,
    side_entries,
    swap_in,
    to_fp16,
    write_payload,
)
from artifacts_builder.tarball import pack_directory
from llm_contracts.gptj import PAYLOAD_MANIFEST
from llm_contracts.manifest import file_entry as manifest_entry
from llm_contracts.manifest import library_versions, write_manifest

__all__ = ["SIDE_FILES", "BuildError", "Entry", "write_payload"]

COMPONENT = "gptj"
DEFAULT_MODEL = "EleutherAI/gpt-j-6B"
DEFAULT_REVISION = "float16"
FORMATS = {"safetensors": SAFETENSORS_FILE, "torch-save": "model.pt"}
PAYLOAD_DIR = "model"
TARBALL = "model.tar.gz"
INFERENCE_PY = Path(__file__).resolve().parent.parent / "serving" / "gptj" / "code" / "inference.py"
VERSIONED = ("torch", "transformers", "tokenizers", "safetensors")


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
    add_payload_arguments(parser, example="gptj.transformers_version=4.51.3")
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
            context=parse_context(args.context),
        )
    except BuildError as exc:
        print(f"gptj: error: {exc}", file=sys.stderr)
        return 2
    size = sum(p.stat().st_size for p in payload.rglob("*") if p.is_file())
    tar = payload.parent / TARBALL
    also = f" and {tar}" if tar.exists() else ""
    print(f"gptj: wrote {payload}/ ({size / 1e9:.3f} GB){also}; peak RSS {peak_rss() / 1e9:.3f} GB")
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
    check_shard_size(shard_bytes)
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
        entries = [*side_entries(source), file_entry("code/inference.py", INFERENCE_PY)]
        weights = (
            safetensors_entries(
                source, shard_bytes, expected=expected_keys(source), only_expected=True, convert=to_fp16
            )
            if fmt == "safetensors"
            else [torch_save_entry(source, work)]
        )
        entries += weights
        staging = work / PAYLOAD_DIR
        extra = {"format": fmt, "weights": [e.name for e in weights if e.name.endswith((".safetensors", ".pt"))]}
        payload = write_payload(staging, entries, extra={**extra, "versions": versions, "model": model_info})
        packed = pack_directory(staging, work / TARBALL, compresslevel=compresslevel) if tarball else None
        swap_in(staging, folder / PAYLOAD_DIR, work / "previous")
        tar_path = folder / TARBALL
        if packed is not None:
            os.replace(packed, tar_path)
        else:
            tar_path.unlink(missing_ok=True)  # a stale archive would not match this payload
    target = folder / PAYLOAD_DIR
    files = {f"{PAYLOAD_DIR}/{name}": entry for name, entry in payload["files"].items()}
    files[f"{PAYLOAD_DIR}/{PAYLOAD_MANIFEST}"] = manifest_entry(target / PAYLOAD_MANIFEST)
    if tarball:
        files[TARBALL] = manifest_entry(tar_path)
    write_manifest(folder, COMPONENT, {}, known=files, format=fmt, versions=versions, model=model_info, payload=payload)
    return target


# --- versions and the torch-save refusal --------------------------------------------------


def container_versions(context: dict[str, str]) -> dict[str, str]:
    """torch and transformers of the Hugging Face image the stack deploys, from cdk.json
    (plus `-c` overrides), parsed by the same code as at synthesis."""
    from project_config import ConfigError, HfToolkitEngine, from_cdk_json

    try:
        image = from_cdk_json(context).gptj.engine
    except ConfigError as exc:
        raise BuildError(str(exc)) from None
    if not isinstance(image, HfToolkitEngine):
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
    return file_entry(FORMATS["torch-save"], path)
