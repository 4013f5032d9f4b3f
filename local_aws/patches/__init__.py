"""Where moto 5.2.5 differs from AWS for this project's stacks, the fix: one module per AWS
service (:mod:`.base` holds the registry and what the services' patches share).

Each patch is registered with :func:`~.base.patch` and says which AWS behaviour it restores;
without it, `cdk deploy`/`cdk destroy` either fail against moto or report success while
resources are missing, so a test would pass on a stack AWS would reject or build
differently. They reach into moto's internals, which change between releases: the local
AWS refuses to start on any moto but :data:`MOTO_VERSION` (see ``server.check_moto_version``).
"""

from local_aws import awslambda as lambda_service

# Importing a service's module registers its patches, in this order.
from local_aws.patches import (
    applicationautoscaling,
    awslambda,
    cloudformation,
    cloudtrail,
    cloudwatch,
    ec2,
    iam,
    inputs,
    kms,
    logs,
    protocol,
    s3,
    sagemaker,
    sagemakerruntime,
    sns,
    ssm,
)
from local_aws.patches.base import MOTO_VERSION, PATCHES, Patch, apply, patch, serving, without


def set_endpoint(url: str, access_key: str, secret_key: str) -> None:
    """The local AWS listens at `url`: the functions it runs call it there (signed with their
    role's credentials, not the account's `access_key` and `secret_key`)."""
    lambda_service.set_endpoint(url)


__all__ = [
    "MOTO_VERSION",
    "PATCHES",
    "Patch",
    "applicationautoscaling",
    "apply",
    "awslambda",
    "cloudformation",
    "cloudtrail",
    "cloudwatch",
    "ec2",
    "iam",
    "inputs",
    "kms",
    "logs",
    "patch",
    "protocol",
    "s3",
    "sagemaker",
    "sagemakerruntime",
    "serving",
    "set_endpoint",
    "sns",
    "ssm",
    "without",
]
