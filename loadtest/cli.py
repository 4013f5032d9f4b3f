"""`python -m loadtest`: load-test a SageMaker endpoint, level after level of closed-loop clients.

The AWS credentials, region and endpoint URL come from where boto3 finds them (the standard
credential chain, AWS_REGION, AWS_ENDPOINT_URL), so the same command runs against AWS or the
local AWS (`python -m local_aws` prints the exports). A request file that cannot be sent, an
endpoint that does not exist or is not InService, and a bad option are refused with one line
and exit code 2 before any request is sent.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn, TextIO

from botocore.exceptions import BotoCoreError, ClientError

from loadtest import metrics
from loadtest.invokers import (
    DEFAULT_READ_TIMEOUT_S,
    Target,
    async_invokers,
    client_config,
    sagemaker_invokers,
    split_s3_url,
)
from loadtest.report import markdown, write
from loadtest.request import Request, RequestFileError, load_request
from loadtest.runner import LevelRun, ProgressLine, level_line, run_level, warm_up

PROG = "python -m loadtest"
MAX_CONCURRENCY = 1024
DEFAULT_METRICS_WAIT_S = 180.0


class TargetError(RuntimeError):
    """The endpoint cannot be load-tested now; the message says why and what to do."""


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad option is one line (no usage block) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _bounded(kind: type[int] | type[float], low: float, high: float, what: str) -> Any:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text} is out of range: allowed is {what}")
        return value

    return parse


POSITIVE_SECONDS = _bounded(float, 1e-3, 24 * 3600.0, "a number of seconds above 0 (at most a day)")


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--endpoint", required=True, help="the SageMaker endpoint's name")
    p.add_argument(
        "--request",
        type=Path,
        required=True,
        help='JSON file: {"content_type": "application/json", "accept": ..., "body": <JSON>} '
        '(or "body_text": "<text sent as is>", "body_base64": "<bytes>"; optional "custom_attributes")',
    )
    p.add_argument(
        "--concurrency",
        nargs="+",
        type=_bounded(int, 1, MAX_CONCURRENCY, f"a whole number from 1 to {MAX_CONCURRENCY}"),
        default=[1, 4, 16],
        help="closed-loop clients of each level, one level after the other (default: 1 4 16)",
    )
    p.add_argument("--seconds", type=POSITIVE_SECONDS, default=30.0, help="length of each level (default: 30)")
    p.add_argument("--out", type=Path, help="folder for report.json, report.md, report.png "
                   "(default: build/loadtest/<endpoint>-<UTC time>)")  # fmt: skip
    p.add_argument("--inference-component", help="send to this inference component of the endpoint")
    p.add_argument(
        "--async",
        dest="async_input",
        nargs="?",
        const="",
        metavar="S3_PREFIX",
        help="the endpoint is asynchronous: put the request's body once under S3_PREFIX (default: input/ of the "
        "bucket of the endpoint's output path), send InvokeEndpointAsync and poll the output location; the "
        "latency is end to end, queueing included, and --read-timeout bounds the wait",
    )
    p.add_argument(
        "--stream",
        action="store_true",
        help="send InvokeEndpointWithResponseStream (the request's body must ask the container to stream, e.g. "
        "loadtest/requests/gpt2_stream.json) and measure time to first token, time between tokens and tokens per "
        "second beside the latency",
    )
    p.add_argument("--region", help="AWS region (default: AWS_DEFAULT_REGION, AWS_REGION, else the profile's)")
    p.add_argument("--read-timeout", type=POSITIVE_SECONDS, default=DEFAULT_READ_TIMEOUT_S,
                   help=f"seconds a request may wait for its answer (default: {DEFAULT_READ_TIMEOUT_S:g})")  # fmt: skip
    p.add_argument("--warmup", type=_bounded(int, 0, 10_000, "a whole number from 0 to 10000"), default=2,
                   help="requests sent first and not counted (default: 2)")  # fmt: skip
    p.add_argument(
        "--metrics-wait",
        type=_bounded(float, 0.0, 3600.0, "seconds from 0 to 3600"),
        default=DEFAULT_METRICS_WAIT_S,
        help="how long to wait for CloudWatch's figures of the last levels, which SageMaker publishes a minute "
        "or two late; only when the endpoint publishes any (default: 180; 0: ask once)",
    )
    return p


def check_target(sagemaker: Any, target: Target) -> list[str]:
    """The endpoint's production variants; TargetError unless it (and the inference component,
    if one is named) exists and is InService."""
    described = _describe(
        lambda: sagemaker.describe_endpoint(EndpointName=target.endpoint), "endpoint", target.endpoint
    )
    _in_service("endpoint", target.endpoint, described.get("EndpointStatus"), described.get("FailureReason"))
    if target.inference_component:
        name = target.inference_component
        component = _describe(
            lambda: sagemaker.describe_inference_component(InferenceComponentName=name), "inference component", name
        )
        if component.get("EndpointName") != target.endpoint:
            raise TargetError(
                f"inference component {name!r} belongs to endpoint {component.get('EndpointName')!r}, "
                f"not {target.endpoint!r}: pass that endpoint's name with --endpoint"
            )
        _in_service(
            "inference component", name, component.get("InferenceComponentStatus"), component.get("FailureReason")
        )
    return [variant["VariantName"] for variant in described.get("ProductionVariants", [])]


def _describe(call: Any, kind: str, name: str) -> dict[str, Any]:
    try:
        return call()  # type: ignore[no-any-return]
    except ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") in ("ValidationError", "ValidationException", "ResourceNotFound"):
            raise TargetError(
                f"{kind} {name!r} does not exist ({error.get('Message')}): check the name and the region "
                f"(AWS_REGION or --region; aws sagemaker list-endpoints lists them)"
            ) from None
        raise TargetError(f"cannot describe {kind} {name!r}: {error.get('Code')}: {error.get('Message')}") from None
    except BotoCoreError as exc:
        raise TargetError(
            f"cannot reach SageMaker to describe {kind} {name!r} ({exc}): set credentials (the standard chain), "
            "AWS_REGION, and AWS_ENDPOINT_URL for a local AWS"
        ) from None


def _in_service(kind: str, name: str, status: str | None, reason: str | None) -> None:
    if status != "InService":
        because = f" ({reason})" if reason else ""
        raise TargetError(f"{kind} {name!r} is {status}{because}, not InService: load-test it once it is InService")


def async_config(sagemaker: Any, endpoint: str) -> dict[str, Any] | None:
    """The endpoint's AsyncInferenceConfig (None: a real-time endpoint)."""
    described = sagemaker.describe_endpoint(EndpointName=endpoint)
    config = sagemaker.describe_endpoint_config(EndpointConfigName=described["EndpointConfigName"])
    return config.get("AsyncInferenceConfig") or None


def input_location(args: argparse.Namespace, sagemaker: Any, s3: Any, request: Request) -> str | None:
    """Where the asynchronous requests' body is (put there now), or None for a real-time target;
    TargetError when --async and the endpoint disagree."""
    config = async_config(sagemaker, args.endpoint)
    if args.async_input is None:
        if config is not None:
            raise TargetError(f"endpoint {args.endpoint!r} is asynchronous: pass --async (and an S3 prefix for the "
                              "requests if its output bucket is not the place)")  # fmt: skip
        return None
    if config is None:
        raise TargetError(f"endpoint {args.endpoint!r} has no AsyncInferenceConfig: leave out --async")
    prefix = args.async_input
    if not prefix:
        bucket, _ = split_s3_url(config["OutputConfig"]["S3OutputPath"].rstrip("/") + "/")
        prefix = f"s3://{bucket}/input/"
    try:
        bucket, key = split_s3_url(prefix if prefix.endswith("/") else f"{prefix}/")
    except ValueError as exc:
        raise TargetError(f"--async {prefix!r}: {exc}") from None
    key = f"{key}loadtest-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.body"
    try:
        s3.put_object(Bucket=bucket, Key=key, Body=request.body, ContentType=request.content_type)
    except ClientError as exc:
        raise TargetError(f"cannot put the request at s3://{bucket}/{key}: {exc}") from None
    return f"s3://{bucket}/{key}"


def prepare(args: argparse.Namespace) -> tuple[Request, Target, Any, list[str]]:
    """Everything checked before the first request: the request file, the AWS session, the target."""
    import boto3

    request = load_request(args.request)
    if args.async_input is not None and args.stream:
        raise TargetError("--async and --stream: an asynchronous endpoint answers through S3, not as a stream")
    if args.async_input is not None and args.inference_component:
        raise TargetError("--async and --inference-component: an asynchronous endpoint has no inference components")
    target = Target(args.endpoint, args.inference_component)
    try:
        # boto3 reads AWS_DEFAULT_REGION only; the other SDKs and the CDK read AWS_REGION.
        region = args.region or os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION") or None
        session = boto3.session.Session(region_name=region)
        sagemaker = session.client("sagemaker")
    except (BotoCoreError, ValueError) as exc:  # no region, or one that makes no valid URL
        raise TargetError(f"cannot make a SageMaker client ({exc}): set AWS_REGION or pass --region") from None
    variants = check_target(sagemaker, target)
    args.input_location = input_location(args, sagemaker, session.client("s3"), request)
    return request, target, session, variants


def run_levels(
    args: argparse.Namespace, session: Any, target: Target, request: Request, stream: TextIO
) -> list[LevelRun]:
    config = client_config(max(args.concurrency), args.read_timeout)
    factory = (
        async_invokers(target, request, config, args.input_location, session, args.read_timeout)
        if args.input_location
        else sagemaker_invokers(target, request, config, session, stream=args.stream)
    )
    warm_up(factory, args.warmup)
    runs = []
    for concurrency in args.concurrency:
        run = run_level(factory, concurrency, args.seconds, ProgressLine(stream, args.seconds))
        runs.append(run)
        print(level_line(run.summary()), file=stream, flush=True)
        if run.interrupted:
            break
    return runs


def endpoint_figures(
    args: argparse.Namespace,
    session: Any,
    target: Target,
    variants: list[str],
    runs: Sequence[LevelRun],
    stream: TextIO,
) -> list[dict[str, Any]]:
    cloudwatch = session.client("cloudwatch")
    scoped = metrics.scopes(target, variants)
    windows = [metrics.Window.around(run.started_at, run.ended_at) for run in runs]

    def on_wait(seconds: float) -> None:
        print(f"waiting up to {seconds:g} s for CloudWatch's figures (--metrics-wait 0: do not wait)", file=stream)

    return metrics.collect(
        lambda i: metrics.fetch(cloudwatch, scoped, windows[i]),
        [sum(len(r.latencies_s) for r in run.recorders) for run in runs],
        args.metrics_wait,
        lambda: metrics.is_published(cloudwatch, target),
        on_wait,
    )


def report_of(
    args: argparse.Namespace,
    argv: Sequence[str],
    session: Any,
    target: Target,
    request: Request,
    runs: Sequence[LevelRun],
) -> dict[str, Any]:
    levels = [run.summary() for run in runs]
    return {
        "tool": PROG,
        "command": " ".join([PROG, *map(shlex.quote, argv)]),
        "target": target.describe(),
        "region": session.region_name,
        "aws_endpoint": session.client("sagemaker-runtime").meta.endpoint_url,
        "request": request.describe(),
        "concurrency": list(args.concurrency),
        "seconds": args.seconds,
        "started_at": levels[0]["started_at"] if levels else None,
        "levels": levels,
    }


def main(argv: Sequence[str] | None = None, stream: TextIO | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    stream = stream or sys.stderr
    args = parser().parse_args(argv)
    try:
        request, target, session, variants = prepare(args)
    except (RequestFileError, TargetError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    try:
        runs = run_levels(args, session, target, request, stream)
    except KeyboardInterrupt:  # during the warm-up: no level to report
        print(f"{PROG}: interrupted before the first level", file=sys.stderr)
        return 130
    report = report_of(args, argv, session, target, request, runs)
    for level, figures in zip(
        report["levels"], endpoint_figures(args, session, target, variants, runs, stream), strict=True
    ):
        level["endpoint"] = figures
    out = args.out or Path("build", "loadtest", f"{target.endpoint}-{datetime.now(UTC):%Y%m%dT%H%M%SZ}")
    paths = write(report, out)
    print(markdown(report))
    print(f"written: {', '.join(str(p) for p in paths.values())}", file=stream)
    if "plot" not in paths:
        print(f"{PROG}: report.png not written: matplotlib is not installed (pip install matplotlib)", file=stream)
    return 130 if any(run.interrupted for run in runs) else 0
