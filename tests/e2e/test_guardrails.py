"""Updates with SageMaker's deployment guardrails, with the real CDK CLI on the local AWS: an
update whose rollback alarm goes into ALARM while it bakes leaves the endpoint on its config,
and the CloudFormation update fails and rolls back; destroy leaves no topic, dashboard or alarm."""

from __future__ import annotations

from pathlib import Path

import pytest

from local_aws import LocalAws
from local_aws.cdk import Cdk, CdkError
from tests.e2e.helpers import (
    Assembly,
    assembly_of,
    invoke,
    resources_of_stack,
    rollback_alarms,
    stack_of,
    update_check,
)

pytestmark = pytest.mark.e2e


def test_a_rollback_alarm_in_alarm_keeps_the_endpoint_and_rolls_the_stack_back(
    bootstrapped: Cdk, local_aws: LocalAws, base: Assembly, tmp_path: Path, e2e_artifacts: Path
) -> None:
    # A new server setting is a new model: the update goes through the endpoint's update policy.
    changed = assembly_of(tmp_path / "cdk.out", local_aws, e2e_artifacts, **{"gpt2.max_queue_size": 32})
    sagemaker, cloudwatch = local_aws.client("sagemaker"), local_aws.client("cloudwatch")
    bootstrapped.deploy(base.path, ["Gpt2Stack"])
    alarm = rollback_alarms(local_aws, "Gpt2Stack")[0]
    try:
        name = local_aws.stack_outputs("Gpt2Stack")["EndpointName"]
        config = sagemaker.describe_endpoint(EndpointName=name)["EndpointConfigName"]
        configs = {c["EndpointConfigName"] for c in sagemaker.list_endpoint_configs()["EndpointConfigs"]}
        cloudwatch.set_alarm_state(AlarmName=alarm, StateValue="ALARM", StateReason="a regression, for the test")

        with pytest.raises(CdkError) as failed:
            bootstrapped.deploy(changed.path, ["Gpt2Stack"])
        # What the user sees: the update check's resource failed, and the stack rolled back.
        assert "UPDATE_ROLLBACK_COMPLETE" in failed.value.args[0] or "UPDATE_FAILED" in failed.value.args[0]
        assert "EndpointUpdateCheck" in failed.value.args[0]
        assert stack_of(local_aws, "Gpt2Stack")["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
        endpoint = sagemaker.describe_endpoint(EndpointName=name)
        assert endpoint["EndpointStatus"] == "InService"
        assert endpoint["EndpointConfigName"] == config, "SageMaker rolled the endpoint back"
        assert alarm in endpoint["FailureReason"]
        assert update_check(local_aws, "Gpt2Stack") == config, "CloudFormation's state matches the endpoint"
        # The rollback deleted the config the update made; the endpoint still answers.
        assert {c["EndpointConfigName"] for c in sagemaker.list_endpoint_configs()["EndpointConfigs"]} == configs
        assert invoke(local_aws, "Gpt2Stack", {"input": "amazon"})["outputs"]
    finally:
        cloudwatch.set_alarm_state(AlarmName=alarm, StateValue="OK", StateReason="the test is over")
        deployed = resources_of_stack(local_aws, "Gpt2Stack")
        bootstrapped.destroy(base.path, ["Gpt2Stack"])
    # Nothing of the alarms, topic, key, dashboard or check is left.
    kinds = {kind for kind, _ in deployed.values()}
    assert {"AWS::SNS::Topic", "AWS::CloudWatch::Dashboard", "AWS::CloudWatch::Alarm", "AWS::KMS::Key"} <= kinds
    assert not local_aws.client("sns").list_topics()["Topics"]
    assert not local_aws.client("cloudwatch").list_dashboards()["DashboardEntries"]
    assert not cloudwatch.describe_alarms()["MetricAlarms"]
