"""The ARNs SageMaker gives its hosting resources."""

from __future__ import annotations

from moto.sagemaker.utils import arn_formatter

#: The hosting resources whose names SageMaker writes in lower case in their ARNs, of those the
#: stacks' grants name. (Models and endpoint configs too, in AWS; they keep moto's case here,
#: where its CloudFormation finds them again by the name in their ARN, and no grant names them.)
LOWER_CASED_ARNS = ("endpoint", "inference-component")


def sagemaker_arn(kind: str, name: str, account: str, region: str) -> str:
    """The ARN SageMaker gives a resource of ``kind`` named ``name``."""
    return arn_formatter(kind, name.lower() if kind in LOWER_CASED_ARNS else name, account, region)
