"""A model names its engine (llm_contracts/engines.py) as the stacks write it, and the local AWS
runs that engine's server from it, whatever image URI the model names."""

from __future__ import annotations

import pytest

from llm_contracts.engines import ENGINE_MARKS, engine_of_model
from local_aws.sagemaker.containers import Gpt2Container, HuggingFaceContainer, VllmContainer
from local_aws.sagemaker.runtime import container_for
from project_config import load_config
from project_config.engines import ENGINES

DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com"


@pytest.mark.parametrize("mark", ENGINE_MARKS, ids=lambda mark: mark.name)
def test_each_mark_is_its_engines_own(mark) -> None:  # type: ignore[no-untyped-def]
    engine = ENGINES[mark.name]()
    assert engine.image().repository == mark.repository
    assert any(name.startswith(mark.variables) for name in engine.container_environment(gpus=1))


@pytest.mark.parametrize("engine", ["vllm", "hf-toolkit"])
def test_the_local_aws_runs_the_engine_the_stacks_model_names(engine: str) -> None:
    settings = load_config({"gptj.engine": engine}).gptj
    environment = settings.container_environment()
    kind = {"vllm": VllmContainer, "hf-toolkit": HuggingFaceContainer}[engine]
    # The image the stack resolves, and an image of the user's own (gptj.image_uri).
    image = f"{DLC}/{settings.engine.image().repository}:{settings.engine.image().tag}"
    for uri in (image, "111122223333.dkr.ecr.us-east-1.amazonaws.com/my-engine:1.0"):
        assert engine_of_model(uri, environment) == engine
        assert isinstance(container_for(uri, lambda folder: None, environment), kind)


def test_a_model_of_no_engine_is_the_gpt2_image() -> None:
    environment = load_config({}).gpt2.container_environment()
    uri = "111122223333.dkr.ecr.us-east-1.amazonaws.com/llm-inference-gpt2:e2e"
    assert engine_of_model(uri, environment) is None
    assert isinstance(container_for(uri, lambda folder: None, environment), Gpt2Container)
    # A bare vLLM image, without the stack's variables, is read by its repository.
    assert engine_of_model(f"{DLC}/vllm:0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker", {}) == "vllm"
