"""Statistics of a level: latency percentiles, and what kind of error each failed request was."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError, ConnectTimeoutError, ReadTimeoutError

from loadtest.invokers import AsyncFailure

#: Error codes AWS answers a throttled request with (botocore's own list, for every service:
#: botocore.retries.standard.ThrottledRetryableChecker), and SageMaker's.
THROTTLING_CODES = frozenset(
    {
        "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException",
        "TooManyRequestsException", "ProvisionedThroughputExceededException", "TransactionInProgressException",
        "RequestLimitExceeded", "BandwidthLimitExceeded", "LimitExceededException", "RequestThrottled",
        "SlowDown", "PriorRequestNotComplete", "EC2ThrottledException",
    }
)  # fmt: skip
THROTTLING = "throttling"
TIMEOUT = "timeout"
PERCENTILES = (50, 90, 99)


def percentile(ordered: Sequence[float], p: float) -> float:
    """The nearest-rank percentile of `ordered` (sorted ascending, not empty): the smallest value
    that at least p% of the values are at or below; a value that was measured, never an
    interpolation between two."""
    if not ordered:
        raise ValueError("no values: a percentile needs at least one")
    if not 0 < p <= 100:
        raise ValueError(f"p={p} is invalid: allowed is 0 < p <= 100")
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def latency_summary(latencies_s: Sequence[float]) -> dict[str, float] | None:
    """mean, p50, p90, p99 and max in milliseconds; None without a single latency."""
    return summary([1000 * s for s in latencies_s])


def summary(values: Sequence[float]) -> dict[str, float] | None:
    """mean, p50, p90, p99 and max of `values`; None without a single value."""
    if not values:
        return None
    ordered = sorted(values)
    found = {"mean": statistics.fmean(ordered)}
    found.update({f"p{p}": percentile(ordered, p) for p in PERCENTILES})
    found["max"] = ordered[-1]
    return found


def classify(exc: BaseException) -> str:
    """The kind of a failed request: ``throttling``, ``ModelError <the container's status>``,
    ``timeout`` (ours, or SageMaker's 60 s limit: a ModelError of status 0), or ``other (<code or
    exception>)``."""
    if isinstance(exc, ReadTimeoutError | ConnectTimeoutError | TimeoutError):
        return TIMEOUT
    if isinstance(exc, AsyncFailure):
        return "async failure"
    if not isinstance(exc, ClientError):
        return f"other ({type(exc).__name__})"
    response: dict[str, Any] = exc.response
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    # A bare 429 (a proxy's) is throttling too; SageMaker's 429 ModelNotReadyException is not.
    if code in THROTTLING_CODES or (status == 429 and code in ("", "429")):
        return THROTTLING
    if code == "ModelError":
        original = response.get("OriginalStatusCode")
        # SageMaker's own timeout is a ModelError whose container status is 0 ("Received server
        # error (0) ... Your invocation timed out while waiting for a response from container").
        if not original:
            said = (response.get("Error", {}).get("Message"), response.get("Message"), response.get("OriginalMessage"))
            return TIMEOUT if any("timed out" in str(text) for text in said) else "ModelError"
        return f"ModelError {original}"
    if code in ("ModelStreamError", "InternalStreamFailure"):
        return code  # an error event of a stream, after its first parts (InvokeEndpointWithResponseStream)
    return f"other ({code or status or 'unknown'})"


def error_message(exc: BaseException, limit: int = 300) -> str:
    """What the report shows of one error of each kind."""
    if isinstance(exc, ClientError):
        response: dict[str, Any] = exc.response
        text = str(response.get("OriginalMessage") or response.get("Error", {}).get("Message", "")) or str(exc)
    else:
        text = str(exc)
    return text if len(text) <= limit else text[: limit - 3] + "..."
