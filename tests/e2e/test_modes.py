"""The endpoint modes deployed with the real CDK CLI on the local AWS: GPT-J as an inference
component that may scale to zero answers through InferenceComponentName, and GPT-2 as an async
endpoint answers an InvokeEndpointAsync through S3 and its success topic. Each scales in to zero
when idle and back out on the request that finds no capacity, through its deployed policies and
alarms; the alarms that notify go into ALARM on their faults and reach an SQS subscriber. GPT-2
as a real-time endpoint scales out under `python -m loadtest` and back in when idle."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psutil
import pytest
from botocore.exceptions import ClientError

from local_aws import LocalAws
from local_aws.cli.cdk import Cdk
from local_aws.sagemaker.async_inference import pending_async
from local_aws.sagemaker.containers import Container, running_containers
from local_aws.sagemaker.runtime import hosting_plane
from project_config import HfToolkitEngine
from tests.e2e.helpers import assembly_of, invoke, loadtest, resources_of_stack, update_check
from tests.e2e.oncall import (
    described,
    from_ok,
    instance_container,
    model_errors_and_capacity_faults_fire_and_clear,
    oncall,
    processes_of,
    rollback_alarms_fire_and_clear,
    sent_to,
    stack_alarms,
    stall_fires_and_clears,
    stalled,
    toolkit_overload_fires_and_clears,
)
from tests.e2e.test_invoke_endpoint import SEED_GPTJ_PROMPT
from tests.infra.helpers import ROOT
from tests.local_aws.helpers import container_output

pytestmark = pytest.mark.e2e


def load_test(aws: LocalAws, tmp_path: Path, request: dict[str, Any], *args: str) -> dict[str, Any]:
    """A short `python -m loadtest` run (levels 1 and 2, two seconds each); its report."""
    (tmp_path / "request.json").write_text(json.dumps({"content_type": "application/json", "body": request}))
    result = loadtest(aws, "--request", str(tmp_path / "request.json"), "--concurrency", "1", "2", "--seconds", "2",
                      "--metrics-wait", "0", "--warmup", "1", "--out", str(tmp_path / "load"), *args)  # fmt: skip
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads((tmp_path / "load" / "report.json").read_text())
    for level in report["levels"]:
        assert level["successes"] > 0 and level["errors"] == {}, level
    return report


def instances(aws: LocalAws, endpoint: str) -> tuple[int, int]:
    """The endpoint's (desired, current) instance count."""
    (variant,) = aws.client("sagemaker").describe_endpoint(EndpointName=endpoint)["ProductionVariants"]
    return int(variant["DesiredInstanceCount"]), int(variant["CurrentInstanceCount"])


def copies(aws: LocalAws, component: str) -> tuple[int, int]:
    """The inference component's (desired, current) copy count."""
    described = aws.client("sagemaker").describe_inference_component(InferenceComponentName=component)
    return int(described["RuntimeConfig"]["DesiredCopyCount"]), int(described["RuntimeConfig"]["CurrentCopyCount"])


def until(done: Callable[[], bool], what: str, timeout_s: float = 120) -> None:
    """Real time, for the containers to follow a count."""
    # clock: a generous wait (two minutes by default) for containers that start within seconds
    # here; its expiry only fails what never happens
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s"  # clock: the same wait
        time.sleep(0.2)


def minutes_while(aws: LocalAws, going: Callable[[], bool], what: str, most: int) -> int:
    """CloudWatch's clock moved a minute at a time while `going`, at most `most`; the minutes."""
    for minute in range(most):
        if not going():
            return minute
        aws.clock.advance(60)
    assert not going(), f"{what}: not within {most} minutes"
    return most


#: An instance's id, which names its stream (local_aws/sagemaker/logs.py).
INSTANCE = "i-[0-9a-f]{17}"
#: The GPT-2 server's start-up line (serving/gpt2/serve).
GPT2_STARTED = "serve: starting on port"


def started_in(aws: LocalAws, group: str, stream: str, line: str) -> None:
    """`line`, a server's start-up line, in the one stream of `group` (its name matching the
    regex `stream`): what the container wrote, shipped to CloudWatch Logs as its role."""
    output = container_output(aws, group, line)
    assert len(output) == 1 and re.fullmatch(stream, next(iter(output))), output.keys()
    assert any(line in m for m in next(iter(output.values()))), output


def test_gptj_as_an_inference_component_scaled_to_zero_answers_by_its_name(
    bootstrapped: Cdk, local_aws: LocalAws, tmp_path: Path, e2e_artifacts: Path
) -> None:
    assembly = assembly_of(
        tmp_path / "cdk.out",
        local_aws,
        e2e_artifacts,
        **{"gptj.endpoint_mode": "inference-component", "gptj.min_copies": 0},
    )
    bootstrapped.deploy(assembly.path, ["GptjStack"])
    try:
        outputs = local_aws.stack_outputs("GptjStack")
        endpoint, component = outputs["EndpointName"], outputs["InferenceComponentName"]
        sagemaker, runtime = local_aws.client("sagemaker"), local_aws.client("sagemaker-runtime")
        described = sagemaker.describe_inference_component(InferenceComponentName=component)
        assert described["InferenceComponentStatus"] == "InService"
        assert described["EndpointName"] == endpoint
        # The update check reads the model the component runs.
        assert update_check(local_aws, "GptjStack") == described["Specification"]["ModelName"]
        # The copy's output, written as the execution role to the component's log group, one
        # stream for its instance: Multi Model Server's start-up line among it.
        started_in(local_aws, f"/aws/sagemaker/InferenceComponents/{component}", INSTANCE, "Model server started.")
        request = {"inputs": SEED_GPTJ_PROMPT, "parameters": {"max_new_tokens": 8}}
        answer = runtime.invoke_endpoint(
            EndpointName=endpoint,
            InferenceComponentName=component,
            Body=json.dumps(request).encode(),
            ContentType="application/json",
        )
        (generated,) = json.loads(answer["Body"].read())
        assert generated["generated_text"].startswith(SEED_GPTJ_PROMPT)
        with pytest.raises(ClientError) as unnamed:
            runtime.invoke_endpoint(EndpointName=endpoint, Body=b"{}", ContentType="application/json")
        assert "Inference Component Name header is required" in unnamed.value.response["Error"]["Message"]
        # The load tester drives the component by its name.
        report = load_test(local_aws, tmp_path, request, "--endpoint", endpoint, "--inference-component", component)
        assert report["target"] == {"endpoint": endpoint, "inference_component": component}
        # Requests the copy refuses (its 400) put the model-error alarm (the component's
        # InvocationModelErrors) in ALARM; the copy's instance volume filling up and GPU memory
        # (fed) put the capacity alarms (the variant's instance metrics) in ALARM; the copy's
        # model server overloaded, the latency and 5xx alarms (the component's ModelLatency and
        # Invocation5XXErrors); each back to OK without its fault, the on-call queue subscribed
        # to the alarm topic hearing each.
        alarms = stack_alarms(local_aws, "GptjStack")
        assert {"ModelErrorsAlarm", "DiskAlarm", "GpuMemoryAlarm"} <= set(alarms), alarms

        def refused() -> None:
            with pytest.raises(ClientError):
                runtime.invoke_endpoint(EndpointName=endpoint, InferenceComponentName=component,
                                        Body=b'{"parameters": {}}', ContentType="application/json")  # fmt: skip

        with oncall(local_aws, "GptjStack") as topic:
            model_errors_and_capacity_faults_fire_and_clear(local_aws, "GptjStack", topic, refused)
            engine = assembly.config.gptj.engine
            assert isinstance(engine, HfToolkitEngine)
            toolkit_overload_fires_and_clears(local_aws, "GptjStack", topic, engine.model_server_workers)
        # The faults were the copy's, not its absence: it served throughout (the scale-in to
        # zero comes after).
        assert copies(local_aws, component) == (1, 1)
        # Idle, the component scales in to zero copies (target tracking on InvocationsPerCopy);
        # a request then finds no copy (NoCapacityInvocationFailures), whose alarm's step policy
        # adds one back, which answers.
        minutes_while(local_aws, lambda: copies(local_aws, component)[0] > 0, "the scale-in to zero", most=30)
        until(lambda: copies(local_aws, component) == (0, 0), "the copy stopped")
        with pytest.raises(ClientError):
            runtime.invoke_endpoint(EndpointName=endpoint, InferenceComponentName=component,
                                    Body=json.dumps(request).encode(), ContentType="application/json")  # fmt: skip
        minutes_while(local_aws, lambda: copies(local_aws, component)[0] == 0, "the scale-out from zero", most=3)
        until(lambda: copies(local_aws, component) == (1, 1), "the copy started", timeout_s=180)
        answer = runtime.invoke_endpoint(
            EndpointName=endpoint,
            InferenceComponentName=component,
            Body=json.dumps(request).encode(),
            ContentType="application/json",
        )
        assert json.loads(answer["Body"].read())[0]["generated_text"].startswith(SEED_GPTJ_PROMPT)
        # Scale to zero and the way back, as deployed: copies from 0, instances from 0, and the
        # alarm on requests that found no copy whose action is the step policy adding one.
        scaling = local_aws.client("application-autoscaling")
        (target,) = scaling.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
        assert (target["ResourceId"], target["MinCapacity"]) == (f"inference-component/{component}", 0)
        policies = scaling.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"]
        step = next(p for p in policies if p["PolicyType"] == "StepScaling")
        alarms = local_aws.client("cloudwatch").describe_alarms()["MetricAlarms"]
        back = next(a for a in alarms if a["MetricName"] == "NoCapacityInvocationFailures")
        assert back["AlarmActions"] == [step["PolicyARN"]]
        config = sagemaker.describe_endpoint_config(
            EndpointConfigName=sagemaker.describe_endpoint(EndpointName=endpoint)["EndpointConfigName"]
        )
        (variant,) = config["ProductionVariants"]
        assert variant["ManagedInstanceScaling"]["MinInstanceCount"] == 0 and "ModelName" not in variant
    finally:
        bootstrapped.destroy(assembly.path, ["GptjStack"])
    assert not local_aws.client("sagemaker").list_inference_components()["InferenceComponents"]
    assert not running_containers()


def wait_for_object(aws: LocalAws, *urls: str, timeout_s: float = 120) -> tuple[str, bytes]:
    """The first of `urls` (s3://bucket/key) to exist, and its body."""
    s3 = aws.client("s3")
    # clock: a generous wait (two minutes by default) for an answer written within seconds here
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:  # clock: the same wait
        for url in urls:
            bucket, _, key = url.removeprefix("s3://").partition("/")
            try:
                return url, s3.get_object(Bucket=bucket, Key=key)["Body"].read()
            except ClientError:
                continue
        time.sleep(0.2)
    raise AssertionError(f"nothing at {urls} after {timeout_s} s")


def subscribed_queue(aws: LocalAws, topic_arn: str) -> str:
    sqs = aws.client("sqs")
    queue = sqs.create_queue(QueueName="async-results")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    aws.client("sns").subscribe(
        TopicArn=topic_arn, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"}
    )
    return str(queue)


def scaled_out_under_load(aws: LocalAws, tmp_path: Path, endpoint: str) -> None:
    """`python -m loadtest --async` at concurrency 16 (an instance works on one request at a time)
    while the clock moves a minute a second, until the backlog's target tracking (5 per instance)
    scales the endpoint out (at most its 4 instances); its containers started, and the load
    tester's report without an error. Each request asks for 4 x 24 tokens: the queue grows faster
    than one instance empties it (about 12 of the 16 queued at each look here, where 8 callers of
    a one-token answer left about 2)."""
    request = tmp_path / "load.json"
    body = {"input": "amazon", "parameters": {"max_new_tokens": 24, "num_return_sequences": 4, "do_sample": True}}
    request.write_text(json.dumps({"content_type": "application/json", "body": body}))
    out = tmp_path / "scale-out"
    load = subprocess.Popen(
        [sys.executable, "-m", "loadtest", "--endpoint", endpoint, "--async", "--request", str(request),
         "--concurrency", "16", "--seconds", "10", "--metrics-wait", "0", "--warmup", "1", "--out", str(out)],
        cwd=ROOT, env=aws.environment(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        # The clock moves only while requests are queued: a minute of it passing while the load
        # tester still starts (seconds on a slow host) would measure an idle endpoint and scale
        # it in, not out.
        while instances(aws, endpoint)[0] < 2 and load.poll() is None:
            time.sleep(1)
            if pending_async():
                aws.clock.advance(60)
        _, stderr = load.communicate(timeout=120)
    finally:
        if load.poll() is None:
            load.kill()
            load.wait()
    assert load.returncode == 0, stderr
    (level,) = json.loads((out / "report.json").read_text())["levels"]
    assert level["successes"] > 0 and level["errors"] == {}, level
    desired, _ = instances(aws, endpoint)
    assert 2 <= desired <= 4, desired
    until(lambda: instances(aws, endpoint) == (desired, desired), "the scale-out's containers")


def gunicorn_workers(container: Container) -> list[psutil.Process]:
    """The GPT-2 container's gunicorn workers (its master's children, serving/gpt2/serve)."""
    (master,) = processes_of(container, lambda p: "gunicorn" in " ".join(p.cmdline()) and "gunicorn" not in " ".join(
        p.parent().cmdline()))  # fmt: skip
    return [p for p in master.children() if p.status() != psutil.STATUS_ZOMBIE]


def a_crashed_worker_answers_503_while_it_reloads(aws: LocalAws, endpoint: str, bucket: str) -> None:
    """GPT-2's gunicorn workers killed (a crash): gunicorn starts new ones, and a request that
    reaches a new one before its model is loaded is answered 503 "loading" (serving/gpt2/
    predictor.py). The new workers are held (stopped) from their start until the request is at
    the container, so that it arrives while they load."""
    container, _ = instance_container(aws, "Gpt2Stack")
    old = gunicorn_workers(container)
    for worker in old:
        worker.kill()
    # clock: a generous wait for workers gunicorn forks at once
    deadline = time.monotonic() + 60
    while len(new := [w for w in gunicorn_workers(container) if w not in old]) < len(old):
        assert time.monotonic() < deadline, "gunicorn started no new worker"  # clock: the same wait
        time.sleep(0.01)
    with stalled(new):
        queued = aws.client("sagemaker-runtime").invoke_endpoint_async(
            EndpointName=endpoint, InputLocation=f"s3://{bucket}/input/seed.json", ContentType="application/json"
        )
        sent_to(container)
        time.sleep(1)  # nginx hands it on to gunicorn's socket, where it waits for a worker
    url, body = wait_for_object(aws, queued["OutputLocation"], queued["FailureLocation"])
    assert url == queued["FailureLocation"] and b"503" in body, body


def async_alarms_fire_on_their_faults(aws: LocalAws, bucket: str, endpoint: str) -> None:
    """Each notifying alarm of the async endpoint into ALARM on its fault, heard by an SQS queue
    subscribed to the alarm topic, and back to OK: queued requests that fail (InvocationFailures,
    the model-error alarm of this mode), the ML storage volume filling up, GPU memory (fed), the
    instance stalled while it holds a request (ModelLatency) and a crashed worker's 503
    (Invocation5XXErrors; the async page lists both among the few metrics an async endpoint
    publishes)."""
    alarms = stack_alarms(aws, "Gpt2Stack")
    assert described(aws, alarms["LatencyAlarm"])["MetricName"] == "ModelLatency"
    assert described(aws, alarms["Errors5xxAlarm"])["MetricName"] == "Invocation5XXErrors"
    assert described(aws, alarms["ModelErrorsAlarm"])["MetricName"] == "InvocationFailures"
    runtime = aws.client("sagemaker-runtime")

    def queued(key: str) -> str:
        """The S3 location of the answer to an asynchronous request of the object at `key`."""
        sent = runtime.invoke_endpoint_async(
            EndpointName=endpoint, InputLocation=f"s3://{bucket}/{key}", ContentType="application/json"
        )
        url, _ = wait_for_object(aws, sent["OutputLocation"], sent["FailureLocation"])
        return str(url)

    with oncall(aws, "Gpt2Stack") as topic:
        model_errors_and_capacity_faults_fire_and_clear(
            aws, "Gpt2Stack", topic, lambda: queued("input/broken.json").startswith(f"s3://{bucket}/failure/")
        )
        stall_fires_and_clears(aws, "Gpt2Stack", topic, lambda: queued("input/seed.json"))
        from_ok(aws, "Gpt2Stack", topic, ["Errors5xxAlarm"])
        a_crashed_worker_answers_503_while_it_reloads(aws, endpoint, bucket)
        rollback_alarms_fire_and_clear(aws, "Gpt2Stack", topic, ["Errors5xxAlarm"])


def test_gpt2_as_an_async_endpoint_answers_through_s3_and_its_topics(
    bootstrapped: Cdk, local_aws: LocalAws, tmp_path: Path, e2e_artifacts: Path
) -> None:
    # One request at a time per instance, as for a model that fills its GPU: a load past the
    # backlog target queues (tests/e2e/test_modes.py: scaled_out_under_load).
    # One crashed worker's 503 is the 5xx alarm's fault here (a_crashed_worker_answers_503...).
    settings = {
        "gpt2.endpoint_mode": "async",
        "gpt2.async_max_concurrency": "1",
        "gpt2.errors_5xx_alarm_threshold": "1",
    }
    assembly = assembly_of(tmp_path / "cdk.out", local_aws, e2e_artifacts, **settings)
    bootstrapped.deploy(assembly.path, ["Gpt2Stack"])
    try:
        outputs = local_aws.stack_outputs("Gpt2Stack")
        endpoint, bucket = outputs["EndpointName"], outputs["AsyncBucket"]
        sagemaker = local_aws.client("sagemaker")
        config = sagemaker.describe_endpoint_config(
            EndpointConfigName=sagemaker.describe_endpoint(EndpointName=endpoint)["EndpointConfigName"]
        )
        notify: dict[str, Any] = config["AsyncInferenceConfig"]["OutputConfig"]["NotificationConfig"]
        # The instance's output in the endpoint's log group, stream <variant>/<instance-id>:
        # the GPT-2 server's start-up line among it.
        variant = assembly.config.gpt2.endpoint.variant_name
        started_in(local_aws, f"/aws/sagemaker/Endpoints/{endpoint}", rf"{variant}/{INSTANCE}", GPT2_STARTED)
        results = subscribed_queue(local_aws, notify["SuccessTopic"])
        s3, runtime = local_aws.client("s3"), local_aws.client("sagemaker-runtime")
        s3.put_object(Bucket=bucket, Key="input/seed.json", Body=json.dumps({"input": "amazon"}).encode())
        s3.put_object(Bucket=bucket, Key="input/broken.json", Body=b'{"input": ')
        answered = runtime.invoke_endpoint_async(
            EndpointName=endpoint, InputLocation=f"s3://{bucket}/input/seed.json", ContentType="application/json"
        )
        failed = runtime.invoke_endpoint_async(
            EndpointName=endpoint, InputLocation=f"s3://{bucket}/input/broken.json", ContentType="application/json"
        )
        assert answered["OutputLocation"].startswith(f"s3://{bucket}/output/")
        url, body = wait_for_object(local_aws, answered["OutputLocation"], answered["FailureLocation"])
        assert url == answered["OutputLocation"]
        (output,) = json.loads(body)["outputs"]
        assert output["input"] == "amazon" and output["completions"]
        url, body = wait_for_object(local_aws, failed["OutputLocation"], failed["FailureLocation"])
        assert url == failed["FailureLocation"] and url.startswith(f"s3://{bucket}/failure/")
        assert b"400" in body
        messages = local_aws.client("sqs").receive_message(QueueUrl=results, MaxNumberOfMessages=10)["Messages"]
        (done,) = [json.loads(m["Body"]) for m in messages]
        assert done["invocationStatus"] == "Completed" and done["inferenceId"] == answered["InferenceId"]
        # The load tester submits, polls the output location and times the whole way; it refuses
        # to call the async endpoint as a real-time one.
        report = load_test(local_aws, tmp_path, {"input": "amazon"}, "--endpoint", endpoint, "--async")
        assert all(level["latency_ms"]["p50"] > 0 for level in report["levels"])
        refused = loadtest(local_aws, "--endpoint", endpoint, "--request", str(tmp_path / "request.json"))
        assert refused.returncode == 2 and "is asynchronous: pass --async" in refused.stderr
        async_alarms_fire_on_their_faults(local_aws, bucket, endpoint)
        # The faults' idle minutes may have begun a scale-in (to zero instances): the load tester
        # refuses an endpoint that is Updating, as it should, so the load waits for InService.
        until(
            lambda: sagemaker.describe_endpoint(EndpointName=endpoint)["EndpointStatus"] == "InService",
            "the endpoint InService after its scaling",
        )
        # Scaling on the backlog from zero instances, and the alarm that starts the first one.
        scaling = local_aws.client("application-autoscaling")
        (target,) = scaling.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]
        assert target["MinCapacity"] == 0
        alarms = local_aws.client("cloudwatch").describe_alarms()["MetricAlarms"]
        assert any(a["MetricName"] == "HasBacklogWithoutCapacity" for a in alarms)
        # Load from `python -m loadtest`, eight requests queued or in progress past the target of
        # five per instance while CloudWatch's clock runs (target tracking's high alarm, three
        # minutes), scales the endpoint out; the new instance's container starts.
        scaled_out_under_load(local_aws, tmp_path, endpoint)
        # Idle, the endpoint scales in to zero instances, its container stopped; a request then
        # queued with no instance (HasBacklogWithoutCapacity, two minutes) starts one, which answers.
        minutes_while(local_aws, lambda: instances(local_aws, endpoint)[0] > 0, "the scale-in to zero", most=30)
        until(lambda: instances(local_aws, endpoint) == (0, 0), "the container stopped")
        waiting = runtime.invoke_endpoint_async(
            EndpointName=endpoint, InputLocation=f"s3://{bucket}/input/seed.json", ContentType="application/json"
        )
        minutes_while(local_aws, lambda: instances(local_aws, endpoint)[0] == 0, "the scale-out from zero", most=5)
        url, _ = wait_for_object(local_aws, waiting["OutputLocation"], waiting["FailureLocation"])
        assert url == waiting["OutputLocation"] and instances(local_aws, endpoint) == (1, 1)
        deployed = resources_of_stack(local_aws, "Gpt2Stack")
    finally:
        bootstrapped.destroy(assembly.path, ["Gpt2Stack"])
    # The bucket held requests and answers: the stack emptied and deleted it.
    assert ("AWS::S3::Bucket", bucket) in deployed.values()
    assert bucket not in {b["Name"] for b in local_aws.client("s3").list_buckets()["Buckets"]}
    assert not running_containers()


#: Invocations per instance per minute that the scaling test's endpoint aims at: low, so that a
#: load this host makes in a second of wall time is above it (the default is 600).
TARGET = 5


def invocations_this_minute(aws: LocalAws, dimensions: dict[str, str]) -> float:
    """The Invocations (the SageMaker metric) of what `dimensions` name (an endpoint's variant,
    or an inference component) in the local clock's current minute."""
    start = aws.clock.now().replace(second=0, microsecond=0)
    points = aws.client("cloudwatch").get_metric_statistics(
        Namespace="AWS/SageMaker",
        MetricName="Invocations",
        Dimensions=[{"Name": name, "Value": value} for name, value in dimensions.items()],
        StartTime=start,
        EndTime=start + timedelta(minutes=1),
        Period=60,
        Statistics=["Sum"],
    )["Datapoints"]
    return float(sum(p["Sum"] for p in points))


def busy_minutes_until(
    aws: LocalAws, tmp_path: Path, scaled: Callable[[], bool], dimensions: dict[str, str], *target: str
) -> int:
    """`python -m loadtest` on `target` (its --endpoint and other options) while CloudWatch's
    clock moves a minute each time what `dimensions` name has served more than TARGET in it,
    until `scaled`; those busy minutes."""
    request = tmp_path / "load.json"
    request.write_text(json.dumps({"content_type": "application/json", "body": {"input": "amazon"}}))
    load = subprocess.Popen(
        [sys.executable, "-m", "loadtest", *target, "--request", str(request), "--concurrency", "2", "--seconds",
         "60", "--metrics-wait", "0", "--warmup", "1", "--out", str(tmp_path / "load")],
        cwd=ROOT, env=aws.environment(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        minutes = 0
        while not scaled():
            assert load.poll() is None, f"the load ended before the scale-out: {load.communicate()[1]}"
            assert minutes < 6, f"no scale-out after {minutes} busy minutes"
            time.sleep(0.2)
            if invocations_this_minute(aws, dimensions) > TARGET:
                aws.clock.advance(60)
                minutes += 1
    finally:
        load.terminate()
        load.communicate(timeout=60)
    return minutes


def test_gpt2_real_time_scales_out_under_load_and_back_in_when_idle(
    bootstrapped: Cdk, local_aws: LocalAws, tmp_path: Path, e2e_artifacts: Path
) -> None:
    """Target tracking on InvocationsPerInstance, from the invocations the local runtime serves:
    `python -m loadtest` while CloudWatch's clock moves a minute each time the endpoint has served
    more than the target in it: three such minutes (target tracking's high alarm) and the
    endpoint scales out to its max_capacity of 2, the new instance's container started and
    serving; the load gone, fifteen minutes below 90% of the target (its low alarm, on the zeros
    SageMaker publishes for an idle variant) and it scales back in to min_capacity, the container
    stopped."""
    settings = {"gpt2.target_invocations_per_instance": TARGET, "gpt2.max_capacity": 2}
    assembly = assembly_of(tmp_path / "cdk.out", local_aws, e2e_artifacts, **settings)
    bootstrapped.deploy(assembly.path, ["Gpt2Stack"])
    try:
        endpoint = local_aws.stack_outputs("Gpt2Stack")["EndpointName"]
        variant = assembly.config.gpt2.endpoint.variant_name
        assert instances(local_aws, endpoint) == (1, 1)
        # The instance's output in the endpoint's log group, stream <variant>/<instance-id>.
        started_in(local_aws, f"/aws/sagemaker/Endpoints/{endpoint}", rf"{variant}/{INSTANCE}", GPT2_STARTED)
        minutes = busy_minutes_until(
            local_aws,
            tmp_path,
            lambda: instances(local_aws, endpoint)[0] >= 2,
            {"EndpointName": endpoint, "VariantName": variant},
            "--endpoint",
            endpoint,
        )
        assert minutes >= 3, "target tracking scales out on three minutes above the target"
        until(lambda: instances(local_aws, endpoint) == (2, 2), "the scale-out's container")
        hosted = hosting_plane().find((local_aws.account, local_aws.region, endpoint))
        assert hosted is not None and hosted.live is not None
        assert len(hosted.live.instances[variant]) == 2
        assert all(c.ping() == 200 for c in hosted.live.instances[variant]), "each instance answers"
        # Idle: back in to one instance, no fewer (min_capacity), its container stopped.
        idle = minutes_while(local_aws, lambda: instances(local_aws, endpoint)[0] > 1, "the scale-in", most=20)
        assert idle >= 15, "target tracking scales in on fifteen minutes below 90% of the target"
        until(lambda: instances(local_aws, endpoint) == (1, 1), "the container stopped")
        local_aws.clock.advance(20 * 60)
        assert instances(local_aws, endpoint) == (1, 1), "min_capacity bounds the scale-in"
        assert invoke(local_aws, "Gpt2Stack", {"input": "amazon"})["outputs"]
    finally:
        bootstrapped.destroy(assembly.path, ["Gpt2Stack"])
    assert not running_containers()
