"""S3PrefixModelData's payload manifest, the library's own format, as a pip user writes and
ships one, in a Stack of its own."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from aws_cdk import App, Stack
from aws_cdk.assertions import Template

from llm_contracts.manifest import PAYLOAD_MANIFEST, ManifestError, read_manifest
from llm_inference_cdk import S3PrefixModelData


def model_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "my-model"
    (folder / "tokenizer").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"w" * 100)
    (folder / "tokenizer" / "tokenizer.json").write_text("{}")
    return folder


def shipped(folder: Path) -> set[str]:
    """The files S3PrefixModelData copies under its prefix, from the copies in its template."""
    stack = Stack(App(), "S")
    S3PrefixModelData(stack, "Files", folder=folder)
    copies = Template.from_stack(stack).find_resources("Custom::AWS").values()
    creates = [json.dumps(c["Properties"]["Create"]).replace("\\", "") for c in copies]
    return {match.group(1) for create in creates if (match := re.search(r'"Key":"[0-9a-f]{64}/([^"]+)"', create))}


def test_write_manifest_lists_every_file_in_the_documented_format(tmp_path: Path) -> None:
    folder = model_folder(tmp_path)
    path = S3PrefixModelData.write_manifest(folder)
    assert path == folder / PAYLOAD_MANIFEST
    manifest = json.loads(path.read_text())
    assert manifest["schema"] == 1 and manifest["component"] == "payload"
    assert set(manifest["files"]) == {"model.safetensors", "tokenizer/tokenizer.json"}
    assert manifest["files"]["model.safetensors"]["size"] == 100
    assert len(manifest["files"]["model.safetensors"]["sha256"]) == 64
    # Written again (a file changed), it does not list itself.
    S3PrefixModelData.write_manifest(folder)
    assert set(read_manifest(folder, PAYLOAD_MANIFEST)["files"]) == {"model.safetensors", "tokenizer/tokenizer.json"}
    assert shipped(folder) == {"model.safetensors", "tokenizer/tokenizer.json", PAYLOAD_MANIFEST}


def test_a_hand_written_manifest_of_the_documented_format_is_shipped(tmp_path: Path) -> None:
    folder = model_folder(tmp_path)
    (folder / PAYLOAD_MANIFEST).write_text(
        json.dumps({"schema": 1, "files": {"model.safetensors": {"sha256": "a" * 64, "size": 100}}})
    )
    assert shipped(folder) == {"model.safetensors", PAYLOAD_MANIFEST}


def test_a_folder_without_a_manifest_tells_a_library_user_what_to_provide(tmp_path: Path) -> None:
    folder = model_folder(tmp_path)
    with pytest.raises(ManifestError) as error:
        shipped(folder)
    message = str(error.value)
    assert f"{folder / PAYLOAD_MANIFEST} does not exist: write it with S3PrefixModelData.write_manifest(" in message
    assert '"files": {"<relative path>": {"sha256": "<hex>", "size": <bytes>}}' in message
    assert "artifacts_builder" not in message


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"model.safetensors": {"size": 100}}, r"lists 'model.safetensors' as \{'size': 100\}: each file needs"),
        (
            {"model.safetensors": {"sha256": "a" * 64, "size": 99}},
            r"is 100 bytes but .* says 99: .*rewrite the manifest",
        ),
        ({"gone.bin": {"sha256": "a" * 64, "size": 1}}, r"gone.bin is listed in .* but missing: rewrite the manifest"),
        ({"../up.bin": {"sha256": "a" * 64, "size": 1}}, r"names '../up.bin': a payload file must be a relative path"),
    ],
    ids=["no-sha256", "changed", "missing", "outside"],
)
def test_a_manifest_that_does_not_match_the_folder_says_how_to_fix_it(
    tmp_path: Path, files: dict[str, object], message: str
) -> None:
    folder = model_folder(tmp_path)
    (folder / PAYLOAD_MANIFEST).write_text(json.dumps({"schema": 1, "files": files}))
    with pytest.raises(ManifestError, match=message) as error:
        shipped(folder)
    assert "artifacts_builder" not in str(error.value)


def test_a_model_asset_is_published_from_its_file_and_other_assets_from_cdk_out(tmp_path: Path) -> None:
    """A ModelAsset is never copied into cdk.out (12 GB for GPT-J); every other asset of the app
    still is, so that it outlives the process that synthesized it (a Lambda handler's folder)."""
    from aws_cdk import aws_s3_assets as s3_assets

    from llm_inference_cdk import ModelAsset

    payload = tmp_path / "model.tar.gz"
    payload.write_bytes(b"weights" * 100)
    handler = tmp_path / "handler"
    handler.mkdir()
    (handler / "index.js").write_text("exports.handler = async () => ({})")
    outdir = tmp_path / "cdk.out"
    stack = Stack(App(outdir=str(outdir)), "S")
    model = ModelAsset(stack, "Model", path=payload, entry={"sha256": "ab" * 32})
    code = s3_assets.Asset(stack, "Code", path=str(handler))
    stack.node.root.synth()  # type: ignore[attr-defined]

    files = json.loads((outdir / "S.assets.json").read_text())["files"]
    assert files[model.asset_hash]["source"]["path"] == str(payload)
    staged = files[code.asset_hash]["source"]["path"]
    assert staged == f"asset.{code.asset_hash}" and (outdir / staged / "index.js").is_file()
    assert not any(p.stat().st_size == payload.stat().st_size for p in outdir.rglob("*") if p.is_file())
    assert model.node.path == "S/Model/Default" and stack.node.find_child("Model").node.default_child is model
