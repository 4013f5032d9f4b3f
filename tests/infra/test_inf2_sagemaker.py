"""Inf2Stack on inf2.platform=sagemaker: the bundle's files under an S3 prefix, served by the
pinned LMI neuronx image on an ml.inf2 endpoint through SageMakerEndpoint (autoscaling, guarded
updates rolled back on the endpoint's alarms, topic, dashboard), nothing of the EC2 host; and
what synthesis refuses there."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from llm_contracts.inf2 import KNOWN_MODELS
from project_config import ConfigError, load_config
from project_config.inf2 import settings_problems
from tests.infra.helpers import Synthesized, resources_of

SAGEMAKER = {"inf2.platform": "sagemaker"}


@pytest.fixture(scope="module")
def template(synth: Callable[..., Synthesized]) -> dict[str, Any]:
    return synth(**SAGEMAKER).template_json("Inf2Stack")


def only(template: dict[str, Any], type_name: str) -> dict[str, Any]:
    (resource,) = resources_of(template, type_name).values()
    return resource["Properties"]  # type: ignore[no-any-return]


def test_the_bundle_is_served_by_the_lmi_neuronx_image_from_an_s3_prefix(template: dict[str, Any]) -> None:
    model = only(template, "AWS::SageMaker::Model")
    container = model["PrimaryContainer"]
    # The image the EC2 host runs, resolved for the region.
    assert container["Image"]["Fn::Join"][1][-1] == "/djl-inference:0.29.0-neuronx-sdk2.19.1"
    source = container["ModelDataSource"]["S3DataSource"]
    assert (source["S3DataType"], source["CompressionType"]) == ("S3Prefix", "None")
    # The stand-in is a hub bundle: the container downloads the model, so it has the network.
    assert model["EnableNetworkIsolation"] is False
    # serving.properties in the bundle holds the server's settings: no OPTION_* override.
    assert not [k for k in container.get("Environment", {}) if k.startswith("OPTION_")]


def test_the_variant_is_an_ml_inf2_type_with_sagemaker_s_longest_start(template: dict[str, Any]) -> None:
    (variant,) = only(template, "AWS::SageMaker::EndpointConfig")["ProductionVariants"]
    assert variant["InstanceType"] == "ml.inf2.48xlarge"
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 3600
    assert variant["ModelDataDownloadTimeoutInSeconds"] == 3600
    # ml.inf2 is EBS-only: an encrypted ML storage volume for the download, the split copy and graphs.
    assert variant["VolumeSizeInGB"] == 128
    assert "KmsKeyId" in only(template, "AWS::SageMaker::EndpointConfig")
    # The Neuron driver is pinned (2.19), under the image's SDK 2.19.1 runtime.
    assert variant["InferenceAmiVersion"] == "al2-ami-sagemaker-inference-neuron-2"


def test_it_scales_between_its_bounds_and_updates_roll_back_on_its_alarms(template: dict[str, Any]) -> None:
    target = only(template, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert (target["MinCapacity"], target["MaxCapacity"]) == (1, 2)
    assert target["ScalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    endpoint = only(template, "AWS::SageMaker::Endpoint")
    rollback = endpoint["DeploymentConfig"]["AutoRollbackConfiguration"]["Alarms"]
    alarms = resources_of(template, "AWS::CloudWatch::Alarm")
    metrics = {a["Properties"].get("MetricName") for a in alarms.values()}
    # No GPU on ml.inf2, and SageMaker publishes no Neuron metric: invocations, latency and disk.
    assert {"Invocation5XXErrors", "InvocationModelErrors", "ModelLatency", "DiskUtilization"} <= metrics
    assert not [m for m in metrics if m and m.startswith("GPU")]
    assert len(rollback) == 3
    assert resources_of(template, "AWS::SNS::Topic") and resources_of(template, "AWS::CloudWatch::Dashboard")


def test_nothing_of_the_ec2_host_is_made(template: dict[str, Any]) -> None:
    kinds = {r["Type"] for r in template["Resources"].values()}
    assert not {k for k in kinds if k.startswith("AWS::EC2::")}
    assert set(template["Outputs"]) >= {"EndpointName", "AlarmTopicArn", "DashboardUrl", "ImageUri"}
    assert "InstanceId" not in template["Outputs"]


def test_the_async_mode_is_an_async_endpoint(synth: Callable[..., Synthesized]) -> None:
    template = synth(**SAGEMAKER, **{"inf2.endpoint_mode": "async"}).template_json("Inf2Stack")
    config = only(template, "AWS::SageMaker::EndpointConfig")
    assert "AsyncInferenceConfig" in config
    target = only(template, "AWS::ApplicationAutoScaling::ScalableTarget")
    assert target["MinCapacity"] == 1, "from zero an instance compiles for minutes before it serves"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"inf2.instance_type": "ml.inf2.xlarge"},
            "inf2.tensor_parallel_degree=8 is invalid: ml.inf2.xlarge has only 2 NeuronCores; lower the degree to "
            "at most 2 or use ml.inf2.24xlarge or ml.inf2.48xlarge",
        ),
        (
            {"inf2.model_loading_timeout_s": 3600},
            "inf2.model_loading_timeout_s=3600 is invalid: allowed is at most 3300",
        ),
        ({"inf2.startup_health_check_timeout_s": 3601}, "inf2.startup_health_check_timeout_s=3601 is invalid"),
        (
            {"inf2.model_data_download_timeout_s": 59},
            "inf2.model_data_download_timeout_s=59 is invalid: allowed is a whole number from 60 to 3600",
        ),
        ({"inf2.volume_size_gb": 0}, "inf2.volume_size_gb=0 is invalid: allowed is a whole number from 1 to 512"),
        ({"inf2.predict_timeout_s": 120}, "inf2.predict_timeout_s=120 is invalid: allowed is at most 59"),
        ({"inf2.endpoint_mode": "inference-component"}, "inf2.endpoint_mode='inference-component' is invalid"),
        ({"inf2.volume_size_gb": 1024}, "inf2.volume_size_gb=1024 is invalid: allowed is a whole number from 1 to 512"),
        ({"inf2.vpc_cidr": "10.1.0.0/16"}, "inf2.vpc_cidr='10.1.0.0/16' is invalid: allowed is unset on"),
    ],
)
def test_synthesis_refuses_what_the_endpoint_cannot_hold(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config({**SAGEMAKER, **overrides})
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value), str(refused.value)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"inf2.tensor_parallel_degree": 1},
            "inf2.tensor_parallel_degree=1 is invalid: facebook/opt-13b needs 23.9 GiB of fp16 weights plus 1.6 GiB "
            "of KV cache (n_positions=512, batch_size=4), more than the 16 GiB of 1 NeuronCores (16 GiB each); "
            "raise the degree to 2,",
        ),
        (
            # Two NeuronCores hold the weights, not with the KV cache of 8 sequences of 2048.
            {"inf2.instance_type": "ml.inf2.8xlarge", "inf2.tensor_parallel_degree": 2, "inf2.n_positions": 2048,
             "inf2.batch_size": 8},
            "inf2.tensor_parallel_degree=2 is invalid: facebook/opt-13b needs 23.9 GiB of fp16 weights plus 12.5 GiB "
            "of KV cache (n_positions=2048, batch_size=8), more than the 32 GiB of 2 NeuronCores (16 GiB each); raise "
            "the degree to 4 on ml.inf2.24xlarge or ml.inf2.48xlarge (ml.inf2.8xlarge has 2 NeuronCores), or lower",
        ),
        (
            {"inf2.instance_type": "ml.inf2.xlarge", "inf2.tensor_parallel_degree": 2},
            "inf2.instance_type='ml.inf2.xlarge' is invalid: facebook/opt-13b needs about 28.7 GiB of host memory",
        ),
    ],
)  # fmt: skip
def test_synthesis_refuses_a_degree_the_type_cannot_hold_the_model_at(overrides: dict[str, Any], message: str) -> None:
    """The model's rules (llm_contracts/inf2.py), which the stack applies at synthesis, on the
    ml.inf2 types: the weights and KV cache per NeuronCore, the host memory of the split copy."""
    settings = load_config({**SAGEMAKER, **overrides}).inf2
    (problem,) = settings_problems(settings, KNOWN_MODELS["facebook/opt-13b"], model_id="facebook/opt-13b")
    assert problem.startswith(message) and "\n" not in problem, problem
    assert settings_problems(load_config(SAGEMAKER).inf2, KNOWN_MODELS["facebook/opt-13b"], model_id="x") == []


def test_the_ec2_keys_and_the_endpoint_keys_are_each_their_platform_s() -> None:
    with pytest.raises(ConfigError, match=r"^inf2.max_capacity=3 is invalid: allowed is unset on inf2.platform=ec2"):
        load_config({"inf2.max_capacity": 3})
    assert load_config({}).inf2.endpoint is None and load_config(SAGEMAKER).inf2.server is None


def test_a_bundle_that_downloads_its_model_cannot_run_isolated(artifacts: Path) -> None:
    from stacks.inf2_sagemaker import check_sagemaker_bundle

    settings = load_config(
        {**SAGEMAKER, "inf2.enable_network_isolation": True, "inf2.bundle": str(artifacts / "inf2" / "bundle")}
    ).inf2
    with pytest.raises(ConfigError, match=r"inf2.enable_network_isolation=True is invalid: allowed is false"):
        check_sagemaker_bundle(
            settings, KNOWN_MODELS["facebook/opt-13b"], model_id="facebook/opt-13b", ships_model=False
        )


def test_the_volume_must_hold_the_download_the_split_copy_and_the_graphs(artifacts: Path) -> None:
    from stacks.inf2_sagemaker import check_sagemaker_bundle

    settings = load_config(
        {**SAGEMAKER, "inf2.volume_size_gb": 40, "inf2.bundle": str(artifacts / "inf2" / "bundle")}
    ).inf2
    with pytest.raises(ConfigError, match=r"^inf2.volume_size_gb=40 is invalid: allowed is at least 59 "):
        check_sagemaker_bundle(
            settings, KNOWN_MODELS["facebook/opt-13b"], model_id="facebook/opt-13b", ships_model=False
        )
