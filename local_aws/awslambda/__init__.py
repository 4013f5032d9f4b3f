"""The local AWS's Lambda: functions created from a zip run their code, under Node.js.

moto keeps the functions (its Lambda backend: their configuration and their code); this package
runs them as Lambda does, which stock moto can only do in a Docker engine:

* :mod:`.code`: the deployment package Lambda accepts (a non-empty zip), unpacked per invocation;
* :mod:`.nodejs`: Lambda's Node.js runtimes on this machine's ``node``, with the AWS SDK for
  JavaScript v3 those runtimes include, one process per invocation, ended with it;
* :mod:`.service`: synchronous and asynchronous invocations (with Lambda's retries), as the
  function's execution role, from the local AWS's STS; :mod:`.logs`: the output, in the
  function's log group, as the role may write it;
* :mod:`.errors`: Lambda's errors moto has no class for (InvalidRuntimeException);
* :mod:`.custom_resources`: CloudFormation's Lambda-backed custom resources, whose requests and
  responses go through a function's invocation and its response URL.

``local_aws/patches/awslambda.py`` and ``local_aws/patches/cloudformation.py`` wire it into moto.
"""

from __future__ import annotations

from local_aws.awslambda.code import EMPTY_ZIP, CodeError, check_zip
from local_aws.awslambda.custom_resources import (
    RESPONSE_PATH,
    CustomResourceFailed,
    LambdaBackedCustomResource,
    response_host,
    responses_plane,
)
from local_aws.awslambda.errors import InvalidRuntimeException
from local_aws.awslambda.functions import Function, FunctionNotFound, find
from local_aws.awslambda.nodejs import Invocation, RuntimeUnavailable
from local_aws.awslambda.service import AsyncInvocation, LambdaService, lambda_plane

#: Hosts whose TLS connections a function makes reach the local AWS: CloudFormation's
#: response URLs', in any region.
RESPONSE_HOSTS = r"^cloudformation-custom-resource-response-[a-z0-9]+\.s3\.[a-z0-9-]+\.amazonaws\.com$"


def set_endpoint(url: str) -> None:
    """Functions call the local AWS at `url` (``http://127.0.0.1:<port>``), which also takes
    their responses to CloudFormation."""
    address = url.removeprefix("http://").rstrip("/")
    lambda_plane().configure(url, ((RESPONSE_HOSTS, address),))


def stop_all() -> None:
    """End every invocation still running."""
    lambda_plane().stop_all()


__all__ = [
    "EMPTY_ZIP",
    "RESPONSE_HOSTS",
    "RESPONSE_PATH",
    "AsyncInvocation",
    "CodeError",
    "CustomResourceFailed",
    "Function",
    "FunctionNotFound",
    "InvalidRuntimeException",
    "Invocation",
    "LambdaBackedCustomResource",
    "LambdaService",
    "RuntimeUnavailable",
    "check_zip",
    "find",
    "lambda_plane",
    "response_host",
    "responses_plane",
    "set_endpoint",
    "stop_all",
]
