"""Container images for model servers: an ECR URI, an image CDK builds from a folder, or an
AWS Deep Learning Container resolved for the stack's region (llm_inference_cdk.dlc)."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from constructs import Construct

from llm_contracts.aws import ECR_IMAGE
from llm_inference_cdk.dlc import DlcImage
from llm_inference_cdk.props import PropError


class ContainerImage(ABC):
    """The image a model server runs. :meth:`bind` grants a principal the pull of this image
    alone and returns its URI."""

    @staticmethod
    def from_uri(uri: str) -> ContainerImage:
        """An image in ECR, by URI (``<account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag>``
        or ``@sha256:<digest>``)."""
        match = ECR_IMAGE.match(uri) if isinstance(uri, str) else None
        if match is None:
            raise PropError(
                "ContainerImage", "uri", uri, "an ECR image URI: <account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag>"
            )
        return _EcrImage(uri, match)

    @staticmethod
    def from_dlc(image: DlcImage) -> ContainerImage:
        """An AWS Deep Learning Container, in the registry of the stack's region."""
        return _DlcImage(image)

    @staticmethod
    def from_asset(directory: str | Path, **options: Any) -> ContainerImage:
        """An image CDK builds from `directory` (its Dockerfile) and publishes at deploy;
        `options` go to ``DockerImageAsset`` (default platform: linux/amd64)."""
        return _AssetImage(Path(directory), options)

    @property
    def region(self) -> str | None:
        """The region of the image's registry, where the URI names one (None: the stack's own)."""
        return None

    @abstractmethod
    def bind(self, scope: Construct, grantee: iam.IGrantable) -> str:
        """Let `grantee` pull the image; returns its URI. `scope` holds what the image needs."""


class _EcrImage(ContainerImage):
    def __init__(self, uri: str, match: re.Match[str]) -> None:
        self.uri, self._match = uri, match

    @property
    def region(self) -> str | None:
        return self._match["region"]

    def bind(self, scope: Construct, grantee: iam.IGrantable) -> str:
        arn = Stack.of(scope).format_arn(
            service="ecr",
            region=self._match["region"],
            account=self._match["account"],
            resource="repository",
            resource_name=self._match["repository"],
        )
        repository = ecr.Repository.from_repository_attributes(
            scope, "ImageRepository", repository_arn=arn, repository_name=self._match["repository"]
        )
        # Adds ecr:GetAuthorizationToken on "*": that action accepts no narrower resource.
        repository.grant_pull(grantee)
        return self.uri


class _DlcImage(ContainerImage):
    def __init__(self, image: DlcImage) -> None:
        self.image = image

    def bind(self, scope: Construct, grantee: iam.IGrantable) -> str:
        repository = ecr.Repository.from_repository_attributes(
            scope,
            "ImageRepository",
            repository_arn=self.image.repository_arn(scope),
            repository_name=self.image.repository,
        )
        repository.grant_pull(grantee)
        return self.image.uri(scope)


class _AssetImage(ContainerImage):
    def __init__(self, directory: Path, options: dict[str, Any]) -> None:
        self.directory, self.options = directory, {"platform": ecr_assets.Platform.LINUX_AMD64, **options}

    def bind(self, scope: Construct, grantee: iam.IGrantable) -> str:
        asset = ecr_assets.DockerImageAsset(scope, "Image", directory=str(self.directory), **self.options)
        asset.repository.grant_pull(grantee)
        return asset.image_uri
