"""Updates with SageMaker's deployment guardrails, with the real CDK CLI on the local AWS: an
update to a model that fails its requests is rolled back by the alarms its failures move (GPT-2's
real-time endpoint, async endpoint and inference component; GPT-J's real-time endpoint on the
toolkit engine), what runs left on its config (its model) and the CloudFormation update failed
and rolled back; destroy leaves no topic, dashboard or alarm. The inference component then scales
its copies out under load and back in."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from local_aws import LocalAws
from local_aws.cli.cdk import Cdk
from local_aws.sagemaker.components import component_key
from local_aws.sagemaker.containers import running_containers
from local_aws.sagemaker.runtime import hosting_plane
from tests.e2e.helpers import (
    Assembly,
    assembly_of,
    resources_of_stack,
    rollback_alarms,
    update_check,
)
from tests.e2e.oncall import (
    Send,
    a_refusing_gptj_update_is_rolled_back,
    described,
    rolled_back_by_its_failures,
    status_of,
)
from tests.e2e.test_modes import TARGET, busy_minutes_until, copies, minutes_while, until, wait_for_object

pytestmark = pytest.mark.e2e


#: A model whose every request fails: each waits for a batch 2 s, past the server's 1 s limit on a
#: request, and is answered 503 (the GPT-2 server's "timeout").
FAILING_MODEL = {"gpt2.max_queue_delay_us": 2_000_000, "gpt2.request_timeout_s": 1}


def nothing_left(aws: LocalAws, deployed: dict[str, tuple[str, str]]) -> None:
    """Nothing of the alarms, topic, key, dashboard or check is left after destroy."""
    kinds = {kind for kind, _ in deployed.values()}
    assert {"AWS::SNS::Topic", "AWS::CloudWatch::Dashboard", "AWS::CloudWatch::Alarm", "AWS::KMS::Key"} <= kinds
    assert not aws.client("sns").list_topics()["Topics"]
    assert not aws.client("cloudwatch").list_dashboards()["DashboardEntries"]
    assert not aws.client("cloudwatch").describe_alarms()["MetricAlarms"]
    assert not running_containers()


@contextmanager
def deployed(
    cdk: Cdk, aws: LocalAws, tmp_path: Path, artifacts: Path, settings: dict[str, Any], base: Assembly | None = None
) -> Iterator[tuple[Assembly, dict[str, str]]]:
    """Gpt2Stack deployed with `settings` (`base`: already synthesized with them), the app that
    updates it to the failing model, and the stack's outputs; destroyed after, nothing left."""
    if base is None:
        base = assembly_of(tmp_path / "base", aws, artifacts, **settings)
    # A new server setting is a new model: the update goes through the update policy.
    changed = assembly_of(tmp_path / "cdk.out", aws, artifacts, **settings, **FAILING_MODEL)
    cdk.deploy(base.path, ["Gpt2Stack"])
    try:
        yield changed, aws.stack_outputs("Gpt2Stack")
    finally:
        resources = resources_of_stack(aws, "Gpt2Stack")
        cdk.destroy(base.path, ["Gpt2Stack"])
    nothing_left(aws, resources)


def real_time(aws: LocalAws, outputs: dict[str, str], **target: str) -> Send:
    runtime = aws.client("sagemaker-runtime")
    body = b'{"input": "amazon"}'
    name = outputs["EndpointName"]
    return lambda: status_of(
        lambda: runtime.invoke_endpoint(EndpointName=name, Body=body, ContentType="application/json", **target)
    )


def queued(aws: LocalAws, outputs: dict[str, str]) -> Send:
    """An InvokeEndpointAsync of a request put in the stack's bucket; its status read from where
    SageMaker writes the answer, or the failure ("Received client error (503) from model")."""
    runtime, bucket = aws.client("sagemaker-runtime"), outputs["AsyncBucket"]
    aws.client("s3").put_object(Bucket=bucket, Key="input/seed.json", Body=b'{"input": "amazon"}')

    def send() -> int:
        sent = runtime.invoke_endpoint_async(
            EndpointName=outputs["EndpointName"],
            InputLocation=f"s3://{bucket}/input/seed.json",
            ContentType="application/json",
        )
        url, body = wait_for_object(aws, sent["OutputLocation"], sent["FailureLocation"])
        if url == sent["OutputLocation"]:
            return 200
        found = re.search(rb"\((\d{3})\)", body)
        return int(found[1]) if found else 0

    return send


@pytest.mark.parametrize("mode", ["real-time", "async"])
def test_an_update_to_a_failing_model_is_rolled_back_by_its_failures(
    bootstrapped: Cdk, local_aws: LocalAws, base: Assembly, tmp_path: Path, e2e_artifacts: Path, mode: str
) -> None:
    # Async: the model-error alarm watches InvocationFailures (an async endpoint publishes no
    # InvocationModelErrors), the 5xx and latency alarms the model's own; requests are queued.
    settings = {"gpt2.endpoint_mode": "async"} if mode == "async" else {}
    sagemaker = local_aws.client("sagemaker")
    with deployed(bootstrapped, local_aws, tmp_path, e2e_artifacts, settings, None if settings else base) as (
        changed,
        outputs,
    ):
        name = outputs["EndpointName"]
        send = queued(local_aws, outputs) if mode == "async" else real_time(local_aws, outputs)
        config = sagemaker.describe_endpoint(EndpointName=name)["EndpointConfigName"]
        configs = {c["EndpointConfigName"] for c in sagemaker.list_endpoint_configs()["EndpointConfigs"]}
        rolled_back_by_its_failures(
            bootstrapped,
            local_aws,
            changed,
            name,
            send,
            lambda: str(sagemaker.describe_endpoint(EndpointName=name)["FailureReason"]),
            "InvocationFailures" if mode == "async" else "InvocationModelErrors",
        )
        endpoint = sagemaker.describe_endpoint(EndpointName=name)
        assert endpoint["EndpointStatus"] == "InService"
        assert endpoint["EndpointConfigName"] == config, "SageMaker rolled the endpoint back"
        assert update_check(local_aws, "Gpt2Stack") == config, "CloudFormation's state matches the endpoint"
        # The rollback deleted the config the update made; the endpoint still answers.
        assert {c["EndpointConfigName"] for c in sagemaker.list_endpoint_configs()["EndpointConfigs"]} == configs
        assert send() == 200


#: GPT-J's handler refusing the requests clients make: a setting lowered under what they ask for
#: (GPTJ_MAX_NEW_TOKENS, serving/gptj/code/inference.py) makes each a 400, a model error.
REFUSING_GPTJ = {"gptj.environment": {"GPTJ_MAX_NEW_TOKENS": "4"}}


def test_a_gptj_update_that_refuses_its_requests_is_rolled_back_on_its_model_errors(
    bootstrapped: Cdk, local_aws: LocalAws, base: Assembly, tmp_path: Path, e2e_artifacts: Path
) -> None:
    """GptjStack on the toolkit engine: an update whose model refuses with 400 what clients ask
    of the running one is rolled back on the model-error alarm alone (its requests are neither
    slow nor 5xx); the endpoint answers from its old config."""
    changed = assembly_of(tmp_path / "cdk.out", local_aws, e2e_artifacts, **REFUSING_GPTJ)
    sagemaker = local_aws.client("sagemaker")
    bootstrapped.deploy(base.path, ["GptjStack"])
    try:
        body = b'{"inputs": "Can you please", "parameters": {"max_new_tokens": 12}}'
        a_refusing_gptj_update_is_rolled_back(bootstrapped, local_aws, changed, body)
    finally:
        bootstrapped.destroy(base.path, ["GptjStack"])
    assert not sagemaker.list_endpoints()["Endpoints"]
    assert not running_containers()


def test_an_inference_component_update_to_a_failing_model_is_rolled_back_and_its_copies_scale(
    bootstrapped: Cdk, local_aws: LocalAws, tmp_path: Path, e2e_artifacts: Path
) -> None:
    """The component's own DeploymentConfig rolls its update back on its alarms: it runs the old
    model again, the stack update failed and rolled back, and it answers. In the same deploy,
    target tracking on InvocationsPerCopy: three minutes above the target under `python -m
    loadtest` scale it out to max_copies (2), the new copy serving; fifteen idle minutes below
    90% of it scale it back in to min_copies (1, Gpt2Stack's default: GptjStack's test scales a
    component to zero)."""
    settings = {
        "gpt2.endpoint_mode": "inference-component",
        "gpt2.target_invocations_per_copy": TARGET,
        "gpt2.max_copies": 2,
    }
    sagemaker = local_aws.client("sagemaker")
    with deployed(bootstrapped, local_aws, tmp_path, e2e_artifacts, settings) as (changed, outputs):
        endpoint, component = outputs["EndpointName"], outputs["InferenceComponentName"]
        send = real_time(local_aws, outputs, InferenceComponentName=component)

        def component_now() -> dict[str, Any]:
            return dict(sagemaker.describe_inference_component(InferenceComponentName=component))

        model = component_now()["Specification"]["ModelName"]
        models = {m["ModelName"] for m in sagemaker.list_models()["Models"]}
        # The component's rollback alarms watch its own metrics, not the endpoint's.
        for alarm in rollback_alarms(local_aws, "Gpt2Stack"):
            assert described(local_aws, alarm)["Dimensions"] == [{"Name": "InferenceComponentName", "Value": component}]
        rolled_back_by_its_failures(
            bootstrapped,
            local_aws,
            changed,
            component_key(component),
            send,
            lambda: str(component_now().get("FailureReason", "")),
        )
        assert component_now()["InferenceComponentStatus"] == "InService"
        assert component_now()["Specification"]["ModelName"] == model, "SageMaker rolled the component back"
        assert update_check(local_aws, "Gpt2Stack") == model, "CloudFormation's state matches the component"
        # The stack's rollback deleted the model the update made.
        assert {m["ModelName"] for m in sagemaker.list_models()["Models"]} == models
        assert send() == 200
        assert copies(local_aws, component) == (1, 1)
        # The update's failed requests made a minute above the target: idle minutes first, so that
        # the scale-out counts only the load's (target tracking's high alarm reads three minutes).
        for _ in range(3):
            local_aws.clock.advance(60)
        minutes = busy_minutes_until(
            local_aws,
            tmp_path,
            lambda: copies(local_aws, component)[0] >= 2,
            {"InferenceComponentName": component},
            "--endpoint",
            endpoint,
            "--inference-component",
            component,
        )
        assert minutes >= 3, "target tracking scales out on three minutes above the target"
        until(lambda: copies(local_aws, component) == (2, 2), "the scale-out's copy")
        hosted = hosting_plane().find((local_aws.account, local_aws.region, component_key(component)))
        assert hosted is not None and hosted.live is not None
        assert all(c.ping() == 200 for c in hosted.live.instances[component_now()["VariantName"]]), "each copy answers"
        idle = minutes_while(local_aws, lambda: copies(local_aws, component)[0] > 1, "the scale-in", most=20)
        assert idle >= 15, "target tracking scales in on fifteen minutes below 90% of the target"
        until(lambda: copies(local_aws, component) == (1, 1), "the copy stopped")
        local_aws.clock.advance(20 * 60)
        assert copies(local_aws, component) == (1, 1), "min_copies bounds the scale-in"
        assert send() == 200
