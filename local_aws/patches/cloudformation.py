"""CloudFormation: change sets, stack parameters, replacement on update, and CDK's custom
resources (AwsCustomResource's Custom::AWS, a Vpc's Custom::VpcRestrictDefaultSG), where moto's
CloudFormation differs from AWS's."""

from __future__ import annotations

import json
import logging
import re
import threading
from typing import Any, ClassVar

from moto.cloudformation import models as cfn_models
from moto.cloudformation import parsing as cfn_parsing
from moto.cloudformation import responses as cfn_responses
from moto.cloudformation.exceptions import CloudFormationError
from moto.core.responses import ActionResult, EmptyResult

from local_aws.patches.applicationautoscaling import ScalableTarget, ScalingPolicy
from local_aws.patches.base import EmulatedResource, enabled_types, patch, register_types, replace
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
                isinstance(updated, AwsSdkCallResource)
                and isinstance(old, AwsSdkCallResource)
                and updated.physical_id != old.physical_id
            ):
                _replaced(resources_map, logical_id, old, updated, resource_json)
                return updated
            _updated_in_place(logical_id)
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


class _Update(threading.local):
    """What the update in progress (on this thread) did: replacements to clean up after it
    (or undo), resources updated in place (to update back)."""

    active: bool = False
    replaced: list[tuple[str, Any, Any, dict[str, Any]]]
    in_place: list[str]

    def begin(self) -> None:
        self.active, self.replaced, self.in_place = True, [], []

    def end(self) -> None:
        self.active = False


_update = _Update()


def _replaced(resources_map: Any, logical_id: str, old: Any, new: Any, resource_json: dict[str, Any]) -> None:
    """`new` replaced `old`: delete `old` after the update, or now outside one."""
    if _update.active:
        _update.replaced.append((logical_id, old, new, resource_json))
    else:
        resources_map._delete_resource(old, resource_json)


def _updated_in_place(logical_id: str) -> None:
    if _update.active:
        _update.in_place.append(logical_id)


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
    for logical_id, old, _new, _json in _update.replaced:
        resources_map._parsed_resources[logical_id] = old
    for logical_id in reversed(_update.in_place):
        old_json = before["resources"][logical_id]
        try:
            restored = cfn_parsing.parse_and_update_resource(
                logical_id, old_json, resources_map, resources_map._account_id, resources_map._region_name
            )
            resources_map._parsed_resources[logical_id] = restored
        except Exception:
            log.warning("rollback could not update %s back", logical_id, exc_info=True)
    for _logical_id, _old, new, resource_json in reversed(_update.replaced):
        _delete_quietly(resources_map, new, resource_json)
    for logical_id in reversed(added):
        resource = resources_map._parsed_resources.pop(logical_id, None)
        _delete_quietly(resources_map, resource, new_template["Resources"][logical_id])


def _clean_up(resources_map: Any, removed: list[str], before: dict[str, Any]) -> None:
    """After a successful update: delete what it replaced, then what it removed."""
    for _logical_id, old, _new, resource_json in _update.replaced:
        resources_map._delete_resource(old, resource_json)
    pending = list(removed)
    for _ in range(cfn_parsing.MAX_UPDATE_ATTEMPTS):
        for logical_id in list(pending):
            resource = resources_map._parsed_resources.get(logical_id)
            try:
                if resource is not None and not isinstance(resource, str | dict | list):
                    resources_map._delete_resource(resource, before["resources"][logical_id])
            except Exception:  # noqa: S112 -- a dependency still in place: next pass
                continue
            resources_map._parsed_resources.pop(logical_id, None)
            pending.remove(logical_id)
    if pending:
        log.warning("the update could not delete %s", pending)


@patch(
    """An update (or a stack created by a change set) whose resource fails rolls back, as
    CloudFormation does: the resources it added are deleted, those it replaced come back, those
    it updated in place are updated back to the previous template, and the stack ends in
    UPDATE_ROLLBACK_COMPLETE (ROLLBACK_COMPLETE for a creation) with a *_FAILED event naming the
    resource and the reason, which the CDK CLI reports; ExecuteChangeSet itself succeeds. What an
    update replaces or removes is deleted only in the cleanup after it succeeded. Stock moto
    leaves the stack half-updated and answers ExecuteChangeSet with the resource's error (or
    HTTP 500), having deleted removed resources first."""
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
        _update.begin()
        try:
            current = ""
            try:
                for current in diff["Add"]:
                    _ = self[current]  # moto's map creates a resource when it is first read
                    added.append(current)
                for current in diff["Modify"]:
                    self._parsed_resources[current] = cfn_parsing.parse_and_update_resource(
                        current, template["Resources"][current], self, self._account_id, self._region_name
                    )
            except Exception as exc:
                failed_type = template["Resources"][current]["Type"]
                _roll_back(self, before, [a for a in added if a in self._parsed_resources])
                raise RolledBack(current, failed_type, str(exc) or type(exc).__name__) from exc
            _clean_up(self, diff["Remove"], before)
        finally:
            _update.end()

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


# --- CDK's AwsCustomResource ------------------------------------------------------------

#: Where the emulated custom resources send their SDK calls: the local AWS itself
#: (set by ``LocalAws.start``).
_endpoint: dict[str, str] = {}


def set_endpoint(url: str, access_key: str, secret_key: str) -> None:
    _endpoint.update(url=url, access_key=access_key, secret_key=secret_key)


def _snake(action: str) -> str:
    # AwsCustomResource takes SDK v3 names ("copyObject" or "CopyObjectCommand"); boto3 snake_case.
    name = action.removesuffix("Command")
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _sdk_call(call: dict[str, Any], region_name: str) -> dict[str, Any]:
    import boto3

    service = call["service"].removeprefix("@aws-sdk/client-").lower()
    client = boto3.client(
        service,
        endpoint_url=_endpoint["url"],
        region_name=call.get("region") or region_name,
        aws_access_key_id=_endpoint["access_key"],
        aws_secret_access_key=_endpoint["secret_key"],
    )
    response = getattr(client, _snake(call["action"]))(**call.get("parameters", {}))
    response.pop("ResponseMetadata", None)
    return dict(response)


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """The provider's flattening of a response: nested keys joined by dots, list items by index."""
    items: list[tuple[str, Any]]
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list):
        items = [(str(i), v) for i, v in enumerate(value)]
    else:
        return {prefix: value if isinstance(value, str) else json.dumps(value, default=str)}
    flat: dict[str, Any] = {}
    for key, item in items:
        flat.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def _physical_id(call: dict[str, Any], fallback: str) -> str:
    given = call.get("physicalResourceId") or {}
    return str(given.get("id") or fallback)


class AwsSdkCallResource(EmulatedResource):
    """Custom::AWS, the resource of CDK's ``AwsCustomResource``: its Create, Update and Delete
    SDK calls, made against the local AWS as its Lambda function makes them against AWS, and
    the call's response as its attributes. Not emulated: IAM (moto does not check the
    function's role), so tests/infra checks the role's scope."""

    TYPE: ClassVar[str] = "Custom::AWS"

    def __init__(
        self, physical_id: str, delete_call: dict[str, Any] | None, region_name: str, data: dict[str, Any] | None = None
    ) -> None:
        self.physical_id = physical_id
        self.delete_call = delete_call
        self.region_name = region_name
        #: The call's response, flattened as the provider returns it (Fn::GetAtt reads it).
        self.data = data or {}

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return True  # any field of the response

    def get_cfn_attribute(self, attribute_name: str) -> Any:
        return self.data.get(attribute_name)

    @property
    def physical_resource_id(self) -> str:
        return self.physical_id

    @classmethod
    def _from_properties(cls, which: str, properties: dict[str, Any], fallback_id: str, region_name: str) -> Any:
        # As the provider: a create without a Create call makes the Update call; an update
        # without an Update call makes none and keeps the physical id.
        raw = properties.get("Create") or properties.get("Update") if which == "Create" else properties.get("Update")
        call = json.loads(raw) if raw else None
        data = _flatten(_sdk_call(call, region_name)) if call is not None else {}
        if call is not None and call.get("outputPaths"):
            data = {k: v for k, v in data.items() if any(k.startswith(p) for p in call["outputPaths"])}
        delete = json.loads(properties["Delete"]) if properties.get("Delete") else None
        return cls(_physical_id(call or {}, fallback_id), delete, region_name, data)

    @classmethod
    def create(cls, name: str, properties: dict[str, Any], account_id: str, region_name: str) -> Any:
        return cls._from_properties("Create", properties, name, region_name)

    @classmethod
    def update_from_cloudformation_json(
        cls,
        original_resource: AwsSdkCallResource,
        new_resource_name: str,
        cloudformation_json: dict[str, Any],
        account_id: str,
        region_name: str,
    ) -> AwsSdkCallResource:
        properties = cloudformation_json["Properties"]
        # A new physical id means a new resource: CloudFormation deletes the old one after the
        # update (unmodifiable_resources_are_replaced does).
        return cls._from_properties("Update", properties, original_resource.physical_id, region_name)  # type: ignore[no-any-return]

    def delete(self, account_id: str, region_name: str) -> None:
        if self.delete_call is not None:
            _sdk_call(self.delete_call, self.region_name)


@patch(
    """Custom::AWS (CDK's AwsCustomResource) makes its Create, Update and Delete SDK calls
    (GptjStack copies its model files under one S3 prefix this way). Stock moto invokes the
    provider's Lambda function, which needs a Docker engine, and has no update or delete for
    custom resources; the calls run here in process, against the local AWS. (Other Custom::
    types are emulated through the same mapping once their own patch registers them.)"""
)
def aws_custom_resources_make_their_calls() -> None:
    original = cfn_parsing.resource_class_from_type

    def resource_class_from_type(resource_type: str) -> Any:
        # moto maps every Custom:: type to its own model, which invokes the handler's function.
        for model in enabled_types():
            if resource_type == model.TYPE:
                return model
        return original(resource_type)

    replace(cfn_parsing, "resource_class_from_type", resource_class_from_type)
    register_types(AwsSdkCallResource)


# --- CDK's restrict_default_security_group ------------------------------------------------


# The two rules AWS gives a VPC's default security group, as the handler writes them: all
# traffic from the group itself in, all traffic out.
def _default_ingress(group_id: str, account: str) -> dict[str, Any]:
    itself = {"GroupId": group_id, "UserId": account}
    return {"GroupId": group_id, "IpPermissions": [{"IpProtocol": "-1", "UserIdGroupPairs": [itself]}]}


def _default_egress(group_id: str) -> dict[str, Any]:
    return {"GroupId": group_id, "IpPermissions": [{"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}]}


def _ec2_call(action: str, parameters: dict[str, Any], region_name: str, *, unless: str) -> None:
    """One EC2 call of the handler, which succeeds if it fails with error code `unless`."""
    import botocore.exceptions

    try:
        _sdk_call({"service": "EC2", "action": action, "parameters": parameters}, region_name)
    except botocore.exceptions.ClientError as e:
        if e.response["Error"]["Code"] != unless:
            raise


class RestrictedDefaultSecurityGroup(EmulatedResource):
    """Custom::VpcRestrictDefaultSG, what CDK's Vpc makes for ``restrict_default_security_group``:
    its handler's EC2 calls (aws-cdk-lib, custom-resource-handlers/aws-ec2/
    restrict-default-security-group-handler) against the local AWS. Create revokes the default
    group's two default rules (a missing one is fine), Delete authorizes them again, an Update
    that names another group does both."""

    TYPE: ClassVar[str] = "Custom::VpcRestrictDefaultSG"

    def __init__(self, group_id: str, account: str, region_name: str) -> None:
        self.group_id, self.account, self.region_name = group_id, account, region_name

    @property
    def physical_resource_id(self) -> str:
        return f"restrict-{self.group_id}"

    @classmethod
    def create(cls, name: str, properties: dict[str, Any], account_id: str, region_name: str) -> Any:
        made = cls(properties["DefaultSecurityGroupId"], str(properties["Account"]), region_name)
        # As the handler: a rule that is not there is fine (moto gives no default group the
        # ingress rule from itself that AWS gives).
        for action, rule in (
            ("revokeSecurityGroupEgress", _default_egress(made.group_id)),
            ("revokeSecurityGroupIngress", _default_ingress(made.group_id, made.account)),
        ):
            _ec2_call(action, rule, region_name, unless="InvalidPermission.NotFound")
        return made

    def replaced_by(self, properties: dict[str, Any]) -> bool:
        return bool(properties["DefaultSecurityGroupId"] != self.group_id)

    def delete(self, account_id: str, region_name: str) -> None:
        # moto deletes a stack's resources in no particular order, where CloudFormation deletes
        # this one before the VPC it names: a group already gone with its VPC gets nothing back.
        for action, rule in (
            ("authorizeSecurityGroupIngress", _default_ingress(self.group_id, self.account)),
            ("authorizeSecurityGroupEgress", _default_egress(self.group_id)),
        ):
            _ec2_call(action, rule, self.region_name, unless="InvalidGroup.NotFound")


@patch(
    """Custom::VpcRestrictDefaultSG (a CDK Vpc's restrict_default_security_group) leaves the VPC's
    default security group without rules, and gives them back when it is deleted. Stock moto
    invokes the provider's Lambda function, which needs Docker, and has no update or delete for
    custom resources: the group keeps its rules. (Runs through the Custom:: types that
    aws_custom_resources_make_their_calls maps.)"""
)
def default_security_groups_are_restricted() -> None:
    register_types(RestrictedDefaultSecurityGroup)
