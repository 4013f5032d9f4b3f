"""The local AWS answers in AWS's own shapes: what a Describe call answers of a resource is what
AWS answers of it, member for member."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from local_aws import LocalAws
from local_aws.json_answers import leave_out_nulls
from local_aws.validation.answers import answer_violations
from tests.local_aws.helpers import (
    ECHO_IMAGE,
    ROLE_ARN,
    client,
    container_output,
    create_stack,
    echo_config,
    echo_endpoint,
    endpoint_status,
    resource,
    resources,
)

CAPTURE = {
    "InitialSamplingPercentage": 20,
    "DestinationS3Uri": "s3://captured/echo",
    "CaptureOptions": [{"CaptureMode": "Input"}, {"CaptureMode": "Output"}],
}


def test_an_endpoint_without_data_capture_describes_none(aws: LocalAws) -> None:
    aws.reset()
    echo_endpoint(aws, "echo")
    sm = client(aws, "sagemaker")
    assert "DataCaptureConfig" not in sm.describe_endpoint_config(EndpointConfigName="echo-config")
    assert "DataCaptureConfig" not in sm.describe_endpoint(EndpointName="echo")


def test_an_endpoint_with_data_capture_describes_its_summary(aws: LocalAws) -> None:
    aws.reset()
    echo_config(aws, "plain")
    sm = client(aws, "sagemaker")
    variants = sm.describe_endpoint_config(EndpointConfigName="plain")["ProductionVariants"]
    sm.create_endpoint_config(EndpointConfigName="captured", ProductionVariants=variants, DataCaptureConfig=CAPTURE)
    sm.create_endpoint(EndpointName="captured", EndpointConfigName="captured")
    assert sm.describe_endpoint_config(EndpointConfigName="captured")["DataCaptureConfig"] == CAPTURE
    assert sm.describe_endpoint(EndpointName="captured")["DataCaptureConfig"] == {
        "EnableCapture": True,
        "CaptureStatus": "Started",
        "CurrentSamplingPercentage": 20,
        "DestinationS3Uri": "s3://captured/echo",
        "KmsKeyId": "",
    }


def test_the_reads_the_stacks_tests_and_docs_make_are_answered_in_their_shapes(aws: LocalAws) -> None:
    """One of each read the stacks, the tests and the docs make, on an account that has what they
    read (an endpoint that answered, its scaling and alarms, a stack, a log group): the local AWS
    kept no fault (an answer off its shape is one: local_aws.patches.protocol)."""
    from local_aws.host import HOST

    aws.reset()
    echo_endpoint(aws, "echo")
    assert endpoint_status(aws, "echo", settle=True) == "InService"
    client(aws, "sagemaker-runtime").invoke_endpoint(EndpointName="echo", Body=b"{}", ContentType="application/json")
    variant = {
        "ServiceNamespace": "sagemaker",
        "ResourceId": "endpoint/echo/variant/AllTraffic",
        "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
    }
    scaling = client(aws, "application-autoscaling")
    scaling.register_scalable_target(**variant, MinCapacity=1, MaxCapacity=2)
    predefined = {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"}
    tracking = {"TargetValue": 10.0, "PredefinedMetricSpecification": predefined}
    scaling.put_scaling_policy(
        **variant,
        PolicyName="track",
        PolicyType="TargetTrackingScaling",
        TargetTrackingScalingPolicyConfiguration=tracking,
    )
    create_stack(aws, "stack", resources(Handle=resource("AWS::CloudFormation::WaitConditionHandle")))
    group = "/aws/sagemaker/Endpoints/echo"
    # The group SageMaker writes the endpoint's container output to (local_aws/sagemaker/logs.py).
    assert container_output(aws, group, "echo"), f"the echo container's output never reached {group}"
    aws.clock.advance(60)
    dimensions = [{"Name": "EndpointName", "Value": "echo"}, {"Name": "VariantName", "Value": "AllTraffic"}]
    metric = {"Namespace": "AWS/SageMaker", "MetricName": "Invocations", "Dimensions": dimensions}
    period = {"StartTime": aws.clock.now() - timedelta(minutes=10), "EndTime": aws.clock.now()}
    query = {"Id": "m", "MetricStat": {"Metric": metric, "Period": 60, "Stat": "Sum"}}
    reads: list[tuple[str, str, dict[str, Any]]] = [
        ("sagemaker", "list_endpoints", {}),
        ("sagemaker", "list_endpoint_configs", {}),
        ("sagemaker", "list_models", {}),
        ("sagemaker", "list_inference_components", {}),
        ("sagemaker", "describe_endpoint", {"EndpointName": "echo"}),
        ("sagemaker", "describe_endpoint_config", {"EndpointConfigName": "echo-config"}),
        ("sagemaker", "describe_model", {"ModelName": "echo-config-model"}),
        ("cloudwatch", "describe_alarms", {}),
        ("cloudwatch", "list_metrics", {"Namespace": "AWS/SageMaker"}),
        ("cloudwatch", "get_metric_statistics", {**metric, **period, "Period": 60, "Statistics": ["Sum"]}),
        ("cloudwatch", "get_metric_data", {**period, "MetricDataQueries": [query]}),
        ("application-autoscaling", "describe_scalable_targets", {"ServiceNamespace": "sagemaker"}),
        ("application-autoscaling", "describe_scaling_policies", {"ServiceNamespace": "sagemaker"}),
        ("application-autoscaling", "describe_scaling_activities", {"ServiceNamespace": "sagemaker"}),
        ("cloudformation", "describe_stacks", {"StackName": "stack"}),
        ("cloudformation", "describe_stack_events", {"StackName": "stack"}),
        ("cloudformation", "list_stack_resources", {"StackName": "stack"}),
        ("cloudformation", "describe_stack_resources", {"StackName": "stack"}),
        ("logs", "describe_log_groups", {}),
        ("logs", "describe_log_streams", {"logGroupName": group}),
        ("lambda", "list_functions", {}),
    ]
    HOST.faults.take()
    for service, read, params in reads:
        getattr(client(aws, service), read)(**params)
    assert [f.error for f in HOST.faults.take()] == []


# --- The check of an answer against its shape (local_aws/validation/answers.py) ----------------

ENDPOINT_ARN = "arn:aws:sagemaker:us-east-1:123456789012:endpoint/echo"
DESCRIBED = {
    "EndpointName": "echo",
    "EndpointArn": ENDPOINT_ARN,
    "EndpointConfigName": "echo-config",
    "ProductionVariants": [{"VariantName": "AllTraffic", "CurrentInstanceCount": 1}],
    "EndpointStatus": "InService",
    "CreationTime": 1700000000.5,
    "LastModifiedTime": 1700000000,
}


def described(**changes: Any) -> list[str]:
    answer = {k: v for k, v in {**DESCRIBED, **changes}.items() if v is not OMITTED}
    return [str(v) for v in answer_violations("sagemaker", "DescribeEndpoint", "json", {}, json.dumps(answer))]


OMITTED = object()


def test_an_answer_in_its_shape_breaks_nothing() -> None:
    assert described() == []


@pytest.mark.parametrize(
    ("changes", "violation"),
    [
        ({"Tags": []}, "Tags: DescribeEndpointOutput has no such member"),
        ({"EndpointStatus": OMITTED}, "EndpointStatus: a required member is missing"),
        ({"DataCaptureConfig": {}}, "DataCaptureConfig.EnableCapture: a required member is missing"),
        ({"EndpointStatus": "Resting"}, "EndpointStatus: 'Resting': Member must satisfy enum value set: [OutOfService"),
        ({"EndpointArn": "endpoint/echo"}, "EndpointArn: 'endpoint/echo': Member must satisfy regular expression"),
        ({"EndpointName": "e" * 64}, "EndpointName: '" + "e" * 63),
        ({"CreationTime": "2024-01-01T00:00:00Z"}, 'CreationTime: a timestamp answered as "2024-01-01T00:00:00Z"'),
        ({"FailureReason": None}, "FailureReason: null: AWS leaves out a member it has no value for"),
        ({"ProductionVariants": {}}, "ProductionVariants: a list answered as dict"),
        (
            {"ProductionVariants": [{"VariantName": "AllTraffic", "CurrentInstanceCount": "1"}]},
            'ProductionVariants[0].CurrentInstanceCount: an integer answered as str "1"',
        ),
        (
            {"ProductionVariants": [{"VariantName": "AllTraffic", "Bogus": 1}]},
            "ProductionVariants[0].Bogus: ProductionVariantSummary has no such member",
        ),
    ],
)
def test_an_answer_that_breaks_its_shape_says_where(changes: dict[str, Any], violation: str) -> None:
    found = described(**changes)
    assert any(v.startswith(violation) for v in found), found


ALARMS = """<DescribeAlarmsResponse xmlns="http://monitoring.amazonaws.com/doc/2010-08-01/">
  <DescribeAlarmsResult><MetricAlarms><member>
    <AlarmName>latency</AlarmName><StateValue>OK</StateValue><ActionsEnabled>true</ActionsEnabled>
    <StateUpdatedTimestamp>2024-01-01T00:00:00.000Z</StateUpdatedTimestamp><Period>60</Period>
    <Dimensions><member><Name>EndpointName</Name><Value>echo</Value></member></Dimensions>{extra}
  </member></MetricAlarms><CompositeAlarms/></DescribeAlarmsResult>
  <ResponseMetadata><RequestId>1</RequestId></ResponseMetadata>
</DescribeAlarmsResponse>"""


@pytest.mark.parametrize(
    ("extra", "violation"),
    [
        ("", None),
        ("<Bogus>1</Bogus>", "MetricAlarms[0].Bogus: MetricAlarm has no such member"),
        ("<Threshold>high</Threshold>", "MetricAlarms[0].Threshold: a double written as 'high'"),
        (
            "<EvaluationPeriods>1.5</EvaluationPeriods>",
            "MetricAlarms[0].EvaluationPeriods: an integer written as '1.5'",
        ),
        ("<ActionsEnabled>True</ActionsEnabled>", "MetricAlarms[0].ActionsEnabled: written 2 times"),
        ("<StateValue2>OK</StateValue2>", "MetricAlarms[0].StateValue2: MetricAlarm has no such member"),
        (
            "<AlarmActions><item>arn</item></AlarmActions>",
            "MetricAlarms[0].AlarmActions.item: a list's item written as",
        ),
        (
            "<AlarmConfigurationUpdatedTimestamp>yesterday</AlarmConfigurationUpdatedTimestamp>",
            "MetricAlarms[0].AlarmConfigurationUpdatedTimestamp: a timestamp written as 'yesterday', not iso8601",
        ),
    ],
)
def test_an_xml_answer_is_read_as_sent(extra: str, violation: str | None) -> None:
    found = [str(v) for v in answer_violations("cloudwatch", "DescribeAlarms", "query", {}, ALARMS.format(extra=extra))]
    assert found == ([] if violation is None else found[:1]) and (
        violation is None or found[0].startswith(violation)
    ), found


def test_an_xml_answer_of_another_operation_is_refused() -> None:
    (found,) = answer_violations("cloudwatch", "DescribeAlarmHistory", "query", {}, ALARMS.format(extra=""))
    assert (
        str(found) == "(the answer): the answer's root is <DescribeAlarmsResponse>, not <DescribeAlarmHistoryResponse>"
    )


def test_a_value_aws_answers_beyond_the_models_enum_is_allowed_where_it_does() -> None:
    event = """<DescribeStackEventsResponse><DescribeStackEventsResult><StackEvents><member>
      <StackId>id</StackId><EventId>1</EventId><StackName>s</StackName><Timestamp>2024-01-01T00:00:00Z</Timestamp>
      <ResourceStatus>{}</ResourceStatus></member></StackEvents></DescribeStackEventsResult></DescribeStackEventsResponse>"""
    assert (
        answer_violations("cloudformation", "DescribeStackEvents", "query", {}, event.format("REVIEW_IN_PROGRESS"))
        == []
    )
    (found,) = answer_violations("cloudformation", "DescribeStackEvents", "query", {}, event.format("RESTING"))
    assert "StackEvents[0].ResourceStatus: 'RESTING': Member must satisfy enum value set" in str(found)
    gateway = """<DescribeInternetGatewaysResponse><internetGatewaySet><item><attachmentSet><item>
      <state>{}</state><vpcId>vpc-1</vpcId></item></attachmentSet></item></internetGatewaySet></DescribeInternetGatewaysResponse>"""
    assert answer_violations("ec2", "DescribeInternetGateways", "ec2", {}, gateway.format("available")) == []
    (found,) = answer_violations("ec2", "DescribeInternetGateways", "ec2", {}, gateway.format("resting"))
    assert "InternetGateways[0].Attachments[0].State: 'resting'" in str(found)


def test_the_headers_of_a_rest_answer_are_checked_and_its_raw_payload_left_alone() -> None:
    headers = {"Content-Type": "application/json", "X-Amzn-SageMaker-Custom-Attributes": "a" * 1025}
    (found,) = answer_violations("sagemaker-runtime", "InvokeEndpoint", "rest-json", headers, b"\xff not JSON")
    assert str(found).startswith("CustomAttributes: 'aaa") and "length less than or equal to 1024" in str(found)
    assert answer_violations("sagemaker-runtime", "InvokeEndpoint", "rest-json", {"Content-Type": "a"}, b"\xff") == []
    # A stream's body is not read (None), its headers are.
    streamed = {"X-Amzn-SageMaker-Content-Type": "application/json", "x-Amzn-Invoked-Production-Variant": "Allé"}
    (found,) = answer_violations("sagemaker-runtime", "InvokeEndpointWithResponseStream", "rest-json", streamed, None)
    assert str(found).startswith("InvokedProductionVariant: 'Allé': Member must satisfy regular expression"), found


def test_an_operation_that_answers_nothing_answers_an_empty_body() -> None:
    assert answer_violations("sagemaker", "DeleteEndpoint", "json", {}, "") == []
    assert answer_violations("sagemaker", "DeleteEndpoint", "json", {}, "{}") == []
    (found,) = answer_violations("sagemaker", "DeleteEndpoint", "json", {}, '{"EndpointArn": "x"}')
    assert "the operation answers nothing" in str(found)


def test_a_model_without_a_vpc_describes_none(aws: LocalAws) -> None:
    aws.reset()
    vpc = {"SecurityGroupIds": ["sg-12345678"], "Subnets": ["subnet-12345678"]}
    plain = {"ExecutionRoleArn": ROLE_ARN, "PrimaryContainer": {"Image": ECHO_IMAGE}}
    models = {"Plain": plain, "InVpc": {**plain, "VpcConfig": vpc}}
    create_stack(
        aws, "stack", resources(**{name: resource("AWS::SageMaker::Model", **p) for name, p in models.items()})
    )
    sm = client(aws, "sagemaker")
    described = [sm.describe_model(ModelName=m["ModelName"]) for m in sm.list_models()["Models"]]
    assert sorted((d.get("VpcConfig") for d in described), key=str) == [None, vpc], described


# --- JSON answers without null members (local_aws/json_answers.py) --------------------------------


def test_a_json_answer_leaves_out_its_null_members_but_not_a_payloads() -> None:
    configuration = {
        "FunctionName": "f",
        "KMSKeyArn": None,
        "VpcConfig": None,
        "Layers": [{"Arn": "a", "CodeSize": None}],
    }
    written = leave_out_nulls("lambda", "GetFunctionConfiguration", json.dumps(configuration))
    assert json.loads(written) == {"FunctionName": "f", "Layers": [{"Arn": "a"}]}
    # Invoke's answer is the function's own output, a payload of bytes.
    assert leave_out_nulls("lambda", "Invoke", b'{"answer": null}') == b'{"answer": null}'
    assert leave_out_nulls("lambda", "GetFunctionConfiguration", "not JSON, null") == "not JSON, null"
