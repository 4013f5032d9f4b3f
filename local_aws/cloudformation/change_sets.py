"""CloudFormation's change sets: found by ARN, or by name within their stack, and executed as
CreateStack or UpdateStack would leave the stack."""

from __future__ import annotations

from typing import Any

from moto.cloudformation.exceptions import CloudFormationError

from local_aws.cloudformation.updates import RolledBack, report_rollback


class ChangeSetNotFound(CloudFormationError):
    # The shape id in the CloudFormation model; moto serializes it as AWS does (HTTP 404,
    # code ChangeSetNotFound), which the CDK CLI waits for after deleting a change set.
    code = "ChangeSetNotFoundException"


def change_sets_of(backend: Any, name_or_arn: str, stack_name: str | None) -> list[Any]:
    """Change sets matching an ARN, or a name within one stack (name or stack id)."""
    if name_or_arn in backend.change_sets:
        return [backend.change_sets[name_or_arn]]
    return [
        cs
        for cs in backend.change_sets.values()
        if cs.change_set_name == name_or_arn and stack_name in (None, cs.stack_name, cs.stack_id)
    ]


def execute(backend: Any, change_set_name: str, stack_name: str | None = None) -> None:
    """Execute the change set: the stack's resources, outputs, exports and parameters as its
    template says, or rolled back with CloudFormation's events where a resource failed."""
    found = change_sets_of(backend, change_set_name, stack_name)
    if not found:
        raise ChangeSetNotFound(f"ChangeSet [{change_set_name}] does not exist")
    change_set = found[-1]
    stack = backend.stacks[change_set.stack_id]
    kind = change_set.change_set_type
    stack._add_stack_event(f"{kind}_IN_PROGRESS", resource_status_reason="User Initiated")
    old_exports = [export.name for export in stack.exports]
    try:
        change_set.apply()
    except RolledBack as failed:
        report_rollback(stack, kind, failed)
        change_set.execution_status = "EXECUTE_FAILED"
        return
    stack.template = change_set.template
    stack._parse_template()
    stack.description = stack.template_dict.get("Description")
    stack.parameters = change_set.parameters
    stack.output_map = stack._create_output_map()
    for name in old_exports:
        backend.exports.pop(name, None)
    backend._validate_export_uniqueness(stack)
    for export in stack.exports:
        backend.exports[export.name] = export
    stack._add_stack_event(f"{kind}_COMPLETE")
    stack.status = f"{kind}_COMPLETE"
    change_set.execution_status = "EXECUTE_COMPLETE"
    for cs_id, cs in list(backend.change_sets.items()):
        if cs.stack_id == stack.stack_id and cs is not change_set:
            del backend.change_sets[cs_id]
