"""CloudFormation: change sets, stack parameters, replacement on update, rollback, deletion order,
and Lambda-backed custom resources (run by local_aws/awslambda), where moto's CloudFormation
differs from AWS's."""

from __future__ import annotations

import logging
from typing import Any

from moto.cloudformation import models as cfn_models
from moto.cloudformation import parsing as cfn_parsing
from moto.cloudformation import responses as cfn_responses
from moto.core.responses import ActionResult, EmptyResult

from local_aws.awslambda import LambdaBackedCustomResource, responses_plane
from local_aws.cloudformation import change_sets, ordering, updates
from local_aws.cloudformation.change_sets import ChangeSetNotFound, change_sets_of
from local_aws.cloudformation.ordering import delete_in_dependency_order
from local_aws.cloudformation.stacks import given_parameters, stack_resources
from local_aws.cloudformation.updates import ALWAYS_REPLACED
from local_aws.patches.applicationautoscaling import ScalableTarget, ScalingPolicy
from local_aws.patches.base import enabled_types, patch, register_types, replace
from local_aws.patches.cloudwatch import MetricAlarm
from local_aws.patches.sns import Subscription, TopicPolicy

log = logging.getLogger("local_aws.cloudformation")

# --- Change sets -------------------------------------------------------------------------


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
        found = change_sets_of(self, change_set_name, stack_name)
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
        for cs in change_sets_of(self, change_set_name, stack_name):
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
        change_sets.execute(self, change_set_name, stack_name)

    replace(cfn_models.CloudFormationBackend, "execute_change_set", execute_change_set)


# --- Stack parameters ----------------------------------------------------------------------


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
        return given_parameters(self, dict(self.resource_map.input_parameters))

    def has_parameters(self: Any, other_parameters: dict[str, Any]) -> bool:
        return bool(self.stack_parameters == given_parameters(self, other_parameters))

    replace(cfn_models.Stack, "stack_parameters", property(stack_parameters))
    replace(cfn_models.Stack, "has_parameters", has_parameters)


# --- Replacement on update -------------------------------------------------------------------


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
        return updates.update_resource(original, logical_id, resource_json, resources_map, account_id, region_name)

    replace(cfn_parsing, "parse_and_update_resource", parse_and_update_resource)


def _replaced_on_update(resource_json: dict[str, Any]) -> bool:
    if resource_json["Type"] in ALWAYS_REPLACED:
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
        diff["Modify"] = ordering.with_dependents(diff, other_template["Resources"], _replaced_on_update)
        return diff

    replace(cfn_parsing.ResourceMap, "build_resource_diff", build_resource_diff)


# --- Failed updates roll back ----------------------------------------------------------------


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
        updates.update(self, template, parameters)

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
