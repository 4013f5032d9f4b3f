"""The report's files: JSON with every figure, the Markdown table, the plot."""

from __future__ import annotations

import json
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from loadtest.report import HEADER, markdown, table, write
from loadtest.runner import LevelRun, Recorder
from tests.loadtest.helpers import level

STARTED = datetime(2026, 12, 1, 10, 0, 5, tzinfo=UTC)


def summary(concurrency: int, successes: int, errors: dict[str, int], seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    recorders = [Recorder() for _ in range(concurrency)]
    for i in range(successes):
        recorders[i % concurrency].latencies_s.append(rng.uniform(0.02, 0.3))
    for kind, n in errors.items():
        recorders[0].errors.extend((kind, f"an example of {kind}") for _ in range(n))
    elapsed = rng.uniform(10, 11)
    run = LevelRun(concurrency, 10.0, STARTED, STARTED + timedelta(seconds=elapsed), elapsed, recorders)
    return run.summary()


def report(levels: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "tool": "python -m loadtest",
        "command": "python -m loadtest --endpoint e --request r.json",
        "target": {"endpoint": "e", "inference_component": None},
        "region": "us-east-1",
        "aws_endpoint": "http://127.0.0.1:5000",
        "request": {"file": "r.json", "bytes": 19, "content_type": "application/json", "accept": None},
        "concurrency": [lv["concurrency"] for lv in levels],
        "seconds": 10.0,
        "started_at": levels[0]["started_at"],
        "levels": levels,
    }


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_a_row_per_level_with_its_figures() -> None:
    levels = [summary(1, 40, {}, 1), summary(4, 120, {"ModelError 400": 3, "throttling": 2}, 2)]
    lines = table(levels).splitlines()
    assert len(lines) == 2 + len(levels)
    header = cells(lines[0])
    for line, lv in zip(lines[2:], levels, strict=True):
        row = dict(zip(header, cells(line), strict=True))
        assert int(row["concurrency"]) == lv["concurrency"]
        assert int(row["requests"]) == lv["requests"] == lv["successes"] + sum(lv["errors"].values())
        assert int(row["successes"]) == lv["successes"]
        assert float(row["QPS"]) == pytest.approx(lv["qps"], abs=0.005)
        for stat in ("mean", "p50", "p90", "p99", "max"):
            assert float(row[f"{stat} ms"]) == pytest.approx(lv["latency_ms"][stat], abs=0.05)
        for kind, n in lv["errors"].items():
            assert f"{kind}: {n}" in row["errors"]
        assert row["endpoint ModelLatency mean / p50 / p99 ms"] == "not queried"
    assert cells(lines[2])[header.index("errors")] == "none"


def test_a_level_without_a_success_has_no_latency() -> None:
    (line,) = table([summary(2, 0, {"ModelError 400": 7}, 3)]).splitlines()[2:]
    row = dict(zip(cells(HEADER), cells(line), strict=True))
    assert row["successes"] == "0" and row["p50 ms"] == "–" and row["errors"] == "ModelError 400: 7"


def published(scopes: dict[str, Any]) -> dict[str, Any]:
    return {"status": "published", "scopes": scopes, "window": {}}


@pytest.mark.parametrize(
    ("endpoint", "model", "overhead"),
    [
        ({"status": "not published", "scopes": {}}, "not published", "not published"),
        ({"status": "unavailable", "reason": "AccessDenied: no"}, "unavailable", "unavailable"),
        (
            published({"AllTraffic": {"ModelLatency": {"mean": 12.34, "p50": 11.0, "p99": 30.0}}}),
            "12.3 / 11.0 / 30.0",
            "not published",
        ),
        (
            published(
                {
                    "A": {"ModelLatency": {"mean": 1.0, "p50": None, "p99": 3.0}, "OverheadLatency": {"mean": 2.0}},
                    "B": {"ModelLatency": {"mean": 4.0, "p50": 5.0, "p99": 6.0}},
                }
            ),
            "A: 1.0 / – / 3.0; B: 4.0 / 5.0 / 6.0",
            "A: 2.0 / –; B: not published",
        ),
    ],
)
def test_the_endpoints_own_figures_beside_the_clients(endpoint: dict[str, Any], model: str, overhead: str) -> None:
    (line,) = table([level(1, endpoint=endpoint)]).splitlines()[2:]
    row = dict(zip(cells(HEADER), cells(line), strict=True))
    assert row["endpoint ModelLatency mean / p50 / p99 ms"] == model
    assert row["endpoint OverheadLatency mean / max ms"] == overhead


def test_a_label_column() -> None:
    lines = table([level(1), level(1)], ("batching", ["on", "off"])).splitlines()
    assert cells(lines[0])[0] == "batching" and len(cells(lines[1])) == len(cells(lines[0]))
    assert [cells(line)[0] for line in lines[2:]] == ["on", "off"]


def test_markdown_says_what_was_run_and_why_requests_failed() -> None:
    levels = [summary(1, 5, {"ModelError 400": 2}, 4)]
    levels[0]["endpoint"] = {"status": "unavailable", "reason": "AccessDeniedException: not allowed"}
    text = markdown(report(levels))
    assert "# Load test of endpoint `e`" in text
    assert "python -m loadtest --endpoint e --request r.json" in text
    assert "r.json (19 bytes, application/json)" in text
    assert "- c=1, ModelError 400: an example of ModelError 400" in text
    assert "- c=1, CloudWatch: AccessDeniedException: not allowed" in text
    assert table(levels) in text


def test_files_are_written(tmp_path: Path) -> None:
    levels = [summary(1, 30, {}, 5), summary(4, 0, {"timeout": 4}, 6), summary(16, 90, {}, 7)]
    document = report(levels)
    paths = write(document, tmp_path / "out")
    assert json.loads(paths["json"].read_text()) == document
    assert paths["markdown"].read_text() == markdown(document)
    assert paths["plot"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_matplotlib_the_report_is_written_without_its_plot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """boto3 alone runs a load test: the figures are not lost at the end for want of a plot."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    document = report([summary(1, 30, {}, 5)])
    paths = write(document, tmp_path / "out")
    assert set(paths) == {"json", "markdown"}
    assert json.loads(paths["json"].read_text()) == document
    assert not (tmp_path / "out" / "report.png").exists()
