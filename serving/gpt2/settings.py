"""The server's settings: one definition each (its environment variable, default and check),
read here from the container environment and by the CDK app from cdk.json's ``gpt2``
section (project_config/gpt2.py), which renders them back into the environment with
:meth:`ServerSettings.to_environment`. A bad value stops the start with a message that names
the variable, the value and what is allowed. Standard library only: ``serve`` reads these
before it starts anything, and the image has nothing of the project but this folder.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BACKEND_CHOICES = ("auto", "tensorrt", "torch-cuda", "onnxruntime", "torch")
#: SageMaker's own limit is 60 s per invocation: answer before it gives up on us.
SAGEMAKER_INVOCATION_LIMIT_S = 60


class SettingsError(ValueError):
    """A setting that cannot be used. `prop` is the field (or the variable) at fault."""

    def __init__(self, prop: str, value: Any, allowed: str) -> None:
        super().__init__(f"{prop}={value!r} is invalid: allowed is {allowed}")
        self.prop, self.value, self.allowed = prop, value, allowed


Check = tuple[Callable[[Any], bool], str]


def _int(lo: int, hi: int) -> Check:
    return (
        lambda v: isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi
    ), f"a whole number from {lo} to {hi}"


def _choice(*choices: str) -> Check:
    return (lambda v: v in choices), "one of " + ", ".join(choices)


def _bool() -> Check:
    return (lambda v: isinstance(v, bool)), "true or false"


def _setting(env: str, default: Any, check: Check | None = None, *, stack: bool = True) -> Any:
    """A field: its environment variable, its default and its check. `stack`: the CDK app sets
    it from cdk.json's ``gpt2`` section under the field's name (else the stack derives it, or
    the platform sets it)."""
    return dataclasses.field(default=default, metadata={"env": env, "check": check, "stack": stack})


@dataclass(frozen=True, kw_only=True)
class ServerSettings:
    #: auto picks TensorRT, then PyTorch with CUDA graphs, then ONNX Runtime.
    backend: str = _setting("GPT2_BACKEND", "auto", _choice(*BACKEND_CHOICES))
    #: Rows a batch holds at most, as Triton's max_batch_size (0: the limit the model was built for).
    max_batch_size: int = _setting("GPT2_MAX_BATCH_SIZE", 0, _int(0, 1024))
    #: How long a batch waits for more rows, from the oldest arrival or the end of the previous
    #: batch, whichever is later (batching.py says why).
    max_queue_delay_us: int = _setting("GPT2_MAX_QUEUE_DELAY_US", 20_000, _int(0, 10_000_000))
    #: Rows waiting beyond this many are refused with 503 + Retry-After.
    max_queue_size: int = _setting("GPT2_MAX_QUEUE_SIZE", 64, _int(1, 4096))
    #: Below SageMaker's 60 s invocation limit, so that the container answers first.
    request_timeout_s: int = _setting("GPT2_REQUEST_TIMEOUT_S", 50, _int(1, SAGEMAKER_INVOCATION_LIMIT_S - 1))
    #: Generations that fail one after another in a worker (500 generation_failed, not a client's
    #: 4xx) before /ping answers 503 "unhealthy", so that SageMaker replaces a container that can
    #: no longer serve; one that succeeds makes it healthy again. Each worker counts its own: one
    #: unhealthy worker makes the container unhealthy (health.fold).
    unhealthy_after_failures: int = _setting("GPT2_UNHEALTHY_AFTER_FAILURES", 5, _int(1, 1000))
    #: The endpoint's instance type has a GPU (the stack sets it from the instance type): serving
    #: from the CPU there would be slow and costly, so the model fails to load, and /ping stays
    #: 503, without CUDA.
    require_gpu: bool = _setting("GPT2_REQUIRE_GPU", False, _bool(), stack=False)
    #: Where SageMaker puts the model data.
    # (RUF009 here and below: _setting returns a dataclasses.field, which ruff cannot see through.)
    model_dir: Path = _setting("SM_MODEL_DIR", Path("/opt/ml/model"), stack=False)  # noqa: RUF009
    #: The port SageMaker sends requests to.
    port: int = _setting("SAGEMAKER_BIND_TO_PORT", 8080, _int(1, 65535), stack=False)
    #: gunicorn workers, each with its own copy of the model.
    workers: int = _setting("MODEL_SERVER_WORKERS", 1, _int(1, 64), stack=False)
    #: CPU threads of ONNX Runtime and PyTorch (0: their own default).
    threads: int = _setting("GPT2_THREADS", 0, _int(0, 256), stack=False)
    #: Where an engine rebuilt at start is kept (the model folder may be read-only).
    engine_cache: Path = _setting("GPT2_ENGINE_CACHE", Path("/tmp/gpt2-engine"), stack=False)  # noqa: RUF009, S108

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            check: Check | None = field.metadata["check"]
            value = getattr(self, field.name)
            if check is not None and not check[0](value):
                raise SettingsError(field.name, value, check[1])

    def gunicorn_threads(self, model_batch_size: int) -> int:
        """Threads per worker: a request holds one while it waits or runs, so a full queue plus
        a running batch must still leave threads to answer 503 and /ping. `model_batch_size`:
        the limit in the payload's generation.json, which applies when max_batch_size is 0."""
        return self.max_queue_size + (self.max_batch_size or model_batch_size) + 8

    def to_environment(self) -> dict[str, str]:
        """The variables the stack sets on the SageMaker model: its settings and require_gpu."""
        return {
            field.metadata["env"]: _text(getattr(self, field.name))
            for field in dataclasses.fields(self)
            if field.metadata["stack"] or field.name == "require_gpu"
        }


def stack_settings() -> list[dataclasses.Field[Any]]:
    """The fields cdk.json's ``gpt2`` section sets, under their own names."""
    return [field for field in dataclasses.fields(ServerSettings) if field.metadata["stack"]]


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _parse(field: dataclasses.Field[Any], raw: str) -> Any:
    if field.type == "Path":
        return Path(raw)
    if field.type == "bool":
        return {"true": True, "false": False}.get(raw, raw)
    if field.type == "int":
        try:
            return int(raw)
        except ValueError:
            return raw
    return raw


def from_environment(env: Mapping[str, str] | None = None) -> ServerSettings:
    """The settings from the environment (unset or empty: the default); SettingsError names
    the variable of a bad value."""
    env = os.environ if env is None else env
    variables = {field.name: field.metadata["env"] for field in dataclasses.fields(ServerSettings)}
    values = {
        field.name: _parse(field, env[variables[field.name]])
        for field in dataclasses.fields(ServerSettings)
        if env.get(variables[field.name])
    }
    try:
        return ServerSettings(**values)
    except SettingsError as exc:
        raise SettingsError(variables[exc.prop], env[variables[exc.prop]], exc.allowed) from None
