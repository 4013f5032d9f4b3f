"""The inf2 bundle for DJL Serving: ``serving.properties``, ``model.py``, ``requirements.txt``,
an inner manifest and, with ``--tiny`` or ``--model-dir``, the model itself; without either,
``hub-files.json``: the sha256 and size of each file the instance downloads from the hub, at
the pinned commit (``inf2.model_revision``), which the handler checks before it loads them.

The properties are rendered from the typed settings (cdk.json's ``inf2`` section plus
``-c inf2.key=value`` overrides, exactly as ``cdk synth`` reads them) and checked against
the tensor-parallel rules before anything is written. The outer manifest records the
model's facts and the rendered properties, so that synthesis can check the rules against
the model actually shipped and refuse a bundle built from other settings.

The tarball is reproducible (sorted names, zero times and owners): the same inputs give
the same sha256, so an unchanged bundle never restarts the instance's model server. The same
files stay unpacked in ``bundle/`` beside it, with the inner manifest that lists each one: what a
SageMaker endpoint takes as an uncompressed S3 prefix, as LMI documents model data for SageMaker
(djl-serving v0.29.0, serving/docs/lmi/deployment_guide/deploying-your-endpoint.md). A bundle that
ships its model therefore takes its size twice on disk.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

from artifacts_builder.hub import HubApi, hub_api, lfs_entry, select_files
from artifacts_builder.legacy_tokenizer import TokenizerFormatError, rewrite_for_old_readers
from artifacts_builder.payload import SIDE_FILES
from artifacts_builder.tarball import pack_directory
from llm_contracts.inf2 import (
    HUB_FILES,
    ModelFacts,
    facts_from_config,
    known_model,
    render_properties,
    serving_properties,
    unknown_model_message,
)
from llm_contracts.manifest import file_entry, library_versions, write_manifest
from project_config import ConfigError, Inf2Settings, ModelServerSettings, from_cdk_json, parse_context_pairs
from project_config.inf2 import hub_model, model_source_problems, settings_problems

SERVING_DIR = Path(__file__).resolve().parent.parent / "serving" / "inf2"
BUNDLE_NAME = "bundle.tar.gz"
#: The same bundle unpacked: the files SageMaker places under /opt/ml/model from an S3 prefix
#: (its inner manifest.json lists them, which llm_inference_cdk.S3PrefixModelData ships).
BUNDLE_FOLDER = "bundle"
#: Where the container sees the unpacked bundle (run-container.sh mounts it there).
CONTAINER_MODEL_DIR = "/opt/ml/model"
#: The bundle's folder for a shipped model; serving.properties then points model_id at it.
MODEL_FOLDER = "model"
TINY_NAME = "tiny-random-opt"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tiny", action="store_true", help="ship a tiny random-weight OPT built offline (tests, demo)")
    parser.add_argument("--out", type=Path, default=Path("artifacts"), help="output folder (default: artifacts)")
    parser.add_argument(
        "--model-dir",
        type=Path,
        help="ship this local Hugging Face model folder (config.json, weights, tokenizer) instead of "
        "letting the instance download inf2.model_id from the hub (at inf2.model_revision, checked against "
        "the sha256 the hub gives now, which needs the network here)",
    )
    parser.add_argument(
        "-c",
        "--context",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting override as for `cdk synth -c`, such as inf2.tensor_parallel_degree=4",
    )


def build_tiny_model(target: Path, *, seed: int = 0) -> None:
    """A random-weight OPT small enough for a CPU, with 24 heads so that every degree the
    inf2 runtime supports (1, 2, 4, 8, 24) divides them."""
    import torch
    from transformers import OPTConfig, OPTForCausalLM

    from artifacts_builder.tiny import train_tokenizer

    tokenizer = train_tokenizer(target)
    torch.manual_seed(seed)
    config = OPTConfig(
        vocab_size=len(tokenizer),
        hidden_size=96,
        word_embed_proj_dim=96,
        num_hidden_layers=2,
        ffn_dim=192,
        num_attention_heads=24,
        max_position_embeddings=2048,
        pad_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    OPTForCausalLM(config).save_pretrained(target)


#: Files of a hub repository the server reads besides the weights: the config and the tokenizer's
#: (those the GPT-J payload ships, and a SentencePiece model).
HUB_SMALL_FILES = (*SIDE_FILES, "tokenizer.model")


def select_hub_files(names: Collection[str]) -> list[str]:
    """The files of a hub repository the server needs (artifacts_builder/hub.py's select_files)."""
    try:
        return select_files(names, HUB_SMALL_FILES)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def hub_files(model_id: str, revision: str, api: HubApi) -> dict[str, dict[str, Any]]:
    """The sha256 and size of each file the server downloads from `model_id` at commit `revision`:
    the hub's own for weights (Git LFS objects are named by their sha256), the sha256 of the file
    downloaded here for the small ones (the hub gives only their Git blob id, a SHA-1)."""
    info = api.model_info(model_id, revision=revision, files_metadata=True)
    if info.sha != revision:
        raise ConfigError(f"inf2.model_revision={revision!r} is invalid: the hub resolves it to {info.sha!r}; "
                          "allowed is a full commit hash of the repository")  # fmt: skip
    siblings = {sibling.rfilename: sibling for sibling in info.siblings or []}
    entries = {}
    for name in select_hub_files(siblings):
        lfs = lfs_entry(siblings[name])
        if lfs is not None:
            entries[name] = lfs
        else:
            entries[name] = file_entry(Path(api.hf_hub_download(model_id, name, revision=revision)))
    return entries


def _model(args: argparse.Namespace, settings: Inf2Settings, staging: Path) -> tuple[ModelFacts, str, dict[str, Any]]:
    """(facts, option.model_id, the manifest's "model" record)."""
    ms = settings.model_server
    if args.tiny or args.model_dir is not None:
        name = TINY_NAME if args.tiny else args.model_dir.name
        problems = model_source_problems(ms, bundled=name)
        if problems:
            raise ConfigError("; ".join(problems))
        target = staging / MODEL_FOLDER
        if args.tiny:
            build_tiny_model(target)
        else:
            if not (args.model_dir / "config.json").is_file():
                raise ConfigError(f"--model-dir {args.model_dir} has no config.json: give a Hugging Face model folder")
            shutil.copytree(args.model_dir, target)
        # The image reads the tokenizer with tokenizers 0.19.1, which refuses the newer merges format.
        try:
            rewrite_for_old_readers(target)
        except TokenizerFormatError as exc:
            raise ConfigError(f"the model of the bundle: {exc}") from None
        config = json.loads((target / "config.json").read_text())
        facts = facts_from_config(config, source=f"config.json of {name} in the bundle")
        return facts, f"{CONTAINER_MODEL_DIR}/{MODEL_FOLDER}", {"source": "bundle", "name": name}
    model_id, revision = hub_model(ms)
    facts_or_none = known_model(model_id)
    if facts_or_none is None:
        raise ConfigError(unknown_model_message(model_id))
    problems = model_source_problems(ms, bundled=None)
    if problems:
        raise ConfigError("; ".join(problems))
    return facts_or_none, model_id, {"source": "hub", "name": model_id, "revision": revision}


def _requirements(ms: ModelServerSettings) -> str:
    header = (
        "# Installed by DJL Serving when the model loads. The image pins torch-neuronx,\n"
        "# transformers-neuronx and transformers; add only pinned packages it lacks\n"
        "# (cdk.json: inf2.requirements).\n"
    )
    return header + "".join(f"{r}\n" for r in ms.requirements)


def build(args: argparse.Namespace) -> Path:
    """Write ``<out>/inf2/bundle.tar.gz``, the same files unpacked under ``<out>/inf2/bundle/``
    (for SageMaker's S3 prefix), and the manifest; ConfigError on a bad setting."""
    settings = from_cdk_json(parse_context_pairs(args.context)).inf2
    ms = settings.model_server
    out: Path = args.out / "inf2"
    staging = out / ".staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        facts, model_id, model_record = _model(args, settings, staging)
        problems = settings_problems(settings, facts, model_id=model_record["name"])
        if problems:
            raise ConfigError("; ".join(problems))
        props = serving_properties(ms, model_id=model_id, revision=model_record.get("revision"))
        if model_record["source"] == "hub":
            # The sha256 of each file the instance downloads: the handler refuses any other.
            listed = hub_files(model_id, model_record["revision"], hub_api())
            hub_record = {"repo": model_id, "revision": model_record["revision"], "files": listed}
            (staging / HUB_FILES).write_text(json.dumps(hub_record, indent=2, sort_keys=True) + "\n")
        (staging / "serving.properties").write_text(render_properties(props))
        shutil.copyfile(SERVING_DIR / "model.py", staging / "model.py")
        (staging / "requirements.txt").write_text(_requirements(ms))
        files = {p.relative_to(staging).as_posix(): p for p in sorted(staging.rglob("*")) if p.is_file()}
        write_manifest(staging, "inf2-bundle", files)
        bundle = out / BUNDLE_NAME
        pack_directory(staging, bundle, directories=True, compresslevel=9)
        folder = out / BUNDLE_FOLDER
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    write_manifest(
        out,
        "inf2",
        [bundle],
        model={**model_record, "facts": facts.as_dict()},
        serving_properties=props,
        tiny=bool(args.tiny),
        versions=library_versions(["transformers", "torch", "tokenizers"])
        if model_record["source"] == "bundle"
        else {},
    )
    return bundle


def run(args: argparse.Namespace) -> int:
    try:
        bundle = build(args)
    except ConfigError as exc:
        print(f"inf2: {exc}", file=sys.stderr)
        return 2
    size = bundle.stat().st_size
    unpacked = bundle.parent / BUNDLE_FOLDER
    print(f"inf2: wrote {bundle} ({size} bytes), the same files unpacked in {unpacked}, and its manifest.json")
    return 0
