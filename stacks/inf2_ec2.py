"""OPT-13B on an EC2 inf2 instance: Neuron DLAMI, DJL Serving (LMI) with transformers-neuronx.

The instance sits in a private subnet, has no SSH key and no ingress unless a CIDR is
configured; operators reach it through SSM Session Manager (port forwarding for HTTP).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aws_cdk import Annotations, CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from artifacts_builder.inf2 import serving_properties, stale_properties
from llm_contracts.manifest import read_manifest
from llm_inference_cdk.dlc import djl_neuronx
from llm_inference_cdk.images import ContainerImage
from llm_inference_cdk.model_data import ModelAsset
from llm_inference_cdk.nag import acknowledge
from stacks.config import ConfigError, Inf2Settings
from stacks.inf2_rules import ModelFacts, known_model, settings_problems, unknown_model_message

SERVING_DIR = Path(__file__).resolve().parent.parent / "serving" / "inf2"
ROOT_DEVICE = "/dev/sda1"  # the root device name of the Ubuntu-based Neuron DLAMIs


# cloud-init runs user data scripts once per instance by default; the bootstrap runs at
# every boot instead, so a stop/start after a settings change (CloudFormation updates the
# user data that way) converges the server to the new bundle and image.
EVERY_BOOT = "#cloud-config\ncloud_final_modules:\n- [scripts-user, always]\n"
#: Files the user data installs: (source under serving/inf2, target path, mode).
INSTALLED = (
    ("run-container.sh", "/usr/local/bin/djl-serving-run", "0755"),
    ("wait-ping.sh", "/usr/local/bin/djl-serving-wait", "0755"),
    ("djl-serving.service", "/etc/systemd/system/djl-serving.service", "0644"),
)
# Time for the image to start and the bundle's model to download before the load begins.
START_MARGIN_S = 900


def render_user_data(settings: Mapping[str, str]) -> str:
    """The instance's shell script: settings, the systemd unit and its scripts, then
    bootstrap.sh. Values may be CDK tokens; they are quoted for the shell."""
    header = "".join(f"export {key}={shlex.quote(value)}\n" for key, value in settings.items())
    files = "".join(
        f"cat > {target}.tmp <<'INSTALLED_FILE'\n{(SERVING_DIR / source).read_text()}INSTALLED_FILE\n"
        f"chmod {mode} {target}.tmp && mv -f {target}.tmp {target}\n"
        for source, target, mode in INSTALLED
    )
    body = (SERVING_DIR / "bootstrap.sh").read_text().split("\n", 1)[1]
    return (
        "#!/bin/bash\nset -euo pipefail\n"
        + header
        + "install -d -m 0755 /usr/local/bin /etc/systemd/system\n"
        + files
        + body
    )


def user_data(script: str) -> ec2.UserData:
    """A MIME multipart user data: the every-boot cloud-config, then the script."""
    multipart = ec2.MultipartUserData()
    multipart.add_part(
        ec2.MultipartBody.from_raw_body(content_type='text/cloud-config; charset="utf-8"', body=EVERY_BOOT)
    )
    multipart.add_user_data_part(ec2.UserData.custom(script), ec2.MultipartBody.SHELL_SCRIPT, True)
    return multipart


def check_bundle(settings: Inf2Settings) -> None:
    """The tensor-parallel rules over the model the bundle ships (its manifest records the
    model's config.json facts) or, for a hub model, the table of known models; and the
    bundle's serving.properties against the current settings."""
    ms = settings.model_server
    manifest = read_manifest(settings.bundle.parent)
    model = manifest.get("model")
    if isinstance(model, dict) and isinstance(model.get("facts"), dict):
        facts = ModelFacts.from_dict(model["facts"])
        name = str(model.get("name", ms.model_id))
    else:
        known = known_model(ms.model_id)
        if known is None:
            raise ConfigError(unknown_model_message(ms.model_id))
        facts, name = known, ms.model_id
    problems = settings_problems(settings, facts, model_id=name)
    built = manifest.get("serving_properties")
    if isinstance(built, dict):
        # A bundle that ships its model points model_id at its own folder.
        ships_model = isinstance(model, dict) and model.get("source") == "bundle"
        wanted = serving_properties(ms, model_id=built.get("option.model_id", "") if ships_model else ms.model_id)
        stale = stale_properties(built, wanted)
        if stale:
            problems.append(
                f"inf2.bundle={str(settings.bundle)!r} is invalid: it was built from other settings ("
                + "; ".join(stale)
                + "); rebuild it with python -m artifacts_builder inf2"
            )
    if problems:
        raise ConfigError("; ".join(problems))


class Inf2Stack(Stack):
    """:param settings: the ``inf2`` section of cdk.json, parsed."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Inf2Settings, **kwargs: Any) -> None:
        kwargs.setdefault("description", "OPT-13B on EC2 inf2 with DJL Serving and transformers-neuronx")
        super().__init__(scope, construct_id, **kwargs)
        check_bundle(settings)

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
            image = ContainerImage.from_uri(settings.model_server.image_uri)
        else:
            image = ContainerImage.from_dlc(djl_neuronx(settings.model_server.image_version))

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
        image_uri = image.bind(self, role)

        user_data_script = render_user_data(
            {
                "BUNDLE_URL": bundle.s3_object_url,
                "BUNDLE_SHA256": bundle.sha256,
                "IMAGE_URI": image_uri,
                "REGION": self.region,
                "LOG_GROUP": log_group.log_group_name,
                "PORT": str(settings.port),
                "LOAD_TIMEOUT_S": str(settings.model_server.model_loading_timeout_s + START_MARGIN_S),
            }
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
            user_data=user_data(user_data_script),
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

        if "/latest/" in settings.ami_ssm_parameter:
            # CloudFormation resolves the parameter at every deploy: a new DLAMI would replace the
            # instance, its volume and compiled cache with it, on an unrelated change.
            Annotations.of(self.instance).add_warning_v2(
                "llm-inference:inf2-ami-latest",
                f"inf2.ami_ssm_parameter={settings.ami_ssm_parameter!r} follows the newest Neuron DLAMI: once AWS "
                "publishes one, the next deploy replaces this instance and its volume. To pin it, point "
                "inf2.ami_ssm_parameter at a parameter of your own that holds the AMI id (README, Inf2Stack).",
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
        # Two commands, not one line: the tunnel takes a few seconds to open and stays in front.
        CfnOutput(
            self,
            "PortForward",
            description="Forward the model server's port to this machine over SSM (keep it running)",
            value=(
                f"aws ssm start-session --target {self.instance.instance_id} "
                "--document-name AWS-StartPortForwardingSession "
                f"--parameters portNumber={settings.port},localPortNumber={settings.port}"
            ),
        )
        CfnOutput(
            self,
            "TryIt",
            description="Call the model server through the PortForward tunnel, from a second shell",
            value=(
                f"curl -s -X POST http://127.0.0.1:{settings.port}/invocations -H 'Content-Type: application/json' "
                '-d \'{"text": ["Hello, I am a language model,"], "seq_length": 64}\''
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
            # inf2 is not offered in every zone: a configured zone holds the whole VPC.
            **(
                {"availability_zones": [settings.availability_zone]}
                if settings.availability_zone is not None
                else {"max_azs": 2}
            ),
            nat_gateways=1,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="Public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                ec2.SubnetConfiguration(name="Private", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=20),
            ],
            flow_logs={
                "FlowLogs": ec2.FlowLogOptions(
                    # An explicit group: CDK's default one is retained forever after `cdk destroy`.
                    destination=ec2.FlowLogDestination.to_cloud_watch_logs(
                        logs.LogGroup(
                            self,
                            "FlowLogsGroup",
                            retention=logs.RetentionDays.THREE_MONTHS,
                            removal_policy=RemovalPolicy.DESTROY,
                        )
                    )
                )
            },
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
