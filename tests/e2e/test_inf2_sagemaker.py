"""`cdk deploy Inf2Stack -c inf2.platform=sagemaker` with the real CDK CLI on the local AWS, one
deploy shared by the assertions: the endpoint's LMI neuronx container (local_aws/sagemaker/lmi_container.py:
the bundle's handler behind the DJL front-end stand-in, under the image's transformers) answers
the seed's OPT request and every Inf2 body the docs give through InvokeEndpoint; its ML storage
volume filling up puts the disk alarm in ALARM through the DiskUtilization the local AWS measures
(ml.inf2 has no GPU metric), and emptied back to OK; a slow answer (a long generation) the latency
alarm, through the ModelLatency measured, and a quick one back to OK; load scales it
out to max_capacity and idleness back to min_capacity, by Application Auto Scaling's target
tracking on the invocations the local AWS measures; a guarded update to a model that refuses the
requests is rolled back by the model errors those requests produce (its rollback alarm, evaluated
by the local CloudWatch on the test's clock), and the stack with it; and `cdk destroy` leaves
nothing, no container included."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from local_aws import LocalAws
from local_aws.cli.cdk import Cdk, CdkError
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
from tests.e2e.oncall import oncall, runtime_errors

pytestmark = pytest.mark.e2e
STACK = "Inf2Stack"
#: On SageMaker, with the e2e tests' quick alarms and bake (tests/e2e/helpers.py's QUICK_UPDATES).
#: Invocations per instance per minute that scaling aims at, and model errors a period may have.
TARGET = 1
ERRORS_ALARM_THRESHOLD = 1
#: The latency alarm's threshold: the seed's answer takes about 0.15 s here, one of 512 positions 1.2 s.
LATENCY_ALARM_MS = 500
#: DJL's job queue in this deploy.
JOB_QUEUE_SIZE = 2
#: The disk alarm's threshold (the default), percent of the ML storage volume.
DISK_FULL_PERCENT = 90
SAGEMAKER: dict[str, Any] = {
    "inf2.platform": "sagemaker",
    "inf2.alarm_evaluation_periods": 1,
    "inf2.update_wait_s": 60,
    "inf2.target_invocations_per_instance": TARGET,
    "inf2.model_errors_alarm_threshold": ERRORS_ALARM_THRESHOLD,
    "inf2.latency_alarm_ms": LATENCY_ALARM_MS,
    # DJL's job queue (the server's job_queue_size, 1000 by default): a few requests at once
    # overload it, the 5xx alarm's fault.
    "inf2.environment": {"SERVING_JOB_QUEUE_SIZE": str(JOB_QUEUE_SIZE)},
}
SEED_PROMPTS = ["Hello, I am a language model,"]
SEED_REQUEST = {"text": SEED_PROMPTS, "seq_length": 32, "do_sample": False}
#: A generation to 384 of the compiled graphs' 512 positions: the slow answers of the latency
#: alarm's fault, about 0.9 s here alone (1.8 times the 500 ms threshold). The handler refuses a
#: request it estimates past its 45 s budget; that estimate once counted a quick call's fixed cost
#: per position (a fresh clone's `make test` at e77d3a5: 512 positions put at 46 s, refused with
#: 413). It now keeps the fixed cost apart (serving/inf2/model.py `PassCost`); 384 keeps a margin
#: for the host slowing down beside it all the same.
SLOW_REQUEST = {**SEED_REQUEST, "seq_length": 384}


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


def model_error(aws: LocalAws, request: Any) -> bool:
    """Whether InvokeEndpoint on the stack's endpoint answers ModelError (the container refused)."""
    try:
        invoke(aws, STACK, request)
    except ClientError as exc:
        assert exc.response["Error"]["Code"] == "ModelError", exc
        return True
    return False


def until(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    # clock: a generous wait (its callers give minutes for what takes seconds here); its expiry
    # only fails what never happens
    deadline = time.monotonic() + timeout_s
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout_s:.0f} s"  # clock: the same
        time.sleep(0.2)
    return found


def minutes_until(aws: LocalAws, check: Callable[[], bool], what: str, most: int = 3) -> None:
    """The local AWS's clock moved a minute at a time (its alarms evaluated, its metrics
    published) until `check` holds, at most `most` minutes."""
    for _ in range(most):
        aws.clock.advance(60)
        if check():
            return
    metrics = aws.client("cloudwatch").describe_alarms()["MetricAlarms"]
    raise AssertionError(
        f"{what} did not happen within {most} minutes: {[(a['AlarmName'], a['StateReason']) for a in metrics]}"
    )


def alarm_on(aws: LocalAws, metric: str) -> Any:
    """The stack's one alarm on SageMaker's `metric`."""
    (alarm,) = [a for a in aws.client("cloudwatch").describe_alarms()["MetricAlarms"] if a["MetricName"] == metric]
    return alarm


def instances(aws: LocalAws, name: str) -> tuple[int, int]:
    (variant,) = aws.client("sagemaker").describe_endpoint(EndpointName=name)["ProductionVariants"]
    return variant["DesiredInstanceCount"], variant["CurrentInstanceCount"]


def test_deploy_answer_scale_roll_back_and_destroy(
    bootstrapped: Cdk, local_aws: LocalAws, e2e_artifacts: Path, tmp_path: Path
) -> None:
    # The bundle is built with the settings it is deployed with (its serving.properties holds them).
    base = assembly_of(tmp_path / "cdk.out", local_aws, sagemaker_bundle(e2e_artifacts, tmp_path / "a"), **SAGEMAKER)
    # A new bundle compiled for 16 positions is a new model that refuses the seed's request (400:
    # seq_length past n_positions), which the deployed model answers.
    short = {"inf2.n_positions": 16}
    broken = assembly_of(
        tmp_path / "cdk.out-2",
        local_aws,
        sagemaker_bundle(e2e_artifacts, tmp_path / "b", **short),
        **SAGEMAKER,
        **short,
    )
    sagemaker, cloudwatch = local_aws.client("sagemaker"), local_aws.client("cloudwatch")

    bootstrapped.deploy(base.path, [STACK])
    try:
        name = local_aws.stack_outputs(STACK)["EndpointName"]
        endpoint = sagemaker.describe_endpoint(EndpointName=name)
        assert endpoint["EndpointStatus"] == "InService" and instances(local_aws, name) == (1, 1)
        config = endpoint["EndpointConfigName"]
        check_answer(invoke(local_aws, STACK, SEED_REQUEST), SEED_PROMPTS)
        for documented in bodies_for("inf2"):
            check_answer(invoke(local_aws, STACK, documented.body), documented.body["text"])

        def state(metric: str) -> str:
            return str(alarm_on(local_aws, metric)["StateValue"])

        with oncall(local_aws, STACK) as topic:
            # The ML storage volume filling up (the container's /tmp holds the hub's and the Neuron
            # compiler's caches): DiskUtilization, from what the instance holds, puts the disk alarm in
            # ALARM a minute later; emptied, back to OK. ml.inf2 publishes no accelerator metric.
            (variant,) = sagemaker.describe_endpoint_config(EndpointConfigName=config)["ProductionVariants"]
            (run_dir,) = {c.run_dir for c in this_sessions_containers() if "lmi_entrypoint" in c.cmdline}
            filler = Path(run_dir) / "tmp" / "neuron-cache-filler"
            with filler.open("wb") as sparse:  # a hole: no real disk is used
                sparse.truncate(int(variant["VolumeSizeInGB"] * 1024**3 * (DISK_FULL_PERCENT + 5) / 100))
            disk = alarm_on(local_aws, "DiskUtilization")
            assert disk["Threshold"] == DISK_FULL_PERCENT and disk["StateValue"] != "ALARM", disk
            minutes_until(local_aws, lambda: state("DiskUtilization") == "ALARM", "disk ALARM")
            filler.unlink()
            minutes_until(local_aws, lambda: state("DiskUtilization") == "OK", "disk OK")

            # A slow answer: a minute whose mean ModelLatency is above the threshold (the minutes
            # above left the seed's quick answers behind) puts the latency alarm in ALARM; a minute of
            # a quick answer, back to OK.
            check_answer(invoke(local_aws, STACK, SLOW_REQUEST), SEED_PROMPTS)
            minutes_until(local_aws, lambda: state("ModelLatency") == "ALARM", "latency ALARM")
            check_answer(invoke(local_aws, STACK, SEED_REQUEST), SEED_PROMPTS)
            minutes_until(local_aws, lambda: state("ModelLatency") == "OK", "latency OK", most=1)

            # Overload: more slow requests at once than DJL's batch and job queue take; DJL refuses
            # the rest with its 503 (WlmCapacityException), and Invocation5XXErrors puts the 5xx alarm
            # in ALARM; a minute without, back to OK.
            errors_5xx = int(alarm_on(local_aws, "Invocation5XXErrors")["Threshold"])
            statuses = runtime_errors(local_aws, STACK, [json.dumps(SLOW_REQUEST).encode()] * (3 * errors_5xx + 1))
            assert statuses.count(503) >= errors_5xx and 200 in statuses, statuses
            minutes_until(local_aws, lambda: state("Invocation5XXErrors") == "ALARM", "5xx ALARM")
            minutes_until(local_aws, lambda: state("Invocation5XXErrors") == "OK", "5xx OK")
            # CloudWatch told the on-call queue of each alarm's changes (heard in the order they came).
            for metric in ("DiskUtilization", "ModelLatency", "Invocation5XXErrors"):
                alarm = alarm_on(local_aws, metric)["AlarmName"]
                assert topic.heard(alarm, "ALARM") and topic.heard(alarm, "OK")

        # Load: more invocations per instance than the target, three minutes running (target
        # tracking's high alarm), scales out, and no further than max_capacity: the policy wants
        # ceil(1 x 3 / 1) = 3 instances. Fifteen idle minutes (its low alarm) scale in, to
        # min_capacity, not to the 0 the policy wants. Each instance is a container of its own.
        for _ in range(3):
            for _ in range(2 * TARGET + 1):
                check_answer(invoke(local_aws, STACK, SEED_REQUEST), SEED_PROMPTS)
            local_aws.clock.advance(60)
        assert instances(local_aws, name)[0] == 2, "max_capacity bounds the scale-out"
        until(lambda: instances(local_aws, name) == (2, 2), 120, "the scale-out to 2 instances")
        check_answer(invoke(local_aws, STACK, SEED_REQUEST), SEED_PROMPTS)
        for _ in range(16):
            local_aws.clock.advance(60)
        assert instances(local_aws, name)[0] == 1, "min_capacity bounds the scale-in"
        until(lambda: instances(local_aws, name) == (1, 1), 120, "the scale-in to 1 instance")

        # A guarded update to the model that refuses the requests: its model errors, from the real
        # invocations, put a rollback alarm in ALARM while it bakes, and SageMaker rolls it back.
        failed: list[BaseException] = []

        def update() -> None:
            try:
                bootstrapped.deploy(broken.path, [STACK])
            except BaseException as exc:
                failed.append(exc)

        updating = threading.Thread(target=update)
        updating.start()
        until(lambda: model_error(local_aws, SEED_REQUEST), 180, "the new model serving")
        for _ in range(ERRORS_ALARM_THRESHOLD + 1):
            model_error(local_aws, SEED_REQUEST)
        local_aws.clock.advance(60)
        updating.join(timeout=300)
        assert not updating.is_alive()
        (error,) = failed
        assert isinstance(error, CdkError) and "EndpointUpdateCheck" in error.args[0], error
        assert stack_of(local_aws, STACK)["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"
        endpoint = sagemaker.describe_endpoint(EndpointName=name)
        assert (endpoint["EndpointStatus"], endpoint["EndpointConfigName"]) == ("InService", config)
        (tripped,) = [a for a in rollback_alarms(local_aws, STACK) if a in endpoint["FailureReason"]]
        assert "ModelErrors" in tripped
        assert update_check(local_aws, STACK) == config, "CloudFormation's state matches the endpoint"
        check_answer(invoke(local_aws, STACK, SEED_REQUEST), SEED_PROMPTS)
    finally:
        deployed = resources_of_stack(local_aws, STACK)
        bootstrapped.destroy(base.path, [STACK])
    assert_destroyed(local_aws, STACK, deployed, base.template(STACK))
    assert this_sessions_containers() == [], "deleting the endpoint stops its containers"
    assert cloudwatch.describe_alarms()["MetricAlarms"] == [], "the stack's alarms are deleted with it"


def test_the_documented_bodies_are_found() -> None:
    """The body OPERATIONS.md gives for the endpoint is among those the test above sends."""
    bodies: list[Body] = bodies_for("inf2")
    assert [b.body for b in bodies] == [{"text": ["Hello, I am a language model,"], "seq_length": 64}]
