"""OPT-13B on an EC2 inf2 instance: Neuron DLAMI, DJL Serving (LMI) with transformers-neuronx.

The instance sits in a private subnet, has no SSH key and no ingress unless a CIDR is
configured; operators reach it through SSM Session Manager (port forwarding for HTTP).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from stacks.nag import acknowledge
from stacks.config import Inf2Settings
from stacks.images import djl_neuronx
from stacks.model_asset import ModelAsset
from stacks.sagemaker_endpoint import ecr_repository_arn

SERVING_DIR = Path(__file__).resolve().parent.parent / "serving" / "inf2"
ROOT_DEVICE = "/dev/sda1"  # the root device name of the Ubuntu-based Neuron DLAMIs


def render_user_data(settings: Mapping[str, str]) -> str:
    """The instance's user data: settings, the systemd unit, its start script, then bootstrap.sh.
    Values may be CDK tokens; they are quoted for the shell."""
    header = "".join(f"export {key}={shlex.quote(value)}\n" for key, value in settings.items())
    unit = (SERVING_DIR / "djl-serving.service").read_text()
    run = (SERVING_DIR / "run-container.sh").read_text()
    body = (SERVING_DIR / "bootstrap.sh").read_text().split("\n", 1)[1]
    return (
        "#!/bin/bash\n"
        + header
        + "install -d -m 0755 /usr/local/bin /etc/systemd/system\n"
        + f"cat > /usr/local/bin/djl-serving-run <<'RUN_CONTAINER'\n{run}RUN_CONTAINER\n"
        + "chmod 0755 /usr/local/bin/djl-serving-run\n"
        + f"cat > /etc/systemd/system/djl-serving.service <<'UNIT'\n{unit}UNIT\n"
        + body
    )


class Inf2Stack(Stack):
    """:param settings: the ``inf2`` section of cdk.json, parsed."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Inf2Settings, **kwargs: Any) -> None:
        kwargs.setdefault("description", "OPT-13B on EC2 inf2 with DJL Serving and transformers-neuronx")
        super().__init__(scope, construct_id, **kwargs)

        vpc, subnets = self._network(settings)
        self.security_group = ec2.SecurityGroup(
            self,
            "ServerSecurityGroup",
            vpc=vpc,
            description="DJL Serving on inf2: no ingress unless inf2.ingress_cidr is set",
            allow_all_outbound=True,
        )
        if settings.ingress_cidr is not None:
            self.security_group.add_ingress_rule(
                ec2.Peer.ipv4(settings.ingress_cidr),
                ec2.Port.tcp(settings.port),
                "DJL Serving HTTP from the configured CIDR",
            )

        bundle = ModelAsset(self, "Bundle", path=settings.bundle)
        if settings.model_server.image_uri is not None:
            image_uri = settings.model_server.image_uri
            repository_arn = ecr_repository_arn(self, image_uri)
        else:
            dlc = djl_neuronx(settings.model_server.image_version)
            image_uri, repository_arn = dlc.uri(self), dlc.repository_arn(self)

        log_group = logs.LogGroup(
            self, "ServerLogs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=RemovalPolicy.DESTROY
        )
        role = iam.Role(
            self,
            "InstanceRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description="inf2 model server: SSM access, its bundle, its image, its logs",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name("AmazonSSMManagedInstanceCore")],
        )
        bundle.grant_read_object(role)
        log_group.grant_write(role)
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
                resources=[repository_arn],
            )
        )
        role.add_to_policy(iam.PolicyStatement(actions=["ecr:GetAuthorizationToken"], resources=["*"]))

        user_data = ec2.UserData.custom(
            render_user_data(
                {
                    "BUNDLE_URL": bundle.s3_object_url,
                    "BUNDLE_SHA256": bundle.sha256,
                    "IMAGE_URI": image_uri,
                    "REGION": self.region,
                    "LOG_GROUP": log_group.log_group_name,
                    "PORT": str(settings.port),
                }
            )
        )
        self.instance = ec2.Instance(
            self,
            "Server",
            vpc=vpc,
            vpc_subnets=subnets,
            instance_type=ec2.InstanceType(settings.instance_type),
            machine_image=ec2.MachineImage.from_ssm_parameter(
                settings.ami_ssm_parameter, os=ec2.OperatingSystemType.LINUX
            ),
            user_data=user_data,
            role=role,
            security_group=self.security_group,
            require_imdsv2=True,
            detailed_monitoring=True,
            associate_public_ip_address=False,
            block_devices=[
                ec2.BlockDevice(
                    device_name=ROOT_DEVICE,
                    volume=ec2.BlockDeviceVolume.ebs(
                        settings.volume_size_gb,
                        volume_type=ec2.EbsDeviceVolumeType.GP3,
                        encrypted=True,
                        delete_on_termination=True,
                    ),
                )
            ],
        )

        recover = cloudwatch.Alarm(
            self,
            "SystemStatusAlarm",
            alarm_description="The instance failed its system status check: recover it onto healthy hardware",
            metric=cloudwatch.Metric(
                namespace="AWS/EC2",
                metric_name="StatusCheckFailed_System",
                dimensions_map={"InstanceId": self.instance.instance_id},
                statistic="Maximum",
                period=Duration.minutes(1),
            ),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=2,
        )
        recover.add_alarm_action(cw_actions.Ec2Action(cw_actions.Ec2InstanceAction.RECOVER))

        self._acknowledge(role)
        CfnOutput(self, "InstanceId", value=self.instance.instance_id)
        CfnOutput(self, "LogGroupName", value=log_group.log_group_name)
        CfnOutput(self, "ImageUri", value=image_uri)
        CfnOutput(
            self,
            "TryIt",
            description="Forward the model server's port over SSM, then call it from this machine",
            value=(
                f"aws ssm start-session --target {self.instance.instance_id} "
                "--document-name AWS-StartPortForwardingSession "
                f"--parameters portNumber={settings.port},localPortNumber={settings.port} & "
                f"curl -s -X POST http://127.0.0.1:{settings.port}/invocations -H 'Content-Type: application/json' "
                "-d '{\"text\": [\"Hello, I am a language model,\"], \"seq_length\": 64}'"
            ),
        )

    def _network(self, settings: Inf2Settings) -> tuple[ec2.IVpc, ec2.SubnetSelection]:
        if settings.vpc_id is not None:
            assert settings.subnet_id is not None and settings.availability_zone is not None
            # Attributes, not a look-up: synthesis never calls AWS.
            vpc = ec2.Vpc.from_vpc_attributes(
                self,
                "Vpc",
                vpc_id=settings.vpc_id,
                availability_zones=[settings.availability_zone],
                private_subnet_ids=[settings.subnet_id],
            )
            subnet = ec2.Subnet.from_subnet_attributes(
                self, "Subnet", subnet_id=settings.subnet_id, availability_zone=settings.availability_zone
            )
            return vpc, ec2.SubnetSelection(subnets=[subnet])
        vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr(settings.vpc_cidr),
            max_azs=2,
            nat_gateways=1,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="Public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                ec2.SubnetConfiguration(name="Private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=20),
            ],
            flow_logs={"FlowLogs": ec2.FlowLogOptions(destination=ec2.FlowLogDestination.to_cloud_watch_logs())},
        )
        return vpc, ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)

    def _acknowledge(self, role: iam.Role) -> None:
        acknowledge(
            role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSSMManagedInstanceCore]",
            "The AWS-maintained minimum for SSM Session Manager, which replaces SSH here",
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "ecr:GetAuthorizationToken supports no resource-level permission",
        )
        acknowledge(
            self.instance,
            "AwsSolutions-EC29",
            "Termination protection would block `cdk destroy`; the system-status alarm recovers "
            "the instance and the compiled-graph cache survives on its volume",
        )
