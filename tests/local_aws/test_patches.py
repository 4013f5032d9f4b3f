"""Each patch of local_aws.patches restores an AWS behaviour that stock moto lacks.

For every registered patch, the smallest scenario that shows the behaviour runs against
the local AWS (moto in this process) twice: with every patch, where it must behave as AWS
does, and with that one patch reverted, where it must behave as stock moto does, which
proves the patch is what makes the difference.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import boto3
import pytest
from moto.sagemaker.models import FakeEndpointConfig

from local_aws import LocalAws, patches
from local_aws.patches.base import Patch, find, replace
from local_aws.sagemaker.containers import running_containers
from tests.local_aws.helpers import (
    AWS_CUSTOM_RESOURCE,
    ECHO_IMAGE,
    LAMBDA_TRUST,
    ROLE_ARN,
    Template,
    body,
    cdk_handler,
    client,
    component_stack,
    component_variant,
    create_stack,
    delete_stack,
    deploy_stack,
    echo_config,
    echo_endpoint,
    endpoint_named,
    endpoint_status,
    error_of,
    failures,
    function_output,
    function_resources,
    outputs,
    physical_ids,
    resource,
    resources,
    stack_status,
    subscribed_queue,
    update_stack,
    zipped,
)

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/model:1"


@dataclass(frozen=True)
class Scenario:
    #: Runs the scenario in a fresh account; returns what it observed.
    run: Callable[[LocalAws], object]
    #: What AWS does (and the local AWS with the patch).
    aws: object
    #: What stock moto does.
    stock: object
    #: Patches the patch builds on, reverted with it for the stock run (stock moto's own
    #: handler cannot read what they give it).
    builds_on: tuple[str, ...] = ()


NOTHING = resource("AWS::CloudFormation::WaitConditionHandle")


# --- CloudFormation ------------------------------------------------------------------------------


def change_set_of_a_stack(aws: LocalAws) -> object:
    """Two stacks, each with a change set of the name the CDK CLI gives them all: which one a
    look-up within the first stack finds, and how a missing one is reported."""
    cfn = client(aws, "cloudformation")
    for stack in ("first", "second"):
        cfn.create_change_set(
            StackName=stack, ChangeSetName="cdk", ChangeSetType="CREATE", TemplateBody=body(resources(N=NOTHING))
        )
    found = cfn.describe_change_set(StackName="first", ChangeSetName="cdk")["StackName"]
    missing = error_of(lambda: cfn.describe_change_set(StackName="first", ChangeSetName="none"))
    return found, missing


def delete_missing_change_set(aws: LocalAws) -> object:
    """Deleting a change set the stack does not have (the CLI does before every update)."""
    create_stack(aws, "stack", resources(N=NOTHING))
    cfn = client(aws, "cloudformation")
    return error_of(lambda: cfn.delete_change_set(StackName="stack", ChangeSetName="cdk-deploy-change-set"))


def outputs_after_change_set(aws: LocalAws) -> object:
    """A stack created by a change set, as `cdk deploy` creates one: its outputs."""
    cfn = client(aws, "cloudformation")
    template = {**resources(N=NOTHING), "Outputs": {"Answer": {"Value": "42"}}}
    cfn.create_change_set(StackName="stack", ChangeSetName="cdk", ChangeSetType="CREATE", TemplateBody=body(template))
    cfn.execute_change_set(StackName="stack", ChangeSetName="cdk")
    return outputs(aws, "stack")


def ssm_parameter_reused(aws: LocalAws) -> object:
    """A stack whose parameter names an SSM parameter (as CDK's AMI look-ups do): an update
    with the same template and the parameter's default given explicitly (the CLI gives SSM
    parameters on updates, not on creation), then an update that reuses the previous value."""
    client(aws, "ssm").put_parameter(Name="/ami", Value="ami-1", Type="String")
    template: Template = {
        "Parameters": {"Ami": {"Type": "AWS::SSM::Parameter::Value<String>", "Default": "/ami"}},
        **resources(N=NOTHING),
        "Outputs": {"Ami": {"Value": {"Ref": "Ami"}}},
    }
    create_stack(aws, "stack", template)
    cfn = client(aws, "cloudformation")
    # The CLI hands its template over by URL; moto compares a body's text before its content,
    # so the same template in other text stands for it.
    cfn.create_change_set(
        StackName="stack",
        ChangeSetName="same",
        ChangeSetType="UPDATE",
        TemplateBody=json.dumps(template, indent=1),
        Parameters=[{"ParameterKey": "Ami", "ParameterValue": "/ami"}],
    )
    unchanged = cfn.describe_change_set(StackName="stack", ChangeSetName="same")["Status"]
    changed = {**template, "Outputs": {"Image": {"Value": {"Ref": "Ami"}}}}
    failed = update_stack(aws, "stack", changed, Parameters=[{"ParameterKey": "Ami", "UsePreviousValue": True}])
    return unchanged, failed or outputs(aws, "stack")


def log_group(retention: int) -> Template:
    # moto cannot update a log group in place, as CloudFormation cannot change a name.
    return {
        **resources(Group=resource("AWS::Logs::LogGroup", RetentionInDays=retention)),
        "Outputs": {"Group": {"Value": {"Ref": "Group"}}},
    }


def log_group_replaced(aws: LocalAws) -> object:
    """A log group whose update needs a new one: the log groups there are after the update,
    the one the stack lists and the one its output names."""
    create_stack(aws, "stack", log_group(1))
    update_stack(aws, "stack", log_group(3))
    groups = {
        g["logGroupName"]: g.get("retentionInDays") for g in client(aws, "logs").describe_log_groups()["logGroups"]
    }
    listed = physical_ids(aws, "stack").get("Group")
    return sorted(groups.values()), groups.get(listed), groups.get(outputs(aws, "stack").get("Group"))


def dependent_of_replaced(aws: LocalAws) -> object:
    """An SSM parameter holding the name of a log group that an update replaces (its own
    template text unchanged): whether it names the new log group."""

    def template(retention: int) -> Template:
        return {
            "Resources": {
                **log_group(retention)["Resources"],
                "Name": resource("AWS::SSM::Parameter", Name="/group", Type="String", Value={"Ref": "Group"}),
            }
        }

    create_stack(aws, "stack", template(1))
    update_stack(aws, "stack", template(3))
    value = client(aws, "ssm").get_parameter(Name="/group")["Parameter"]["Value"]
    return value == physical_ids(aws, "stack")["Group"]


def custom_resource_call(aws: LocalAws) -> object:
    """CDK's AwsCustomResource, its function made of aws-cdk-lib's handler, putting an object into
    a bucket on create and deleting it on delete: whether the creation fails, the stack's status,
    and (once it is complete) the bucket's keys after the creation and after the deletion."""
    s3 = client(aws, "s3")
    s3.create_bucket(Bucket="bucket")
    s3.create_bucket(Bucket="code")
    s3.put_object(Bucket="code", Key="fn.zip", Body=cdk_handler(AWS_CUSTOM_RESOURCE))
    objects = {"Effect": "Allow", "Action": ["s3:PutObject", "s3:DeleteObject"], "Resource": "arn:aws:s3:::bucket/*"}
    put = {"service": "S3", "action": "putObject", "parameters": {"Bucket": "bucket", "Key": "k", "Body": "x"}}
    delete = {"service": "S3", "action": "deleteObject", "parameters": {"Bucket": "bucket", "Key": "k"}}
    call = resource(
        "Custom::AWS",
        ServiceToken=get_att("Fn", "Arn"),
        Create=json.dumps({**put, "physicalResourceId": {"id": "k"}}),
        Delete=json.dumps(delete),
    )
    template = resources(**function_resources(("code", "fn.zip"), statements=[objects], timeout=10), Call=call)

    def keys() -> list[str]:
        return [o["Key"] for o in s3.list_objects_v2(Bucket="bucket").get("Contents", [])]

    failed = create_stack(aws, "stack", template)
    status = stack_status(aws, "stack")
    if status != "CREATE_COMPLETE":
        return failed, status
    created = keys()
    delete_stack(aws, "stack")
    return failed, status, created, keys()


def deletion_order(aws: LocalAws) -> object:
    """A stack of custom resources, each depending on the one before: whether its deletion sends
    them their Delete requests last first (their function logs each)."""
    handler = """
const https = require('https');
exports.handler = async (event) => {
  console.log('request', event.RequestType, event.LogicalResourceId);
  const body = JSON.stringify({ Status: 'SUCCESS', PhysicalResourceId: event.LogicalResourceId,
    StackId: event.StackId, RequestId: event.RequestId, LogicalResourceId: event.LogicalResourceId });
  const target = new URL(event.ResponseURL);
  await new Promise((resolve, reject) => {
    const request = https.request({ hostname: target.hostname, path: target.pathname + target.search,
      method: 'PUT', headers: { 'content-length': Buffer.byteLength(body) } }, resolve);
    request.on('error', reject);
    request.end(body);
  });
};"""
    client(aws, "logs").create_log_group(logGroupName="order")
    s3 = client(aws, "s3")
    s3.create_bucket(Bucket="code")
    s3.put_object(Bucket="code", Key="fn.zip", Body=zipped({"index.js": handler}))
    chain = [f"R{i}" for i in range(8)]
    bodies: dict[str, Any] = function_resources(("code", "fn.zip"), timeout=10, log_group="order")
    for before, name in zip([None, *chain], chain, strict=False):
        bodies[name] = {"Type": "Custom::Link", "Properties": {"ServiceToken": get_att("Fn", "Arn")}}
        if before is not None:
            bodies[name]["DependsOn"] = before
    create_stack(aws, "stack", resources(**bodies))
    delete_stack(aws, "stack")
    deleted = [m.split()[-1] for m in function_output(aws, "order") if "\tINFO\trequest Delete " in m]
    return deleted == list(reversed(chain))


# --- Resource types stock moto lacks ----------------------------------------------------------

SCALABLE = {
    "ServiceNamespace": "sagemaker",
    "ResourceId": "endpoint/e/variant/v",
    "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
}
UP_METRIC = {
    "Metric": {"Namespace": "N", "MetricName": "Up", "Dimensions": [{"Name": "InstanceId", "Value": "i-1"}]},
    "Period": 300,
    "Stat": "Maximum",
}
AUTOSCALING_AND_ALARM = resources(
    Target=resource("AWS::ApplicationAutoScaling::ScalableTarget", MinCapacity=1, MaxCapacity=2, **SCALABLE),
    Policy=resource(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        PolicyName="invocations",
        PolicyType="TargetTrackingScaling",
        ScalingTargetId={"Ref": "Target"},
        TargetTrackingScalingPolicyConfiguration={
            "TargetValue": 100,
            "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"},
        },
    ),
    Alarm=resource(
        "AWS::CloudWatch::Alarm",
        AlarmName="errors",
        Namespace="AWS/SageMaker",
        MetricName="Invocation5XXErrors",
        Statistic="Sum",
        Period=60,
        EvaluationPeriods=1,
        Threshold=1,
        ComparisonOperator="GreaterThanOrEqualToThreshold",
    ),
    MathAlarm=resource(
        "AWS::CloudWatch::Alarm",
        AlarmName="down",
        Metrics=[
            {"Id": "e", "Expression": "FILL(m, 0)", "ReturnData": True},
            {"Id": "m", "ReturnData": False, "MetricStat": UP_METRIC},
        ],
        EvaluationPeriods=3,
        DatapointsToAlarm=2,
        Threshold=1,
        ComparisonOperator="LessThanThreshold",
    ),
    PromQLAlarm=resource(
        "AWS::CloudWatch::Alarm",
        AlarmName="queue",
        EvaluationCriteria={"PromQLCriteria": {"Query": "vllm_num_requests_waiting >= 1", "PendingPeriod": 180}},
        EvaluationInterval=60,
    ),
)


def autoscaling_and_alarm(aws: LocalAws) -> object:
    """An endpoint variant's scalable target, its scaling policy and three alarms (one on metric
    math, one on a PromQL query): how many of each the account has once the stack is created,
    then once it is deleted, the math alarm's queries (with their ReturnData) and the PromQL
    alarm's query as DescribeAlarms returns them."""
    scaling = client(aws, "application-autoscaling")
    cloudwatch = client(aws, "cloudwatch")

    def counts() -> tuple[int, int, int]:
        return (
            len(scaling.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]),
            len(scaling.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"]),
            len(cloudwatch.describe_alarms()["MetricAlarms"]),
        )

    def queries() -> list[tuple[str, object, object]]:
        alarms = cloudwatch.describe_alarms(AlarmNames=["down"])["MetricAlarms"]
        return [(q["Id"], q.get("Expression") or q["MetricStat"]["Metric"]["MetricName"], q.get("ReturnData"))
                for alarm in alarms for q in alarm["Metrics"]]  # fmt: skip

    def promql() -> list[object]:
        alarms = cloudwatch.describe_alarms(AlarmNames=["queue"])["MetricAlarms"]
        return [a["EvaluationCriteria"]["PromQLCriteria"]["Query"] for a in alarms]

    create_stack(aws, "stack", AUTOSCALING_AND_ALARM)
    created, math, query = counts(), queries(), promql()
    delete_stack(aws, "stack")
    return created, math, query, counts()


def listed_resources(aws: LocalAws) -> object:
    """A stack of a resource moto has no model of (a wait condition handle): its logical id and
    type as ListStackResources and DescribeStackResources list them."""
    create_stack(aws, "stack", resources(Handle=NOTHING))
    cfn = client(aws, "cloudformation")
    listed = cfn.list_stack_resources(StackName="stack")["StackResourceSummaries"]
    described = cfn.describe_stack_resources(StackName="stack")["StackResources"]
    return [(r.get("LogicalResourceId"), r.get("ResourceType")) for r in [*listed, *described]]


# --- EC2 ---------------------------------------------------------------------------------------------


def ref(logical_id: str) -> dict[str, str]:
    return {"Ref": logical_id}


def get_att(logical_id: str, attribute: str) -> dict[str, list[str]]:
    return {"Fn::GetAtt": [logical_id, attribute]}


#: A VPC as CDK's Vpc builds one: a public subnet with a NAT gateway, and flow logs.
VPC = resources(
    Vpc=resource("AWS::EC2::VPC", CidrBlock="10.0.0.0/16"),
    Subnet=resource("AWS::EC2::Subnet", VpcId=ref("Vpc"), CidrBlock="10.0.0.0/24"),
    Igw=resource("AWS::EC2::InternetGateway"),
    Attachment=resource("AWS::EC2::VPCGatewayAttachment", VpcId=ref("Vpc"), InternetGatewayId=ref("Igw")),
    Routes=resource("AWS::EC2::RouteTable", VpcId=ref("Vpc")),
    Association=resource("AWS::EC2::SubnetRouteTableAssociation", SubnetId=ref("Subnet"), RouteTableId=ref("Routes")),
    Default={
        **resource(
            "AWS::EC2::Route", RouteTableId=ref("Routes"), DestinationCidrBlock="0.0.0.0/0", GatewayId=ref("Igw")
        ),
        "DependsOn": "Attachment",
    },
    Eip=resource("AWS::EC2::EIP", Domain="vpc"),
    Nat=resource("AWS::EC2::NatGateway", SubnetId=ref("Subnet"), AllocationId=get_att("Eip", "AllocationId")),
    FlowLog=resource(
        "AWS::EC2::FlowLog",
        ResourceId=ref("Vpc"),
        ResourceType="VPC",
        TrafficType="ALL",
        LogDestinationType="cloud-watch-logs",
        LogGroupName="flow-logs",
        DeliverLogsPermissionArn="arn:aws:iam::123456789012:role/flow-logs",
    ),
)


def ec2_inventory(aws: LocalAws) -> Counter[str]:
    ec2 = client(aws, "ec2")
    nat_gateways = ec2.describe_nat_gateways()["NatGateways"]
    return Counter(
        vpcs=len(ec2.describe_vpcs()["Vpcs"]),
        subnets=len(ec2.describe_subnets()["Subnets"]),
        internet_gateways=len(ec2.describe_internet_gateways()["InternetGateways"]),
        route_tables=len(ec2.describe_route_tables()["RouteTables"]),
        nat_gateways=len([n for n in nat_gateways if n["State"] != "deleted"]),
        addresses=len(ec2.describe_addresses()["Addresses"]),
        flow_logs=len(ec2.describe_flow_logs()["FlowLogs"]),
    )


def vpc_teardown(aws: LocalAws) -> object:
    """A VPC stack deleted: whether the deletion fails, and what it leaves behind."""
    before = ec2_inventory(aws)
    create_stack(aws, "stack", VPC)
    failed = delete_stack(aws, "stack")
    return failed, dict(ec2_inventory(aws) - before)


def instance_launched(aws: LocalAws) -> object:
    """An instance as CDK writes one with associate_public_ip_address and require_imdsv2: in
    which subnet and security groups it runs, its HttpTokens and its monitoring."""
    ec2 = client(aws, "ec2")
    image = ec2.register_image(Name="image")["ImageId"]
    template = resources(
        Vpc=resource("AWS::EC2::VPC", CidrBlock="10.0.0.0/16"),
        # Not in moto's default zone, where stock moto would pick this subnet by chance (it
        # counts it among the default subnets).
        Subnet=resource("AWS::EC2::Subnet", VpcId=ref("Vpc"), CidrBlock="10.0.0.0/24", AvailabilityZone="us-east-1b"),
        Sg=resource("AWS::EC2::SecurityGroup", GroupDescription="instance", VpcId=ref("Vpc")),
        Launch=resource(
            "AWS::EC2::LaunchTemplate",
            LaunchTemplateData={"MetadataOptions": {"HttpTokens": "required"}},
        ),
        Instance=resource(
            "AWS::EC2::Instance",
            ImageId=image,
            InstanceType="t3.micro",
            Monitoring=True,
            LaunchTemplate={
                "LaunchTemplateId": ref("Launch"),
                "Version": get_att("Launch", "LatestVersionNumber"),
            },
            NetworkInterfaces=[
                {
                    "DeviceIndex": "0",
                    "AssociatePublicIpAddress": True,
                    "SubnetId": ref("Subnet"),
                    "GroupSet": [get_att("Sg", "GroupId")],
                }
            ],
        ),
    )
    create_stack(aws, "stack", template)
    ids = physical_ids(aws, "stack")
    (reservation,) = ec2.describe_instances(InstanceIds=[ids["Instance"]])["Reservations"]
    (instance,) = reservation["Instances"]
    return (
        instance.get("SubnetId") == ids["Subnet"],
        [g["GroupId"] for g in instance["SecurityGroups"]] == [ids["Sg"]],
        instance["MetadataOptions"]["HttpTokens"],
        instance["Monitoring"]["State"],
    )


def https_out(description: str) -> Template:
    """A VPC, and a security group whose template lists one egress rule: HTTPS, so described."""
    rule = {"CidrIp": "0.0.0.0/0", "Description": description, "FromPort": 443, "IpProtocol": "tcp", "ToPort": 443}
    return resources(
        Vpc=resource("AWS::EC2::VPC", CidrBlock="10.0.0.0/16"),
        Sg=resource(
            "AWS::EC2::SecurityGroup", GroupDescription="https out", VpcId=ref("Vpc"), SecurityGroupEgress=[rule]
        ),
    )


def security_group_egress(aws: LocalAws) -> object:
    """A security group whose template lists its egress rules (HTTPS only): the rules it has."""
    create_stack(aws, "stack", https_out("https"))
    (group,) = client(aws, "ec2").describe_security_groups(GroupIds=[physical_ids(aws, "stack")["Sg"]])[
        "SecurityGroups"
    ]
    return [
        (p["IpProtocol"], p.get("FromPort"), p.get("ToPort"), [r["CidrIp"] for r in p["IpRanges"]])
        for p in group["IpPermissionsEgress"]
    ]


def apostrophe_in_a_rule_description(aws: LocalAws) -> object:
    """A stack deployed as the CDK CLI deploys it, whose group's egress rule description has an
    apostrophe (Inf2Stack's fault of issue 22): the stack's status, and the failed resource's
    error code."""
    deploy_stack(aws, "stack", https_out("the hub's addresses"))
    failed = failures(aws, "stack")
    said = re.search(r"Error Code: (\w+)", failed.get("Sg", ""))
    return stack_status(aws, "stack"), said[1] if said else None


def apostrophe_given_to_authorize_egress(aws: LocalAws) -> object:
    """AuthorizeSecurityGroupEgress called directly with an apostrophe in the rule's description."""
    ec2 = client(aws, "ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    group = ec2.create_security_group(GroupName="g", Description="https out", VpcId=vpc)["GroupId"]
    ranges = [{"CidrIp": "0.0.0.0/0", "Description": "the hub's addresses"}]
    permission = {"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "IpRanges": ranges}
    return error_of(lambda: ec2.authorize_security_group_egress(GroupId=group, IpPermissions=[permission]))


# --- SageMaker, IAM, S3 -----------------------------------------------------------------------------


def current_instance_type(aws: LocalAws) -> object:
    """An endpoint config on ml.g5.xlarge: how creating it fails, if it does."""
    sagemaker = client(aws, "sagemaker")
    sagemaker.create_model(ModelName="m", ExecutionRoleArn=ROLE_ARN, PrimaryContainer={"Image": IMAGE})
    variant = {"VariantName": "v", "ModelName": "m", "InitialInstanceCount": 1, "InstanceType": "ml.g5.xlarge"}
    return error_of(lambda: sagemaker.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[variant]))


def isolated_model(aws: LocalAws) -> object:
    """A model with EnableNetworkIsolation: what SageMaker reports."""
    model = resource(
        "AWS::SageMaker::Model",
        ExecutionRoleArn=ROLE_ARN,
        PrimaryContainer={"Image": IMAGE},
        EnableNetworkIsolation=True,
    )
    create_stack(aws, "stack", resources(Model=model))
    sagemaker = client(aws, "sagemaker")
    (listed,) = sagemaker.list_models()["Models"]
    return sagemaker.describe_model(ModelName=listed["ModelName"])["EnableNetworkIsolation"]


def endpoint_without_data_capture(aws: LocalAws) -> object:
    """An endpoint whose config captures no data, and a config CloudFormation created for neither
    capture nor asynchronous inference: the DataCaptureConfig the endpoint and its config are
    described with, and the other config's DataCaptureConfig and AsyncInferenceConfig."""
    echo_endpoint(aws, "echo")
    variant = {"VariantName": "AllTraffic", "ModelName": "echo-config-model", "InstanceType": "ml.g5.xlarge",
               "InitialInstanceCount": 1}  # fmt: skip
    create_stack(
        aws, "stack", resources(Config=resource("AWS::SageMaker::EndpointConfig", ProductionVariants=[variant]))
    )
    sagemaker = client(aws, "sagemaker")
    ours = [c["EndpointConfigName"] for c in sagemaker.list_endpoint_configs()["EndpointConfigs"]]
    config, created = (sagemaker.describe_endpoint_config(EndpointConfigName=name) for name in sorted(ours))
    endpoint = sagemaker.describe_endpoint(EndpointName="echo")
    return [d.get(k) for d, k in [(endpoint, "DataCaptureConfig"), (config, "DataCaptureConfig"),
                                  (created, "DataCaptureConfig"), (created, "AsyncInferenceConfig")]]  # fmt: skip


def model_without_a_vpc(aws: LocalAws) -> object:
    """A model CloudFormation created without a VpcConfig: the VpcConfig it is described with."""
    model = resource("AWS::SageMaker::Model", ExecutionRoleArn=ROLE_ARN, PrimaryContainer={"Image": IMAGE})
    create_stack(aws, "stack", resources(Model=model))
    sagemaker = client(aws, "sagemaker")
    (listed,) = sagemaker.list_models()["Models"]
    return sagemaker.describe_model(ModelName=listed["ModelName"]).get("VpcConfig")


POLICY_ARN = "arn:aws:iam::123456789012:policy/read-models"


def role_with_managed_policy(aws: LocalAws) -> object:
    """A role with a managed policy: the policies attached once the stack is created, and
    the roles left once it is deleted."""
    iam = client(aws, "iam")
    # A policy of the account's own: the local AWS of these tests leaves AWS's out (faster).
    document = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]}
    iam.create_policy(PolicyName="read-models", PolicyDocument=json.dumps(document))
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
    }
    role = resource("AWS::IAM::Role", RoleName="r", AssumeRolePolicyDocument=trust, ManagedPolicyArns=[POLICY_ARN])
    create_stack(aws, "stack", resources(Role=role))
    attached = [p["PolicyArn"] for p in iam.list_attached_role_policies(RoleName="r")["AttachedPolicies"]]
    delete_stack(aws, "stack")
    return attached, [r["RoleName"] for r in iam.list_roles()["Roles"]]


def non_empty_bucket(aws: LocalAws) -> object:
    """A stack's bucket that holds an object when the stack is deleted: whether the deletion
    fails, and whether the bucket is still there."""
    create_stack(aws, "stack", resources(Bucket=resource("AWS::S3::Bucket", BucketName="bucket")))
    s3 = client(aws, "s3")
    s3.put_object(Bucket="bucket", Key="k", Body=b"x")
    failed = delete_stack(aws, "stack")
    return failed, [b["Name"] for b in s3.list_buckets()["Buckets"]]


# --- Failed updates, KMS, SSM, CloudTrail ------------------------------------------------------


def parameter(value: str, **more: object) -> dict[str, object]:
    return resource("AWS::SSM::Parameter", Type="String", Value=value, AllowedPattern="^[a-z]+$", **more)


def failed_update(aws: LocalAws) -> object:
    """An update that adds a parameter, replaces a log group and then sets a parameter to a
    value its pattern refuses: what ExecuteChangeSet answers, the stack's status, and what is
    left (the added parameter, the log groups, the refused parameter's value)."""
    create_stack(aws, "stack", {"Resources": {**log_group(1)["Resources"], "Check": parameter("ok", Name="/check")}})
    failed = update_stack(
        aws,
        "stack",
        {
            "Resources": {
                **log_group(3)["Resources"],
                "Extra": parameter("new", Name="/extra"),
                "Check": {**parameter("BAD", Name="/check"), "DependsOn": ["Extra", "Group"]},
            }
        },
    )
    ssm = client(aws, "ssm")
    names = [p["Name"] for p in ssm.describe_parameters()["Parameters"]]
    groups = sorted(g.get("retentionInDays") for g in client(aws, "logs").describe_log_groups()["logGroups"])
    return (
        failed,
        stack_status(aws, "stack"),
        "/extra" in names,
        groups,
        ssm.get_parameter(Name="/check")["Parameter"]["Value"],
    )


def key_with_tags(aws: LocalAws) -> object:
    """A key with tags and a key policy: whether the stack creates it, its tags, and its state
    after the stack is deleted."""
    policy = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "kms:*", "Resource": "*"}],
    }
    failed = create_stack(
        aws,
        "stack",
        resources(
            Key=resource(
                "AWS::KMS::Key", KeyPolicy=policy, Tags=[{"Key": "team", "Value": "ml"}], PendingWindowInDays=7
            )
        ),
    )
    if failed:
        return failed, None, None
    kms = client(aws, "kms")
    key_id = physical_ids(aws, "stack")["Key"]
    tags = {t["TagKey"]: t["TagValue"] for t in kms.list_resource_tags(KeyId=key_id)["Tags"]}
    delete_stack(aws, "stack")
    return None, tags, kms.describe_key(KeyId=key_id)["KeyMetadata"]["KeyState"]


def pattern_mismatch(aws: LocalAws) -> object:
    """PutParameter with a value its AllowedPattern refuses."""
    ssm = client(aws, "ssm")
    return error_of(lambda: ssm.put_parameter(Name="/p", Value="B", Type="String", AllowedPattern="^[a-z]+$"))


def unnamed_parameter(aws: LocalAws) -> object:
    """A parameter the template does not name, then updated: whether it is created, and after
    the update whether it kept its name and holds the new value."""
    failed = create_stack(aws, "stack", resources(P=parameter("one")))
    if failed:
        return failed, None, None
    name = physical_ids(aws, "stack")["P"]
    update_stack(aws, "stack", resources(P=parameter("two")))
    after = physical_ids(aws, "stack")["P"]
    return None, after == name, client(aws, "ssm").get_parameter(Name=after)["Parameter"]["Value"]


def lookup_events(aws: LocalAws) -> object:
    """CloudTrail's LookupEvents, which the CDK CLI calls after a failed deployment."""
    trail = client(aws, "cloudtrail")
    return error_of(lambda: trail.lookup_events()) or trail.lookup_events()["Events"]


def unpermitted_read(aws: LocalAws) -> object:
    """An object read with credentials of sts:AssumeRole for a role with no policy."""
    s3 = client(aws, "s3")
    s3.create_bucket(Bucket="bucket")
    s3.put_object(Bucket="bucket", Key="key", Body=b"x")
    (reader,) = assumed_role(aws, "s3")
    return error_of(lambda: reader.get_object(Bucket="bucket", Key="key"))


def assumed_role(aws: LocalAws, *services: str) -> list[Any]:
    """Clients of `services` signed with credentials of sts:AssumeRole for a role with no policy."""
    trust = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"AWS": "123456789012"}, "Action": "sts:AssumeRole"}]}  # fmt: skip
    iam = client(aws, "iam")
    role = iam.create_role(RoleName="nothing", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    creds = client(aws, "sts").assume_role(RoleArn=role, RoleSessionName="caller")["Credentials"]
    keys = {
        "aws_access_key_id": creds["AccessKeyId"],
        "aws_secret_access_key": creds["SecretAccessKey"],
        "aws_session_token": creds["SessionToken"],
    }
    return [boto3.client(s, endpoint_url=aws.endpoint, region_name=aws.region, **keys) for s in services]


def unpermitted_rule_change_and_description(aws: LocalAws) -> object:
    """An assumed role with no policy revoking a rule of a security group, then describing an
    endpoint: the errors (CDK's restrict-default-security-group and update-check handlers' calls)."""
    group = client(aws, "ec2").create_security_group(GroupName="g", Description="g")["GroupId"]
    ec2, sagemaker = assumed_role(aws, "ec2", "sagemaker")
    rule = [{"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}]
    revoked = error_of(lambda: ec2.revoke_security_group_egress(GroupId=group, IpPermissions=rule))
    return revoked, error_of(lambda: sagemaker.describe_endpoint(EndpointName="e"))


def function_from(aws: LocalAws, code: bytes) -> object:
    """A Node.js function created from `code`: the error, if CreateFunction fails."""
    role = client(aws, "iam").create_role(RoleName="fn", AssumeRolePolicyDocument=json.dumps(LAMBDA_TRUST))
    function = {"Runtime": "nodejs24.x", "Role": role["Role"]["Arn"], "Handler": "index.handler"}
    return error_of(lambda: client(aws, "lambda").create_function(FunctionName="f", Code={"ZipFile": code}, **function))


def function_invoked(aws: LocalAws) -> object:
    """A Node.js function invoked with {"n": 1}, whose handler answers n + 1: the function error
    Lambda reports, and the answer when there is none."""
    function_from(aws, zipped({"index.js": "exports.handler = async (e) => ({ n: e.n + 1 });"}))
    answer = client(aws, "lambda").invoke(FunctionName="f", Payload=b'{"n": 1}')
    error = answer.get("FunctionError")
    return error, None if error else json.loads(answer["Payload"].read())


def function_logging_config(aws: LocalAws) -> object:
    """A function given a LoggingConfig of its own group and JSON format: the LoggingConfig
    GetFunctionConfiguration returns."""
    role = client(aws, "iam").create_role(RoleName="fn", AssumeRolePolicyDocument=json.dumps(LAMBDA_TRUST))
    client(aws, "lambda").create_function(
        FunctionName="f",
        Runtime="nodejs24.x",
        Role=role["Role"]["Arn"],
        Handler="index.handler",
        Code={"ZipFile": zipped({"index.js": "exports.handler = async () => 1;"})},
        LoggingConfig={"LogGroup": "/stack/handlers", "LogFormat": "JSON"},
    )
    return client(aws, "lambda").get_function_configuration(FunctionName="f").get("LoggingConfig")


def log_group_arn(aws: LocalAws) -> object:
    """A stack whose SSM parameter holds its log group's Fn::GetAtt Arn: whether it names the
    group's streams (":*")."""
    template = resources(
        Logs=resource("AWS::Logs::LogGroup", LogGroupName="group"),
        Arn=resource("AWS::SSM::Parameter", Name="/arn", Type="String", Value=get_att("Logs", "Arn")),
    )
    create_stack(aws, "stack", template)
    return client(aws, "ssm").get_parameter(Name="/arn")["Parameter"]["Value"].endswith(":log-group:group:*")


def breaching_metric(aws: LocalAws) -> object:
    """An alarm on a metric's Sum over a minute, then a datapoint over its threshold and a
    minute of the clock: the alarm's state and the notifications a queue subscribed to its
    topic gets."""
    sns, sqs, cw = client(aws, "sns"), client(aws, "sqs"), client(aws, "cloudwatch")
    topic = sns.create_topic(Name="alarms")["TopicArn"]
    queue = subscribed_queue(aws, topic)
    dimensions = [{"Name": "EndpointName", "Value": "e"}]
    cw.put_metric_alarm(
        AlarmName="errors", Namespace="Test", MetricName="Errors", Statistic="Sum", Period=60, EvaluationPeriods=1,
        Threshold=1, ComparisonOperator="GreaterThanThreshold", AlarmActions=[topic], Dimensions=dimensions,
    )  # fmt: skip
    cw.put_metric_data(Namespace="Test", MetricData=[{"MetricName": "Errors", "Value": 5, "Dimensions": dimensions}])
    aws.clock.advance(60)
    (alarm,) = cw.describe_alarms(AlarmNames=["errors"])["MetricAlarms"]
    received = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])
    return alarm["StateValue"], [json.loads(json.loads(m["Body"])["Message"])["NewStateValue"] for m in received]


def mixed_case_endpoint(aws: LocalAws) -> object:
    """The ARN of an endpoint named in mixed case; whether a stack's endpoint (its physical id
    that ARN) is deleted with the stack, and the endpoints left."""
    echo_endpoint(aws, "Mixed-Case")
    sm = client(aws, "sagemaker")
    arn = sm.describe_endpoint(EndpointName="Mixed-Case")["EndpointArn"]
    create_stack(aws, "stack", echo_stack())
    deleted = delete_stack(aws, "stack")
    return arn, deleted, [e["EndpointName"] for e in sm.list_endpoints()["Endpoints"]]


def percentiles_of_a_minute(aws: LocalAws) -> object:
    """A hundred values in a minute: their p99 as GetMetricStatistics' extended statistic, and
    their p90 and trimmed mean as GetMetricData's."""
    cw = client(aws, "cloudwatch")
    start = aws.clock.now().replace(second=0, microsecond=0)
    data = [{"MetricName": "Latency", "Value": float(v), "Timestamp": start} for v in range(1, 101)]
    cw.put_metric_data(Namespace="Test", MetricData=data)
    window = {"StartTime": start, "EndTime": start + timedelta(minutes=1)}
    (point,) = cw.get_metric_statistics(
        Namespace="Test", MetricName="Latency", Period=60, ExtendedStatistics=["p99"], **window
    )["Datapoints"]  # fmt: skip
    queries = [
        {"Id": f"q{i}", "MetricStat": {"Metric": {"Namespace": "Test", "MetricName": "Latency"}, "Period": 60,
                                       "Stat": stat}}
        for i, stat in enumerate(("p90", "tm90"))
    ]  # fmt: skip
    failed = error_of(lambda: cw.get_metric_data(MetricDataQueries=queries, **window))
    results = failed or [
        r["Values"] for r in cw.get_metric_data(MetricDataQueries=queries, **window)["MetricDataResults"]
    ]
    return point.get("ExtendedStatistics"), results


def alarm_created_and_updated(aws: LocalAws) -> object:
    """An alarm's state once created, and after it was set to ALARM and its threshold updated."""
    cw = client(aws, "cloudwatch")
    alarm = {"AlarmName": "errors", "Namespace": "Test", "MetricName": "Errors", "Statistic": "Sum", "Period": 60,
             "EvaluationPeriods": 1, "ComparisonOperator": "GreaterThanThreshold"}  # fmt: skip
    cw.put_metric_alarm(**alarm, Threshold=1)
    created = cw.describe_alarms(AlarmNames=["errors"])["MetricAlarms"][0]["StateValue"]
    cw.set_alarm_state(AlarmName="errors", StateValue="ALARM", StateReason="forced")
    cw.put_metric_alarm(**alarm, Threshold=2)
    return created, cw.describe_alarms(AlarmNames=["errors"])["MetricAlarms"][0]["StateValue"]


def alarm_notifying_a_queue(aws: LocalAws) -> object:
    """An alarm forced to ALARM that notifies a topic (its default policy) a queue is subscribed
    to: the messages the queue gets, and the alarm's action history."""
    sns, sqs, cw = client(aws, "sns"), client(aws, "sqs"), client(aws, "cloudwatch")
    topic = sns.create_topic(Name="alarms")["TopicArn"]
    queue = subscribed_queue(aws, topic)
    cw.put_metric_alarm(
        AlarmName="errors", Namespace="Test", MetricName="Errors", Statistic="Sum", Period=60, EvaluationPeriods=1,
        Threshold=1, ComparisonOperator="GreaterThanThreshold", AlarmActions=[topic],
    )  # fmt: skip
    cw.set_alarm_state(AlarmName="errors", StateValue="ALARM", StateReason="forced")
    received = len(sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", []))
    history = error_of(lambda: cw.describe_alarm_history(AlarmName="errors")) or [
        h["HistorySummary"] for h in cw.describe_alarm_history(AlarmName="errors", ScanBy="TimestampAscending")[
            "AlarmHistoryItems"]
    ]  # fmt: skip
    return received, history


# --- SageMaker hosting: endpoints that run their container -------------------------------------


def echo_processes() -> int:
    return sum("echo_image.py" in p.cmdline for p in running_containers())


def endpoint_lifecycle(aws: LocalAws) -> object:
    """An endpoint whose container answers /ping half a second after it starts, and one whose
    container exits at once: the first's status at once and once settled, how many containers
    run then and after it is deleted; the second's status once settled."""
    echo_endpoint(aws, "echo", {"ECHO_PING_AFTER_S": "0.5"})
    first = endpoint_status(aws, "echo")
    settled = endpoint_status(aws, "echo", settle=True)
    running = echo_processes()
    client(aws, "sagemaker").delete_endpoint(EndpointName="echo")
    after_delete = echo_processes()
    echo_endpoint(aws, "broken", {"ECHO_EXIT_CODE": "3"})
    return first, settled, running, after_delete, endpoint_status(aws, "broken", settle=True)


def echo_stack(**environment: str) -> Template:
    model = resource(
        "AWS::SageMaker::Model",
        ExecutionRoleArn=ROLE_ARN,
        PrimaryContainer={"Image": ECHO_IMAGE, "Environment": environment},
    )
    config = resource(
        "AWS::SageMaker::EndpointConfig",
        ProductionVariants=[
            {
                "VariantName": "AllTraffic",
                "ModelName": {"Fn::GetAtt": ["Model", "ModelName"]},
                "InstanceType": "ml.g5.xlarge",
                "InitialInstanceCount": 1,
                "ContainerStartupHealthCheckTimeoutInSeconds": 60,
            }
        ],
    )
    endpoint = resource("AWS::SageMaker::Endpoint", EndpointConfigName={"Fn::GetAtt": ["Config", "EndpointConfigName"]})
    return resources(Model=model, Config=config, Endpoint=endpoint)


def endpoint_in_a_stack(aws: LocalAws) -> object:
    """A stack whose endpoint's container answers /ping after two seconds: the endpoint's
    status when the stack is created; and whether a stack whose container exits is created.
    (Two seconds, not less: on a loaded host stock moto's stack creation and the status call
    took over half a second, and the endpoint was InService already.)"""
    create_stack(aws, "stack", echo_stack(ECHO_PING_AFTER_S="2"))
    created = endpoint_status(aws, endpoint_named(aws, physical_ids(aws, "stack")["Endpoint"]))
    return created, create_stack(aws, "broken", echo_stack(ECHO_EXIT_CODE="3"))


def invocation(aws: LocalAws) -> object:
    """InvokeEndpoint with a body, content type, Accept and custom attributes: what the
    container saw and the attributes it sent back; then a request it answers with 400, and an
    endpoint that does not exist."""
    echo_endpoint(aws, "echo")
    endpoint_status(aws, "echo", settle=True)
    runtime = client(aws, "sagemaker-runtime")
    answer = runtime.invoke_endpoint(
        EndpointName="echo", Body=b'{"q": 1}', ContentType="application/x-q", Accept="text/x-a", CustomAttributes="t=1"
    )
    text = answer["Body"].read().decode()
    seen = json.loads(text) if text.startswith("{") else {"body": text}
    passed = [seen.get(k) for k in ("body", "content_type", "accept", "custom_attributes")]
    rejected = error_of(lambda: runtime.invoke_endpoint(EndpointName="echo", Body=b'{"status": 400}'))
    unknown = error_of(lambda: runtime.invoke_endpoint(EndpointName="none", Body=b"{}"))
    return passed, answer.get("CustomAttributes"), rejected, unknown


def streamed_invocation(aws: LocalAws) -> object:
    """InvokeEndpointWithResponseStream of an answer sent in three chunks, Accept passed as
    X-Amzn-SageMaker-Accept: the parts received, or the error code of the call."""
    echo_endpoint(aws, "echo")
    endpoint_status(aws, "echo", settle=True)
    runtime = client(aws, "sagemaker-runtime")
    received: list[bytes] = []

    def stream() -> None:
        answer = runtime.invoke_endpoint_with_response_stream(
            EndpointName="echo", Body=b'{"parts": ["a", "b", "c"]}', ContentType="application/json"
        )
        received.extend(event["PayloadPart"]["Bytes"] for event in answer["Body"])

    return error_of(stream), b"".join(received)


def binary_and_form_bodies(aws: LocalAws) -> object:
    """InvokeEndpoint with a body that is not UTF-8 (echoed back as it came) and one of a form's
    content type: the error codes, and whether the bytes came back as sent."""
    echo_endpoint(aws, "echo")
    endpoint_status(aws, "echo", settle=True)
    runtime = client(aws, "sagemaker-runtime")
    sent, received = bytes(range(256)), []

    def binary() -> None:
        answer = runtime.invoke_endpoint(EndpointName="echo", Body=sent, ContentType="application/x-echo-raw")
        received.append(answer["Body"].read())

    failed = error_of(binary)
    form = error_of(
        lambda: runtime.invoke_endpoint(
            EndpointName="echo", Body=b"EndpointName=else", ContentType="application/x-www-form-urlencoded"
        )
    )
    return failed, received == [sent], form


def runtime_requests_past_the_model(aws: LocalAws) -> object:
    """InvokeEndpoint with CustomAttributes of 1,025 characters, and with a body one byte past 6 MB."""
    echo_endpoint(aws, "echo")
    endpoint_status(aws, "echo", settle=True)
    runtime = client(aws, "sagemaker-runtime")
    attributes = error_of(lambda: runtime.invoke_endpoint(EndpointName="echo", Body=b"{}", CustomAttributes="a" * 1025))
    too_large = error_of(lambda: runtime.invoke_endpoint(EndpointName="echo", Body=b"x" * (6 * 1024 * 1024 + 1)))
    return attributes, too_large


def an_error_of_the_emulator(aws: LocalAws) -> object:
    """A request the emulator fails on (a body that is not UTF-8, with the patch that reads bodies
    as bytes reverted): the error code the caller gets, and the faults the local AWS kept."""
    from local_aws.host import HOST

    echo_endpoint(aws, "echo")
    endpoint_status(aws, "echo", settle=True)
    runtime = client(aws, "sagemaker-runtime")
    HOST.faults.take()
    with patches.without("runtime_bodies_are_bytes"):
        failed = error_of(lambda: runtime.invoke_endpoint(EndpointName="echo", Body=b"\xff"))
    return failed, len(HOST.faults.take())


def an_answer_outside_its_shape(aws: LocalAws) -> object:
    """A model whose execution role moto holds as no ARN (put straight into its backend): the role
    DescribeModel answers, and the faults the local AWS kept."""
    from moto.sagemaker.models import sagemaker_backends

    from local_aws.host import HOST

    sm = client(aws, "sagemaker")
    sm.create_model(ModelName="model", ExecutionRoleArn=ROLE_ARN, PrimaryContainer={"Image": IMAGE})
    sagemaker_backends[aws.account][aws.region]._models["model"].execution_role_arn = "no role"
    HOST.faults.take()
    role = sm.describe_model(ModelName="model")["ExecutionRoleArn"]
    return role, [f.error.split(":")[0] for f in HOST.faults.take()]


# --- Inference components and async inference ----------------------------------------------------


def config_without_model(aws: LocalAws) -> object:
    """An endpoint config for inference components (its variant names no model): whether it
    is created, and the status of an endpoint on it."""
    sm = client(aws, "sagemaker")
    refused = error_of(
        lambda: sm.create_endpoint_config(
            EndpointConfigName="ic", ProductionVariants=[component_variant()], ExecutionRoleArn=ROLE_ARN
        )
    )
    if refused:
        return refused, None
    sm.create_endpoint(EndpointName="ic", EndpointConfigName="ic")
    return refused, endpoint_status(aws, "ic", settle=True)


def component_lifecycle(aws: LocalAws) -> object:
    """A stack with an inference component on the echo image: the component's status, the
    version that answers an invocation naming it, an invocation naming none; after an update
    to a new model, the version that answers; after deleting the stack, the echo containers."""
    created = create_stack(aws, "ic", component_stack("1"))
    sm, runtime = client(aws, "sagemaker"), client(aws, "sagemaker-runtime")
    status = error_of(lambda: sm.describe_inference_component(InferenceComponentName="echo-ic"))
    if status is None:
        status = sm.describe_inference_component(InferenceComponentName="echo-ic")["InferenceComponentStatus"]
    endpoint = endpoint_named(aws, physical_ids(aws, "ic")["Endpoint"])

    def version() -> object:
        def call() -> object:
            answer = runtime.invoke_endpoint(EndpointName=endpoint, Body=b"{}", InferenceComponentName="echo-ic")
            return json.loads(answer["Body"].read()).get("version")

        failed = error_of(call)
        return failed if failed else call()

    first, unnamed = version(), error_of(lambda: runtime.invoke_endpoint(EndpointName=endpoint, Body=b"{}"))
    updated = update_stack(aws, "ic", component_stack("2"))
    second = version()
    delete_stack(aws, "ic")
    return created, status, first, unnamed, updated, second, echo_processes()


VARIANT = {
    "ServiceNamespace": "sagemaker",
    "ResourceId": "endpoint/scaled/variant/AllTraffic",
    "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
}


def scalable_target_role(aws: LocalAws) -> object:
    """A variant's scalable target registered without a RoleARN: the RoleARN it is described with."""
    scaling = client(aws, "application-autoscaling")
    scaling.register_scalable_target(**VARIANT, MinCapacity=1, MaxCapacity=4)
    (target,) = scaling.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
    return target.get("RoleARN")


def raw_answer_of_a_page(aws: LocalAws) -> object:
    """DescribeScalableTargets of a single page, as sent (botocore drops a null member): the
    members it writes at its top, and whether any is null."""
    scaling = client(aws, "application-autoscaling")
    scaling.register_scalable_target(**VARIANT, MinCapacity=1, MaxCapacity=4)
    sent: list[dict[str, Any]] = []
    scaling.meta.events.register(
        "before-parse", lambda response_dict, **_: sent.append(json.loads(response_dict["body"]))
    )
    scaling.describe_scalable_targets(ServiceNamespace="sagemaker")
    return sorted(sent[0]), "null" in json.dumps(sent[0])


SERVICE_LINKED_ROLE = (
    "arn:aws:iam::123456789012:role/aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
    "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"
)


def tracking_alarms(aws: LocalAws) -> object:
    """A target tracking policy of a variant's instances on invocations per instance: the alarms
    it made (metric, comparison, threshold, datapoints out of periods), and its Alarms."""
    scaling = client(aws, "application-autoscaling")
    scaling.register_scalable_target(**VARIANT, MinCapacity=1, MaxCapacity=4)
    scaling.put_scaling_policy(
        **VARIANT, PolicyName="track", PolicyType="TargetTrackingScaling",
        TargetTrackingScalingPolicyConfiguration={
            "TargetValue": 10.0,
            "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"},
        },
    )  # fmt: skip
    alarms = client(aws, "cloudwatch").describe_alarms()["MetricAlarms"]
    made = sorted((a["MetricName"], a["ComparisonOperator"], a["Threshold"], a["DatapointsToAlarm"],
                   a["EvaluationPeriods"], [d["Name"] for d in a["Dimensions"]]) for a in alarms)  # fmt: skip
    (policy,) = scaling.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"]
    return made, len(policy["Alarms"])


def policy_run_by_its_alarm(aws: LocalAws) -> object:
    """A step policy adding 2 instances to an endpoint's variant, run by its alarm once a minute
    of data breaches it: the variant's desired instance count, and the scaling activities."""
    echo_endpoint(aws, "scaled")
    endpoint_status(aws, "scaled", settle=True)
    scaling, cw = client(aws, "application-autoscaling"), client(aws, "cloudwatch")
    scaling.register_scalable_target(**VARIANT, MinCapacity=1, MaxCapacity=4)
    arn = scaling.put_scaling_policy(
        **VARIANT, PolicyName="step", PolicyType="StepScaling",
        StepScalingPolicyConfiguration={
            "AdjustmentType": "ChangeInCapacity", "Cooldown": 60,
            "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 2}],
        },
    )["PolicyARN"]  # fmt: skip
    cw.put_metric_alarm(
        AlarmName="queue", Namespace="Test", MetricName="Queue", Statistic="Maximum", Period=60, EvaluationPeriods=1,
        Threshold=5, ComparisonOperator="GreaterThanOrEqualToThreshold", AlarmActions=[arn],
    )  # fmt: skip
    cw.put_metric_data(Namespace="Test", MetricData=[{"MetricName": "Queue", "Value": 7}])
    aws.clock.advance(60)
    (variant,) = client(aws, "sagemaker").describe_endpoint(EndpointName="scaled")["ProductionVariants"]
    described = error_of(lambda: scaling.describe_scaling_activities(ServiceNamespace="sagemaker")) or [
        a["Description"] for a in scaling.describe_scaling_activities(ServiceNamespace="sagemaker")["ScalingActivities"]
    ]
    return variant["DesiredInstanceCount"], described


def variant_scaled_out(aws: LocalAws) -> object:
    """An endpoint's variant set to 2 instances: its current instance count once it settles, and
    how many containers 20 invocations reached."""
    echo_endpoint(aws, "scaled")
    endpoint_status(aws, "scaled", settle=True)
    sm, runtime = client(aws, "sagemaker"), client(aws, "sagemaker-runtime")
    sm.update_endpoint_weights_and_capacities(
        EndpointName="scaled", DesiredWeightsAndCapacities=[{"VariantName": "AllTraffic", "DesiredInstanceCount": 2}]
    )
    endpoint_status(aws, "scaled", settle=True)
    (variant,) = sm.describe_endpoint(EndpointName="scaled")["ProductionVariants"]
    answered = {
        json.loads(runtime.invoke_endpoint(EndpointName="scaled", Body=b"{}")["Body"].read()).get("pid")
        for _ in range(20)
    }
    return variant.get("CurrentInstanceCount"), len(answered)


def invocations_measured(aws: LocalAws) -> object:
    """Two invocations of an echo endpoint, one the model answers 503: the sums SageMaker's
    metrics of the endpoint's variant hold."""
    echo_endpoint(aws, "measured")
    endpoint_status(aws, "measured", settle=True)
    runtime, cw = client(aws, "sagemaker-runtime"), client(aws, "cloudwatch")
    runtime.invoke_endpoint(EndpointName="measured", Body=b"{}")
    error_of(lambda: runtime.invoke_endpoint(EndpointName="measured", Body=b'{"status": 503}'))
    dimensions = [{"Name": "EndpointName", "Value": "measured"}, {"Name": "VariantName", "Value": "AllTraffic"}]
    found = {}
    for name in ("Invocations", "Invocation5XXErrors", "InvocationModelErrors", "Invocation4XXErrors"):
        stat = {"Metric": {"Namespace": "AWS/SageMaker", "MetricName": name, "Dimensions": dimensions},
                "Period": 60, "Stat": "Sum"}  # fmt: skip
        now = aws.clock.now()
        (result,) = cw.get_metric_data(
            MetricDataQueries=[{"Id": "q", "MetricStat": stat}], StartTime=now - timedelta(minutes=5),
            EndTime=now + timedelta(minutes=1),
        )["MetricDataResults"]  # fmt: skip
        found[name] = sum(result["Values"])
    return found


def copy_count_target(aws: LocalAws) -> object:
    """Registering an inference component's copy count as a scalable target."""
    scaling = client(aws, "application-autoscaling")
    return error_of(
        lambda: scaling.register_scalable_target(
            ServiceNamespace="sagemaker",
            ResourceId="inference-component/echo-ic",
            ScalableDimension="sagemaker:inference-component:DesiredCopyCount",
            MinCapacity=0,
            MaxCapacity=2,
        )
    )


def async_invocation(aws: LocalAws) -> object:
    """An async endpoint on the echo image: InvokeEndpointAsync of an input in S3, then what is
    written to the output location, what the success topic's subscriber (an SQS queue)
    received; a request the container refuses, and where its failure goes."""
    s3, sqs, sns = client(aws, "s3"), client(aws, "sqs"), client(aws, "sns")
    s3.create_bucket(Bucket="async-io")
    s3.put_object(Bucket="async-io", Key="input/1.json", Body=b'{"q": 1}')
    s3.put_object(Bucket="async-io", Key="input/2.json", Body=b'{"status": 400}')
    topic = sns.create_topic(Name="done")["TopicArn"]
    queue = sqs.create_queue(QueueName="done")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn, Attributes={"RawMessageDelivery": "true"})
    echo_config(aws, "async-config")
    sm = client(aws, "sagemaker")
    config = sm.describe_endpoint_config(EndpointConfigName="async-config")
    sm.create_endpoint_config(
        EndpointConfigName="async",
        ProductionVariants=config["ProductionVariants"],
        AsyncInferenceConfig={
            "OutputConfig": {
                "S3OutputPath": "s3://async-io/output/",
                "S3FailurePath": "s3://async-io/failure/",
                "NotificationConfig": {"SuccessTopic": topic, "ErrorTopic": topic},
            }
        },
    )
    sm.create_endpoint(EndpointName="async", EndpointConfigName="async")
    endpoint_status(aws, "async", settle=True)
    runtime = client(aws, "sagemaker-runtime")
    answers = []
    for name in ("1", "2"):
        answer = runtime.invoke_endpoint_async(
            EndpointName="async", InputLocation=f"s3://async-io/input/{name}.json", ContentType="application/json"
        )
        answers.append(answer)
    found: list[object] = []
    for answer in answers:
        locations = (answer.get("OutputLocation"), answer.get("FailureLocation"))
        # clock: a generous wait for an answer written within moments; its expiry only ends a
        # wait for one that never comes (the caller asserts what was found).
        deadline = time.monotonic() + 60
        written = None
        while written is None and time.monotonic() < deadline:  # clock: the same wait
            for location in locations:
                bucket, _, key = str(location).removeprefix("s3://").partition("/")
                if error_of(lambda b=bucket, k=key: s3.head_object(Bucket=b, Key=k)) is None:
                    written = (key.split("/")[0], s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode())
            time.sleep(0.1)
        found.append(written and (written[0], json.loads(written[1]).get("body") if written[0] == "output" else "!"))
    messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])
    statuses = sorted(json.loads(m["Body"]).get("invocationStatus", "") for m in messages)
    return found, statuses


def auto_deleted_bucket(aws: LocalAws) -> object:
    """A stack with a bucket and CDK's auto-delete-objects resource, the bucket holding an
    object: whether the stack is deleted, and which buckets remain."""
    s3 = client(aws, "s3")
    template = resources(
        Bucket=resource("AWS::S3::Bucket", BucketName="results"),
        Empty={
            "Type": "Custom::S3AutoDeleteObjects",
            "Properties": {"ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:provider",
                           "BucketName": {"Ref": "Bucket"}},
            "DependsOn": ["Bucket"],
        },
    )  # fmt: skip
    created = create_stack(aws, "results", template)
    s3.put_object(Bucket="results", Key="output/1.out", Body=b"answer")
    deleted = delete_stack(aws, "results")
    return created, deleted, [b["Name"] for b in s3.list_buckets()["Buckets"]]


# --- The patches and their scenarios ------------------------------------------------------------------

SCENARIOS: dict[str, Scenario] = {
    "change_sets_belong_to_their_stack": Scenario(
        change_set_of_a_stack, aws=("first", "ChangeSetNotFound"), stock=("second", "ValidationError")
    ),
    "delete_missing_change_set_succeeds": Scenario(
        delete_missing_change_set, aws=None, stock="500 Internal Server Error"
    ),
    "executed_change_set_updates_the_stack": Scenario(outputs_after_change_set, aws={"Answer": "42"}, stock={}),
    "parameters_are_the_given_ones": Scenario(
        ssm_parameter_reused,
        aws=("FAILED", {"Image": "ami-1"}),
        stock=("CREATE_COMPLETE", "500 Internal Server Error"),
    ),
    "unmodifiable_resources_are_replaced": Scenario(log_group_replaced, aws=([3], 3, 3), stock=([1], None, None)),
    "dependents_of_replaced_resources_are_updated": Scenario(dependent_of_replaced, aws=True, stock=False),
    "json_answers_leave_out_members_without_a_value": Scenario(
        raw_answer_of_a_page, aws=(["ScalableTargets"], False), stock=(["NextToken", "ScalableTargets"], True)
    ),
    "scalable_targets_name_their_service_linked_role": Scenario(
        scalable_target_role, aws=SERVICE_LINKED_ROLE, stock=None
    ),
    "missing_resource_types_exist": Scenario(
        autoscaling_and_alarm,
        # Three alarms of the template, and the two its target tracking policy makes.
        aws=((1, 1, 5), [("e", "FILL(m, 0)", True), ("m", "Up", False)], ["vllm_num_requests_waiting >= 1"], (0, 0, 0)),
        stock=((0, 0, 0), [], [], (0, 0, 0)),
    ),
    "resources_moto_lacks_are_listed": Scenario(
        listed_resources,
        aws=[("Handle", "AWS::CloudFormation::WaitConditionHandle")] * 2,
        stock=[("", ""), (None, None)],
    ),
    "custom_resources_invoke_their_function": Scenario(
        custom_resource_call, aws=(None, "CREATE_COMPLETE", ["k"], []), stock=(None, "CREATE_IN_PROGRESS")
    ),
    "stack_resources_are_deleted_in_dependency_order": Scenario(deletion_order, aws=True, stock=False),
    "resource_properties_are_validated": Scenario(
        apostrophe_in_a_rule_description,
        aws=("ROLLBACK_COMPLETE", "InvalidParameterValue"),
        stock=("CREATE_COMPLETE", None),
    ),
    "api_requests_are_validated": Scenario(
        apostrophe_given_to_authorize_egress, aws="InvalidParameterValue", stock=None
    ),
    "security_group_egress_is_applied": Scenario(
        security_group_egress, aws=[("tcp", 443, 443, ["0.0.0.0/0"])], stock=[("-1", None, None, ["0.0.0.0/0"])]
    ),
    "vpc_resources_are_deleted": Scenario(
        vpc_teardown,
        aws=(None, {}),
        stock=(
            "DependencyViolation",
            {"vpcs": 1, "internet_gateways": 1, "route_tables": 2, "nat_gateways": 1, "addresses": 1, "flow_logs": 1},
        ),
    ),
    "instance_properties_are_applied": Scenario(
        instance_launched, aws=(True, True, "required", "enabled"), stock=(False, False, "optional", "disabled")
    ),
    "current_instance_types_are_accepted": Scenario(current_instance_type, aws=None, stock="ValidationException"),
    "model_network_isolation_is_kept": Scenario(isolated_model, aws=True, stock=False),
    "models_without_a_vpc_describe_none": Scenario(model_without_a_vpc, aws=None, stock={}),
    "endpoint_configs_are_described_as_aws_does": Scenario(
        endpoint_without_data_capture, aws=[None, None, None, None], stock=[{}, {}, {}, {}]
    ),
    "role_managed_policies_are_attached": Scenario(role_with_managed_policy, aws=([POLICY_ARN], []), stock=([], [])),
    "endpoints_run_their_container": Scenario(
        endpoint_lifecycle,
        aws=("Creating", "InService", 1, 0, "Failed"),
        stock=("InService", "InService", 0, 0, "InService"),
    ),
    "stack_waits_for_endpoints": Scenario(
        endpoint_in_a_stack, aws=("InService", "ValidationError"), stock=("Creating", None)
    ),
    "invocations_reach_the_container": Scenario(
        invocation,
        aws=(['{"q": 1}', "application/x-q", "text/x-a", "t=1"], "echoed=t=1", "ModelError", "ValidationError"),
        stock=(["body", None, None, None], "custom_attributes", None, None),
        builds_on=("runtime_bodies_are_bytes",),
    ),
    "runtime_bodies_are_bytes": Scenario(binary_and_form_bodies, aws=(None, True, None), stock=("500", False, "404")),
    "runtime_requests_are_validated": Scenario(
        runtime_requests_past_the_model, aws=("ValidationError", "413"), stock=(None, None)
    ),
    "answers_are_checked_against_their_shapes": Scenario(
        an_answer_outside_its_shape, aws=("no role", ["ShapeViolation"]), stock=("no role", [])
    ),
    "internal_errors_answer_in_the_protocol": Scenario(
        an_error_of_the_emulator, aws=("InternalFailure", 1), stock=("500", 0)
    ),
    "streamed_invocations_reach_the_container": Scenario(streamed_invocation, aws=(None, b"abc"), stock=("404", b"")),
    "failed_updates_roll_back": Scenario(
        failed_update,
        aws=(None, "UPDATE_ROLLBACK_COMPLETE", False, [1], "ok"),
        stock=("ParameterPatternMismatchException", "CREATE_COMPLETE", True, [3], "ok"),
    ),
    "keys_follow_their_template": Scenario(
        key_with_tags, aws=(None, {"team": "ml"}, "PendingDeletion"), stock=("500 Internal Server Error", None, None)
    ),
    "parameter_values_match_their_pattern": Scenario(
        pattern_mismatch, aws="ParameterPatternMismatchException", stock=None
    ),
    "parameters_are_named_and_updated_in_place": Scenario(
        unnamed_parameter, aws=(None, True, "two"), stock=("500 Internal Server Error", None, None)
    ),
    "lookup_events_answers": Scenario(lookup_events, aws=[], stock="500"),
    "assumed_roles_are_evaluated_by_s3": Scenario(unpermitted_read, aws="AccessDenied", stock=None),
    "assumed_roles_are_evaluated_by_ec2_and_sagemaker": Scenario(
        unpermitted_rule_change_and_description,
        aws=("UnauthorizedOperation", "AccessDeniedException"),
        stock=(None, "ValidationException"),
    ),
    "log_group_arns_name_their_streams": Scenario(log_group_arn, aws=True, stock=False),
    "functions_need_a_non_empty_zip": Scenario(
        lambda aws: function_from(aws, zipped({})), aws="InvalidParameterValueException", stock=None
    ),
    "functions_run_their_code": Scenario(function_invoked, aws=(None, {"n": 2}), stock=("Handled", None)),
    "function_configuration_names_its_logging_config": Scenario(
        function_logging_config,
        aws={
            "LogGroup": "/stack/handlers",
            "LogFormat": "JSON",
            "ApplicationLogLevel": "INFO",
            "SystemLogLevel": "INFO",
        },
        stock=None,
    ),
    "hosting_arns_are_lower_cased": Scenario(
        mixed_case_endpoint,
        aws=("arn:aws:sagemaker:us-east-1:123456789012:endpoint/mixed-case", None, ["Mixed-Case"]),
        stock=("arn:aws:sagemaker:us-east-1:123456789012:endpoint/Mixed-Case", None, ["Mixed-Case"]),
    ),
    "target_tracking_policies_make_their_alarms": Scenario(
        tracking_alarms,
        aws=(
            [
                ("InvocationsPerInstance", "GreaterThanThreshold", 10.0, 3, 3, ["EndpointName", "VariantName"]),
                ("InvocationsPerInstance", "LessThanThreshold", 9.0, 15, 15, ["EndpointName", "VariantName"]),
            ],
            2,
        ),
        stock=([], 0),
    ),
    "scaling_policies_change_capacity": Scenario(
        policy_run_by_its_alarm, aws=(3, ["Setting desired instance count to 3."]), stock=(1, "500")
    ),
    "extended_statistics_are_computed": Scenario(
        percentiles_of_a_minute, aws=({"p99": 99.0}, [[90.0], [45.5]]), stock=(None, "500")
    ),
    "capacity_changes_run_containers": Scenario(variant_scaled_out, aws=(2, 2), stock=(2, 1)),
    "sagemaker_publishes_its_metrics": Scenario(
        invocations_measured,
        aws={"Invocations": 2.0, "Invocation5XXErrors": 1.0, "InvocationModelErrors": 1.0, "Invocation4XXErrors": 0.0},
        stock={"Invocations": 0, "Invocation5XXErrors": 0, "InvocationModelErrors": 0, "Invocation4XXErrors": 0},
    ),
    "alarms_are_evaluated": Scenario(breaching_metric, aws=("ALARM", ["ALARM"]), stock=("INSUFFICIENT_DATA", [])),
    "new_alarms_have_insufficient_data": Scenario(
        alarm_created_and_updated, aws=("INSUFFICIENT_DATA", "ALARM"), stock=("OK", "OK")
    ),
    "alarm_actions_run": Scenario(
        alarm_notifying_a_queue,
        aws=(
            1,
            [
                "Alarm updated from INSUFFICIENT_DATA to ALARM",
                "Successfully executed action arn:aws:sns:us-east-1:123456789012:alarms",
            ],
        ),
        stock=(0, "500"),
    ),
    "variants_of_inference_components_name_no_model": Scenario(
        config_without_model, aws=(None, "InService"), stock=("500", None)
    ),
    "inference_components_run_their_container": Scenario(
        component_lifecycle,
        aws=(None, "InService", "1", "ValidationError", None, "2", 0),
        stock=(None, "500", "ValidationError", "ValidationError", None, "ValidationError", 0),
    ),
    "inference_component_copies_scale": Scenario(copy_count_target, aws=None, stock="ValidationException"),
    "async_invocations_answer_through_s3": Scenario(
        async_invocation,
        aws=([("output", '{"q": 1}'), ("failure", "!")], ["Completed", "Failed"]),
        # Stock moto writes canned answers ({"default": "response"}) to a bucket of its own.
        stock=([("response.json", "!"), ("response.json", "!")], []),
    ),
    "auto_deleted_buckets_are_emptied": Scenario(
        # Without it, the local AWS invokes the provider's function (custom_resources_invoke_their_function),
        # which this stack does not have: the creation fails.
        auto_deleted_bucket,
        aws=(None, None, []),
        stock=("500 Internal Server Error", "BucketNotEmpty", ["results"]),
    ),
    "non_empty_buckets_are_not_deleted": Scenario(
        non_empty_bucket, aws=("BucketNotEmpty", ["bucket"]), stock=(None, ["bucket"])
    ),
}


def test_every_patch_has_a_scenario() -> None:
    assert set(SCENARIOS) == {p.name for p in patches.PATCHES}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_tells_aws_from_stock_moto(name: str) -> None:
    assert SCENARIOS[name].aws != SCENARIOS[name].stock


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_patch_restores_what_aws_does(aws: LocalAws, name: str) -> None:
    scenario = SCENARIOS[name]
    aws.reset()
    assert scenario.run(aws) == scenario.aws
    aws.reset()
    # Stock moto's failures are its HTML pages, its answers its own shapes (and no fault of the local
    # AWS's to keep).
    with contextlib.ExitStack() as reverted:
        stock = ("internal_errors_answer_in_the_protocol", "answers_are_checked_against_their_shapes")
        for patch_name in (name, *stock, *scenario.builds_on):
            reverted.enter_context(patches.without(patch_name))
        assert scenario.run(aws) == scenario.stock


# --- Reverting a patch ---------------------------------------------------------------------------------


def own_attributes(places: list[tuple[object, str]]) -> list[object]:
    return [vars(owner).get(name) for owner, name in places]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_revert_puts_back_what_the_patch_replaced(name: str) -> None:
    patches.apply()
    places = find(name).replaced
    assert places
    patched = own_attributes(places)
    with patches.without(name):
        stock = own_attributes(places)
    assert all(s is not p for s, p in zip(stock, patched, strict=True))
    assert find(name).installed
    with patches.without(name):
        assert all(a is b for a, b in zip(own_attributes(places), stock, strict=True))


def test_a_server_routes_as_the_patches_now_installed(aws: LocalAws) -> None:
    # moto's dispatcher builds a service's routes once, from its url paths of that moment: the
    # runtime's app built while its paths were stock's kept them, and a streamed invocation
    # found no route (HTTP 404) once the patch was back, in whichever test came next.
    aws.reset()
    with patches.without("runtime_bodies_are_bytes"):
        runtime = client(aws, "sagemaker-runtime")
        assert error_of(lambda: runtime.invoke_endpoint_with_response_stream(EndpointName="none", Body=b"{}")) == "404"
    assert streamed_invocation(aws) == (None, b"abc")


def test_a_second_patch_of_the_same_attribute_is_refused() -> None:
    patches.apply()
    patched = vars(FakeEndpointConfig)["validate_instance_type"]
    # Reverting one of two patches that replaced one attribute would drop the other's.
    intruder = Patch(
        name="intruder", restores="", installer=lambda: replace(FakeEndpointConfig, "validate_instance_type", None)
    )
    with pytest.raises(RuntimeError, match="already replaced by the patch current_instance_types_are_accepted"):
        intruder.install()
    assert not intruder.installed
    assert vars(FakeEndpointConfig)["validate_instance_type"] is patched


def test_a_replacement_outside_a_patch_is_refused() -> None:
    class Owner:
        attribute = "moto's"

    with pytest.raises(RuntimeError, match="outside a patch"):
        replace(Owner, "attribute", "ours")
    assert Owner.attribute == "moto's"


def test_an_unknown_patch_cannot_be_left_out() -> None:
    with pytest.raises(KeyError, match="no patch named 'nope'"), patches.without("nope"):
        pass
