"""OPT-13B on Inferentia2 with DJL Serving (LMI) and transformers-neuronx: on an EC2 inf2
instance (``inf2.platform=ec2``, the default: Neuron DLAMI, the container under systemd), or on a
SageMaker endpoint of an ml.inf2 type (``sagemaker``: stacks/inf2_sagemaker.py).

The instance sits in a private subnet, has no SSH key and no ingress unless a CIDR is
configured; operators reach it through SSM Session Manager (port forwarding for HTTP).
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, CfnResource, RemovalPolicy, Stack
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs
from constructs import Construct

from llm_inference_cdk.dashboard import ServiceDashboard
from llm_inference_cdk.dlc import djl_neuronx
from llm_inference_cdk.endpoint import SageMakerEndpoint
from llm_inference_cdk.images import ContainerImage
from llm_inference_cdk.inf2.server import Inf2Server
from llm_inference_cdk.model_data import ModelAsset
from project_config import Inf2Settings
from project_config.inf2 import check_bundle, check_sagemaker_bundle
from stacks.endpoint import alarm_topic
from stacks.inf2_sagemaker import add_sagemaker_endpoint

# The bundle's checks are the configuration's: named here too, where the stack runs them.
__all__ = ["Inf2Stack", "check_bundle"]


class Inf2Stack(Stack):
    """:param settings: the ``inf2`` section of cdk.json, parsed."""

    #: The EC2 host (platform ec2).
    server: Inf2Server | None = None
    #: The SageMaker endpoint (platform sagemaker).
    endpoint: SageMakerEndpoint | None = None

    def __init__(self, scope: Construct, construct_id: str, *, settings: Inf2Settings, **kwargs: Any) -> None:
        where = "a SageMaker ml.inf2 endpoint" if settings.platform == "sagemaker" else "EC2 inf2"
        kwargs.setdefault("description", f"OPT-13B on {where} with DJL Serving and transformers-neuronx")
        super().__init__(scope, construct_id, **kwargs)
        facts, name, ships_model = check_bundle(settings)
        if settings.platform == "sagemaker":
            check_sagemaker_bundle(settings, facts, model_id=name, ships_model=ships_model)
            self.endpoint = add_sagemaker_endpoint(self, settings, ships_model=ships_model)
        else:
            self._ec2(settings)

    def _ec2(self, settings: Inf2Settings) -> None:
        assert settings.server is not None
        vpc, subnets = self._network(settings)
        bundle = ModelAsset(self, "Bundle", path=settings.bundle)
        ms = settings.model_server
        image = (
            ContainerImage.from_uri(ms.image_uri)
            if ms.image_uri is not None
            else ContainerImage.from_dlc(djl_neuronx(ms.image_version))
        )
        # The stack's own security group (its id and description as before the Inf2Server
        # construct: a new group would replace the instance, which has it on its network interface).
        security_group = ec2.SecurityGroup(
            self,
            "ServerSecurityGroup",
            vpc=vpc,
            description="DJL Serving on inf2: no ingress unless inf2.ingress_cidr is set",
            # The server adds the one egress rule the host needs (HTTPS).
            allow_all_outbound=False,
        )
        self.server = server = Inf2Server(
            self,
            "Server",
            vpc=vpc,
            vpc_subnets=subnets,
            bundle=bundle,
            image=image,
            props=settings.server,
            security_group=security_group,
        )
        self._keep_deployed_ids(server)
        # The recovery and health alarms notify the stack's topic (alarm and OK), and the
        # dashboard shows the server's health, NeuronCores and recent errors.
        topic = alarm_topic(self, settings)
        for alarm in (server.health_alarm, server.recover_alarm):
            alarm.add_alarm_action(cw_actions.SnsAction(topic))
            alarm.add_ok_action(cw_actions.SnsAction(topic))
        dashboard = ServiceDashboard(self, "Dashboard", rows=server.dashboard_widgets())
        CfnOutput(self, "DashboardUrl", value=dashboard.url)
        port, instance_id = settings.server.port, server.instance_id
        CfnOutput(self, "InstanceId", value=instance_id)
        CfnOutput(self, "LogGroupName", value=server.log_group.log_group_name)
        CfnOutput(self, "ImageUri", value=server.image_uri)
        # Two commands, not one line: the tunnel takes a few seconds to open and stays in front.
        CfnOutput(
            self,
            "PortForward",
            description="Forward the model server's port to this machine over SSM (keep it running)",
            value=(
                f"aws ssm start-session --target {instance_id} --document-name AWS-StartPortForwardingSession "
                f"--parameters portNumber={port},localPortNumber={port}"
            ),
        )
        CfnOutput(
            self,
            "TryIt",
            description="Call the model server through the PortForward tunnel, from a second shell",
            value=(
                f"curl -s -X POST http://127.0.0.1:{port}/invocations -H 'Content-Type: application/json' "
                '-d \'{"text": ["Hello, I am a language model,"], "seq_length": 64}\''
            ),
        )

    @staticmethod
    def _keep_deployed_ids(server: Inf2Server) -> None:
        """This stack made the server's role, log group and alarm itself before the Inf2Server
        construct held them: their logical ids stay, so that an upgrade does not restart the
        instance (the log group's name is in its user data) or replace what needs no change."""
        policy = server.role.node.find_child("DefaultPolicy")
        for construct, logical_id in (
            (server.log_group, "ServerLogsD9948953"),
            (server.role, "InstanceRole3CCE2F1D"),
            (policy, "InstanceRoleDefaultPolicy1531605C"),
            (server.recover_alarm, "SystemStatusAlarm57F184A6"),
        ):
            resource = construct.node.default_child
            assert isinstance(resource, CfnResource)
            resource.override_logical_id(logical_id)

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
            # The default security group loses its rules (CDK's custom resource revokes them): a
            # resource that falls back on it gets no traffic at all.
            restrict_default_security_group=True,
            subnet_configuration=[
                # The public subnets hold the NAT gateway (its Elastic IP) alone: whatever else is
                # launched there gets no public address.
                ec2.SubnetConfiguration(
                    name="Public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24, map_public_ip_on_launch=False
                ),
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
        self._restricting_function_logs(vpc)
        return vpc, ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)

    def _restricting_function_logs(self, vpc: ec2.Vpc) -> None:
        """The log group of CDK's function that restricts the default security group. Lambda
        would make /aws/lambda/<its name> at its first call, which nothing deletes (CDK's provider
        takes no log group): made here with a retention and deleted with the stack, before the
        custom resource calls the function."""
        provider = self.node.find_child("Custom::VpcRestrictDefaultSGCustomResourceProvider")
        handler = provider.node.find_child("Handler")
        assert isinstance(handler, CfnResource)
        group = logs.LogGroup(
            self,
            "RestrictDefaultSgLogs",
            log_group_name=f"/aws/lambda/{handler.ref}",
            retention=logs.RetentionDays.ONE_MONTH,
            removal_policy=RemovalPolicy.DESTROY,
        )
        vpc.node.find_child("RestrictDefaultSecurityGroupCustomResource").node.add_dependency(group)
