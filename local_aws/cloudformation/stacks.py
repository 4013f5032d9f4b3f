"""What CloudFormation says of a stack: its parameters as given, and every resource its template
creates, moto's or not."""

from __future__ import annotations

from typing import Any


def given_parameters(stack: Any, given: dict[str, Any]) -> dict[str, Any]:
    """``given`` completed with the defaults of the stack's template: what CloudFormation
    compares, and what UsePreviousValue reuses."""
    slots = stack.template_dict.get("Parameters", {})
    return {**{k: slot["Default"] for k, slot in slots.items() if "Default" in slot}, **given}


class Unmodelled:
    """A resource of a stack that moto created nothing for (a type it has no model of, which it
    skips): what CloudFormation lists of it, its logical id and type, and no physical id."""

    def __init__(self, logical_id: str, resource_type: str) -> None:
        self.logical_resource_id = logical_id
        self.cf_resource_type = resource_type
        self.physical_resource_id = None


def stack_resources(stack: Any) -> list[Any]:
    """Every resource of `stack` its template creates, in the template's order: moto's own, and
    an Unmodelled one for each it skipped (a resource whose condition is false is none)."""
    resources_map = stack.resource_map
    found = []
    for logical_id in resources_map.resources:
        resource = resources_map._parsed_resources.get(logical_id)
        if resource is None:
            template = resources_map._resource_json_map[logical_id]
            condition = template.get("Condition")
            if condition and not resources_map.lazy_condition_map[condition]:
                continue
            resource = Unmodelled(logical_id, template["Type"])
        found.append(resource)
    return found
