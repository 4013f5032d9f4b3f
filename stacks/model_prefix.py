"""An uncompressed model payload under one S3 prefix, for SageMaker's ``ModelDataSource``.

With ``CompressionType: None`` SageMaker copies every object under the prefix to
``/opt/ml/model`` as it is: nothing is extracted before the container starts, which is most of
a ``model.tar.gz`` cold start for multi-GB weights (docs/BENCHMARKS.md, GPT-J).

CDK file assets land in the bootstrap bucket under their hash, not under one prefix with
their own names, so each payload file is an asset (hashed by the builder's manifest: a 12 GB
model is never re-read at synthesis) and one copy resource per file puts it at
``<prefix>/<relative path>`` in a bucket of the stack, with a single server-side S3
``CopyObject`` (no bytes pass through the function; the builder keeps every file under the
5 GB that one request may copy). The prefix is the payload manifest's sha256: a new payload
gets a new prefix, hence a new SageMaker model, and CloudFormation deletes the old copies
only once the update has succeeded.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import custom_resources as cr
from constructs import Construct

from artifacts_builder.manifest import ManifestError, read_manifest, sha256_file
from llm_contracts.gptj import PAYLOAD_MANIFEST
from stacks.model_asset import ModelAsset
from stacks.nag import acknowledge

#: The most one S3 CopyObject request copies.
MAX_COPY_BYTES = 5 * 1000**3


class ModelPrefix(Construct):
    """The files of a payload folder (as ``python -m artifacts_builder gptj`` writes it, with
    its manifest) copied under one prefix of a bucket owned by the stack.

    :param folder: the payload folder; every file its manifest lists is shipped, and the manifest.
    :param manifest_name: the manifest's file name in `folder` (default: ``payload-manifest.json``).
    :param copy_timeout: how long one file's copy may take (default: 10 minutes).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        folder: Path,
        manifest_name: str = PAYLOAD_MANIFEST,
        copy_timeout: Duration | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        files = _payload_files(folder, manifest_name)
        manifest_sha = files[manifest_name]["sha256"]
        self.prefix = f"{manifest_sha}/"

        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            enforce_ssl=True,
            # Only copies of the CDK assets live here; the copy resources delete them first.
            removal_policy=RemovalPolicy.DESTROY,
        )
        acknowledge(
            self.bucket,
            "AwsSolutions-S1",
            "Holds only copies of this stack's CDK assets, written by its deployment and read by its "
            "endpoint role; CloudTrail data events are the account's tool for auditing such reads",
        )
        role = iam.Role(
            self,
            "CopyRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="Copies the model payload's files from the CDK asset bucket under the model prefix",
        )
        log_group = logs.LogGroup(
            self, "CopyLogs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=RemovalPolicy.DESTROY
        )
        log_group.grant_write(role)
        # CopyObject needs PutObject on the target; DeleteObject runs when a payload is replaced or
        # the stack destroyed. The whole bucket, not this payload's prefix: CloudFormation deletes
        # the old payload's copies after the update, when this policy already names the new prefix
        # (and deletes the new ones on a rollback, when it names the old one again); the bucket
        # holds nothing but these copies. (Bucket.grant_put and grant_delete would add Abort*,
        # Put*Tagging, retention and legal holds, which nothing here uses.)
        iam.Grant.add_to_principal(
            grantee=role,
            actions=["s3:PutObject", "s3:DeleteObject"],
            resource_arns=[self.bucket.arn_for_objects("*")],
        )
        self._acknowledge_bucket_objects(
            role,
            "Copies and deletes payload files of this stack's model bucket, which holds nothing else; "
            "the old payload's prefix must stay deletable after an update has moved to a new one",
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::<" + Stack.of(self).get_logical_id(_cfn(log_group)) + ".Arn>:*]",
            "Log streams of the copy function, in its own log group",
        )

        timeout = copy_timeout or Duration.minutes(10)
        for name, entry in sorted(files.items()):
            construct_name = name.replace("/", "_")
            asset = ModelAsset(self, f"Asset_{construct_name}", path=folder / name, entry=entry)
            asset.grant_read_object(role)
            key = f"{self.prefix}{name}"
            location = {"Bucket": self.bucket.bucket_name, "Key": key}
            copy = cr.AwsSdkCall(
                service="S3",
                action="copyObject",
                parameters={**location, "CopySource": f"{asset.s3_bucket_name}/{asset.s3_object_key}"},
                physical_resource_id=cr.PhysicalResourceId.of(key),
            )
            cr.AwsCustomResource(
                self,
                f"Copy_{construct_name}",
                on_create=copy,
                on_update=copy,
                on_delete=cr.AwsSdkCall(service="S3", action="deleteObject", parameters=location),
                role=role,
                log_group=log_group,
                timeout=timeout,
                install_latest_aws_sdk=False,
            )
        self.s3_uri = f"s3://{self.bucket.bucket_name}/{self.prefix}"

    def _acknowledge_bucket_objects(self, construct: Construct, reason: str) -> None:
        bucket_id = Stack.of(self).get_logical_id(_cfn(self.bucket))
        acknowledge(construct, f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/*]", reason)

    def bind_to_container(self, role: iam.IGrantable) -> dict[str, Any]:
        """Let `role` list and read the model bucket (SageMaker lists the prefix, then copies
        every object under it to /opt/ml/model); the model container's properties that point
        at the prefix. The whole bucket, which holds only this stack's payloads: during an
        update, instances of the old model may still start and download the old prefix."""
        iam.Grant.add_to_principal(
            grantee=role, actions=["s3:GetObject"], resource_arns=[self.bucket.arn_for_objects("*")]
        )
        iam.Grant.add_to_principal(grantee=role, actions=["s3:ListBucket"], resource_arns=[self.bucket.bucket_arn])
        if isinstance(role, Construct):
            self._acknowledge_bucket_objects(
                role, "Reads the payload files of this stack's model bucket, which holds nothing else"
            )
        return {
            "model_data_source": sagemaker.CfnModel.ModelDataSourceProperty(
                s3_data_source=sagemaker.CfnModel.S3DataSourceProperty(
                    s3_uri=self.s3_uri, s3_data_type="S3Prefix", compression_type="None"
                )
            )
        }


def _cfn(construct: Construct) -> Any:
    return construct.node.default_child


def _payload_files(folder: Path, manifest_name: str) -> dict[str, dict[str, Any]]:
    """Every file the payload manifest lists, sizes checked (cheap), plus the manifest itself
    (small: hashed here)."""
    manifest = read_manifest(folder, manifest_name)
    files: dict[str, dict[str, Any]] = {}
    for name, entry in manifest["files"].items():
        parts = name.split("/")
        if name.startswith("/") or any(part in ("", ".", "..") or len(part.encode()) > 255 for part in parts):
            raise ManifestError(
                f"{folder / manifest_name} names {name!r}: a payload file must be a relative path without "
                "'.', '..' or empty segments (SageMaker writes it under /opt/ml/model); rebuild the payload"
            )
        path = folder / name
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise ManifestError(
                f"{path} is listed in {folder / manifest_name} but missing: rebuild the payload"
            ) from None
        if size != entry["size"]:
            raise ManifestError(
                f"{path} is {size} bytes but {folder / manifest_name} says {entry['size']}: the file changed "
                "after the build; rebuild the payload"
            )
        if size > MAX_COPY_BYTES:
            raise ManifestError(
                f"{path} is {size / 1e9:.1f} GB; one S3 copy takes at most 5 GB: rebuild with a smaller "
                "--shard-size-mb (python -m artifacts_builder gptj --help)"
            )
        files[name] = dict(entry)
    path = folder / manifest_name
    files[manifest_name] = {"sha256": sha256_file(path), "size": path.stat().st_size}
    return files
