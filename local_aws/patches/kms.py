"""KMS: keys as CloudFormation creates and deletes them."""

from __future__ import annotations

import json
from typing import Any

from moto.kms.models import Key, kms_backends

from local_aws.patches.base import patch, replace


@patch(
    """AWS::KMS::Key is created with its tags (CloudFormation's Key/Value) and its key policy
    (a JSON document), and deleting it schedules the key's deletion after its
    PendingWindowInDays (state PendingDeletion), as CloudFormation does. Stock moto fails to
    create a key with tags (it expects TagKey/TagValue) and deletes a deleted stack's key at
    once."""
)
def keys_follow_their_template() -> None:
    create = Key.create_from_cloudformation_json.__func__  # type: ignore[attr-defined]

    def create_from_cloudformation_json(
        cls: Any, /, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str,
        **kwargs: Any,
    ) -> Any:  # fmt: skip
        properties = dict(cloudformation_json["Properties"])
        tags = properties.pop("Tags", [])
        policy = properties.get("KeyPolicy")
        if isinstance(policy, dict):
            properties["KeyPolicy"] = json.dumps(policy)
        key = create(cls, resource_name, {**cloudformation_json, "Properties": properties}, account_id, region_name)
        backend = kms_backends[account_id][region_name]
        backend.tag_resource(key.id, {t["Key"]: t["Value"] for t in tags})
        key.pending_window_in_days = int(properties.get("PendingWindowInDays", 30))
        return key

    replace(Key, "create_from_cloudformation_json", classmethod(create_from_cloudformation_json))

    def delete(self: Any, account_id: str, region_name: str) -> None:
        window = getattr(self, "pending_window_in_days", 30)
        kms_backends[account_id][region_name].schedule_key_deletion(self.id, window)

    replace(Key, "delete", delete)
