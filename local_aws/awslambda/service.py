"""Invoking a function, as Lambda does: synchronously (RequestResponse) or asynchronously
(Event: CloudFormation's invocations of a custom resource's function among them).

Each invocation runs as the function's execution role, whose temporary credentials come from
the local AWS's STS (the session is named after the function, as Lambda names it), so that its
calls are evaluated by the local AWS's policies as the role's (docs/LOCAL_AWS_POLICIES.md); its
output goes to the function's log group. An asynchronous invocation whose function fails (an
error, an init error, a timeout) is retried twice, or as often as the function's
MaximumRetryAttempts says (Lambda Developer Guide, "Asynchronous invocation": "If the function
returns an error, Lambda attempts to run it two more times"); Lambda waits a minute, then two,
before each retry, and here the retry follows at once.
"""

from __future__ import annotations

import logging
import threading
import uuid
from typing import Any

from moto.sts.models import sts_backends
from moto.utilities.utils import get_partition

from local_aws.awslambda import logs
from local_aws.awslambda.functions import Function
from local_aws.awslambda.nodejs import Credentials, Invocation, Network, NodeRuntime
from local_aws.host import HOST

log = logging.getLogger("local_aws.lambda")


class AsyncInvocation:
    """An asynchronous invocation, with its retries, running on a thread of its own."""

    def __init__(self, service: LambdaService, function: Function, event: Any) -> None:
        self.function, self.event = function, event
        self.attempts: list[Invocation] = []
        #: Why the local AWS could not run it at all ("" when it ran).
        self.failure = ""
        self.done = threading.Event()
        self._service = service
        self._generation = service.generation
        self._thread = threading.Thread(target=self._run, name=f"lambda-{function.name}", daemon=True)

    def start(self) -> AsyncInvocation:
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            request_id = str(uuid.uuid4())  # retries keep the request id, as Lambda's do
            for _ in range(1 + self.function.async_retries):
                attempt = self._service.invoke(self.function, self.event, request_id=request_id)
                self.attempts.append(attempt)
                if attempt.ok or self._service.generation != self._generation:
                    break  # done, or the local AWS stopped or forgot its account meanwhile
        except Exception as exc:
            self.failure = f"{type(exc).__name__}: {exc}"
            log.exception("the local AWS could not invoke %s", self.function.name)
        finally:
            self.done.set()

    @property
    def last(self) -> Invocation | None:
        return self.attempts[-1] if self.attempts else None


class LambdaService:
    """Where functions' calls go, and the invocations running."""

    def __init__(self) -> None:
        self.runtime = NodeRuntime()
        self._network: Network | None = None
        #: Counts stop_all calls: an invocation started before one is not retried after it.
        self.generation = 0

    def configure(self, endpoint_url: str, routes: tuple[tuple[str, str], ...] = ()) -> None:
        """Send the functions' calls to `endpoint_url` (the local AWS), and connections to hosts
        that match a pattern of `routes` to its address."""
        self._network = Network(endpoint_url=endpoint_url, routes=routes)

    @property
    def network(self) -> Network:
        if self._network is None:
            raise RuntimeError("the local AWS is not running: functions have no endpoint to call")
        return self._network

    def invoke(self, function: Function, event: Any, *, request_id: str | None = None) -> Invocation:
        """One synchronous invocation; its output is in its log group."""
        request_id = request_id or str(uuid.uuid4())
        invocation = self.runtime.run(
            function, event, credentials=assume(function), network=self.network, request_id=request_id
        )
        logs.deliver(function, invocation.log_stream, invocation.events)
        return invocation

    def invoke_async(self, function: Function, event: Any) -> AsyncInvocation:
        return AsyncInvocation(self, function, event).start()

    def stop_all(self) -> None:
        self.generation += 1
        self.runtime.stop_all()


def assume(function: Function) -> Credentials:
    """The execution role's temporary credentials, from the local AWS's STS."""
    partition = get_partition(function.region)
    session = sts_backends[function.account][partition].assume_role(
        region_name=function.region,
        role_session_name=function.name[:64],
        role_arn=function.role_arn,
        policy="",
        duration=3600,
        external_id="",
    )
    return Credentials(session.access_key_id, session.secret_access_key, session.session_token)


def lambda_plane() -> LambdaService:
    """The process's Lambda runtime (local_aws/host.py): every account's functions run there."""
    return HOST.plane(LambdaService)
