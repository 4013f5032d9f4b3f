"""The synthesis check that each copy of a model gets what its engine is set to use (issue 38),
read from the template itself, not from the settings that made it.

For each SageMaker endpoint of a template, one copy of its model gets the GPUs of its inference
component's ``NumberOfAcceleratorDevicesRequired`` (a copy's container sees those alone), or
else every GPU of the instance type. Against them `problems(template, facts)` checks, one line
each:

* the vLLM engine's tensor-parallel degree (``SM_VLLM_TENSOR_PARALLEL_SIZE``, 1 when unset): at
  most those GPUs (vLLM stops at start on more: "World size (N) is larger than the number of
  available GPUs (M) in this node"), and for a component exactly them (fewer leave GPUs the copy
  reserves idle);
* the Hugging Face toolkit's workers (``SAGEMAKER_MODEL_SERVER_WORKERS``): at most one a GPU, each
  loading its own copy of the weights;
* with the model's facts (read from its payload), that the degree's GPUs hold the weights, the
  engine's overhead and the KV cache of ``max_model_len`` x ``max_num_seqs`` tokens, at the
  engine's dtype and memory utilization (llm_contracts/causal_lm.py's ``plan``);
* for a component, that one instance holds a copy, and that managed scaling's most instances hold
  its most copies, an instance holding as many as the scarcest of its GPUs, vCPUs and memory
  allows against what a copy asks for (llm_contracts/instances.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from llm_contracts import instances
from llm_contracts.causal_lm import ModelFacts, plan, resolved_dtype
from project_config import VllmEngine, load_config
from project_config.llm import payload_facts
from tests.infra.helpers import Synthesized

#: The sections of the stacks whose model runs on an engine of project_config/engines.py.
ENGINE_SECTIONS = {"GptjStack": "gptj", "LlmStack": "llm"}


@dataclass(frozen=True)
class Copy:
    """One copy of an endpoint's model, as the template places it."""

    endpoint: str
    instance_type: str
    #: The GPUs the copy's container sees.
    gpus: int
    environment: dict[str, str]
    variant: dict[str, Any]
    component: dict[str, Any] | None

    @property
    def where(self) -> str:
        seen = "each copy of its inference component gets" if self.component else "its model gets"
        return f"{self.endpoint} on {self.instance_type} ({seen} {self.gpus} GPU{'s' if self.gpus != 1 else ''})"


def synthesized_problems(synthesized: Synthesized, stack: str) -> list[str]:
    """:func:`problems` of `stack`'s template, with its model's facts where it runs on vLLM."""
    facts = None
    section = ENGINE_SECTIONS.get(stack)
    if section is not None:
        settings = getattr(load_config(synthesized.app.node.get_all_context()), section)
        if isinstance(settings.engine, VllmEngine):
            facts = payload_facts(settings)
    return problems(synthesized.template_json(stack), facts)


def problems(template: dict[str, Any], facts: ModelFacts | None = None) -> list[str]:
    """Every disagreement between what a copy gets and what its engine uses, one line each."""
    resources = template.get("Resources", {})
    found: list[str] = []
    for copy in _copies(resources):
        found += _engine_problems(copy, facts)
        if copy.component is not None:
            found += _placement_problems(copy, resources)
    return found


def _getatt(value: Any) -> str:
    return str(value["Fn::GetAtt"][0])


def _copies(resources: dict[str, Any]) -> list[Copy]:
    components = {
        _getatt(r["Properties"]["EndpointName"]): r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::SageMaker::InferenceComponent"
    }
    found = []
    for logical_id, resource in resources.items():
        if resource["Type"] != "AWS::SageMaker::Endpoint":
            continue
        config = resources[_getatt(resource["Properties"]["EndpointConfigName"])]["Properties"]
        (variant,) = config["ProductionVariants"]
        component = components.get(logical_id)
        spec = component["Specification"] if component else None
        model = resources[_getatt(spec["ModelName"] if spec else variant["ModelName"])]["Properties"]
        gpus = (
            spec["ComputeResourceRequirements"].get("NumberOfAcceleratorDevicesRequired", 0)
            if spec
            else instances.gpus(variant["InstanceType"])
        )
        environment = model["PrimaryContainer"].get("Environment", {})
        found.append(Copy(logical_id, variant["InstanceType"], gpus, environment, variant, component))
    return found


def _engine_problems(copy: Copy, facts: ModelFacts | None) -> list[str]:
    env, found = copy.environment, []
    if "SM_VLLM_GPU_MEMORY_UTILIZATION" in env:
        degree = int(env.get("SM_VLLM_TENSOR_PARALLEL_SIZE", "1"))
        if degree > copy.gpus or (copy.component is not None and degree != copy.gpus):
            found.append(f"{copy.where}: vLLM's tensor-parallel degree is {degree}")
        elif facts is not None:
            found += _memory_problems(copy, facts, degree)
    if "SAGEMAKER_MODEL_SERVER_WORKERS" in env and int(env["SAGEMAKER_MODEL_SERVER_WORKERS"]) > max(1, copy.gpus):
        found.append(f"{copy.where}: the toolkit runs {env['SAGEMAKER_MODEL_SERVER_WORKERS']} workers, one a GPU")
    return found


def _memory_problems(copy: Copy, facts: ModelFacts, degree: int) -> list[str]:
    env = copy.environment
    gpu = instances.gpu_family(copy.instance_type)
    assert gpu is not None, copy.instance_type
    dtype = resolved_dtype(env["SM_VLLM_DTYPE"], facts.config_dtype, gpu.compute_capability)
    length = int(env.get("SM_VLLM_MAX_MODEL_LEN", facts.max_model_len))
    wanted = length * int(env["SM_VLLM_MAX_NUM_SEQS"])
    utilization = float(env["SM_VLLM_GPU_MEMORY_UTILIZATION"])
    tokens = plan(facts, copy.instance_type, degree=degree, dtype=dtype, utilization=utilization).tokens
    if tokens >= wanted:
        return []
    return [f"{copy.where}: {degree} GPU(s) leave {tokens} tokens of KV cache, fewer than {length} x its max_num_seqs"]


def _placement_problems(copy: Copy, resources: dict[str, Any]) -> list[str]:
    assert copy.component is not None
    asks = copy.component["Specification"]["ComputeResourceRequirements"]
    gpus, host = instances.gpus(copy.instance_type), instances.host(copy.instance_type)
    bounds = [gpus // copy.gpus] if gpus and copy.gpus else []
    if host is not None:
        cores, memory_mb = asks["NumberOfCpuCoresRequired"], asks["MinMemoryRequiredInMb"]
        bounds += [math.floor(host[0] / cores), host[1] * 1024 // memory_mb]
    if not bounds:
        return []
    per_instance = min(bounds)
    if per_instance < 1:
        return [f"{copy.where}: a copy asks for more than one instance has ({asks})"]
    name = copy.component["InferenceComponentName"]
    (target,) = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::ApplicationAutoScaling::ScalableTarget"
        and r["Properties"]["ResourceId"] == f"inference-component/{name}"
    ]
    most = copy.variant["ManagedInstanceScaling"]["MaxInstanceCount"]
    if most * per_instance < target["MaxCapacity"]:
        return [
            f"{copy.where}: {most} instances of {per_instance} copies each hold fewer than its {target['MaxCapacity']} "
            f"copies ({asks})"
        ]
    return []
