"""Every asset the CDK CLI publishes exists, with something in it, after the app has exited.

`cdk synth` runs the app in a process of its own; the CLI publishes later, from the paths the
app wrote into ``cdk.out/*.assets.json``. A path inside a folder of that process (the jsii
runtime's copy of aws-cdk-lib under /tmp, where the custom resources' handlers live) is gone by
then, and the CLI would zip nothing (aws/aws-cdk#18459): so the assets are read from the
assembly only after the CLI has exited, in every variant of every stack.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.infra.helpers import ROOT, make_artifacts

#: Every variant that changes which assets a stack has, each at least once: GPT-J's engines
#: and its payload as a prefix or a model.tar.gz, each endpoint mode of the SageMaker stacks,
#: GPT-2's image built from its folder or given, Inf2 on EC2 with its VPC made (its
#: default-security-group handler) or given, and on SageMaker (its update check; async, whose
#: assets hold the realtime one's).
VARIANTS: dict[str, dict[str, str]] = {
    "defaults": {},
    "toolkit-components-existing-vpc": {
        "gptj.engine": "hf-toolkit",
        "gptj.endpoint_mode": "inference-component",
        "gptj.min_copies": "0",
        "gpt2.endpoint_mode": "inference-component",
        "gpt2.min_copies": "0",
        "gpt2.image_uri": "111122223333.dkr.ecr.us-east-1.amazonaws.com/gpt2:1",
        "inf2.vpc_id": "vpc-0123456789abcdef0",
        "inf2.subnet_id": "subnet-0a1b2c3d",
        "inf2.availability_zone": "us-east-1a",
    },
    "async-tarball-inf2-sagemaker": {
        "gptj.engine": "hf-toolkit",
        "gptj.endpoint_mode": "async",
        "gpt2.endpoint_mode": "async",
        "gptj.model_data": "<tarball>",
        "inf2.platform": "sagemaker",
        "inf2.endpoint_mode": "async",
    },
}
RESERVED_CONTEXT_WARNING = "reserved context key"


def _sources(assembly: Path) -> list[tuple[str, Path, str]]:
    """(asset id, source path, packaging) of every file and image asset of every stack."""
    found = []
    for manifest in sorted(assembly.glob("*.assets.json")):
        assets: dict[str, Any] = json.loads(manifest.read_text())
        for asset_id, asset in assets.get("files", {}).items():
            source = asset["source"]
            if "path" in source:  # an executable source makes its file at publishing time
                found.append((asset_id, assembly / source["path"], source.get("packaging", "file")))
        for asset_id, asset in assets.get("dockerImages", {}).items():
            if "directory" in asset["source"]:
                found.append((asset_id, assembly / asset["source"]["directory"], "docker"))
    return found


def _empty(path: Path, packaging: str) -> str | None:
    """Why the CLI would publish nothing useful from `path`, or None."""
    if not path.exists():
        return f"{path} does not exist"
    if packaging == "file":
        return None if path.is_file() and path.stat().st_size > 0 else f"{path} is not a non-empty file"
    if not path.is_dir():
        return f"{path} is not a folder ({packaging})"
    if not any(p.is_file() and p.stat().st_size > 0 for p in path.rglob("*")):
        return f"{path} holds no file with content"
    return None


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_asset_source_outlives_the_app(variant: str, tmp_path: Path, cdk_cli: Path) -> None:
    artifacts = make_artifacts(tmp_path / "artifacts")
    context = {"project.artifacts_dir": str(artifacts), **VARIANTS[variant]}
    if context.get("gptj.model_data") == "<tarball>":
        context["gptj.model_data"] = str(artifacts / "gpt2" / "model.tar.gz")
    out = tmp_path / "cdk.out"
    command = [str(cdk_cli), "synth", "--all", "--quiet", "-o", str(out)]
    command += [arg for key, value in context.items() for arg in ("-c", f"{key}={value}")]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]

    sources = _sources(out)
    stacks = {m.name.removesuffix(".assets.json") for m in out.glob("*.assets.json")}
    assert stacks == {"Gpt2Stack", "GptjStack", "LlmStack", "Inf2Stack"}
    # Each stack publishes its template and its handlers or payloads at least.
    assert len(sources) > len(stacks)
    problems = [f"{asset_id}: {why}" for asset_id, path, kind in sources if (why := _empty(path, kind))]
    assert not problems, "\n".join(problems)
    assert RESERVED_CONTEXT_WARNING not in result.stdout + result.stderr
