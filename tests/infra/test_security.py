"""Security by default, checked on every synthesized template: cdk-nag, cfn-lint, IAM."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.infra.copy_check import synthesized_problems
from tests.infra.helpers import MODE_VARIANTS, Synthesized, actions_of, policy_statements, resources_of

STACKS = ["Gpt2Stack", "GptjStack", "Inf2Stack"]
# Variants that add resources the defaults do not have.
VARIANTS = {
    "default": {},
    # No NVMe: the only such GPU type here is the V100's, which the vllm image's CUDA 13 cannot use.
    "encrypted-volume": {
        "gptj.engine": "hf-toolkit",
        "gptj.instance_type": "ml.p3.2xlarge",
        "gpt2.instance_type": "ml.g5.xlarge",
    },
    "ingress-and-region": {"inf2.ingress_cidr": "10.42.16.0/20", "project.region": "eu-west-1"},
    **MODE_VARIANTS,
    # GptjStack on the vllm engine, in each mode (the same overrides as tests/infra/test_gptj_engines.py).
    "vllm": {"gptj.engine": "vllm"},
    "vllm-inference-component": {
        "gptj.endpoint_mode": "inference-component",
        "gptj.min_copies": "0",
        "gptj.engine": "vllm",
    },
    "vllm-async": {"gptj.endpoint_mode": "async", "gptj.engine": "vllm"},
    # Inf2Stack on a SageMaker ml.inf2 endpoint (the same overrides as tests/infra/test_metrics_published.py).
    "inf2-sagemaker": {"inf2.platform": "sagemaker"},
    "inf2-sagemaker-async": {"inf2.platform": "sagemaker", "inf2.endpoint_mode": "async"},
}
# Actions that AWS allows on no narrower resource than "*" (the Service Authorization Reference
# defines no resource type for them).
STAR_ONLY_ACTIONS = {
    "ecr:GetAuthorizationToken",
    "cloudwatch:PutMetricData",
    # SSM Session Manager on the inf2 host
    "ssm:UpdateInstanceInformation",
    "ssmmessages:CreateControlChannel",
    "ssmmessages:CreateDataChannel",
    "ssmmessages:OpenControlChannel",
    "ssmmessages:OpenDataChannel",
}


@pytest.fixture(scope="module", params=list(VARIANTS))
def variant(request: pytest.FixtureRequest, synth: Callable[..., Synthesized]) -> Synthesized:
    return synth(**VARIANTS[request.param])


def test_cdk_nag_has_no_unacknowledged_finding(variant: Synthesized) -> None:
    # synthesize() already raised on any error-level finding; the report must agree.
    report = json.loads((variant.outdir / "validation-report.json").read_text())
    failures = [violation for plugin in report["pluginReports"] for violation in plugin.get("violations", [])]
    assert failures == []


def test_every_acknowledgement_states_a_reason(variant: Synthesized) -> None:
    acknowledged = {
        rule: reason
        for stack in variant.stacks.values()
        for child in stack.node.find_all()
        for entry in child.node.metadata
        if entry.type == "aws:cdk:acknowledged-rules"
        for rule, reason in entry.data.items()
    }
    assert any("IAM5" in rule for rule in acknowledged)
    for rule, reason in acknowledged.items():
        assert len(reason.split()) >= 4, f"{rule}: the reason must say why it is safe, got {reason!r}"


def test_cdk_nag_is_active(full_app: tuple[Any, dict[str, Any]]) -> None:
    """A negative control: the same app plus one over-broad policy fails synthesis."""
    from aws_cdk import aws_iam as iam

    app, stacks = full_app
    role = stacks["GptjStack"].endpoint.role  # type: ignore[attr-defined]
    role.add_to_policy(iam.PolicyStatement(actions=["s3:*"], resources=["*"]))
    with pytest.raises(RuntimeError, match=r"AwsSolutions-IAM5\[Action::s3:\*\]"):
        app.synth()


@functools.cache
def cfn_lint() -> Any:
    """One cfn-lint runner a worker: each new one loads every rule again (a second or more of CPU,
    which the lint of one template took as much again)."""
    from cfnlint.api import ManualArgs
    from cfnlint.config import ConfigMixIn
    from cfnlint.runner import Runner

    return Runner(ConfigMixIn(**ManualArgs(regions=["us-east-1"])))


@pytest.mark.parametrize("stack", STACKS)
def test_cfn_lint_reports_no_error(variant: Synthesized, stack: str) -> None:
    from cfnlint.decode import decode

    template, matches = decode(str(variant.outdir / f"{stack}.template.json"))
    assert template is not None, matches
    matches = [*matches, *cfn_lint().validate_template(template)]
    errors = [f"{m.rule.id} {m.message} ({m.path})" for m in matches if m.rule.severity.lower() == "error"]
    assert errors == []


@pytest.mark.parametrize("stack", STACKS)
def test_no_full_access_and_no_star_resource_beyond_star_only_actions(variant: Synthesized, stack: str) -> None:
    template = variant.template_json(stack)
    text = json.dumps(template)
    assert "FullAccess" not in text
    for statement in policy_statements(template):
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        if "*" in resources:
            assert set(actions_of(statement)) <= STAR_ONLY_ACTIONS, statement
        assert statement["Effect"] == "Allow"
        assert not any(a.endswith(":*") or a == "*" for a in actions_of(statement)), statement


@pytest.mark.parametrize("stack", STACKS)
def test_no_account_id_or_region_literal_in_default_templates(synth: Callable[..., Synthesized], stack: str) -> None:
    import re

    # Registry accounts come from the SDK's mapping (a Mappings table), never inline.
    inline = json.dumps({k: v for k, v in synth().template_json(stack).items() if k != "Mappings"})
    assert not re.search(r"\b[0-9]{12}\b", inline)
    assert not re.search(r"\b(us|eu|ap|sa|ca|me|af)-[a-z]+-[0-9]\b", inline)


@pytest.mark.parametrize("stack", STACKS)
def test_security_group_and_rule_descriptions_are_ones_ec2_accepts(variant: Synthesized, stack: str) -> None:
    # EC2 refuses a description beyond its character set (cfn-lint does not check it): the group
    # fails, and the stack with it. The local AWS refuses it with the same check.
    from local_aws.validation.documented import security_group_problems

    assert security_group_problems(variant.template_json(stack)) == []


@pytest.mark.parametrize("stack", STACKS)
def test_every_literal_value_is_one_aws_accepts(variant: Synthesized, stack: str) -> None:
    # The requests CloudFormation makes for each resource, checked as the local AWS checks them
    # when it deploys (botocore's models and AWS's documented constraints): a fault found here
    # needs no deploy.
    from local_aws.validation.cloudformation import template_problems

    assert template_problems(variant.template_json(stack)) == []


@pytest.mark.parametrize("stack", STACKS)
def test_no_metric_namespace_granted_is_one_aws_reserves(variant: Synthesized, stack: str) -> None:
    # Namespaces beginning AWS/ are reserved for AWS's services (CloudWatch API reference,
    # PutMetricData Namespace): a grant there can never be used, and only reads as if it could.
    granted = [
        namespace
        for statement in policy_statements(variant.template_json(stack))
        if "cloudwatch:PutMetricData" in actions_of(statement)
        for condition in statement.get("Condition", {}).values()
        for namespaces in [condition.get("cloudwatch:namespace", [])]
        for namespace in ([namespaces] if isinstance(namespaces, str) else namespaces)
    ]
    assert granted, "every stack's servers publish metrics under a namespace condition"
    assert [n for n in granted if n.startswith("AWS/")] == []


@pytest.mark.parametrize("stack", ["Gpt2Stack", "GptjStack", "LlmStack"])
def test_every_copy_gets_what_its_engine_uses(variant: Synthesized, stack: str) -> None:
    # The check tests/infra/test_metrics_published.py runs on its variants, on these too.
    assert synthesized_problems(variant, stack) == []


def test_storage_is_encrypted_everywhere(variant: Synthesized) -> None:
    inf2 = variant.template_json("Inf2Stack")
    for instance in resources_of(inf2, "AWS::EC2::Instance").values():
        for mapping in instance["Properties"]["BlockDeviceMappings"]:
            assert mapping["Ebs"]["Encrypted"] is True
    for stack in ("Gpt2Stack", "GptjStack"):
        for config in resources_of(variant.template_json(stack), "AWS::SageMaker::EndpointConfig").values():
            variant_type = config["Properties"]["ProductionVariants"][0]["InstanceType"]
            family = variant_type.split(".")[1]
            # Without NVMe instance storage the volume needs our key; NVMe stores are hardware-encrypted.
            assert ("KmsKeyId" in config["Properties"]) == (family not in {"g4dn", "g5"})
