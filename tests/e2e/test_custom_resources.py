"""A CDK app's Lambda-backed custom resource through `cdk deploy` on the local AWS: its handler,
as CDK publishes it, runs for real; a handler published as an empty zip (what the whole-app
`aws:cdk:disable-asset-staging` made of it, issue 28) or without its file fails the stack as
AWS fails it."""

from __future__ import annotations

import json
import secrets
import shutil
from pathlib import Path
from typing import Any

import pytest

from local_aws import LocalAws
from local_aws.cli.cdk import Cdk, CdkError
from tests.e2e.helpers import handler_output, stack_of

pytestmark = pytest.mark.e2e

KEY = "written-by-the-handler"


def app(outdir: Path, stack_name: str) -> Path:
    """A stack with a bucket and an AwsCustomResource writing an object into it (deleting it on
    delete), synthesized into `outdir` as the CDK CLI would."""
    from aws_cdk import App, RemovalPolicy, Stack
    from aws_cdk import aws_s3 as s3
    from aws_cdk import custom_resources as cr

    stack = Stack(App(outdir=str(outdir)), stack_name)
    bucket = s3.Bucket(stack, "Data", removal_policy=RemovalPolicy.DESTROY)
    location = {"Bucket": bucket.bucket_name, "Key": KEY}
    cr.AwsCustomResource(
        stack,
        "Write",
        on_create=cr.AwsSdkCall(
            service="S3",
            action="putObject",
            parameters={**location, "Body": "x"},
            physical_resource_id=cr.PhysicalResourceId.of(KEY),
        ),
        on_delete=cr.AwsSdkCall(service="S3", action="deleteObject", parameters=location),
        policy=cr.AwsCustomResourcePolicy.from_sdk_calls(resources=[bucket.arn_for_objects("*")]),
        install_latest_aws_sdk=False,
    )
    stack.node.root.synth()  # type: ignore[attr-defined]
    return outdir


def handler_asset(assembly: Path, stack: str) -> tuple[str, Path]:
    """(hash, staged folder) of the stack's one zip asset: the custom resource's handler."""
    assets = json.loads((assembly / f"{stack}.assets.json").read_text())["files"]
    ((asset_hash, asset),) = [(h, a) for h, a in assets.items() if a["source"].get("packaging") == "zip"]
    return asset_hash, assembly / asset["source"]["path"]


def republished(assembly: Path, stack: str, files: dict[str, str] | None) -> None:
    """The handler's staged folder holding `files` instead (None: gone, as the jsii runtime's
    folder was by publishing time when staging was off), under a new asset hash, and the template
    naming it under a new one too: the CLI publishes nothing under a key the bucket already has
    (another test's stack, of the same template and handler)."""
    old, folder = handler_asset(assembly, stack)
    new = secrets.token_hex(32)
    shutil.rmtree(folder)
    if files is not None:
        staged = folder.with_name(folder.name.replace(old, new))  # the staged folder is named by it too
        staged.mkdir()
        for name, content in files.items():
            (staged / name).write_text(content)
    assets = json.loads((assembly / f"{stack}.assets.json").read_text())["files"]
    (template,) = [h for h, a in assets.items() if a["source"]["path"] == f"{stack}.template.json"]
    renamed = {old: new, template: secrets.token_hex(32)}
    for name in (f"{stack}.assets.json", f"{stack}.template.json", "manifest.json"):
        path = assembly / name
        text = path.read_text()
        for before, after in renamed.items():
            text = text.replace(before, after)
        path.write_text(text)


@pytest.fixture
def deployable(cdk: Cdk, tmp_path: Path) -> Any:
    def make(stack: str) -> Path:
        assembly = app(tmp_path / stack, stack)
        cdk.bootstrap(assembly)
        return assembly

    return make


def keys(aws: LocalAws, stack: str) -> list[str]:
    s3 = aws.client("s3")
    (bucket,) = [b["Name"] for b in s3.list_buckets()["Buckets"] if b["Name"].startswith(stack.lower())]
    return [o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])]


def test_the_handler_cdk_publishes_runs_and_logs(cdk: Cdk, local_aws: LocalAws, deployable: Any) -> None:
    assembly = deployable("CustomResourceStack")
    cdk.deploy(assembly, ["CustomResourceStack"])
    assert keys(local_aws, "CustomResourceStack") == [KEY]
    ((function, output),) = handler_output(local_aws, "CustomResourceStack").items()
    assert function.startswith("AWS679f53fac002430cb0da5b7982bd2287")
    assert any(m.startswith("INIT_START Runtime Version: nodejs:") for m in output)
    assert any('"RequestType":"Create"' in m for m in output)
    assert any('\tINFO\tResponding {"Status":"SUCCESS"' in m for m in output)
    cdk.destroy(assembly, ["CustomResourceStack"])


def test_a_handler_published_as_an_empty_zip_fails_the_stack_with_lambdas_refusal(
    cdk: Cdk, local_aws: LocalAws, deployable: Any
) -> None:
    """The fault of issue 28: the handler's folder gone when the CLI publishes (it zips nothing and
    says nothing), Lambda refusing the empty zip."""
    assembly = deployable("EmptyHandlerStack")
    republished(assembly, "EmptyHandlerStack", None)
    with pytest.raises(CdkError, match="Uploaded file must be a non-empty zip"):
        cdk.deploy(assembly, ["EmptyHandlerStack"])
    assert stack_of(local_aws, "EmptyHandlerStack")["StackStatus"] == "ROLLBACK_COMPLETE"
    cdk.destroy(assembly, ["EmptyHandlerStack"])


def test_a_handler_zip_without_its_file_fails_the_stack_with_the_import_error(
    cdk: Cdk, local_aws: LocalAws, deployable: Any
) -> None:
    assembly = deployable("NoHandlerStack")
    republished(assembly, "NoHandlerStack", {"README.md": "the handler's index.js is missing"})
    with pytest.raises(CdkError, match=r"Runtime\.ImportModuleError"):
        cdk.deploy(assembly, ["NoHandlerStack"])
    assert stack_of(local_aws, "NoHandlerStack")["StackStatus"] == "ROLLBACK_COMPLETE"
    cdk.destroy(assembly, ["NoHandlerStack"])
