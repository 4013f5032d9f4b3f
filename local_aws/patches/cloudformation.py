"""CloudFormation: change sets, stack parameters, replacement on update, rollback, deletion order,
and Lambda-backed custom resources (run by local_aws/awslambda), where moto's CloudFormation
differs from AWS's."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from moto.cloudformation import models as cfn_models
from moto.cloudformation import parsing as cfn_parsing
from moto.cloudformation import responses as cfn_responses
from moto.cloudformation.exceptions import CloudFormationError
from moto.core.responses import ActionResult, EmptyResult
from werkzeug.exceptions import HTTPException

from local_aws.awslambda import LambdaBackedCustomResource, responses_plane
from local_aws.patches.applicationautoscaling import ScalableTarget, ScalingPolicy
from local_aws.patches.base import enabled_types, patch, register_types, replace
from local_aws.patches.cloudwatch import MetricAlarm
from local_aws.patches.sns import Subscription, TopicPolicy

log = logging.getLogger("local_aws.cloudformation")

# --- Change sets -------------------------------------------------------------------------


class ChangeSetNotFound(CloudFormationError):
    # The shape id in the CloudFormation model; moto serializes it as AWS does (HTTP 404,
    # code ChangeSetNotFound), which the CDK CLI waits for after deleting a change set.
    code = "ChangeSetNotFoundException"


def _change_sets_of(backend: Any, name_or_arn: str, stack_name: str | None) -> list[Any]:
    """Change sets matching an ARN, or a name within one stack (name or stack id)."""
    if name_or_arn in backend.change_sets:
        return [backend.change_sets[name_or_arn]]
    return [
        cs
        for cs in backend.change_sets.values()
        if cs.change_set_name == name_or_arn and stack_name in (None, cs.stack_name, cs.stack_id)
    ]


@patch(
    """A change set is identified by its ARN, or by its name *within the stack named by
    StackName*: the CDK CLI gives every stack's change set the same name
    (cdk-deploy-change-set). A missing one is ChangeSetNotFound (HTTP 404), which the CLI
    waits for after deleting one. Stock moto ignores StackName, picking any stack's change
    set, and answers a missing one with a ValidationError, on which the CLI gives up."""
)
def change_sets_belong_to_their_stack() -> None:
    backend_cls = cfn_models.CloudFormationBackend

    def describe_change_set(self: Any, change_set_name: str, stack_name: str | None = None) -> Any:
        found = _change_sets_of(self, change_set_name, stack_name)
        if not found:
            raise ChangeSetNotFound(f"ChangeSet [{change_set_name}] does not exist")
        return found[-1]

    replace(backend_cls, "describe_change_set", describe_change_set)

    def describe_response(self: Any) -> Any:
        change_set = self.cloudformation_backend.describe_change_set(
            change_set_name=self._get_param("ChangeSetName"), stack_name=self._get_param("StackName")
        )
        return ActionResult(change_set)

    replace(cfn_responses.CloudFormationResponse, "describe_change_set", describe_response)


@patch(
    """DeleteChangeSet succeeds when the stack exists but the change set does not (the CDK
    CLI deletes a stale cdk-deploy-change-set before every update and relies on this).
    Stock moto answers HTTP 500, which the SDK retries for ~45 s before failing the deploy."""
)
def delete_missing_change_set_succeeds() -> None:
    def delete_change_set(self: Any, change_set_name: str, stack_name: str | None = None) -> None:
        for cs in _change_sets_of(self, change_set_name, stack_name):
            self.change_sets.pop(cs.change_set_id, None)

    replace(cfn_models.CloudFormationBackend, "delete_change_set", delete_change_set)

    def delete_response(self: Any) -> Any:
        self.cloudformation_backend.delete_change_set(
            change_set_name=self._get_param("ChangeSetName"), stack_name=self._get_param("StackName")
        )
        return EmptyResult()

    replace(cfn_responses.CloudFormationResponse, "delete_change_set", delete_response)


@patch(
    """Executing a change set leaves the stack as CreateStack/UpdateStack would: its outputs
    and exports evaluated from the new template, its parameters the change set's, and the
    stack's other change sets deleted. Stock moto keeps the outputs of the previous template
    (none after a CREATE change set), so `cdk deploy` prints no outputs."""
)
def executed_change_set_updates_the_stack() -> None:
    def execute_change_set(self: Any, change_set_name: str, stack_name: str | None = None) -> None:
        found = _change_sets_of(self, change_set_name, stack_name)
        if not found:
            raise ChangeSetNotFound(f"ChangeSet [{change_set_name}] does not exist")
        change_set = found[-1]
        stack = self.stacks[change_set.stack_id]
        kind = change_set.change_set_type
        stack._add_stack_event(f"{kind}_IN_PROGRESS", resource_status_reason="User Initiated")
        old_exports = [export.name for export in stack.exports]
        try:
            change_set.apply()
        except RolledBack as failed:
            _report_rollback(stack, kind, failed)
            change_set.execution_status = "EXECUTE_FAILED"
            return
        stack.template = change_set.template
        stack._parse_template()
        stack.description = stack.template_dict.get("Description")
        stack.parameters = change_set.parameters
        stack.output_map = stack._create_output_map()
        for name in old_exports:
            self.exports.pop(name, None)
        self._validate_export_uniqueness(stack)
        for export in stack.exports:
            self.exports[export.name] = export
        stack._add_stack_event(f"{kind}_COMPLETE")
        stack.status = f"{kind}_COMPLETE"
        change_set.execution_status = "EXECUTE_COMPLETE"
        for cs_id, cs in list(self.change_sets.items()):
            if cs.stack_id == stack.stack_id and cs is not change_set:
                del self.change_sets[cs_id]

    replace(cfn_models.CloudFormationBackend, "execute_change_set", execute_change_set)


# --- Stack parameters ----------------------------------------------------------------------


def _given_parameters(stack: Any, given: dict[str, Any]) -> dict[str, Any]:
    """``given`` completed with the defaults of the stack's template: what CloudFormation
    compares, and what UsePreviousValue reuses."""
    slots = stack.template_dict.get("Parameters", {})
    return {**{k: slot["Default"] for k, slot in slots.items() if "Default" in slot}, **given}


@patch(
    """Stack parameters are compared and reused as given, defaults included: UsePreviousValue
    reuses the value the caller gave (for an AWS::SSM::Parameter::Value<...> parameter, the
    parameter's *name*, which CloudFormation resolves again at every update), and a change
    set that passes a parameter's default explicitly has no changes. Stock moto reuses the
    resolved value (an AMI id), then fails the update trying to resolve it as a parameter
    name; and it sees a change whenever the CDK CLI, which passes SSM parameters on updates
    but not on creation, deploys an unchanged stack."""
)
def parameters_are_the_given_ones() -> None:
    def stack_parameters(self: Any) -> dict[str, Any]:
        return _given_parameters(self, dict(self.resource_map.input_parameters))

    def has_parameters(self: Any, other_parameters: dict[str, Any]) -> bool:
        return bool(self.stack_parameters == _given_parameters(self, other_parameters))

    replace(cfn_models.Stack, "stack_parameters", property(stack_parameters))
    replace(cfn_models.Stack, "has_parameters", has_parameters)


# --- Replacement on update -------------------------------------------------------------------

#: Types whose every property needs replacement in AWS; moto "updates" them by deleting the
#: old one and creating one under a new name, which must be a replacement (the old one kept
#: until the update succeeded).
_ALWAYS_REPLACED = frozenset({"AWS::SageMaker::Model", "AWS::SageMaker::EndpointConfig"})


@patch(
    """An update that changes a resource moto can only create replaces it, as CloudFormation
    replaces a resource whose changed property cannot be updated in place: the new one is
    created, then the old one deleted (in the cleanup after the whole update succeeded, where
    ``failed_updates_roll_back`` is installed; at once otherwise). Stock moto records nothing for
    it (the resource disappears from the stack, is never deleted, and Refs to it resolve to
    null)."""
)
def unmodifiable_resources_are_replaced() -> None:
    original = cfn_parsing.parse_and_update_resource

    def parse_and_update_resource(
        logical_id: str, resource_json: dict[str, Any], resources_map: Any, account_id: str, region_name: str
    ) -> Any:
        old = resources_map._parsed_resources.get(logical_id)
        # Types AWS always replaces, which moto "updates" by deleting the old one first.
        always = resource_json["Type"] in _ALWAYS_REPLACED
        updated = None if always else original(logical_id, resource_json, resources_map, account_id, region_name)
        if updated is not None:
            # A custom resource whose update gave it a new physical id was replaced.
            if (
                isinstance(updated, LambdaBackedCustomResource)
                and isinstance(old, LambdaBackedCustomResource)
                and updated.physical_id != old.physical_id
            ):
                _replaced(resources_map, logical_id, old, updated, resource_json)
                return updated
            _updated_in_place(resources_map, logical_id)
            return updated
        new = cfn_parsing.parse_and_create_resource(logical_id, resource_json, resources_map, account_id, region_name)
        if old is not None and not isinstance(old, str | dict | list):
            _replaced(resources_map, logical_id, old, new, resource_json)
        return new

    replace(cfn_parsing, "parse_and_update_resource", parse_and_update_resource)


def _references(node: Any) -> set[str]:
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
                found |= _references(value)
    elif isinstance(node, list):
        for item in node:
            found |= _references(item)
    return found


def _replaced_on_update(resource_json: dict[str, Any]) -> bool:
    if resource_json["Type"] in _ALWAYS_REPLACED:
        return True
    if _custom_resource_class(resource_json["Type"]) is LambdaBackedCustomResource:
        return True  # its response may name a new physical id, or change its Data
    model = cfn_parsing.resource_class_from_type(resource_json["Type"])
    return model is not None and hasattr(model.update_from_cloudformation_json, "__isabstractmethod__")


@patch(
    """When an update replaces a resource (a new physical id), the resources that Ref or
    GetAtt it are updated with the new value, in dependency order, as CloudFormation does.
    Stock moto updates only resources whose own template text changed: an alarm on a
    replaced instance keeps watching the terminated one."""
)
def dependents_of_replaced_resources_are_updated() -> None:
    original = cfn_parsing.ResourceMap.build_resource_diff

    def build_resource_diff(self: Any, other_template: dict[str, Any], parameters: Any = None) -> dict[str, Any]:
        diff = original(self, other_template, parameters)
        new = other_template["Resources"]
        refs = {name: _references(body) for name, body in new.items()}
        replaced = {name for name in diff["Modify"] if _replaced_on_update(new[name])}
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
        diff["Modify"] = ordered
        return diff

    replace(cfn_parsing.ResourceMap, "build_resource_diff", build_resource_diff)


# --- Failed updates roll back ----------------------------------------------------------------


class RolledBack(Exception):
    """An update failed at `logical_id` and was rolled back (the stack is as before it)."""

    def __init__(self, logical_id: str, resource_type: str, reason: str) -> None:
        super().__init__(f"{logical_id}: {reason}")
        self.logical_id, self.resource_type, self.reason = logical_id, resource_type, reason


def _reason(exc: Exception) -> str:
    """The status reason CloudFormation gives a resource whose service refused a call: the
    service's message, as its resource handler returns it."""
    message = getattr(exc, "message", None)
    if isinstance(exc, HTTPException) and message:
        return f'Resource handler returned message: "{message} (Status Code: {exc.code})"'
    return str(exc) or type(exc).__name__


@dataclass
class _Update:
    """What the stack's update in progress did: replacements to clean up after it (or undo),
    resources updated in place (to update back). Kept on the stack's resource map (moto's
    backend) while the update runs."""

    replaced: list[tuple[str, Any, Any, dict[str, Any]]] = field(default_factory=list)
    in_place: list[str] = field(default_factory=list)


def _in_progress(resources_map: Any) -> _Update | None:
    return getattr(resources_map, "local_update", None)


def _replaced(resources_map: Any, logical_id: str, old: Any, new: Any, resource_json: dict[str, Any]) -> None:
    """`new` replaced `old`: delete `old` after the update, or now outside one."""
    update = _in_progress(resources_map)
    if update is not None:
        update.replaced.append((logical_id, old, new, resource_json))
    else:
        resources_map._delete_resource(old, resource_json)


def _updated_in_place(resources_map: Any, logical_id: str) -> None:
    update = _in_progress(resources_map)
    if update is not None:
        update.in_place.append(logical_id)


def _report_rollback(stack: Any, kind: str, failed: RolledBack) -> None:
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


def _delete_quietly(resources_map: Any, resource: Any, resource_json: dict[str, Any]) -> None:
    if resource is None or isinstance(resource, str | dict | list):
        return
    try:
        resources_map._delete_resource(resource, resource_json)
    except Exception:
        log.warning("rollback could not delete %r", resource, exc_info=True)


def _roll_back(resources_map: Any, before: dict[str, Any], added: list[str]) -> None:
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
    update = _in_progress(resources_map) or _Update()
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
        _delete_quietly(resources_map, new, resource_json)
    for logical_id in reversed(added):
        resource = resources_map._parsed_resources.pop(logical_id, None)
        _delete_quietly(resources_map, resource, new_template["Resources"][logical_id])


def _clean_up(resources_map: Any, removed: list[str], before: dict[str, Any]) -> None:
    """After a successful update: delete what it replaced, then what it removed."""
    for _logical_id, old, _new, resource_json in (_in_progress(resources_map) or _Update()).replaced:
        resources_map._delete_resource(old, resource_json)
    try:
        delete_in_dependency_order(
            resources_map, list(removed), before["resources"], attempts=cfn_parsing.MAX_UPDATE_ATTEMPTS
        )
    except Exception:
        log.warning("the update could not delete every resource it removed", exc_info=True)


@patch(
    """An update (or a stack created by a change set) whose resource fails rolls back, as
    CloudFormation does: the resources it added are deleted, those it replaced come back, those
    it updated in place are updated back to the previous template, and the stack ends in
    UPDATE_ROLLBACK_COMPLETE (ROLLBACK_COMPLETE for a creation) with a *_FAILED event naming the
    resource and the reason, which the CDK CLI reports; ExecuteChangeSet itself succeeds. What an
    update adds is created after what it depends on (DependsOn too: a custom resource after the
    policy that lets its function make its call); what it replaces or removes is deleted only in
    the cleanup after it succeeded, each after what needs it. Stock moto leaves the stack
    half-updated and answers ExecuteChangeSet with the resource's error (or HTTP 500), having
    deleted removed resources first, and creates added ones in the template's order."""
)
def failed_updates_roll_back() -> None:
    def update(self: Any, template: dict[str, Any], parameters: dict[str, Any] | None = None) -> None:
        diff = self.build_resource_diff(template, parameters)
        before = {
            "template": self._template,
            "parameters": dict(self.input_parameters),
            "resources": dict(self._resource_json_map),
        }
        self._template = template
        if parameters:
            self.input_parameters = parameters
        self.load_mapping()
        self.load_parameters()
        self.load_conditions()
        self._resource_json_map = template["Resources"]
        added: list[str] = []
        self.local_update = _Update()
        try:
            current = ""
            try:
                for current in creation_order(diff["Add"], template["Resources"]):
                    _ = self[current]  # moto's map creates a resource when it is first read
                    added.append(current)
                for current in diff["Modify"]:
                    self._parsed_resources[current] = cfn_parsing.parse_and_update_resource(
                        current, template["Resources"][current], self, self._account_id, self._region_name
                    )
            except Exception as exc:
                failed_type = template["Resources"][current]["Type"]
                _roll_back(self, before, [a for a in added if a in self._parsed_resources])
                raise RolledBack(current, failed_type, _reason(exc)) from exc
            _clean_up(self, diff["Remove"], before)
        finally:
            self.local_update = None

    replace(cfn_parsing.ResourceMap, "update", update)


# --- Resource types stock moto lacks ---------------------------------------------------------


@patch(
    """AWS::ApplicationAutoScaling::ScalableTarget and ::ScalingPolicy, AWS::CloudWatch::Alarm,
    AWS::SNS::Subscription and AWS::SNS::TopicPolicy are created, updated and deleted. Stock
    moto has no model for them: it skips them with a warning and still reports CREATE_COMPLETE,
    so an endpoint would seem to deploy with no autoscaling or alarms, and an alarm topic with
    no subscriber and no policy."""
)
def missing_resource_types_exist() -> None:
    register_types(ScalableTarget, ScalingPolicy, MetricAlarm, Subscription, TopicPolicy)


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


@patch(
    restores="""ListStackResources and DescribeStackResources list every resource of the stack by its
    logical id and type, as CloudFormation does (LogicalResourceId and ResourceType are required,
    ResourceType at least 1 character: botocore's cloudformation model); one of a type moto has no
    model of (AWS::CloudFormation::WaitConditionHandle, the S3 bucket policy of CDK's bootstrap
    stack) has no physical id here, since nothing was created. Stock moto lists such a resource
    with an empty logical id and type (ListStackResources), or without them (DescribeStackResources),
    and fails DescribeStackResources with a LogicalResourceId (HTTP 500) on a stack that has one."""
)
def resources_moto_lacks_are_listed() -> None:
    def describe_stack_resources(self: Any, stack_name: str, logical_resource_id: str | None) -> Any:
        stack = self.get_stack(stack_name)
        found = stack_resources(stack)
        if logical_resource_id is not None:
            found = [r for r in found if r.logical_resource_id == logical_resource_id]
        return stack, found

    def list_stack_resources(self: Any, stack_name_or_id: str) -> Any:
        stack = self.get_stack(stack_name_or_id)
        return stack, stack_resources(stack)

    replace(cfn_models.CloudFormationBackend, "describe_stack_resources", describe_stack_resources)
    replace(cfn_models.CloudFormationBackend, "list_stack_resources", list_stack_resources)


# --- Lambda-backed custom resources ------------------------------------------------------------


def _custom_resource_class(resource_type: str) -> type[Any] | None:
    # A custom type the local AWS answers in process (its patch says why) comes first.
    for model in enabled_types():
        if resource_type == model.TYPE:
            return model
    if resource_type.startswith("Custom::") or resource_type == "AWS::CloudFormation::CustomResource":
        return LambdaBackedCustomResource
    return None


@patch(
    """A custom resource (Custom::<name>, AWS::CloudFormation::CustomResource) whose ServiceToken is a
    Lambda function is created, updated and deleted by invoking that function for real
    (local_aws/awslambda: Node.js, the AWS SDK for JavaScript v3, the function's role) with
    CloudFormation's request event, and waiting for the response it PUTs to the event's ResponseURL
    (with the resource's ServiceTimeout, or until the invocation and Lambda's retries ended without
    one); a FAILED response, a bad one or none fails the resource and rolls the stack back, and a
    failed creation gets CloudFormation's Delete. CDK's AwsCustomResource (Custom::AWS) and a Vpc's
    Custom::VpcRestrictDefaultSG run their aws-cdk-lib handlers this way (a custom type whose own
    patch answers it in process comes first: Custom::S3AutoDeleteObjects). Stock moto invokes the
    function only in a Docker engine, answers a Create alone (no Update or Delete request is ever
    sent) and ignores a FAILED response."""
)
def custom_resources_invoke_their_function() -> None:
    original = cfn_parsing.resource_class_from_type

    def resource_class_from_type(resource_type: str) -> Any:
        return _custom_resource_class(resource_type) or original(resource_type)

    replace(cfn_parsing, "resource_class_from_type", resource_class_from_type)

    def process_cfn_response(self: Any) -> Any:
        status, message = responses_plane().deliver(self.body if isinstance(self.body, bytes) else self.body.encode())
        return status, {"status": status}, message

    replace(cfn_responses.CloudFormationResponse, "process_cfn_response", process_cfn_response)


# --- Deleting a stack ------------------------------------------------------------------------


def _dependencies(resources: dict[str, Any]) -> dict[str, set[str]]:
    """Each resource's logical id -> the resources it needs (Ref, Fn::GetAtt, Fn::Sub, DependsOn)."""
    found = {}
    for name, body in resources.items():
        needs = _references(body) | _substituted(body)
        depends = body.get("DependsOn", []) if isinstance(body, dict) else []
        needs |= {depends} if isinstance(depends, str) else set(depends)
        found[name] = needs & set(resources) - {name}
    return found


def _substituted(node: Any) -> set[str]:
    """Logical ids a template fragment names in Fn::Sub's ${Name} or ${Name.Attribute}."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "Fn::Sub":
                text = value[0] if isinstance(value, list) else value
                found |= {m.split(".")[0] for m in re.findall(r"\$\{([^!}][^}]*)\}", str(text))}
            found |= _substituted(value)
    elif isinstance(node, list):
        for item in node:
            found |= _substituted(item)
    return found


def creation_order(names: list[str], resources: dict[str, Any]) -> list[str]:
    """`names` ordered so that each comes after the resources of `names` it needs, DependsOn
    included (moto's map creates what a resource refers to on demand, but not what it depends on)."""
    needs = _dependencies(resources)
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
    needs = _dependencies(templates)
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


@patch(
    """A stack's resources are deleted in the reverse order of their dependencies (Ref, Fn::GetAtt,
    Fn::Sub, DependsOn), as CloudFormation deletes them: a custom resource before the function, role
    and policy its request needs, a route before its gateway. Resources with DeletionPolicy Retain
    stay. Stock moto deletes them in the order of a set, and tries failed ones again: a custom
    resource's Delete can find its function already gone."""
)
def stack_resources_are_deleted_in_dependency_order() -> None:
    def delete(self: Any) -> None:
        templates = self._resource_json_map
        names = [name for name, body in templates.items() if body.get("DeletionPolicy") != "Retain"]
        delete_in_dependency_order(self, names, templates, attempts=cfn_parsing.MAX_UPDATE_ATTEMPTS)

    replace(cfn_parsing.ResourceMap, "delete", delete)
