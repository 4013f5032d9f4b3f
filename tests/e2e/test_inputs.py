"""A value AWS refuses fails the deploy of the real CDK CLI against the local AWS, as it would on
AWS (issue 22's mutation: a rule description with an apostrophe); its fixed twin deploys."""

from __future__ import annotations

from pathlib import Path

import pytest

from local_aws import LocalAws
from local_aws.cli.cdk import Cdk, CdkError
from tests.e2e.helpers import stack_of

pytestmark = pytest.mark.e2e


def rule_stack(outdir: Path, name: str, description: str) -> Path:
    """A cloud assembly of one small stack: a VPC and a security group with one HTTPS egress rule
    described by `description`, added as Inf2Server adds its own. No assets and no bootstrap
    version rule, so that it deploys without `cdk bootstrap`."""
    from aws_cdk import App, LegacyStackSynthesizer, Stack
    from aws_cdk import aws_ec2 as ec2

    app = App(outdir=str(outdir))
    stack = Stack(app, name, synthesizer=LegacyStackSynthesizer())
    vpc = ec2.CfnVPC(stack, "Vpc", cidr_block="10.0.0.0/16")
    imported = ec2.Vpc.from_vpc_attributes(stack, "Imported", vpc_id=vpc.ref, availability_zones=["us-east-1a"])
    group = ec2.SecurityGroup(stack, "Group", vpc=imported, description="HTTPS out only", allow_all_outbound=False)
    group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), description)
    app.synth()
    return outdir


def test_a_rule_description_with_an_apostrophe_fails_the_deploy(cdk: Cdk, local_aws: LocalAws, tmp_path: Path) -> None:
    broken = rule_stack(tmp_path / "broken", "RuleDescriptionMutation", "HTTPS to the hub's addresses")
    with pytest.raises(CdkError) as failed:
        cdk.deploy(broken, ["RuleDescriptionMutation"])
    # The CLI reports the resource's failure as CloudFormation gave it: EC2's code and message.
    assert "Error Code: InvalidParameterValue" in str(failed.value)
    assert "Invalid rule description. Valid descriptions are strings less than 256 characters" in str(failed.value)
    assert stack_of(local_aws, "RuleDescriptionMutation")["StackStatus"] == "ROLLBACK_COMPLETE"
    groups = local_aws.client("ec2").describe_security_groups()["SecurityGroups"]
    assert [g for g in groups if g.get("Description") == "HTTPS out only"] == [], "the rollback deleted the group"
    cdk.destroy(broken, ["RuleDescriptionMutation"])

    fixed = rule_stack(tmp_path / "fixed", "RuleDescriptionFixed", "HTTPS to the hub addresses")
    cdk.deploy(fixed, ["RuleDescriptionFixed"])
    assert stack_of(local_aws, "RuleDescriptionFixed")["StackStatus"] == "CREATE_COMPLETE"
    cdk.destroy(fixed, ["RuleDescriptionFixed"])
