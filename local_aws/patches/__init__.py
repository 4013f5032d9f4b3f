"""Where moto 5.2.5 differs from AWS for this project's stacks, the fix: one module per AWS
service (:mod:`.base` holds the registry and what the services' patches share).

Each patch is registered with :func:`~.base.patch` and says which AWS behaviour it restores;
without it, `cdk deploy`/`cdk destroy` either fail against moto or report success while
resources are missing, so a test would pass on a stack AWS would reject or build
differently. They reach into moto's internals, which change between releases: the local
AWS refuses to start on any moto but :data:`MOTO_VERSION` (see ``server.check_moto_version``).
"""

# Importing a service's module registers its patches, in this order.
from local_aws.patches import (
    applicationautoscaling,
    cloudformation,
    cloudtrail,
    cloudwatch,
    ec2,
    iam,
    inputs,
    kms,
    protocol,
    s3,
    sagemaker,
    sagemakerruntime,
    sns,
    ssm,
)
from local_aws.patches.base import MOTO_VERSION, PATCHES, Patch, apply, patch, without
from local_aws.patches.cloudformation import set_endpoint

__all__ = [
    "MOTO_VERSION",
    "PATCHES",
    "Patch",
    "applicationautoscaling",
    "apply",
    "cloudformation",
    "cloudtrail",
    "cloudwatch",
    "ec2",
    "iam",
    "inputs",
    "kms",
    "patch",
    "protocol",
    "s3",
    "sagemaker",
    "sagemakerruntime",
    "set_endpoint",
    "sns",
    "ssm",
    "without",
]
