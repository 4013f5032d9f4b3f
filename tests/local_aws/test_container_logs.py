"""A container's output shipper (local_aws/sagemaker/logs.py) on its own: what the file holds
when the container stops is shipped, the thread is joined, and the buffer is bounded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from moto.logs.models import logs_backends

from local_aws.sagemaker.logs import ContainerLog, LogTarget

# An account of its own: moto's backends are this process's, shared with in-process local AWSs.
ACCOUNT, REGION = "000000000038", "us-east-1"
GROUP = "/aws/sagemaker/Endpoints/shipped"


@pytest.fixture
def backend() -> Iterator[object]:
    found = logs_backends[ACCOUNT][REGION]
    yield found
    found.groups.pop(GROUP, None)


def messages(backend: object, stream: str) -> list[str]:
    events = backend.groups[GROUP].streams[stream].events  # type: ignore[attr-defined]
    return [e.message for e in events]


def test_the_last_lines_are_shipped_when_the_container_stops(backend: object, tmp_path: Path) -> None:
    out = tmp_path / "container.log"
    out.write_bytes(b"first\n")
    shipper = ContainerLog(LogTarget(ACCOUNT, REGION, GROUP, None, "AllTraffic/"), "AllTraffic/i-1", out).start()
    with open(out, "ab") as f:
        f.write(b"second\nno newline at the end")
    out.unlink()  # the container's run folder is removed when it stops: the open file is read to its end
    shipper.stop()
    assert not shipper.running
    assert messages(backend, "AllTraffic/i-1") == ["first", "second", "no newline at the end"]


def test_past_its_bound_the_oldest_lines_are_dropped(backend: object, tmp_path: Path) -> None:
    out = tmp_path / "container.log"
    out.write_bytes(b"".join(b"line %d\n" % n for n in range(10)))
    # Stopped before its first shipment: the ten lines are read into a buffer of four at once.
    ContainerLog(LogTarget(ACCOUNT, REGION, GROUP, None), "i-2", out, max_buffered=4).start().stop()
    assert messages(backend, "i-2") == ["line 6", "line 7", "line 8", "line 9"]
