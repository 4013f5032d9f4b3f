#!/usr/bin/env python3
"""The CDK app: four stacks, configured from cdk.json context (see project_config).

A bad setting stops synthesis with one line (the key, the value, what is allowed) and a
non-zero exit. A problem that belongs to one stack alone (its payload not built, its image
not published in the pinned region) leaves that stack out with one line saying why, so that
the others can still be synthesized and deployed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

# jsii (the AWS CDK's Python runtime) prints a banner on every start under Node 20, whose support it
# ended on 2026-10-30; the project runs there as on 22 and 24 (README: Node.js): keep our output ours.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

from aws_cdk import App, Environment, Stack, Tags, Validations
from cdk_nag import AwsSolutionsChecks

from llm_contracts.manifest import ManifestError
from llm_inference_cdk import ImageResolutionError
from project_config import AppConfig, ConfigError, load_config
from stacks.inf2_ec2 import Inf2Stack
from stacks.sagemaker_gpt2 import Gpt2Stack
from stacks.sagemaker_gptj import GptjStack
from stacks.sagemaker_llm import LlmStack

#: What keeps one stack, and only that one, from being synthesized.
STACK_PROBLEMS = (ManifestError, ImageResolutionError)


def build_app(app: App) -> tuple[AppConfig, dict[str, Stack], dict[str, str]]:
    """Add the stacks to `app`; tests call this with their own App. Returns the configuration,
    the stacks, and the stacks left out with the reason."""
    config = load_config(app.node.get_all_context())
    env = None
    if config.project.account or config.project.region:
        env = Environment(account=config.project.account, region=config.project.region)
    builders: dict[str, Callable[[], Stack]] = {
        "Gpt2Stack": lambda: Gpt2Stack(app, "Gpt2Stack", settings=config.gpt2, env=env),
        "GptjStack": lambda: GptjStack(app, "GptjStack", settings=config.gptj, env=env),
        "LlmStack": lambda: LlmStack(app, "LlmStack", settings=config.llm, env=env),
        "Inf2Stack": lambda: Inf2Stack(app, "Inf2Stack", settings=config.inf2, env=env),
    }
    stacks: dict[str, Stack] = {}
    skipped: dict[str, str] = {}
    for name, build in builders.items():
        try:
            stacks[name] = build()
        except STACK_PROBLEMS as exc:
            app.node.try_remove_child(name)  # a half-built stack must not be synthesized
            skipped[name] = str(exc)
    for key, value in config.project.tags.items():
        Tags.of(app).add(key, value)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return config, stacks, skipped


def main() -> int:
    app = App()
    try:
        _, _, skipped = build_app(app)
    except ConfigError as exc:
        # One line per setting: a ConfigError lists every problem of a section it found.
        for line in str(exc).splitlines():
            print(f"error: {line}", file=sys.stderr)
        return 1
    for name, reason in skipped.items():
        print(f"{name} is left out of this synthesis: {reason}", file=sys.stderr)
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
