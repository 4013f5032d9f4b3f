"""bench/local_aws_soak.py's parts that need no deploy: the metrics plane switched for an arm and
back, the RSS sampler, the table docs/BENCHMARKS.md shows."""

from __future__ import annotations

import time

from bench.local_aws_soak import RssSampler, metrics_plane, table
from local_aws.sagemaker import metrics


def test_an_arm_switches_the_metrics_plane_and_puts_it_back() -> None:
    backend = metrics.metrics_backends["123456789012"]["us-east-1"]
    before = backend.publishing
    with metrics_plane(not before, "123456789012", "us-east-1"):
        assert backend.publishing is (not before)
    assert backend.publishing is before


def test_the_sampler_reads_this_process_s_rss_until_it_stops() -> None:
    with RssSampler(interval_s=0.01) as rss:
        deadline = time.monotonic() + 30  # clock: a generous bound on a thread's first samples
        while len(rss.samples) < 3 and time.monotonic() < deadline:  # clock: the same 30 s wait
            time.sleep(0.01)
    taken = len(rss.samples)
    time.sleep(0.05)
    assert taken >= 3 and len(rss.samples) == taken  # it stopped with the block
    assert all(rss > 10_000_000 for _, rss in rss.samples)  # a Python with pytest: tens of MB
    assert [t for t, _ in rss.samples] == sorted(t for t, _ in rss.samples)


def test_the_table_has_a_row_per_arm() -> None:
    arm = {
        "requests": 1000,
        "qps": 200.0,
        "latency_ms": {"p50": 150.0, "p99": 300.0, "max": 600.0},
        "rss_mb": {"settled_start": 337.0, "end": 360.0},
        "rss_growth": 0.067,
        "bytes_per_request": 444.0,
    }
    rows = table({"arms": [{**arm, "metrics_plane": "off"}, {**arm, "metrics_plane": "on"}]}).splitlines()
    assert len(rows) == 4
    assert rows[2].startswith("| off | 1,000 | 200.0 | 150.0 | 300.0 | 600 | 337 -> 360 | +6.7% | 444 |")
