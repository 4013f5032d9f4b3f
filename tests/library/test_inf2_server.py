"""The public inf2 server construct in a bare ``Stack()``: what it makes, grants and refuses."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Duration, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Match, Template

from llm_inference_cdk import ContainerImage, ModelAsset, PropError
from llm_inference_cdk.inf2.props import Inf2ServerProps
from llm_inference_cdk.inf2.server import Inf2Server, health_alarm_window

IMAGE_URI = "111122223333.dkr.ecr.us-east-1.amazonaws.com/djl:0.29.0-neuronx"


def server(
    tmp_path: Path, *, build: Callable[[Stack], dict[str, Any]] | None = None, **props: Any
) -> tuple[Stack, Inf2Server]:
    """An Inf2Server in a bare Stack; `build` makes the construct's optional arguments in it."""
    bundle_file = tmp_path / "bundle.tar.gz"
    bundle_file.write_bytes(b"bundle")
    stack = Stack(App(), "S")
    vpc = ec2.Vpc(stack, "Vpc", max_azs=1)
    made = Inf2Server(
        stack,
        "Server",
        vpc=vpc,
        vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
        bundle=ModelAsset(stack, "Bundle", path=bundle_file, entry={"sha256": "ab" * 32}),
        image=ContainerImage.from_uri(IMAGE_URI),
        props=Inf2ServerProps(**props),
        **(build(stack) if build else {}),
    )
    return stack, made


def test_instance_is_private_encrypted_and_imdsv2_only(tmp_path: Path) -> None:
    stack, made = server(tmp_path, instance_type="inf2.24xlarge", volume_size_gb=300, load_timeout_s=7200)
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::EC2::Instance",
        {
            "InstanceType": "inf2.24xlarge",
            "BlockDeviceMappings": [
                Match.object_like(
                    {"Ebs": Match.object_like({"Encrypted": True, "VolumeSize": 300, "VolumeType": "gp3"})}
                )
            ],
        },
    )
    template.has_resource_properties(
        "AWS::EC2::LaunchTemplate", {"LaunchTemplateData": {"MetadataOptions": {"HttpTokens": "required"}}}
    )
    instance = next(iter(template.find_resources("AWS::EC2::Instance").values()))["Properties"]
    assert "KeyName" not in instance
    assert "LOAD_TIMEOUT_S=7200" in json.dumps(instance["UserData"]) and IMAGE_URI in json.dumps(instance["UserData"])
    (group,) = template.find_resources("AWS::EC2::SecurityGroup").values()
    assert "SecurityGroupIngress" not in group["Properties"]  # no ingress by default
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm", {"MetricName": "StatusCheckFailed_System", "AlarmActions": Match.any_value()}
    )
    assert made.metric_cpu_utilization().metric_name == "CPUUtilization"


def test_ingress_only_from_the_given_cidr(tmp_path: Path) -> None:
    stack, _ = server(tmp_path, ingress_cidr="10.20.0.0/16", port=9000)
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::EC2::SecurityGroup",
        {"SecurityGroupIngress": [Match.object_like({"CidrIp": "10.20.0.0/16", "FromPort": 9000, "ToPort": 9000})]},
    )
    # With ingress, DJL's port is published on every address of the host (the group filters).
    assert "PUBLISH_ADDRESS=0.0.0.0" in json.dumps(template.find_resources("AWS::EC2::Instance"))


def test_without_ingress_the_port_is_published_on_loopback(tmp_path: Path) -> None:
    stack, _ = server(tmp_path)
    user_data = json.dumps(Template.from_stack(stack).find_resources("AWS::EC2::Instance"))
    assert "PUBLISH_ADDRESS=127.0.0.1" in user_data and "0.0.0.0" not in user_data


HTTPS_OUT = Match.object_like({"CidrIp": "0.0.0.0/0", "IpProtocol": "tcp", "FromPort": 443, "ToPort": 443})


def test_egress_is_https_alone(tmp_path: Path) -> None:
    stack, _ = server(tmp_path)
    (group,) = Template.from_stack(stack).find_resources("AWS::EC2::SecurityGroup").values()
    (rule,) = group["Properties"]["SecurityGroupEgress"]
    assert (rule["IpProtocol"], rule["FromPort"], rule["ToPort"], rule["CidrIp"]) == ("tcp", 443, 443, "0.0.0.0/0")


def test_a_given_security_group_gets_the_https_rule(tmp_path: Path) -> None:
    stack, made = server(
        tmp_path,
        ingress_cidr="10.20.0.0/16",
        build=lambda s: {
            "security_group": ec2.SecurityGroup(
                s,
                "Mine",
                vpc=s.node.find_child("Vpc"),
                allow_all_outbound=False,  # type: ignore[arg-type]
            )
        },
    )
    assert made.security_group.node.id == "Mine"
    Template.from_stack(stack).has_resource_properties(
        "AWS::EC2::SecurityGroup", {"SecurityGroupEgress": [HTTPS_OUT], "SecurityGroupIngress": [Match.any_value()]}
    )


def test_role_reads_the_bundle_object_alone(tmp_path: Path) -> None:
    stack, _ = server(tmp_path)
    statements = role_statements(stack)
    (read,) = [s for s in statements if s["Action"] == "s3:GetObject"]
    key = stack.resolve(stack.node.find_child("Bundle").node.default_child.s3_object_key)  # type: ignore[union-attr]
    assert json.dumps(read["Resource"]).endswith(f'"/{key}"]]}}')


#: What SSM Agent needs for Session Manager (shell and port forwarding), and nothing more.
SESSION_MANAGER = {
    "ssm:UpdateInstanceInformation",
    "ssmmessages:CreateControlChannel",
    "ssmmessages:CreateDataChannel",
    "ssmmessages:OpenControlChannel",
    "ssmmessages:OpenDataChannel",
}


def role_statements(stack: Stack) -> list[dict[str, Any]]:
    return [
        s for p in Template.from_stack(stack).find_resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]  # fmt: skip


def role_actions(stack: Stack) -> set[str]:
    return {a for s in role_statements(stack) for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}


def test_role_may_use_session_manager_but_read_no_parameter(tmp_path: Path) -> None:
    stack, _ = server(tmp_path)
    (role,) = Template.from_stack(stack).find_resources("AWS::IAM::Role").values()
    # AmazonSSMManagedInstanceCore would let the host read every SSM parameter of the account.
    assert "ManagedPolicyArns" not in role["Properties"]
    actions = role_actions(stack)
    assert actions >= SESSION_MANAGER
    ssm = {a for a in actions if a.split(":")[0] in {"ssm", "ssmmessages", "ec2messages"}}
    assert ssm == SESSION_MANAGER, ssm - SESSION_MANAGER


def test_a_given_role_gets_session_manager_too(tmp_path: Path) -> None:
    from aws_cdk import aws_iam as iam

    stack, made = server(
        tmp_path, build=lambda s: {"role": iam.Role(s, "Mine", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))}
    )
    assert made.role.node.id == "Mine"
    assert role_actions(stack) >= SESSION_MANAGER


def test_the_host_metrics(tmp_path: Path) -> None:
    stack, made = server(tmp_path)
    instance = stack.resolve(made.instance_id)
    expected = {
        made.metric_server_healthy(): ("ServerHealthy", "Maximum"),
        made.metric_invocation_latency(): ("InvocationLatency", "Average"),
        made.metric_neuroncore_utilization(): ("NeuronCoreUtilization", "Average"),
        made.metric_neuron_device_memory_used(): ("NeuronDeviceMemoryUsed", "Maximum"),
    }
    for metric, (name, statistic) in expected.items():
        assert (metric.namespace, metric.metric_name, metric.statistic) == ("LLMInference/Inf2", name, statistic)
        assert stack.resolve(metric.dimensions) == {"InstanceId": instance}
        assert metric.period.to_seconds() == 60
    assert made.metric_invocation_latency(statistic="p90", period=Duration.minutes(5)).statistic == "p90"


def test_the_host_may_put_metrics_in_its_namespace_alone(tmp_path: Path) -> None:
    stack, _ = server(tmp_path)
    [put] = [s for s in role_statements(stack) if s["Action"] == "cloudwatch:PutMetricData"]
    assert put["Resource"] == "*"  # PutMetricData takes no resource: the namespace condition scopes it
    assert put["Condition"] == {"StringEquals": {"cloudwatch:namespace": "LLMInference/Inf2"}}
    assert {a for a in role_actions(stack) if a.startswith("cloudwatch:")} == {"cloudwatch:PutMetricData"}
    user_data = json.dumps(Template.from_stack(stack).find_resources("AWS::EC2::Instance"))
    assert "NAMESPACE=LLMInference/Inf2" in user_data and "max_new_tokens" in user_data  # the probe's body


def health_alarm(stack: Stack) -> dict[str, Any]:
    (props,) = [r["Properties"] for r in Template.from_stack(stack).find_resources("AWS::CloudWatch::Alarm").values()
                if "Metrics" in r["Properties"]]  # fmt: skip
    return dict(props)


def test_the_health_alarm_waits_past_the_load_time(tmp_path: Path) -> None:
    stack, made = server(tmp_path, load_timeout_s=11_700)
    props = health_alarm(stack)
    # The construct's health_alarm is that alarm, for the stack (or you) to add actions to.
    alarms = Template.from_stack(stack).find_resources("AWS::CloudWatch::Alarm")
    assert alarms[stack.resolve(made.health_alarm.alarm_arn)["Fn::GetAtt"][0]]["Properties"] == props
    # 40 5-minute periods without a healthy report (12000 s: the load time and one period more) in
    # 41: a server that is only loading, which reports 0 for at most the load time, never fires it.
    assert (props["EvaluationPeriods"], props["DatapointsToAlarm"]) == (41, 40)
    assert (props["ComparisonOperator"], props["Threshold"]) == ("LessThanThreshold", 1)
    expression, healthy = props["Metrics"]
    # Missing periods are 0 (breaching) once the host has reported; before its first report there
    # is nothing to fill and the state is kept: a new instance does not fire it.
    assert expression["Expression"] == "FILL(healthy, 0)" and expression["ReturnData"] is True
    assert props["TreatMissingData"] == "ignore"
    stat = healthy["MetricStat"]
    assert (healthy["Id"], healthy["ReturnData"], stat["Period"], stat["Stat"]) == ("healthy", False, 300, "Maximum")
    assert stat["Metric"]["Namespace"] == "LLMInference/Inf2" and stat["Metric"]["MetricName"] == "ServerHealthy"
    assert stat["Metric"]["Dimensions"] == [{"Name": "InstanceId", "Value": stack.resolve(made.instance_id)}]
    assert "AlarmActions" not in props  # actions: the stack's choice


@pytest.mark.parametrize(
    ("load_timeout_s", "period", "periods"),
    [(60, 300, 2), (4500, 300, 16), (85_800, 300, 287), (85_801, 3600, 25), (86_400, 3600, 25)],
)
def test_the_health_alarm_window_fits_cloudwatch(load_timeout_s: int, period: int, periods: int) -> None:
    # CloudWatch evaluates at most a day of periods shorter than an hour, a week of longer ones;
    # the alarm evaluates one period more than it needs breaching.
    assert health_alarm_window(load_timeout_s) == (period, periods)
    assert period * periods > load_timeout_s and period * (periods + 1) <= (86_400 if period < 3600 else 604_800)


def test_the_probe_request_is_a_json_object() -> None:
    assert json.loads(Inf2ServerProps().probe_request) == {"text": ["Hello"], "max_new_tokens": 1}
    with pytest.raises(
        PropError, match=r"^Inf2ServerProps: probe_request='\[1\]' is invalid: allowed is a JSON object"
    ):
        Inf2ServerProps(probe_request="[1]")


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"instance_type": "trn1.32xlarge"}, r"instance_type='trn1.32xlarge' is invalid: allowed is an inf2 type"),
        ({"volume_size_gb": 100}, r"volume_size_gb=100 is invalid: allowed is a whole number from 200"),
        ({"port": 80}, r"port=80 is invalid: allowed is a whole number from 1024"),
        (
            {"ingress_cidr": "0.0.0.0/1"},
            r"ingress_cidr='0.0.0.0/1' is invalid: allowed is a network inside the VPC or connected to it",
        ),
        ({"ingress_cidr": "10.0.0.1/24"}, r"ingress_cidr='10.0.0.1/24' is invalid: .* did you mean 10.0.0.0/24"),
        # Issue 29, fault 6: the instance has no public address; no public range can reach it.
        ({"ingress_cidr": "203.0.113.7/32"}, r"ingress_cidr='203.0.113.7/32' is invalid: .* can never reach it"),
        (
            {"ami_ssm_parameter": "ami-0123"},
            r"ami_ssm_parameter='ami-0123' is invalid: allowed is an SSM parameter path",
        ),
        ({"load_timeout_s": 10}, r"load_timeout_s=10 is invalid"),
    ],
)
def test_each_refused_prop_names_itself(given: dict[str, Any], message: str) -> None:
    with pytest.raises(PropError, match=rf"^Inf2ServerProps: {message}"):
        Inf2ServerProps(**given)


def test_the_dashboard_shows_health_neuroncores_alarms_and_recent_errors(tmp_path: Path) -> None:
    stack, made = server(tmp_path)
    rows = made.dashboard_widgets()
    # Rendered as CloudWatch reads it: each widget's JSON.
    widgets = [json.loads(json.dumps(stack.resolve(w.to_json()))) for row in rows for w in row]
    flat = [w for group in widgets for w in group]
    metrics = json.dumps([w["properties"].get("metrics") for w in flat if w["type"] == "metric"])
    for name in ("ServerHealthy", "InvocationLatency", "NeuronCoreUtilization", "NeuronDeviceMemoryUsed"):
        assert name in metrics
    alarms = [w for w in flat if w["type"] == "alarm"]
    assert len(alarms) == 1 and len(alarms[0]["properties"]["alarms"]) == 2
    (logs,) = [w for w in flat if w["type"] == "log"]
    query = json.dumps(logs["properties"]["query"])
    assert "SOURCE" in query and "filter @message like" in query
    assert json.dumps(stack.resolve(made.log_group.log_group_name)) in query.replace("\\", "")


def test_the_server_shows_what_a_user_needs_read_only_and_no_props(tmp_path: Path) -> None:
    _, made = server(tmp_path, port=8081)
    assert (made.instance_type, made.port) == ("inf2.48xlarge", 8081)
    assert not hasattr(made, "props")
    with pytest.raises(AttributeError):
        made.port = 9000  # type: ignore[misc]
