"""`cdk deploy Inf2Stack -c inf2.platform=sagemaker` with the real CDK CLI on the local AWS, one
deploy shared by the assertions: the endpoint's LMI neuronx container (local_aws/lmi_container.py:
the bundle's handler behind the DJL front-end stand-in, under the image's transformers) answers
the seed's OPT request and every Inf2 body the docs give through InvokeEndpoint; a guarded update
whose rollback alarm is in ALARM leaves the endpoint on its config and rolls the stack back; and
`cdk destroy` leaves nothing, no container included."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from local_aws import LocalAws
from local_aws.cdk import Cdk, CdkError
from tests.docs_pages import Body, bodies_for
from tests.e2e.helpers import (
    assembly_of,
    assert_destroyed,
    invoke,
    resources_of_stack,
    rollback_alarms,
    stack_of,
    this_sessions_containers,
    update_check,
)

pytestmark = pytest.mark.e2e
STACK = "Inf2Stack"
#: On SageMaker, with the e2e tests' quick alarms and bake (tests/e2e/helpers.py's QUICK_UPDATES).
SAGEMAKER: dict[str, Any] = {"inf2.platform": "sagemaker", "inf2.alarm_evaluation_periods": 1, "inf2.update_wait_s": 60}
SEED_REQUEST = {"text": ["Hello, I am a language model,"], "seq_length": 32, "do_sample": False}


def sagemaker_bundle(artifacts: Path, root: Path, **settings: Any) -> Path:
    """A copy of the e2e artifacts whose tiny inf2 bundle is built for platform sagemaker."""
    out = Path(shutil.copytree(artifacts, root))
    pairs = [f"{k}={v}" for k, v in {"inf2.platform": "sagemaker", **settings}.items()]
    command = [sys.executable, "-m", "artifacts_builder", "inf2", "--tiny", "--out", str(out)]
    subprocess.run(
        [*command, *(a for pair in pairs for a in ("-c", pair))], check=True, capture_output=True, timeout=300
    )
    return out


def check_answer(answer: Any, prompts: list[str]) -> None:
    assert [o[: len(p)] for o, p in zip(answer["outputs"], prompts, strict=True)] == prompts, answer
    assert all(d["generated_tokens"] > 0 for d in answer["details"]), answer


def test_deploy_answer_roll_back_and_destroy(
    bootstrapped: Cdk, local_aws: LocalAws, e2e_artifacts: Path, tmp_path: Path
) -> None:
    # The bundle is built with the settings it is deployed with (its serving.properties holds them).
    base = assembly_of(tmp_path / "cdk.out", local_aws, sagemaker_bundle(e2e_artifacts, tmp_path / "a"), **SAGEMAKER)
    # A new bundle (another batching delay) is a new model: the update goes through the guardrails.
    delay = {"inf2.max_batch_delay_ms": 50}
    changed = assembly_of(
        tmp_path / "cdk.out-2",
        local_aws,
        sagemaker_bundle(e2e_artifacts, tmp_path / "b", **delay),
        **SAGEMAKER,
        **delay,
    )
    sagemaker, cloudwatch = local_aws.client("sagemaker"), local_aws.client("cloudwatch")

    bootstrapped.deploy(base.path, [STACK])
    alarm = rollback_alarms(local_aws, STACK)[0]
    try:
        name = local_aws.stack_outputs(STACK)["EndpointName"]
        endpoint = sagemaker.describe_endpoint(EndpointName=name)
        (variant,) = endpoint["ProductionVariants"]
        assert (endpoint["EndpointStatus"], variant["CurrentInstanceCount"]) == ("InService", 1)
        config = endpoint["EndpointConfigName"]
        check_answer(invoke(local_aws, STACK, SEED_REQUEST), SEED_REQUEST["text"])
        for documented in bodies_for("inf2"):
            check_answer(invoke(local_aws, STACK, documented.body), documented.body["text"])

        cloudwatch.set_alarm_state(AlarmName=alarm, StateValue="ALARM", StateReason="a regression, for the test")
        with pytest.raises(CdkError) as failed:
            bootstrapped.deploy(changed.path, [STACK])
        assert "EndpointUpdateCheck" in failed.value.args[0]
        assert stack_of(local_aws, STACK)["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
        endpoint = sagemaker.describe_endpoint(EndpointName=name)
        assert (endpoint["EndpointStatus"], endpoint["EndpointConfigName"]) == ("InService", config)
        assert alarm in endpoint["FailureReason"]
        assert update_check(local_aws, STACK) == config, "CloudFormation's state matches the endpoint"
        check_answer(invoke(local_aws, STACK, SEED_REQUEST), SEED_REQUEST["text"])
    finally:
        cloudwatch.set_alarm_state(AlarmName=alarm, StateValue="OK", StateReason="the test is over")
        deployed = resources_of_stack(local_aws, STACK)
        bootstrapped.destroy(base.path, [STACK])
    assert_destroyed(local_aws, STACK, deployed, base.template(STACK))
    assert this_sessions_containers() == [], "deleting the endpoint stops its container"


def test_the_documented_bodies_are_found() -> None:
    """The body OPERATIONS.md gives for the endpoint is among those the test above sends."""
    bodies: list[Body] = bodies_for("inf2")
    assert [b.body for b in bodies] == [{"text": ["Hello, I am a language model,"], "seq_length": 64}]
