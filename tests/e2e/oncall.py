"""End-to-end helpers for alarms proven by their faults: the on-call queue subscribed to a
stack's alarm topic (what its subscriber hears), and what a host runs to report its health (the
AWS CLI's one call, made with boto3, and a stand-in DJL Serving)."""

from __future__ import annotations

import contextlib
import http.server
import json
import math
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from botocore.config import Config
from botocore.exceptions import ClientError

from local_aws import LocalAws
from local_aws.cli.cdk import Cdk, CdkError
from local_aws.cloudwatch.evaluation import RANGE_EXTRA
from local_aws.sagemaker.components import component_key
from local_aws.sagemaker.containers import Container
from local_aws.sagemaker.runtime import hosting_plane
from tests.e2e.helpers import Assembly, rollback_alarms, stack_of, update_check


@dataclass
class Oncall:
    """An SQS queue subscribed to a stack's alarm topic, as an on-call engineer's would be."""

    aws: LocalAws
    queue: str
    #: Every notification received so far: (alarm name, new state, the notification).
    notices: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def forget(self) -> None:
        """Every notification so far received and forgotten: `heard` finds only later ones."""
        sqs = self.aws.client("sqs")
        while messages := sqs.receive_message(QueueUrl=self.queue, MaxNumberOfMessages=10).get("Messages", []):
            for m in messages:
                sqs.delete_message(QueueUrl=self.queue, ReceiptHandle=m["ReceiptHandle"])
        self.notices.clear()

    def heard(self, alarm: str, state: str = "ALARM", timeout_s: float = 60) -> dict[str, Any]:
        """CloudWatch's notification of `alarm` going into `state` (CloudWatch runs an alarm's
        actions at its change: it comes within a second here)."""
        sqs = self.aws.client("sqs")
        # clock: a generous wait, whose expiry only ends a wait for a notification never sent
        deadline = time.monotonic() + timeout_s
        while True:
            for name, new, notice in self.notices:
                if (name, new) == (alarm, state):
                    return notice
            if time.monotonic() > deadline:  # clock: the same wait
                heard = [(n, s) for n, s, _ in self.notices]
                raise AssertionError(f"no notification of {alarm} in {state} within {timeout_s} s; heard {heard}")
            for m in sqs.receive_message(QueueUrl=self.queue, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
                "Messages", []
            ):
                notice = json.loads(json.loads(m["Body"])["Message"])
                self.notices.append((notice["AlarmName"], notice["NewStateValue"], notice))
                sqs.delete_message(QueueUrl=self.queue, ReceiptHandle=m["ReceiptHandle"])


@contextmanager
def oncall(aws: LocalAws, stack: str) -> Iterator[Oncall]:
    """A queue subscribed to the stack's alarm topic for the duration."""
    topic = aws.stack_outputs(stack)["AlarmTopicArn"]
    sns, sqs = aws.client("sns"), aws.client("sqs")
    queue = sqs.create_queue(QueueName=f"{stack}-oncall")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    subscription = sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn)["SubscriptionArn"]
    try:
        yield Oncall(aws, queue)
    finally:
        sns.unsubscribe(SubscriptionArn=subscription)
        sqs.delete_queue(QueueUrl=queue)


def actions_run(aws: LocalAws, alarm: str) -> list[str]:
    """The actions the alarm ran, oldest first, as its history records them ("Successfully
    executed action ..." or "Failed to execute action ...")."""
    history = aws.client("cloudwatch").describe_alarm_history(
        AlarmName=alarm, HistoryItemType="Action", ScanBy="TimestampAscending"
    )
    return [h["HistorySummary"] for h in history["AlarmHistoryItems"]]


def aws_cli(folder: Path) -> Path:
    """A folder holding an `aws` that makes the one call a host's scripts make of the AWS CLI
    (`aws cloudwatch put-metric-data --region R --namespace N --metric-data JSON`) with boto3,
    which reads AWS_ENDPOINT_URL as the CLI does: the CLI is no dependency of the project."""
    folder.mkdir(parents=True, exist_ok=True)
    cli = folder / "aws"
    cli.write_text(
        f"#!{sys.executable}\n"
        "import json, sys, boto3\n"
        "args = sys.argv[1:]\n"
        "assert args[:2] == ['cloudwatch', 'put-metric-data'], args\n"
        "options = dict(zip(args[2::2], args[3::2]))\n"
        "boto3.client('cloudwatch', region_name=options['--region']).put_metric_data(\n"
        "    Namespace=options['--namespace'], MetricData=json.loads(options['--metric-data']))\n"
    )
    cli.chmod(0o755)
    return folder


@dataclass
class StandIn:
    """What a stand-in DJL Serving answers on /ping (200: healthy), and its port."""

    ping: int = 200
    port: int = 0


@contextmanager
def djl_serving(ping: int = 200) -> Iterator[StandIn]:
    """A stand-in DJL Serving on a free port of 127.0.0.1: /ping answers `ping` (settable), an
    invocation one token."""
    state = StandIn(ping)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(state.ping if self.path == "/ping" else 404)
            self.end_headers()

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"outputs": ["Hello"]}')

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def stack_alarms(aws: LocalAws, stack: str) -> dict[str, str]:
    """The stack's metric alarms: construct id (``DiskAlarm``, ``Errors5xxAlarm``...) -> name."""
    summaries = aws.client("cloudformation").list_stack_resources(StackName=stack)["StackResourceSummaries"]
    names = {s["PhysicalResourceId"] for s in summaries if s["ResourceType"] == "AWS::CloudWatch::Alarm"}
    # Each name ends with its construct id (llm_inference_cdk/endpoint_alarms.py).
    return {name.rsplit("-", 1)[-1]: name for name in names}


def described(aws: LocalAws, alarm: str) -> dict[str, Any]:
    """The metric alarm as CloudWatch describes it."""
    (found,) = aws.client("cloudwatch").describe_alarms(AlarmNames=[alarm])["MetricAlarms"]
    return dict(found)


def state_of(aws: LocalAws, alarm: str) -> str:
    return str(described(aws, alarm)["StateValue"])


def minutes_until(aws: LocalAws, alarm: str, state: str, most: int | None = None) -> int:
    """CloudWatch's clock moved a minute at a time until `alarm` is in `state`; the minutes taken.
    At most `most`, by default the alarm's evaluation range and one minute more: with the later
    periods missing, a breaching datapoint of the current minute is evaluated until the whole
    range (the evaluation periods and RANGE_EXTRA more) has passed it."""
    if most is None:
        found = described(aws, alarm)
        most = int((found["EvaluationPeriods"] + RANGE_EXTRA) * found["Period"]) // 60 + 1
    for minute in range(1, most + 1):
        aws.clock.advance(60)
        if state_of(aws, alarm) == state:
            return minute
    raise AssertionError(f"{alarm} not in {state} after {most} minutes: {state_of(aws, alarm)}")


def _variant(aws: LocalAws, stack: str) -> tuple[str, dict[str, Any]]:
    """The runtime's name of what hosts the stack's model (its endpoint, or its inference
    component's copies: local_aws/sagemaker/components.py) and its endpoint's variant's config."""
    sagemaker, outputs = aws.client("sagemaker"), aws.stack_outputs(stack)
    name = outputs["EndpointName"]
    config = sagemaker.describe_endpoint(EndpointName=name)["EndpointConfigName"]
    (variant,) = sagemaker.describe_endpoint_config(EndpointConfigName=config)["ProductionVariants"]
    if "InferenceComponentName" in outputs:
        name = component_key(outputs["InferenceComponentName"])
    return name, variant


def instance_container(aws: LocalAws, stack: str) -> tuple[Container, dict[str, Any]]:
    """The container of the stack's one instance (its component's one copy) in the local
    runtime, and its variant's config."""
    name, variant = _variant(aws, stack)
    hosted = hosting_plane().find((aws.account, aws.region, name))
    assert hosted is not None and hosted.live is not None
    (container,) = hosted.live.instances[variant["VariantName"]]
    return container, variant


def fill_the_volume(aws: LocalAws, stack: str, percent: float) -> Path:
    """A sparse file (no real disk used) in the folder of the stack's one instance (its
    component's one copy), which its ML storage volume holds, making the volume fuller than
    `percent` (DiskUtilization, measured)."""
    container, variant = instance_container(aws, stack)
    assert container.run_dir is not None
    folder = Path(container.run_dir)
    volume = variant["VolumeSizeInGB"] * 1024**3 if variant.get("VolumeSizeInGB") else shutil.disk_usage(folder).total
    filler = folder / "volume-filler"
    with filler.open("wb") as sparse:
        sparse.truncate(int(volume * (percent + 5) / 100))
    return filler


def gpu_memory_above(aws: LocalAws, alarm: str) -> None:
    """GPUMemoryUtilization above the alarm's threshold, put as SageMaker would put it for the
    alarm's endpoint and variant (no GPU here: the one instance metric tests feed)."""
    cloudwatch = aws.client("cloudwatch")
    (described,) = cloudwatch.describe_alarms(AlarmNames=[alarm])["MetricAlarms"]
    assert described["MetricName"] == "GPUMemoryUtilization", described
    cloudwatch.put_metric_data(
        Namespace=described["Namespace"],
        MetricData=[
            {
                "MetricName": described["MetricName"],
                "Dimensions": described["Dimensions"],
                "Value": described["Threshold"] + 1,
                "Unit": "Percent",
            }
        ],
    )


def capacity_faults_fire_and_clear(aws: LocalAws, stack: str, topic: Oncall, faulted: list[str]) -> None:
    """With the `faulted` alarms' faults already driven (model errors, say), the stack's instance
    volume filled and, where it has a GPU memory alarm, GPU memory put above it: each alarm in
    ALARM, heard by `topic` (which forgot what it heard while they were OK); the volume emptied,
    each back to OK, heard."""
    alarms, cloudwatch = stack_alarms(aws, stack), aws.client("cloudwatch")
    (disk,) = cloudwatch.describe_alarms(AlarmNames=[alarms["DiskAlarm"]])["MetricAlarms"]
    filler = fill_the_volume(aws, stack, float(disk["Threshold"]))
    faulted = [*faulted, "DiskAlarm"]
    if "GpuMemoryAlarm" in alarms:  # no GPU here: the test puts what SageMaker would
        gpu_memory_above(aws, alarms["GpuMemoryAlarm"])
        faulted.append("GpuMemoryAlarm")
    minutes_until(aws, alarms["DiskAlarm"], "ALARM")  # the last: the volume is measured at the minute's end
    for alarm in faulted:
        assert topic.heard(alarms[alarm], "ALARM")["NewStateReason"]
    filler.unlink()
    minutes_until(aws, alarms["DiskAlarm"], "OK")
    for alarm in faulted:
        assert topic.heard(alarms[alarm], "OK")


def model_errors_and_capacity_faults_fire_and_clear(
    aws: LocalAws, stack: str, topic: Oncall, model_error: Callable[[], object]
) -> None:
    """The stack's model-error and capacity alarms each driven by its fault and back to OK, heard
    by `topic`: whatever earlier tests sent ends with its minute (each alarm starts from OK), then
    `model_error` (one request the model answers with an error) as many times as the model-error
    alarm's threshold, then :func:`capacity_faults_fire_and_clear`."""
    from_ok(aws, stack, topic, ["ModelErrorsAlarm", "DiskAlarm"])
    for _ in range(int(described(aws, stack_alarms(aws, stack)["ModelErrorsAlarm"])["Threshold"])):
        model_error()
    capacity_faults_fire_and_clear(aws, stack, topic, ["ModelErrorsAlarm"])


def processes_of(container: Container, which: Callable[[psutil.Process], bool] | None = None) -> list[psutil.Process]:
    """The container's live processes (its process group), those `which` picks if given."""
    assert container.process is not None
    found = []
    for process in psutil.process_iter():
        try:
            group = os.getpgid(process.pid) == container.process.pid
            if group and process.status() != psutil.STATUS_ZOMBIE and (which is None or which(process)):
                found.append(process)
        except (psutil.Error, ProcessLookupError):
            continue
    return found


@contextmanager
def stalled(processes: list[psutil.Process]) -> Iterator[None]:
    """The processes stopped (SIGSTOP) until the block ends: a model stuck on its device, or an
    instance starved of CPU, as seen from outside; what they were doing goes on afterwards (those
    killed meanwhile stay dead)."""
    assert processes
    for process in processes:
        process.suspend()
    try:
        yield
    finally:
        for process in processes:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.resume()


def latency_threshold_s(aws: LocalAws, stack: str) -> float:
    """The latency alarm's threshold in seconds (ModelLatency is published in microseconds)."""
    alarm = described(aws, stack_alarms(aws, stack)["LatencyAlarm"])
    assert (alarm["MetricName"], alarm["Statistic"]) == ("ModelLatency", "Average"), alarm
    return float(alarm["Threshold"]) / 1_000_000


def runtime_errors(aws: LocalAws, stack: str, bodies: list[bytes]) -> list[int]:
    """Each body sent at once to the stack's endpoint (InvokeEndpoint, a connection each); the
    container's status of each (200 for an answer, the ModelError's OriginalStatusCode)."""
    # No retry: each refusal counts once, as the caller's one request.
    config = Config(max_pool_connections=len(bodies) + 2, retries={"max_attempts": 1}, read_timeout=120)
    runtime = aws.client("sagemaker-runtime", config=config)
    outputs = aws.stack_outputs(stack)
    component = outputs.get("InferenceComponentName")
    target = {"InferenceComponentName": component} if component else {}

    def send(body: bytes) -> int:
        try:
            runtime.invoke_endpoint(
                EndpointName=outputs["EndpointName"], Body=body, ContentType="application/json", **target
            )
        except ClientError as exc:
            return int(exc.response.get("OriginalStatusCode", exc.response["ResponseMetadata"]["HTTPStatusCode"]))
        return 200

    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(send, bodies))


def rollback_alarms_fire_and_clear(aws: LocalAws, stack: str, topic: Oncall, alarms: list[str]) -> None:
    """The `alarms` (construct ids), their faults already driven this minute, each in ALARM and
    heard by `topic`, then back to OK without them, heard."""
    names = stack_alarms(aws, stack)
    for alarm in alarms:
        minutes_until(aws, names[alarm], "ALARM")
        assert topic.heard(names[alarm], "ALARM")["NewStateReason"]
    for alarm in alarms:
        minutes_until(aws, names[alarm], "OK")
        assert topic.heard(names[alarm], "OK")


def from_ok(aws: LocalAws, stack: str, topic: Oncall, alarms: list[str]) -> None:
    """Whatever earlier tests sent ends with its minute: each of `alarms` starts from OK, and
    `topic` forgets what it heard."""
    names = stack_alarms(aws, stack)
    for alarm in alarms:
        minutes_until(aws, names[alarm], "OK")
    topic.forget()


def overload_fires_and_clears(
    aws: LocalAws, stack: str, topic: Oncall, *, body: bytes, workers: Callable[[psutil.Process], bool], queue: int
) -> list[int]:
    """The model server overloaded: its model `workers` stall for longer than the latency
    alarm's threshold while `queue` requests (what its queue and workers hold) and the 5xx
    alarm's threshold more arrive. The server refuses what its queue cannot hold with 503
    (Invocation5XXErrors) and answers the rest once the workers go on, each after the stall
    (ModelLatency, whose average the refusals lower by less than the margin of the stall). The
    latency and 5xx alarms each into ALARM, heard by `topic`, and back to OK. The statuses."""
    from_ok(aws, stack, topic, ["LatencyAlarm", "Errors5xxAlarm"])
    container, _ = instance_container(aws, stack)
    errors = int(described(aws, stack_alarms(aws, stack)["Errors5xxAlarm"])["Threshold"])
    bodies = [body] * (queue + errors + 2)
    stall_s = math.ceil(latency_threshold_s(aws, stack) * 1.3) + 1
    with ThreadPoolExecutor(1) as pool:
        with stalled(processes_of(container, workers)):
            sent = pool.submit(runtime_errors, aws, stack, bodies)
            time.sleep(stall_s)
        statuses = sent.result(timeout=300)
    assert statuses.count(503) >= errors and statuses.count(200) >= queue - 2, statuses
    rollback_alarms_fire_and_clear(aws, stack, topic, ["LatencyAlarm", "Errors5xxAlarm"])
    return statuses


def sent_to(container: Container, requests: int = 1, timeout_s: float = 30) -> None:
    """Wait until the local runtime (in this process) has `requests` connections open to the
    container: requests handed to it, which their time (ModelLatency) counts from, whether or
    not the container has read them yet."""
    # clock: a generous wait for requests handed over within moments; no bound on their speed
    deadline = time.monotonic() + timeout_s
    while (
        sum(
            bool(c.raddr and c.raddr.port == container.port and c.status == psutil.CONN_ESTABLISHED)
            for c in psutil.Process().net_connections("tcp")
        )
        < requests
    ):
        # clock: the same wait
        assert time.monotonic() < deadline, f"not {requests} requests at the container on port {container.port}"
        time.sleep(0.05)


def stall_fires_and_clears(aws: LocalAws, stack: str, topic: Oncall, send: Callable[[], object]) -> None:
    """The stack's instance stalls (every process of its container) for longer than the latency
    alarm's threshold once one request, `send`, has reached it: the latency alarm into ALARM,
    heard by `topic`, and back to OK."""
    from_ok(aws, stack, topic, ["LatencyAlarm"])
    container, _ = instance_container(aws, stack)
    with ThreadPoolExecutor(1) as pool:
        with stalled(processes_of(container)):
            sent = pool.submit(send)
            sent_to(container)
            time.sleep(latency_threshold_s(aws, stack) + 1)
        sent.result(timeout=120)
    rollback_alarms_fire_and_clear(aws, stack, topic, ["LatencyAlarm"])


#: Multi Model Server's job queue: requests past it and its workers' are refused with 503 "No
#: worker is available to serve request" (job_queue_size, 100 by default: the configuration page
#: of awslabs/multi-model-server; the toolkit does not set it).
MMS_JOB_QUEUE = 100


def is_mms_worker(process: psutil.Process) -> bool:
    """A Python worker of Multi Model Server (its Java front end keeps taking requests)."""
    return "model_service_worker" in " ".join(process.cmdline())


def toolkit_overload_fires_and_clears(aws: LocalAws, stack: str, topic: Oncall, workers: int) -> None:
    """:func:`overload_fires_and_clears` on the Hugging Face toolkit's model server with
    `workers` workers."""
    body = json.dumps({"inputs": "Can you please", "parameters": {"max_new_tokens": 2}}).encode()
    overload_fires_and_clears(aws, stack, topic, body=body, workers=is_mms_worker, queue=MMS_JOB_QUEUE + workers)


#: A request's container status (200 for an answer), sent the way the mode is called.
Send = Callable[[], int]


def status_of(call: Callable[[], object]) -> int:
    """200 for an answer, else the container's status SageMaker reports (OriginalStatusCode)."""
    try:
        call()
    except ClientError as exc:
        return int(exc.response.get("OriginalStatusCode", 0))
    return 200


def failures_of_the_new_model(
    aws: LocalAws, hosted: str, send: Send, wanted: int, start_timeout_s: float = 120
) -> list[int]:
    """`wanted` requests sent while the update's new model has the traffic of `hosted` (the
    runtime's name: the endpoint, or its component's key), once it started (within
    `start_timeout_s`); their statuses."""
    key = (aws.account, aws.region, hosted)
    # clock: a generous wait for a container start (seconds here); it only fails an update that
    # never moves the traffic
    deadline = time.monotonic() + start_timeout_s
    while (found := hosting_plane().find(key)) is None or found.pending is None or found.shifted < 1.0:
        assert time.monotonic() < deadline, "the update never moved the traffic"  # clock: the same wait
        time.sleep(0.2)
    with ThreadPoolExecutor(4) as pool:
        return list(pool.map(lambda _: send(), range(wanted)))


def rolled_back_by_its_failures(
    cdk: Cdk,
    aws: LocalAws,
    changed: Assembly,
    hosted: str,
    send: Send,
    reason: Callable[[], str],
    model_errors: str = "InvocationModelErrors",
    *,
    stack: str = "Gpt2Stack",
    status: int = 503,
    start_timeout_s: float = 120,
) -> None:
    """`stack`, deployed, updated to `changed` (the failing model) while its new model fails
    `send`'s requests with `status`: a minute of those failures moves the rollback alarms they
    are faults of (a 503 after the 1 s limit: latency, 5xx and model errors; a 4xx: model
    errors), which the on-call queue hears, and SageMaker rolls back (`reason`: what it says of
    it). What the user sees: the update check's resource failed, and the stack rolled back.
    `model_errors`: the metric the model-error alarm watches."""
    alarms = rollback_alarms(aws, stack)
    watched = {alarm: described(aws, alarm)["MetricName"] for alarm in alarms}
    assert set(watched.values()) == {"ModelLatency", "Invocation5XXErrors", model_errors}, watched
    fired = list(watched) if status >= 500 else [a for a, metric in watched.items() if metric == model_errors]
    updating: dict[str, Any] = {}

    def update() -> None:
        try:
            cdk.deploy(changed.path, [stack])
        except CdkError as exc:
            updating["failed"] = exc

    with oncall(aws, stack) as topic:
        deploy = threading.Thread(target=update)
        deploy.start()
        limits = (changed.config.gpt2 if stack == "Gpt2Stack" else changed.config.gptj).endpoint.alarms
        assert limits is not None and limits.model_errors is not None
        wanted = max(limits.errors_5xx, limits.model_errors)
        failed = failures_of_the_new_model(aws, hosted, send, wanted, start_timeout_s)
        assert set(failed) == {status}, failed
        aws.clock.advance(60)
        deploy.join(timeout=300 + start_timeout_s)
        assert not deploy.is_alive()
        for alarm in fired:
            assert topic.heard(alarm)["NewStateReason"]
        assert any(a in reason() for a in fired), reason()
    assert "failed" in updating, "the update to a failing model was not rolled back"
    message = updating["failed"].args[0]
    assert "UPDATE_ROLLBACK_COMPLETE" in message or "UPDATE_FAILED" in message
    assert "EndpointUpdateCheck" in message
    assert stack_of(aws, stack)["StackStatus"] == "UPDATE_ROLLBACK_COMPLETE"


def a_refusing_gptj_update_is_rolled_back(
    cdk: Cdk, aws: LocalAws, changed: Assembly, body: bytes, start_timeout_s: float = 120
) -> None:
    """GptjStack's endpoint, answering `body`, updated to `changed`, whose model refuses it
    with 400: rolled back on its model errors (:func:`rolled_back_by_its_failures`), on its old
    config, which answers `body` again."""
    sagemaker, runtime = aws.client("sagemaker"), aws.client("sagemaker-runtime")
    name = aws.stack_outputs("GptjStack")["EndpointName"]

    def send() -> int:
        return status_of(lambda: runtime.invoke_endpoint(EndpointName=name, Body=body, ContentType="application/json"))

    assert send() == 200
    config = sagemaker.describe_endpoint(EndpointName=name)["EndpointConfigName"]
    reason = lambda: str(sagemaker.describe_endpoint(EndpointName=name)["FailureReason"])  # noqa: E731
    rolled_back_by_its_failures(
        cdk, aws, changed, name, send, reason, stack="GptjStack", status=400, start_timeout_s=start_timeout_s
    )
    assert sagemaker.describe_endpoint(EndpointName=name)["EndpointConfigName"] == config
    assert update_check(aws, "GptjStack") == config, "CloudFormation's state matches the endpoint"
    assert send() == 200
