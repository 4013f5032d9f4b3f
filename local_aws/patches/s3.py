"""S3: buckets a stack deletion cannot delete while they hold objects, and CDK's resource that
empties them first.

AWS::S3::BucketPolicy stays skipped (stock moto's warning) on purpose: moto enforces a
policy's Deny statements without their conditions, so the bootstrap bucket's "deny unless
aws:SecureTransport" would deny every request to this plain-HTTP emulator.
"""

from __future__ import annotations

from typing import Any, ClassVar

from moto.cloudformation.exceptions import CloudFormationError
from moto.s3.models import FakeBucket, s3_backends
from moto.utilities.utils import get_partition

from local_aws.patches.base import EmulatedResource, patch, register_types, replace


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


class AutoDeleteObjects(EmulatedResource):
    """Custom::S3AutoDeleteObjects, the resource of CDK's ``auto_delete_objects=True``: its
    provider function empties the bucket when the resource is deleted (on stack deletion,
    before the bucket), and the old bucket when an update names another. Answered in process,
    where every other Lambda-backed custom resource runs its function: that function's role may
    act on the bucket through the bucket's policy alone, and the local AWS deploys no
    AWS::S3::BucketPolicy (above), so the real handler would be denied."""

    TYPE: ClassVar[str] = "Custom::S3AutoDeleteObjects"

    def __init__(self, bucket: str) -> None:
        self.bucket = bucket

    @property
    def physical_resource_id(self) -> str:
        return self.bucket

    @classmethod
    def create(cls, name: str, properties: dict[str, Any], account_id: str, region_name: str) -> AutoDeleteObjects:
        return cls(str(properties["BucketName"]))

    def replaced_by(self, properties: dict[str, Any]) -> bool:
        return str(properties["BucketName"]) != self.bucket

    def delete(self, account_id: str, region_name: str) -> None:
        backend = s3_backends[account_id][get_partition(region_name)]
        bucket = backend.buckets.get(self.bucket)
        if bucket is None:
            return  # already gone: the provider ignores a missing bucket too
        for key in list(bucket.keys):
            backend.delete_object(self.bucket, key)


@patch(
    restores="""CDK's auto-delete-objects resource (Custom::S3AutoDeleteObjects) empties its bucket
    when deleted, so that the stack deletion can delete the bucket (an async endpoint's
    requests and answers). Stock moto would invoke the provider's Lambda function in a Docker
    engine: the resource fails and the bucket, with its objects, stays."""
)
def auto_deleted_buckets_are_emptied() -> None:
    register_types(AutoDeleteObjects)
