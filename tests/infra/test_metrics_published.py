"""Every alarm, dashboard widget and scaling policy of every stack, on every variant of the app,
names a metric its publisher publishes for that endpoint mode and instance type, with those
dimensions and a statistic its page lists, and every threshold lies in the metric's range on
that instance type (tests/infra/metric_check.py, against llm_contracts/sagemaker_metrics.py);
and every copy of a model gets what its engine is set to use: the tensor-parallel degree, the
workers, the memory and the copies an instance holds (tests/infra/copy_check.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.infra.copy_check import synthesized_problems
from tests.infra.helpers import COMPONENTS_ON_4_GPUS, MODE_VARIANTS, TOOLKIT_COMPONENT_ON_4_GPUS, Synthesized
from tests.infra.metric_check import problems

STACKS = ["Gpt2Stack", "GptjStack", "Inf2Stack"]
#: The variants issue 29 read AWS's pages against (the modes' as tests/infra/test_security.py
#: has them, so that one session synthesizes each once).
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "hf-toolkit": {"gptj.engine": "hf-toolkit"},
    # With and without min_copies=0, and async.
    **MODE_VARIANTS,
    "rolling-and-linear": {
        **{f"{s}.{k}": v for s in ("gpt2", "gptj") for k, v in (("min_capacity", 2), ("max_capacity", 4))},
        "gptj.update_strategy": "rolling",
        "gpt2.update_strategy": "linear",
    },
    "pinned-region": {"project.region": "eu-west-1", "project.account": "111122223333"},
    # Inf2Stack on a SageMaker ml.inf2 endpoint, in both modes SageMaker documents there.
    "inf2-sagemaker": {"inf2.platform": "sagemaker"},
    "inf2-sagemaker-async": {"inf2.platform": "sagemaker", "inf2.endpoint_mode": "async"},
    # 4 GPUs: GPT-2, and GPT-J on the toolkit with a worker per GPU.
    "g5.12xlarge": {
        "gpt2.instance_type": "ml.g5.12xlarge",
        "gptj.engine": "hf-toolkit",
        "gptj.instance_type": "ml.g5.12xlarge",
        "gptj.model_server_workers": 4,
    },
    # Inference components on 4 GPUs (issue 38): copies of one GPU (GPT-J on vLLM) and of two
    # (LlmStack), and the toolkit's copies of four with a worker on each.
    "components-on-4-gpus": COMPONENTS_ON_4_GPUS,
    "toolkit-component-on-4-gpus": TOOLKIT_COMPONENT_ON_4_GPUS,
}
#: The stacks whose models copy_check reads (Inf2Stack's runs on NeuronCores, on EC2 or SageMaker).
COPY_STACKS = ["Gpt2Stack", "GptjStack", "LlmStack"]


@pytest.fixture(scope="module", params=list(VARIANTS))
def variant(request: pytest.FixtureRequest, synth: Callable[..., Synthesized]) -> Synthesized:
    return synth(**VARIANTS[request.param])


@pytest.mark.parametrize("stack", STACKS)
def test_every_metric_is_one_aws_publishes(variant: Synthesized, stack: str) -> None:
    assert problems(variant.template_json(stack)) == []


@pytest.mark.parametrize("stack", COPY_STACKS)
def test_every_copy_gets_what_its_engine_uses(variant: Synthesized, stack: str) -> None:
    """Issue 38: in inference-component mode the degree, the workers and the memory check counted
    the instance type's GPUs where a copy gets its accelerators alone, and the copies an instance
    holds were counted by GPUs alone."""
    assert synthesized_problems(variant, stack) == []


def test_the_copy_check_sees_what_a_copy_does_not_get(synth: Callable[..., Synthesized]) -> None:
    """A negative control: the component variant's templates, each changed where issue 38 found
    them wrong, are reported."""
    from tests.infra.copy_check import problems

    synthesized = synth(**VARIANTS["components-on-4-gpus"])
    template = synthesized.template_json("GptjStack")
    (model,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::Model"]
    model["Properties"]["PrimaryContainer"]["Environment"]["SM_VLLM_TENSOR_PARALLEL_SIZE"] = "4"
    (found,) = problems(template)
    assert found.endswith("(each copy of its inference component gets 1 GPU): vLLM's tensor-parallel degree is 4")
    template = synthesized.template_json("LlmStack")
    (config,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::EndpointConfig"]
    config["Properties"]["ProductionVariants"][0]["ManagedInstanceScaling"]["MaxInstanceCount"] = 1
    (component,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::SageMaker::InferenceComponent"]
    component["Properties"]["Specification"]["ComputeResourceRequirements"]["NumberOfCpuCoresRequired"] = 48
    (found,) = problems(template)
    assert "1 instances of 1 copies each hold fewer than its 2 copies" in found


def test_the_gpu_memory_alarm_counts_the_gpus(synth: Callable[..., Synthesized]) -> None:
    """On 4 GPUs, 95% of their memory is 380 in GPUMemoryUtilization (0-400): a threshold of 95
    fired at a quarter of it, and a toolkit with a worker per GPU was in ALARM for good."""
    template = synth(**VARIANTS["g5.12xlarge"])
    for stack in ("Gpt2Stack", "GptjStack"):
        (alarm,) = [
            r["Properties"] for r in template.template_json(stack)["Resources"].values()
            if r["Type"] == "AWS::CloudWatch::Alarm" and r["Properties"].get("MetricName") == "GPUMemoryUtilization"
        ]  # fmt: skip
        assert alarm["Threshold"] == 95 * 4, stack


def test_the_vllm_engine_alarms_on_its_queue_not_on_gpu_memory(synth: Callable[..., Synthesized]) -> None:
    """Fault 3: vLLM holds gpu_memory_utilization (0.9) of the GPU from its start, so its GPU
    memory alarm said nothing (and was in ALARM from the first minute at 0.95 or more). On that
    engine the stack alarms on the engine's queue instead (vllm:num_requests_waiting, from
    SageMaker's detailed observability, a PromQL alarm); the toolkit keeps its GPU memory alarm."""

    def alarms(template: dict[str, Any]) -> tuple[list[str], list[str]]:
        found = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Alarm"]
        return [a["MetricName"] for a in found if "MetricName" in a], [
            json.dumps(a["EvaluationCriteria"]) for a in found if "EvaluationCriteria" in a
        ]

    metrics, promql = alarms(synth(**VARIANTS["default"]).template_json("GptjStack"))
    assert "GPUMemoryUtilization" not in metrics and len(promql) == 1 and "num_requests_waiting" in promql[0]
    metrics, promql = alarms(synth(**VARIANTS["hf-toolkit"]).template_json("GptjStack"))
    assert "GPUMemoryUtilization" in metrics and promql == []
    # In async mode there is no detailed observability to alarm on.
    metrics, promql = alarms(synth(**VARIANTS["async"]).template_json("GptjStack"))
    assert "GPUMemoryUtilization" not in metrics and promql == []
