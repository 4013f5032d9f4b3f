"""Inf2Stack on ``inf2.platform=sagemaker``: the same bundle, served by the same LMI neuronx image,
on a SageMaker real-time or asynchronous endpoint of an ``ml.inf2`` type, through the construct
library's ``SageMakerEndpoint`` (autoscaling between ``min_capacity`` and ``max_capacity``,
updates guarded by the endpoint's alarms and rolled back on them, the alarm topic, the
dashboard, ``grant_invoke``), as the GPT-2 and GPT-J stacks serve theirs.

The bundle's files go uncompressed under an S3 prefix (``S3PrefixModelData``, listed by the
bundle's inner manifest), which SageMaker places in ``/opt/ml/model`` before the container
starts: the form LMI documents for SageMaker. The container reaches the network only when the
bundle makes it download the model from the hub; a bundle that ships its model runs isolated.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from aws_cdk import CfnOutput, Stack

from llm_contracts.manifest import MANIFEST_NAME
from llm_inference_cdk import ContainerImage, S3PrefixModelData, SageMakerEndpoint, SageMakerEndpointProps
from llm_inference_cdk.dlc import djl_neuronx
from project_config import Inf2Settings
from project_config.inf2 import check_sagemaker_bundle
from stacks.endpoint import add_endpoint

# The bundle's checks are the configuration's: named here too, beside the endpoint they check.
__all__ = ["add_sagemaker_endpoint", "check_sagemaker_bundle"]


@dataclass(frozen=True)
class _EndpointSection:
    """The inf2 section as stacks.endpoint.add_endpoint reads a SageMaker stack's section."""

    endpoint: SageMakerEndpointProps
    alarm_topic_arn: str | None
    alarm_email: str | None

    def container_environment(self) -> dict[str, str]:
        # serving.properties in the bundle holds every setting of the server.
        return {}


def add_sagemaker_endpoint(stack: Stack, settings: Inf2Settings, *, ships_model: bool) -> SageMakerEndpoint:
    """The endpoint and its extras; `ships_model`: the bundle holds the model (else the container
    downloads it from the hub, which needs the network)."""
    endpoint = settings.endpoint
    assert endpoint is not None
    isolated = ships_model if settings.enable_network_isolation is None else settings.enable_network_isolation
    model_data = S3PrefixModelData(stack, "BundleFiles", folder=settings.bundle, manifest_name=MANIFEST_NAME)
    ms = settings.model_server
    image = (
        ContainerImage.from_uri(ms.image_uri)
        if ms.image_uri is not None
        else ContainerImage.from_dlc(djl_neuronx(ms.image_version))
    )
    section = _EndpointSection(
        dataclasses.replace(endpoint, enable_network_isolation=isolated),
        settings.alarm_topic_arn,
        settings.alarm_email,
    )
    made = add_endpoint(stack, section, image, model_data)
    CfnOutput(stack, "ImageUri", value=made.image_uri)
    return made
