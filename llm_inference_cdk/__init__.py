"""LLM inference on AWS, as CDK constructs.

Public API (``from llm_inference_cdk import ...``):

* :class:`SageMakerEndpoint` with :class:`SageMakerEndpointProps`, :class:`AutoscalingProps`,
  :class:`AlarmProps` and :class:`DeploymentProps`: model, endpoint config, endpoint with its
  update policy (deployment guardrails, rolled back on its alarms), autoscaling and alarms, with
  ``grant_invoke``, ``metric_*`` and ``dashboard_widgets`` methods; in one of three modes:
  real-time (the default), an inference component (:class:`InferenceComponentProps`: copies
  scaled by their invocations, down to zero) or asynchronous (:class:`AsyncInferenceProps`:
  requests and results in S3, scaled on the backlog, down to zero).
* :meth:`SageMakerEndpoint.from_endpoint_name` and :meth:`SageMakerEndpoint.from_endpoint_attributes`:
  an endpoint that exists outside the app, as an :class:`ISageMakerEndpoint` to ``grant_invoke``
  and read ``metric_*`` from (:class:`SageMakerEndpointBase`: the grants and metrics both share).
* :class:`AlarmTopic`: an encrypted SNS topic for alarms, with an optional e-mail subscription
  (:class:`NotificationTopic`: one for other notices, which CloudWatch may not publish to);
  :class:`ServiceDashboard`: a CloudWatch dashboard of constructs' ``dashboard_widgets()``.
* :class:`ModelData` (a ``model.tar.gz`` asset or S3 object, an uncompressed S3 prefix) and
  :class:`S3PrefixModelData`, which ships a local payload folder uncompressed under an S3 prefix.
* :class:`ContainerImage` (an ECR URI, an image built from a folder, or a Deep Learning
  Container) with :func:`huggingface_inference`, :func:`vllm_sagemaker` and :func:`djl_neuronx`,
  which resolve AWS's images per region.
* :class:`Inf2Server` with :class:`Inf2ServerProps`: a DJL Serving (LMI) model server on an EC2
  inf2 instance, from a model bundle and an image.
* :class:`AdapterComponent` with :class:`AdapterComponentProps`: a LoRA adapter served on an
  endpoint's inference component, invoked by its own name.
* :class:`PropError`, raised by every props class for a value it cannot use.

``EndpointProps``, the former name of :class:`SageMakerEndpointProps`, still works and warns
(DeprecationWarning).

Names are loaded on first use, so that ``llm_inference_cdk.props`` (standard library only) can
be imported without the AWS CDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "AlarmProps": "llm_inference_cdk.endpoint_props",
    "AutoscalingProps": "llm_inference_cdk.endpoint_props",
    "DeploymentProps": "llm_inference_cdk.endpoint_props",
    "InferenceComponentProps": "llm_inference_cdk.endpoint_props",
    "AsyncInferenceProps": "llm_inference_cdk.endpoint_props",
    "SageMakerEndpointProps": "llm_inference_cdk.endpoint_props",
    "SageMakerEndpoint": "llm_inference_cdk.endpoint",
    "AdapterComponent": "llm_inference_cdk.adapter",
    "AdapterComponentProps": "llm_inference_cdk.adapter",
    "ISageMakerEndpoint": "llm_inference_cdk.endpoint_base",
    "SageMakerEndpointBase": "llm_inference_cdk.endpoint_base",
    "BoundModelData": "llm_inference_cdk.model_data",
    "ModelAsset": "llm_inference_cdk.model_data",
    "ModelData": "llm_inference_cdk.model_data",
    "S3PrefixModelData": "llm_inference_cdk.model_data",
    "ContainerImage": "llm_inference_cdk.images",
    "DlcImage": "llm_inference_cdk.dlc",
    "ImageResolutionError": "llm_inference_cdk.dlc",
    "djl_neuronx": "llm_inference_cdk.dlc",
    "huggingface_inference": "llm_inference_cdk.dlc",
    "vllm_sagemaker": "llm_inference_cdk.dlc",
    "PropError": "llm_inference_cdk.props",
    "AlarmTopic": "llm_inference_cdk.alarm_topic",
    "NotificationTopic": "llm_inference_cdk.alarm_topic",
    "ServiceDashboard": "llm_inference_cdk.dashboard",
    "Inf2Server": "llm_inference_cdk.inf2.server",
    "Inf2ServerProps": "llm_inference_cdk.inf2.props",
}
__all__ = [  # noqa: RUF022 (grouped as _EXPORTS, by module)
    "AlarmProps",
    "AutoscalingProps",
    "DeploymentProps",
    "InferenceComponentProps",
    "AsyncInferenceProps",
    "SageMakerEndpointProps",
    "SageMakerEndpoint",
    "AdapterComponent",
    "AdapterComponentProps",
    "ISageMakerEndpoint",
    "SageMakerEndpointBase",
    "BoundModelData",
    "ModelAsset",
    "ModelData",
    "S3PrefixModelData",
    "ContainerImage",
    "DlcImage",
    "ImageResolutionError",
    "djl_neuronx",
    "huggingface_inference",
    "vllm_sagemaker",
    "PropError",
    "AlarmTopic",
    "NotificationTopic",
    "ServiceDashboard",
    "Inf2Server",
    "Inf2ServerProps",
]

if TYPE_CHECKING:
    from llm_inference_cdk.adapter import AdapterComponent, AdapterComponentProps
    from llm_inference_cdk.alarm_topic import AlarmTopic, NotificationTopic
    from llm_inference_cdk.dashboard import ServiceDashboard
    from llm_inference_cdk.dlc import (
        DlcImage,
        ImageResolutionError,
        djl_neuronx,
        huggingface_inference,
        vllm_sagemaker,
    )
    from llm_inference_cdk.endpoint import SageMakerEndpoint
    from llm_inference_cdk.endpoint_base import ISageMakerEndpoint, SageMakerEndpointBase
    from llm_inference_cdk.endpoint_props import (
        AlarmProps,
        AsyncInferenceProps,
        AutoscalingProps,
        DeploymentProps,
        InferenceComponentProps,
        SageMakerEndpointProps,
    )
    from llm_inference_cdk.endpoint_props import SageMakerEndpointProps as EndpointProps  # noqa: F401 (deprecated name)
    from llm_inference_cdk.images import ContainerImage
    from llm_inference_cdk.inf2.props import Inf2ServerProps
    from llm_inference_cdk.inf2.server import Inf2Server
    from llm_inference_cdk.model_data import BoundModelData, ModelAsset, ModelData, S3PrefixModelData
    from llm_inference_cdk.props import PropError


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        # A renamed class: its new name, with a DeprecationWarning (AttributeError for others).
        from llm_inference_cdk.endpoint_props import deprecated_name

        return deprecated_name(__name__, name)
    return getattr(importlib.import_module(_EXPORTS[name]), name)
