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
    stack = Stack(App(context={"aws:cdk:disable-asset-staging": True}), "S")
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
