"""`cdk deploy` / update / `cdk destroy` of Inf2Stack against the local AWS: the instance
as AWS would report it, its AMI from the public SSM parameter, each alarm driven into ALARM by
its fault and heard on the stack's topic, then a clean teardown."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from llm_contracts.manifest import sha256_file
from llm_inference_cdk.inf2.server import METRIC_NAMESPACE, SESSION_MANAGER_ACTIONS
from local_aws import LocalAws
from local_aws.cli.cdk import Cdk
from local_aws.cloudwatch import publish
from tests.e2e.helpers import (
    Assembly,
    deploy_update_destroy,
    resources_of_stack,
    s3_object_sha256,
)
from tests.e2e.oncall import actions_run, aws_cli, djl_serving, oncall
from tests.infra.helpers import ROOT

pytestmark = pytest.mark.e2e
STACK = "Inf2Stack"


def policy_document(response: dict[str, Any]) -> dict[str, Any]:
    """GetRolePolicy's document, which the SDK may hand back URL-encoded."""
    document = response["PolicyDocument"]
    return json.loads(unquote(document)) if isinstance(document, str) else document  # type: ignore[no-any-return]


def check_instance(aws: LocalAws, assembly: Assembly, neuron_ami: str, faults: Path | None = None) -> dict[str, Any]:
    """The deployed instance and its alarms as AWS would report them; with `faults` (a scratch
    folder), each alarm driven into ALARM by its fault and back to OK (:func:`prove_alarms`)."""
    settings = assembly.config.inf2
    outputs = aws.stack_outputs(STACK)
    ec2 = aws.client("ec2")
    (reservation,) = ec2.describe_instances(InstanceIds=[outputs["InstanceId"]])["Reservations"]
    (instance,) = reservation["Instances"]
    assert instance["State"]["Name"] == "running"
    assert instance["InstanceType"] == settings.server.instance_type
    # The AMI is whatever the public Neuron DLAMI parameter names at deploy time.
    published = aws.client("ssm").get_parameter(Name=settings.server.ami_ssm_parameter)["Parameter"]["Value"]
    assert instance["ImageId"] == published == neuron_ami
    assert instance["MetadataOptions"]["HttpTokens"] == "required"  # IMDSv2 only
    assert instance["Monitoring"]["State"] == "enabled"
    assert "PublicIpAddress" not in instance

    (device,) = instance["BlockDeviceMappings"]
    (volume,) = ec2.describe_volumes(VolumeIds=[device["Ebs"]["VolumeId"]])["Volumes"]
    assert (volume["Size"], volume["VolumeType"], volume["Encrypted"]) == (settings.server.volume_size_gb, "gp3", True)
    assert device["Ebs"]["DeleteOnTermination"] is True

    resources = resources_of_stack(aws, STACK)
    groups = [physical for kind, physical in resources.values() if kind == "AWS::EC2::SecurityGroup"]
    assert [g["GroupId"] for g in instance["SecurityGroups"]] == groups, "its own security group, only"
    (group,) = ec2.describe_security_groups(GroupIds=groups)["SecurityGroups"]
    assert group["IpPermissions"] == [], "no ingress unless inf2.ingress_cidr is set"
    assert [(p["IpProtocol"], p.get("FromPort"), p.get("ToPort")) for p in group["IpPermissionsEgress"]] == [
        ("tcp", 443, 443)
    ], "HTTPS out, nothing else"
    vpcs = [physical for kind, physical in resources.values() if kind == "AWS::EC2::VPC"]
    assert [group["VpcId"], instance["VpcId"]] == vpcs * 2
    # The VPC's default security group is left without rules (CDK's custom resource revoked them).
    filters = [{"Name": "vpc-id", "Values": vpcs}, {"Name": "group-name", "Values": ["default"]}]
    (default,) = ec2.describe_security_groups(Filters=filters)["SecurityGroups"]
    assert (default["IpPermissions"], default["IpPermissionsEgress"]) == ([], [])

    iam = aws.client("iam")
    profile_name = instance["IamInstanceProfile"]["Arn"].rsplit("/", 1)[-1]
    (role,) = iam.get_instance_profile(InstanceProfileName=profile_name)["InstanceProfile"]["Roles"]
    # No AWS managed policy (AmazonSSMManagedInstanceCore reads every SSM parameter): Session
    # Manager's five actions are in the role's own policy.
    assert iam.list_attached_role_policies(RoleName=role["RoleName"])["AttachedPolicies"] == []
    granted = {
        action
        for name in iam.list_role_policies(RoleName=role["RoleName"])["PolicyNames"]
        for statement in policy_document(iam.get_role_policy(RoleName=role["RoleName"], PolicyName=name))["Statement"]
        for action in ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])
    }
    assert set(SESSION_MANAGER_ACTIONS) <= granted and "cloudwatch:PutMetricData" in granted
    assert not [a for a in granted if a.startswith(("ssm:Get", "ec2messages:"))]

    def instance_metric(alarm: dict[str, Any]) -> str | None:
        """The alarm's metric of this instance: its own, or the one its metric math reads."""
        metrics = [alarm] + [q["MetricStat"]["Metric"] for q in alarm.get("Metrics", []) if "MetricStat" in q]
        own = [{"Name": "InstanceId", "Value": instance["InstanceId"]}]
        names = [m["MetricName"] for m in metrics if m.get("Dimensions") == own]
        return names[0] if names else None

    alarms = {instance_metric(a): a for a in aws.client("cloudwatch").describe_alarms()["MetricAlarms"]}
    alarms.pop(None, None)
    assert set(alarms) == {"StatusCheckFailed_System", "ServerHealthy"}
    topic = aws.stack_outputs("Inf2Stack")["AlarmTopicArn"]
    # Recovery, and both alarms heard on the stack's topic, going into ALARM and back to OK.
    recovery = alarms["StatusCheckFailed_System"]["AlarmActions"]
    assert topic in recovery and [a.split(":")[-1] for a in recovery if a != topic] == ["recover"]
    # The server's health alarm: missing periods are 0 once the host has reported, over more
    # than the load time.
    health = alarms["ServerHealthy"]
    assert (health["TreatMissingData"], health["AlarmActions"], health["OKActions"]) == ("ignore", [topic], [topic])
    [expression] = [q["Expression"] for q in health["Metrics"] if "Expression" in q]
    [stat] = [q["MetricStat"] for q in health["Metrics"] if "MetricStat" in q]
    assert expression == "FILL(healthy, 0)" and stat["Metric"]["Namespace"] == "LLMInference/Inf2"
    assert int(stat["Period"]) * health["DatapointsToAlarm"] > settings.server.load_timeout_s
    if faults is not None:
        prove_alarms(aws, instance["InstanceId"], alarms, faults)

    # The object the instance will download is, byte for byte, the bundle built here.
    url = assembly.asset_url(STACK, settings.bundle, aws)
    assert s3_object_sha256(aws, url) == sha256_file(settings.bundle)
    return {"instance": instance["InstanceId"], "volume": volume["VolumeId"]}


def prove_alarms(aws: LocalAws, instance_id: str, alarms: dict[str, dict[str, Any]], scratch: Path) -> None:
    """Each alarm of the instance into ALARM by its fault, heard on the stack's topic, and back to
    OK once the fault is over, on the local AWS's clock: EC2's failed system status check (EC2's
    metric, fed here as EC2 would publish it: the local AWS has no hardware to check), and DJL
    Serving down past its load time as the host's own health check reports it."""
    status, health = alarms["StatusCheckFailed_System"], alarms["ServerHealthy"]
    own = [{"Name": "InstanceId", "Value": instance_id}]
    with oncall(aws, STACK) as topic:
        for failed in (1, 0):
            for _ in range(status["EvaluationPeriods"]):
                datum = {"MetricName": "StatusCheckFailed_System", "Value": failed, "Dimensions": own}
                publish(aws.account, aws.region, "AWS/EC2", [datum])
                aws.clock.advance(60)
            topic.heard(status["AlarmName"], "ALARM" if failed else "OK")
        # ALARM ran EC2's recovery and notified the topic, OK notified it; nothing failed.
        ran = actions_run(aws, status["AlarmName"])
        assert [a.removeprefix("Successfully executed action ").rsplit(":", 1)[-1] for a in ran] == [
            "recover", topic_name(status), topic_name(status)]  # fmt: skip

        (stat,) = [q["MetricStat"] for q in health["Metrics"] if "MetricStat" in q]
        period, periods = int(stat["Period"]), int(health["DatapointsToAlarm"])
        probe = scratch / "probe.json"
        probe.write_text('{"inputs": "Hello", "parameters": {"max_new_tokens": 1}}')
        with djl_serving() as djl:
            settings = {"REGION": aws.region, "NAMESPACE": METRIC_NAMESPACE, "INSTANCE_ID": instance_id,
                        "PORT": str(djl.port), "PROBE_FILE": str(probe)}  # fmt: skip
            environment = {**aws.environment(), **settings,
                           "PATH": f"{aws_cli(scratch / 'bin')}{os.pathsep}{os.environ['PATH']}"}  # fmt: skip

            def report(periods: int) -> None:
                """The host's health check, once a period, as its timer runs it every minute."""
                for _ in range(periods):
                    subprocess.run(["bash", str(ROOT / "llm_inference_cdk" / "inf2" / "health-check.sh")],
                                   env=environment, check=True, capture_output=True, timeout=60)  # fmt: skip
                    aws.clock.advance(period)

            report(1)
            djl.ping = 503  # down (a crash loop, a load that never ends)
            report(periods)
            topic.heard(health["AlarmName"])
            djl.ping = 200
            report(2)
            topic.heard(health["AlarmName"], "OK")


def topic_name(alarm: dict[str, Any]) -> str:
    """The last part of the ARN of the SNS topic among the alarm's actions."""
    return next(a for a in alarm["AlarmActions"] if ":sns:" in a).rsplit(":", 1)[-1]


def test_deploy_update_destroy(
    bootstrapped: Cdk, local_aws: LocalAws, base: Assembly, updated: Assembly, neuron_ami: str, tmp_path: Path
) -> None:
    # A new root volume size replaces the instance, as CloudFormation does for BlockDeviceMappings.
    assert updated.config.inf2.server.volume_size_gb != base.config.inf2.server.volume_size_gb
    first, second = deploy_update_destroy(
        bootstrapped,
        STACK,
        base,
        updated,
        # The alarms proven on the first deploy: an alarm keeps its state through the update.
        lambda assembly: check_instance(local_aws, assembly, neuron_ami, tmp_path if assembly is base else None),
    )
    assert second["instance"] != first["instance"]
    (old,) = local_aws.client("ec2").describe_instances(InstanceIds=[first["instance"]])["Reservations"]
    assert old["Instances"][0]["State"]["Name"] == "terminated"
