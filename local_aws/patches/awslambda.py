"""Lambda: functions made from a non-empty zip, whose invocations run their code under Node.js
(local_aws/awslambda holds the emulation; these patches wire it into moto's Lambda)."""

from __future__ import annotations

import base64
import json
from typing import Any

from moto.awslambda.exceptions import InvalidParameterValueException
from moto.awslambda.models import LambdaFunction

from local_aws.awslambda import (
    CodeError,
    Function,
    InvalidRuntimeException,
    RuntimeUnavailable,
    check_zip,
    lambda_plane,
)
from local_aws.patches.base import patch, replace

# Lambda's InvokeFunction returns the last 4 KB of the invocation's log with LogType=Tail.
_LOG_TAIL = 4096


@patch(
    """CreateFunction, UpdateFunctionCode and CloudFormation's AWS::Lambda::Function refuse a
    deployment package that is an empty zip (InvalidParameterValueException, "Uploaded file must
    be a non-empty zip"; what a CDK asset published from a folder that no longer exists becomes,
    aws/aws-cdk#18459) or no zip ("Could not unzip uploaded file..."), given inline or in S3, and
    a stack creating such a function rolls back. Stock moto stores any bytes as the code."""
)
def functions_need_a_non_empty_zip() -> None:
    stock = LambdaFunction._set_function_code

    def set_function_code(self: Any, updated_spec: dict[str, Any]) -> None:
        stock(self, updated_spec)
        if getattr(self, "package_type", "Zip") != "Zip" or updated_spec.get("DryRun"):
            return
        try:
            check_zip(self.code_bytes)
        except CodeError as refused:
            raise InvalidParameterValueException(str(refused)) from None

    replace(LambdaFunction, "_set_function_code", set_function_code)


def _invoke(self: Any, body: str, request_headers: Any, response_headers: dict[str, str]) -> bytes:
    event = json.loads(body) if body else {}
    function = Function.of(self)
    kind = request_headers.get("X-Amz-Invocation-Type") or "RequestResponse"
    response_headers["X-Amz-Executed-Version"] = "$LATEST"
    try:
        if kind == "DryRun":
            lambda_plane().runtime.check(function)
            return b""
        if kind == "Event":
            lambda_plane().runtime.check(function)
            lambda_plane().invoke_async(function, event)
            return b""
        invocation = lambda_plane().invoke(function, event)
    except RuntimeUnavailable as unavailable:
        raise InvalidRuntimeException(str(unavailable)) from None
    log_tail = "\n".join(message for _, message in invocation.events)[-_LOG_TAIL:]
    response_headers["x-amz-log-result"] = base64.b64encode(log_tail.encode()).decode()
    if not invocation.ok:
        response_headers["x-amz-function-error"] = "Unhandled"
        return json.dumps(invocation.error_document()).encode()
    return json.dumps(invocation.payload).encode()


@patch(
    """Invoking a function runs its handler as Lambda's Node.js runtime does (local_aws/awslambda):
    the deployment package unpacked, this machine's node with the AWS SDK for JavaScript v3 of
    Lambda's runtimes, the execution role's credentials from STS, Lambda's environment and
    timeout; RequestResponse answers with the handler's result or Lambda's error document
    (X-Amz-Function-Error: Unhandled, errorType Runtime.ImportModuleError, Sandbox.Timedout, ...),
    Event runs it in the background with Lambda's two retries. Its output goes to the log group of
    the function's LoggingConfig (else /aws/lambda/<name>), as its role may write it. Stock moto
    runs functions only in a Docker engine, ignores LoggingConfig and writes /aws/lambda/<name>."""
)
def functions_run_their_code() -> None:
    init = LambdaFunction.__init__
    update_configuration = LambdaFunction.update_configuration
    create = LambdaFunction.create_from_cloudformation_json.__func__  # type: ignore[attr-defined]

    def init_keeping_logging_config(self: Any, account_id: str, spec: dict[str, Any], *args: Any, **kw: Any) -> None:
        init(self, account_id, spec, *args, **kw)
        self.logging_config = dict(spec.get("LoggingConfig") or {})

    def update_keeping_logging_config(self: Any, config_updates: dict[str, Any]) -> Any:
        if "LoggingConfig" in config_updates:
            self.logging_config = dict(config_updates["LoggingConfig"] or {})
        return update_configuration(self, config_updates)

    def create_from_cloudformation_json(
        cls: Any, /, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region: str, **kw: Any
    ) -> Any:
        fn = create(cls, resource_name, cloudformation_json, account_id, region, **kw)
        fn.logging_config = dict(cloudformation_json["Properties"].get("LoggingConfig") or {})
        return fn

    replace(LambdaFunction, "__init__", init_keeping_logging_config)
    replace(LambdaFunction, "update_configuration", update_keeping_logging_config)
    replace(LambdaFunction, "create_from_cloudformation_json", classmethod(create_from_cloudformation_json))
    replace(LambdaFunction, "invoke", _invoke)


def logging_config(fn: Any) -> dict[str, str]:
    """The function's LoggingConfig as Lambda answers it: the one it was given, with Lambda's
    defaults for what it left out (LogFormat Text, LogGroup /aws/lambda/<name>; a JSON format's
    log levels INFO)."""
    given = {k: str(v) for k, v in (getattr(fn, "logging_config", None) or {}).items()}
    found = {"LogFormat": given.get("LogFormat", "Text"), "LogGroup": f"/aws/lambda/{fn.function_name}", **given}
    if found["LogFormat"] == "JSON":
        found = {"ApplicationLogLevel": "INFO", "SystemLogLevel": "INFO", **found}
    return found


@patch(
    """GetFunctionConfiguration (and GetFunction, CreateFunction, UpdateFunctionConfiguration)
    returns the function's LoggingConfig: the LogGroup, LogFormat and log levels its template or
    request set, Lambda's defaults for the rest (LogFormat Text, LogGroup /aws/lambda/<name>;
    INFO levels with JSON), as the Lambda API Reference's FunctionConfiguration and LoggingConfig
    list them; a script finds a custom resource's log group through it. Stock moto returns no
    LoggingConfig, so such a script looks in /aws/lambda/<name> while the lines are in the
    stack's own group."""
)
def function_configuration_names_its_logging_config() -> None:
    stock = LambdaFunction.get_configuration

    def get_configuration(self: Any, on_create: bool = False) -> dict[str, Any]:
        return {**stock(self, on_create), "LoggingConfig": logging_config(self)}

    replace(LambdaFunction, "get_configuration", get_configuration)
