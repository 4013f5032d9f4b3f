"""Policies evaluated as AWS evaluates them (local_aws/policies.py), and the calls of deployed
resources on each other that the local AWS decides with them."""

from __future__ import annotations

import copy
import json
import logging
import re
import time
from typing import Any

import pytest
from aws_cdk import DefaultStackSynthesizer, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Template as CdkTemplate
from botocore.exceptions import ClientError

from llm_inference_cdk import AlarmTopic
from local_aws import LocalAws
from local_aws.policies import Caller, condition_holds, evaluate, service_caller
from tests.library.helpers import endpoint
from tests.local_aws.helpers import (
    AWS_CUSTOM_RESOURCE,
    ECHO_IMAGE,
    Template,
    cdk_handler,
    client,
    container_output,
    create_stack,
    echo_endpoint,
    endpoint_status,
    stack_status,
    subscribed_queue,
)

ACCOUNT = "123456789012"
ROLE = Caller(
    arn=f"arn:aws:iam::{ACCOUNT}:role/reader",
    account=ACCOUNT,
    session=f"arn:aws:sts::{ACCOUNT}:assumed-role/reader/s",
    policies=(
        json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/output/*"},
                    {"Effect": "Deny", "Action": "s3:*", "Resource": "arn:aws:s3:::b/output/secret"},
                ],
            }
        ),
    ),
)


def _policy(*statements: dict[str, Any]) -> dict[str, Any]:
    return {"Version": "2012-10-17", "Statement": list(statements)}


# --- The evaluator --------------------------------------------------------------------------------


def test_identity_policy_allows_what_it_names_and_an_explicit_deny_wins() -> None:
    assert evaluate(ROLE, "s3:GetObject", "arn:aws:s3:::b/output/a.out").allowed
    implicit = evaluate(ROLE, "s3:GetObject", "arn:aws:s3:::b/input/a")
    assert not implicit.allowed
    assert implicit.message == (
        f"User: {ROLE.session} is not authorized to perform: s3:GetObject on resource: arn:aws:s3:::b/input/a "
        "because no identity-based policy allows the s3:GetObject action"
    )
    explicit = evaluate(ROLE, "s3:GetObject", "arn:aws:s3:::b/output/secret")
    assert not explicit.allowed and explicit.message.endswith("with an explicit deny in an identity-based policy")


def test_actions_match_without_case_and_resources_with_it() -> None:
    assert evaluate(ROLE, "S3:getobject", "arn:aws:s3:::b/output/a.out").allowed
    assert not evaluate(ROLE, "s3:GetObject", "arn:aws:s3:::b/OUTPUT/a.out").allowed


def test_a_resource_policy_lets_in_the_service_it_names_under_its_conditions() -> None:
    topic = "arn:aws:sns:us-east-1:123456789012:alarms"
    alarms = "arn:aws:cloudwatch:us-east-1:123456789012:alarm:*"
    policy = _policy(
        {
            "Effect": "Deny",
            "Principal": "*",
            "Action": "sns:Publish",
            "Resource": topic,
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        },
        {
            "Effect": "Allow",
            "Principal": {"Service": "cloudwatch.amazonaws.com"},
            "Action": "sns:Publish",
            "Resource": topic,
            "Condition": {"StringEquals": {"aws:SourceAccount": ACCOUNT}, "ArnLike": {"aws:SourceArn": alarms}},
        },
    )
    cw = service_caller("cloudwatch.amazonaws.com", ACCOUNT)
    mine = {"aws:SourceAccount": ACCOUNT, "aws:SourceArn": alarms.replace("*", "high-latency")}
    assert evaluate(cw, "SNS:Publish", topic, resource_policy=policy, context=mine).allowed
    # Another account's alarm, another service, and plain HTTP are refused.
    other = {**mine, "aws:SourceAccount": "111122223333"}
    assert not evaluate(cw, "SNS:Publish", topic, resource_policy=policy, context=other).allowed
    events = service_caller("events.amazonaws.com", ACCOUNT)
    refused = evaluate(events, "SNS:Publish", topic, resource_policy=policy, context=mine)
    assert refused.message.endswith("because no resource-based policy allows the SNS:Publish action")
    http = evaluate(cw, "SNS:Publish", topic, resource_policy=policy, context={**mine, "aws:SecureTransport": "false"})
    assert http.message.endswith("with an explicit deny in a resource-based policy")


def test_a_key_policy_must_allow_the_caller_or_delegate_to_the_account() -> None:
    key = "arn:aws:kms:us-east-1:123456789012:key/k"
    reader = Caller(
        arn=ROLE.arn,
        account=ACCOUNT,
        policies=(json.dumps(_policy({"Effect": "Allow", "Action": "kms:Decrypt", "Resource": key})),),
    )
    delegating = _policy(
        {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, "Action": "kms:*", "Resource": "*"}
    )
    assert evaluate(reader, "kms:Decrypt", key, resource_policy=delegating, key_policy=True).allowed
    assert not evaluate(ROLE, "kms:Decrypt", key, resource_policy=delegating, key_policy=True).allowed
    closed = _policy({"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::111122223333:root"}, "Action": "kms:*"})
    assert not evaluate(reader, "kms:Decrypt", key, resource_policy=closed, key_policy=True).allowed


@pytest.mark.parametrize(
    ("operator", "key", "expected", "context", "holds"),
    [
        ("StringEquals", "aws:SourceAccount", "1", {"aws:sourceaccount": "1"}, True),  # keys ignore case
        ("StringEquals", "aws:SourceAccount", "1", {}, False),
        ("StringNotEquals", "aws:SourceAccount", "1", {}, True),
        ("StringEqualsIfExists", "aws:SourceAccount", "1", {}, True),
        ("StringLike", "s3:prefix", ["output/*", "failure/*"], {"s3:prefix": "failure/x"}, True),
        ("ArnLike", "aws:SourceArn", "arn:aws:cloudwatch:*:1:alarm:*", {"aws:SourceArn": "arn:aws:sns:r:1:t"}, False),
        ("Bool", "aws:SecureTransport", "false", {"aws:SecureTransport": "true"}, False),
        ("Bool", "kms:GrantIsForAWSResource", True, {"kms:GrantIsForAWSResource": "true"}, True),
        ("Null", "aws:SourceArn", "true", {}, True),
        ("ForAnyValue:StringEquals", "cloudwatch:namespace", ["A", "B"], {"cloudwatch:namespace": ["B"]}, True),
        ("NumericLessThan", "s3:max-keys", "10", {"s3:max-keys": "5"}, True),
        ("NoSuchOperator", "aws:SourceArn", "x", {"aws:SourceArn": "x"}, False),
    ],
)
def test_condition_operators(operator: str, key: str, expected: Any, context: dict[str, Any], holds: bool) -> None:
    assert condition_holds(operator, key, expected, context) is holds


# --- CloudWatch publishing an alarm's notification to an AlarmTopic -------------------------------


def alarm_topic_template() -> Template:
    """The library's AlarmTopic and one alarm notifying it, as CloudFormation deploys them."""
    stack = Stack(synthesizer=DefaultStackSynthesizer(generate_bootstrap_version_rule=False))
    topic = AlarmTopic(stack, "Alarms")
    metric = cloudwatch.Metric(namespace="Test", metric_name="Errors", period=Duration.minutes(1))
    alarm = metric.create_alarm(stack, "Alarm", threshold=1, evaluation_periods=1)
    alarm.add_alarm_action(actions.SnsAction(topic.topic))
    return dict(CdkTemplate.from_stack(stack).to_json())


def _without_cloudwatch(template: Template, resource_type: str, document: str) -> Template:
    changed = copy.deepcopy(template)
    for resource in changed["Resources"].values():
        if resource["Type"] == resource_type:
            policy = resource["Properties"][document]
            policy["Statement"] = [
                s for s in policy["Statement"] if s.get("Principal") != {"Service": "cloudwatch.amazonaws.com"}
            ]
    return changed


def _notified(aws: LocalAws, template: Template) -> tuple[list[str], list[tuple[str, str]]]:
    """Deploy `template`, subscribe a queue to its topic, force its alarm to ALARM: the subjects
    the queue received, and the alarm's action history (summary, error)."""
    aws.reset()
    assert create_stack(aws, "topic", template) is None
    assert stack_status(aws, "topic") == "CREATE_COMPLETE"
    sns, sqs, cw = client(aws, "sns"), client(aws, "sqs"), client(aws, "cloudwatch")
    (topic,) = [t["TopicArn"] for t in sns.list_topics()["Topics"]]
    queue = subscribed_queue(aws, topic)
    (alarm,) = [a["AlarmName"] for a in cw.describe_alarms()["MetricAlarms"]]
    cw.set_alarm_state(AlarmName=alarm, StateValue="ALARM", StateReason="forced by the test")
    received = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])
    subjects = [json.loads(m["Body"])["Subject"] for m in received]
    history = cw.describe_alarm_history(AlarmName=alarm, HistoryItemType="Action")["AlarmHistoryItems"]
    return subjects, [(h["HistorySummary"], json.loads(h["HistoryData"]).get("error", "")) for h in history]


def test_an_alarm_topic_hears_its_alarm(aws: LocalAws) -> None:
    subjects, history = _notified(aws, alarm_topic_template())
    assert (
        len(subjects) == 1 and subjects[0].startswith('ALARM: "') and subjects[0].endswith("in US East (N. Virginia)")
    )
    ((summary, error),) = history
    assert summary.startswith("Successfully executed action arn:aws:sns:") and not error


def test_a_topic_policy_without_the_cloudwatch_allow_drops_the_notification(aws: LocalAws) -> None:
    subjects, history = _notified(
        aws, _without_cloudwatch(alarm_topic_template(), "AWS::SNS::TopicPolicy", "PolicyDocument")
    )
    assert subjects == []
    ((summary, error),) = history
    assert summary.startswith("Failed to execute action arn:aws:sns:")
    assert error.startswith("User: cloudwatch.amazonaws.com is not authorized to perform: SNS:Publish on resource:")
    assert error.endswith("because no resource-based policy allows the SNS:Publish action")


def test_a_key_policy_without_the_cloudwatch_statement_drops_the_notification(aws: LocalAws) -> None:
    subjects, history = _notified(aws, _without_cloudwatch(alarm_topic_template(), "AWS::KMS::Key", "KeyPolicy"))
    assert subjects == []
    ((summary, error),) = history
    assert summary.startswith("Failed to execute action arn:aws:sns:")
    assert "kms:GenerateDataKey on resource: arn:aws:kms:" in error


# --- A role given the library's grants, calling with credentials of sts:AssumeRole -------------


def _assumed(aws: LocalAws, statements: list[dict[str, Any]]) -> dict[str, str]:
    """Credentials of a new role whose one policy holds `statements`, from sts:AssumeRole."""
    iam = client(aws, "iam")
    trust = _policy({"Effect": "Allow", "Principal": {"AWS": aws.account}, "Action": "sts:AssumeRole"})
    role = iam.create_role(RoleName="caller", AssumeRolePolicyDocument=json.dumps(trust))["Role"]
    iam.put_role_policy(RoleName="caller", PolicyName="grants", PolicyDocument=json.dumps(_policy(*statements)))
    creds = client(aws, "sts").assume_role(RoleArn=role["Arn"], RoleSessionName="test")["Credentials"]
    return {
        "aws_access_key_id": creds["AccessKeyId"],
        "aws_secret_access_key": creds["SecretAccessKey"],
        "aws_session_token": creds["SessionToken"],
    }


def _as(aws: LocalAws, service: str, credentials: dict[str, str]) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        service,
        endpoint_url=aws.endpoint,
        region_name=aws.region,
        config=Config(retries={"total_max_attempts": 1}),
        **credentials,
    )


def test_invoke_endpoint_is_allowed_on_the_arn_sagemaker_writes_alone(aws: LocalAws) -> None:
    """grant_invoke names the endpoint's ARN as SageMaker reports it (names in lower case); a
    grant formatted from the mixed-case name the endpoint was created with matches nothing."""
    aws.reset()
    echo_endpoint(aws, "Echo-Mixed")
    assert endpoint_status(aws, "Echo-Mixed", settle=True) == "InService"
    reported = client(aws, "sagemaker").describe_endpoint(EndpointName="Echo-Mixed")["EndpointArn"]
    assert reported.endswith(":endpoint/echo-mixed")
    invoke = {"Action": "sagemaker:InvokeEndpoint", "Effect": "Allow"}
    granted = _as(aws, "sagemaker-runtime", _assumed(aws, [{**invoke, "Resource": reported}]))
    assert granted.invoke_endpoint(EndpointName="Echo-Mixed", Body=b"{}")["ResponseMetadata"]["HTTPStatusCode"] == 200
    # The streamed call is authorized by the same action (Service Authorization Reference).
    streamed = granted.invoke_endpoint_with_response_stream(EndpointName="Echo-Mixed", Body=b"{}")
    assert b"".join(event["PayloadPart"]["Bytes"] for event in streamed["Body"] if "PayloadPart" in event)
    client(aws, "iam").delete_role_policy(RoleName="caller", PolicyName="grants")
    client(aws, "iam").delete_role(RoleName="caller")

    formatted = reported.replace("echo-mixed", "Echo-Mixed")
    misgranted = _as(aws, "sagemaker-runtime", _assumed(aws, [{**invoke, "Resource": formatted}]))
    for call in (misgranted.invoke_endpoint, misgranted.invoke_endpoint_with_response_stream):
        with pytest.raises(ClientError) as refused:
            call(EndpointName="Echo-Mixed", Body=b"{}")
        assert refused.value.response["Error"]["Code"] == "AccessDeniedException"
        assert refused.value.response["Error"]["Message"] == (
            "User: arn:aws:sts::123456789012:assumed-role/caller/test is not authorized to perform: "
            f"sagemaker:InvokeEndpoint on resource: {reported} because no identity-based policy allows the "
            "sagemaker:InvokeEndpoint action"
        )
    # The account's own credentials (those `python -m local_aws` prints) stay its administrator's.
    assert client(aws, "sagemaker-runtime").invoke_endpoint(EndpointName="Echo-Mixed", Body=b"{}")["Body"].read()


def test_read_results_lets_the_reader_list_and_get_the_answers_alone(aws: LocalAws) -> None:
    """The statements grant_read_results writes (s3:ListBucket under output/ and failure/,
    s3:GetObject of them), evaluated for an assumed role."""
    aws.reset()
    s3 = client(aws, "s3")
    s3.create_bucket(Bucket="answers")
    for key in ("output/a.out", "input/a"):
        s3.put_object(Bucket="answers", Key=key, Body=b"x")
    reader = _as(
        aws,
        "s3",
        _assumed(
            aws,
            [
                {
                    "Effect": "Allow",
                    "Action": "s3:ListBucket",
                    "Resource": "arn:aws:s3:::answers",
                    "Condition": {"StringLike": {"s3:prefix": ["output/*", "failure/*"]}},
                },
                {
                    "Effect": "Allow",
                    "Action": "s3:GetObject",
                    "Resource": ["arn:aws:s3:::answers/output/*", "arn:aws:s3:::answers/failure/*"],
                },
            ],
        ),
    )
    assert reader.get_object(Bucket="answers", Key="output/a.out")["Body"].read() == b"x"
    assert [o["Key"] for o in reader.list_objects_v2(Bucket="answers", Prefix="output/")["Contents"]] == [
        "output/a.out"
    ]
    for call in (
        lambda: reader.get_object(Bucket="answers", Key="input/a"),
        lambda: reader.list_objects_v2(Bucket="answers", Prefix="input/"),
        lambda: reader.put_object(Bucket="answers", Key="output/b.out", Body=b"y"),
    ):
        with pytest.raises(ClientError) as refused:
            call()
        assert refused.value.response["Error"]["Code"] == "AccessDenied"
        assert "because no identity-based policy allows" in refused.value.response["Error"]["Message"]


# --- SageMaker reading the model data and pulling the image as the execution role ---------------


def _model_tar() -> bytes:
    import io
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        data = b"{}"
        info = tarfile.TarInfo("model.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _endpoint_as(aws: LocalAws, statements: list[dict[str, Any]]) -> dict[str, Any]:
    """An echo endpoint whose model data is in S3 and whose execution role holds `statements`:
    the endpoint as it settles."""
    aws.reset()
    s3, iam, sm = client(aws, "s3"), client(aws, "iam"), client(aws, "sagemaker")
    s3.create_bucket(Bucket="models")
    s3.put_object(Bucket="models", Key="echo/model.tar.gz", Body=_model_tar())
    trust = _policy(
        {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}
    )
    role = iam.create_role(RoleName="execution", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    iam.put_role_policy(RoleName="execution", PolicyName="p", PolicyDocument=json.dumps(_policy(*statements)))
    sm.create_model(
        ModelName="echo-model",
        ExecutionRoleArn=role,
        PrimaryContainer={"Image": ECHO_IMAGE, "ModelDataUrl": "s3://models/echo/model.tar.gz"},
    )
    sm.create_endpoint_config(
        EndpointConfigName="echo-config",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": "echo-model",
                "InstanceType": "ml.g5.xlarge",
                "InitialInstanceCount": 1,
            }
        ],
    )
    sm.create_endpoint(EndpointName="echo", EndpointConfigName="echo-config")
    endpoint_status(aws, "echo", settle=True)
    return dict(sm.describe_endpoint(EndpointName="echo"))


REPOSITORY = "arn:aws:ecr:us-east-1:123456789012:repository/echo"
PULL = [
    {"Effect": "Allow", "Action": "ecr:GetAuthorizationToken", "Resource": "*"},
    {"Effect": "Allow", "Action": ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"], "Resource": REPOSITORY},
]
READ = [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::models/echo/model.tar.gz"}]


LOGS = [
    {
        "Effect": "Allow",
        "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
        "Resource": "arn:aws:logs:us-east-1:123456789012:log-group:/aws/sagemaker/Endpoints/*",
    }
]
GROUP = "/aws/sagemaker/Endpoints/echo"


def test_an_execution_role_that_may_pull_read_and_log_serves_and_logs(aws: LocalAws) -> None:
    assert _endpoint_as(aws, PULL + READ + LOGS)["EndpointStatus"] == "InService"
    ((stream, messages),) = container_output(aws, GROUP, "echo: listening on port", timeout_s=5).items()
    # SageMaker's stream of an endpoint's instance: <production-variant-name>/<instance-id>.
    assert re.fullmatch(r"AllTraffic/i-[0-9a-f]{17}", stream)
    assert any(m.startswith("echo: listening on port") for m in messages)
    assert "echo: a line on stderr" in messages


def test_an_execution_role_that_may_not_write_its_logs_serves_and_logs_nothing(
    aws: LocalAws, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="local_aws.sagemaker.logs"):
        assert _endpoint_as(aws, PULL + READ)["EndpointStatus"] == "InService"
        # clock: a deadline, not a bound: the refusal is logged at the shipper's first batch (about a
        # second); 60 s only ends a wait for a warning that never comes, which the assertion then fails.
        deadline = time.monotonic() + 60
        while "may not" not in caplog.text and time.monotonic() < deadline:  # clock: the deadline above
            time.sleep(0.2)
    assert container_output(aws, GROUP, "echo", timeout_s=0) == {}
    assert (
        "arn:aws:iam::123456789012:role/execution may not logs:CreateLogGroup on "
        "arn:aws:logs:us-east-1:123456789012:log-group:/aws/sagemaker/Endpoints/echo: the container's output is not "
        "written to /aws/sagemaker/Endpoints/echo"
    ) in caplog.text


def test_an_execution_role_that_may_not_read_the_model_data_fails_the_endpoint(aws: LocalAws) -> None:
    wrong_key = [{**READ[0], "Resource": "arn:aws:s3:::models/other/model.tar.gz"}]
    endpoint = _endpoint_as(aws, PULL + wrong_key)
    assert endpoint["EndpointStatus"] == "Failed"
    assert endpoint["FailureReason"].startswith(
        'Failed to download model data for container "container_1" from URL: "s3://models/echo/model.tar.gz".'
    )
    assert endpoint["FailureReason"].endswith(
        "User: arn:aws:sts::123456789012:assumed-role/execution/SageMaker is not authorized to perform: "
        "s3:GetObject on resource: arn:aws:s3:::models/echo/model.tar.gz because no identity-based policy allows "
        "the s3:GetObject action"
    )


def test_an_execution_role_that_may_not_pull_the_image_fails_the_endpoint(aws: LocalAws) -> None:
    endpoint = _endpoint_as(aws, PULL[:1] + READ)
    assert endpoint["EndpointStatus"] == "Failed"
    assert endpoint["FailureReason"] == (
        f"The role 'arn:aws:iam::123456789012:role/execution' does not have BatchGetImage permission for the image: "
        f"'{ECHO_IMAGE}'."
    )


# --- The library's grant_invoke, deployed through CloudFormation --------------------------------


def _granted_endpoint_template() -> Template:
    """A SageMakerEndpoint on the echo image and a role given its grant_invoke."""
    stack = Stack(synthesizer=DefaultStackSynthesizer(generate_bootstrap_version_rule=False))
    made = endpoint(stack, image_uri=ECHO_IMAGE, model_data="s3://models/echo/model.tar.gz")
    made.grant_invoke(iam.Role(stack, "Caller", assumed_by=iam.AccountRootPrincipal()))
    return dict(CdkTemplate.from_stack(stack).to_json())


def _invoke_as_caller(aws: LocalAws, template: Template) -> str | None:
    """Deploy `template` (its model data and the update check's function code in place), then
    InvokeEndpoint as its Caller role: the error code, else None."""
    aws.reset()
    s3c = client(aws, "s3")
    s3c.create_bucket(Bucket="models")
    s3c.put_object(Bucket="models", Key="echo/model.tar.gz", Body=_model_tar())
    # The update check's function, aws-cdk-lib's handler as the CLI publishes it, which runs.
    (function,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    assets = f"cdk-hnb659fds-assets-{aws.account}-{aws.region}"
    s3c.create_bucket(Bucket=assets)
    s3c.put_object(Bucket=assets, Key=function["Properties"]["Code"]["S3Key"], Body=cdk_handler(AWS_CUSTOM_RESOURCE))
    assert create_stack(aws, "granted", template) is None
    assert stack_status(aws, "granted") == "CREATE_COMPLETE"
    (role,) = [r["Arn"] for r in client(aws, "iam").list_roles()["Roles"] if "Caller" in r["RoleName"]]
    creds = client(aws, "sts").assume_role(RoleArn=role, RoleSessionName="caller")["Credentials"]
    runtime = _as(
        aws,
        "sagemaker-runtime",
        {
            "aws_access_key_id": creds["AccessKeyId"],
            "aws_secret_access_key": creds["SecretAccessKey"],
            "aws_session_token": creds["SessionToken"],
        },
    )
    (name,) = [e["EndpointName"] for e in client(aws, "sagemaker").list_endpoints()["Endpoints"]]
    try:
        runtime.invoke_endpoint(EndpointName=name, Body=b"{}")
    except ClientError as e:
        return str(e.response["Error"]["Code"])
    return None


def test_the_librarys_grant_invoke_lets_its_grantee_invoke(aws: LocalAws) -> None:
    assert _invoke_as_caller(aws, _granted_endpoint_template()) is None


def test_a_grant_formatted_from_the_mixed_case_endpoint_name_is_denied(aws: LocalAws) -> None:
    """The grant as it was before issue 17's review: the ARN formatted from the endpoint's name,
    which SageMaker writes in lower case in the endpoint's real ARN."""
    template = _granted_endpoint_template()
    (logical,) = [k for k, r in template["Resources"].items() if r["Type"] == "AWS::SageMaker::Endpoint"]
    formatted = {
        "Fn::Join": [
            "",
            [
                "arn:aws:sagemaker:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                ":endpoint/",
                {"Fn::GetAtt": [logical, "EndpointName"]},
            ],
        ]
    }
    changed = 0
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::IAM::Policy":
            for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
                if statement["Action"] == "sagemaker:InvokeEndpoint":
                    statement["Resource"], changed = formatted, changed + 1
    assert changed == 1
    assert _invoke_as_caller(aws, template) == "AccessDeniedException"


def test_a_copy_needs_the_read_of_its_source_and_the_write_of_its_target(aws: LocalAws) -> None:
    """CopyObject (GptjStack's copies of its payload) is s3:PutObject on the target and
    s3:GetObject on the source (Amazon S3 API Reference, CopyObject: "you must have read access to
    the source object and write access to the destination bucket")."""
    aws.reset()
    s3 = client(aws, "s3")
    for bucket in ("assets", "models"):
        s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket="assets", Key="weights", Body=b"w")
    write = {"Effect": "Allow", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::models/*"}
    read = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::assets/weights"}
    copy = {"Bucket": "models", "Key": "copy", "CopySource": "assets/weights"}
    writer = _as(aws, "s3", _assumed(aws, [write]))
    with pytest.raises(writer.exceptions.ClientError, match="s3:GetObject on resource: arn:aws:s3:::assets/weights"):
        writer.copy_object(**copy)
    client(aws, "iam").delete_role_policy(RoleName="caller", PolicyName="grants")
    client(aws, "iam").delete_role(RoleName="caller")
    copier = _as(aws, "s3", _assumed(aws, [write, read]))
    copier.copy_object(**copy)
    assert s3.get_object(Bucket="models", Key="copy")["Body"].read() == b"w"


def test_deleting_objects_in_one_request_needs_the_delete_of_each(aws: LocalAws) -> None:
    """DeleteObjects is s3:DeleteObject on each object it names."""
    aws.reset()
    s3 = client(aws, "s3")
    s3.create_bucket(Bucket="answers")
    for key in ("output/a", "input/a"):
        s3.put_object(Bucket="answers", Key=key, Body=b"x")
    deleter = _as(
        aws,
        "s3",
        _assumed(aws, [{"Effect": "Allow", "Action": "s3:DeleteObject", "Resource": "arn:aws:s3:::answers/output/*"}]),
    )
    outputs = {"Objects": [{"Key": "output/a"}]}
    both = {"Objects": [{"Key": "output/a"}, {"Key": "input/a"}]}
    with pytest.raises(
        deleter.exceptions.ClientError, match="s3:DeleteObject on resource: arn:aws:s3:::answers/input/a"
    ):
        deleter.delete_objects(Bucket="answers", Delete=both)
    deleter.delete_objects(Bucket="answers", Delete=outputs)
    assert [o["Key"] for o in s3.list_objects_v2(Bucket="answers")["Contents"]] == ["input/a"]
