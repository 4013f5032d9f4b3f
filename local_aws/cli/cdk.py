"""The project's pinned CDK CLI (node_modules/.bin/cdk), run against the local AWS, each
call under a time bound: a hung CLI fails the caller instead of hanging it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from local_aws.server import LocalAws

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CDK_BIN = PROJECT_ROOT / "node_modules" / ".bin" / "cdk"
#: What the CLI prints for a deploy that finds the stack already up to date.
NO_CHANGES = "(no changes)"
# Quiet, offline CLI: no version check or notices fetched from the internet, no Node banner.
_QUIET = {
    "CDK_DISABLE_VERSION_CHECK": "1",
    "CDK_CLI_NOTICES": "false",
    # The CLI otherwise starts a Node.js process after each command to send AWS its telemetry
    # (docs.aws.amazon.com/cdk/v2/guide/cli-telemetry.html): a local deploy is nothing to report,
    # and each such process costs the tests a core for a second or more.
    "CDK_DISABLE_CLI_TELEMETRY": "true",
    "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    "FORCE_COLOR": "0",
}


class CdkError(RuntimeError):
    """The CLI exited non-zero; the message ends with its output."""


class CdkTimeout(CdkError):
    """The CLI ran past its bound and was killed (with everything it started)."""


@dataclass(frozen=True)
class CdkResult:
    args: tuple[str, ...]
    output: str
    seconds: float


class Cdk:
    """The CDK CLI pointed at ``aws``; ``timeout_s`` bounds each call unless one is given."""

    def __init__(self, aws: LocalAws, *, timeout_s: float = 180.0, cwd: Path = PROJECT_ROOT) -> None:
        if not CDK_BIN.exists():
            raise FileNotFoundError(f"{CDK_BIN} is missing: run `npm ci` in {PROJECT_ROOT} (or `make setup`)")
        self.aws = aws
        self.timeout_s = timeout_s
        self.cwd = cwd

    def environment(self) -> dict[str, str]:
        env = self.aws.environment()
        env.update(_QUIET)
        # Anything the app runs by bare name (`python`, `node`) resolves to this interpreter's venv first.
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        return env

    def run(self, *args: str, timeout_s: float | None = None) -> CdkResult:
        return run_bounded(
            [str(CDK_BIN), *args], env=self.environment(), cwd=self.cwd, timeout_s=timeout_s or self.timeout_s
        )

    def synth(self, out_dir: Path, context: Mapping[str, str], *, timeout_s: float | None = None) -> CdkResult:
        """Synthesize every stack into ``out_dir`` with ``-c key=value`` overrides."""
        return self.run("synth", "--all", "--quiet", "--output", str(out_dir), *_context(context), timeout_s=timeout_s)

    def bootstrap(self, app: Path, *, timeout_s: float | None = None) -> CdkResult:
        target = f"aws://{self.aws.account}/{self.aws.region}"
        return self.run("bootstrap", "--app", str(app), target, timeout_s=timeout_s)

    def deploy(self, app: Path, stacks: Sequence[str] = ("--all",), *, timeout_s: float | None = None) -> CdkResult:
        """Deploy from a synthesized cloud assembly (``app``): nothing is synthesized again."""
        return self.run(
            "deploy", "--app", str(app), *stacks, "--require-approval", "never", "--progress", "events",
            timeout_s=timeout_s,
        )  # fmt: skip

    def destroy(self, app: Path, stacks: Sequence[str] = ("--all",), *, timeout_s: float | None = None) -> CdkResult:
        return self.run("destroy", "--app", str(app), *stacks, "--force", timeout_s=timeout_s)


def _context(context: Mapping[str, str]) -> list[str]:
    return [arg for key, value in context.items() for arg in ("-c", f"{key}={value}")]


def run_bounded(command: Sequence[str], *, env: Mapping[str, str], cwd: Path, timeout_s: float) -> CdkResult:
    """Run ``command``; past ``timeout_s`` kill its whole process group (the CLI starts node
    workers and the CDK app) and raise :class:`CdkTimeout`."""
    started = time.monotonic()
    process = subprocess.Popen(
        list(command),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):  # it may have exited just now
            os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        raise CdkTimeout(
            f"`{' '.join(command[1:3])}` ran past its {timeout_s:.0f} s bound and was killed; output:\n{output}"
        ) from None
    seconds = time.monotonic() - started
    if process.returncode != 0:
        raise CdkError(f"`{' '.join(command[1:])}` exited with {process.returncode} after {seconds:.1f} s:\n{output}")
    return CdkResult(args=tuple(command[1:]), output=output, seconds=seconds)
