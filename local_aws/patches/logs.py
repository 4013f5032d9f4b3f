"""CloudWatch Logs: what CloudFormation's log groups give the resources that refer to them."""

from __future__ import annotations

from typing import Any

from moto.logs.models import LogGroup

from local_aws.patches.base import patch, replace


@patch(
    """Fn::GetAtt of an AWS::Logs::LogGroup's Arn ends in ":*" (CloudFormation User Guide,
    AWS::Logs::LogGroup, return values: "arn:aws:logs:us-west-1:123456789012:log-group:
    /mystack-testgroup-12ABC1AB12A1:*"), which names the group's log streams: a policy on it, as
    CDK's LogGroup.grant_write writes it, lets its grantee write to the group's streams (a Lambda
    function's role, its own log group). Stock moto gives the ARN without ":*", which names no
    stream: the grant lets nothing be written."""
)
def log_group_arns_name_their_streams() -> None:
    stock = LogGroup.get_cfn_attribute

    def get_cfn_attribute(self: Any, attribute_name: str) -> Any:
        value = stock(self, attribute_name)
        return f"{value}:*" if attribute_name == "Arn" else value

    replace(LogGroup, "get_cfn_attribute", get_cfn_attribute)
