"""The order CloudFormation works a template in: what each resource needs (Ref, Fn::GetAtt,
Fn::Sub, DependsOn), created after what it needs and deleted before it."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any


def references(node: Any) -> set[str]:
    """Logical ids a template fragment points to with Ref or Fn::GetAtt."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "Ref" and isinstance(value, str):
                found.add(value)
            elif key == "Fn::GetAtt":
                target = value[0] if isinstance(value, list) else str(value).split(".")[0]
                found.add(target)
            else:
                found |= references(value)
    elif isinstance(node, list):
        for item in node:
            found |= references(item)
    return found


def dependencies(resources: dict[str, Any]) -> dict[str, set[str]]:
    """Each resource's logical id -> the resources it needs (Ref, Fn::GetAtt, Fn::Sub, DependsOn)."""
    found = {}
    for name, body in resources.items():
        needs = references(body) | substituted(body)
        depends = body.get("DependsOn", []) if isinstance(body, dict) else []
        needs |= {depends} if isinstance(depends, str) else set(depends)
        found[name] = needs & set(resources) - {name}
    return found


def substituted(node: Any) -> set[str]:
    """Logical ids a template fragment names in Fn::Sub's ${Name} or ${Name.Attribute}."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "Fn::Sub":
                text = value[0] if isinstance(value, list) else value
                found |= {m.split(".")[0] for m in re.findall(r"\$\{([^!}][^}]*)\}", str(text))}
            found |= substituted(value)
    elif isinstance(node, list):
        for item in node:
            found |= substituted(item)
    return found


def creation_order(names: list[str], resources: dict[str, Any]) -> list[str]:
    """`names` ordered so that each comes after the resources of `names` it needs, DependsOn
    included (moto's map creates what a resource refers to on demand, but not what it depends on)."""
    needs = dependencies(resources)
    ordered: list[str] = []
    pending = list(names)
    while pending:
        ready = [n for n in pending if not (needs.get(n, set()) & (set(pending) - {n}))]
        ready = ready or pending[:1]  # a cycle (an invalid template): keep going
        ordered += ready
        pending = [n for n in pending if n not in ready]
    return ordered


def delete_in_dependency_order(
    resources_map: Any, names: list[str], templates: dict[str, Any], *, attempts: int
) -> list[str]:
    """Delete the resources `names` of `resources_map`, each after every resource that needs it;
    a resource whose deletion fails stays (and so do those it needs) and is tried again, up to
    `attempts` passes that delete nothing. Returns the names left; raises the last failure when
    some are left."""
    needs = dependencies(templates)
    pending, last_error, idle = list(names), None, 0
    while pending and idle < attempts:
        progressed, failed = False, False
        for name in sorted(pending):
            if any(name in needs.get(other, ()) for other in pending if other != name):
                continue  # something still standing needs it
            resource = resources_map._parsed_resources.get(name)
            try:
                if resource is not None and not isinstance(resource, str | dict | list):
                    resources_map._delete_resource(resource, templates[name])
            except Exception as exc:
                last_error, failed = exc, True
                continue
            resources_map._parsed_resources.pop(name, None)
            pending.remove(name)
            progressed = True
        if not progressed and not failed:
            break  # what is left needs itself (an invalid template)
        idle = 0 if progressed else idle + 1
    if pending and last_error is not None:
        raise last_error
    return pending


def with_dependents(
    diff: dict[str, Any], resources: dict[str, Any], replaced_on_update: Callable[[dict[str, Any]], bool]
) -> list[str]:
    """The resources an update modifies: those whose text changed, and those that Ref or GetAtt
    one it replaces (a new physical id; `replaced_on_update` says which are), in dependency order."""
    refs = {name: references(body) for name, body in resources.items()}
    replaced = {name for name in diff["Modify"] if replaced_on_update(resources[name])}
    modify = set(diff["Modify"])
    while replaced:
        dependents = {n for n, r in refs.items() if r & replaced and n not in modify and n not in diff["Add"]}
        modify |= dependents
        replaced = dependents
    ordered: list[str] = []
    while len(ordered) < len(modify):  # dependencies first
        pending = modify - set(ordered)
        ready = sorted(n for n in pending if not (refs[n] & (pending - {n})))
        ordered += ready or sorted(pending)  # a cycle (an invalid template): keep going
    return ordered
