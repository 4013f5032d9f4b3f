"""A LoRA adapter as an adapter inference component (SageMaker Developer Guide, "Fine-tune models
with adapter inference components"; CloudFormation ``AWS::SageMaker::InferenceComponent``,
``Specification.BaseInferenceComponentName``): the adapter's ``.tar.gz`` (``python -m
artifacts_builder lora``) in S3, served on the copies of an endpoint's inference component,
invoked by its own name. It has no compute of its own (the API reference: "Omit
[ComputeResourceRequirements] if your request is meant to create an adapter inference
component"), so adding or removing one changes nothing of the base's component or its engine.

The base's engine must serve adapters: AWS's vLLM image with LoRA on and its runtime adapter
routes (``llm_contracts.lora.environment``), which LlmStack sets from ``llm.adapters``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Names
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from llm_inference_cdk.endpoint import SageMakerEndpoint
from llm_inference_cdk.endpoint_base import SageMakerEndpointBase
from llm_inference_cdk.model_data import S3PrefixModelData
from llm_inference_cdk.props import PropError


@dataclass(frozen=True, kw_only=True)
class AdapterComponentProps:
    """An adapter inference component.

    :param archive: the adapter's ``.tar.gz``, its ``adapter_config.json`` and
        ``adapter_model.safetensors`` at the archive's root, in a folder whose payload manifest
        (``payload-manifest.json``) lists it alone, as ``python -m artifacts_builder lora`` writes
        both. It is shipped as :class:`S3PrefixModelData` ships a payload, under a key that keeps
        its name: SageMaker takes an adapter's ArtifactUrl only with the ``.tar.gz`` suffix (the API
        reference), which a CDK file asset's key cuts to ``.gz``.
    """

    archive: Path

    def __post_init__(self) -> None:
        if not str(self.archive).endswith(".tar.gz"):
            # The API reference: "a single gzip compressed tar archive (.tar.gz suffix)".
            raise PropError("AdapterComponentProps", "archive", str(self.archive), "a .tar.gz of the adapter's files")


class AdapterComponent(SageMakerEndpointBase):
    """A LoRA adapter served on `endpoint`'s inference component (inference-component mode only):
    the archive as an asset the endpoint's execution role reads, and the adapter component that
    names the endpoint's component as its base. ``grant_invoke`` and the ``metric_*`` methods are
    the adapter component's own (SageMaker publishes its invocation metrics by its
    ``InferenceComponentName``)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, endpoint: SageMakerEndpoint, props: AdapterComponentProps
    ) -> None:
        super().__init__(scope, construct_id)
        if endpoint.inference_component is None or endpoint.component_name is None:
            raise PropError(
                type(self).__name__, "endpoint", endpoint.node.path, "an endpoint in inference-component mode"
            )
        self._endpoint = endpoint
        shipped = S3PrefixModelData(self, "Archive", folder=props.archive.parent)
        # Which role SageMaker reads an adapter's artifact with is not documented: the endpoint's
        # execution role, which reads its model data, is the one an endpoint of components names.
        shipped.bind(self, endpoint.role)
        ic = sagemaker.CfnInferenceComponent
        self.component = ic(
            self,
            "Component",
            inference_component_name=Names.unique_resource_name(self, max_length=63, separator="-"),
            endpoint_name=endpoint.endpoint_name,
            variant_name=endpoint.variant_name,
            specification=ic.InferenceComponentSpecificationProperty(
                base_inference_component_name=endpoint.component_name,
                container=ic.InferenceComponentContainerSpecificationProperty(
                    artifact_url=f"{shipped.s3_uri}{props.archive.name}"
                ),
            ),
        )
        # After the base (its name is a string, not a reference), the archive's copy and the role's read of it.
        self.component.add_dependency(endpoint.inference_component)
        self.component.node.add_dependency(shipped)
        policy = endpoint.role.node.try_find_child("DefaultPolicy")
        if policy is not None:
            self.component.node.add_dependency(policy)

    @property
    def endpoint_name(self) -> str:
        return self._endpoint.endpoint_name

    @property
    def endpoint_arn(self) -> str:
        return self._endpoint.endpoint_arn

    @property
    def variant_name(self) -> str:
        return self._endpoint.variant_name

    @property
    def component_name(self) -> str:
        return str(self.component.inference_component_name)

    @property
    def component_arn(self) -> str:
        return str(self.component.attr_inference_component_arn)
