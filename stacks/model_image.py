"""The container image a model server runs, and the grant to pull it."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Stack
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from constructs import Construct

from stacks.config import ECR_IMAGE
from stacks.images import DlcImage


@dataclass(frozen=True)
class ModelImage:
    """An image URI and the ECR repository it lives in (pull is granted on that one alone)."""

    uri: str
    repository: ecr.IRepository

    def grant_pull(self, grantee: iam.IGrantable) -> iam.Grant:
        # Adds ecr:GetAuthorizationToken on "*": that action accepts no narrower resource.
        return self.repository.grant_pull(grantee)

    @classmethod
    def from_uri(cls, scope: Construct, construct_id: str, uri: str) -> ModelImage:
        """An ECR image given by URI (validated by the configuration)."""
        match = ECR_IMAGE.match(uri)
        if match is None:
            raise ValueError(f"{uri!r} is not an ECR image URI: <account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag>")
        arn = Stack.of(scope).format_arn(
            service="ecr",
            region=match["region"],
            account=match["account"],
            resource="repository",
            resource_name=match["repository"],
        )
        repository = ecr.Repository.from_repository_attributes(
            scope, construct_id, repository_arn=arn, repository_name=match["repository"]
        )
        return cls(uri=uri, repository=repository)

    @classmethod
    def from_dlc(cls, scope: Construct, construct_id: str, image: DlcImage) -> ModelImage:
        """An AWS Deep Learning Container, in the registry of the stack's region."""
        repository = ecr.Repository.from_repository_attributes(
            scope, construct_id, repository_arn=image.repository_arn(scope), repository_name=image.repository
        )
        return cls(uri=image.uri(scope), repository=repository)

    @classmethod
    def from_asset(cls, asset: ecr_assets.DockerImageAsset) -> ModelImage:
        """An image CDK builds from a folder and publishes to the bootstrap repository."""
        return cls(uri=asset.image_uri, repository=asset.repository)
