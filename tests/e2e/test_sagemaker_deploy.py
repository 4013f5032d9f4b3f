"""`cdk deploy` / update / `cdk destroy` of GptjStack and Gpt2Stack against the local AWS,
checked through boto3 as a user would check them in their account."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from llm_contracts.manifest import sha256_file
from llm_inference_cdk import SageMakerEndpointProps, huggingface_inference
from local_aws import LocalAws
from local_aws.cli.cdk import Cdk
from local_aws.sagemaker.containers import running_containers
from project_config import AppConfig, HfToolkitEngine
from tests.e2e.helpers import (
    Assembly,
    alarms_reach_the_topic,
    assembly_of,
    deploy_update_destroy,
    gpt2_image,
    invoke,
    payload_files,
    prefix_files,
    retrain_gptj,
    role_statements,
    s3_object_sha256,
    update_check,
)

pytestmark = pytest.mark.e2e


def expected_container(stack: str, config: AppConfig, aws: LocalAws) -> tuple[str, dict[str, str]]:
    """The image URI and (part of) the environment the stack's settings call for."""
    if stack == "Gpt2Stack":
        return gpt2_image(aws), config.gpt2.container_environment()
    hf = config.gptj.engine
    assert isinstance(hf, HfToolkitEngine)
    dlc = huggingface_inference(
        transformers_version=hf.transformers_version, pytorch_version=hf.pytorch_version, py_version=hf.py_version
    )
    image = f"{dlc.registries[aws.region]}.dkr.ecr.{aws.region}.amazonaws.com/{dlc.repository}:{dlc.tag}"
    return image, {
        "SAGEMAKER_PROGRAM": "inference.py",
        "SAGEMAKER_MODEL_SERVER_WORKERS": str(hf.model_server_workers),
        "SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS": str(hf.model_server_timeout_s),
    }


def endpoint_settings(stack: str, config: AppConfig) -> SageMakerEndpointProps:
    return config.gpt2.endpoint if stack == "Gpt2Stack" else config.gptj.endpoint


def check_endpoint(aws: LocalAws, stack: str, assembly: Assembly) -> dict[str, Any]:
    """Every resource of the endpoint stack, as deployed; returns what later steps compare."""
    config, settings = assembly.config, endpoint_settings(stack, assembly.config)
    outputs = aws.stack_outputs(stack)
    sm = aws.client("sagemaker")
    endpoint = sm.describe_endpoint(EndpointName=outputs["EndpointName"])
    assert endpoint["EndpointStatus"] == "InService"
    endpoint_config = sm.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
    (variant,) = endpoint_config["ProductionVariants"]
    assert variant["VariantName"] == settings.variant_name
    assert variant["InstanceType"] == settings.instance_type
    assert variant["InitialInstanceCount"] == settings.instance_count
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == settings.startup_health_check_timeout_s
    assert variant["ModelDataDownloadTimeoutInSeconds"] == settings.model_data_download_timeout_s
    assert ("VolumeSizeInGB" in variant) == (settings.volume_size is not None)

    model = sm.describe_model(ModelName=variant["ModelName"])
    image, environment = expected_container(stack, config, aws)
    container = model["PrimaryContainer"]
    assert container["Image"] == image
    assert environment.items() <= container["Environment"].items()
    assert model["EnableNetworkIsolation"] is settings.enable_network_isolation
    role_name = model["ExecutionRoleArn"].rsplit("/", 1)[-1]
    role = aws.client("iam").get_role(RoleName=role_name)["Role"]
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    reads = [s for s in role_statements(aws, role_name) if "s3:GetObject" in s["Action"]]
    bucket, key = outputs["ModelDataUrl"].removeprefix("s3://").split("/", 1)
    if stack == "Gpt2Stack":
        assert container["ModelDataUrl"] == outputs["ModelDataUrl"]
        # The object the endpoint will download is, byte for byte, the file built here.
        assert s3_object_sha256(aws, outputs["ModelDataUrl"]) == sha256_file(config.gpt2.model_data)
        assert [s["Resource"] for s in reads] == [f"arn:aws:s3:::{bucket}/{key}"], "read its own model object only"
    else:
        source = container["ModelDataSource"]["S3DataSource"]
        assert source == {"S3Uri": outputs["ModelDataUrl"], "S3DataType": "S3Prefix", "CompressionType": "None"}
        # What SageMaker will copy to /opt/ml/model is, file for file and byte for byte, the payload built here.
        assert prefix_files(aws, outputs["ModelDataUrl"]) == payload_files(config.gptj.model_data)
        # The stack's own model bucket, which holds nothing but its payloads.
        assert [s["Resource"] for s in reads] == [f"arn:aws:s3:::{bucket}/*"], "read its own model bucket only"
    pulls = [s for s in role_statements(aws, role_name) if "ecr:BatchGetImage" in s["Action"]]
    repository = image.split("/", 1)[1].split(":")[0]
    assert [s["Resource"].rsplit("/", 1)[-1] for s in pulls] == [repository]

    resource_id = f"endpoint/{outputs['EndpointName']}/variant/{settings.variant_name}"
    scaling = aws.client("application-autoscaling")
    (target,) = scaling.describe_scalable_targets(ServiceNamespace="sagemaker", ResourceIds=[resource_id])[
        "ScalableTargets"
    ]
    assert target["ScalableDimension"] == "sagemaker:variant:DesiredInstanceCount"
    assert (target["MinCapacity"], target["MaxCapacity"]) == (
        settings.autoscaling.min_capacity,
        settings.autoscaling.max_capacity,
    )
    (policy,) = scaling.describe_scaling_policies(ServiceNamespace="sagemaker", ResourceId=resource_id)[
        "ScalingPolicies"
    ]
    tracked = policy["TargetTrackingScalingPolicyConfiguration"]
    assert tracked["TargetValue"] == settings.autoscaling.target_invocations_per_instance
    assert tracked["PredefinedMetricSpecification"]["PredefinedMetricType"] == "SageMakerVariantInvocationsPerInstance"

    dimensions = [
        {"Name": "EndpointName", "Value": outputs["EndpointName"]},
        {"Name": "VariantName", "Value": settings.variant_name},
    ]
    described = aws.client("cloudwatch").describe_alarms()["MetricAlarms"]
    of_endpoint = [a for a in described if sorted(a["Dimensions"], key=lambda d: d["Name"]) == dimensions]
    # The pair Application Auto Scaling makes for the target tracking policy, above the target
    # and below 90% of it.
    tracking = sorted((a["ComparisonOperator"], a["Threshold"]) for a in of_endpoint if a["AlarmName"].startswith(
        "TargetTracking-"))  # fmt: skip
    target = settings.autoscaling.target_invocations_per_instance
    assert tracking == [("GreaterThanThreshold", target), ("LessThanThreshold", target * 0.9)]
    assert len(policy["Alarms"]) == 2
    alarms = {a["MetricName"]: a for a in of_endpoint if not a["AlarmName"].startswith("TargetTracking-")}
    assert set(alarms) == {
        "ModelLatency",
        "Invocation5XXErrors",
        "InvocationModelErrors",
        "DiskUtilization",
        "GPUMemoryUtilization",
    }
    assert {a["Namespace"] for a in alarms.values()} == {"AWS/SageMaker", "/aws/sagemaker/Endpoints"}
    assert alarms["ModelLatency"]["Threshold"] == settings.alarms.latency_ms * 1000  # published in microseconds
    assert alarms["Invocation5XXErrors"]["Threshold"] == settings.alarms.errors_5xx
    alarms_reach_the_topic(aws, stack)
    return {"endpoint": outputs["EndpointName"], "model": variant["ModelName"]}


@pytest.mark.parametrize("stack", ["GptjStack", "Gpt2Stack"])
def test_deploy_update_destroy(
    bootstrapped: Cdk, local_aws: LocalAws, base: Assembly, updated: Assembly, stack: str
) -> None:
    assert endpoint_settings(stack, updated.config) != endpoint_settings(stack, base.config)
    first, after = deploy_update_destroy(
        bootstrapped, stack, base, updated, lambda assembly: check_endpoint(local_aws, stack, assembly)
    )
    assert after == first, "a scaling change updates the target in place; the endpoint stays"


def test_new_gptj_payload_moves_to_a_new_prefix_and_the_new_model_answers(
    bootstrapped: Cdk, local_aws: LocalAws, base: Assembly, e2e_artifacts: Path, tmp_path: Path
) -> None:
    """A rebuilt payload is copied under a prefix of its own, the model is replaced (SageMaker
    reads model data only when it creates a model), the endpoint switches to a container that
    serves it, and the old copies are deleted once the update has succeeded, so the bucket never
    holds more than the payload in use."""
    artifacts = Path(shutil.copytree(e2e_artifacts, tmp_path / "artifacts"))
    retrain_gptj(artifacts)
    rebuilt = assembly_of(tmp_path / "cdk.out", local_aws, artifacts)
    # Greedy decoding: the same weights give the same words, other weights other words.
    request = {"inputs": "Can you please let us know more details about your", "parameters": {"max_new_tokens": 12}}

    bootstrapped.deploy(base.path, ["GptjStack"])
    try:
        before = check_endpoint(local_aws, "GptjStack", base)
        old_url = local_aws.stack_outputs("GptjStack")["ModelDataUrl"]
        old_answer = invoke(local_aws, "GptjStack", request)
        assert invoke(local_aws, "GptjStack", request) == old_answer
        bootstrapped.deploy(rebuilt.path, ["GptjStack"])
        after = check_endpoint(local_aws, "GptjStack", rebuilt)  # the new prefix holds the new files
        new_url = local_aws.stack_outputs("GptjStack")["ModelDataUrl"]
        assert new_url != old_url and after["model"] != before["model"]
        assert after["endpoint"] == before["endpoint"], "the endpoint is updated in place"
        assert prefix_files(local_aws, old_url) == {}
        assert invoke(local_aws, "GptjStack", request) != old_answer, "the retrained model answers"
        # Through the update policy (one minute of baking, no alarm in ALARM): the endpoint runs
        # the new config, which the update check saw.
        endpoint = local_aws.client("sagemaker").describe_endpoint(EndpointName=after["endpoint"])
        assert endpoint["EndpointStatus"] == "InService" and "FailureReason" not in endpoint
        assert update_check(local_aws, "GptjStack") == endpoint["EndpointConfigName"]
        assert len(running_containers()) > 0 and {p.run_dir for p in running_containers()} == {
            running_containers()[0].run_dir
        }, "the old container was stopped"
    finally:
        bootstrapped.destroy(rebuilt.path, ["GptjStack"])
