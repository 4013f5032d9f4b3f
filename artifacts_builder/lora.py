"""LoRA adapters for the llm component's base model: checked against it, then packed as SageMaker
takes an adapter inference component's artifact (one ``.tar.gz``, the adapter's files at its root).

``build`` refuses, before it writes anything, an adapter vLLM would refuse or apply wrongly: vLLM
reads neither ``base_model_name_or_path`` nor the tensors' shapes when it registers an adapter, and
a wrong-sized one fails only at its first request (or is copied in part, silently). So the
builder checks them: the base it names against the base payload's source, each tensor's module
against what vLLM applies LoRA to in that architecture (``llm_contracts/lora.py``), its layer
and shape against the base's config, the rank against the engine's ``max_lora_rank``, and what
vLLM does not support (DoRA, ``modules_to_save``, a bias). A ``.bin`` adapter is read with
``weights_only=True`` and written as safetensors.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from artifacts_builder.payload import BuildError
from artifacts_builder.tarball import pack_directory
from llm_contracts.lora import (
    ADAPTER_CONFIG,
    ADAPTER_WEIGHTS,
    ALLOWED_RANKS,
    LORA_MODULES,
    TENSOR_NAME,
    module_shape,
)
from llm_contracts.manifest import PAYLOAD_MANIFEST, read_manifest, sha256_file, write_manifest

COMPONENT = "llm-adapter"
#: Where the adapters' archives go, beside the llm payload they are built for.
ADAPTERS_DIR = "adapters"
#: An adapter's name: an inference component's (API reference: [a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?, 63 at most).
NAME = re.compile(r"^[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", required=True, help="the adapter's name: its inference component's, in llm.adapters")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--adapter", help="a PEFT LoRA adapter: a local folder, or a Hugging Face id with --revision")
    source.add_argument("--tiny-seed", type=int, help="a tiny random adapter for the --tiny base (tests, demo)")
    parser.add_argument("--revision", help="the hub commit (40 hex digits) of --adapter when it is a hub id")
    parser.add_argument("--max-rank", type=int, default=16, help="the engine's max_lora_rank (llm.max_lora_rank)")
    parser.add_argument("--out", type=Path, default=Path("artifacts"), help="the builder's output folder")


def run(args: argparse.Namespace) -> int:
    base = args.out / "llm" / "model"
    try:
        if not NAME.match(args.name):
            raise BuildError(f"--name {args.name!r} is not an inference component name: letters, digits and "
                             "hyphens, 63 at most, starting and ending with a letter or digit")  # fmt: skip
        if not (base / "config.json").is_file():
            raise BuildError(f"no llm payload in {base}: build the base first (python -m artifacts_builder llm ...)")
        with tempfile.TemporaryDirectory() as work:
            source = _source(args, base, Path(work))
            archive = build(source, base, args.out / "llm" / ADAPTERS_DIR, name=args.name, max_rank=args.max_rank)
        print(f"lora: wrote {archive} ({archive.stat().st_size / 1e6:.2f} MB) for the base in {base}")
    except BuildError as exc:
        print(f"lora: error: {exc}", file=sys.stderr)
        return 2
    return 0


def _source(args: argparse.Namespace, base: Path, work: Path) -> Path:
    if args.tiny_seed is not None:
        return make_tiny_adapter(base, work / "tiny", seed=args.tiny_seed)
    folder = Path(args.adapter)
    if folder.is_dir():
        if args.revision is not None:
            raise BuildError(
                f"--revision {args.revision} is for a hub adapter, and --adapter {args.adapter!r} is a folder"
            )
        return folder
    if args.revision is None or not COMMIT.match(args.revision):
        raise BuildError(f"--adapter {args.adapter!r} is no folder here: a hub adapter needs --revision, its commit "
                         "(40 hex digits), so that the same files deploy every time")  # fmt: skip
    from artifacts_builder.hub import hub_api

    api = hub_api()
    target = work / "hub"
    target.mkdir()
    for name in (ADAPTER_CONFIG, ADAPTER_WEIGHTS):
        shutil.copyfile(api.hf_hub_download(args.adapter, name, revision=args.revision), target / name)
    return target


def _tensors(adapter_dir: Path) -> dict[str, Any]:
    """The adapter's tensors by name: its safetensors, else its .bin read with weights_only=True."""
    weights = adapter_dir / ADAPTER_WEIGHTS
    if weights.is_file():
        from safetensors.torch import load_file

        return dict(load_file(str(weights)))
    legacy = adapter_dir / "adapter_model.bin"
    if legacy.is_file():
        import torch

        return dict(torch.load(legacy, map_location="cpu", weights_only=True))
    raise BuildError(f"{adapter_dir} has no {ADAPTER_WEIGHTS} (or adapter_model.bin): is it a PEFT LoRA adapter?")


def problems(
    adapter_config: dict[str, Any],
    tensors: dict[str, Any],
    base_config: dict[str, Any],
    base_source: str,
    *,
    max_rank: int,
) -> list[str]:
    """Every reason vLLM would refuse the adapter, or apply it to the wrong base, a line each."""
    return [
        *_config_problems(adapter_config, base_source, max_rank),
        *_tensor_problems(tensors, base_config, int(adapter_config.get("r") or 0)),
    ]


def _config_problems(adapter_config: dict[str, Any], base_source: str, max_rank: int) -> list[str]:
    found = []
    named = adapter_config.get("base_model_name_or_path")
    if named and named != base_source:
        found.append(f"base_model_name_or_path={named!r} is not the base payload's model {base_source!r}: "
                     "build the adapter for that model, or build the base from the one the adapter names")  # fmt: skip
    if adapter_config.get("peft_type", "LORA") != "LORA":
        found.append(f"peft_type={adapter_config.get('peft_type')!r}: only LORA adapters are served")
    rank = int(adapter_config.get("r") or 0)
    if rank < 1 or rank > max_rank:
        fits = ", ".join(str(r) for r in ALLOWED_RANKS if r >= rank)
        found.append(f"r={rank} is above the engine's max_lora_rank={max_rank}: raise llm.max_lora_rank to one of "
                     f"{fits}, or train a smaller rank")  # fmt: skip
    served: dict[str, tuple[Any, ...]] = {
        "use_dora": (False, None),
        "modules_to_save": (None, []),
        "bias": ("none", None),
    }
    for key, fine in served.items():
        if key in adapter_config and adapter_config[key] not in fine:
            found.append(f"{key}={adapter_config[key]!r}: vLLM does not serve it (use_dora false, modules_to_save "
                         "null, bias none)")  # fmt: skip
    return found


def _tensor_problems(tensors: dict[str, Any], base_config: dict[str, Any], rank: int) -> list[str]:
    kind = str(base_config.get("model_type"))
    allowed = LORA_MODULES.get(kind)
    if allowed is None:
        return [f"the base is a {kind!r}: adapters are served for {', '.join(sorted(LORA_MODULES))}"]
    found = []
    layers = int(base_config["num_hidden_layers"])
    for name, tensor in sorted(tensors.items()):
        match = TENSOR_NAME.match(name)
        if match is None:
            found.append(f"tensor {name}: not a LoRA weight of a decoder layer (base_model.model.model.layers.<i>."
                         "<self_attn|mlp>.<module>.lora_<A|B>.weight)")  # fmt: skip
            continue
        layer, module, part = int(match["layer"]), match["module"], match["part"]
        if module not in allowed:
            found.append(f"tensor {name}: {kind} has no LoRA module {module!r} (vLLM applies LoRA to "
                         f"{', '.join(allowed)})")  # fmt: skip
        elif layer >= layers:
            found.append(f"tensor {name}: layer {layer}, and the base has {layers}")
        else:
            fan_in, fan_out = module_shape(base_config, module)
            want = (rank, fan_in) if part == "A" else (fan_out, rank)
            if tuple(tensor.shape) != want:
                found.append(
                    f"tensor {name}: shape {tuple(tensor.shape)}; the base's {module} at r={rank} needs {want}"
                )
    return found


def build(adapter_dir: Path, base_payload: Path, out_dir: Path, *, name: str, max_rank: int) -> Path:
    """`<out_dir>/<name>/<name>.tar.gz` (the adapter's config and safetensors at its root), beside
    them and their manifest, and a payload manifest that lists the archive alone (what the stack
    ships: S3PrefixModelData copies it under a key that keeps its ``.tar.gz``, which SageMaker
    requires of an adapter's ArtifactUrl and a CDK asset's key would cut to ``.gz``); BuildError
    listing every problem, before anything is written. `base_payload`: the llm payload folder
    (its config.json) with the manifest the builder wrote beside it."""
    config_path = adapter_dir / ADAPTER_CONFIG
    if not config_path.is_file():
        raise BuildError(f"{adapter_dir} has no {ADAPTER_CONFIG}: is it a PEFT LoRA adapter?")
    adapter_config = json.loads(config_path.read_text())
    tensors = _tensors(adapter_dir)
    base_record = read_manifest(base_payload.parent)["model"]
    base_config = json.loads((base_payload / "config.json").read_text())
    found = problems(adapter_config, tensors, base_config, str(base_record["source"]), max_rank=max_rank)
    if found:
        raise BuildError(f"adapter {name} ({adapter_dir}) is refused:\n" + "\n".join(f"  {p}" for p in found))
    from safetensors.torch import save_file

    target = out_dir / name
    work = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=out_dir if out_dir.exists() else None))
    try:
        files = work / "files"
        files.mkdir()
        shutil.copyfile(config_path, files / ADAPTER_CONFIG)
        save_file(
            {k: v.contiguous() for k, v in tensors.items()}, str(files / ADAPTER_WEIGHTS), metadata={"format": "pt"}
        )
        out_dir.mkdir(parents=True, exist_ok=True)
        packed = pack_directory(files, work / f"{name}.tar.gz")
        archive = files / packed.name
        packed.rename(archive)
        write_manifest(files, COMPONENT, [files / ADAPTER_CONFIG, files / ADAPTER_WEIGHTS],
                       adapter={"name": name, "source": str(adapter_dir.resolve()), "rank": int(adapter_config["r"]),
                                "archive_sha256": sha256_file(archive)},
                       base={"source": base_record["source"], "revision": base_record.get("revision")})  # fmt: skip
        write_manifest(files, "payload", {archive.name: archive}, name=PAYLOAD_MANIFEST)
        shutil.rmtree(target, ignore_errors=True)
        files.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target / f"{name}.tar.gz"


def make_tiny_adapter(base_payload: Path, out_dir: Path, *, seed: int, rank: int = 8, alpha: int = 16) -> Path:
    """A random LoRA adapter for the tiny base, as PEFT saves one, over every module vLLM applies
    LoRA to. Its B matrices are random too (PEFT starts them at zero: a no-op), so that each seed's
    adapter answers differently from the base and from each other."""
    import torch
    from safetensors.torch import save_file

    base_config = json.loads((base_payload / "config.json").read_text())
    base_source = str(read_manifest(base_payload.parent)["model"]["source"])
    modules = LORA_MODULES[str(base_config["model_type"])]
    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for layer in range(int(base_config["num_hidden_layers"])):
        for module in modules:
            block = "self_attn" if module in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"
            fan_in, fan_out = module_shape(base_config, module)
            prefix = f"base_model.model.model.layers.{layer}.{block}.{module}"
            tensors[f"{prefix}.lora_A.weight"] = (torch.randn(rank, fan_in, generator=generator) * 0.2).to(
                torch.bfloat16
            )
            tensors[f"{prefix}.lora_B.weight"] = (torch.randn(fan_out, rank, generator=generator) * 0.2).to(
                torch.bfloat16
            )
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out_dir / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": base_source, "r": rank,
              "lora_alpha": alpha, "lora_dropout": 0.0, "bias": "none", "target_modules": sorted(modules),
              "fan_in_fan_out": False, "modules_to_save": None, "use_rslora": False, "use_dora": False,
              "inference_mode": True}  # fmt: skip
    (out_dir / ADAPTER_CONFIG).write_text(json.dumps(config, indent=2) + "\n")
    return out_dir
