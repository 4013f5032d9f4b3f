"""--stream: InvokeEndpointWithResponseStream timed token by token, against a local AWS endpoint
whose container streams (tests/local_aws/echo_image.py), and the figures in the report, the
endpoint's own among them. The invoker's timing is read off a clock counted in the container's
parts (PartClock), not off the wall clock: what it proves does not depend on the host's speed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from loadtest.invokers import StreamingInvoker, StreamTiming, Target, client_config, count_tokens
from loadtest.report import markdown, stream_table, write
from loadtest.request import Request
from loadtest.runner import LevelRun, Recorder
from loadtest.stats import classify
from local_aws import LocalAws
from local_aws.sagemaker.runtime import hosting_plane
from tests.infra.helpers import ROOT
from tests.loadtest.test_report import report
from tests.local_aws.helpers import Gates, echo_endpoint, echo_launcher, endpoint_status


def token(text: str) -> str:
    return json.dumps({"token": {"id": 1, "text": text}}) + "\n"


@pytest.fixture(scope="module")
def aws() -> Iterator[LocalAws]:
    with LocalAws(aws_managed_policies=False) as local, pytest.MonkeyPatch.context() as patched:
        patched.setattr(hosting_plane(), "launcher", echo_launcher)
        echo_endpoint(local, "echo")
        assert endpoint_status(local, "echo", settle=True) == "InService"
        yield local


def invoker(aws: LocalAws, body: object, clock: Callable[[], float] | None = None) -> StreamingInvoker:
    client = aws.client("sagemaker-runtime", config=client_config(1))
    request = Request(body=json.dumps(body).encode(), content_type="application/json")
    if clock is None:
        return StreamingInvoker(client, Target("echo"), request)
    return StreamingInvoker(client, Target("echo"), request, clock=clock)


class PartClock:
    """A clock for the invoker of a gated answer (tests/local_aws/helpers.py: Gates), counted in
    the container's parts: a reading is how many parts the container has sent, and lets it send
    the next. The invoker reads its clock as each part arrives, so a token's time is the number of
    the part it was timed at: the container cannot run ahead of the reader, and a reader that
    read its clock only at the stream's end would hold the container at its second part for good."""

    def __init__(self, gates: Gates) -> None:
        self.gates = gates

    def __call__(self) -> float:
        sent = self.gates.sent()
        self.gates.open(sent)  # the next part (gate 0, or one past the last part, holds nothing)
        return float(sent)


@pytest.mark.parametrize(
    ("line", "tokens"),
    [
        (b'{"token": {"id": 5, "text": " a"}}', 1),
        (b'{"end": {"text": "a"}}', 0),
        (b'{"error": {"code": "timeout"}}', 0),
        (b'data: {"choices": [{"text": " a"}]}', 1),
        (b"data: [DONE]", 0),
        (b"", 0),
        (b"{not json", 0),
    ],
)
def test_a_token_is_a_line_with_a_token(line: bytes, tokens: int) -> None:
    assert count_tokens(line) == tokens


def test_each_token_is_timed_as_it_arrives(aws: LocalAws, tmp_path: Path) -> None:
    # Three tokens, the second line split over two chunks, then the end line; each chunk sent only
    # once the invoker has read the one before, and timed in chunks sent (PartClock).
    gates = Gates(tmp_path / "gates")
    second = token("b")
    parts = [token("a"), second[:10], second[10:], token("c") + '{"end": {}}\n']
    timing = invoker(aws, gates.request(parts), PartClock(gates))()
    # a when the first chunk came, before the container sent the second; b when its line's second
    # half came (the third chunk), not its first; c with the fourth; the stream's end after it.
    assert timing.token_times_s == (1.0, 3.0, 4.0)
    assert timing.first_token_s == 1.0 and timing.gaps_s == [2.0, 1.0]
    assert timing.duration_s == 4.0


def test_an_answer_without_token_lines_counts_its_parts(aws: LocalAws, tmp_path: Path) -> None:
    gates = Gates(tmp_path / "gates")
    timing = invoker(aws, gates.request(["x", "y"]), PartClock(gates))()
    assert timing.token_times_s == (1.0, 2.0)  # a part a token, each timed as it came


def test_a_broken_stream_is_counted_as_model_stream_error(aws: LocalAws) -> None:
    with pytest.raises(ClientError) as raised:
        invoker(aws, {"parts": [token("a"), token("b")], "cut_after": 1})()
    assert classify(raised.value) == "ModelStreamError"


def test_the_level_sums_up_its_streams_and_the_report_shows_them(tmp_path: Path) -> None:
    recorder = Recorder(
        latencies_s=[1.0, 2.0], streams=[StreamTiming((0.1, 0.2, 0.4), 1.0), StreamTiming((0.3, 0.5), 2.0)]
    )
    started = datetime(2026, 12, 1, tzinfo=UTC)
    level = LevelRun(1, 10.0, started, started + timedelta(seconds=10), 10.0, [recorder]).summary()
    stream = level["stream"]
    assert (stream["requests"], stream["tokens"], stream["tokens_per_s"]) == (2, 5, 0.5)
    assert stream["time_to_first_token_ms"]["p50"] == pytest.approx(100) and stream["time_to_first_token_ms"][
        "max"
    ] == pytest.approx(300)
    assert sorted(
        round(v) for v in (stream["time_between_tokens_ms"]["p50"], stream["time_between_tokens_ms"]["max"])
    ) == [200, 200]
    assert stream["tokens_per_s_per_request"]["mean"] == pytest.approx((3 / 1.0 + 2 / 2.0) / 2)
    document = report([level])
    table = stream_table([level])
    assert table is not None and table in markdown(document)
    assert "| 1 | 2 | 5 | 100.0 / 300.0 / 300.0 |" in table
    paths = write(document, tmp_path)
    assert paths["plot"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads(paths["json"].read_text())["levels"][0]["stream"] == stream


def test_a_level_that_did_not_stream_has_no_stream_figures() -> None:
    started = datetime(2026, 12, 1, tzinfo=UTC)
    level = LevelRun(1, 10.0, started, started, 1.0, [Recorder(latencies_s=[1.0])]).summary()
    assert level["stream"] is None and stream_table([level]) is None


def test_the_endpoint_figures_are_what_sagemaker_published(aws: LocalAws, tmp_path: Path) -> None:
    # On a local AWS on wall time, as a user runs one: the endpoint's ModelLatency and
    # OverheadLatency of the level's window, as SageMaker publishes them for each invocation.
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"content_type": "application/json", "body": {"parts": [token("a")],
                                                                                 "part_delay_s": 0.05}}))  # fmt: skip
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "loadtest", "--endpoint", "echo", "--request", str(request), "--stream",
         "--concurrency", "2", "--seconds", "2", "--metrics-wait", "0", "--warmup", "0", "--out", str(out)],
        cwd=ROOT, env=aws.environment(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (level,) = json.loads((out / "report.json").read_text())["levels"]
    figures = level["endpoint"]
    assert figures["status"] == "published", figures
    (scope,) = figures["scopes"].values()
    # Every invocation of the window, and the container's share of each is most of it.
    assert scope["ModelLatency"]["samples"] >= level["successes"]
    assert 50 <= scope["ModelLatency"]["p50"] < level["latency_ms"]["max"]
