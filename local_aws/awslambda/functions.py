"""A function as an invocation needs it, read from moto's Lambda backend."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from moto.awslambda.models import LambdaFunction
from moto.awslambda.utils import get_backend


class FunctionNotFound(LookupError):
    """No function of that name or ARN in the account and region."""


@dataclass(frozen=True)
class Function:
    name: str
    arn: str
    account: str
    region: str
    #: Lambda's runtime identifier (``nodejs24.x``); None for a container image.
    runtime: str | None
    handler: str
    role_arn: str
    timeout_s: float
    memory_mb: int
    environment: Mapping[str, str]
    #: The deployment package (.zip).
    code: bytes = field(repr=False)
    #: Where its logs go: LoggingConfig's LogGroup, else /aws/lambda/<name>.
    log_group: str
    #: How often Lambda retries an asynchronous invocation that failed (default 2).
    async_retries: int = 2

    @classmethod
    def of(cls, fn: LambdaFunction) -> Function:
        logging_config: Mapping[str, Any] = getattr(fn, "logging_config", None) or {}
        retries = 2
        for config in fn.event_invoke_config:
            retries = int(config.config.get("MaximumRetryAttempts", retries))
        return cls(
            name=fn.function_name,
            arn=fn.function_arn,
            account=fn.account_id,
            region=fn.region,
            runtime=fn.run_time,
            handler=fn.handler or "",
            role_arn=fn.role,
            timeout_s=float(fn.timeout),
            memory_mb=int(fn.memory_size),
            environment={str(k): str(v) for k, v in (fn.environment_vars or {}).items()},
            code=getattr(fn, "code_bytes", b""),  # a container image's function has none
            log_group=str(logging_config.get("LogGroup") or f"/aws/lambda/{fn.function_name}"),
            async_retries=retries,
        )


def find(name_or_arn: str, account: str, region: str) -> Function:
    """The function `name_or_arn` names (a CloudFormation ServiceToken is its ARN)."""
    try:
        fn = get_backend(account, region).get_function(name_or_arn, None)
    except Exception as exc:  # moto raises its UnknownFunctionException
        raise FunctionNotFound(f"Function not found: {name_or_arn}") from exc
    return Function.of(fn)
