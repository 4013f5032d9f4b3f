"""Lambda's errors that the local AWS answers and moto has no class for."""

from __future__ import annotations

from moto.awslambda.exceptions import LambdaClientError


class InvalidRuntimeException(LambdaClientError):
    """Lambda's refusal to invoke a function whose runtime it cannot run (HTTP 502, the Invoke
    API reference)."""

    code = 502

    def __init__(self, message: str) -> None:
        super().__init__("InvalidRuntimeException", message)
