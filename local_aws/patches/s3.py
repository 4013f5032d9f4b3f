"""S3: buckets a stack deletion cannot delete while they hold objects.

AWS::S3::BucketPolicy stays skipped (stock moto's warning) on purpose: moto enforces a
policy's Deny statements without their conditions, so the bootstrap bucket's "deny unless
aws:SecureTransport" would deny every request to this plain-HTTP emulator.
"""

from __future__ import annotations

from typing import Any

from moto.cloudformation.exceptions import CloudFormationError
from moto.s3.models import FakeBucket, s3_backends
from moto.utilities.utils import get_partition

from local_aws.patches.base import patch, replace


class BucketNotEmpty(CloudFormationError):
    code = "BucketNotEmpty"


@patch(
    """Deleting AWS::S3::Bucket fails while the bucket holds objects (AWS answers
    BucketNotEmpty), so a stack deletion first deletes what empties it (GptjStack's model-file
    copies) and retries. Stock moto reports the bucket deleted and keeps it, with its objects,
    whenever it happens to try the bucket first."""
)
def non_empty_buckets_are_not_deleted() -> None:
    original = FakeBucket.delete_from_cloudformation_json.__func__  # type: ignore[attr-defined]

    def delete_bucket(
        cls: Any, /, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str
    ) -> None:
        backend = s3_backends[account_id][get_partition(region_name)]
        bucket = backend.buckets.get(resource_name)
        if bucket is not None and bucket.keys:
            raise BucketNotEmpty(message=f"The bucket {resource_name} you tried to delete is not empty")
        original(cls, resource_name, cloudformation_json, account_id, region_name)

    replace(FakeBucket, "delete_from_cloudformation_json", classmethod(delete_bucket))
