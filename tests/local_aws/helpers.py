"""Small CloudFormation scenarios against the local AWS, read back with boto3."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.parsers import ResponseParserError

from local_aws import LocalAws

Template = dict[str, Any]


def client(aws: LocalAws, service: str) -> Any:
    """A boto3 client of the local AWS that does not retry: stock moto answers some calls
    with HTTP 500, which boto3 would otherwise retry for the better part of a minute."""
    return aws.client(service, config=Config(retries={"total_max_attempts": 1}))


def error_of(call: Callable[[], object]) -> str | None:
    """The error code ``call`` fails with, else None."""
    try:
        call()
    except ClientError as e:
        return str(e.response["Error"]["Code"])
    except ResponseParserError as e:
        # Stock moto answers an exception it does not handle with an HTML page (HTTP 500), and
        # some others with JSON where the protocol wants XML: the code, or the page's title.
        said = re.search(r'"__type": "(\w+)"|<title>([^<]+)</title>', str(e))
        return next(filter(None, said.groups())) if said else str(e)
    return None


def body(template: Template) -> str:
    return json.dumps(template)


def create_stack(aws: LocalAws, name: str, template: Template, **kwargs: Any) -> str | None:
    """Create the stack; the error code if that fails, else None."""
    cfn = client(aws, "cloudformation")
    return error_of(lambda: cfn.create_stack(StackName=name, TemplateBody=body(template), **kwargs))


def update_stack(aws: LocalAws, name: str, template: Template, **kwargs: Any) -> str | None:
    """Update the stack through a change set, as the CDK CLI deploys; the error code if
    that fails, else None."""
    cfn = client(aws, "cloudformation")

    def deploy() -> None:
        cfn.create_change_set(
            StackName=name, ChangeSetName="update", ChangeSetType="UPDATE", TemplateBody=body(template), **kwargs
        )
        cfn.execute_change_set(StackName=name, ChangeSetName="update")

    return error_of(deploy)


def delete_stack(aws: LocalAws, name: str) -> str | None:
    """Delete the stack; the error code if that fails, else None."""
    cfn = client(aws, "cloudformation")
    return error_of(lambda: cfn.delete_stack(StackName=name))


def outputs(aws: LocalAws, name: str) -> dict[str, str]:
    cfn = client(aws, "cloudformation")
    (stack,) = cfn.describe_stacks(StackName=name)["Stacks"]
    return {o["OutputKey"]: o.get("OutputValue") for o in stack.get("Outputs", [])}


def physical_ids(aws: LocalAws, name: str) -> dict[str, str]:
    """Logical id -> physical id of the resources the stack lists."""
    cfn = client(aws, "cloudformation")
    resources = cfn.describe_stack_resources(StackName=name)["StackResources"]
    # Stock moto lists a resource it lost track of with no logical id.
    return {r["LogicalResourceId"]: r.get("PhysicalResourceId") for r in resources if "LogicalResourceId" in r}
