"""The report of a run: JSON (every figure), a Markdown table and a PNG plot, in one folder."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from loadtest.metrics import PUBLISHED, UNAVAILABLE

FILES = {"json": "report.json", "markdown": "report.md", "plot": "report.png"}
HEADER = (
    "| concurrency | requests | successes | QPS | mean ms | p50 ms | p90 ms | p99 ms | max ms | errors "
    "| endpoint ModelLatency mean / p50 / p99 ms | endpoint OverheadLatency mean / max ms |"
)
ALIGN = "|" + "---:|" * 9 + "---|---|---|"
NOTES = (
    "Closed loop: each client sends its next request when the last one is answered, without retries "
    "(a throttled request is counted, not retried). Latencies are the client's, from the call to the "
    "last byte of the answer, over the successful requests. QPS is requests over the elapsed time, from "
    "the first request to the last answer (requests in flight at the deadline are waited for). The "
    "endpoint's columns are CloudWatch's AWS/SageMaker ModelLatency (the container) and OverheadLatency "
    "(SageMaker's own), over the whole minutes each level's window touches."
)


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def _errors(errors: Mapping[str, int]) -> str:
    return ", ".join(f"{kind}: {n}" for kind, n in errors.items()) or "none"


#: The figures shown of each endpoint metric: OverheadLatency has no percentiles (loadtest.metrics).
SHOWN = {"ModelLatency": ("mean", "p50", "p99"), "OverheadLatency": ("mean", "max")}


def _endpoint(figures: Mapping[str, Any] | None, metric: str) -> str:
    if not figures:
        return "not queried"
    if figures["status"] != PUBLISHED:
        return str(figures["status"])
    cells = []
    for scope, metrics in figures["scopes"].items():
        stats = metrics.get(metric)
        cell = " / ".join(_ms(stats.get(k)) for k in SHOWN[metric]) if stats else "not published"
        cells.append(cell if len(figures["scopes"]) == 1 else f"{scope}: {cell}")
    return "; ".join(cells)


def row(level: Mapping[str, Any]) -> list[str]:
    latency = level["latency_ms"] or {}
    return [
        str(level["concurrency"]),
        str(level["requests"]),
        str(level["successes"]),
        f"{level['qps']:.2f}",
        *(_ms(latency.get(k)) for k in ("mean", "p50", "p90", "p99", "max")),
        _errors(level["errors"]),
        _endpoint(level.get("endpoint"), "ModelLatency"),
        _endpoint(level.get("endpoint"), "OverheadLatency"),
    ]


def table(levels: Sequence[Mapping[str, Any]], label: tuple[str, Sequence[str]] | None = None) -> str:
    """The levels as a Markdown table; `label` adds a first column (its header and a value per level)."""
    header, align = HEADER, ALIGN
    if label is not None:
        header, align = f"| {label[0]} {header}", f"|---{align}"
    lines = [header, align]
    for i, level in enumerate(levels):
        cells = row(level) if label is None else [label[1][i], *row(level)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


STREAM_HEADER = (
    "| concurrency | streamed | tokens | time to first token p50 / p90 / p99 ms "
    "| time between tokens p50 / p90 / p99 ms | tokens/s per request mean / p50 | tokens/s in total |"
)
STREAM_NOTES = (
    "Streamed (--stream): InvokeEndpointWithResponseStream, times as the client reads them. A token is a line "
    'of the answer with a token (a JSON line with "token", or a server-sent event\'s data line); tokens that '
    "arrive in one PayloadPart arrive together (a gap of 0). Tokens per second of a request are its tokens over "
    "its time from the call to the stream's end; in total, every token of the level over its elapsed time."
)


def _three(stats: Mapping[str, float] | None, keys: Sequence[str] = ("p50", "p90", "p99")) -> str:
    return " / ".join(_ms((stats or {}).get(k)) for k in keys)


def stream_table(levels: Sequence[Mapping[str, Any]]) -> str | None:
    """The streamed figures of the levels as a Markdown table; None when none streamed."""
    if not any(level.get("stream") for level in levels):
        return None
    lines = [STREAM_HEADER, "|" + "---:|" * 7]
    for level in levels:
        stream = level.get("stream") or {}
        cells = [
            str(level["concurrency"]),
            str(stream.get("requests", 0)),
            str(stream.get("tokens", 0)),
            _three(stream.get("time_to_first_token_ms")),
            _three(stream.get("time_between_tokens_ms")),
            _three(stream.get("tokens_per_s_per_request"), ("mean", "p50")),
            _ms(stream.get("tokens_per_s")),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def markdown(report: Mapping[str, Any]) -> str:
    target, request = report["target"], report["request"]
    component = f", inference component `{target['inference_component']}`" if target["inference_component"] else ""
    lines = [
        f"# Load test of endpoint `{target['endpoint']}`{component}",
        "",
        f"- AWS: region {report['region']}, {report['aws_endpoint']}",
        f"- request: {request['file']} ({request['bytes']} bytes, {request['content_type']})",
        f"- levels: concurrency {', '.join(str(c) for c in report['concurrency'])}, {report['seconds']:g} s each",
        f"- started {report['started_at']}; command: `{report['command']}`",
        "",
        table(report["levels"]),
        "",
        NOTES,
    ]
    streamed = stream_table(report["levels"])
    if streamed is not None:
        lines.extend(["", streamed, "", STREAM_NOTES])
    lines.extend(_problems(report["levels"]))
    return "\n".join(lines) + "\n"


def _problems(levels: Sequence[Mapping[str, Any]]) -> list[str]:
    """An example of each kind of error per level, and why CloudWatch could not be read."""
    lines = []
    for level in levels:
        for kind, message in level["error_examples"].items():
            lines.append(f"- c={level['concurrency']}, {kind}: {message}")
        endpoint = level.get("endpoint") or {}
        if endpoint.get("status") == UNAVAILABLE:
            lines.append(f"- c={level['concurrency']}, CloudWatch: {endpoint['reason']}")
        if level.get("interrupted"):
            lines.append(f"- c={level['concurrency']}: interrupted (Ctrl-C) before its {level['seconds']:g} s")
    return ["", "Errors and notes:", "", *lines] if lines else []


def plot(series: Mapping[str, Sequence[Mapping[str, Any]]], path: Path, title: str) -> None:
    """QPS and latency (p50, p99) against concurrency, one line per series of levels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    streamed = any(level.get("stream") for levels in series.values() for level in levels)
    fig, axes = plt.subplots(1, 3 if streamed else 2, figsize=(16 if streamed else 11, 4.2))
    qps_ax, lat_ax = axes[0], axes[1]
    for i, (name, levels) in enumerate(series.items()):
        color = f"C{i}"
        xs = [level["concurrency"] for level in levels]
        qps_ax.plot(xs, [level["qps"] for level in levels], marker="o", color=color, label=name)
        for stat, style in (("p50", "-"), ("p99", ":")):
            ys = [(level["latency_ms"] or {}).get(stat) for level in levels]
            lat_ax.plot(xs, [float("nan") if y is None else y for y in ys], style, marker="o", color=color,
                        label=f"{name}, {stat}")  # fmt: skip
        if streamed:
            for stat, style in (("p50", "-"), ("p99", ":")):
                ys = [((level.get("stream") or {}).get("time_to_first_token_ms") or {}).get(stat) for level in levels]
                axes[2].plot(xs, [float("nan") if y is None else y for y in ys], style, marker="o", color=color,
                             label=f"{name}, first token {stat}")  # fmt: skip
            ys = [((level.get("stream") or {}).get("time_between_tokens_ms") or {}).get("p50") for level in levels]
            axes[2].plot(xs, [float("nan") if y is None else y for y in ys], "--", marker="x", color=color,
                         label=f"{name}, between tokens p50")  # fmt: skip
    concurrency = sorted({level["concurrency"] for levels in series.values() for level in levels})
    titled = [(qps_ax, "throughput (QPS)"), (lat_ax, "client latency (ms)")]
    if streamed:
        titled.append((axes[2], "streamed tokens (ms)"))
    for ax, axis_title in titled:
        ax.set_xscale("log", base=2)
        ax.set_xticks(concurrency, [str(c) for c in concurrency])
        ax.set_xlabel("concurrent clients")
        ax.set_title(axis_title)
        ax.grid(alpha=0.3)
    for ax, _ in titled:
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(report: Mapping[str, Any], out: Path) -> dict[str, Path]:
    """report.json, report.md and report.png in `out`; returns their paths by kind. Without
    matplotlib the plot is left out: every figure is in the other two, and a run that took
    minutes is not lost to a missing plotting library."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {kind: out / name for kind, name in FILES.items()}
    paths["json"].write_text(json.dumps(report, indent=2) + "\n")
    paths["markdown"].write_text(markdown(report))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        del paths["plot"]
        return paths
    title = f"InvokeEndpoint {report['target']['endpoint']}, {report['seconds']:g} s per level"
    plot({report["target"]["endpoint"]: report["levels"]}, paths["plot"], title)
    return paths
