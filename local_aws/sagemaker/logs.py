"""Where a container's output goes: the CloudWatch Logs group and stream SageMaker writes for the
endpoint's mode, written with the permissions of the model's execution role.

SageMaker sends everything a model container writes to stdout or stderr to CloudWatch Logs (SageMaker
Developer Guide, "Log groups and streams that Amazon SageMaker AI sends to Amazon CloudWatch Logs",
the page "Log Amazon SageMaker AI events with Amazon CloudWatch" links to):

* a real-time or asynchronous endpoint's to the group ``/aws/sagemaker/Endpoints/<EndpointName>``,
  stream ``<production-variant-name>/<instance-id>`` (an asynchronous endpoint's own data log,
  ``<variant>/<instance-id>/data-log``, is SageMaker's, not the container's: not written here);
* an inference component's to ``/aws/sagemaker/InferenceComponents/<InferenceComponentName>``, the
  group public deployment scripts read a component's output from and Terraform imports of these
  groups name (that page lists no component row); AWS documents no stream name for it: here each
  copy's stream is the id of the instance that runs it (one a copy here).

SageMaker writes them as the model's execution role (the Developer Guide's "CreateModel API:
Execution Role Permissions" lists logs:CreateLogGroup, logs:CreateLogStream and logs:PutLogEvents
among what the role needs): a role that may not loses the output, the container runs as before,
and the local AWS says so in its own log, once a container (a warning naming the role, the action
and the ARN). The output is read by one background thread per container (:class:`ContainerLog`),
off any request's path, shipped in batches, and kept in a bounded buffer (the oldest lines are
dropped past it, and counted).
"""

from __future__ import annotations

import collections
import logging
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moto.iam.exceptions import NotFoundException
from moto.iam.models import iam_backends
from moto.logs.models import logs_backends
from moto.utilities.utils import get_partition

from local_aws.host import HOST
from local_aws.policies import Caller, evaluate, role_caller

log = logging.getLogger("local_aws.sagemaker.logs")

ENDPOINT_GROUP = "/aws/sagemaker/Endpoints/{}"
COMPONENT_GROUP = "/aws/sagemaker/InferenceComponents/{}"
#: PutLogEvents takes at most 10,000 events a call, each at most 256 KB with its 26 bytes of
#: overhead (CloudWatch Logs API Reference, PutLogEvents).
MAX_BATCH = 10_000
MAX_EVENT_BYTES = 256 * 1024 - 26
#: How often a container's new lines are shipped.
FLUSH_S = 1.0
#: Lines kept while waiting to be shipped; past it the oldest are dropped.
MAX_BUFFERED = 50_000


@dataclass(frozen=True)
class LogTarget:
    """Where a variant's (a component's) containers write, and as whom."""

    account: str
    region: str
    group: str
    #: The model's execution role; None for a model without one.
    role_arn: str | None
    #: Each container's stream is this followed by its instance id (``AllTraffic/``, or nothing
    #: for a component's copy).
    stream_prefix: str = ""

    @property
    def group_arn(self) -> str:
        return f"arn:{get_partition(self.region)}:logs:{self.region}:{self.account}:log-group:{self.group}"


def instance_id() -> str:
    """An EC2 instance id (``i-`` and 17 hexadecimal digits), as SageMaker names an instance's stream."""
    return "i-" + secrets.token_hex(9)[:17]


def _role(target: LogTarget) -> Caller | None:
    """The execution role as SageMaker assumes it; None for a role the account does not have (the
    local AWS's own tests name roles they never create; AWS refuses such a model at CreateModel),
    which is not evaluated, as local_aws/sagemaker/hosting.py does for the image and model data."""
    if target.role_arn is None:
        return None
    partition = get_partition(target.region)
    try:
        role = iam_backends[target.account][partition].get_role_by_arn(target.role_arn)
    except NotFoundException:
        return None
    session = f"arn:{partition}:sts::{target.account}:assumed-role/{role.name}/SageMaker"
    return role_caller(role, target.account, session=session)


def refusal(target: LogTarget, stream: str, *, group_exists: bool) -> tuple[str, str] | None:
    """The first (action, ARN) the role may not call to write `stream`, else None."""
    role = _role(target)
    if role is None:
        return None
    stream_arn = f"{target.group_arn}:log-stream:{stream}"
    needed = [] if group_exists else [("logs:CreateLogGroup", target.group_arn)]
    needed += [("logs:CreateLogStream", stream_arn), ("logs:PutLogEvents", stream_arn)]
    for action, arn in needed:
        if not evaluate(role, action, arn).allowed:
            return action, arn
    return None


class ContainerLog:
    """Ships one container's output (the file it writes to) to its stream, in the background:
    :meth:`start` once the container runs, :meth:`stop` once it has stopped (the lines it wrote
    last are shipped, and the thread joined)."""

    def __init__(self, target: LogTarget, stream: str, path: Path, *, max_buffered: int = MAX_BUFFERED) -> None:
        self.target = target
        self.stream = stream
        self.path = path
        self.dropped = 0
        self.refused: tuple[str, str] | None = None
        self._buffer: collections.deque[dict[str, Any]] = collections.deque(maxlen=max_buffered)
        self._partial = b""
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._file: Any = None

    def start(self) -> ContainerLog:
        # Opened now: the container's run folder (and the file) is removed when it stops, and an
        # open file is still read to its end.
        self._file = open(self.path, "rb")  # noqa: SIM115 (closed by the thread)
        self._thread = threading.Thread(target=self._run, name=f"logs-{self.stream}", daemon=True)
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        try:
            while not self._stopping.wait(FLUSH_S):
                self._read()
                self._flush()
            self._read(final=True)
            self._flush()
        except Exception as exc:  # the local AWS's own fault: kept, and the thread ends
            HOST.faults.record("logs", f"shipping {self.target.group} {self.stream}", exc)
        finally:
            self._file.close()

    def _read(self, *, final: bool = False) -> None:
        data = self._partial + self._file.read()
        lines = data.split(b"\n")
        # The part after the last newline waits for the rest of its line, unless nothing more comes.
        self._partial = lines.pop()
        if final and self._partial:
            lines.append(self._partial)
            self._partial = b""
        now = int(time.time() * 1000)
        for line in lines:
            if len(self._buffer) == self._buffer.maxlen:
                self.dropped += 1
                if self.dropped == 1:
                    log.warning(
                        "%s %s: over %d lines wait; the oldest are dropped",
                        self.target.group,
                        self.stream,
                        len(self._buffer),
                    )
            text = line[:MAX_EVENT_BYTES].decode("utf-8", errors="replace")
            self._buffer.append({"timestamp": now, "message": text})

    def _flush(self) -> None:
        while self._buffer:
            batch = [self._buffer.popleft() for _ in range(min(MAX_BATCH, len(self._buffer)))]
            self._put(batch)

    def _put(self, events: list[dict[str, Any]]) -> None:
        backend = logs_backends[self.target.account][self.target.region]
        group = self.target.group
        refused = refusal(self.target, self.stream, group_exists=group in backend.groups)
        if refused is not None:
            if self.refused is None:
                log.warning(
                    "%s may not %s on %s: the container's output is not written to %s",
                    self.target.role_arn,
                    *refused,
                    group,
                )
            self.refused = refused
            return
        if group not in backend.groups:
            backend.create_log_group(group, tags={})
        if self.stream not in backend.groups[group].streams:
            backend.create_log_stream(group, self.stream)
        backend.put_log_events(group, self.stream, events)
