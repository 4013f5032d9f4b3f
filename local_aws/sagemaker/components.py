"""Inference components: what SageMaker keeps of each (DescribeInferenceComponent's fields), in
the account's and region's store (on moto's SageMaker backend: a reset drops it with it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from moto.sagemaker import models as sm_models


@dataclass
class InferenceComponent:
    """What DescribeInferenceComponent tells of a component."""

    name: str
    arn: str
    endpoint_name: str
    endpoint_arn: str
    variant_name: str
    specification: dict[str, Any]
    copies: int
    status: str = "Creating"
    failure_reason: str | None = None
    created: datetime = field(default_factory=lambda: datetime.now(UTC))
    modified: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def hosting_key(self) -> tuple[str, str, str]:
        account, region = self.arn.split(":")[4], self.arn.split(":")[3]
        return account, region, component_key(self.name)

    def describe(self) -> dict[str, Any]:
        found = {
            "InferenceComponentName": self.name,
            "InferenceComponentArn": self.arn,
            "EndpointName": self.endpoint_name,
            "EndpointArn": self.endpoint_arn,
            "VariantName": self.variant_name,
            "Specification": self.specification,
            "RuntimeConfig": {"DesiredCopyCount": self.copies, "CurrentCopyCount": self.copies},
            "CreationTime": self.created,
            "LastModifiedTime": self.modified,
            "InferenceComponentStatus": self.status,
        }
        if self.failure_reason:
            found["FailureReason"] = self.failure_reason
        return found


def component_key(name: str) -> str:
    """The runtime's key of a component's containers (no endpoint name contains a slash)."""
    return f"inference-component/{name}"


def components(account_id: str, region_name: str) -> dict[str, InferenceComponent]:
    """The account's components in the region, kept on moto's SageMaker backend (a reset of
    the local AWS drops them with it)."""
    backend = sm_models.sagemaker_backends[account_id][region_name]
    found: dict[str, InferenceComponent] = backend.__dict__.setdefault("inference_components", {})
    return found
