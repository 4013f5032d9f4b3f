"""The local AWS's own faults: an exception no handler of the emulator expected.

AWS answers an error of its own (500) in the protocol of the service that met it, which the SDKs
parse as any other error: ``InternalFailure`` ("The request processing has failed because of an
unknown error, exception or failure", the API references' Common Errors; S3 and EC2 call it
``InternalError``). The local AWS does the same (the patch ``local_aws.patches.protocol``
answers with :func:`answer`), and since every such answer is a fault of the emulator, not of
the caller, each is logged with its traceback and kept in the host's :class:`Faults`
(local_aws/host.py), which the test session reads: a test during which one happened fails
(tests/conftest.py).
"""

from __future__ import annotations

import json
import logging
import threading
import traceback
import uuid
from dataclasses import dataclass
from functools import cache
from typing import Any
from xml.sax.saxutils import escape

log = logging.getLogger("local_aws.faults")

#: What AWS says with InternalFailure (the API references' Common Errors).
MESSAGE = "The request processing has failed because of an unknown error, exception or failure."


@dataclass(frozen=True)
class Fault:
    """One fault: where it happened and its traceback."""

    service: str
    where: str
    error: str
    traceback: str


class Faults:
    """The faults met since they were last taken (thread-safe: the server answers in threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._found: list[Fault] = []

    def record(self, service: str, where: str, exc: BaseException) -> Fault:
        fault = Fault(
            service=service,
            where=where,
            error=f"{type(exc).__name__}: {exc}",
            traceback="".join(traceback.format_exception(exc)),
        )
        log.error("the local AWS failed in %s (%s): %s\n%s", service, where, fault.error, fault.traceback)
        with self._lock:
            self._found.append(fault)
        return fault

    def take(self) -> list[Fault]:
        """The faults met so far, forgotten here."""
        with self._lock:
            found, self._found = self._found, []
        return found

    def __len__(self) -> int:
        with self._lock:
            return len(self._found)


@cache
def protocol_of(backend: str) -> str:
    """The protocol of moto's backend `backend` (its name is the service's without hyphens), as
    botocore's model says; JSON where no model matches."""
    from local_aws.validation.model import botocore_session

    session = botocore_session()
    names = {name.replace("-", ""): name for name in session.get_available_services()}
    name = {"awslambda": "lambda"}.get(backend, backend)
    if name not in names:
        return "json"
    return str(session.get_service_model(names[name]).metadata["protocol"])


# Built whole, not a ServiceException: it answers in Flask's error handler, after moto's gave up.
def answer(backend: str, fault: Fault) -> tuple[int, dict[str, str], str]:
    """(status, headers, body) of AWS's answer to a request it failed on, in the protocol of
    moto's backend `backend`."""
    message = f"{MESSAGE} (local AWS: {fault.error}; its log has the traceback)"
    request_id = str(uuid.uuid4())
    protocol = protocol_of(backend)
    if protocol in ("json", "rest-json"):
        headers = {"Content-Type": "application/json", "x-amzn-ErrorType": "InternalFailure",
                   "x-amzn-RequestId": request_id}  # fmt: skip
        return 500, headers, json.dumps({"__type": "InternalFailure", "message": message})
    said = escape(message)
    if protocol == "ec2":
        body = (
            f"<Response><Errors><Error><Code>InternalError</Code><Message>{said}</Message></Error></Errors>"
            f"<RequestID>{request_id}</RequestID></Response>"
        )
    elif protocol == "rest-xml":
        body = f"<Error><Code>InternalError</Code><Message>{said}</Message><RequestId>{request_id}</RequestId></Error>"
    else:  # query
        body = (
            f"<ErrorResponse><Error><Type>Receiver</Type><Code>InternalFailure</Code><Message>{said}</Message>"
            f"</Error><RequestId>{request_id}</RequestId></ErrorResponse>"
        )
    return 500, {"Content-Type": "text/xml", "x-amzn-RequestId": request_id}, body


def where(request: Any) -> str:
    """The request a fault met, as a log line names it."""
    return f"{getattr(request, 'method', '?')} {getattr(request, 'path', '?')}"
