"""End-to-end helpers: the app synthesized for a setting set, and what a stack left in the
local AWS, read through boto3."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from llm_contracts.gptj import PAYLOAD_MANIFEST
from llm_contracts.manifest import file_entry, sha256_file
from local_aws import LocalAws
from local_aws.cli.cdk import NO_CHANGES, Cdk
from local_aws.sagemaker.containers import Container, ContainerProcess, running_containers
from local_aws.sagemaker.runtime import hosting_plane
from project_config import AppConfig, load_config
from tests.infra.helpers import ROOT, cdk_context, synthesize
from tests.leaks import MARKER, marked

#: Settings that the update step changes, one visible effect per stack.
UPDATES = {"gptj.max_capacity": 3, "gpt2.max_capacity": 6, "inf2.volume_size_gb": 600}
# Bounds for one CLI call: ten times what each takes here, still far below the suite's budget.
CLI_TIMEOUT_S = 120


@dataclass(frozen=True)
class Assembly:
    """A synthesized cloud assembly (deployed with `cdk deploy --app DIR`) and its settings."""

    path: Path
    config: AppConfig

    def template(self, stack: str) -> dict[str, Any]:
        return json.loads((self.path / f"{stack}.template.json").read_text())  # type: ignore[no-any-return]

    def asset_url(self, stack: str, source: Path, aws: LocalAws) -> str:
        """Where `cdk deploy` publishes the file asset ``source`` of ``stack``."""
        manifest = json.loads((self.path / f"{stack}.assets.json").read_text())
        (asset,) = [a for a in manifest["files"].values() if Path(a["source"]["path"]) == source.resolve()]
        (destination,) = asset["destinations"].values()
        bucket = (
            destination["bucketName"].replace("${AWS::AccountId}", aws.account).replace("${AWS::Region}", aws.region)
        )
        return f"s3://{bucket}/{destination['objectKey']}"


def build_tiny_artifacts(out: Path, *extra: str) -> Path:
    """`python -m artifacts_builder all --tiny --out OUT` (what `make artifacts` runs)."""
    subprocess.run(
        [sys.executable, "-m", "artifacts_builder", "all", "--tiny", "--out", str(out), *extra],
        check=True,
        capture_output=True,
        cwd=ROOT,
        timeout=300,
    )
    return out


def invoke(aws: LocalAws, stack: str, request: Any, **kwargs: Any) -> Any:
    """InvokeEndpoint on the stack's endpoint, as a client in AWS calls it; the decoded answer."""
    body = request if isinstance(request, bytes) else json.dumps(request).encode()
    answer = aws.client("sagemaker-runtime").invoke_endpoint(
        EndpointName=aws.stack_outputs(stack)["EndpointName"],
        Body=body,
        **{"ContentType": "application/json", "Accept": "application/json", **kwargs},
    )
    return json.loads(answer["Body"].read())


def stream(aws: LocalAws, stack: str, request: dict[str, Any]) -> dict[str, Any]:
    """InvokeEndpointWithResponseStream on the stack's endpoint, as a client in AWS calls it."""
    answer: dict[str, Any] = aws.client("sagemaker-runtime").invoke_endpoint_with_response_stream(
        EndpointName=aws.stack_outputs(stack)["EndpointName"],
        ContentType="application/json",
        Body=json.dumps({**request, "stream": True}),
    )
    return answer


def server_sent_events(parts: list[bytes]) -> list[bytes]:
    """The ``data:`` of each server-sent event the parts carry, in order."""
    lines = b"".join(parts).split(b"\n")
    return [line.removeprefix(b"data:").strip() for line in lines if line.startswith(b"data:")]


def endpoint_container(aws: LocalAws, stack: str) -> Container:
    """The stack's endpoint's container in the local runtime (bench/gpt2_endpoint.py's container_port)."""
    hosted = hosting_plane().find((aws.account, aws.region, aws.stack_outputs(stack)["EndpointName"]))
    assert hosted is not None and hosted.live is not None
    (container,) = hosted.live.containers.values()
    return container


def loadtest(aws: LocalAws, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`python -m loadtest ARGS` as a user runs it, pointed at the local AWS by its exports."""
    return subprocess.run(
        [sys.executable, "-m", "loadtest", *args],
        cwd=ROOT,
        env=aws.environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


#: What an update of a model rolls out, by its DeploymentConfig: the endpoint, or its inference
#: component (which carries the model; the endpoint then has no DeploymentConfig).
GUARDED = ("AWS::SageMaker::Endpoint", "AWS::SageMaker::InferenceComponent")


def rollback_alarms(aws: LocalAws, stack: str) -> list[str]:
    """The alarms the stack's endpoint, or its inference component, names in its update policy."""
    body = aws.client("cloudformation").get_template(StackName=stack)["TemplateBody"]
    template = json.loads(body) if isinstance(body, str) else body
    (config,) = [
        r["Properties"]["DeploymentConfig"]
        for r in template["Resources"].values()
        if r["Type"] in GUARDED and "DeploymentConfig" in r["Properties"]
    ]
    return [a["AlarmName"] for a in config["AutoRollbackConfiguration"]["Alarms"]]


def update_check(aws: LocalAws, stack: str) -> str:
    """The value of the stack's update check: the endpoint config the endpoint ran after the
    last update CloudFormation completed."""
    summaries = aws.client("cloudformation").list_stack_resources(StackName=stack)["StackResourceSummaries"]
    (name,) = [
        r["PhysicalResourceId"]
        for r in summaries
        if r["ResourceType"] == "AWS::SSM::Parameter" and r["LogicalResourceId"].startswith("EndpointUpdateCheck")
    ]
    return str(aws.client("ssm").get_parameter(Name=name)["Parameter"]["Value"])


def retrain_gptj(artifacts: Path) -> None:
    """Stand in for a retrained GPT-J: the built payload in `artifacts` gets other weights (the
    same shapes, each tensor shifted) and manifests that match, as a rebuild would leave them."""
    import torch
    from safetensors.torch import load_file, save_file

    payload = artifacts / "gptj" / "model"
    weights = payload / "model.safetensors"
    generator = torch.Generator().manual_seed(7)
    tensors = {
        name: t + torch.randn(t.shape, generator=generator, dtype=torch.float32).to(t.dtype) * 0.5
        if t.is_floating_point()
        else t
        for name, t in load_file(weights).items()
    }
    save_file(tensors, weights, metadata={"format": "pt"})
    for manifest, prefix in ((payload / PAYLOAD_MANIFEST, ""), (artifacts / "gptj" / "manifest.json", "model/")):
        document = json.loads(manifest.read_text())
        for name, entry in document["files"].items():
            file = payload / name.removeprefix(prefix)
            if name.removeprefix(prefix) in ("model.safetensors", PAYLOAD_MANIFEST):
                entry.update(file_entry(file))
        manifest.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")


def gpt2_image(aws: LocalAws) -> str:
    """No Docker engine publishes the GPT-2 image asset here: the stack is given an image URI."""
    return aws.ecr_image_uri("llm-inference-gpt2", "e2e")


#: Rollback alarms that fire on one minute of data, so that an update bakes one minute (the
#: shortest baking period the settings allow with them) instead of the default ten.
QUICK_UPDATES = {
    f"{stack}.{key}": value
    for stack in ("gpt2", "gptj")
    for key, value in {"alarm_evaluation_periods": 1, "update_wait_s": 60}.items()
}


def assembly_of(root: Path, aws: LocalAws, artifacts: Path, **overrides: Any) -> Assembly:
    """The app for a test's deploys. GPT-J on the toolkit engine, which starts in seconds here (its
    vLLM server takes a minute or more to compile): tests/e2e/test_vllm_engine.py deploys the
    default engine."""
    settings = {
        "project.artifacts_dir": str(artifacts),
        "gpt2.image_uri": gpt2_image(aws),
        "gptj.engine": "hf-toolkit",
        **QUICK_UPDATES,
        **overrides,
    }
    # `all --tiny` builds no llm payload (tests/e2e/test_llm_stack.py deploys LlmStack).
    synthesized = synthesize(root, artifacts, may_leave_out=("LlmStack",), **settings)
    return Assembly(path=synthesized.outdir, config=load_config(cdk_context(**settings)))


def stack_of(aws: LocalAws, name: str) -> dict[str, Any]:
    return aws.client("cloudformation").describe_stacks(StackName=name)["Stacks"][0]  # type: ignore[no-any-return]


def resources_of_stack(aws: LocalAws, name: str) -> dict[str, tuple[str, str]]:
    """logical id -> (type, physical id)"""
    summaries = aws.client("cloudformation").list_stack_resources(StackName=name)["StackResourceSummaries"]
    return {r["LogicalResourceId"]: (r["ResourceType"], r.get("PhysicalResourceId", "")) for r in summaries}


def alarms_reach_the_topic(aws: LocalAws, stack: str) -> dict[str, list[str]]:
    """Each alarm of the stack forced to ALARM, then back to OK, as CloudWatch would take it
    there: an SQS queue subscribed to the stack's topic hears CloudWatch's notification of each
    change, and no action failed. Returns each alarm's actions as its history records them (those
    run since the call: an alarm keeps its history through an update)."""
    topic = aws.stack_outputs(stack)["AlarmTopicArn"]
    alarms = sorted(i for t, i in resources_of_stack(aws, stack).values() if t == "AWS::CloudWatch::Alarm")
    assert alarms, f"{stack} has no alarm"
    sns, sqs, cw = aws.client("sns"), aws.client("sqs"), aws.client("cloudwatch")

    def actions(name: str) -> list[str]:
        history = cw.describe_alarm_history(AlarmName=name, HistoryItemType="Action", ScanBy="TimestampAscending")
        return [h["HistorySummary"] for h in history["AlarmHistoryItems"]]

    before = {name: len(actions(name)) for name in alarms}
    queue = sqs.create_queue(QueueName=f"{stack}-oncall")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    subscription = sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)["SubscriptionArn"]
    try:
        for state in ("ALARM", "OK"):
            for name in alarms:
                cw.set_alarm_state(AlarmName=name, StateValue=state, StateReason=f"e2e: {stack}'s alarms forced")
            heard: list[tuple[str, str]] = []
            # clock: a generous wait for notifications that come within a second here (CloudWatch
            # runs an alarm's actions at its change); its expiry only ends a wait for a missing one.
            deadline = time.monotonic() + 60
            while len(heard) < len(alarms) and time.monotonic() < deadline:  # clock: the same wait
                for m in sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
                    "Messages", []
                ):
                    notice = json.loads(json.loads(m["Body"])["Message"])
                    heard.append((notice["AlarmName"], notice["NewStateValue"]))
                    sqs.delete_message(QueueUrl=queue, ReceiptHandle=m["ReceiptHandle"])
            assert sorted(heard) == [(name, state) for name in alarms]
        ran: dict[str, list[str]] = {}
        for name in alarms:
            summaries = actions(name)[before[name] :]
            assert not [s for s in summaries if s.startswith("Failed")], summaries
            ran[name] = [s.removeprefix("Successfully executed action ") for s in summaries]
        return ran
    finally:
        sns.unsubscribe(SubscriptionArn=subscription)
        sqs.delete_queue(QueueUrl=queue)


def s3_object_sha256(aws: LocalAws, url: str) -> str:
    bucket, key = url.removeprefix("s3://").split("/", 1)
    body = aws.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
    return hashlib.sha256(body).hexdigest()


def prefix_files(aws: LocalAws, url: str) -> dict[str, str]:
    """relative name -> sha256 of every object under an S3 prefix."""
    bucket, prefix = url.removeprefix("s3://").split("/", 1)
    s3 = aws.client("s3")
    found = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            body = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
            found[obj["Key"].removeprefix(prefix)] = hashlib.sha256(body).hexdigest()
    return found


def payload_files(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): sha256_file(p) for p in folder.rglob("*") if p.is_file()}


def role_statements(aws: LocalAws, role_name: str) -> list[dict[str, Any]]:
    iam = aws.client("iam")
    statements: list[dict[str, Any]] = []
    for policy in iam.list_role_policies(RoleName=role_name)["PolicyNames"]:
        document = iam.get_role_policy(RoleName=role_name, PolicyName=policy)["PolicyDocument"]
        if isinstance(document, str):
            document = json.loads(document)
        statements.extend(document["Statement"])
    return statements


def _missing(call: Callable[[], Any], *codes: str) -> bool:
    try:
        call()
    except ClientError as exc:
        if exc.response["Error"]["Code"] in codes or not codes:
            return True
        raise
    return False


def _gone(aws: LocalAws, resource_type: str, physical_id: str) -> bool:
    """Whether the resource no longer exists, asked the way a user would ask AWS."""
    sm, ec2, iam = aws.client("sagemaker"), aws.client("ec2"), aws.client("iam")
    name = physical_id.rsplit("/", 1)[-1]
    checks: dict[str, Callable[[], bool]] = {
        "AWS::SageMaker::Model": lambda: _missing(lambda: sm.describe_model(ModelName=name)),
        "AWS::SageMaker::EndpointConfig": lambda: _missing(
            lambda: sm.describe_endpoint_config(EndpointConfigName=name)
        ),
        # SageMaker writes the endpoint's name in lower case in its ARN, the physical id: the
        # endpoint is looked for by that ARN, not by a name it does not have.
        "AWS::SageMaker::Endpoint": lambda: all(
            e["EndpointArn"] != physical_id for e in sm.list_endpoints(MaxResults=100)["Endpoints"]
        ),
        "AWS::ApplicationAutoScaling::ScalableTarget": lambda: (
            not aws.client("application-autoscaling").describe_scalable_targets(
                ServiceNamespace="sagemaker", ResourceIds=[physical_id.split("|")[0]]
            )["ScalableTargets"]
        ),
        "AWS::ApplicationAutoScaling::ScalingPolicy": lambda: all(
            p["PolicyARN"] != physical_id
            for p in aws.client("application-autoscaling").describe_scaling_policies(ServiceNamespace="sagemaker")[
                "ScalingPolicies"
            ]
        ),
        "AWS::CloudWatch::Alarm": lambda: (
            not aws.client("cloudwatch").describe_alarms(AlarmNames=[physical_id])["MetricAlarms"]
        ),
        "AWS::IAM::Role": lambda: _missing(lambda: iam.get_role(RoleName=physical_id), "NoSuchEntity"),
        # An inline policy lives in its role: gone with it (the role is checked on its own).
        "AWS::IAM::Policy": lambda: True,
        "AWS::IAM::InstanceProfile": lambda: _missing(
            lambda: iam.get_instance_profile(InstanceProfileName=physical_id), "NoSuchEntity"
        ),
        "AWS::KMS::Key": lambda: (
            aws.client("kms").describe_key(KeyId=physical_id)["KeyMetadata"]["KeyState"] == "PendingDeletion"
        ),
        "AWS::EC2::Instance": lambda: all(
            i["State"]["Name"] in ("terminated", "shutting-down")
            for r in ec2.describe_instances(InstanceIds=[physical_id])["Reservations"]
            for i in r["Instances"]
        ),
        "AWS::EC2::VPC": lambda: _missing(lambda: ec2.describe_vpcs(VpcIds=[physical_id])),
        "AWS::EC2::Subnet": lambda: _missing(lambda: ec2.describe_subnets(SubnetIds=[physical_id])),
        "AWS::EC2::SecurityGroup": lambda: _missing(lambda: ec2.describe_security_groups(GroupIds=[physical_id])),
        "AWS::EC2::RouteTable": lambda: _missing(lambda: ec2.describe_route_tables(RouteTableIds=[physical_id])),
        # Routes and associations live in their route table and subnet, both checked on their own.
        "AWS::EC2::Route": lambda: True,
        "AWS::EC2::SubnetRouteTableAssociation": lambda: True,
        "AWS::EC2::VPCGatewayAttachment": lambda: True,
        "AWS::EC2::InternetGateway": lambda: _missing(
            lambda: ec2.describe_internet_gateways(InternetGatewayIds=[physical_id])
        ),
        "AWS::EC2::NatGateway": lambda: all(
            n["State"] in ("deleted", "deleting")
            for n in ec2.describe_nat_gateways(NatGatewayIds=[physical_id])["NatGateways"]
        ),
        "AWS::EC2::EIP": lambda: _missing(lambda: ec2.describe_addresses(PublicIps=[physical_id])),
        "AWS::EC2::FlowLog": lambda: not ec2.describe_flow_logs(FlowLogIds=[physical_id])["FlowLogs"],
        "AWS::EC2::LaunchTemplate": lambda: all(
            t["LaunchTemplateId"] != physical_id for t in ec2.describe_launch_templates()["LaunchTemplates"]
        ),
        "AWS::S3::Bucket": lambda: _missing(lambda: aws.client("s3").head_bucket(Bucket=physical_id)),
        # A bucket policy lives in its bucket, and each copied model file under the bucket's
        # prefix: both gone with the bucket, which is checked on its own.
        "AWS::S3::BucketPolicy": lambda: True,
        "Custom::AWS": lambda: True,
        # Restricts the VPC's default security group: gone with the VPC, which is checked on its own.
        "Custom::VpcRestrictDefaultSG": lambda: True,
        "AWS::Lambda::Function": lambda: _missing(
            lambda: aws.client("lambda").get_function(FunctionName=physical_id), "ResourceNotFoundException"
        ),
        "AWS::SNS::Topic": lambda: all(t["TopicArn"] != physical_id for t in aws.client("sns").list_topics()["Topics"]),
        "AWS::SNS::Subscription": lambda: all(
            s["SubscriptionArn"] != physical_id for s in aws.client("sns").list_subscriptions()["Subscriptions"]
        ),
        # A topic policy lives in its topic, which is checked on its own.
        "AWS::SNS::TopicPolicy": lambda: True,
        "AWS::CloudWatch::Dashboard": lambda: all(
            d["DashboardName"] != physical_id for d in aws.client("cloudwatch").list_dashboards()["DashboardEntries"]
        ),
        "AWS::SSM::Parameter": lambda: _missing(
            lambda: aws.client("ssm").get_parameter(Name=physical_id), "ParameterNotFound"
        ),
        "AWS::Logs::LogGroup": lambda: (
            not [
                g
                for g in aws.client("logs").describe_log_groups(logGroupNamePrefix=physical_id)["logGroups"]
                if g["logGroupName"] == physical_id
            ]
        ),
    }
    if resource_type not in checks:
        raise AssertionError(f"no check that a {resource_type!r} ({physical_id}) is deleted: add one here")
    return checks[resource_type]()


def assert_destroyed(aws: LocalAws, name: str, before: dict[str, tuple[str, str]], template: dict[str, Any]) -> None:
    """Nothing of the stack is left: `cdk destroy` must not leave orphans (log groups, keys)."""
    assert _missing(lambda: stack_of(aws, name), "ValidationError")
    retained = sorted(k for k, v in template["Resources"].items() if v.get("DeletionPolicy") == "Retain")
    assert not retained, f"{name} retains {', '.join(retained)} after destroy"
    # moto lists each resource of a type it does not model (AWS::S3::BucketPolicy, skipped on
    # purpose: see local_aws/patches/s3.py) with no logical id, type or physical id: nothing to check.
    left = [
        f"{logical} ({kind} {physical})"
        for logical, (kind, physical) in before.items()
        if logical and kind != "AWS::CDK::Metadata" and not _gone(aws, kind, physical)
    ]
    assert not left, f"{name} was destroyed but left: {', '.join(left)}"


def deploy_reports_no_changes(cdk: Cdk, app: Path, name: str) -> None:
    events_before = len(cdk.aws.client("cloudformation").describe_stack_events(StackName=name)["StackEvents"])
    result = cdk.deploy(app, [name])
    assert NO_CHANGES in result.output, result.output
    events_after = len(cdk.aws.client("cloudformation").describe_stack_events(StackName=name)["StackEvents"])
    assert events_after == events_before, "a deploy without changes must not touch the stack"


def this_sessions_containers() -> list[ContainerProcess]:
    """The live containers this test session started: other sessions on this host (another
    checkout's tests) may be running containers of their own meanwhile."""
    session = os.environ.get(MARKER)
    ours = {p.pid for p in marked(session)} if session else None
    return [c for c in running_containers() if ours is None or c.pid in ours]


def handler_output(aws: LocalAws, stack: str) -> dict[str, list[str]]:
    """Each Lambda function of the stack (logical id) -> what its invocations logged, in its log
    group, found as a script finds it: GetFunctionConfiguration's LoggingConfig (the template's,
    else /aws/lambda/<name>)."""
    resources = resources_of_stack(aws, stack)
    logs, functions = aws.client("logs"), aws.client("lambda")
    found = {}
    for logical_id, (kind, name) in resources.items():
        if kind != "AWS::Lambda::Function":
            continue
        group = functions.get_function_configuration(FunctionName=name)["LoggingConfig"]["LogGroup"]
        messages: list[str] = []
        for log_stream in logs.describe_log_streams(logGroupName=group)["logStreams"]:
            events = logs.get_log_events(logGroupName=group, logStreamName=log_stream["logStreamName"])["events"]
            messages += [e["message"] for e in events]
        found[logical_id] = messages
    return found


def assert_handlers_ran(aws: LocalAws, stack: str) -> None:
    """Every function of the stack ran its handler for real on the stack's creation (its log
    shows the Create request it logged), and no invocation failed or timed out."""
    ran = handler_output(aws, stack)
    assert ran, f"{stack} has no Lambda function"
    for function, messages in ran.items():
        assert any(re.search(r'"RequestType": ?"Create"', m) for m in messages), (function, messages)
        reports = [m for m in messages if m.startswith("REPORT RequestId")]
        assert reports and not [r for r in reports if "Status:" in r], (function, reports)


def deploy_update_destroy(
    cdk: Cdk, stack: str, base: Assembly, updated: Assembly, check: Callable[[Assembly], dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The cycle users run: deploy, deploy again (no changes), deploy a changed setting (an
    update), destroy; ``check`` inspects the stack after each deploy. Returns both checks."""
    cdk.deploy(base.path, [stack])
    first = check(base)
    assert_handlers_ran(cdk.aws, stack)
    deploy_reports_no_changes(cdk, base.path, stack)
    cdk.deploy(updated.path, [stack])
    assert stack_of(cdk.aws, stack)["StackStatus"] == "UPDATE_COMPLETE"
    second = check(updated)
    deployed = resources_of_stack(cdk.aws, stack)
    cdk.destroy(updated.path, [stack])
    assert_destroyed(cdk.aws, stack, deployed, updated.template(stack))
    assert this_sessions_containers() == [], "deleting the endpoint stops its container"
    return first, second


# --- The runtime's fuzz on a deployed endpoint (tests/local_aws/fuzz.py) ---------------------------

#: Cases per operation of the runtime's fuzz on each deployed endpoint (what they cost: docs/LOCAL_AWS.md).
FUZZ_EXAMPLES = {"InvokeEndpoint": 150, "InvokeEndpointWithResponseStream": 60}
#: The keys of each engine's requests, from which the fuzz makes near-valid JSON bodies.
GPT2_KEYS = ("input", "inputs", "parameters", "max_new_tokens", "num_return_sequences", "do_sample", "temperature",
             "top_k", "top_p", "stop", "stream")  # fmt: skip
TOOLKIT_KEYS = ("inputs", "parameters", "max_new_tokens", "temperature", "do_sample", "top_p", "stream")
VLLM_KEYS = ("prompt", "max_tokens", "temperature", "top_p", "stream", "stop", "n", "logprobs", "model")


def unusable_endpoints(aws: LocalAws, stack: str) -> dict[str, str]:
    """Endpoints beside the stack's that cannot answer: one never created, one deleted, one
    Failed (its model's data is not in S3). The deleted one runs the stack's own config, deleted
    while it starts."""
    sm = aws.client("sagemaker")
    name = aws.stack_outputs(stack)["EndpointName"]
    config = sm.describe_endpoint_config(
        EndpointConfigName=sm.describe_endpoint(EndpointName=name)["EndpointConfigName"]
    )
    variant = config["ProductionVariants"][0]
    model = sm.describe_model(ModelName=variant["ModelName"])
    prefix = f"fuzz-{stack.lower()}"
    sm.create_endpoint(EndpointName=f"{prefix}-deleted", EndpointConfigName=config["EndpointConfigName"])
    sm.delete_endpoint(EndpointName=f"{prefix}-deleted")
    sm.create_model(
        ModelName=f"{prefix}-no-data",
        ExecutionRoleArn=model["ExecutionRoleArn"],
        PrimaryContainer={"Image": model["PrimaryContainer"]["Image"], "ModelDataUrl": f"s3://{prefix}-none/m.tar.gz"},
    )
    kept = {k: variant[k] for k in ("VariantName", "InstanceType", "InitialInstanceCount")}
    sm.create_endpoint_config(
        EndpointConfigName=f"{prefix}-no-data", ProductionVariants=[{**kept, "ModelName": f"{prefix}-no-data"}]
    )
    sm.create_endpoint(EndpointName=f"{prefix}-failed", EndpointConfigName=f"{prefix}-no-data")
    # clock: a generous wait for a failure that comes at once (no model data to fetch)
    deadline = time.monotonic() + 60
    while sm.describe_endpoint(EndpointName=f"{prefix}-failed")["EndpointStatus"] == "Creating":
        assert time.monotonic() < deadline  # clock: the same wait
        time.sleep(0.2)
    return {"missing": f"{prefix}-never", "deleted": f"{prefix}-deleted", "failed": f"{prefix}-failed"}


def remove_unusable(aws: LocalAws, stack: str) -> None:
    sm = aws.client("sagemaker")
    prefix = f"fuzz-{stack.lower()}"
    sm.delete_endpoint(EndpointName=f"{prefix}-failed")
    sm.delete_endpoint_config(EndpointConfigName=f"{prefix}-no-data")
    sm.delete_model(ModelName=f"{prefix}-no-data")


def fuzz_target(
    aws: LocalAws, stack: str, seeds: list[Any], keys: tuple[str, ...], *, ours: bool, unusable: dict[str, str]
) -> Any:
    """The fuzz's target: the stack's endpoint, its variant's container, and the unusable names."""
    from local_aws.sagemaker.runtime import hosting_plane
    from tests.local_aws import fuzz

    name = aws.stack_outputs(stack)["EndpointName"]

    def container() -> Any:
        hosted = hosting_plane().find((aws.account, aws.region, name))
        assert hosted is not None and hosted.live is not None
        (found,) = hosted.live.containers.values()
        return found

    return fuzz.Target(
        aws=aws,
        endpoint=name,
        variant="AllTraffic",
        container=container,
        seeds=[json.dumps(s).encode() for s in seeds],
        keys=keys,
        unusable={n: state for state, n in unusable.items()},
        ours=ours,
    )
