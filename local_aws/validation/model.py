"""Checks of a request against botocore's model of the service: its required members and
types, and the lengths, ranges, patterns and enums botocore's own validator leaves out, worded
as each service words its refusal; then the documented constraints the model lacks."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

# Patterns in botocore's models are Java regular expressions, some with \p{L}-style classes
# that only `regex` reads; AWS matches them against the whole value.
import regex
from botocore.model import OperationModel, Shape
from botocore.validate import ParamValidator

from local_aws.validation.base import Path, Rejected, Unresolved, member_path
from local_aws.validation.documented import documented_refusal


@cache
def botocore_session() -> Any:
    """One botocore session for every model read here: each new session loads a service's
    model file again (SageMaker's is megabytes of JSON), which cost every first call of each
    operation a parse, and each CloudWatch notification the endpoints file."""
    import botocore.session

    return botocore.session.get_session()


@cache
def service_model(service: str) -> Any:
    return botocore_session().get_service_model(service)


@cache
def operation_model(service: str, operation: str) -> OperationModel:
    return service_model(service).operation_model(operation)


@dataclass(frozen=True)
class Problem:
    """One value that breaks one constraint, in the words of AWS's validation messages."""

    path: Path
    value: Any
    #: "Member must ..." as AWS's (Coral) messages say it.
    constraint: str
    missing: bool = False
    #: A sensitive member (botocore's model): AWS's message leaves its value out.
    sensitive: bool = False


def _show(value: Any) -> str:
    return "null" if value is None else f"'{value}'"


def _size_problems(shape: Shape, value: Any, path: Path) -> Iterator[Problem]:
    meta, kind = shape.metadata, shape.type_name
    hidden = bool(meta.get("sensitive"))
    if kind in ("list", "map", "string", "blob") and isinstance(value, list | dict | str | bytes):
        if "min" in meta and len(value) < meta["min"]:
            yield Problem(
                path, value, f"Member must have length greater than or equal to {meta['min']}", sensitive=hidden
            )
        if "max" in meta and len(value) > meta["max"]:
            yield Problem(path, value, f"Member must have length less than or equal to {meta['max']}", sensitive=hidden)
    if kind in ("integer", "long", "float", "double") and isinstance(value, int | float):
        if "min" in meta and value < meta["min"]:
            yield Problem(
                path, value, f"Member must have value greater than or equal to {meta['min']}", sensitive=hidden
            )
        if "max" in meta and value > meta["max"]:
            yield Problem(path, value, f"Member must have value less than or equal to {meta['max']}", sensitive=hidden)


def _string_problems(shape: Shape, value: Any, path: Path) -> Iterator[Problem]:
    if shape.type_name != "string" or not isinstance(value, str):
        return
    hidden = bool(shape.metadata.get("sensitive"))
    if "pattern" in shape.metadata and _pattern(shape.metadata["pattern"]).fullmatch(value) is None:
        yield Problem(
            path,
            value,
            f"Member must satisfy regular expression pattern: {shape.metadata['pattern']}",
            sensitive=hidden,
        )
    if shape.enum and value not in shape.enum:
        yield Problem(path, value, f"Member must satisfy enum value set: [{', '.join(shape.enum)}]", sensitive=hidden)


def _model_problems(shape: Shape, value: Any, path: Path) -> Iterator[Problem]:
    """Lengths, ranges, patterns and enums of the model (botocore's validator checks types,
    required members and minimums only)."""
    if value is None or isinstance(value, Unresolved):
        return
    kind = shape.type_name
    if kind == "structure" and isinstance(value, dict):
        for name, member in shape.members.items():
            if name in value:
                yield from _model_problems(member, value[name], (*path, name))
        return
    yield from _size_problems(shape, value, path)
    yield from _string_problems(shape, value, path)
    if kind == "list" and isinstance(value, list):
        for i, item in enumerate(value):
            yield from _model_problems(shape.member, item, (*path, i))
    elif kind == "map" and isinstance(value, dict):
        for key, item in value.items():
            yield from _model_problems(shape.key, key, (*path, str(key)))
            yield from _model_problems(shape.value, item, (*path, str(key)))


@cache
def _pattern(java: str) -> Any:
    # Java writes the supplementary planes as a range of UTF-16 surrogate pairs.
    return regex.compile(java.replace(r"\uD800\uDC00-\uDBFF\uDFFF", r"\U00010000-\U0010FFFF"))


def _at(params: Any, dotted: str) -> Any:
    """The value botocore's validator names ("ProductionVariants[0].ModelName")."""
    value = params
    for part in regex.findall(r"[^.\[\]]+|\[\d+\]", dotted):
        if part.startswith("["):
            value = value[int(part[1:-1])] if isinstance(value, list) else None
        else:
            value = value.get(part) if isinstance(value, dict) else None
    return value


def _botocore_problems(shape: Shape, params: dict[str, Any]) -> Iterator[Problem]:
    report = ParamValidator().validate(params, shape)
    for kind, name, details in report._errors:
        where: Path = tuple(regex.findall(r"[^.\[\]]+", name)) if name else ()
        if kind == "missing required field":
            yield Problem((*where, details["required_name"]), None, "Member must not be null", missing=True)
        elif kind == "invalid type" and not isinstance(_at(params, name), Unresolved):
            yield Problem(where, details["param"], f"Member must be of type {', '.join(details['valid_types'])}")
        elif kind == "unknown field":
            yield Problem((*where, details["unknown_param"]), None, "Member is not a parameter of this request")


#: The error code each service answers a request that breaks its model with (a Coral-style
#: "N validation error(s) detected" message, as SageMaker, KMS, CloudWatch, IAM, CloudWatch Logs
#: and Application Auto Scaling answer; EC2 and SNS word theirs differently, below).
_VALIDATION_CODE = {
    "sagemaker": "ValidationException",
    # The runtime's model names its error ValidationError (aws/aws-sdk-js#4203 quotes one).
    "sagemaker-runtime": "ValidationError",
    "kms": "ValidationException",
    "application-autoscaling": "ValidationException",
    "ssm": "ValidationException",
    "cloudwatch": "ValidationError",
    "iam": "ValidationError",
    "logs": "InvalidParameterException",
}


def _refusal(service: str, problems: list[Problem]) -> Rejected:
    first = problems[0]
    member = ".".join(str(p) for p in first.path)
    if service == "ec2":
        # EC2's own words (EC2 API reference, "Error codes": MissingParameter, InvalidParameterValue).
        if first.missing:
            return Rejected("MissingParameter", f"The request must contain the parameter {member}")
        return Rejected("InvalidParameterValue", f"Value ({first.value}) for parameter {member} is invalid. "
                        f"{first.constraint}")  # fmt: skip
    if service == "sns":
        # SNS names the parameter only ("Invalid parameter: Topic Name"; SNS API reference, Errors).
        return Rejected("InvalidParameter", f"Invalid parameter: {member}")
    count = f"{len(problems)} validation error{'s' if len(problems) > 1 else ''} detected: "
    said = "; ".join(
        f"Value{'' if p.sensitive else ' ' + _show(p.value)} at '{member_path(p.path)}' failed to satisfy "
        f"constraint: {p.constraint}"
        for p in problems
    )
    return Rejected(_VALIDATION_CODE.get(service, "ValidationException"), count + said)


def rest_parameters(
    service: str, operation: str, *, uri: Mapping[str, str], headers: Mapping[str, str], body: bytes
) -> dict[str, Any]:
    """A REST request's parameters as botocore's model names them: each member bound to the path
    (from `uri`, by its name there) or a header, and the payload member from `body`. A header
    of an integer member that is not a number stays text (a type problem)."""
    shape = operation_model(service, operation).input_shape
    params: dict[str, Any] = {}
    if shape is None:
        return params
    payload = shape.serialization.get("payload")
    for name, member in shape.members.items():
        where, key = member.serialization.get("location"), member.serialization.get("name", name)
        value: Any = None
        if where == "uri":
            value = uri.get(key)
        elif where == "header":
            value = headers.get(key)
            if value is not None and member.type_name in ("integer", "long") and regex.fullmatch(r"-?\d+", value):
                value = int(value)
        elif name == payload:
            value = body
        if value is not None:
            params[name] = value
    return params


def check_request(service: str, operation: str, params: dict[str, Any]) -> Rejected | None:
    """AWS's refusal of the request (the model's constraints, then the documented ones), or
    None if AWS accepts it as far as these checks see."""
    shape = operation_model(service, operation).input_shape
    if shape is None:
        return None
    problems = [*_botocore_problems(shape, params), *_model_problems(shape, params, ())]
    if problems:
        return _refusal(service, problems)
    return documented_refusal(service, operation, params)
