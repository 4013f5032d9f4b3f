"""Updates with SageMaker's deployment guardrails, with the real CDK CLI on the local AWS: an
update to a model that fails its requests is rolled back by the alarms its failures move, the
endpoint left on its config and the CloudFormation update failed and rolled back; destroy leaves
no topic, dashboard or alarm."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from local_aws import LocalAws
from local_aws.cdk import Cdk, CdkError
from local_aws.sagemaker.runtime import HOSTING
from tests.e2e.helpers import (
    Assembly,
    assembly_of,
    invoke,
    resources_of_stack,
    rollback_alarms,
    stack_of,
    update_check,
)
from tests.e2e.oncall import oncall

pytestmark = pytest.mark.e2e


#: A model whose every request fails: each waits for a batch 2 s, past the server's 1 s limit on a
#: request, and is answered 503 (the GPT-2 server's "timeout").
FAILING_MODEL = {"gpt2.max_queue_delay_us": 2_000_000, "gpt2.request_timeout_s": 1}


def failures_of_the_new_model(aws: LocalAws, name: str, wanted: int) -> list[int]:
    """Requests sent while the update's new model has the traffic, until `wanted` of them failed
    with a 5xx of the model; their statuses."""
    key = (aws.account, aws.region, name)
    deadline = time.monotonic() + 120
    while (hosted := HOSTING.find(key)) is None or hosted.pending is None or hosted.shifted < 1.0:
        assert time.monotonic() < deadline, "the update never moved the traffic"
        time.sleep(0.2)
    runtime = aws.client("sagemaker-runtime")

    def send(_: int) -> int:
        try:
            runtime.invoke_endpoint(EndpointName=name, Body=b'{"input": "amazon"}', ContentType="application/json")
        except ClientError as exc:
            return int(exc.response.get("OriginalStatusCode", 0))
        return 200

    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(send, range(wanted)))


def test_an_update_to_a_failing_model_is_rolled_back_by_its_failures(
    bootstrapped: Cdk, local_aws: LocalAws, base: Assembly, tmp_path: Path, e2e_artifacts: Path
) -> None:
    # A new server setting is a new model: the update goes through the endpoint's update policy.
    changed = assembly_of(tmp_path / "cdk.out", local_aws, e2e_artifacts, **FAILING_MODEL)
    sagemaker = local_aws.client("sagemaker")
    bootstrapped.deploy(base.path, ["Gpt2Stack"])
    alarms = rollback_alarms(local_aws, "Gpt2Stack")
    try:
        name = local_aws.stack_outputs("Gpt2Stack")["EndpointName"]
        config = sagemaker.describe_endpoint(EndpointName=name)["EndpointConfigName"]
        configs = {c["EndpointConfigName"] for c in sagemaker.list_endpoint_configs()["EndpointConfigs"]}
        updating: dict[str, Any] = {}

        def update() -> None:
            try:
                bootstrapped.deploy(changed.path, ["Gpt2Stack"])
            except CdkError as exc:
                updating["failed"] = exc

        with oncall(local_aws, "Gpt2Stack") as topic:
            deploy = threading.Thread(target=update)
            deploy.start()
            # While the update bakes, its model fails every request: a minute of those failures
            # moves the rollback alarms (errors_5xx and model_errors per period), and SageMaker
            # rolls back.
            limits = base.config.gpt2.endpoint.alarms
            assert limits is not None and limits.model_errors is not None
            failed = failures_of_the_new_model(local_aws, name, wanted=max(limits.errors_5xx, limits.model_errors))
            assert set(failed) == {503}, failed
            local_aws.clock.advance(60)
            deploy.join(timeout=300)
            assert not deploy.is_alive()
            # Each rollback alarm (latency: each failure took the 1 s limit; 5xx; model errors)
            # went into ALARM on those failures and told the on-call queue; one rolled back.
            for alarm in alarms:
                assert topic.heard(alarm)["NewStateReason"]
            assert any(a in sagemaker.describe_endpoint(EndpointName=name)["FailureReason"] for a in alarms)
        # What the user sees: the update check's resource failed, and the stack rolled back.
        assert "failed" in updating, "the update to a failing model was not rolled back"
        message = updating["failed"].args[0]
        assert "UPDATE_ROLLBACK_COMPLETE" in message or "UPDATE_FAILED" in message
        assert "EndpointUpdateCheck" in message
        assert stack_of(local_aws, "Gpt2Stack")["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
        endpoint = sagemaker.describe_endpoint(EndpointName=name)
        assert endpoint["EndpointStatus"] == "InService"
        assert endpoint["EndpointConfigName"] == config, "SageMaker rolled the endpoint back"
        assert update_check(local_aws, "Gpt2Stack") == config, "CloudFormation's state matches the endpoint"
        # The rollback deleted the config the update made; the endpoint still answers.
        assert {c["EndpointConfigName"] for c in sagemaker.list_endpoint_configs()["EndpointConfigs"]} == configs
        assert invoke(local_aws, "Gpt2Stack", {"input": "amazon"})["outputs"]
    finally:
        deployed = resources_of_stack(local_aws, "Gpt2Stack")
        bootstrapped.destroy(base.path, ["Gpt2Stack"])
    # Nothing of the alarms, topic, key, dashboard or check is left.
    kinds = {kind for kind, _ in deployed.values()}
    assert {"AWS::SNS::Topic", "AWS::CloudWatch::Dashboard", "AWS::CloudWatch::Alarm", "AWS::KMS::Key"} <= kinds
    assert not local_aws.client("sns").list_topics()["Topics"]
    assert not local_aws.client("cloudwatch").list_dashboards()["DashboardEntries"]
    assert not local_aws.client("cloudwatch").describe_alarms()["MetricAlarms"]
