"""EC2: what a stack's VPC and instance need that stock moto's CloudFormation skips."""

from __future__ import annotations

from typing import Any

from moto.ec2.models import ec2_backends
from moto.ec2.models.elastic_ip_addresses import ElasticAddress
from moto.ec2.models.flow_logs import FlowLogs
from moto.ec2.models.instances import Instance, MetadataOptions
from moto.ec2.models.internet_gateways import InternetGateway
from moto.ec2.models.nat_gateways import NatGateway
from moto.ec2.models.route_tables import Route, RouteTable
from moto.ec2.models.security_groups import SecurityGroup
from moto.ec2.models.subnets import SubnetRouteTableAssociation
from moto.ec2.models.vpn_gateway import VPCGatewayAttachment

from local_aws.patches.base import patch, replace, wrap_create

# --- VPC teardown ---------------------------------------------------------------------------


def _ec2(account_id: str, region_name: str) -> Any:
    return ec2_backends[account_id][region_name]


def _delete_route_table(self: Any, account_id: str, region_name: str) -> None:
    _ec2(account_id, region_name).delete_route_table(self.id)


def _delete_route(self: Any, account_id: str, region_name: str) -> None:
    backend = _ec2(account_id, region_name)
    if self.route_table.id not in backend.route_tables:
        return  # a route is deleted with its route table, as in AWS
    backend.delete_route(
        self.route_table.id,
        self.destination_cidr_block,
        self.destination_ipv6_cidr_block,
        self.destination_prefix_list.id if self.destination_prefix_list else None,
    )


def _delete_association(self: Any, account_id: str, region_name: str) -> None:
    _ec2(account_id, region_name).subnet_associations.pop(f"{self.route_table_id}:{self.subnet_id}", None)


def _delete_gateway_attachment(self: Any, account_id: str, region_name: str) -> None:
    backend = _ec2(account_id, region_name)
    if self.gateway_id.startswith("igw-"):
        backend.detach_internet_gateway(self.gateway_id, self.vpc_id)
    else:
        backend.detach_vpn_gateway(self.gateway_id, self.vpc_id)


def _delete_internet_gateway(self: Any, account_id: str, region_name: str) -> None:
    _ec2(account_id, region_name).delete_internet_gateway(self.id)


def _delete_nat_gateway(self: Any, account_id: str, region_name: str) -> None:
    backend = _ec2(account_id, region_name)
    backend.delete_nat_gateway(self.id)
    # A deleted NAT gateway releases its network interface and Elastic IP association.
    backend.nat_gateways.pop(self.id, None)


def _release_address(self: Any, account_id: str, region_name: str) -> None:
    _ec2(account_id, region_name).release_address(address=self.public_ip)


def _delete_flow_log(self: Any, account_id: str, region_name: str) -> None:
    _ec2(account_id, region_name).delete_flow_logs([self.id])


@patch(
    """Deleting a stack deletes its AWS::EC2::RouteTable, ::Route,
    ::SubnetRouteTableAssociation, ::VPCGatewayAttachment, ::InternetGateway, ::NatGateway,
    ::EIP and ::FlowLog. Stock moto has no delete for them: the VPC keeps dependencies, its
    deletion fails ("has dependencies"), and `cdk destroy` of a stack with a VPC fails."""
)
def vpc_resources_are_deleted() -> None:
    replace(RouteTable, "delete", _delete_route_table)
    replace(Route, "delete", _delete_route)
    replace(SubnetRouteTableAssociation, "delete", _delete_association)
    replace(VPCGatewayAttachment, "delete", _delete_gateway_attachment)
    replace(InternetGateway, "delete", _delete_internet_gateway)
    replace(NatGateway, "delete", _delete_nat_gateway)
    replace(ElasticAddress, "delete", _release_address)
    replace(FlowLogs, "delete", _delete_flow_log)


# --- Instances --------------------------------------------------------------------------------


def _primary_interface(props: dict[str, Any]) -> dict[str, Any]:
    """SubnetId and SecurityGroupIds from the primary NetworkInterfaces entry (CDK writes
    them there when associate_public_ip_address is set), where moto reads them."""
    primary = [n for n in props.get("NetworkInterfaces", []) if str(n.get("DeviceIndex")) == "0"]
    if not primary:
        return props
    nic = primary[0]
    return {
        **props,
        "SubnetId": props.get("SubnetId", nic.get("SubnetId")),
        "SecurityGroupIds": props.get("SecurityGroupIds", nic.get("GroupSet", [])),
    }


def _apply_instance_properties(instance: Any, props: dict[str, Any], account_id: str, region_name: str) -> None:
    props = _primary_interface(props)
    backend = _ec2(account_id, region_name)
    if props.get("SecurityGroupIds"):
        backend.modify_instance_security_groups(instance.id, props["SecurityGroupIds"])
    template = props.get("LaunchTemplate")
    if template:
        version = backend._get_template_from_args(template)
        instance.metadata_options = MetadataOptions(version.data.get("MetadataOptions", {}))
    if props.get("Monitoring") in (True, "true"):
        instance.monitoring_state = "enabled"


@patch(
    """AWS::EC2::Instance is launched into the subnet and security groups of its primary
    NetworkInterfaces entry or of SubnetId/SecurityGroupIds, with the instance metadata
    options of its LaunchTemplate (CDK's require_imdsv2 sets HttpTokens=required there) and
    detailed Monitoring. Stock moto reads only SubnetId and SecurityGroups (EC2-Classic
    names): the instance lands in the default VPC with a public IP, no security group of
    the stack, and IMDSv1 enabled."""
)
def instance_properties_are_applied() -> None:
    wrap_create(Instance, prepare=_primary_interface, fix=_apply_instance_properties)


# --- Security groups ------------------------------------------------------------------------------


def _apply_egress(group: Any, props: dict[str, Any], account_id: str, region_name: str) -> None:
    if "SecurityGroupEgress" not in props:
        return  # the group keeps the rule every new group has: all traffic out
    backend = _ec2(account_id, region_name)
    made = [rule.id for rule in group.egress_rules]
    if made:
        backend.revoke_security_group_egress(group.id, "", "", "", [], security_rule_ids=made, vpc_id=group.vpc_id)
    for rule in props["SecurityGroupEgress"]:
        cidr = {"CidrIp": rule["CidrIp"], **({"Description": rule["Description"]} if "Description" in rule else {})}
        backend.authorize_security_group_egress(
            group.id, str(rule["IpProtocol"]), rule.get("FromPort"), rule.get("ToPort"), [cidr], vpc_id=group.vpc_id
        )


@patch(
    """AWS::EC2::SecurityGroup's SecurityGroupEgress rules replace the rule a new group has (all
    traffic out), as CloudFormation does when the property is given; CDK writes it for a group
    made with allow_all_outbound=False. Stock moto ignores the property: every group lets all
    traffic out."""
)
def security_group_egress_is_applied() -> None:
    wrap_create(SecurityGroup, fix=_apply_egress)
