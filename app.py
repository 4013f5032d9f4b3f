#!/usr/bin/env python3
"""The CDK app: three stacks, configured from cdk.json context (see stacks/config.py)."""

from __future__ import annotations

from aws_cdk import App, Environment, Stack, Tags, Validations
from cdk_nag import AwsSolutionsChecks

from stacks.config import AppConfig, load_config
from stacks.inf2_ec2 import Inf2Stack
from stacks.sagemaker_gpt2 import Gpt2Stack
from stacks.sagemaker_gptj import GptjStack


def build_app(app: App) -> tuple[AppConfig, dict[str, Stack]]:
    """Add the stacks to `app`; tests call this with their own App."""
    config = load_config(app.node.get_all_context())
    env = None
    if config.project.account or config.project.region:
        env = Environment(account=config.project.account, region=config.project.region)
    stacks: dict[str, Stack] = {
        "Gpt2Stack": Gpt2Stack(app, "Gpt2Stack", settings=config.gpt2, env=env),
        "GptjStack": GptjStack(app, "GptjStack", settings=config.gptj, env=env),
        "Inf2Stack": Inf2Stack(app, "Inf2Stack", settings=config.inf2, env=env),
    }
    for key, value in config.project.tags.items():
        Tags.of(app).add(key, value)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return config, stacks


if __name__ == "__main__":
    application = App()
    build_app(application)
    application.synth()
