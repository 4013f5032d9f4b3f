"""Synthesis helpers: stand-in artifacts, the app synthesized as the CDK CLI would, and ways to
look into the templates."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import App
from aws_cdk.assertions import Template

from llm_contracts.gptj import PAYLOAD_MANIFEST
from llm_contracts.manifest import write_manifest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACT_FILES = {"gpt2": "model.tar.gz", "inf2": "bundle.tar.gz"}
#: The GPT-J stand-in payload folder (shipped uncompressed under an S3 prefix): a weights
#: shard, GPT-J 6B's config (the vllm engine's memory check reads it), a file in a subfolder,
#: and the payload manifest.
GPTJ_CONFIG = {"model_type": "gptj", "n_layer": 28, "n_embd": 4096, "n_head": 16, "n_positions": 2048,
               "vocab_size": 50400, "rotary_dim": 64, "torch_dtype": "float16"}  # fmt: skip
GPTJ_PAYLOAD = {
    "model-00001-of-00001.safetensors": b"weights" * 64,
    "config.json": json.dumps(GPTJ_CONFIG).encode(),
    "code/inference.py": b"#" * 64,
}
#: The inf2 bundle unpacked (what inf2.platform=sagemaker ships under an S3 prefix), listed by its
#: inner manifest: a hub bundle's files.
INF2_BUNDLE = {"serving.properties": b"engine=Python\n", "model.py": b"#" * 64, "hub-files.json": b"{}"}


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


def make_artifacts(root: Path, components: tuple[str, ...] = ("gpt2", "gptj", "inf2")) -> Path:
    """Small stand-ins for the built payloads of `components`: the stacks only upload and hash them."""
    for component, name in ARTIFACT_FILES.items():
        if component not in components:
            continue
        folder = root / component
        folder.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(f"{component} payload stand-in\n".encode() * 64)
        write_manifest(folder, component, [folder / name])
    if "gptj" in components:
        payload = root / "gptj" / "model"
        for name, data in GPTJ_PAYLOAD.items():
            (payload / name).parent.mkdir(parents=True, exist_ok=True)
            (payload / name).write_bytes(data)
        write_manifest(payload, "gptj-payload", {name: payload / name for name in GPTJ_PAYLOAD}, name=PAYLOAD_MANIFEST)
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


def synthesize(outdir: Path, artifacts: Path, **overrides: Any) -> Synthesized:
    """Every stack synthesized; fails if one is left out."""
    synthesized, left_out = synthesize_some(outdir, artifacts, **overrides)
    assert not left_out, left_out
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
