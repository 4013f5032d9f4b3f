"""Where a SageMaker model's files come from, and the grant to read them.

:class:`ModelData` says how SageMaker gets the files into ``/opt/ml/model``: a
``model.tar.gz`` that it extracts (a local file published as an asset, or an object in your
bucket) or an uncompressed S3 prefix whose objects it copies as they are (one in your bucket,
or :class:`S3PrefixModelData`, which copies a local payload folder under a prefix of a bucket
of its own). With ``CompressionType: None`` nothing is extracted before the container starts,
which is most of a ``model.tar.gz`` cold start for multi-GB weights (docs/BENCHMARKS.md, GPT-J).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aws_cdk import AssetHashType, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import custom_resources as cr
from constructs import Construct

from llm_contracts.manifest import (
    MANIFEST_NAME,
    PAYLOAD_MANIFEST,
    ManifestError,
    entry_for,
    read_manifest,
    sha256_file,
    write_payload_manifest,
)
from llm_inference_cdk.nag import acknowledge
from llm_inference_cdk.props import PropError
from llm_inference_cdk.sdk_calls import SDK_CALL_FUNCTION, function_role
from llm_inference_cdk.storage import private_bucket

#: The most one S3 CopyObject request copies.
MAX_COPY_BYTES = 5 * 1000**3
_PREFIX = re.compile(r"^([^/].*/)?$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class BoundModelData:
    """What a model's container definition gets: the properties that point at the files, and
    their S3 URL (for outputs)."""

    container: Mapping[str, Any]
    url: str
    #: Resources that must exist before SageMaker creates the model (the copies of a payload).
    depends_on: tuple[Construct, ...] = field(default=())


class ModelData:
    """The model's files in S3, as SageMaker reads them. (Not an ABC: S3PrefixModelData is also
    a construct, whose metaclass an ABC's would conflict with.)"""

    @staticmethod
    def from_asset(path: str | Path, *, sha256: str | None = None) -> ModelData:
        """A local ``model.tar.gz``, published with the app's assets. Its hash is `sha256`, else
        the one the artifacts builder recorded beside it (``manifest.json``), else CDK hashes
        the file at every synthesis."""
        return _AssetModelData(Path(path), sha256)

    @staticmethod
    def from_bucket(bucket: s3.IBucket, key: str) -> ModelData:
        """A ``model.tar.gz`` already in S3; the role may read that object alone."""
        if not isinstance(key, str) or not key.endswith(".tar.gz"):
            raise PropError("ModelData.from_bucket", "key", key, "the key of a gzipped tar archive (.tar.gz)")
        return _ObjectModelData(bucket, key)

    @staticmethod
    def from_s3_prefix(bucket: s3.IBucket, prefix: str) -> ModelData:
        """Uncompressed files under `prefix` of `bucket` (``models/gptj/``): SageMaker copies each
        object to ``/opt/ml/model/<rest of its key>``; the role may list the bucket and read
        objects under the prefix alone."""
        if not isinstance(prefix, str) or not _PREFIX.match(prefix):
            raise PropError(
                "ModelData.from_s3_prefix", "prefix", prefix, "a key prefix ending in / such as models/gptj/"
            )
        return _PrefixModelData(bucket, prefix)

    def bind(self, scope: Construct, grantee: iam.IGrantable) -> BoundModelData:
        """Let `grantee` (the model's execution role) read the files; `scope` holds what the
        model data needs (an asset)."""
        raise NotImplementedError


def _prefix_source(uri: str, depends_on: Construct | None = None) -> BoundModelData:
    source = sagemaker.CfnModel.ModelDataSourceProperty(
        s3_data_source=sagemaker.CfnModel.S3DataSourceProperty(
            s3_uri=uri, s3_data_type="S3Prefix", compression_type="None"
        )
    )
    return BoundModelData({"model_data_source": source}, uri, (depends_on,) if depends_on else ())


class _AssetModelData(ModelData):
    def __init__(self, path: Path, sha256: str | None) -> None:
        self.path, self.sha256 = path, sha256

    def bind(self, scope: Construct, grantee: iam.IGrantable) -> BoundModelData:
        entry = {"sha256": self.sha256} if self.sha256 else None
        if entry is None and (self.path.parent / MANIFEST_NAME).is_file():
            entry = dict(entry_for(self.path))
        asset = ModelAsset(scope, "ModelData", path=self.path, entry=entry)
        asset.grant_read_object(grantee)
        return BoundModelData({"model_data_url": asset.s3_object_url}, asset.s3_object_url)


class _ObjectModelData(ModelData):
    def __init__(self, bucket: s3.IBucket, key: str) -> None:
        self.bucket, self.key = bucket, key

    def bind(self, scope: Construct, grantee: iam.IGrantable) -> BoundModelData:
        self.bucket.grant_read(grantee, self.key)
        url = self.bucket.s3_url_for_object(self.key)
        return BoundModelData({"model_data_url": url}, url)


class _PrefixModelData(ModelData):
    def __init__(self, bucket: s3.IBucket, prefix: str) -> None:
        self.bucket, self.prefix = bucket, prefix

    def bind(self, scope: Construct, grantee: iam.IGrantable) -> BoundModelData:
        self.bucket.grant_read(grantee, f"{self.prefix}*")
        return _prefix_source(self.bucket.s3_url_for_object(self.prefix))


#: aws-cdk-lib's context key that publishes an asset from its source path instead of a copy in
#: ``cdk.out`` (cx-api's DISABLE_ASSET_STAGING_CONTEXT).
STAGING_DISABLED = "aws:cdk:disable-asset-staging"


class ModelAsset(s3_assets.Asset):
    """A file asset whose hash is given (by default the sha256 the artifacts builder recorded
    in ``manifest.json`` beside the file), published from where it lies.

    CDK would otherwise read the whole file at every synthesis to fingerprint it, and copy it
    into ``cdk.out`` (12 GB for GPT-J's payload). The asset is made under a scope of its own,
    ``<scope>/<construct_id>``, on which staging is off (its id there is ``Default``):
    aws-cdk-lib's AssetStaging reads ``aws:cdk:disable-asset-staging`` with
    ``node.tryGetContext``, which looks up the construct tree, so this asset alone is published
    from `path`, and every other asset of the app (the custom resources' handlers, which live in
    a folder of the synthesizing process) is still copied into ``cdk.out`` before that process
    exits. `path` must still be there when the CLI publishes.

    :param path: the file.
    :param entry: its ``{"sha256", ...}`` (default: read from the builder's ``manifest.json``
        in the file's folder).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        path: Path,
        entry: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        entry = entry_for(path) if entry is None else entry
        unstaged = Construct(scope, construct_id)
        unstaged.node.set_context(STAGING_DISABLED, True)
        super().__init__(
            unstaged,
            "Default",
            path=str(path.resolve()),
            asset_hash=entry["sha256"],
            asset_hash_type=AssetHashType.CUSTOM,
            **kwargs,
        )
        self.sha256: str = entry["sha256"]

    def grant_read_object(self, grantee: iam.IGrantable) -> iam.Grant:
        """s3:GetObject on this asset's object alone (``Asset.grant_read`` would grant List and
        Get on the whole bootstrap bucket)."""
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["s3:GetObject"],
            resource_arns=[self.bucket.arn_for_objects(self.s3_object_key)],
        )


class S3PrefixModelData(Construct, ModelData):
    """The files of a model folder copied uncompressed under one prefix of a bucket owned by the
    stack; SageMaker copies them to ``/opt/ml/model`` as they are.

    The folder carries the library's payload manifest, ``payload-manifest.json``: every file to
    ship with its sha256 and size, so that synthesis never reads multi-GB weights (it checks
    sizes) and the prefix is named by the manifest's hash (a new payload, a new prefix)::

        {"schema": 1, "component": "payload",
         "files": {"model.safetensors": {"sha256": "<64 hex digits>", "size": 497764120},
                   "code/inference.py": {"sha256": "...", "size": 2048}}}

    Paths are relative to the folder (``/``-separated, no ``.``, ``..`` or empty segments), each
    file at most 5 GB (one S3 CopyObject); the format is ``llm_contracts.manifest``'s.
    :meth:`write_manifest` writes it for a folder.

    :param folder: the model folder; every file its manifest lists is shipped, and the manifest.
    :param manifest_name: the manifest's file name in `folder` (default: ``payload-manifest.json``).
    :param copy_timeout: how long one file's copy may take (default: 10 minutes).
    """

    @staticmethod
    def write_manifest(folder: str | Path, *, manifest_name: str = PAYLOAD_MANIFEST) -> Path:
        """Write the payload manifest of `folder`, listing every file under it with its sha256
        and size (each file is read once); returns its path. Run it again after a file changes."""
        return write_payload_manifest(Path(folder), name=manifest_name)

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

        # Only copies of the CDK assets live here; the copy resources delete them first.
        self.bucket = private_bucket(
            self,
            "Bucket",
            holds="only copies of this stack's CDK assets, written by its deployment and read by its endpoint role",
        )
        # The stack's SDK calls run in one function, on the role of the first construct that made
        # it (llm_inference_cdk/sdk_calls.py): a second payload (an adapter's archive beside the
        # model's) grants that role, or its copies are denied PutObject.
        existing = Stack.of(self).node.try_find_child(SDK_CALL_FUNCTION)
        if existing is not None:
            role, log_group = existing.role, None  # type: ignore[attr-defined]
        else:
            role, log_group = function_role(
                self,
                "Copy",
                "Copies the model payload's files from the CDK asset bucket under the model prefix",
                reuse=False,
            )
        assert role is not None
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
            copied = cr.AwsCustomResource(
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
            # After the role may write here: on an update that adds a payload, the shared role's
            # policy is updated in the same deployment, and CloudFormation orders only what depends.
            policy = role.node.try_find_child("DefaultPolicy")
            if policy is not None:
                copied.node.add_dependency(policy)
        self.s3_uri = f"s3://{self.bucket.bucket_name}/{self.prefix}"

    def _acknowledge_bucket_objects(self, construct: Construct, reason: str) -> None:
        bucket_id = Stack.of(self).get_logical_id(_cfn(self.bucket))
        acknowledge(construct, f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/*]", reason)

    def bind(self, scope: Construct, grantee: iam.IGrantable) -> BoundModelData:
        """Let `grantee` list and read the model bucket (SageMaker lists the prefix, then copies
        every object under it to /opt/ml/model). The whole bucket, which holds only this
        stack's payloads: during an update, instances of the old model may still start and
        download the old prefix."""
        iam.Grant.add_to_principal(
            grantee=grantee, actions=["s3:GetObject"], resource_arns=[self.bucket.arn_for_objects("*")]
        )
        iam.Grant.add_to_principal(grantee=grantee, actions=["s3:ListBucket"], resource_arns=[self.bucket.bucket_arn])
        if isinstance(grantee, Construct):
            self._acknowledge_bucket_objects(
                grantee, "Reads the payload files of this stack's model bucket, which holds nothing else"
            )
        return _prefix_source(self.s3_uri, depends_on=self)


def _cfn(construct: Construct) -> Any:
    return construct.node.default_child


def _payload_files(folder: Path, manifest_name: str) -> dict[str, dict[str, Any]]:
    """Every file the payload manifest lists, sizes checked (cheap), plus the manifest itself
    (small: hashed here)."""
    fix = (
        f"write it with S3PrefixModelData.write_manifest({str(folder)!r}) (llm_inference_cdk), or list each file "
        'as {"schema": 1, "files": {"<relative path>": {"sha256": "<hex>", "size": <bytes>}}} '
        "(S3PrefixModelData's docstring)"
    )
    manifest = read_manifest(folder, manifest_name, fix=fix)
    rewrite = f"rewrite the manifest (S3PrefixModelData.write_manifest({str(folder)!r}))"
    files: dict[str, dict[str, Any]] = {}
    for name, entry in manifest["files"].items():
        parts = name.split("/")
        if name.startswith("/") or any(part in ("", ".", "..") or len(part.encode()) > 255 for part in parts):
            raise ManifestError(
                f"{folder / manifest_name} names {name!r}: a payload file must be a relative path without "
                f"'.', '..' or empty segments (SageMaker writes it under /opt/ml/model); {rewrite}"
            )
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("size"), int)
            and isinstance(entry.get("sha256"), str)
            and _SHA256.match(entry["sha256"])
        ):
            raise ManifestError(
                f"{folder / manifest_name} lists {name!r} as {entry!r}: each file needs "
                f'{{"sha256": "<64 hex digits>", "size": <bytes>}}; {rewrite}'
            )
        path = folder / name
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise ManifestError(f"{path} is listed in {folder / manifest_name} but missing: {rewrite}") from None
        if size != entry["size"]:
            raise ManifestError(
                f"{path} is {size} bytes but {folder / manifest_name} says {entry['size']}: the file changed "
                f"after the manifest was written; {rewrite}"
            )
        if size > MAX_COPY_BYTES:
            raise ManifestError(
                f"{path} is {size / 1e9:.1f} GB; one S3 copy takes at most 5 GB: split it into files of at most "
                "5 GB (safetensors shards, for weights) and rewrite the manifest"
            )
        files[name] = dict(entry)
    path = folder / manifest_name
    files[manifest_name] = {"sha256": sha256_file(path), "size": path.stat().st_size}
    return files
