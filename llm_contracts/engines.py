"""How a SageMaker model says which serving engine runs it: what the stacks write into a model
(project_config/engines.py) and the local AWS reads back from it to run that engine
(local_aws/sagemaker/runtime.py). A model is read by its environment first, the variables its engine's
settings become (which hold whatever image ``image_uri`` names), then by its image's ECR
repository (AWS's Deep Learning Container for the engine, as the sagemaker SDK's image JSON names
it); tests/llm/test_engines.py checks both against the engines' own settings and images."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from llm_contracts.aws import ECR_IMAGE


@dataclass(frozen=True)
class EngineMark:
    #: The engine's ``engine`` value.
    name: str
    #: Its image's ECR repository.
    repository: str
    #: The variable (or prefix of variables) its settings become in the model's environment.
    variables: str


ENGINE_MARKS = (
    EngineMark("vllm", "vllm", "SM_VLLM_"),
    EngineMark("hf-toolkit", "huggingface-pytorch-inference", "SAGEMAKER_PROGRAM"),
)


def engine_of_model(image: str, environment: Mapping[str, str]) -> str | None:
    """The engine a model with `image` and `environment` runs (None: none of these engines)."""
    for mark in ENGINE_MARKS:
        if any(name.startswith(mark.variables) for name in environment):
            return mark.name
    match = ECR_IMAGE.match(image)
    repository = match["repository"] if match is not None else None
    return next((mark.name for mark in ENGINE_MARKS if mark.repository == repository), None)
