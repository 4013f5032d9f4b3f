"""Small CloudFormation scenarios against the local AWS, read back with boto3."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import re
import sys
import tarfile
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.parsers import ResponseParserError

from local_aws import LocalAws
from local_aws.sagemaker.containers import Container
from local_aws.sagemaker.runtime import container_for

Template = dict[str, Any]


def client(aws: LocalAws, service: str) -> Any:
    """A boto3 client of the local AWS that does not retry: stock moto answers some calls
    with HTTP 500, which boto3 would otherwise retry for the better part of a minute."""
    return aws.client(service, config=Config(retries={"total_max_attempts": 1}))


def error_of(call: Callable[[], object]) -> str | None:
    """The error code ``call`` fails with, else None."""
    try:
        call()
    except ClientError as e:
        return str(e.response["Error"]["Code"])
    except ResponseParserError as e:
        # Stock moto answers an exception it does not handle with an HTML page (HTTP 500), and
        # some others with JSON where the protocol wants XML: the code, or the page's title.
        said = re.search(r'"__type": "(\w+)"|<title>([^<]+)</title>', str(e))
        return next(filter(None, said.groups())) if said else str(e)
    return None


def body(template: Template) -> str:
    return json.dumps(template)


def create_stack(aws: LocalAws, name: str, template: Template, **kwargs: Any) -> str | None:
    """Create the stack; the error code if that fails, else None."""
    cfn = client(aws, "cloudformation")
    return error_of(lambda: cfn.create_stack(StackName=name, TemplateBody=body(template), **kwargs))


def update_stack(aws: LocalAws, name: str, template: Template, **kwargs: Any) -> str | None:
    """Update the stack through a change set, as the CDK CLI deploys; the error code if
    that fails, else None."""
    cfn = client(aws, "cloudformation")

    def deploy() -> None:
        cfn.create_change_set(
            StackName=name, ChangeSetName="update", ChangeSetType="UPDATE", TemplateBody=body(template), **kwargs
        )
        cfn.execute_change_set(StackName=name, ChangeSetName="update")

    return error_of(deploy)


def deploy_stack(aws: LocalAws, name: str, template: Template, **kwargs: Any) -> str | None:
    """Create the stack through a change set, as the CDK CLI deploys; the error code if that
    fails, else None."""
    cfn = client(aws, "cloudformation")

    def deploy() -> None:
        cfn.create_change_set(
            StackName=name, ChangeSetName="create", ChangeSetType="CREATE", TemplateBody=body(template), **kwargs
        )
        cfn.execute_change_set(StackName=name, ChangeSetName="create")

    return error_of(deploy)


def failures(aws: LocalAws, name: str) -> dict[str, str]:
    """Logical id -> status reason of each resource the stack's events report failed."""
    events = client(aws, "cloudformation").describe_stack_events(StackName=name)["StackEvents"]
    return {
        e["LogicalResourceId"]: e.get("ResourceStatusReason", "")
        for e in events
        if e.get("ResourceStatus", "").endswith("_FAILED")
    }


def delete_stack(aws: LocalAws, name: str) -> str | None:
    """Delete the stack; the error code if that fails, else None."""
    cfn = client(aws, "cloudformation")
    return error_of(lambda: cfn.delete_stack(StackName=name))


def stack_status(aws: LocalAws, name: str) -> str:
    (stack,) = client(aws, "cloudformation").describe_stacks(StackName=name)["Stacks"]
    return str(stack["StackStatus"])


def outputs(aws: LocalAws, name: str) -> dict[str, str]:
    cfn = client(aws, "cloudformation")
    (stack,) = cfn.describe_stacks(StackName=name)["Stacks"]
    return {o["OutputKey"]: o.get("OutputValue") for o in stack.get("Outputs", [])}


def physical_ids(aws: LocalAws, name: str) -> dict[str, str]:
    """Logical id -> physical id of the resources the stack lists."""
    cfn = client(aws, "cloudformation")
    resources = cfn.describe_stack_resources(StackName=name)["StackResources"]
    # Stock moto lists a resource it lost track of with no logical id.
    return {r["LogicalResourceId"]: r.get("PhysicalResourceId") for r in resources if "LogicalResourceId" in r}


# --- A stand-in image for the local SageMaker runtime ------------------------------------------

#: The image URI the tests' launcher runs as tests/local_aws/echo_image.py.
ECHO_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/echo:1"


class EchoContainer(Container):
    """tests/local_aws/echo_image.py, run as the local runtime runs an image."""

    def command(self, run_dir: Path) -> Sequence[str]:
        return [sys.executable, str(Path(__file__).with_name("echo_image.py"))]

    def process_environment(self, run_dir: Path) -> dict[str, str]:
        return {**super().process_environment(run_dir), "SM_MODEL_DIR": str(self.model_dir)}


def echo_launcher(image: str, model_data: Callable[[Path], None], environment: Mapping[str, str]) -> Container:
    """The local runtime's launcher with :data:`ECHO_IMAGE` run as the echo image."""
    if image == ECHO_IMAGE:
        return EchoContainer(model_data, environment=environment)
    return container_for(image, model_data, environment)


def echo_config(
    aws: LocalAws, config: str, environment: Mapping[str, str] | None = None, *, startup_timeout_s: int = 60
) -> None:
    """A model and an endpoint config of one variant on the echo image."""
    sm = client(aws, "sagemaker")
    sm.create_model(
        ModelName=f"{config}-model",
        ExecutionRoleArn=f"arn:aws:iam::{aws.account}:role/sagemaker",
        PrimaryContainer={"Image": ECHO_IMAGE, "Environment": dict(environment or {})},
    )
    sm.create_endpoint_config(
        EndpointConfigName=config,
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": f"{config}-model",
                "InstanceType": "ml.g5.xlarge",
                "InitialInstanceCount": 1,
                "ContainerStartupHealthCheckTimeoutInSeconds": startup_timeout_s,
            }
        ],
    )


@contextlib.contextmanager
def echo_for_the_module(aws: LocalAws, name: str) -> Iterator[str]:
    """One echo endpoint, InService, in a fresh account for a module's tests, which is reset after
    them (the autouse launcher fixture is per test: set here too)."""
    import pytest

    from local_aws.sagemaker.runtime import hosting_plane

    aws.reset()
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(hosting_plane(), "launcher", echo_launcher)
        echo_endpoint(aws, name)
        assert endpoint_status(aws, name, settle=True) == "InService"
    yield name
    aws.reset()


class Gates:
    """The gates of a gated answer of the echo image (its ``gate``): the container sends its
    first part at once and each next part N only once :meth:`open` let it, so that a caller that
    opens gate N when it has read part N-1 knows part N did not exist before. A test of streaming
    proves with them that a part arrived before the container sent the next, whatever the host's
    speed: a stream held back until its end would hold the container at a gate forever (until
    the image's GATE_WAIT_S, then a broken stream)."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder

    def request(self, parts: Sequence[str], **extra: object) -> dict[str, object]:
        """The echo image's request for a gated answer of `parts`."""
        return {"parts": list(parts), "gate": str(self.folder), **extra}

    def sent(self) -> int:
        """How many parts the container has sent, or is sending (it marks a part before sending it)."""
        return len(list(self.folder.glob("sending-*")))

    def open(self, part: int) -> None:
        """Let the container send part `part` (counted from 0; the first needs no gate)."""
        (self.folder / f"open-{part}").touch()

    def open_all(self) -> None:
        """Let the container send the rest at once (a test that is done with the order)."""
        (self.folder / "open-all").touch()


def echo_endpoint(aws: LocalAws, name: str, environment: Mapping[str, str] | None = None) -> None:
    """An endpoint on the echo image (its config is named `name`-config)."""
    echo_config(aws, f"{name}-config", environment)
    client(aws, "sagemaker").create_endpoint(EndpointName=name, EndpointConfigName=f"{name}-config")


def subscribed_queue(aws: LocalAws, topic: str, name: str = "oncall") -> str:
    """The URL of a new SQS queue subscribed to `topic`."""
    sqs = client(aws, "sqs")
    queue = str(sqs.create_queue(QueueName=name)["QueueUrl"])
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    client(aws, "sns").subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
    return queue


def endpoint_named(aws: LocalAws, arn: str) -> str:
    """The name of the endpoint of `arn` (SageMaker writes its name in lower case there)."""
    endpoints = client(aws, "sagemaker").list_endpoints()["Endpoints"]
    (name,) = [e["EndpointName"] for e in endpoints if e["EndpointArn"] == arn]
    return str(name)


def endpoint_status(aws: LocalAws, name: str, *, settle: bool = False, timeout_s: float = 60) -> str:
    """The endpoint's status; with `settle`, once it is no longer Creating or Updating."""
    sm = client(aws, "sagemaker")
    # clock: a generous wait (60 s by default) for a container that starts within a second or
    # two here; a caller that asserts InService fails only when it has not settled by then.
    deadline = time.monotonic() + timeout_s
    while True:
        status = str(sm.describe_endpoint(EndpointName=name)["EndpointStatus"])
        # clock: the same wait
        if not settle or status not in ("Creating", "Updating") or time.monotonic() > deadline:
            return status
        time.sleep(0.1)


# --- Lambda functions ------------------------------------------------------------------------------

#: The trust policy of a Lambda function's execution role.
LAMBDA_TRUST = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}
_HANDLERS = "package/custom-resource-handlers/dist"
#: aws-cdk-lib's handler of AwsCustomResource (Custom::AWS), as its asset holds it.
AWS_CUSTOM_RESOURCE = {"index.js": f"{_HANDLERS}/custom-resources/aws-custom-resource-handler/index.js"}
#: aws-cdk-lib's handler of a Vpc's Custom::VpcRestrictDefaultSG, behind its provider's entry point.
RESTRICT_DEFAULT_SG = {
    "__entrypoint__.js": f"{_HANDLERS}/core/nodejs-entrypoint-handler/index.js",
    "index.js": f"{_HANDLERS}/aws-ec2/restrict-default-security-group-handler/index.js",
}


def zipped(files: Mapping[str, str | bytes]) -> bytes:
    """A deployment package holding `files` (name -> content)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def cdk_handler(files: Mapping[str, str]) -> bytes:
    """A deployment package of aws-cdk-lib's own handler code (file name -> its path in the
    aws-cdk-lib package that the venv's jsii bundle holds): what CDK publishes for it."""
    # Found, not imported: importing aws_cdk starts a jsii runtime.
    spec = importlib.util.find_spec("aws_cdk")
    assert spec is not None and spec.submodule_search_locations
    (bundle,) = (Path(spec.submodule_search_locations[0]) / "_jsii").glob("aws-cdk-lib@*.jsii.tgz")
    with tarfile.open(bundle) as tar:
        return zipped({name: tar.extractfile(member).read() for name, member in files.items()})  # type: ignore[union-attr]


def function_resources(
    code: tuple[str, str], *, handler: str = "index.handler", statements: Sequence[Mapping[str, Any]] = (),
    timeout: int = 30, log_group: str | None = None, **properties: Any,
) -> dict[str, Any]:  # fmt: skip
    """A role (with `statements`, and the writing of its log group) and a Node.js function, whose
    code is the object `code` (bucket, key), logging to `log_group` (default: a group of the
    stack's, logical id Logs): logical ids Role, Fn."""
    logs = {"Effect": "Allow", "Action": ["logs:CreateLogStream", "logs:PutLogEvents"], "Resource": "*"}
    policy = {"PolicyName": "calls", "PolicyDocument": {"Version": "2012-10-17", "Statement": [logs, *statements]}}
    group: dict[str, Any] = {"Logs": {"Type": "AWS::Logs::LogGroup", "Properties": {}}} if log_group is None else {}
    return {
        "Role": {
            "Type": "AWS::IAM::Role",
            "Properties": {"AssumeRolePolicyDocument": LAMBDA_TRUST, "Policies": [policy]},
        },
        **group,
        "Fn": {
            "Type": "AWS::Lambda::Function",
            "Properties": {
                "Runtime": "nodejs24.x",
                "Handler": handler,
                "Timeout": timeout,
                "Role": {"Fn::GetAtt": ["Role", "Arn"]},
                "Code": {"S3Bucket": code[0], "S3Key": code[1]},
                "LoggingConfig": {"LogGroup": log_group or {"Ref": "Logs"}},
                **properties,
            },
        },
    }


def function_output(aws: LocalAws, group: str) -> list[str]:
    """The messages of every log event of the log group, oldest stream (invocation) first."""
    logs = client(aws, "logs")
    streams = logs.describe_log_streams(logGroupName=group)["logStreams"]
    messages = []
    for stream in sorted(streams, key=lambda s: s["creationTime"]):
        events = logs.get_log_events(logGroupName=group, logStreamName=stream["logStreamName"], startFromHead=True)
        messages += [e["message"] for e in events["events"]]
    return messages


# --- Templates ---------------------------------------------------------------------------------------

ROLE_ARN = "arn:aws:iam::123456789012:role/sagemaker"


def resources(**bodies: dict[str, object]) -> Template:
    return {"Resources": bodies}


def resource(type_: str, **properties: object) -> dict[str, object]:
    return {"Type": type_, "Properties": properties}


def component_variant() -> dict[str, object]:
    return {
        "VariantName": "AllTraffic",
        "InstanceType": "ml.g5.xlarge",
        "InitialInstanceCount": 1,
        # Two: an update's copy starts beside the old one, on a second instance (ml.g5.xlarge has one GPU).
        "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 2},
        "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"},
    }


def component_stack(version: str) -> Template:
    model = resource(
        "AWS::SageMaker::Model",
        ExecutionRoleArn=ROLE_ARN,
        PrimaryContainer={"Image": ECHO_IMAGE, "Environment": {"ECHO_VERSION": version}},
    )
    config = resource(
        "AWS::SageMaker::EndpointConfig", ProductionVariants=[component_variant()], ExecutionRoleArn=ROLE_ARN
    )
    endpoint = resource("AWS::SageMaker::Endpoint", EndpointConfigName={"Fn::GetAtt": ["Config", "EndpointConfigName"]})
    component = resource(
        "AWS::SageMaker::InferenceComponent",
        InferenceComponentName="echo-ic",
        EndpointName={"Fn::GetAtt": ["Endpoint", "EndpointName"]},
        VariantName="AllTraffic",
        Specification={
            "ModelName": {"Fn::GetAtt": ["Model", "ModelName"]},
            "ComputeResourceRequirements": {"NumberOfAcceleratorDevicesRequired": 1, "MinMemoryRequiredInMb": 1024},
            "StartupParameters": {"ContainerStartupHealthCheckTimeoutInSeconds": 60},
        },
        RuntimeConfig={"CopyCount": 1},
    )
    return resources(Model=model, Config=config, Endpoint=endpoint, Component=component)


def container_output(aws: LocalAws, group: str, line: str, timeout_s: float = 60) -> dict[str, list[str]]:
    """Each stream of `group` (where SageMaker writes an endpoint's or a component's containers'
    output: local_aws/sagemaker/logs.py) -> its messages, once one of them contains `line` (or
    `timeout_s` passed: the lines are shipped every second)."""
    logs = aws.client("logs")
    # clock: a deadline, not a bound: the lines are shipped every second and a caller waits for one
    # that comes (60 s by default); one that never comes fails the caller's assertion on what was found.
    deadline = time.monotonic() + timeout_s
    while True:
        found: dict[str, list[str]] = {}
        if logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]:
            for log_stream in logs.describe_log_streams(logGroupName=group)["logStreams"]:
                name = log_stream["logStreamName"]
                events = logs.get_log_events(logGroupName=group, logStreamName=name, startFromHead=True)["events"]
                found[name] = [e["message"] for e in events]
        if (
            any(line in m for messages in found.values() for m in messages) or time.monotonic() > deadline
        ):  # clock: the deadline above
            return found
        time.sleep(0.5)
