"""The gpt2 settings of cdk.json reach the container as the environment `serve` reads."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from project_config import ConfigError, load_config
from serving.gpt2.settings import SettingsError, from_environment


def config(gpt2: dict[str, Any], artifacts: Path | None = None) -> Any:
    context: dict[str, Any] = {"gpt2": gpt2}
    if artifacts is not None:
        context["project"] = {"artifacts_dir": str(artifacts)}
    return load_config(context).gpt2


def test_stack_settings_round_trip_through_the_server_settings() -> None:
    settings = config({"backend": "onnxruntime", "max_batch_size": 8, "max_queue_delay_us": 5000,
                       "max_queue_size": 32, "request_timeout_s": 40, "unhealthy_after_failures": 3})  # fmt: skip
    server = from_environment(settings.container_environment())
    assert (server.backend, server.max_batch_size, server.max_queue_delay_us) == ("onnxruntime", 8, 5000)
    assert (server.max_queue_size, server.request_timeout_s, server.unhealthy_after_failures) == (32, 40.0, 3)


def test_defaults_match_between_stack_and_server() -> None:
    defaults = from_environment({})
    from_stack = from_environment(config({}).container_environment())
    # The default instance type (ml.g5.xlarge) has a GPU: the stack tells the container so.
    assert from_stack == replace(defaults, require_gpu=True)


def test_bad_require_gpu_names_the_variable() -> None:
    with pytest.raises(SettingsError, match="GPT2_REQUIRE_GPU='yes' is invalid: allowed is true or false"):
        from_environment({"GPT2_REQUIRE_GPU": "yes"})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("backend", "cuda", "gpt2.backend='cuda' is invalid: allowed is one of auto, tensorrt"),
        ("request_timeout_s", 60, "gpt2.request_timeout_s=60 is invalid: allowed is a whole number from 1 to 59"),
        ("max_queue_size", 0, "gpt2.max_queue_size=0 is invalid"),
        ("unhealthy_after_failures", 0, "gpt2.unhealthy_after_failures=0 is invalid: allowed is a whole number from 1"),
    ],
)
def test_bad_stack_settings_name_the_key(key: str, value: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.").replace("(", r"\(")):
        config({key: value})


def test_bad_environment_names_the_variable() -> None:
    with pytest.raises(
        SettingsError, match="GPT2_REQUEST_TIMEOUT_S='90' is invalid: allowed is a whole number from 1 to 59"
    ):
        from_environment({"GPT2_REQUEST_TIMEOUT_S": "90"})


@pytest.mark.slow
def test_endpoint_model_gets_the_environment(tiny_out: Path) -> None:
    from aws_cdk import App
    from aws_cdk.assertions import Match, Template

    from stacks.sagemaker_gpt2 import Gpt2Stack

    settings = config({"max_queue_delay_us": 7000}, artifacts=tiny_out)
    app = App()
    stack = Gpt2Stack(app, "Gpt2Stack", settings=settings)
    Template.from_stack(stack).has_resource_properties(
        "AWS::SageMaker::Model",
        {
            "PrimaryContainer": Match.object_like(
                {"Environment": Match.object_like({"GPT2_MAX_QUEUE_DELAY_US": "7000", "GPT2_BACKEND": "auto"})}
            )
        },
    )


def test_gunicorn_threads_outnumber_a_full_queue_and_a_running_batch() -> None:
    """Each waiting or running request holds a thread: with too few, a full queue would stall
    accepting instead of answering 503, and /ping would wait behind it."""
    assert from_environment({"GPT2_MAX_QUEUE_SIZE": "64"}).gunicorn_threads(10) == 64 + 10 + 8
    capped = from_environment({"GPT2_MAX_QUEUE_SIZE": "8", "GPT2_MAX_BATCH_SIZE": "16"})
    assert capped.gunicorn_threads(32) == 8 + 16 + 8
