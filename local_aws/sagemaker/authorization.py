"""Who may invoke an endpoint: a runtime call signed as an assumed role is evaluated against the
role's policies on the endpoint's ARN (and its component's), as SageMaker writes them."""

from __future__ import annotations

from typing import Any

from moto.core.common_types import TYPE_RESPONSE

from local_aws.policies import assumed_role_caller, evaluate, first_denial
from local_aws.sagemaker.arns import sagemaker_arn
from local_aws.sagemaker.errors import AccessDeniedException, answer_refusal


def access_denied(
    headers: Any, account: str, region: str, action: str, name: str, component: str | None = None
) -> TYPE_RESPONSE | None:
    """AccessDeniedException (HTTP 400, as in the API references' Common Errors) when the
    request (its `headers`) is signed as an assumed role whose policies do not allow `action` on
    the endpoint (and the component it names), by the ARNs SageMaker writes; None when allowed."""
    caller = assumed_role_caller(headers, account, region)
    if caller is None:
        return None
    arns = [sagemaker_arn("endpoint", name, account, region)]
    if component:
        arns.append(sagemaker_arn("inference-component", component, account, region))
    decision = first_denial(evaluate(caller, action, arn) for arn in arns)
    return None if decision.allowed else answer_refusal(AccessDeniedException(decision.message))
