"""A stack's update as CloudFormation runs it: what cannot be updated in place is replaced (the
new one created, the old one deleted in the cleanup after the whole update succeeded), and an
update that fails rolls back (what it added deleted, what it replaced restored, what it updated in
place updated back). What the update did so far is kept on the stack's resource map, moto's
backend, while it runs."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from moto.cloudformation import models as cfn_models
from moto.cloudformation import parsing as cfn_parsing
from werkzeug.exceptions import HTTPException

from local_aws.awslambda import LambdaBackedCustomResource
from local_aws.cloudformation.ordering import creation_order, delete_in_dependency_order

log = logging.getLogger("local_aws.cloudformation")

#: Types whose every property needs replacement in AWS; moto "updates" them by deleting the
#: old one and creating one under a new name, which must be a replacement (the old one kept
#: until the update succeeded).
ALWAYS_REPLACED = frozenset({"AWS::SageMaker::Model", "AWS::SageMaker::EndpointConfig"})


class RolledBack(Exception):
    """An update failed at `logical_id` and was rolled back (the stack is as before it)."""

    def __init__(self, logical_id: str, resource_type: str, reason: str) -> None:
        super().__init__(f"{logical_id}: {reason}")
        self.logical_id, self.resource_type, self.reason = logical_id, resource_type, reason


def reason(exc: Exception) -> str:
    """The status reason CloudFormation gives a resource whose service refused a call: the
    service's message, as its resource handler returns it."""
    message = getattr(exc, "message", None)
    if isinstance(exc, HTTPException) and message:
        return f'Resource handler returned message: "{message} (Status Code: {exc.code})"'
    return str(exc) or type(exc).__name__


@dataclass
class Update:
    """What the stack's update in progress did: replacements to clean up after it (or undo),
    resources updated in place (to update back). Kept on the stack's resource map (moto's
    backend) while the update runs."""

    replaced: list[tuple[str, Any, Any, dict[str, Any]]] = field(default_factory=list)
    in_place: list[str] = field(default_factory=list)


def in_progress(resources_map: Any) -> Update | None:
    return getattr(resources_map, "local_update", None)


def replaced(resources_map: Any, logical_id: str, old: Any, new: Any, resource_json: dict[str, Any]) -> None:
    """`new` replaced `old`: delete `old` after the update, or now outside one."""
    update = in_progress(resources_map)
    if update is not None:
        update.replaced.append((logical_id, old, new, resource_json))
    else:
        resources_map._delete_resource(old, resource_json)


def updated_in_place(resources_map: Any, logical_id: str) -> None:
    update = in_progress(resources_map)
    if update is not None:
        update.in_place.append(logical_id)


def report_rollback(stack: Any, kind: str, failed: RolledBack) -> None:
    """The events and status CloudFormation leaves after a failed, rolled-back update."""
    stack.events.append(
        cfn_models.Event(
            stack_id=stack.stack_id,
            stack_name=stack.name,
            logical_resource_id=failed.logical_id,
            physical_resource_id="",
            resource_type=failed.resource_type,
            resource_status=f"{kind}_FAILED",
            resource_status_reason=failed.reason,
            resource_properties=None,
        )
    )
    final = "ROLLBACK_COMPLETE" if kind == "CREATE" else "UPDATE_ROLLBACK_COMPLETE"
    stack._add_stack_event(
        "ROLLBACK_IN_PROGRESS" if kind == "CREATE" else "UPDATE_ROLLBACK_IN_PROGRESS",
        resource_status_reason=f"The following resource(s) failed to {kind.lower()}: [{failed.logical_id}].",
    )
    stack._add_stack_event(final)
    stack.status = final


def delete_quietly(resources_map: Any, resource: Any, resource_json: dict[str, Any]) -> None:
    if resource is None or isinstance(resource, str | dict | list):
        return
    try:
        resources_map._delete_resource(resource, resource_json)
    except Exception:
        log.warning("rollback could not delete %r", resource, exc_info=True)


def roll_back(resources_map: Any, before: dict[str, Any], added: list[str]) -> None:
    """Put the stack's resources back as `before` had them: replaced resources restored,
    resources updated in place updated back, new ones deleted (newest first)."""
    new_template = resources_map._template
    resources_map._template = before["template"]
    resources_map.input_parameters = before["parameters"]
    # Only the previous template's parameters: moto reads a given parameter it has resolved as one
    # its template declares (a stack created by a change set has none before: KeyError, HTTP 500).
    slots = before["template"].get("Parameters", {})
    resources_map.resolved_parameters = {k: v for k, v in resources_map.resolved_parameters.items() if k in slots}
    resources_map.load_mapping()
    resources_map.load_parameters()
    resources_map.load_conditions()
    resources_map._resource_json_map = before["resources"]
    update = in_progress(resources_map) or Update()
    for logical_id, old, _new, _json in update.replaced:
        resources_map._parsed_resources[logical_id] = old
    for logical_id in reversed(update.in_place):
        old_json = before["resources"][logical_id]
        try:
            restored = cfn_parsing.parse_and_update_resource(
                logical_id, old_json, resources_map, resources_map._account_id, resources_map._region_name
            )
            resources_map._parsed_resources[logical_id] = restored
        except Exception:
            log.warning("rollback could not update %s back", logical_id, exc_info=True)
    for _logical_id, _old, new, resource_json in reversed(update.replaced):
        delete_quietly(resources_map, new, resource_json)
    for logical_id in reversed(added):
        resource = resources_map._parsed_resources.pop(logical_id, None)
        delete_quietly(resources_map, resource, new_template["Resources"][logical_id])


def clean_up(resources_map: Any, removed: list[str], before: dict[str, Any]) -> None:
    """After a successful update: delete what it replaced, then what it removed."""
    for _logical_id, old, _new, resource_json in (in_progress(resources_map) or Update()).replaced:
        resources_map._delete_resource(old, resource_json)
    try:
        delete_in_dependency_order(
            resources_map, list(removed), before["resources"], attempts=cfn_parsing.MAX_UPDATE_ATTEMPTS
        )
    except Exception:
        log.warning("the update could not delete every resource it removed", exc_info=True)


def update_resource(
    update_in_place: Callable[..., Any],
    logical_id: str,
    resource_json: dict[str, Any],
    resources_map: Any,
    account_id: str,
    region_name: str,
) -> Any:
    """The resource `logical_id` of an update: updated in place by moto (`update_in_place`) where
    AWS can, else replaced."""
    old = resources_map._parsed_resources.get(logical_id)
    # Types AWS always replaces, which moto "updates" by deleting the old one first.
    always = resource_json["Type"] in ALWAYS_REPLACED
    updated = None if always else update_in_place(logical_id, resource_json, resources_map, account_id, region_name)
    if updated is not None:
        # A custom resource whose update gave it a new physical id was replaced.
        if (
            isinstance(updated, LambdaBackedCustomResource)
            and isinstance(old, LambdaBackedCustomResource)
            and updated.physical_id != old.physical_id
        ):
            replaced(resources_map, logical_id, old, updated, resource_json)
            return updated
        updated_in_place(resources_map, logical_id)
        return updated
    new = cfn_parsing.parse_and_create_resource(logical_id, resource_json, resources_map, account_id, region_name)
    if old is not None and not isinstance(old, str | dict | list):
        replaced(resources_map, logical_id, old, new, resource_json)
    return new


def update(resources_map: Any, template: dict[str, Any], parameters: dict[str, Any] | None = None) -> None:
    """Update the stack's resources to `template`: added ones in dependency order, modified ones,
    then the cleanup; rolled back (RolledBack) at the first that fails."""
    diff = resources_map.build_resource_diff(template, parameters)
    before = {
        "template": resources_map._template,
        "parameters": dict(resources_map.input_parameters),
        "resources": dict(resources_map._resource_json_map),
    }
    resources_map._template = template
    if parameters:
        resources_map.input_parameters = parameters
    resources_map.load_mapping()
    resources_map.load_parameters()
    resources_map.load_conditions()
    resources_map._resource_json_map = template["Resources"]
    added: list[str] = []
    resources_map.local_update = Update()
    try:
        current = ""
        try:
            account, region = resources_map._account_id, resources_map._region_name
            adding = set(diff["Add"])
            # One order over what is added and what is modified, as CloudFormation works an update
            # by the template's dependencies: a new resource that DependsOn (or refers to) a modified
            # one after its update (a new copy after the policy update that lets its function write).
            for current in creation_order([*diff["Modify"], *diff["Add"]], template["Resources"]):
                if current in adding:
                    _ = resources_map[current]  # moto's map creates a resource when it is first read
                    added.append(current)
                    continue
                resources_map._parsed_resources[current] = cfn_parsing.parse_and_update_resource(
                    current, template["Resources"][current], resources_map, account, region
                )
        except Exception as exc:
            failed_type = template["Resources"][current]["Type"]
            roll_back(resources_map, before, [a for a in added if a in resources_map._parsed_resources])
            raise RolledBack(current, failed_type, reason(exc)) from exc
        clean_up(resources_map, diff["Remove"], before)
    finally:
        resources_map.local_update = None
