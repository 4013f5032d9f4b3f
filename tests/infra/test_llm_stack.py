"""LlmStack (the ``llm`` section): what it synthesizes, and what synthesis refuses from the payload
itself, each in one line naming the key: an architecture the pinned vLLM does not serve, a model
too large for the instance type (naming the cheapest that holds it and its price), a
tensor-parallel degree that does not divide the heads, bfloat16 on a T4, a chat template
SageMaker cannot carry, a payload built from another model."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Annotations, Match

from project_config import ConfigError, load_config
from project_config.llm import check_payload, check_source
from tests.infra.copy_check import synthesized_problems
from tests.infra.helpers import (
    COMPONENTS_ON_4_GPUS,
    ENDPOINT_MODES,
    PAYLOADS,
    QWEN_CONFIG,
    Synthesized,
    cdk_context,
    llama_tensors,
    make_artifacts,
    regional_dlc_image,
    resources_of,
    write_payload,
)

#: Llama 3.1 8B's config.json (the keys the checks read): 16 GB of bfloat16 weights, 131072 positions.
LLAMA_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
            "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
            "num_key_value_heads": 8, "max_position_embeddings": 131072, "vocab_size": 128256,
            "rope_scaling": {"factor": 8.0, "rope_type": "llama3"}, "torch_dtype": "bfloat16"}  # fmt: skip


def payload_of(root: Path, config: dict[str, Any], tokenizer: dict[str, Any] | None = None) -> Path:
    """A stand-in payload of `config` (a header-only weights shard of its Llama-layout tensors)."""
    files = {"config.json": json.dumps(config).encode(), "tokenizer_config.json": json.dumps(tokenizer or {}).encode()}
    return write_payload(root, files, llama_tensors(config))


def settings(artifacts: Path, **overrides: Any):  # type: ignore[no-untyped-def]
    return load_config(cdk_context(**{"project.artifacts_dir": str(artifacts), **overrides})).llm


def llm(**overrides: Any) -> dict[str, Any]:
    return {f"llm.{key}": value for key, value in overrides.items()}


# --- what it synthesizes ---------------------------------------------------------------------------


def test_the_vllm_image_and_its_settings(synth: Callable[..., Synthesized]) -> None:
    template = synth().template("LlmStack")
    template.has_resource_properties(
        "AWS::SageMaker::Model",
        {
            "PrimaryContainer": Match.object_like(
                {
                    # dtype auto: the checkpoint's; no max_model_len: the model's own; one GPU: no degree.
                    "Environment": {
                        "SM_VLLM_MAX_NUM_SEQS": "8",
                        "SM_VLLM_DTYPE": "auto",
                        "SM_VLLM_GPU_MEMORY_UTILIZATION": "0.9",
                    },
                    "Image": regional_dlc_image("vllm:0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker"),
                    "ModelDataSource": {
                        "S3DataSource": Match.object_like({"S3DataType": "S3Prefix", "CompressionType": "None"})
                    },
                }
            ),
            "EnableNetworkIsolation": True,
        },
    )
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ProductionVariants": [
                Match.object_like(
                    {"InstanceType": "ml.g5.xlarge", "InferenceAmiVersion": "al2023-ami-sagemaker-inference-gpu-4-1"}
                )
            ]
        },
    )


@pytest.mark.parametrize("mode", list(ENDPOINT_MODES))
def test_every_mode_builds_what_gptjstack_builds(synth: Callable[..., Synthesized], mode: str) -> None:
    """Alarms, guardrails, dashboard, scaling and grants: the same code path as GptjStack's on vLLM
    (the synthesis tests/infra/test_gptj_engines.py makes of each mode)."""
    synthesized = synth(**ENDPOINT_MODES[mode], **{"gptj.engine": "vllm"})
    ours, gptj = synthesized.template_json("LlmStack"), synthesized.template_json("GptjStack")
    # Both stand-in payloads have four files, each copied by a custom resource.
    assert Counter(r["Type"] for r in ours["Resources"].values()) == Counter(
        r["Type"] for r in gptj["Resources"].values()
    )
    assert set(ours["Outputs"]) == set(gptj["Outputs"])
    # Each copy gets what its engine uses (tests/infra/copy_check.py).
    assert synthesized_problems(synthesized, "LlmStack") == []


def test_a_tensor_parallel_configuration(synth: Callable[..., Synthesized]) -> None:
    """Two of an ml.g5.12xlarge's four GPUs: the Qwen's 14 heads split over 2, not 4."""
    template = synth(**llm(instance_type="ml.g5.12xlarge", tensor_parallel_size=2)).template("LlmStack")
    environment = Match.object_like({"SM_VLLM_TENSOR_PARALLEL_SIZE": "2"})
    template.has_resource_properties(
        "AWS::SageMaker::Model", {"PrimaryContainer": Match.object_like({"Environment": environment})}
    )


def test_a_component_copy_is_split_over_the_gpus_it_gets(synth: Callable[..., Synthesized]) -> None:
    """Issue 38, fault 1: in inference-component mode on ml.g5.12xlarge the model was split over
    the instance type's four GPUs (SM_VLLM_TENSOR_PARALLEL_SIZE=4) while its component asked for
    one: a copy's container sees its own accelerators alone, and vLLM stopped at start ("World size
    (4) is larger than the number of available GPUs (1) in this node"). The degree is the copy's
    accelerators: 2 here."""
    template = synth(**COMPONENTS_ON_4_GPUS).template_json("LlmStack")
    (model,) = resources_of(template, "AWS::SageMaker::Model").values()
    (component,) = resources_of(template, "AWS::SageMaker::InferenceComponent").values()
    assert model["Properties"]["PrimaryContainer"]["Environment"]["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "2"
    compute = component["Properties"]["Specification"]["ComputeResourceRequirements"]
    assert compute["NumberOfAcceleratorDevicesRequired"] == 2


COMPONENT_ON_4_GPUS = llm(endpoint_mode="inference-component", instance_type="ml.g5.12xlarge")


def test_a_degree_the_copy_does_not_get_is_refused_in_one_line() -> None:
    """Issue 38, fault 1: an explicit degree is checked against the copy's accelerators (it was
    checked against the instance type's GPUs alone)."""
    with pytest.raises(ConfigError) as raised:
        load_config(cdk_context(**COMPONENT_ON_4_GPUS, **llm(tensor_parallel_size=4)))
    assert str(raised.value) == (
        "llm.tensor_parallel_size=4 is invalid: allowed is llm.accelerators (1), the GPUs each copy of the inference "
        "component gets: its container sees those alone, and vLLM splits the model over exactly its degree (a larger "
        "one stops it at start, a smaller one leaves GPUs the copy reserves idle); set both to the same number"
    )
    with pytest.raises(ConfigError) as raised:
        load_config(cdk_context(**COMPONENT_ON_4_GPUS, **llm(accelerators=0)))
    assert str(raised.value).startswith("llm.accelerators=0 is invalid: allowed is at least 1 with the vllm engine")
    # The two agree: taken.
    agreed = load_config(cdk_context(**COMPONENT_ON_4_GPUS, **llm(tensor_parallel_size=2, accelerators=2))).llm
    assert agreed.container_environment()["SM_VLLM_TENSOR_PARALLEL_SIZE"] == "2"


def test_a_copy_whose_gpus_the_heads_do_not_divide_over_is_refused(tmp_path: Path) -> None:
    """The stand-in Qwen's 14 heads over a copy's four GPUs: the key to change is the copy's."""
    artifacts = make_artifacts(tmp_path / "artifacts", components=("llm",))
    with pytest.raises(ConfigError) as raised:
        check_payload(settings(artifacts, **COMPONENT_ON_4_GPUS, **llm(accelerators=4)))
    assert str(raised.value) == (
        "llm.accelerators=4 is invalid: allowed is a number of GPUs the model splits into on ml.g5.12xlarge: 2, 1 "
        "(each copy's GPUs are its tensor-parallel degree, llm.tensor_parallel_size): its 14 attention heads do not "
        "divide over 4 GPUs"
    )


#: A 13B Llama-2-layout model: 24 GiB of bfloat16 weights, more than one A10G holds.
LLAMA_13B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 5120,
             "intermediate_size": 13824, "num_hidden_layers": 40, "num_attention_heads": 40,
             "num_key_value_heads": 40, "max_position_embeddings": 4096, "vocab_size": 32000,
             "torch_dtype": "bfloat16"}  # fmt: skip


def test_the_memory_check_counts_the_gpus_a_copy_gets(tmp_path: Path) -> None:
    """Issue 38: the memory check sized each GPU at a quarter of the weights on ml.g5.12xlarge, so a
    model that needs all four GPUs passed synthesis as a copy of one. It counts the copy's GPUs, and
    names the number that holds it."""
    payload_of(tmp_path / "llm" / "model", LLAMA_13B)
    with pytest.raises(ConfigError) as raised:
        check_payload(settings(tmp_path, **COMPONENT_ON_4_GPUS))
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(
        "llm.accelerators=1 is invalid: allowed is 4 (GPUs a copy, its tensor-parallel degree, whose memory holds the "
        "model and its KV cache): on ml.g5.12xlarge (A10G, 24 GiB) gpu_memory_utilization 0.9 gives 21.6 GiB a GPU "
        "for the weights (13.02e9 parameters as bfloat16: 24.2 GiB)"
    ), message
    check_payload(settings(tmp_path, **COMPONENT_ON_4_GPUS, **llm(accelerators=4, max_copies=1)))


def test_a_model_without_a_chat_template_is_warned_of(synth: Callable[..., Synthesized]) -> None:
    synthesized = synth()
    warnings = Annotations.from_stack(synthesized.stacks["GptjStack"]).find_warning("*", Match.any_value())
    assert any("has no chat template" in str(w.entry.data) for w in warnings), warnings
    # The stand-in Qwen has its own.
    assert not Annotations.from_stack(synthesized.stacks["LlmStack"]).find_warning("*", Match.any_value())


# --- refused at synthesis, each in one line -----------------------------------------------------------


def test_an_architecture_the_pinned_vllm_does_not_serve(tmp_path: Path, synthesize_at: Callable[..., Any]) -> None:
    artifacts = make_artifacts(tmp_path / "artifacts")
    payload_of(artifacts / "llm" / "model", {**QWEN_CONFIG, "architectures": ["MPTForCausalLM"]})
    with pytest.raises(ConfigError) as raised:
        synthesize_at(tmp_path / "out", artifacts)
    assert str(raised.value) == (
        f"llm.model_data='{artifacts / 'llm' / 'model'}' is invalid: allowed is a model vLLM 0.30.0 serves: vLLM "
        "served MPTForCausalLM until 0.28.0 and 0.30.0 no longer does"
    )


def test_a_model_too_large_names_the_cheapest_type_that_holds_it(
    tmp_path: Path, synthesize_at: Callable[..., Any]
) -> None:
    """Llama 3.1 8B at 8192 tokens: 15 GiB of weights leave a T4 nothing; a 24 GiB A10G or L4 holds
    the weights but not the KV cache of max_num_seqs (8) sequences at full length; an L40S does."""
    artifacts = make_artifacts(tmp_path / "artifacts")
    payload_of(artifacts / "llm" / "model", LLAMA_8B)
    with pytest.raises(ConfigError) as raised:
        synthesize_at(tmp_path / "out", artifacts, **llm(instance_type="ml.g4dn.xlarge", max_model_len=8192))
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(
        "llm.instance_type='ml.g4dn.xlarge' is invalid: allowed is a GPU instance type that holds the model: on "
        "ml.g4dn.xlarge (T4, 16 GiB) gpu_memory_utilization 0.9 gives 14.4 GiB a GPU for the weights (8.03e9 "
        "parameters as float16: 15.0 GiB)"
    ), message
    assert message.endswith(
        "the cheapest type that holds it is ml.g6e.xlarge (1 x L40S, 48 GiB each, tensor_parallel_size 1; $2.61 an "
        "hour on demand in us-east-1)"
    ), message


def test_a_degree_that_does_not_divide_the_heads(tmp_path: Path) -> None:
    """The stand-in Qwen's 14 heads on ml.g5.12xlarge's four GPUs (the default degree): the check
    LlmStack runs at synthesis (tests/e2e/test_llm_stack.py runs a degree that divides them)."""
    artifacts = make_artifacts(tmp_path / "artifacts", components=("llm",))
    with pytest.raises(ConfigError) as raised:
        check_payload(settings(artifacts, **llm(instance_type="ml.g5.12xlarge")))
    assert str(raised.value) == (
        "llm.tensor_parallel_size='unset (4 GPUs)' is invalid: allowed is a degree the model splits into on "
        "ml.g5.12xlarge: 2, 1: its 14 attention heads do not divide over 4 GPUs"
    )


def test_bfloat16_on_a_t4(tmp_path: Path) -> None:
    """Refused as the configuration is read, before any stack is built."""
    artifacts = make_artifacts(tmp_path / "artifacts", components=("llm",))
    with pytest.raises(ConfigError) as raised:
        settings(artifacts, **llm(instance_type="ml.g4dn.xlarge", dtype="bfloat16"))
    assert str(raised.value) == (
        "llm.dtype='bfloat16' is invalid: allowed is float16, float32 or auto on ml.g4dn.xlarge: its T4 (Turing) has "
        "no bfloat16, which needs Ampere or later"
    )
    # auto: vLLM runs the checkpoint's bfloat16 as float16 there, and the check counts it so.
    check_payload(settings(artifacts, **llm(instance_type="ml.g4dn.xlarge")))


def test_the_cdk_cli_refuses_in_one_line(tmp_path: Path, cdk_cli: Path) -> None:
    """`npx cdk synth LlmStack -c llm.instance_type=ml.g4dn.xlarge -c llm.max_model_len=8192` over a
    Llama 3.1 8B payload: exit 1, one line, no traceback."""
    artifacts = tmp_path / "artifacts"
    payload_of(artifacts / "llm" / "model", LLAMA_8B)
    command = [str(cdk_cli), "synth", "LlmStack", "--quiet", "-o", str(tmp_path / "out"), "-c",
               f"project.artifacts_dir={artifacts}", "-c", "llm.instance_type=ml.g4dn.xlarge", "-c",
               "llm.max_model_len=8192"]  # fmt: skip
    result = subprocess.run(command, env=dict(os.environ), capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode != 0
    (line,) = [line for line in result.stderr.splitlines() if "is invalid" in line]
    assert line.startswith("error: llm.instance_type='ml.g4dn.xlarge' is invalid") and "ml.g6e.xlarge" in line
    assert "Traceback" not in result.stderr


QUANTIZED = {**QWEN_CONFIG, "quantization_config": {"quant_method": "mxfp4"}}


def test_a_quantization_the_gpu_lacks(tmp_path: Path) -> None:
    payload_of(tmp_path / "llm" / "model", QUANTIZED)
    with pytest.raises(ConfigError) as raised:
        check_payload(settings(tmp_path, **llm(instance_type="ml.g4dn.xlarge")))
    assert str(raised.value).startswith(
        "llm.instance_type='ml.g4dn.xlarge' is invalid: allowed is a GPU that runs the model: its mxfp4 quantization "
        "needs a GPU of compute capability 8.0 or later, and ml.g4dn.xlarge has 7.5; the cheapest type that holds it "
        "is ml.g6.xlarge"
    ), raised.value
    check_payload(settings(tmp_path))  # an A10G runs it


# --- the model and its chat template ---------------------------------------------------------------


COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"model": "Qwen/Qwen2.5-7B-Instruct"}, "llm.revision=None is invalid: allowed is the commit of "),
        ({"model": "Qwen/Qwen2.5-7B-Instruct", "revision": "main"}, "llm.revision='main' is invalid"),
        ({"model": "no such thing"}, "llm.model='no such thing' is invalid: allowed is a Hugging Face model id"),
        ({"model": "tests", "revision": COMMIT}, "llm.revision='0123456789abcdef0123456789abcdef01234567' is invalid"),
        ({"revision": COMMIT}, "llm.revision='0123456789abcdef0123456789abcdef01234567' is invalid: allowed is unset"),
        ({"chat_template": "hello"}, "llm.chat_template='hello' is invalid: allowed is a Jinja template"),
        ({"chat_template": "{{ x }}" * 200}, "allowed is a template of at most 1024 characters"),
        ({"chat_template": "nowhere.jinja"}, "llm.chat_template='nowhere.jinja' is invalid: allowed is a Jinja"),
        ({"model_server_workers": 2}, "llm.model_server_workers=2 is invalid: unknown setting"),
        ({"engine": "vllm"}, "llm.engine='vllm' is invalid: unknown setting"),
        ({"instance_type": "ml.g7e.2xlarge"}, "llm.instance_type='ml.g7e.2xlarge' is invalid: allowed is an instance"),
        ({"tensor_parallel_size": 2}, "llm.tensor_parallel_size=2 is invalid: allowed is at most 1: ml.g5.xlarge has"),
    ],
    ids=lambda value: str(value)[:40],
)
def test_a_bad_setting_fails_in_one_line(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(cdk_context(**llm(**overrides)))
    assert message in str(raised.value) and "\n" not in str(raised.value), raised.value


def test_a_chat_template_file_reaches_the_engine(tmp_path: Path) -> None:
    template = tmp_path / "chat.jinja"
    template.write_text("{% for m in messages %}{{ m['content'] }}\n{% endfor %}")
    engine = settings(tmp_path, **llm(chat_template=str(template))).engine
    assert engine.container_environment(gpus=1)["SM_VLLM_CHAT_TEMPLATE"] == template.read_text()


def test_a_hub_model_needs_its_payload_built_from_it(tmp_path: Path, synth_some: Callable[..., Any]) -> None:
    """Named but not built: LlmStack alone is left out, with the builder's command line. Built from
    another model: refused."""
    hub = llm(model="Qwen/Qwen2.5-7B-Instruct", revision=COMMIT)
    artifacts = make_artifacts(tmp_path / "artifacts", components=("gpt2", "gptj", "inf2"))
    _, left_out = synth_some(tmp_path / "out", artifacts, **hub)
    assert list(left_out) == ["LlmStack"]
    assert (
        f"python -m artifacts_builder llm --model Qwen/Qwen2.5-7B-Instruct --revision {COMMIT}" in left_out["LlmStack"]
    )
    payload_of(artifacts / "llm" / "model", QWEN_CONFIG)
    (artifacts / "llm" / "manifest.json").write_text(
        json.dumps({"schema": 1, "files": {}, "model": {"source": "Qwen/Qwen2.5-0.5B-Instruct", "revision": COMMIT}})
    )
    with pytest.raises(ConfigError, match=r"^llm.model='Qwen/Qwen2.5-7B-Instruct' is invalid: allowed is the model "):
        check_source(settings(artifacts, **hub))
    (artifacts / "llm" / "manifest.json").write_text(
        json.dumps({"schema": 1, "files": {}, "model": {"source": "Qwen/Qwen2.5-7B-Instruct", "revision": COMMIT}})
    )
    check_source(settings(artifacts, **hub))


def test_a_payload_folder_is_the_model(tmp_path: Path) -> None:
    payload = payload_of(tmp_path / "elsewhere", QWEN_CONFIG, json.loads(PAYLOADS["llm"]["tokenizer_config.json"]))
    chosen = settings(tmp_path / "artifacts", **llm(model=str(payload)))
    assert chosen.model_data == payload and chosen.model == str(payload)
    check_source(chosen)
    check_payload(chosen)
