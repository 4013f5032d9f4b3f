"""`python -m local_aws`: run the local AWS in the foreground and print the environment
that points the CDK CLI and the AWS CLI at it (stop with Ctrl-C or SIGTERM: either stops the
endpoints' containers too)."""

from __future__ import annotations

import argparse
import contextlib
import shlex
import signal
import sys
import threading
from types import FrameType

from local_aws.server import LocalAws, seed_neuron_dlami


def _exit(signum: int, frame: FrameType | None) -> None:
    # Unwinds through LocalAws's exit, which stops the containers (their own sessions: a
    # signal to this process alone would leave them running).
    sys.exit(0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m local_aws", description=__doc__)
    parser.add_argument("--region", help="region to answer as (default: $AWS_REGION or the emulator's default)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _exit)
    with LocalAws(region=args.region) as aws:
        try:
            seeded = f"Neuron DLAMI parameter -> {seed_neuron_dlami(aws)}"
        except ValueError as exc:  # inf2.ami_ssm_parameter names a parameter of the user's own
            seeded = str(exc)
        print(f"# local AWS on {aws.endpoint} ({seeded}); Ctrl-C stops it")
        wanted = ("AWS_", "CDK_DEFAULT_")
        for key, value in sorted(aws.environment({}).items()):
            if key.startswith(wanted):
                print(f"export {key}={shlex.quote(value)}", flush=True)
        print("# ready", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
