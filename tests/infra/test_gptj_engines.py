"""GptjStack's two engines (``gptj.engine``): the vllm engine's image, settings and checks, and
every endpoint mode synthesized on it with what the toolkit engine gets."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match

from llm_contracts.gptj import PAYLOAD_MANIFEST
from llm_contracts.manifest import write_manifest
from project_config import ConfigError, load_config
from project_config.llm import check_payload
from tests.infra.copy_check import synthesized_problems
from tests.infra.helpers import (
    COMPONENTS_ON_4_GPUS,
    ENDPOINT_MODES,
    GPTJ_CONFIG,
    TOOLKIT_COMPONENT_ON_4_GPUS,
    Synthesized,
    cdk_context,
    regional_dlc_image,
    resources_of,
    synthesize,
)

VLLM = {"gptj.engine": "vllm"}
MODES = ENDPOINT_MODES


def vllm_settings(artifacts: Path, **overrides: Any):  # type: ignore[no-untyped-def]
    return load_config(cdk_context(**{"project.artifacts_dir": str(artifacts), **VLLM, **overrides})).gptj


def test_vllm_engine_container_contract(synth: Callable[..., Synthesized]) -> None:
    template = synth(**VLLM).template("GptjStack")
    template.has_resource_properties(
        "AWS::SageMaker::Model",
        {
            "PrimaryContainer": Match.object_like(
                {
                    # The image's entrypoint turns each SM_VLLM_* into its `vllm serve` flag; the
                    # toolkit's variables would mislead.
                    # No SM_VLLM_MAX_MODEL_LEN: unset, vLLM takes the model's n_positions.
                    "Environment": {
                        "SM_VLLM_MAX_NUM_SEQS": "8",
                        "SM_VLLM_DTYPE": "float16",
                        "SM_VLLM_GPU_MEMORY_UTILIZATION": "0.9",
                    },
                    "Image": regional_dlc_image("vllm:0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker"),
                    # The same payload folder, uncompressed under an S3 prefix.
                    "ModelDataSource": {
                        "S3DataSource": Match.object_like({"S3DataType": "S3Prefix", "CompressionType": "None"})
                    },
                }
            )
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


def test_vllm_image_pulls_only_its_repository(synth: Callable[..., Synthesized]) -> None:
    template = synth(**VLLM).template_json("GptjStack")
    text = json.dumps(resources_of(template, "AWS::IAM::Policy"))
    assert ":repository/vllm" in text and "huggingface-pytorch-inference" not in text


@pytest.mark.parametrize("mode", list(MODES))
def test_every_mode_gets_the_same_resources_on_either_engine(synth: Callable[..., Synthesized], mode: str) -> None:
    """Alarms, guardrails (rollback alarms, the update policy), dashboard, scaling and grants: the
    vllm engine changes the container, not what is built around it."""
    toolkit = synth(**MODES[mode]).template_json("GptjStack")
    vllm = synth(**MODES[mode], **VLLM).template_json("GptjStack")
    assert Counter(r["Type"] for r in vllm["Resources"].values()) == Counter(
        r["Type"] for r in toolkit["Resources"].values()
    )
    assert set(vllm["Outputs"]) == set(toolkit["Outputs"])
    for name in ("AWS::CloudWatch::Alarm", "AWS::IAM::Policy", "AWS::ApplicationAutoScaling::ScalingPolicy"):
        assert len(resources_of(vllm, name)) == len(resources_of(toolkit, name))
    # Each copy gets what its engine uses (tests/infra/copy_check.py).
    for engine in ({}, VLLM):
        assert synthesized_problems(synth(**MODES[mode], **engine), "GptjStack") == []


#: The log groups each mode's containers write to (SageMaker names them after the endpoint, or
#: the inference component).
LOG_GROUPS = {
    "realtime": "/aws/sagemaker/Endpoints",
    "inference-component": "/aws/sagemaker/InferenceComponents",
    "async": "/aws/sagemaker/Endpoints",
}


@pytest.mark.parametrize("mode", list(MODES))
def test_the_execution_role_writes_the_logs_of_its_mode(synth: Callable[..., Synthesized], mode: str) -> None:
    """Issue 38: the role (EndpointRoleDefaultPolicy) allowed the logs actions under
    /aws/sagemaker/Endpoints/* alone, where an inference component's container writes to
    /aws/sagemaker/InferenceComponents/<component name>."""
    template = synth(**MODES[mode], **VLLM).template_json("GptjStack")
    policies = resources_of(template, "AWS::IAM::Policy")
    (policy,) = [p for k, p in policies.items() if k.startswith("EndpointRoleDefaultPolicy")]
    (logs,) = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if "logs:PutLogEvents" in s["Action"]]
    assert sorted(logs["Action"]) == [
        "logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"
    ]  # fmt: skip
    tails = [r["Fn::Join"][1][-1] for r in logs["Resource"]]
    assert tails == [f":log-group:{LOG_GROUPS[mode]}/*", f":log-group:{LOG_GROUPS[mode]}/*:log-stream:*"]


def _copy(template: dict[str, Any]) -> tuple[dict[str, str], int]:
    """The model's environment and the GPUs its component gives each copy."""
    (model,) = resources_of(template, "AWS::SageMaker::Model").values()
    (component,) = resources_of(template, "AWS::SageMaker::InferenceComponent").values()
    compute = component["Properties"]["Specification"]["ComputeResourceRequirements"]
    return model["Properties"]["PrimaryContainer"]["Environment"], compute["NumberOfAcceleratorDevicesRequired"]


def test_a_component_copy_runs_on_the_gpus_it_gets(synth: Callable[..., Synthesized]) -> None:
    """Issue 38, fault 1: as an inference component on ml.g5.12xlarge, GPT-J on vLLM was split over
    the instance type's four GPUs (SM_VLLM_TENSOR_PARALLEL_SIZE=4) while each copy asked for one,
    and vLLM stopped at start ("World size (4) is larger than the number of available GPUs (1) in
    this node"); the toolkit's workers were counted against the four GPUs too, where a copy's
    container sees its own alone. Now the copy's one GPU runs one unsplit model, and a copy of four
    runs a worker on each."""
    environment, gpus = _copy(synth(**COMPONENTS_ON_4_GPUS).template_json("GptjStack"))
    assert gpus == 1 and "SM_VLLM_TENSOR_PARALLEL_SIZE" not in environment
    environment, gpus = _copy(synth(**TOOLKIT_COMPONENT_ON_4_GPUS).template_json("GptjStack"))
    assert gpus == 4 and environment["SAGEMAKER_MODEL_SERVER_WORKERS"] == "4"


ON_4_GPUS = {"gptj.endpoint_mode": "inference-component", "gptj.instance_type": "ml.g5.12xlarge"}
COPY_ERRORS = [
    (
        {**VLLM, **ON_4_GPUS, "gptj.tensor_parallel_size": "4"},
        "gptj.tensor_parallel_size=4 is invalid: allowed is gptj.accelerators (1), the GPUs each copy of the inference "
        "component gets: its container sees those alone",
    ),
    (
        {"gptj.engine": "hf-toolkit", **ON_4_GPUS, "gptj.model_server_workers": "4"},
        "gptj.model_server_workers=4 is invalid: allowed is at most 1: each copy of the inference component gets "
        "gptj.accelerators=1 GPU and sees it alone, and each worker loads its own copy of the weights onto a GPU of "
        "its own",
    ),
]


@pytest.mark.parametrize(("overrides", "message"), COPY_ERRORS, ids=["vllm-degree", "toolkit-workers"])
def test_what_a_copy_does_not_get_is_refused_in_one_line(overrides: dict[str, str], message: str) -> None:
    """Issue 38, fault 1: refused where each engine's setting exceeds the copy's GPUs (they were
    checked against the instance type's)."""
    with pytest.raises(ConfigError) as error:
        load_config(cdk_context(**overrides))
    assert str(error.value).startswith(message) and "\n" not in str(error.value), str(error.value)


SETTING_ERRORS = [
    ({"gptj.engine": "tgi"}, "gptj.engine='tgi' is invalid: allowed is one of vllm, hf-toolkit"),
    (
        {**VLLM, "gptj.model_server_workers": "2"},
        "gptj.model_server_workers=2 is invalid: allowed is unset with gptj.engine=vllm: it is a setting of "
        "gptj.engine=hf-toolkit",
    ),
    (
        {**VLLM, "gptj.transformers_version": "4.51.3"},
        "gptj.transformers_version='4.51.3' is invalid: allowed is unset with gptj.engine=vllm: it is a setting of "
        "gptj.engine=hf-toolkit",
    ),
    (
        {"gptj.engine": "hf-toolkit", "gptj.max_num_seqs": "4"},
        "gptj.max_num_seqs=4 is invalid: allowed is unset with gptj.engine=hf-toolkit: it is a setting of "
        "gptj.engine=vllm",
    ),
    ({**VLLM, "gptj.max_model_len": "8"}, "gptj.max_model_len=8 is invalid: allowed is a whole number from 16 to"),
    ({**VLLM, "gptj.max_num_seqs": "0"}, "gptj.max_num_seqs=0 is invalid: allowed is a whole number from 1 to 1024"),
    (
        {**VLLM, "gptj.dtype": "int8"},
        "gptj.dtype='int8' is invalid: allowed is one of auto, float16, bfloat16, float32",
    ),
    (
        {**VLLM, "gptj.instance_type": "ml.g4dn.xlarge", "gptj.dtype": "bfloat16"},
        "gptj.dtype='bfloat16' is invalid: allowed is float16, float32 or auto on ml.g4dn.xlarge: its T4 (Turing) has "
        "no bfloat16, which needs Ampere or later",
    ),
    (
        {**VLLM, "gptj.instance_type": "ml.p3.2xlarge", "gptj.max_num_seqs": "1"},
        "gptj.instance_type='ml.p3.2xlarge' is invalid: allowed is a GPU that the vllm image's CUDA 13.0 runs on "
        "(Turing or newer",
    ),
    (
        {**VLLM, "gptj.gpu_memory_utilization": "1.2"},
        "gptj.gpu_memory_utilization=1.2 is invalid: allowed is a number from 0.1 to 0.99",
    ),
    (
        {**VLLM, "gptj.vllm_version": "0.1.0"},
        "gptj.vllm_version='0.1.0' is invalid: allowed is one of 0.23.0,",
    ),
    (
        {**VLLM, "gptj.inference_ami_version": "al2-ami-sagemaker-inference-gpu-3-1"},
        "gptj.inference_ami_version='al2-ami-sagemaker-inference-gpu-3-1' is invalid: allowed is an AMI whose CUDA "
        "runs the vllm image's 13.0 (vllm:0.30.0-gpu-py312-cu130-ubuntu24.04-sagemaker): "
        "al2023-ami-sagemaker-inference-gpu-4-1",
    ),
    (
        {**VLLM, "gptj.environment": '{"SM_VLLM_MAX_NUM_SEQS": "3"}'},
        "gptj.environment={'SM_VLLM_MAX_NUM_SEQS': '3'} is invalid: allowed is free of SM_VLLM_MAX_NUM_SEQS "
        "(SM_VLLM_MAX_NUM_SEQS comes from gptj.max_num_seqs: set that instead)",
    ),
    (
        {**VLLM, "gptj.environment": '{"SM_VLLM_PORT": "9000"}'},
        "gptj.environment={'SM_VLLM_PORT': '9000'} is invalid: allowed is free of SM_VLLM_PORT",
    ),
    (
        {**VLLM, "gptj.model_data": "artifacts/gptj/model.tar.gz"},
        "gptj.model_data='",
    ),
]


@pytest.mark.parametrize(
    ("overrides", "message"), SETTING_ERRORS, ids=[json.dumps(o, sort_keys=True) for o, _ in SETTING_ERRORS]
)
def test_a_bad_engine_setting_fails_in_one_line(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(cdk_context(**overrides))
    assert str(error.value).startswith(message) and "\n" not in str(error.value), str(error.value)


def test_every_problem_of_the_gpus_is_listed_at_once() -> None:
    """The keys the instance type's GPUs bound are checked at one moment: each problem a line."""
    with pytest.raises(ConfigError) as error:
        load_config(
            cdk_context(
                **VLLM,
                **{"gptj.instance_type": "ml.g4dn.xlarge", "gptj.dtype": "bfloat16", "gptj.tensor_parallel_size": "2"},
            )
        )
    assert str(error.value).splitlines() == [
        "gptj.tensor_parallel_size=2 is invalid: allowed is at most 1: ml.g4dn.xlarge has 1 GPU",
        "gptj.dtype='bfloat16' is invalid: allowed is float16, float32 or auto on ml.g4dn.xlarge: its T4 (Turing) "
        "has no bfloat16, which needs Ampere or later",
    ]


def test_the_tarball_is_refused_with_the_vllm_engine() -> None:
    with pytest.raises(ConfigError, match=r"allowed is a payload folder with gptj.engine=vllm \(shipped uncompressed"):
        load_config(cdk_context(**VLLM, **{"gptj.model_data": "artifacts/gptj/model.tar.gz"}))


def test_settings_reach_the_environment(artifacts: Path) -> None:
    settings = vllm_settings(
        artifacts, **{"gptj.max_model_len": "1024", "gptj.max_num_seqs": "4", "gptj.gpu_memory_utilization": "0.85"}
    )
    assert settings.container_environment() == {
        "SM_VLLM_MAX_MODEL_LEN": "1024",
        "SM_VLLM_MAX_NUM_SEQS": "4",
        "SM_VLLM_DTYPE": "float16",
        "SM_VLLM_GPU_MEMORY_UTILIZATION": "0.85",
    }


# --- the GPU memory check -------------------------------------------------------------------


def test_the_defaults_fit_their_gpu(artifacts: Path) -> None:
    check_payload(vllm_settings(artifacts))


MEMORY_ERRORS = [
    # A T4's 16 GiB at 0.9: 14.4 GiB less 11.3 of weights and 2 of overhead leaves 2644 tokens.
    (
        {"gptj.instance_type": "ml.g4dn.xlarge"},
        r"^gptj.max_num_seqs=8 is invalid: allowed is at most 1: on ml.g4dn.xlarge \(T4, 16 GiB\) "
        r"gpu_memory_utilization 0.9 gives 14.4 GiB a GPU for the weights \(6.05e9 parameters as float16: 11.3 GiB\), "
        r"the engine's overhead \(2 GiB\) and a KV cache of 448 KiB a token \(2 x 28 layers x 16 KV heads x 256 x 2 "
        r"bytes\), which leaves 2643 tokens, fewer than max_model_len x max_num_seqs = 2048 x 8; the cheapest type "
        r"that holds it is ml.g6.xlarge \(1 x L4, 24 GiB each, tensor_parallel_size 1; \$1.13 an hour on demand in "
        r"us-east-1\)$",
    ),
    (
        {"gptj.instance_type": "ml.g4dn.xlarge", "gptj.max_num_seqs": "1", "gptj.gpu_memory_utilization": "0.85"},
        r"^gptj.max_model_len=\"unset \(the model's n_positions, 2048\)\" is invalid: allowed is at most 770: on "
        r"ml.g4dn.xlarge",
    ),
    (
        {"gptj.dtype": "float32"},
        r"^gptj.instance_type='ml.g5.xlarge' is invalid: allowed is a GPU instance type that holds the model: .*"
        r"parameters as float32: 22.5 GiB.*the cheapest type that holds it is ml.g6e.xlarge",
    ),
    (
        {"gptj.max_model_len": "4096"},
        r"^gptj.max_model_len=4096 is invalid: allowed is at most 2048 \(n_positions in .*config.json\)$",
    ),
]


@pytest.mark.parametrize(("overrides", "pattern"), MEMORY_ERRORS, ids=[json.dumps(o) for o, _ in MEMORY_ERRORS])
def test_a_model_the_gpu_cannot_hold_is_refused(artifacts: Path, overrides: dict[str, str], pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        check_payload(vllm_settings(artifacts, **overrides))


def test_max_model_len_unset_leaves_the_flag_out_and_is_checked_as_the_models(artifacts: Path) -> None:
    """vLLM's own default, the model's n_positions, so that any payload synthesizes as it is (the
    tiny one has 256 positions); the memory check counts n_positions tokens a sequence."""
    settings = vllm_settings(artifacts)
    assert settings.engine.max_model_len is None
    assert "SM_VLLM_MAX_MODEL_LEN" not in settings.container_environment()
    with pytest.raises(ConfigError, match=r"max_model_len x max_num_seqs = 2048 x 8"):
        check_payload(vllm_settings(artifacts, **{"gptj.instance_type": "ml.g4dn.xlarge"}))


def test_what_fits_on_a_t4_passes(artifacts: Path) -> None:
    check_payload(vllm_settings(artifacts, **{"gptj.instance_type": "ml.g4dn.xlarge", "gptj.max_num_seqs": "1"}))
    small = {"gptj.instance_type": "ml.g4dn.xlarge", "gptj.max_model_len": "512", "gptj.max_num_seqs": "5"}
    check_payload(vllm_settings(artifacts, **small))


def test_the_memory_check_fails_synthesis(tmp_path: Path, artifacts: Path) -> None:
    with pytest.raises(ConfigError, match=r"^gptj.max_num_seqs=64 is invalid: allowed is at most 9: on ml.g5.xlarge"):
        synthesize(tmp_path / "out", artifacts, **VLLM, **{"gptj.max_num_seqs": "64"})


def _payload_copy(tmp_path: Path, artifacts: Path) -> Path:
    folder = tmp_path / "artifacts"
    shutil.copytree(artifacts, folder)
    return folder / "gptj" / "model"


def test_a_payload_without_safetensors_is_refused(tmp_path: Path, artifacts: Path) -> None:
    payload = _payload_copy(tmp_path, artifacts)
    shard = payload / "model-00001-of-00001.safetensors"
    shard.rename(payload / "model.pt")
    files = [p for p in payload.rglob("*") if p.is_file() and p.name != PAYLOAD_MANIFEST]
    write_manifest(payload, "gptj-payload", {str(p.relative_to(payload)): p for p in files}, name=PAYLOAD_MANIFEST)
    with pytest.raises(ConfigError, match=r"allowed is a payload with safetensors weights with gptj.engine=vllm"):
        check_payload(vllm_settings(tmp_path / "artifacts"))


def test_a_payload_config_without_layers_is_refused(tmp_path: Path, artifacts: Path) -> None:
    payload = _payload_copy(tmp_path, artifacts)
    (payload / "config.json").write_text(json.dumps({**GPTJ_CONFIG, "n_layer": None}))
    with pytest.raises(
        ConfigError, match=re.escape("allowed is a causal language model's payload: config.json gives no layer")
    ):
        check_payload(vllm_settings(tmp_path / "artifacts"))
