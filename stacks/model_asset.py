"""S3 file assets for multi-GB model payloads, hashed by the artifacts manifest."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aws_cdk import AssetHashType
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from artifacts_builder.manifest import entry_for


class ModelAsset(s3_assets.Asset):
    """A file asset whose hash is the sha256 the artifacts builder recorded.

    CDK would otherwise read the whole file at every synthesis to fingerprint it. Copies
    into ``cdk.out`` are avoided by the ``aws:cdk:disable-asset-staging`` context in
    ``cdk.json``.

    :param path: the file.
    :param entry: its ``{"sha256", "size"}`` (default: read from the builder's ``manifest.json``
        in the file's folder).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        path: Path,
        entry: Mapping[str, Any] | None = None,
        **kwargs: object,
    ) -> None:
        entry = entry_for(path) if entry is None else entry
        super().__init__(
            scope,
            construct_id,
            path=str(path.resolve()),
            asset_hash=entry["sha256"],
            asset_hash_type=AssetHashType.CUSTOM,
            **kwargs,  # type: ignore[arg-type]
        )
        self.sha256: str = entry["sha256"]
        self.size: int = entry["size"]

    def grant_read_object(self, grantee: iam.IGrantable) -> iam.Grant:
        """s3:GetObject on this asset's object alone (``Asset.grant_read`` would grant
        List and Get on the whole bootstrap bucket)."""
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["s3:GetObject"],
            resource_arns=[self.bucket.arn_for_objects(self.s3_object_key)],
        )

    def bind_to_container(self, role: iam.IGrantable) -> dict[str, Any]:
        """Let `role` read this object; the model container's properties that point at it
        (a ``model.tar.gz``, which SageMaker extracts into /opt/ml/model)."""
        self.grant_read_object(role)
        return {"model_data_url": self.s3_object_url}
