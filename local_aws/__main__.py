"""`python -m local_aws`: run the local AWS in the foreground and print the environment
that points the CDK CLI and the AWS CLI at it (stop with Ctrl-C)."""

from __future__ import annotations

import argparse
import contextlib
import shlex
import threading

from local_aws.server import LocalAws, seed_neuron_dlami


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m local_aws", description=__doc__)
    parser.add_argument("--region", help="region to answer as (default: $AWS_REGION or the emulator's default)")
    args = parser.parse_args(argv)
    with LocalAws(region=args.region) as aws:
        image = seed_neuron_dlami(aws)
        print(f"# local AWS on {aws.endpoint} (Neuron DLAMI parameter -> {image}); Ctrl-C stops it")
        wanted = ("AWS_", "CDK_DEFAULT_")
        for key, value in sorted(aws.environment({}).items()):
            if key.startswith(wanted):
                print(f"export {key}={shlex.quote(value)}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
