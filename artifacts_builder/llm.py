"""Any causal language model's payload for the vLLM engine: ``python -m artifacts_builder llm
--model <hub id | folder> [--revision R]``.

``<out>/llm/model/`` holds the payload as the engine sees it under ``/opt/ml/model`` (LlmStack ships
the folder uncompressed under an S3 prefix): the weights as safetensors shards of at most
``--shard-size-mb`` (a PyTorch ``.bin`` is read with ``weights_only=True`` and written as
safetensors: a pickle is never shipped), each tensor as the checkpoint stores it (bfloat16 stays
bfloat16, a pre-quantized checkpoint's packed weights stay packed); the config, generation config
and tokenizer files and the chat template copied verbatim; ``payload-manifest.json`` with each
file's sha256. ``<out>/llm/manifest.json`` records where the model came from (the hub id and the
commit its revision resolved to, or the folder), which synthesis checks against ``llm.model``.
The command prints that commit and the ``npx cdk deploy LlmStack`` line that deploys the payload:
``llm.model``, ``llm.revision``, the ``-c`` settings it was built with and, where ``--out`` is not
the configured artifacts folder, ``project.artifacts_dir``.

Refused before anything is written, in one line: a model the pinned vLLM cannot serve (its
architecture checked against vLLM's model registry, llm_contracts/vllm_models.py), and a
pre-quantized one (``quantization_config``) the configured instance type's GPU cannot run. From
the hub only ``config.json`` is downloaded before that check; then the files the engine reads,
each checked against the sha256 the hub gives for it.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from artifacts_builder.hub import HubApi, hub_api, lfs_entry, select_files
from artifacts_builder.payload import (
    DEFAULT_SHARD_MB,
    SIDE_FILES,
    BuildError,
    Entry,
    ExpectedKeys,
    add_payload_arguments,
    check_shard_size,
    deploy_command,
    expected_keys,
    file_entry,
    parse_context,
    peak_rss,
    safetensors_entries,
    side_entries,
    swap_in,
    write_payload,
)
from artifacts_builder.tiny import TINY_CAUSAL_LMS, make_tiny_causal_lm
from llm_contracts import instances
from llm_contracts.causal_lm import ModelFacts, PayloadError, architecture_problem, engine_problem
from llm_contracts.manifest import PAYLOAD_MANIFEST, library_versions, read_manifest, sha256_file, write_manifest
from llm_contracts.manifest import file_entry as manifest_entry

COMPONENT = "llm"
#: The stack that deploys the payload (app.py), whose cdk.json section is COMPONENT.
STACK = "LlmStack"
PAYLOAD_DIR = "model"
#: What the engine reads besides the weights: the config, the tokenizer (a SentencePiece model
#: too) and the chat template in either of its files.
LLM_SIDE_FILES = (*SIDE_FILES, "tokenizer.model", "chat_template.jinja", "chat_template.json")
CHAT_TEMPLATE_FILE = "chat_template.jinja"
VERSIONED = ("torch", "transformers", "tokenizers", "safetensors")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="a Hugging Face model id (owner/name) or a local model folder")
    source.add_argument(
        "--tiny",
        choices=sorted(TINY_CAUSAL_LMS),
        help="a tiny random-weight model of this architecture, built offline (tests, demo)",
    )
    parser.add_argument(
        "--revision",
        default=None,
        help="hub branch, tag or commit of --model (default: main); the manifest records the commit it resolves to",
    )
    parser.add_argument(
        "--chat-template",
        type=Path,
        metavar="FILE",
        help=f"a Jinja chat template written into the payload as {CHAT_TEMPLATE_FILE} (the model's own is replaced)",
    )
    add_payload_arguments(parser, example="llm.instance_type=ml.g6e.xlarge")


def run(args: argparse.Namespace) -> int:
    try:
        context = parse_context(args.context)
        payload = build(
            model=args.model,
            tiny=args.tiny,
            revision=args.revision,
            chat_template=args.chat_template,
            out=args.out,
            shard_bytes=args.shard_size_mb * 1024 * 1024,
            context=context,
        )
        size = sum(p.stat().st_size for p in payload.rglob("*") if p.is_file())
        print(f"llm: wrote {payload}/ ({size / 1e9:.3f} GB); peak RSS {peak_rss() / 1e9:.3f} GB")
        record = read_manifest(payload.parent)["model"]
        settings = {} if record.get("tiny") else {f"{COMPONENT}.model": str(record["source"])}
        if "revision" in record:
            # The deploy needs the commit (a branch or tag can move to other files): the reader
            # copies it from here rather than from the manifest.
            print(f"llm: {record['source']} at {args.revision or 'main'} is commit {record['revision']}")
            settings[f"{COMPONENT}.revision"] = str(record["revision"])
        print(f"llm: deploy it, from the project root, with:\n  {deploy_command(STACK, settings, context, args.out)}")
    except BuildError as exc:
        print(f"llm: error: {exc}", file=sys.stderr)
        return 2
    return 0


def build(
    *,
    model: str | None,
    tiny: str | None = None,
    revision: str | None = None,
    chat_template: Path | None = None,
    out: Path,
    shard_bytes: int = DEFAULT_SHARD_MB * 1024 * 1024,
    context: dict[str, str] | None = None,
    api: HubApi | None = None,
) -> Path:
    """Build ``<out>/llm/model/`` and ``<out>/llm/manifest.json``; returns the payload folder. A
    failed build leaves the previous payload as it was."""
    check_shard_size(shard_bytes)
    if chat_template is not None and not chat_template.is_file():
        raise BuildError(f"--chat-template {chat_template} is not a file: give a Jinja template file")
    instance_type = _instance_type(context or {})
    folder = out / COMPONENT
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".work-", dir=folder) as work_dir:
        work = Path(work_dir)
        if tiny is not None:
            source = make_tiny_causal_lm(tiny, work / "source")
            record: dict[str, Any] = {"source": f"tiny-random-{tiny}", "tiny": True}
            check_model(json.loads((source / "config.json").read_text()), instance_type, where="the tiny model")
        elif model is not None and Path(model).is_dir():
            source = Path(model)
            record = {"source": str(source.resolve())}
            check_model(_config(source), instance_type, where=str(source))
        elif model is not None:
            if model.startswith((".", "/")) or Path(model).exists():
                raise BuildError(f"--model {model!r} is not a folder: give a model folder or a Hugging Face model id")
            source, commit = download(model, revision or "main", work / "hub", instance_type, api or hub_api())
            record = {"source": model, "revision": commit}
        else:
            raise BuildError("give --model (a hub id or a folder) or --tiny")
        if revision is not None and "revision" not in record:
            raise BuildError(f"--revision {revision} is for a hub model, and --model {model!r} is a folder")
        entries = [*side_entries(source, LLM_SIDE_FILES)]
        if chat_template is not None:
            entries = [e for e in entries if not e.name.startswith("chat_template")]
            entries.append(file_entry(CHAT_TEMPLATE_FILE, chat_template))
        weights = safetensors_entries(source, shard_bytes, expected=_expected(source))
        staging = work / PAYLOAD_DIR
        facts = ModelFacts.from_config(_config(source))
        record |= {"architecture": facts.architecture}
        extra = {
            "weights": [e.name for e in weights if e.name.endswith(".safetensors")],
            "versions": library_versions(VERSIONED),
            "model": record,
        }
        payload = write_payload(staging, [*entries, *weights], extra=extra, component=COMPONENT, for_mms=False)
        swap_in(staging, folder / PAYLOAD_DIR, work / "previous")
    target = folder / PAYLOAD_DIR
    files = {f"{PAYLOAD_DIR}/{name}": entry for name, entry in payload["files"].items()}
    files[f"{PAYLOAD_DIR}/{PAYLOAD_MANIFEST}"] = manifest_entry(target / PAYLOAD_MANIFEST)
    write_manifest(folder, COMPONENT, {}, known=files, model=record, versions=extra["versions"], payload=payload)
    return target


def _instance_type(context: dict[str, str]) -> str:
    """The instance type the payload is for: cdk.json's ``llm`` section with `context` over it."""
    from project_config import ConfigError, from_cdk_json

    try:
        return from_cdk_json(context).llm.endpoint.instance_type
    except ConfigError as exc:
        raise BuildError(str(exc)) from None


def _config(source: Path) -> dict[str, Any]:
    try:
        config = json.loads((source / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise BuildError(f"{source} has no readable config.json ({exc}): give a Hugging Face model folder") from None
    if not isinstance(config, dict):
        raise BuildError(f"{source / 'config.json'} is not a JSON object")
    return config


def check_model(config: dict[str, Any], instance_type: str, *, where: str) -> None:
    """BuildError unless the pinned vLLM serves the model of `config` on `instance_type`'s GPU (its
    architecture, and its quantization where it is pre-quantized)."""
    try:
        facts = ModelFacts.from_config(config)
    except PayloadError as exc:
        raise BuildError(f"{where}: {exc}") from None
    problem = architecture_problem(facts.architecture)
    if problem is not None:
        raise BuildError(f"{where} cannot be served by the vllm engine: {problem}")
    gpu = instances.InstanceType(instance_type).gpu
    problem = engine_problem(facts, gpu, instance_type) if gpu is not None else None
    if problem is not None:
        raise BuildError(
            f"{where} cannot be served on llm.instance_type={instance_type}: {problem}; pick another type with "
            "-c llm.instance_type=... (and set it in cdk.json)"
        )


def _expected(source: Path) -> ExpectedKeys | None:
    """The keys the model class has (and those it may leave out), where transformers knows the
    architecture and the checkpoint is not pre-quantized (its keys are then the quantizer's)."""
    config = _config(source)
    if config.get("quantization_config") is not None:
        return None
    try:
        return expected_keys(source)
    except (ValueError, KeyError, ImportError, OSError):
        return None  # an architecture vLLM serves and this transformers does not know


def download(model: str, revision: str, cache: Path, instance_type: str, api: HubApi) -> tuple[Path, str]:
    """`model`'s files at `revision` into a folder under `cache`, and the commit the revision
    resolved to: config.json first, checked (:func:`check_model`) before anything else is fetched,
    then the tokenizer's files and the weights, each checked against the hub's sha256."""
    from huggingface_hub.errors import HfHubHTTPError

    try:
        info = api.model_info(model, revision=revision, files_metadata=True)
        commit = str(info.sha)
        siblings = {sibling.rfilename: sibling for sibling in info.siblings or []}
        try:
            names = select_files(siblings, LLM_SIDE_FILES)
        except ValueError as exc:
            raise BuildError(f"{model} at {commit}: {exc}") from None
        folder = cache / commit
        folder.mkdir(parents=True)
        config = Path(api.hf_hub_download(model, "config.json", revision=commit))
        check_model(_config(config.parent), instance_type, where=f"{model} at {commit}")
        for name in names:
            path = Path(api.hf_hub_download(model, name, revision=commit))
            expected = lfs_entry(siblings[name])
            if expected is not None and sha256_file(path) != expected["sha256"]:
                raise BuildError(f"{model}/{name} at {commit} does not match the sha256 the hub gives for it")
            (folder / name).symlink_to(path.resolve())
    except (HfHubHTTPError, OSError) as exc:
        raise BuildError(
            f"cannot download {model!r} at revision {revision!r} from the Hugging Face hub ({exc}); check the id, "
            "the revision and the network, or pass --model with a local folder (or --tiny for an offline model)"
        ) from None
    return folder, commit


__all__ = ["BuildError", "Entry", "build", "check_model", "download"]
