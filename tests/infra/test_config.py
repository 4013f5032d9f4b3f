"""The typed configuration: defaults, overrides, and a clear error for every bad value."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from project_config import PROJECT_ROOT, ConfigError, VllmEngine, load_config
from project_config.inf2 import hub_model
from tests.infra.helpers import ROOT, cdk_context, make_artifacts


def config(**overrides: Any):  # type: ignore[no-untyped-def]
    return load_config(cdk_context(**overrides))


def toolkit(**overrides: Any):  # type: ignore[no-untyped-def]
    """GPT-J on the toolkit engine (the seed's recipe), whose settings most tests here exercise;
    tests/infra/test_gptj_engines.py has the vllm engine's."""
    return config(**{"gptj.engine": "hf-toolkit", **overrides})


def test_defaults_are_the_documented_ones() -> None:
    cfg = config()
    assert cfg.gpt2.endpoint.instance_type == "ml.g5.xlarge"
    # GPT-J on the vllm engine (docs/BENCHMARKS.md says why) and what it needs: an A10G, CUDA 13's AMI.
    assert isinstance(cfg.gptj.engine, VllmEngine) and cfg.gptj.engine.name == "vllm"
    assert cfg.gptj.endpoint.instance_type == "ml.g5.xlarge"
    assert cfg.gptj.endpoint.inference_ami_version == "al2023-ami-sagemaker-inference-gpu-4-1"
    assert toolkit().gptj.endpoint.instance_type == "ml.g4dn.xlarge"
    assert cfg.inf2.server.instance_type == "inf2.48xlarge"
    assert cfg.inf2.server.volume_size_gb == 512
    assert cfg.inf2.server.ingress_cidr is None
    # Unset: the bundle's own model, else facebook/opt-13b from the hub at its pinned commit.
    assert (cfg.inf2.model_server.model_id, cfg.inf2.model_server.model_revision) == (None, None)
    assert hub_model(cfg.inf2.model_server) == ("facebook/opt-13b", "e515202d1e7750da62d245fbccb2723b9c1790f5")
    assert cfg.inf2.model_server.tensor_parallel_degree == 8
    assert cfg.gpt2.endpoint.alarms.latency_ms == 600  # the seed's bar
    # NVMe instance types reject VolumeSizeInGB: none is set for them.
    assert cfg.gpt2.endpoint.volume_size_gb is None
    assert cfg.gpt2.model_data == PROJECT_ROOT / "artifacts" / "gpt2" / "model.tar.gz"
    assert cfg.project.account is None and cfg.project.region is None


def test_an_alarm_set_to_null_is_none_and_an_unset_one_keeps_its_default() -> None:
    """docs/CONFIGURATION.md: ``null`` turns an alarm off, in cdk.json or as ``-c key=null``."""
    context = cdk_context(**{"gpt2.model_errors_alarm_threshold": "null"})
    context["gpt2"] = {**context.get("gpt2", {}), "disk_alarm_percent": None}
    alarms = load_config(context).gpt2.endpoint.alarms
    assert (alarms.model_errors, alarms.disk_percent) == (None, None)
    assert (alarms.latency_ms, config().gpt2.endpoint.alarms.disk_percent) == (600, 90)


def test_cli_overrides_arrive_as_text_and_win_over_cdk_json() -> None:
    cfg = toolkit(
        **{"gptj.max_capacity": "3", "gptj.instance_type": "ml.g5.2xlarge", "gptj.transformers_version": "4.51"}
    )
    assert cfg.gptj.endpoint.autoscaling.max_capacity == 3
    assert cfg.gptj.endpoint.instance_type == "ml.g5.2xlarge"
    # A version stays text even though "4.51" parses as a JSON number.
    assert cfg.gptj.engine.transformers_version == "4.51"


def test_volume_size_defaults_for_types_without_nvme() -> None:
    cfg = toolkit(**{"gptj.instance_type": "ml.p3.2xlarge"})
    assert cfg.gptj.endpoint.volume_size_gb is None and cfg.gptj.endpoint.volume_size == 30


def test_relative_paths_are_relative_to_the_project_root(tmp_path: Path) -> None:
    assert config(**{"project.artifacts_dir": "build/art"}).gptj.model_data == ROOT / "build/art/gptj/model"
    assert config(**{"project.artifacts_dir": str(tmp_path)}).inf2.bundle == tmp_path / "inf2" / "bundle.tar.gz"


BAD_VALUES = [
    ("gpt2.instance_type", "ml.p3.2xlarge", "Volta"),
    ("gpt2.instance_type", "g5.xlarge", "SageMaker instance type"),
    ("gptj.instance_type", "ml.m5.xlarge", "16 GB"),
    ("gpt2.min_capacity", 0, "from 1 to 100"),
    ("gptj.max_capacity", "0", "from 1 to 100"),
    ("gpt2.initial_instance_count", 9, "between min_capacity"),
    ("gptj.startup_health_check_timeout_s", 30, "from 60 to 3600"),
    ("gptj.model_data_download_timeout_s", 4000, "from 60 to 3600"),
    ("gptj.volume_size_gb", 100, "NVMe"),
    ("gpt2.target_invocations_per_instance", -5, "from 1 to 100000"),
    ("gpt2.latency_alarm_ms", "fast", "whole number"),
    ("gpt2.alarm_period_s", 90, "multiple of 60"),
    # Endpoint metrics are per minute: a 10 s alarm would never see data.
    ("gpt2.alarm_period_s", 10, "from 60 to 86400"),
    ("gptj.alarm_evaluation_periods", 1441, "from 1 to 100"),
    ("gptj.model_server_workers", 2, "ml.g4dn.xlarge has 1 GPU"),
    ("gpt2.enable_network_isolation", "yes", "true or false"),
    ("gpt2.image_uri", "docker.io/library/gpt2:latest", "ECR image URI"),
    ("gpt2.environment", {"BAD-NAME": "1"}, "environment variable"),
    ("gptj.alarm_topic_arn", "oncall", "SNS topic ARN"),
    ("gptj.alarm_email", "oncall", "an e-mail address"),
    ("gpt2.update_strategy", "blue", "one of all-at-once, canary, linear, rolling"),
    ("gpt2.update_wait_s", 4000, "from 0 to 3600"),
    ("gpt2.update_timeout_s", 100, "from 600 to 28800"),
    ("gpt2.model_errors_alarm_threshold", 0, "from 1 to 1000000"),
    ("gpt2.disk_alarm_percent", 101, "from 1 to 100"),
    ("gpt2.inference_ami_version", "al2-ami-sagemaker-batch-gpu-535", "GPU inference AMI version"),
    ("gpt2.instnce_type", "ml.g5.xlarge", "unknown setting"),
    ("gptj.py_version", "python3", "py3xx"),
    ("inf2.instance_type", "trn1.32xlarge", "inf2 type"),
    ("inf2.ingress_cidr", "0.0.0.0/0", "inside the VPC or connected to it"),
    # Half the internet is no better than all of it (issue: only /0 used to be refused).
    ("inf2.ingress_cidr", "0.0.0.0/1", "so 0.0.0.0/1 can never reach it"),
    # A single public address could never reach the private instance either (issue 29, fault 6).
    ("inf2.ingress_cidr", "203.0.113.7/32", "so 203.0.113.7/32 can never reach it"),
    ("inf2.ingress_cidr", "10.0.0.300/24", "IPv4 CIDR"),
    ("inf2.ingress_cidr", "10.0.0.1/24", "did you mean 10.0.0.0/24"),
    ("inf2.vpc_cidr", "10.0.0.0/8", "/16 to /18"),
    # Two zones of a /24 public and a /20 private subnet do not fit a /19.
    ("inf2.vpc_cidr", "10.0.0.0/19", "/20 private"),
    ("inf2.subnet_id", "subnet-0123abcd", "unless vpc_id"),
    ("inf2.volume_size_gb", 100, "from 200"),
    ("inf2.dtype", "int8", "fp16, bf16, fp32"),
    ("inf2.ami_ssm_parameter", "ami-0123456789", "SSM parameter path"),
    ("project.tags", {"aws:owner": "me"}, "not starting with 'aws:'"),
    ("project.region", "mars-north-1x", "AWS region"),
    ("project.account", "1234", "12-digit"),
]


@pytest.mark.parametrize(("key", "value", "allowed"), BAD_VALUES, ids=[f"{k}={v}" for k, v, _ in BAD_VALUES])
def test_bad_value_names_key_value_and_what_is_allowed(key: str, value: Any, allowed: str) -> None:
    with pytest.raises(ConfigError) as error:
        toolkit(**{key: value})
    message = str(error.value)
    assert message.startswith(f"{key}="), message
    assert str(value) in message or repr(value) in message, message
    assert allowed in message, message


@pytest.mark.parametrize(
    ("key", "variable", "fix"),
    [
        ("gptj.environment", "SAGEMAKER_PROGRAM", "SAGEMAKER_PROGRAM is fixed by the stack"),
        (
            "gptj.environment",
            "SAGEMAKER_MODEL_SERVER_WORKERS",
            "SAGEMAKER_MODEL_SERVER_WORKERS comes from gptj.model_server_workers",
        ),
        ("gpt2.environment", "GPT2_BACKEND", "GPT2_BACKEND comes from gpt2.backend: set that instead"),
        (
            "gptj.environment",
            "SAGEMAKER_MODEL_SERVER_TIMEOUT",
            r"SAGEMAKER_MODEL_SERVER_TIMEOUT comes from gptj.model_server_timeout_s \(in seconds; MMS reads this "
            "variable as minutes\\)",
        ),
    ],
)
def test_typed_settings_cannot_be_overridden_through_environment(key: str, variable: str, fix: str) -> None:
    message = rf"^{key}=.*{variable}.* is invalid: allowed is free of {variable} \({fix}"
    with pytest.raises(ConfigError, match=message):
        toolkit(**{key: {variable: "x", "OTHER": "kept"}})
    assert toolkit(**{key: {"OTHER": "kept"}})


def test_alarm_window_stays_within_cloudwatch_limits() -> None:
    day = {"gpt2.alarm_period_s": 3600, "gpt2.alarm_evaluation_periods": 24}
    assert config(**day, **{"gpt2.update_auto_rollback": False}).gpt2.endpoint.alarms
    with pytest.raises(ConfigError, match=r"^gpt2.alarm_evaluation_periods=25 is invalid: allowed is at most 24 with "):
        config(**{"gpt2.alarm_period_s": 3540, "gpt2.alarm_evaluation_periods": 25})


def test_rollback_alarms_must_be_able_to_fire_while_an_update_bakes() -> None:
    day = {"gpt2.alarm_period_s": 3600, "gpt2.alarm_evaluation_periods": 24}
    with pytest.raises(ConfigError, match=r"^gpt2.update_auto_rollback=True is invalid: allowed is false with alarms "):
        config(**day)
    five = {"gpt2.alarm_period_s": 60, "gpt2.alarm_evaluation_periods": 5}
    assert config(**five, **{"gpt2.update_wait_s": 300}).gpt2.endpoint.deployment.wait_interval_s == 300
    with pytest.raises(ConfigError, match=r"^gpt2.update_wait_s=240 is invalid: allowed is at least the rollback "):
        config(**five, **{"gpt2.update_wait_s": 240})
    with pytest.raises(ConfigError, match=r"^gptj.update_strategy='rolling' is invalid: allowed is all-at-once while"):
        config(**{"gptj.update_strategy": "rolling"})
    scaled = config(**{"gptj.min_capacity": 2, "gptj.max_capacity": 4, "gptj.update_strategy": "rolling"})
    assert scaled.gptj.endpoint.deployment_strategy == "rolling"


def test_an_email_goes_to_the_stacks_own_topic() -> None:
    topic = "arn:aws:sns:us-east-1:123456789012:oncall"
    assert config(**{"gpt2.alarm_email": "oncall@example.com"}).gpt2.alarm_email == "oncall@example.com"
    with pytest.raises(ConfigError, match=r"^gpt2.alarm_email='oncall@example.com' is invalid: allowed is unset when"):
        config(**{"gpt2.alarm_email": "oncall@example.com", "gpt2.alarm_topic_arn": topic})


def test_endpoint_modes_read_their_own_settings_and_refuse_the_others() -> None:
    ic = toolkit(**{"gptj.endpoint_mode": "inference-component", "gptj.min_copies": "0"}).gptj.endpoint
    assert ic.mode == "inference-component" and ic.autoscaling is None
    assert ic.inference_component is not None and ic.inference_component.scales_to_zero
    assert ic.fewest_instances == 0 and ic.instance_count == 1
    queued = toolkit(**{"gpt2.endpoint_mode": "async", "gpt2.async_max_instances": "3"}).gpt2.endpoint
    assert queued.async_inference is not None and queued.async_inference.max_instances == 3
    refused = {
        ("gptj.min_copies", "0", ""): "gptj.min_copies=0 is invalid: allowed is unset in realtime mode: it is a "
        "setting of gptj.endpoint_mode=inference-component",
        ("gptj.max_capacity", "3", "async"): "gptj.max_capacity=3 is invalid: allowed is unset in async mode: it is "
        "a setting of gptj.endpoint_mode=realtime",
        ("gptj.cpu_cores", "9", "inference-component"): "gptj.cpu_cores=9 is invalid: allowed is at most 4: the "
        "vCPUs of one ml.g4dn.xlarge",
        ("gptj.accelerators", "2", "inference-component"): "gptj.accelerators=2 is invalid: allowed is at most 1: "
        "each copy must fit on one ml.g4dn.xlarge",
        ("gptj.ic_max_instances", "1", "inference-component"): "gptj.ic_max_instances=1 is invalid: allowed is at "
        "least 2: 2 copies take 2 ml.g4dn.xlarge, 1 to an instance (each asks for 1 of its 1 GPU, 2 of its 4 vCPUs and "
        "8192 of its 16384 MiB of memory)",
        ("gptj.ic_max_instances", "2", "inference-component"): None,
        ("gptj.endpoint_mode", "serverless", ""): "gptj.endpoint_mode='serverless' is invalid: allowed is one of "
        "realtime, inference-component, async",
    }
    for (key, value, mode), message in refused.items():
        given = {key: value, **({"gptj.endpoint_mode": mode} if mode else {})}
        if message is None:
            assert toolkit(**given).gptj.endpoint.inference_component is not None
            continue
        with pytest.raises(ConfigError) as error:
            toolkit(**given)
        assert str(error.value) == message


def test_a_zone_of_another_region_than_the_pinned_one_is_refused() -> None:
    pinned = {"project.region": "eu-west-1", "project.account": "123456789012"}
    assert config(**pinned, **{"inf2.availability_zone": "eu-west-1b"}).inf2.availability_zone == "eu-west-1b"
    assert config(**{"inf2.availability_zone": "us-east-1a"}).inf2.availability_zone == "us-east-1a"
    with pytest.raises(ConfigError) as error:
        config(**pinned, **{"inf2.availability_zone": "us-east-1a"})
    assert str(error.value) == (
        "inf2.availability_zone='us-east-1a' is invalid: allowed is a zone of project.region eu-west-1 (such as "
        "eu-west-1a), or unset project.region"
    )


@pytest.mark.parametrize("section", ["gpt2", "gptj"])
def test_a_sagemaker_image_of_another_region_than_the_pinned_one_is_refused(section: str) -> None:
    pinned = {"project.region": "eu-west-1", "project.account": "123456789012"}
    here, there = (f"123456789012.dkr.ecr.{r}.amazonaws.com/llm/server:1" for r in ("eu-west-1", "us-east-1"))
    assert getattr(config(**pinned, **{f"{section}.image_uri": here}), section).image_uri == here
    # An environment-agnostic stack's region is only known at deploy time.
    assert getattr(config(**{f"{section}.image_uri": there}), section).image_uri == there
    with pytest.raises(ConfigError) as error:
        config(**pinned, **{f"{section}.image_uri": there})
    assert str(error.value) == (
        f"{section}.image_uri='{there}' is invalid: allowed is an image in ECR of project.region eu-west-1 "
        "(123456789012.dkr.ecr.eu-west-1.amazonaws.com/llm/server...), as SageMaker pulls a model's image from "
        "its own region only, or unset project.region"
    )
    # The inf2 host's docker pulls from any region's registry.
    assert config(**pinned, **{"inf2.image_uri": there}).inf2.model_server.image_uri == there


def test_one_gptj_worker_per_gpu() -> None:
    cfg = toolkit(**{"gptj.instance_type": "ml.g5.12xlarge", "gptj.model_server_workers": 4})
    assert cfg.gptj.engine.model_server_workers == 4
    with pytest.raises(
        ConfigError, match=r"^gptj.model_server_workers=5 is invalid: allowed is at most 4: ml.g5.12xlarge has 4 GPUs"
    ):
        toolkit(**{"gptj.instance_type": "ml.g5.12xlarge", "gptj.model_server_workers": 5})


def test_one_zone_vpc_may_be_smaller() -> None:
    cfg = config(**{"inf2.availability_zone": "us-east-1a", "inf2.vpc_cidr": "10.0.0.0/19"})
    assert cfg.inf2.vpc_cidr == "10.0.0.0/19"


def test_a_typo_in_a_section_name_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^max_capacity='3' is invalid: allowed is a setting with its section: gpt2"):
        config(max_capacity="3")
    with pytest.raises(ConfigError, match=r"^foo='3' is invalid: allowed is a setting of a section"):
        config(foo="3")
    # CDK's own context keys are not ours to refuse.
    assert config(**{"@aws-cdk/core:newStyleStackSynthesis": True, "aws:cdk:enable-path-metadata": True})
    with pytest.raises(ConfigError, match=r"^gtpj.max_capacity='3' is invalid: 'gtpj' is no section"):
        config(**{"gtpj.max_capacity": "3"})
    # CDK's own context keys pass through untouched.
    config(**{"@aws-cdk/aws-ec2:uniqueImdsv2TemplateName": True, "aws:cdk:enable-path-metadata": True})


def test_vpc_id_needs_its_subnet_and_zone() -> None:
    with pytest.raises(ConfigError, match=r"inf2.subnet_id=None is invalid: .*required with vpc_id"):
        config(**{"inf2.vpc_id": "vpc-0123456789abcdef0"})
    cfg = config(
        **{
            "inf2.vpc_id": "vpc-0123456789abcdef0",
            "inf2.subnet_id": "subnet-0123abcd",
            "inf2.availability_zone": "us-east-1a",
        }
    )
    assert cfg.inf2.subnet_id == "subnet-0123abcd"


def test_a_section_must_be_an_object() -> None:
    with pytest.raises(ConfigError, match=r"^gptj=\[1, 2\] is invalid"):
        config(gptj=[1, 2])


def test_the_cdk_cli_fails_synthesis_with_the_message(tmp_path: Path, cdk_cli: Path) -> None:
    """The real CLI path: `-c` arrives as text and the app exits non-zero with our message."""
    env = dict(os.environ)
    command = [str(cdk_cli), "synth", "GptjStack", "--quiet", "-o", str(tmp_path / "out")]
    command += ["-c", "gptj.instance_type=ml.p3.2xlarge", "-c", "gpt2.instance_type=ml.p3.2xlarge"]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode != 0
    # One line, no traceback.
    (line,) = [line for line in result.stderr.splitlines() if "is invalid" in line]
    assert line.startswith("error: gpt2.instance_type='ml.p3.2xlarge' is invalid") and "TensorRT" in line
    assert "Traceback" not in result.stderr


def test_one_stack_synthesizes_with_only_its_payload_built(tmp_path: Path, cdk_cli: Path) -> None:
    """A clean clone where only GPT-J's payload has been built: `cdk synth GptjStack` works,
    and says in one line each which stacks were left out and why."""
    artifacts = make_artifacts(tmp_path / "artifacts", components=("gptj",))
    out = tmp_path / "out"
    command = [str(cdk_cli), "synth", "GptjStack", "--quiet", "-o", str(out)]
    command += ["-c", f"project.artifacts_dir={artifacts}"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (out / "GptjStack.template.json").is_file()
    assert not (out / "Gpt2Stack.template.json").exists() and not (out / "Inf2Stack.template.json").exists()
    left_out = [line for line in result.stderr.splitlines() if "is left out of this synthesis" in line]
    assert [line.split()[0] for line in left_out] == ["Gpt2Stack", "LlmStack", "Inf2Stack"], result.stderr
    assert "python -m artifacts_builder gpt2" in left_out[0]
    assert "python -m artifacts_builder llm --model <hub id or folder>" in left_out[1]


EXISTING_VPC = {
    "inf2.vpc_id": "vpc-0123456789abcdef0",
    "inf2.subnet_id": "subnet-0a1b2c3d",
    "inf2.availability_zone": "us-east-1a",
}


@pytest.mark.parametrize("cidr", ["10.0.0.0/8", "172.16.0.0/12", "192.168.10.0/24", "100.64.0.0/10"])
def test_networks_connected_to_a_vpc_of_yours_may_reach_the_model_server(cidr: str) -> None:
    """In a VPC of yours (inf2.vpc_id), hosts of the VPC and of the private networks connected to
    it by VPN, Direct Connect, peering or a transit gateway."""
    assert config(**EXISTING_VPC, **{"inf2.ingress_cidr": cidr}).inf2.server.ingress_cidr == cidr


@pytest.mark.parametrize("cidr", ["10.42.0.0/16", "10.42.16.0/20", "10.42.3.7/32"])
def test_in_the_stacks_own_vpc_its_own_hosts_may_reach_the_model_server(cidr: str) -> None:
    assert config(**{"inf2.ingress_cidr": cidr}).inf2.server.ingress_cidr == cidr


@pytest.mark.parametrize("cidr", ["192.168.10.0/24", "10.0.0.0/8", "10.43.0.0/16"])
def test_in_the_stacks_own_vpc_no_other_network_can_reach_it(cidr: str) -> None:
    """The stack's VPC routes to nothing but itself and the internet through its NAT gateway."""
    with pytest.raises(ConfigError, match=rf"^inf2.ingress_cidr='{cidr}' is invalid: allowed is a network inside "
                                          r"inf2.vpc_cidr \(10.42.0.0/16\)"):  # fmt: skip
        config(**{"inf2.ingress_cidr": cidr})


def test_the_probe_request_follows_the_handler() -> None:
    # The bundle's model.py takes {"text": ...}; DJL's own handlers take {"inputs": ..., "parameters": ...}.
    assert json.loads(config().inf2.server.probe_request) == {"text": ["Hello"], "max_new_tokens": 1}
    djl = config(**{"inf2.entry_point": "djl_python.transformers_neuronx"}).inf2.server.probe_request
    assert json.loads(djl) == {"inputs": "Hello", "parameters": {"max_new_tokens": 1}}


def test_every_bad_setting_of_a_section_is_reported_on_a_line_of_its_own() -> None:
    with pytest.raises(ConfigError) as error:
        config(**{"gpt2.min_capacity": 0, "gpt2.scale_in_cooldown_s": -1})
    assert str(error.value).splitlines() == [
        "gpt2.min_capacity=0 is invalid: allowed is a whole number from 1 to 100",
        "gpt2.scale_in_cooldown_s=-1 is invalid: allowed is a whole number from 0 to 86400",
    ]
    # Rules across settings, of the endpoint and of its update policy, in one error too.
    with pytest.raises(ConfigError) as error:
        config(**{"gpt2.volume_size_gb": 50, "gpt2.update_strategy": "canary"})
    lines = str(error.value).splitlines()
    assert [line.split("=")[0] for line in lines] == ["gpt2.volume_size_gb", "gpt2.update_strategy"], lines


@pytest.mark.parametrize(
    ("given", "message"),
    [
        # GPU memory says nothing on vLLM, which holds its share of each GPU from its start.
        ({"gptj.gpu_memory_alarm_percent": 95}, "gptj.gpu_memory_alarm_percent=95 is invalid: allowed is unset with "
                                                "gptj.engine=vllm: it is a setting of gptj.engine=hf-toolkit"),
        # The engine's queue is published for vLLM containers alone...
        ({"gpt2.waiting_requests_alarm_threshold": 1}, "gpt2.waiting_requests_alarm_threshold=1 is invalid"),
        ({"gptj.engine": "hf-toolkit", "gptj.waiting_requests_alarm_threshold": 1},
         "gptj.waiting_requests_alarm_threshold=1 is invalid: allowed is unset with gptj.engine=hf-toolkit"),
        # ... by detailed observability, which covers real-time endpoints.
        ({"gptj.endpoint_mode": "async", "gptj.waiting_requests_alarm_threshold": 1},
         "gptj.waiting_requests_alarm_threshold=1 is invalid: allowed is unset in async mode"),
    ],
)  # fmt: skip
def test_each_engine_alarms_on_what_shows_its_pressure(given: dict[str, Any], message: str) -> None:
    """Issue 29, fault 3."""
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}"):
        config(**given)
    assert config().gptj.endpoint.alarms.waiting_requests == 1
    assert config().gptj.endpoint.alarms.gpu_memory_percent is None
    assert config(**{"gptj.engine": "hf-toolkit"}).gptj.endpoint.alarms.gpu_memory_percent == 95
    assert config(**{"gptj.endpoint_mode": "async"}).gptj.endpoint.alarms.waiting_requests is None
