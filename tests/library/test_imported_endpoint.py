"""An endpoint that exists outside the app, brought in by name or attributes, in a bare
``Stack()``: what a user grants on it and the metrics they read from it."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import CfnParameter, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template

from llm_inference_cdk import ISageMakerEndpoint, PropError, SageMakerEndpoint, SageMakerEndpointBase
from tests.library.helpers import VARIANT_METRICS, endpoint


def invoke_resources(stack: Stack) -> Any:
    (policy,) = Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "sagemaker:InvokeEndpoint"
    return statement["Resource"]


def test_grant_invoke_on_an_endpoint_by_name_names_its_arn_in_lower_case() -> None:
    stack = Stack()
    imported = SageMakerEndpoint.from_endpoint_name(stack, "Existing", "My-Endpoint")
    imported.grant_invoke(iam.Role(stack, "Caller", assumed_by=iam.AccountRootPrincipal()))
    # SageMaker writes the name in lower case in the endpoint's ARN and IAM compares ARNs
    # case-sensitively: the ARN as SageMaker writes it, in this stack's partition, region, account.
    assert invoke_resources(stack) == {
        "Fn::Join": [
            "",
            [
                "arn:", {"Ref": "AWS::Partition"}, ":sagemaker:", {"Ref": "AWS::Region"}, ":",
                {"Ref": "AWS::AccountId"}, ":endpoint/my-endpoint",
            ],
        ]
    }  # fmt: skip
    assert imported.endpoint_name == "My-Endpoint"


def test_grant_invoke_on_an_endpoint_by_attributes_uses_the_arn_given() -> None:
    stack = Stack()
    arn = "arn:aws:sagemaker:eu-west-1:111122223333:endpoint/chat"
    imported = SageMakerEndpoint.from_endpoint_attributes(stack, "Existing", endpoint_name="chat", endpoint_arn=arn)
    imported.grant_invoke(iam.Role(stack, "Caller", assumed_by=iam.AccountRootPrincipal()))
    assert invoke_resources(stack) == arn


@pytest.mark.parametrize(("method", "namespace", "name", "statistic"), VARIANT_METRICS)
def test_an_imported_endpoint_has_the_variant_metrics_sagemaker_publishes(
    method: str, namespace: str, name: str, statistic: str
) -> None:
    stack = Stack()
    imported = SageMakerEndpoint.from_endpoint_attributes(
        stack, "Existing", endpoint_name="My-Endpoint", variant_name="Blue"
    )
    metric = getattr(imported, method)()
    assert (metric.namespace, metric.metric_name, metric.statistic) == (namespace, name, statistic)
    # CloudWatch's dimensions carry the name as it was created, capitals and all.
    assert metric.dimensions == {"EndpointName": "My-Endpoint", "VariantName": "Blue"}
    assert metric.period.to_seconds() == 60


def test_an_alarm_on_an_imported_endpoint_watches_its_variant() -> None:
    stack = Stack()
    imported = SageMakerEndpoint.from_endpoint_name(stack, "Existing", "chat")
    cloudwatch.Alarm(stack, "Errors", metric=imported.metric_invocation_5xx_errors(), threshold=1, evaluation_periods=1)
    Template.from_stack(stack).has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": "AWS/SageMaker",
            "MetricName": "Invocation5XXErrors",
            "Dimensions": [{"Name": "EndpointName", "Value": "chat"}, {"Name": "VariantName", "Value": "AllTraffic"}],
        },
    )


def test_a_name_that_is_a_token_needs_the_arn_and_a_bad_name_is_refused() -> None:
    stack = Stack()
    name = CfnParameter(stack, "EndpointName").value_as_string
    with pytest.raises(
        PropError, match=r"endpoint_name=.* is invalid: allowed is a name known at synthesis.*endpoint_arn"
    ):
        SageMakerEndpoint.from_endpoint_name(stack, "ByToken", name)
    arn = CfnParameter(stack, "EndpointArn").value_as_string
    imported = SageMakerEndpoint.from_endpoint_attributes(stack, "ByArn", endpoint_name=name, endpoint_arn=arn)
    assert imported.endpoint_arn == arn
    with pytest.raises(PropError) as refused:
        SageMakerEndpoint.from_endpoint_name(stack, "Bad", "-bad_name", variant_name="")
    assert [p.prop for p in refused.value.problems] == ["endpoint_name", "variant_name"]
    assert str(refused.value).splitlines()[0] == (
        "SageMakerEndpoint.from_endpoint_name: endpoint_name='-bad_name' is invalid: allowed is 1 to 63 letters, "
        "digits and hyphens, not starting with one"
    )


def test_owned_and_imported_endpoints_share_one_grant_and_metric_code() -> None:
    stack = Stack()
    owned = endpoint(stack)
    imported = SageMakerEndpoint.from_endpoint_name(stack, "Existing", "chat")
    for made in (owned, imported):
        assert isinstance(made, SageMakerEndpointBase)
        assert isinstance(made, ISageMakerEndpoint)
    assert {method for method, *_ in VARIANT_METRICS} | {"grant_invoke", "metric"} <= set(vars(SageMakerEndpointBase))
    # The owned endpoint adds to the grant (async mode) but defines no metric of its own.
    assert not [name for name in vars(SageMakerEndpoint) if name.startswith("metric")]
