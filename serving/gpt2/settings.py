"""The server's settings, from the container environment (the stack sets them from
``stacks/config.py``'s ``Gpt2Settings``). A bad value stops the start with a message that
names the variable, the value and what is allowed. Standard library only: ``serve``
reads these before it starts anything.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

BACKEND_CHOICES = ("auto", "tensorrt", "torch-cuda", "onnxruntime", "torch")
#: SageMaker's own limit is 60 s per invocation: answer before it gives up on us.
SAGEMAKER_INVOCATION_LIMIT_S = 60


class SettingsError(ValueError):
    pass


@dataclass(frozen=True, kw_only=True)
class ServerSettings:
    model_dir: Path = Path("/opt/ml/model")
    port: int = 8080
    workers: int = 1
    backend: str = "auto"
    #: 0: the model's own limit (``generation.json``), which the TensorRT profiles were built for.
    max_batch_size: int = 0
    max_queue_delay_us: int = 20_000
    #: Rows waiting beyond this many are refused with 503 + Retry-After.
    max_queue_size: int = 64
    request_timeout_s: float = 50.0
    threads: int = 0
    engine_cache: Path = Path("/tmp/gpt2-engine")  # noqa: S108 (the model folder may be read-only)
    #: The endpoint's instance type has a GPU (the stack says so): serving from the CPU there
    #: would be slow and costly, so the model fails to load, and /ping stays 503, without CUDA.
    require_gpu: bool = False

    def gunicorn_threads(self, model_batch_size: int) -> int:
        """Threads per worker: a request holds one while it waits or runs, so a full queue plus
        a running batch must still leave threads to answer 503 and /ping. `model_batch_size`:
        the limit in the payload's generation.json, which applies when max_batch_size is 0."""
        return self.max_queue_size + (self.max_batch_size or model_batch_size) + 8


def _int(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is invalid: allowed is a whole number from {lo} to {hi}") from None
    if not lo <= value <= hi:
        raise SettingsError(f"{name}={raw!r} is invalid: allowed is a whole number from {lo} to {hi}")
    return value


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    if raw not in ("true", "false"):
        raise SettingsError(f"{name}={raw!r} is invalid: allowed is true or false")
    return raw == "true"


def from_environment(env: Mapping[str, str] | None = None) -> ServerSettings:
    env = os.environ if env is None else env
    backend = env.get("GPT2_BACKEND", "auto") or "auto"
    if backend not in BACKEND_CHOICES:
        raise SettingsError(f"GPT2_BACKEND={backend!r} is invalid: allowed is one of {', '.join(BACKEND_CHOICES)}")
    timeout = _int(env, "GPT2_REQUEST_TIMEOUT_S", 50, 1, SAGEMAKER_INVOCATION_LIMIT_S - 1)
    return ServerSettings(
        model_dir=Path(env.get("SM_MODEL_DIR") or "/opt/ml/model"),
        port=_int(env, "SAGEMAKER_BIND_TO_PORT", 8080, 1, 65535),
        workers=_int(env, "MODEL_SERVER_WORKERS", 1, 1, 64),
        backend=backend,
        max_batch_size=_int(env, "GPT2_MAX_BATCH_SIZE", 0, 0, 1024),
        max_queue_delay_us=_int(env, "GPT2_MAX_QUEUE_DELAY_US", 20_000, 0, 10_000_000),
        max_queue_size=_int(env, "GPT2_MAX_QUEUE_SIZE", 64, 1, 4096),
        request_timeout_s=float(timeout),
        threads=_int(env, "GPT2_THREADS", 0, 0, 256),
        engine_cache=Path(env.get("GPT2_ENGINE_CACHE") or "/tmp/gpt2-engine"),  # noqa: S108
        require_gpu=_bool(env, "GPT2_REQUIRE_GPU", False),
    )
