"""SSM Parameter Store: values checked against the parameter's AllowedPattern."""

from __future__ import annotations

import re
from typing import Any

from moto.ssm.exceptions import SSMException
from moto.ssm.models import Parameter, SimpleSystemManagerBackend, ssm_backends

from local_aws.patches.base import patch, replace


class ParameterPatternMismatch(SSMException):
    def __init__(self, pattern: str) -> None:
        super().__init__(
            "ParameterPatternMismatchException",
            f"Parameter value, cannot be validated against allowedPattern: {pattern}",
        )


@patch(
    """PutParameter (and AWS::SSM::Parameter) refuses a value that does not match the
    parameter's AllowedPattern (ParameterPatternMismatchException): the endpoint's update check
    relies on it to fail a CloudFormation update SageMaker rolled back. Stock moto stores the
    pattern and never checks a value against it."""
)
def parameter_values_match_their_pattern() -> None:
    original = SimpleSystemManagerBackend.put_parameter

    def put_parameter(self: Any, name: str, description: str, value: str, parameter_type: str,
                      allowed_pattern: str, *args: Any, **kwargs: Any) -> Any:  # fmt: skip
        pattern = allowed_pattern
        if pattern is None and name in self._parameters and self._parameters[name]:
            pattern = self._parameters[name][-1].allowed_pattern  # an update keeps the pattern
        if pattern and value is not None and re.search(pattern, value) is None:
            raise ParameterPatternMismatch(pattern)
        return original(self, name, description, value, parameter_type, allowed_pattern, *args, **kwargs)

    replace(SimpleSystemManagerBackend, "put_parameter", put_parameter)


def _put(name: str, properties: dict[str, Any], account_id: str, region_name: str, *, overwrite: bool) -> Any:
    # moto types the optional arguments str, and takes the None of one a template leaves out.
    backend: Any = ssm_backends[account_id][region_name]
    return backend.put_parameter(
        name=name,
        description=properties.get("Description"),
        value=properties.get("Value"),
        parameter_type=properties.get("Type"),
        allowed_pattern=properties.get("AllowedPattern"),
        keyid=None,
        overwrite=overwrite,
        # The template's Tags are a map; PutParameter's a list.
        tags=None if overwrite else [{"Key": k, "Value": v} for k, v in properties.get("Tags", {}).items()],
        data_type=properties.get("DataType", "text"),
        tier=properties.get("Tier"),
        policies=properties.get("Policies"),
    )


@patch(
    """AWS::SSM::Parameter without a Name gets the name CloudFormation generates, and an update
    that keeps the name overwrites the parameter in place (a value the pattern refuses fails the
    update and leaves the parameter as it was). Stock moto creates an unnamed parameter with no
    name (an error), and updates by deleting the parameter first."""
)
def parameters_are_named_and_updated_in_place() -> None:
    def create(cls: Any, /, resource_name: str, cloudformation_json: dict[str, Any], account_id: str,
               region_name: str, **kwargs: Any) -> Any:  # fmt: skip
        properties = cloudformation_json["Properties"]
        return _put(properties.get("Name", resource_name), properties, account_id, region_name, overwrite=False)

    def update(cls: Any, /, original_resource: Any, new_resource_name: str, cloudformation_json: dict[str, Any],
               account_id: str, region_name: str) -> Any:  # fmt: skip
        properties = cloudformation_json["Properties"]
        name = properties.get("Name", original_resource.name)
        if name != original_resource.name:  # a new Name: CloudFormation replaces the parameter
            created = _put(name, properties, account_id, region_name, overwrite=False)
            ssm_backends[account_id][region_name].delete_parameter(original_resource.name)
            return created
        _put(name, properties, account_id, region_name, overwrite=True)
        return ssm_backends[account_id][region_name].get_parameter(name)

    replace(Parameter, "create_from_cloudformation_json", classmethod(create))
    replace(Parameter, "update_from_cloudformation_json", classmethod(update))
