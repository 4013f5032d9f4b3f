"""The buckets the constructs make for themselves."""

from __future__ import annotations

from typing import Any

from aws_cdk import RemovalPolicy
from aws_cdk import aws_s3 as s3
from constructs import Construct

from llm_inference_cdk.nag import acknowledge


def private_bucket(scope: Construct, construct_id: str, *, holds: str, **props: Any) -> s3.Bucket:
    """A bucket for this construct alone: encrypted, TLS only, public access blocked, owned by
    the account, deleted with the stack (`props` add to or override these). `holds` says what
    it holds, which is why it keeps no access log of its own."""
    bucket = s3.Bucket(
        scope,
        construct_id,
        **{
            "encryption": s3.BucketEncryption.S3_MANAGED,
            "block_public_access": s3.BlockPublicAccess.BLOCK_ALL,
            "object_ownership": s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            "enforce_ssl": True,
            "removal_policy": RemovalPolicy.DESTROY,
            **props,
        },
    )
    acknowledge(
        bucket,
        "AwsSolutions-S1",
        f"Holds {holds}; CloudTrail data events are the account's tool for auditing their reads",
    )
    return bucket
