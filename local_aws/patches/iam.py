"""IAM: roles with the managed policies their template names."""

from __future__ import annotations

from typing import Any

from moto.iam.models import Role, iam_backends
from moto.utilities.utils import get_partition

from local_aws.patches.base import patch, replace, wrap_create


def _sync_managed_policies(role: Any, properties: dict[str, Any], account_id: str, region_name: str) -> None:
    arns = properties.get("ManagedPolicyArns", [])
    iam = iam_backends[account_id][get_partition(region_name)]
    for arn in set(role.managed_policies) - set(arns):
        iam.detach_role_policy(arn, role.name)
    for arn in arns:
        if arn not in role.managed_policies:
            iam.attach_role_policy(arn, role.name)


@patch(
    """AWS::IAM::Role attaches the managed policies of ManagedPolicyArns (and detaches them
    before the role is deleted or when they leave the list). Stock moto ignores the
    property: the role lacks e.g. AmazonSSMManagedInstanceCore."""
)
def role_managed_policies_are_attached() -> None:
    wrap_create(Role, fix=_sync_managed_policies)
    update = Role.update_from_cloudformation_json.__func__  # type: ignore[attr-defined]
    delete = Role.delete_from_cloudformation_json.__func__  # type: ignore[attr-defined]

    def update_role(
        cls: Any, /, original_resource: Any, new_resource_name: str, cloudformation_json: dict[str, Any],
        account_id: str, region_name: str,
    ) -> Any:  # fmt: skip
        role = update(cls, original_resource, new_resource_name, cloudformation_json, account_id, region_name)
        _sync_managed_policies(role, cloudformation_json["Properties"], account_id, region_name)
        return role

    def delete_role(
        cls: Any, /, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str
    ) -> None:
        iam = iam_backends[account_id][get_partition(region_name)]
        for role in list(iam.roles.values()):
            if role.name == resource_name:
                _sync_managed_policies(role, {}, account_id, region_name)
        delete(cls, resource_name, cloudformation_json, account_id, region_name)

    replace(Role, "update_from_cloudformation_json", classmethod(update_role))
    replace(Role, "delete_from_cloudformation_json", classmethod(delete_role))
