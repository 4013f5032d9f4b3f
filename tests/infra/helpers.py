"""Synthesis helpers: stand-in artifacts, the app synthesized as the CDK CLI would, and ways to
look into the templates."""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import App
from aws_cdk.assertions import Template

from llm_contracts.gptj import PAYLOAD_MANIFEST
from llm_contracts.manifest import write_manifest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACT_FILES = {"gpt2": "model.tar.gz", "inf2": "bundle.tar.gz"}
#: GPT-J 6B's config.json (the vllm engine's checks read it).
GPTJ_CONFIG = {"architectures": ["GPTJForCausalLM"], "model_type": "gptj", "n_layer": 28, "n_embd": 4096,
               "n_head": 16, "n_positions": 2048, "vocab_size": 50400, "rotary_dim": 64,
               "torch_dtype": "float16"}  # fmt: skip
#: A small real model's config (Qwen2.5-0.5B-Instruct's), the ``llm`` stand-in: it fits the
#: defaults' GPU, has a chat template, ties its embeddings.
QWEN_CONFIG = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
               "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
               "num_key_value_heads": 2, "max_position_embeddings": 32768, "vocab_size": 151936,
               "tie_word_embeddings": True, "torch_dtype": "bfloat16"}  # fmt: skip
QWEN_TOKENIZER_CONFIG = {"chat_template": "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
                                          "<|im_end|>\n{% endfor %}<|im_start|>assistant\n"}  # fmt: skip


def gptj_tensors(config: dict[str, Any]) -> dict[str, tuple[str, list[int]]]:
    """GPT-J's tensors (transformers' GPTJForCausalLM), fp16: 6,050,882,784 elements for GPT-J 6B."""
    hidden, vocab, inner = config["n_embd"], config["vocab_size"], 4 * config["n_embd"]
    tensors = {"transformer.wte.weight": [vocab, hidden], "transformer.ln_f.weight": [hidden],
               "transformer.ln_f.bias": [hidden], "lm_head.weight": [vocab, hidden],
               "lm_head.bias": [vocab]}  # fmt: skip
    for i in range(config["n_layer"]):
        layer = f"transformer.h.{i}"
        tensors |= {f"{layer}.ln_1.weight": [hidden], f"{layer}.ln_1.bias": [hidden]}
        tensors |= {f"{layer}.attn.{p}_proj.weight": [hidden, hidden] for p in ("q", "k", "v", "out")}
        tensors |= {f"{layer}.mlp.fc_in.weight": [inner, hidden], f"{layer}.mlp.fc_in.bias": [inner],
                    f"{layer}.mlp.fc_out.weight": [hidden, inner], f"{layer}.mlp.fc_out.bias": [hidden]}  # fmt: skip
    return {name: ("F16", shape) for name, shape in tensors.items()}


def llama_tensors(config: dict[str, Any], dtype: str = "BF16") -> dict[str, tuple[str, list[int]]]:
    """A Llama-layout model's tensors (Llama, Qwen2 with its q/k/v biases, Mistral)."""
    hidden, inner, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    head = config.get("head_dim") or hidden // config["num_attention_heads"]
    kv = config["num_key_value_heads"] * head
    q = config["num_attention_heads"] * head
    tensors = {"model.embed_tokens.weight": [vocab, hidden], "model.norm.weight": [hidden]}
    if not config.get("tie_word_embeddings"):
        tensors["lm_head.weight"] = [vocab, hidden]
    for i in range(config["num_hidden_layers"]):
        layer = f"model.layers.{i}"
        tensors |= {f"{layer}.input_layernorm.weight": [hidden], f"{layer}.post_attention_layernorm.weight": [hidden],
                    f"{layer}.self_attn.q_proj.weight": [q, hidden], f"{layer}.self_attn.k_proj.weight": [kv, hidden],
                    f"{layer}.self_attn.v_proj.weight": [kv, hidden], f"{layer}.self_attn.o_proj.weight": [hidden, q],
                    f"{layer}.mlp.gate_proj.weight": [inner, hidden], f"{layer}.mlp.up_proj.weight": [inner, hidden],
                    f"{layer}.mlp.down_proj.weight": [hidden, inner]}  # fmt: skip
        if config.get("model_type") == "qwen2":
            tensors |= {f"{layer}.self_attn.{p}_proj.bias": [n] for p, n in (("q", q), ("k", kv), ("v", kv))}
    return {name: (dtype, shape) for name, shape in tensors.items()}


def header_only_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    """A safetensors file's header for `tensors`, without their data: what synthesis reads of a
    multi-GB shard, in a few KB."""
    bits = {"F16": 16, "BF16": 16, "F32": 32, "I32": 32, "F8_E4M3": 8, "U8": 8}
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = bits[dtype] // 8
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded)


#: The stand-in payload folders (shipped uncompressed under an S3 prefix): a header-only weights
#: shard of the model, its config, its tokenizer's config; GPT-J's also a file in a subfolder.
PAYLOADS: dict[str, dict[str, bytes]] = {
    "gptj": {
        "config.json": json.dumps(GPTJ_CONFIG).encode(),
        "code/inference.py": b"#" * 64,
    },
    "llm": {
        "config.json": json.dumps(QWEN_CONFIG).encode(),
        "tokenizer_config.json": json.dumps(QWEN_TOKENIZER_CONFIG).encode(),
    },
}
SHARD = "model-00001-of-00001.safetensors"


def write_payload(payload: Path, files: dict[str, bytes], tensors: dict[str, tuple[str, list[int]]]) -> Path:
    """A payload folder of `files` and a header-only shard of `tensors`, with its payload manifest."""
    for name, data in files.items():
        (payload / name).parent.mkdir(parents=True, exist_ok=True)
        (payload / name).write_bytes(data)
    header_only_safetensors(payload / SHARD, tensors)
    names = [*files, SHARD]
    write_manifest(payload, "payload", {name: payload / name for name in names}, name=PAYLOAD_MANIFEST)
    return payload


#: The inf2 bundle unpacked (what inf2.platform=sagemaker ships under an S3 prefix), listed by its
#: inner manifest: a hub bundle's files.
INF2_BUNDLE = {"serving.properties": b"engine=Python\n", "model.py": b"#" * 64, "hub-files.json": b"{}"}


#: Each endpoint mode's settings for the two stacks of a causal language model (GptjStack, LlmStack):
#: their tests synthesize each mode once, for both.
ENDPOINT_MODES: dict[str, dict[str, str]] = {
    mode: {f"{section}.{key}": value for section in ("gptj", "llm") for key, value in keys.items()}
    for mode, keys in {
        "realtime": {},
        "inference-component": {"endpoint_mode": "inference-component", "min_copies": "0"},
        "async": {"endpoint_mode": "async"},
    }.items()
}


#: Both causal language models as inference components on ml.g5.12xlarge's four GPUs (issue 38):
#: GptjStack on vLLM with each copy's default one GPU, LlmStack's copies of two (the stand-in Qwen's
#: 14 heads split over 2, not 4). Shared, so that a module synthesizes it once.
COMPONENTS_ON_4_GPUS: dict[str, str] = {
    **{f"{section}.{key}": value for section in ("gptj", "llm") for key, value in (
        ("endpoint_mode", "inference-component"), ("instance_type", "ml.g5.12xlarge"))},
    "gptj.engine": "vllm",
    "llm.accelerators": "2",
}  # fmt: skip
#: GptjStack on the toolkit as an inference component whose copies get all four GPUs, a worker on each.
TOOLKIT_COMPONENT_ON_4_GPUS: dict[str, str] = {
    "gptj.engine": "hf-toolkit",
    "gptj.endpoint_mode": "inference-component",
    "gptj.instance_type": "ml.g5.12xlarge",
    "gptj.accelerators": "4",
    "gptj.model_server_workers": "4",
}


def regional_dlc_image(repository_and_tag: str) -> dict[str, Any]:
    """What an environment-agnostic stack writes for a Deep Learning Container's URI: the
    registry account looked up per region, then ``/<repository>:<tag>``."""
    from aws_cdk.assertions import Match

    region = {"Ref": "AWS::Region"}
    account = {"Fn::FindInMap": [Match.any_value(), region, "account"]}
    suffix = {"Ref": "AWS::URLSuffix"}
    return {"Fn::Join": ["", [account, ".dkr.ecr.", region, ".", suffix, f"/{repository_and_tag}"]]}


#: Both SageMaker stacks in the modes other than real-time: GptjStack's component scales to zero
#: (min_copies=0), Gpt2Stack's keeps a copy. Shared, so that a session synthesizes each once.
MODE_VARIANTS: dict[str, dict[str, Any]] = {
    "inference-component": {
        "gptj.endpoint_mode": "inference-component",
        "gptj.min_copies": "0",
        "gpt2.endpoint_mode": "inference-component",
    },
    "async": {"gptj.endpoint_mode": "async", "gpt2.endpoint_mode": "async"},
}


def cdk_context(**overrides: Any) -> dict[str, Any]:
    """cdk.json's context plus dotted overrides, as `cdk synth -c key=value` passes them."""
    context: dict[str, Any] = json.loads((ROOT / "cdk.json").read_text())["context"]
    context.update(overrides)
    return context


def make_artifacts(root: Path, components: tuple[str, ...] = ("gpt2", "gptj", "llm", "inf2")) -> Path:
    """Small stand-ins for the built payloads of `components`: the stacks only upload and hash them."""
    for component, name in ARTIFACT_FILES.items():
        if component not in components:
            continue
        folder = root / component
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(f"{component} payload stand-in\n".encode() * 64)
        write_manifest(folder, component, [folder / name])
    tensors = {"gptj": lambda: gptj_tensors(GPTJ_CONFIG), "llm": lambda: llama_tensors(QWEN_CONFIG)}
    for component, files in PAYLOADS.items():
        if component in components:
            write_payload(root / component / "model", files, tensors[component]())
    if "inf2" in components:
        bundle = root / "inf2" / "bundle"
        bundle.mkdir(exist_ok=True)
        for name, data in INF2_BUNDLE.items():
            (bundle / name).write_bytes(data)
        write_manifest(bundle, "inf2-bundle", {name: bundle / name for name in INF2_BUNDLE})
    return root


@dataclass
class Synthesized:
    app: App
    stacks: dict[str, Any]
    outdir: Path

    def template(self, name: str) -> Template:
        return Template.from_stack(self.stacks[name])

    def template_json(self, name: str) -> dict[str, Any]:
        return json.loads((self.outdir / f"{name}.template.json").read_text())  # type: ignore[no-any-return]


def synthesize(outdir: Path, artifacts: Path, *, may_leave_out: tuple[str, ...] = (), **overrides: Any) -> Synthesized:
    """Every stack synthesized (but those in `may_leave_out`); fails if another is left out."""
    synthesized, left_out = synthesize_some(outdir, artifacts, **overrides)
    assert not set(left_out) - set(may_leave_out), left_out
    return synthesized


def synthesize_some(outdir: Path, artifacts: Path, **overrides: Any) -> tuple[Synthesized, dict[str, str]]:
    """The app synthesized as the CDK CLI runs it, and the stacks it left out with the reason."""
    from app import build_app

    app = App(context=cdk_context(**{"project.artifacts_dir": str(artifacts), **overrides}), outdir=str(outdir))
    _, stacks, left_out = build_app(app)
    app.synth()  # runs the cdk-nag validation plugin: raises on any unacknowledged finding
    return Synthesized(app=app, stacks=stacks, outdir=outdir), left_out


_HASH = re.compile(r"[0-9a-f]{64}")


def normalized(template: dict[str, Any]) -> dict[str, Any]:
    """Asset hashes (S3 keys, image tags) change with every payload or container edit;
    snapshots compare the rest."""
    return json.loads(_HASH.sub("<asset-hash>", json.dumps(template)))  # type: ignore[no-any-return]


def resources_of(template: dict[str, Any], type_name: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == type_name}


def policy_statements(template: dict[str, Any]) -> list[dict[str, Any]]:
    statements = []
    for policy in resources_of(template, "AWS::IAM::Policy").values():
        statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return statements


def actions_of(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return [actions] if isinstance(actions, str) else list(actions)
