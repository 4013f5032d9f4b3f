"""SageMaker: endpoint configs and models as AWS accepts and keeps them."""

from __future__ import annotations

import re
from typing import Any

from moto.sagemaker.models import FakeEndpointConfig
from moto.sagemaker.models import Model as SageMakerModel

from local_aws.patches.base import patch, replace, wrap_create

# SageMaker hosting instance type names: ml.<family>.<size>.
_SAGEMAKER_INSTANCE_TYPE = re.compile(r"^ml\.[a-z][a-z0-9-]*\.(medium|large|[0-9]*xlarge)$")


@patch(
    """Endpoint configs accept the SageMaker instance types AWS launched after moto's fixed
    list was written (ml.g5, ml.g6, ml.p4d, ml.p5, ml.inf2, ...). Stock moto rejects them with
    a ValidationException, so a stack on ml.g5.xlarge could never deploy."""
)
def current_instance_types_are_accepted() -> None:
    validate = FakeEndpointConfig.validate_instance_type

    def validate_instance_type(self: Any, instance_type: str) -> None:
        if not _SAGEMAKER_INSTANCE_TYPE.match(instance_type):
            validate(self, instance_type)

    replace(FakeEndpointConfig, "validate_instance_type", validate_instance_type)


def _apply_network_isolation(model: Any, props: dict[str, Any], account_id: str, region_name: str) -> None:
    model.enable_network_isolation = props.get("EnableNetworkIsolation") in (True, "true")


@patch(
    """AWS::SageMaker::Model keeps EnableNetworkIsolation (the container gets no network
    access). Stock moto always reports it False, so the endpoint would look open."""
)
def model_network_isolation_is_kept() -> None:
    wrap_create(SageMakerModel, fix=_apply_network_isolation)
