"""AWS's vLLM image for SageMaker's entrypoint, run on this host under ``.venv-vllm``.

The image (deep-learning-containers ``docker/vllm/Dockerfile``, stage ``vllm-sagemaker``) runs
``scripts/docker/vllm/sagemaker_entrypoint.sh``: ``sagemaker_args.py`` turns the environment
into ``vllm serve`` arguments (``--port 8080``; ``--model`` from ``SM_VLLM_MODEL``, else
``/opt/ml/model`` when it holds files, else ``HF_MODEL_ID``; then one flag per ``SM_VLLM_*``
variable, sorted: ``SM_VLLM_MAX_NUM_SEQS=8`` -> ``--max-num-seqs 8``, ``true`` -> the bare flag,
``false`` -> nothing, a JSON array -> one argument per element), and the script runs
``standard-supervisor python3 -m vllm.entrypoints.openai.api_server ARGS``. This file does the
same with three differences:

* the port is the one SageMaker gives here, ``SAGEMAKER_BIND_TO_PORT`` (in the image SageMaker
  gives 8080 in the container's own network, and the script writes 8080);
* the model folder is ``$SAGEMAKER_BASE_DIR/model`` (``/opt/ml/model`` in the image);
* the server is exec'd without ``standard-supervisor``, which in the image restarts the server
  whenever it exits, up to ``ENGINE_MAX_START_RETRIES`` (3) times, then exits the container
  (aws/model-hosting-container-standards, ``supervisor/README.md``): here the container ends at
  the first exit (vLLM's API server exits when its ``EngineCore`` process dies), and the runtime
  finds it at the next invocation (local_aws/sagemaker/runtime.py, docs/LOCAL_AWS.md).

One more stands in for the GPU the CPU build has not: the engine on a GPU counts the devices the
container sees as ``CUDA_VISIBLE_DEVICES`` lists them (vllm/platforms/cuda.py, ``device_count``) and
refuses a world size (tensor- times pipeline-parallel degree) larger than that count
(vllm/config/parallel.py, ``ParallelConfig.__post_init__``: "World size (N) is larger than the
number of available GPUs (M) in this node..."), a check only its CUDA platform makes. The local
runtime lists a container's devices there as the NVIDIA container runtime does
(local_aws/sagemaker/placement.py), and :func:`world_size_refusal` makes the same check, with the
engine's words, before the server starts: the container exits 1 as the engine's does.

Runs in ``.venv-vllm`` only (the standard library here, vLLM in the process it becomes).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping

PREFIX = "SM_VLLM_"
#: Flags whose JSON array stays one argument (sagemaker_args.py's SINGLE_TOKEN_FLAGS).
SINGLE_TOKEN_FLAGS = frozenset({"--allowed-origins", "--allowed-methods", "--allowed-headers", "--middleware"})


def _tokens(flag: str, value: str) -> list[str] | None:
    """The arguments after `flag` (sagemaker_args.py's tokens_for): None drops the flag."""
    stripped = value.strip()
    if not value:
        return []
    if flag in SINGLE_TOKEN_FLAGS:
        return [value]
    if stripped.startswith("[") and stripped.endswith("]"):
        try:
            parsed = json.loads(stripped)
        except ValueError:
            return [value]
        if isinstance(parsed, list):
            return [_token(element) for element in parsed] or None
    if stripped.startswith("{") and stripped.endswith("}"):
        objects = _objects(stripped)
        if objects is not None and len(objects) > 1:
            return [json.dumps(obj, separators=(",", ":")) for obj in objects]
    return [value]


def _objects(value: str) -> list[dict[str, object]] | None:
    """``{...} {...}`` as its objects; None if it is anything else (sagemaker_args.py's
    json_object_sequence)."""
    decoder, found, index = json.JSONDecoder(), [], 0
    while index < len(value):
        try:
            parsed, index = decoder.raw_decode(value, index)
        except ValueError:
            return None
        if not isinstance(parsed, dict):
            return None
        found.append(parsed)
        while index < len(value) and value[index].isspace():
            index += 1
    return found or None


def _token(element: object) -> str:
    if isinstance(element, dict | list):
        return json.dumps(element, separators=(",", ":"))
    if isinstance(element, bool):
        return "true" if element else "false"
    return "" if element is None else str(element)


def build_args(env: Mapping[str, str], model_dir: str, port: str) -> list[str]:
    """The server's arguments, as sagemaker_args.py's build_args builds them."""
    args = ["--port", port]
    if not env.get(f"{PREFIX}MODEL"):
        if os.path.isdir(model_dir) and os.listdir(model_dir):
            args += ["--model", model_dir]
        elif env.get("HF_MODEL_ID"):
            args += ["--model", env["HF_MODEL_ID"]]
    for key in sorted(env):
        if not key.startswith(PREFIX):
            continue
        flag = "--" + key[len(PREFIX) :].lower().replace("_", "-")
        value = env[key]
        if value.strip().lower() == "true":
            args.append(flag)
            continue
        if value.strip().lower() == "false":
            continue
        tokens = _tokens(flag, value)
        if tokens is not None:
            args += [flag, *tokens]
    return args


def _degree(env: Mapping[str, str], name: str) -> int:
    value = env.get(f"{PREFIX}{name}", "1").strip()
    return int(value) if value.isdigit() else 1


def world_size_refusal(env: Mapping[str, str]) -> str | None:
    """vLLM's refusal of a world size larger than the GPUs the container sees
    (vllm/config/parallel.py, its CUDA branch, word for word), else None; nothing to check when
    ``CUDA_VISIBLE_DEVICES`` is unset (a container on an instance without GPUs)."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return None
    gpu_count = len([d for d in visible.split(",") if d.strip()])
    world_size = _degree(env, "TENSOR_PARALLEL_SIZE") * _degree(env, "PIPELINE_PARALLEL_SIZE")
    if world_size <= 1 or world_size <= gpu_count:
        return None
    return (
        f"World size ({world_size}) is larger than the number of "
        f"available GPUs ({gpu_count}) in this node. If this is "
        "intentional and you are using:\n"
        "- ray, set '--distributed-executor-backend ray'.\n"
        "- multiprocessing, set '--nnodes' appropriately."
    )


def main() -> int:
    env = os.environ
    refusal = world_size_refusal(env)
    if refusal is not None:
        print(f"ValueError: {refusal}", file=sys.stderr, flush=True)
        return 1
    model_dir = os.path.join(env.get("SAGEMAKER_BASE_DIR", "/opt/ml"), "model")
    args = build_args(env, model_dir, env.get("SAGEMAKER_BIND_TO_PORT", "8080"))
    print(f"vllm_entrypoint: vLLM server arguments: {args}", file=sys.stderr, flush=True)
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", *args]
    os.execv(sys.executable, command)  # noqa: S606 (the image's exec: the server becomes the container)
    return 1  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
