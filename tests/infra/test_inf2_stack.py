"""Inf2Stack: network, instance, volume, metadata, role and outputs."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from aws_cdk.assertions import Match

from tests.infra.helpers import Synthesized, actions_of, policy_statements, resources_of

EXISTING_VPC = {
    "inf2.vpc_id": "vpc-0123456789abcdef0",
    "inf2.subnet_id": "subnet-0a1b2c3d",
    "inf2.availability_zone": "us-east-1a",
}


@pytest.fixture(scope="module")
def default(synth: Callable[..., Synthesized]) -> Synthesized:
    return synth()


def test_new_vpc_with_private_subnets_and_flow_logs(default: Synthesized) -> None:
    template = default.template("Inf2Stack")
    template.resource_count_is("AWS::EC2::VPC", 1)
    template.has_resource_properties("AWS::EC2::VPC", {"CidrBlock": "10.42.0.0/16"})
    template.resource_count_is("AWS::EC2::NatGateway", 1)
    template.has_resource_properties("AWS::EC2::FlowLog", {"ResourceType": "VPC", "TrafficType": "ALL"})


def test_only_the_nat_gateway_is_public(default: Synthesized) -> None:
    template = default.template_json("Inf2Stack")
    subnets = resources_of(template, "AWS::EC2::Subnet").values()
    # Public subnets hold the NAT gateway alone: nothing launched there gets a public address.
    assert [s["Properties"]["MapPublicIpOnLaunch"] for s in subnets] == [False] * 4
    # The one public address is the NAT gateway's.
    [address] = resources_of(template, "AWS::EC2::EIP")
    [nat] = resources_of(template, "AWS::EC2::NatGateway").values()
    assert nat["Properties"]["AllocationId"] == {"Fn::GetAtt": [address, "AllocationId"]}


def test_the_default_security_group_is_left_without_rules(default: Synthesized) -> None:
    template = default.template_json("Inf2Stack")
    [vpc] = resources_of(template, "AWS::EC2::VPC")
    [restrict] = resources_of(template, "Custom::VpcRestrictDefaultSG").values()
    assert restrict["Properties"]["DefaultSecurityGroupId"] == {"Fn::GetAtt": [vpc, "DefaultSecurityGroup"]}


def test_the_restricting_function_logs_to_a_group_the_stack_deletes(default: Synthesized) -> None:
    # Lambda would make /aws/lambda/<name> at the first call, and nothing would ever delete it.
    template = default.template_json("Inf2Stack")
    [handler] = [k for k in resources_of(template, "AWS::Lambda::Function") if "RestrictDefaultSG" in k]
    [(name, group)] = [
        (k, g)
        for k, g in resources_of(template, "AWS::Logs::LogGroup").items()
        if g["Properties"].get("LogGroupName") == {"Fn::Join": ["", ["/aws/lambda/", {"Ref": handler}]]}
    ]
    assert group["DeletionPolicy"] == "Delete" and group["Properties"]["RetentionInDays"] > 0
    [restrict] = resources_of(template, "Custom::VpcRestrictDefaultSG").values()
    assert name in restrict["DependsOn"], "the group exists before the function's first call"


def test_an_existing_vpc_keeps_its_default_security_group(synth: Callable[..., Synthesized]) -> None:
    template = synth(**EXISTING_VPC).template_json("Inf2Stack")
    assert not resources_of(template, "Custom::VpcRestrictDefaultSG")


def test_the_instance_sends_https_only(default: Synthesized, synth: Callable[..., Synthesized]) -> None:
    https = {
        "CidrIp": "0.0.0.0/0",
        "Description": Match.string_like_regexp("SSM.*S3.*ECR.*CloudWatch.*Hugging Face"),
        "FromPort": 443,
        "IpProtocol": "tcp",
        "ToPort": 443,
    }
    for result in (default, synth(**{"inf2.ingress_cidr": "10.42.16.0/20"}), synth(**EXISTING_VPC)):
        result.template("Inf2Stack").has_resource_properties(
            "AWS::EC2::SecurityGroup", {"SecurityGroupEgress": [https]}
        )


def test_instance(default: Synthesized) -> None:
    template = default.template("Inf2Stack")
    template.resource_count_is("AWS::EC2::Instance", 1)
    instance = next(iter(resources_of(default.template_json("Inf2Stack"), "AWS::EC2::Instance").values()))
    props = instance["Properties"]
    assert props["InstanceType"] == "inf2.48xlarge"
    assert "KeyName" not in props  # no SSH key: SSM Session Manager only
    assert props["Monitoring"] is True
    assert props["BlockDeviceMappings"] == [
        {
            "DeviceName": "/dev/sda1",
            "Ebs": {"DeleteOnTermination": True, "Encrypted": True, "VolumeSize": 512, "VolumeType": "gp3"},
        }
    ]
    # The instance lands in a private subnet, without a public address, in its own group.
    [interface] = props["NetworkInterfaces"]
    assert "Private" in interface["SubnetId"]["Ref"]
    assert interface["AssociatePublicIpAddress"] is False
    [group] = interface["GroupSet"]
    assert group["Fn::GetAtt"][0].startswith("ServerSecurityGroup")


def test_ami_comes_from_a_neuron_dlami_parameter_aws_publishes(default: Synthesized) -> None:
    """Issue 29, fault 4: the Ubuntu 22.04 multi-framework DLAMI is no longer published (Neuron
    2.29.0); the Ubuntu 22.04 base DLAMI's parameter is, frozen with a driver that runs the LMI
    image's Neuron runtime (llm_contracts/inf2.py)."""
    from llm_contracts.inf2 import NEURON_DLAMI_PARAMETERS

    template = default.template_json("Inf2Stack")
    instance = next(iter(resources_of(template, "AWS::EC2::Instance").values()))
    parameter = instance["Properties"]["ImageId"]["Ref"]
    name = "/aws/service/neuron/dlami/base/ubuntu-22.04/latest/image_id"
    assert template["Parameters"][parameter] == {
        "Type": "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>",
        "Default": name,
    }
    published = NEURON_DLAMI_PARAMETERS[name]
    assert published.frozen_at == "2.29.1" and published.driver == "2.27.4"


def test_the_amis_lifecycle_is_flagged_at_synthesis(default: Synthesized, synth: Callable[..., Synthesized]) -> None:
    from aws_cdk.assertions import Annotations, Match

    # The default is frozen: no fixes reach the host.
    Annotations.from_stack(default.stacks["Inf2Stack"]).has_warning(
        "*", Match.string_like_regexp("ami_ssm_parameter=.*names the last image of a DLAMI AWS no longer updates")
    )
    # One that follows the releases replaces the instance at the next deploy after one.
    latest = "/aws/service/neuron/dlami/multi-framework/ubuntu-24.04/latest/image_id"
    Annotations.from_stack(synth(**{"inf2.ami_ssm_parameter": latest}).stacks["Inf2Stack"]).has_warning(
        "*", Match.string_like_regexp("ami_ssm_parameter=.*/latest/.*replaces this instance")
    )
    pinned = "/llm-inference/inf2-ami"
    quiet = synth(**{"inf2.ami_ssm_parameter": pinned}).stacks["Inf2Stack"]
    assert not Annotations.from_stack(quiet).find_warning("*", Match.string_like_regexp("ami_ssm_parameter"))


def test_imdsv2_is_required(default: Synthesized) -> None:
    default.template("Inf2Stack").has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {"LaunchTemplateData": {"MetadataOptions": Match.object_like({"HttpTokens": "required"})}},
    )


def test_security_group_is_closed_by_default(default: Synthesized) -> None:
    groups = resources_of(default.template_json("Inf2Stack"), "AWS::EC2::SecurityGroup")
    assert len(groups) == 1
    group = next(iter(groups.values()))["Properties"]
    assert "SecurityGroupIngress" not in group
    assert not resources_of(default.template_json("Inf2Stack"), "AWS::EC2::SecurityGroupIngress")


def test_a_configured_cidr_reaches_the_model_port_only(synth: Callable[..., Synthesized]) -> None:
    template = synth(**{"inf2.ingress_cidr": "10.42.16.0/20"}).template_json("Inf2Stack")
    group = next(iter(resources_of(template, "AWS::EC2::SecurityGroup").values()))["Properties"]
    assert group["SecurityGroupIngress"] == [
        {
            "CidrIp": "10.42.16.0/20",
            "Description": "DJL Serving HTTP from the configured CIDR",
            "FromPort": 8080,
            "IpProtocol": "tcp",
            "ToPort": 8080,
        }
    ]


def test_existing_vpc_by_id_without_lookup(synth: Callable[..., Synthesized]) -> None:
    result = synth(**EXISTING_VPC)
    template = result.template_json("Inf2Stack")
    assert not resources_of(template, "AWS::EC2::VPC")
    assert not resources_of(template, "AWS::EC2::NatGateway")
    instance = next(iter(resources_of(template, "AWS::EC2::Instance").values()))
    assert instance["Properties"]["NetworkInterfaces"][0]["SubnetId"] == "subnet-0a1b2c3d"
    group = next(iter(resources_of(template, "AWS::EC2::SecurityGroup").values()))
    assert group["Properties"]["VpcId"] == "vpc-0123456789abcdef0"


def test_instance_role(default: Synthesized) -> None:
    template = default.template_json("Inf2Stack")
    roles = {k: v for k, v in resources_of(template, "AWS::IAM::Role").items() if k.startswith("InstanceRole")}
    assert len(roles) == 1
    role = next(iter(roles.values()))["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    # No AmazonSSMManagedInstanceCore: it reads every SSM parameter; Session Manager needs five actions.
    assert "ManagedPolicyArns" not in role
    name = next(iter(roles))
    statements = [
        s
        for policy in resources_of(template, "AWS::IAM::Policy").values()
        if {"Ref": name} in policy["Properties"]["Roles"]
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    by_action = {a: s for s in statements for a in actions_of(s)}
    assert by_action["s3:GetObject"]["Resource"]["Fn::Join"][1][-1].endswith(".gz")
    assert "ecr:BatchGetImage" in by_action and by_action["ecr:BatchGetImage"]["Resource"] != "*"
    assert {"logs:CreateLogStream", "logs:PutLogEvents"} <= set(by_action)
    assert by_action["ssmmessages:OpenDataChannel"]["Resource"] == "*"  # Session Manager
    assert not [a for a in by_action if a.startswith(("ssm:Get", "ssm:List", "ec2messages:"))]
    template_instance_profile = resources_of(template, "AWS::IAM::InstanceProfile")
    assert len(template_instance_profile) == 1


def test_user_data_checks_the_bundle_sha256(default: Synthesized, artifacts) -> None:  # type: ignore[no-untyped-def]
    import json

    sha = json.loads((artifacts / "inf2" / "manifest.json").read_text())["files"]["bundle.tar.gz"]["sha256"]
    instance = next(iter(resources_of(default.template_json("Inf2Stack"), "AWS::EC2::Instance").values()))
    user_data = json.dumps(instance["Properties"]["UserData"])
    assert f"BUNDLE_SHA256={sha}" in user_data
    assert "sha256sum --check" in user_data


def test_system_status_alarm_recovers_the_instance(default: Synthesized) -> None:
    default.template("Inf2Stack").has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": "AWS/EC2",
            "MetricName": "StatusCheckFailed_System",
            # Recovery, and a notification on the stack's topic.
            "AlarmActions": Match.array_with(
                [{"Fn::Join": ["", Match.array_with([":automate:", ":ec2:recover"])]}, {"Ref": Match.any_value()}]
            ),
        },
    )


def test_the_server_health_alarm_covers_the_load_time(default: Synthesized) -> None:
    server = default.stacks["Inf2Stack"].server
    template = default.template_json("Inf2Stack")
    alarms = resources_of(template, "AWS::CloudWatch::Alarm")
    props = alarms[default.stacks["Inf2Stack"].resolve(server.health_alarm.node.default_child.logical_id)]["Properties"]
    # LOAD_TIMEOUT_S is 11700 s (3 copies x 3600 s + 900 s): 40 periods of 5 minutes, of 41.
    [healthy] = [m for m in props["Metrics"] if "MetricStat" in m]
    assert healthy["MetricStat"]["Period"] * props["DatapointsToAlarm"] == 12_000 and props["EvaluationPeriods"] == 41
    assert healthy["MetricStat"]["Metric"]["Dimensions"] == [{"Name": "InstanceId", "Value": {"Ref": "Server7E7D21FA"}}]
    # The stack's topic hears it go into ALARM and back to OK.
    [topic] = resources_of(template, "AWS::SNS::Topic")
    assert props["AlarmActions"] == [{"Ref": topic}] and props["OKActions"] == [{"Ref": topic}]


def test_outputs(default: Synthesized) -> None:
    outputs = default.template("Inf2Stack").find_outputs("*")
    assert {"InstanceId", "PortForward", "TryIt"} <= set(outputs)
    assert "AWS-StartPortForwardingSession" in str(outputs["PortForward"]["Value"])
    assert str(outputs["TryIt"]["Value"]).startswith("curl ")


def test_policies_do_not_mention_ssh(default: Synthesized) -> None:
    for statement in policy_statements(default.template_json("Inf2Stack")):
        assert not any(a.startswith("ec2-instance-connect") for a in actions_of(statement))


def test_a_new_vpc_can_be_placed_in_one_zone(synth: Callable[..., Synthesized]) -> None:
    template = synth(**{"inf2.availability_zone": "us-east-2b"}).template_json("Inf2Stack")
    zones = {s["Properties"]["AvailabilityZone"] for s in resources_of(template, "AWS::EC2::Subnet").values()}
    assert zones == {"us-east-2b"}
    instance = next(iter(resources_of(template, "AWS::EC2::Instance").values()))
    assert instance["Properties"]["AvailabilityZone"] == "us-east-2b"


def test_the_alarms_reach_the_stacks_topic_and_the_dashboard_is_an_output(default: Synthesized) -> None:
    template = default.template_json("Inf2Stack")
    [topic] = resources_of(template, "AWS::SNS::Topic")
    alarms = resources_of(template, "AWS::CloudWatch::Alarm").values()
    # The recovery alarm keeps its EC2 action and notifies too; the health alarm notifies.
    for alarm in alarms:
        assert {"Ref": topic} in alarm["Properties"]["AlarmActions"]
        assert alarm["Properties"]["OKActions"] == [{"Ref": topic}]
    assert len(alarms) == 2
    assert {"DashboardUrl", "AlarmTopicArn"} <= set(template["Outputs"])
    [dashboard] = resources_of(template, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert "ServerHealthy" in body and "NeuronCoreUtilization" in body and "SOURCE" in body


def test_an_email_subscribes_to_the_stacks_topic(synth: Callable[..., Synthesized]) -> None:
    template = synth(**{"inf2.alarm_email": "oncall@example.com"}).template("Inf2Stack")
    template.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "oncall@example.com"})
