"""The local AWS's Lambda: functions made from a zip run their handler under Node.js, as their
role, with Lambda's errors and timeout, their output in their log group; and CloudFormation's
Lambda-backed custom resources, run through them (local_aws/awslambda)."""

from __future__ import annotations

import base64
import json
import os
import time
from typing import Any

import pytest

from local_aws import LocalAws
from local_aws.awslambda import EMPTY_ZIP
from tests import leaks
from tests.local_aws.helpers import (
    AWS_CUSTOM_RESOURCE,
    LAMBDA_TRUST,
    RESTRICT_DEFAULT_SG,
    cdk_handler,
    client,
    deploy_stack,
    error_of,
    failures,
    function_output,
    function_resources,
    physical_ids,
    stack_status,
    update_stack,
    zipped,
)

#: A handler that reports what it was given and called: the event, its context, the S3 buckets
#: its role may list (or the error it got), its environment's credentials' kind.
PROBE = """
const { S3Client, ListBucketsCommand } = require('@aws-sdk/client-s3');
exports.handler = async (event, context) => {
  console.log('got', JSON.stringify(event));
  console.warn('two\\nlines');
  let buckets;
  try {
    buckets = (await new S3Client({}).send(new ListBucketsCommand({}))).Buckets.map((b) => b.Name);
  } catch (e) {
    buckets = `${e.name}: ${e.message}`;
  }
  return {
    event, buckets, functionName: context.functionName, requestId: context.awsRequestId,
    remaining: context.getRemainingTimeInMillis(), logGroup: context.logGroupName,
    session: process.env.AWS_SESSION_TOKEN !== undefined, region: process.env.AWS_REGION,
    handler: process.env._HANDLER, execution: process.env.AWS_EXECUTION_ENV,
  };
};
"""

#: A custom resource's handler as CloudFormation's documentation has it (cfn-response): it logs the
#: request, answers SUCCESS (FAILED when the properties say Fail=true and it is no Delete) with a
#: physical id from its properties, and Data echoing them.
RESPONDER = """
const https = require('https');
const url = require('url');
exports.handler = async (event) => {
  console.log('request', JSON.stringify({ ...event, ResponseURL: undefined }));
  const props = event.ResourceProperties;
  const fail = props.Fail === 'true' && event.RequestType !== 'Delete';
  const body = JSON.stringify({
    Status: fail ? 'FAILED' : 'SUCCESS', Reason: fail ? 'asked to fail' : 'OK',
    PhysicalResourceId: fail ? 'failed-' + props.Name : 'thing-' + props.Name,
    StackId: event.StackId, RequestId: event.RequestId, LogicalResourceId: event.LogicalResourceId,
    Data: { Name: props.Name, Padding: 'x'.repeat(Number(props.Padding || 0)) },
  });
  const target = url.parse(event.ResponseURL);
  await new Promise((resolve, reject) => {
    const request = https.request(
      { hostname: target.hostname, path: target.path, method: 'PUT',
        headers: { 'content-type': '', 'content-length': Buffer.byteLength(body) } },
      (response) => { console.log('response status', response.statusCode); resolve(); });
    request.on('error', reject);
    request.write(body);
    request.end();
  });
};
"""


def role(aws: LocalAws, name: str, *statements: dict[str, Any]) -> str:
    iam = client(aws, "iam")
    arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(LAMBDA_TRUST))["Role"]["Arn"]
    logs = {"Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"], "Resource": "*"}
    document = {"Version": "2012-10-17", "Statement": [logs, *statements]}
    iam.put_role_policy(RoleName=name, PolicyName="calls", PolicyDocument=json.dumps(document))
    return str(arn)


def function(aws: LocalAws, name: str, files: dict[str, str], *, role_arn: str, **options: Any) -> None:
    client(aws, "lambda").create_function(
        FunctionName=name, Runtime="nodejs24.x", Role=role_arn, Handler=options.pop("Handler", "index.handler"),
        Code={"ZipFile": zipped(files)}, **options,
    )  # fmt: skip


def invoke(aws: LocalAws, name: str, event: Any) -> tuple[str | None, Any, str]:
    """(FunctionError, payload, the log's tail) of a RequestResponse invocation."""
    answer = client(aws, "lambda").invoke(FunctionName=name, Payload=json.dumps(event), LogType="Tail")
    tail = base64.b64decode(answer["LogResult"]).decode()
    return answer.get("FunctionError"), json.loads(answer["Payload"].read()), tail


#: The log group the tests' functions write to, outside their stacks.
LOGS = "fn-logs"


@pytest.fixture
def fresh(aws: LocalAws) -> LocalAws:
    aws.reset()
    client(aws, "logs").create_log_group(logGroupName=LOGS)
    return aws


# --- Functions -------------------------------------------------------------------------------------


def test_a_function_runs_its_handler_as_its_role_and_logs_to_its_log_group(fresh: LocalAws) -> None:
    client(fresh, "s3").create_bucket(Bucket="visible")
    arn = role(fresh, "lister", {"Effect": "Allow", "Action": "s3:ListAllMyBuckets", "Resource": "*"})
    function(fresh, "probe", {"index.js": PROBE}, role_arn=arn, Timeout=30, LoggingConfig={"LogGroup": LOGS})
    failed, result, tail = invoke(fresh, "probe", {"n": 1})
    assert failed is None
    assert result["event"] == {"n": 1} and result["functionName"] == "probe"
    assert result["buckets"] == ["visible"]  # the SDK's call reached the local AWS, signed as the role
    assert result["session"] and result["region"] == fresh.region and result["handler"] == "index.handler"
    assert result["execution"] == "AWS_Lambda_nodejs24.x" and result["logGroup"] == LOGS
    assert 0 < result["remaining"] <= 30_000
    output = function_output(fresh, LOGS)
    assert output[0].startswith("INIT_START Runtime Version: nodejs:24")
    assert output[1] == f"START RequestId: {result['requestId']} Version: $LATEST"
    (got,) = [line for line in output if "\tINFO\tgot " in line]
    assert got.split("\t")[1] == result["requestId"] and got.endswith('got {"n":1}')
    assert [line.split("\t", 3)[2:] for line in output if "\tWARN\t" in line] == [["WARN", "two\nlines"]]
    assert output[-2] == f"END RequestId: {result['requestId']}" and output[-1].startswith("REPORT RequestId")
    assert tail.endswith(output[-1])
    # Without LoggingConfig: /aws/lambda/<name>, which the role may not create here.
    groups = client(fresh, "logs").describe_log_groups()["logGroups"]
    assert "/aws/lambda/probe" not in [g["logGroupName"] for g in groups]


def test_a_call_the_role_may_not_make_is_refused_to_the_handler(fresh: LocalAws) -> None:
    function(fresh, "probe", {"index.js": PROBE}, role_arn=role(fresh, "nothing"))
    failed, result, _ = invoke(fresh, "probe", {})
    assert failed is None
    assert result["buckets"].startswith("AccessDenied: User: arn:aws:sts::123456789012:assumed-role/nothing/probe ")


@pytest.mark.parametrize(
    ("files", "message"),
    [({}, EMPTY_ZIP), (None, "Could not unzip uploaded file. Please check your file, then try to upload again.")],
)
def test_a_package_that_is_no_zip_with_an_entry_is_refused(
    fresh: LocalAws, files: dict[str, str] | None, message: str
) -> None:
    lam = client(fresh, "lambda")
    code = zipped(files) if files is not None else b"not a zip"
    arn = role(fresh, "fn")
    with pytest.raises(lam.exceptions.InvalidParameterValueException, match=message):
        lam.create_function(
            FunctionName="f", Runtime="nodejs24.x", Role=arn, Handler="index.handler", Code={"ZipFile": code}
        )
    function(fresh, "g", {"index.js": "exports.handler = async () => 1"}, role_arn=arn)
    with pytest.raises(lam.exceptions.InvalidParameterValueException, match=message):
        lam.update_function_code(FunctionName="g", ZipFile=code)


@pytest.mark.parametrize(
    ("files", "handler", "error_type", "message"),
    [
        ({"other.js": "exports.handler = async () => 1"}, "index.handler", "Runtime.ImportModuleError",
         "Error: Cannot find module 'index'"),
        ({"index.js": "exports.main = async () => 1"}, "index.handler", "Runtime.HandlerNotFound",
         "index.handler is undefined or not exported"),
        ({"index.js": "exports.handler = async ( => 1"}, "index.handler", "Runtime.UserCodeSyntaxError", ""),
        ({"index.js": "exports.handler = async () => { throw new TypeError('no') }"}, "index.handler", "TypeError",
         "no"),
    ],
)  # fmt: skip
def test_a_handler_that_cannot_run_fails_the_invocation_as_lambda_reports_it(
    fresh: LocalAws, files: dict[str, str], handler: str, error_type: str, message: str
) -> None:
    function(fresh, "broken", files, role_arn=role(fresh, "fn"), Handler=handler)
    failed, result, _ = invoke(fresh, "broken", {})
    assert failed == "Unhandled"
    assert result["errorType"] == error_type and result["errorMessage"].startswith(message)


def test_a_function_past_its_timeout_is_ended_with_what_it_started(fresh: LocalAws) -> None:
    hang = (
        "const { spawn } = require('child_process');"
        "exports.handler = async () => { spawn('sleep', ['613']); await new Promise(() => {}); };"
    )
    function(fresh, "hangs", {"index.js": hang}, role_arn=role(fresh, "fn"), Timeout=2)
    # A function never ended would hang the call past the client's 60 s read timeout: the answer
    # below, with Lambda's words, is what proves it was ended at its timeout.
    started = time.monotonic()  # clock: a lower bound, which a busy host cannot break
    failed, result, tail = invoke(fresh, "hangs", {})
    assert time.monotonic() - started >= 2  # clock: it ran its 2 s before it was ended
    assert failed == "Unhandled" and result["errorType"] == "Sandbox.Timedout"
    assert "Task timed out after 2.00 seconds" in tail
    session = os.environ[leaks.MARKER]
    assert not [p for p in leaks.marked(session) if "sleep 613" in p.cmdline or "bootstrap.cjs" in p.cmdline]


def test_an_asynchronous_invocation_that_fails_is_tried_twice_more(fresh: LocalAws) -> None:
    throws = "exports.handler = async (e) => { console.log('attempt'); throw new Error('down'); };"
    function(fresh, "throws", {"index.js": throws}, role_arn=role(fresh, "fn"), LoggingConfig={"LogGroup": LOGS})
    answer = client(fresh, "lambda").invoke(FunctionName="throws", InvocationType="Event", Payload=b"{}")
    assert answer["StatusCode"] == 202

    def attempts() -> int:
        return sum("\tattempt" in m for m in function_output(fresh, LOGS))

    # clock: a generous wait for three attempts that take moments here (Lambda's retries wait
    # for nothing on the local AWS); it only ends a wait for what never comes.
    deadline = time.monotonic() + 60
    while attempts() < 3 and time.monotonic() < deadline:  # clock: the same wait
        time.sleep(0.2)
    output = function_output(fresh, LOGS)
    assert sum("\tattempt" in m for m in output) == 3
    # Lambda's retries keep the request id.
    assert len({m.split()[2] for m in output if m.startswith("START RequestId")}) == 1


# --- Custom resources --------------------------------------------------------------------------


def custom_stack(aws: LocalAws, files: dict[str, str] | bytes, **resources: Any) -> dict[str, Any]:
    """A template of a function of `files` (uploaded to S3, as the CDK CLI publishes it; logging
    to LOGS) and `resources`, whose ServiceToken may name it with {"Fn::GetAtt": ["Fn", "Arn"]}."""
    s3 = client(aws, "s3")
    s3.create_bucket(Bucket="code")
    s3.put_object(Bucket="code", Key="fn.zip", Body=files if isinstance(files, bytes) else zipped(files))
    statements = resources.pop("statements", ())
    function = function_resources(("code", "fn.zip"), statements=statements, timeout=10, log_group=LOGS)
    return {"Resources": {**function, **resources}}


def thing(name: str, **properties: Any) -> dict[str, Any]:
    token = {"Fn::GetAtt": ["Fn", "Arn"]}
    return {"Type": "Custom::Thing", "Properties": {"ServiceToken": token, "Name": name, **properties}}


def requests(aws: LocalAws) -> list[dict[str, Any]]:
    """The requests the stack's function was sent, in order."""
    return [json.loads(m.split("\trequest ", 1)[1]) for m in function_output(aws, LOGS) if "\trequest " in m]


def test_a_custom_resource_is_created_updated_and_deleted_by_its_functions_responses(fresh: LocalAws) -> None:
    parameter = {"Type": "AWS::SSM::Parameter",
                 "Properties": {"Type": "String", "Value": {"Fn::GetAtt": ["Thing", "Name"]}}}  # fmt: skip
    template = custom_stack(fresh, {"index.js": RESPONDER}, Thing=thing("one", Count=3, On=True), Echo=parameter)
    assert deploy_stack(fresh, "custom", template) is None
    assert stack_status(fresh, "custom") == "CREATE_COMPLETE"
    ids = physical_ids(fresh, "custom")
    assert ids["Thing"] == "thing-one"
    # The template's LoggingConfig, found through the function as a script finds its logs.
    logging_config = client(fresh, "lambda").get_function_configuration(FunctionName=ids["Fn"])["LoggingConfig"]
    assert logging_config == {"LogFormat": "Text", "LogGroup": LOGS}
    assert any("\trequest " in m for m in function_output(fresh, logging_config["LogGroup"]))
    ssm = client(fresh, "ssm")
    assert ssm.get_parameter(Name=ids["Echo"])["Parameter"]["Value"] == "one"

    template["Resources"]["Thing"] = thing("two", Count=3, On=True)
    assert update_stack(fresh, "custom", template) is None
    assert physical_ids(fresh, "custom")["Thing"] == "thing-two"
    assert ssm.get_parameter(Name=physical_ids(fresh, "custom")["Echo"])["Parameter"]["Value"] == "two"
    cfn = client(fresh, "cloudformation")
    cfn.delete_stack(StackName="custom")
    assert [s["StackStatus"] for s in cfn.list_stacks()["StackSummaries"]] == ["DELETE_COMPLETE"]

    create, update, delete_old, delete = requests(fresh)
    assert create["RequestType"] == "Create" and "PhysicalResourceId" not in create
    # CloudFormation hands every property over as a string.
    assert create["ResourceProperties"] == {**create["ResourceProperties"], "Count": "3", "On": "true", "Name": "one"}
    assert create["ResourceType"] == "Custom::Thing" and create["LogicalResourceId"] == "Thing"
    assert create["StackId"].startswith("arn:aws:cloudformation:us-east-1:123456789012:stack/custom/")
    assert (update["RequestType"], update["PhysicalResourceId"]) == ("Update", "thing-one")
    assert update["OldResourceProperties"]["Name"] == "one" and update["ResourceProperties"]["Name"] == "two"
    # A new physical id replaced the resource: the old one is deleted after the update.
    assert (delete_old["RequestType"], delete_old["PhysicalResourceId"]) == ("Delete", "thing-one")
    assert (delete["RequestType"], delete["PhysicalResourceId"]) == ("Delete", "thing-two")


def test_a_failed_response_rolls_the_stack_back_and_the_resource_gets_a_delete(fresh: LocalAws) -> None:
    template = custom_stack(fresh, {"index.js": RESPONDER}, Thing=thing("x", Fail=True))
    assert deploy_stack(fresh, "custom", template) is None  # ExecuteChangeSet succeeds; the stack fails
    assert stack_status(fresh, "custom") == "ROLLBACK_COMPLETE"
    reason = failures(fresh, "custom")["Thing"]
    assert reason.startswith("Received response status [FAILED] from custom resource. Message returned: asked to fail")
    # The rollback sent the failed resource a Delete with the physical id of its FAILED response.
    assert [(r["RequestType"], r.get("PhysicalResourceId")) for r in requests(fresh)] == [
        ("Create", None),
        ("Delete", "failed-x"),
    ]


def test_a_response_larger_than_cloudformation_takes_fails_the_resource(fresh: LocalAws) -> None:
    template = custom_stack(fresh, {"index.js": RESPONDER}, Thing=thing("x", Padding=5000))
    deploy_stack(fresh, "custom", template)
    assert stack_status(fresh, "custom") == "ROLLBACK_COMPLETE"
    assert failures(fresh, "custom")["Thing"] == "Response object is too long."


def test_a_function_made_from_an_empty_zip_is_refused_and_the_stack_rolls_back(fresh: LocalAws) -> None:
    template = custom_stack(fresh, zipped({}), Thing=thing("x"))
    deploy_stack(fresh, "custom", template)
    assert stack_status(fresh, "custom") == "ROLLBACK_COMPLETE"
    assert EMPTY_ZIP in failures(fresh, "custom")["Fn"]


def test_a_function_without_its_handler_fails_its_resource_with_lambdas_error(fresh: LocalAws) -> None:
    template = custom_stack(fresh, {"responder.js": RESPONDER}, Thing=thing("x"))
    # Not CloudFormation's hour of waiting for a response: nothing could respond any more. A stack
    # still waiting would read CREATE_IN_PROGRESS below, or fail the call at the client's 60 s
    # read timeout.
    deploy_stack(fresh, "custom", template)
    assert stack_status(fresh, "custom") == "ROLLBACK_COMPLETE"
    reason = failures(fresh, "custom")["Thing"]
    assert reason.startswith("CloudFormation did not receive a response from your Custom Resource.")
    assert "3 invocation(s)" in reason and "Runtime.ImportModuleError: Error: Cannot find module 'index'" in reason


# --- aws-cdk-lib's own handlers -------------------------------------------------------------------


def sdk_call(call: dict[str, Any], **extra: Any) -> dict[str, Any]:
    token = {"Fn::GetAtt": ["Fn", "Arn"]}
    properties = {"ServiceToken": token, "InstallLatestAwsSdk": False, **{k: json.dumps(v) for k, v in extra.items()}}
    return {"Type": "Custom::AWS", "Properties": {"Create": json.dumps(call), **properties}}


PUT = {"service": "S3", "action": "putObject", "parameters": {"Bucket": "data", "Key": "k", "Body": "x"},
       "physicalResourceId": {"id": "k"}}  # fmt: skip
DELETE = {"service": "S3", "action": "deleteObject", "parameters": {"Bucket": "data", "Key": "k"}}


def keys(aws: LocalAws) -> list[str]:
    return [o["Key"] for o in client(aws, "s3").list_objects_v2(Bucket="data").get("Contents", [])]


def test_aws_custom_resource_makes_its_sdk_calls_as_its_role(fresh: LocalAws) -> None:
    client(fresh, "s3").create_bucket(Bucket="data")
    objects = {"Effect": "Allow", "Action": ["s3:PutObject", "s3:DeleteObject"], "Resource": "arn:aws:s3:::data/*"}
    template = custom_stack(
        fresh, cdk_handler(AWS_CUSTOM_RESOURCE), Call=sdk_call(PUT, Delete=DELETE), statements=[objects]
    )
    assert deploy_stack(fresh, "calls", template) is None
    assert stack_status(fresh, "calls") == "CREATE_COMPLETE", failures(fresh, "calls")
    assert keys(fresh) == ["k"]
    client(fresh, "cloudformation").delete_stack(StackName="calls")
    assert keys(fresh) == []


def test_aws_custom_resource_whose_role_may_not_call_fails_with_iams_reason(fresh: LocalAws) -> None:
    client(fresh, "s3").create_bucket(Bucket="data")
    template = custom_stack(fresh, cdk_handler(AWS_CUSTOM_RESOURCE), Call=sdk_call(PUT, Delete=DELETE))
    deploy_stack(fresh, "calls", template)
    assert stack_status(fresh, "calls") == "ROLLBACK_COMPLETE"
    reason = failures(fresh, "calls")["Call"]
    assert "is not authorized to perform: s3:PutObject on resource: arn:aws:s3:::data/k" in reason
    assert keys(fresh) == []


def default_group_rules(aws: LocalAws, vpc: str) -> tuple[int, int]:
    ec2 = client(aws, "ec2")
    filters = [{"Name": "vpc-id", "Values": [vpc]}, {"Name": "group-name", "Values": ["default"]}]
    (group,) = ec2.describe_security_groups(Filters=filters)["SecurityGroups"]
    return len(group["IpPermissions"]), len(group["IpPermissionsEgress"])


@pytest.mark.parametrize("permitted", [True, False])
def test_the_vpc_handler_restricts_the_default_group_as_its_role_may(fresh: LocalAws, permitted: bool) -> None:
    group = {"Fn::Sub": "arn:aws:ec2:${AWS::Region}:${AWS::AccountId}:security-group/${Vpc.DefaultSecurityGroup}"}
    actions = ["ec2:AuthorizeSecurityGroupIngress", "ec2:AuthorizeSecurityGroupEgress",
               "ec2:RevokeSecurityGroupIngress", "ec2:RevokeSecurityGroupEgress"]  # fmt: skip
    statement = {"Effect": "Allow", "Action": actions, "Resource": group if permitted else "arn:aws:ec2:*:*:vpc/*"}
    restrict = {
        "Type": "Custom::VpcRestrictDefaultSG",
        "Properties": {
            "ServiceToken": {"Fn::GetAtt": ["Fn", "Arn"]},
            "DefaultSecurityGroupId": {"Fn::GetAtt": ["Vpc", "DefaultSecurityGroup"]},
            "Account": {"Ref": "AWS::AccountId"},
        },
    }
    template = custom_stack(
        fresh, cdk_handler(RESTRICT_DEFAULT_SG), statements=[statement], Restrict=restrict,
        Vpc={"Type": "AWS::EC2::VPC", "Properties": {"CidrBlock": "10.0.0.0/16"}},
    )  # fmt: skip
    template["Resources"]["Fn"]["Properties"]["Handler"] = "__entrypoint__.handler"
    deploy_stack(fresh, "vpc", template)
    if not permitted:
        assert stack_status(fresh, "vpc") == "ROLLBACK_COMPLETE"
        assert "UnauthorizedOperation" in failures(fresh, "vpc")["Restrict"]
        return
    assert stack_status(fresh, "vpc") == "CREATE_COMPLETE", failures(fresh, "vpc")
    vpc = physical_ids(fresh, "vpc")["Vpc"]
    assert default_group_rules(fresh, vpc) == (0, 0)
    # The group gets AWS's two default rules back when the resource goes.
    del template["Resources"]["Restrict"]
    assert update_stack(fresh, "vpc", template) is None
    assert default_group_rules(fresh, vpc) == (1, 1)
    assert error_of(lambda: client(fresh, "cloudformation").delete_stack(StackName="vpc")) is None


def test_a_runtime_the_local_aws_does_not_run_is_said_so(fresh: LocalAws) -> None:
    lam = client(fresh, "lambda")
    arn = role(fresh, "fn")
    lam.create_function(
        FunctionName="py", Runtime="python3.12", Role=arn, Handler="index.handler",
        Code={"ZipFile": zipped({"index.py": "def handler(event, context):\n    return 1\n"})},
    )  # fmt: skip
    with pytest.raises(lam.exceptions.InvalidRuntimeException, match=r"runs on python3\.12: the local AWS runs"):
        lam.invoke(FunctionName="py", Payload=b"{}")
    template = custom_stack(fresh, {"index.py": "def handler(event, context):\n    pass\n"}, Thing=thing("x"))
    template["Resources"]["Fn"]["Properties"]["Runtime"] = "python3.12"
    deploy_stack(fresh, "custom", template)
    assert stack_status(fresh, "custom") == "ROLLBACK_COMPLETE"
    assert "Node.js runtimes (nodejs<N>.x) only" in failures(fresh, "custom")["Thing"]
