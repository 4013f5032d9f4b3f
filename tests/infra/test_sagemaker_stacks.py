"""Gpt2Stack and GptjStack: the shared endpoint construct and what each stack adds."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from llm_contracts.gptj import PAYLOAD_MANIFEST
from llm_contracts.manifest import sha256_file, write_manifest
from project_config import ConfigError
from tests.infra.helpers import ROOT, Synthesized, actions_of, regional_dlc_image, resources_of

SAGEMAKER_STACKS = ["Gpt2Stack", "GptjStack"]


@pytest.fixture(scope="module")
def synth(synth: Callable[..., Synthesized]) -> Callable[..., Synthesized]:
    """GPT-J on the toolkit engine, the seed's recipe, in this module; the default engine's stack
    (vllm) is tested in tests/infra/test_gptj_engines.py."""
    return lambda **overrides: synth(**{"gptj.engine": "hf-toolkit", **overrides})


@pytest.fixture(scope="module")
def default(synth: Callable[..., Synthesized]) -> Synthesized:
    return synth()


@pytest.mark.parametrize("stack", SAGEMAKER_STACKS)
def test_one_model_config_endpoint(default: Synthesized, stack: str) -> None:
    template = default.template(stack)
    template.resource_count_is("AWS::SageMaker::Model", 1)
    template.resource_count_is("AWS::SageMaker::EndpointConfig", 1)
    template.resource_count_is("AWS::SageMaker::Endpoint", 1)
    # Physical names are left to CloudFormation.
    for type_name, name_key in [
        ("AWS::SageMaker::Model", "ModelName"),
        ("AWS::SageMaker::EndpointConfig", "EndpointConfigName"),
        ("AWS::SageMaker::Endpoint", "EndpointName"),
    ]:
        for resource in resources_of(default.template_json(stack), type_name).values():
            assert name_key not in resource["Properties"]


@pytest.mark.parametrize(("stack", "instance_type"), [("Gpt2Stack", "ml.g5.xlarge"), ("GptjStack", "ml.g4dn.xlarge")])
def test_endpoint_config_variant(default: Synthesized, stack: str, instance_type: str) -> None:
    template = default.template(stack)
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ProductionVariants": [
                Match.object_like(
                    {
                        "VariantName": "AllTraffic",
                        "InstanceType": instance_type,
                        "InitialInstanceCount": 1,
                        "ContainerStartupHealthCheckTimeoutInSeconds": Match.any_value(),
                        "ModelDataDownloadTimeoutInSeconds": Match.any_value(),
                        "ModelName": {"Fn::GetAtt": [Match.any_value(), "ModelName"]},
                    }
                )
            ]
        },
    )
    config = next(iter(resources_of(default.template_json(stack), "AWS::SageMaker::EndpointConfig").values()))
    # g4dn and g5 have NVMe instance storage: SageMaker rejects a volume size or KMS key there.
    assert "KmsKeyId" not in config["Properties"]
    assert "VolumeSizeInGB" not in config["Properties"]["ProductionVariants"][0]
    assert "InferenceAmiVersion" not in config["Properties"]["ProductionVariants"][0]


def test_inference_ami_version_reaches_the_variant(synth: Callable[..., Synthesized]) -> None:
    result = synth(**{"gpt2.inference_ami_version": "al2-ami-sagemaker-inference-gpu-3-1"})
    result.template("Gpt2Stack").has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {"ProductionVariants": [Match.object_like({"InferenceAmiVersion": "al2-ami-sagemaker-inference-gpu-3-1"})]},
    )


def test_types_without_nvme_get_an_encrypted_volume(synth: Callable[..., Synthesized]) -> None:
    result = synth(**{"gptj.instance_type": "ml.p3.2xlarge", "gptj.volume_size_gb": 60})
    template = result.template("GptjStack")
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "KmsKeyId": {"Fn::GetAtt": [Match.string_like_regexp("VolumeKey"), "Arn"]},
            "ProductionVariants": [Match.object_like({"VolumeSizeInGB": 60, "InstanceType": "ml.p3.2xlarge"})],
        },
    )


@pytest.mark.parametrize("stack", SAGEMAKER_STACKS)
def test_autoscaling_tracks_invocations_per_instance(default: Synthesized, stack: str) -> None:
    template = default.template(stack)
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {
            "ServiceNamespace": "sagemaker",
            "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
            "MinCapacity": 1,
            "MaxCapacity": Match.any_value(),
            "ResourceId": {
                "Fn::Join": [
                    "",
                    ["endpoint/", {"Fn::GetAtt": [Match.any_value(), "EndpointName"]}, "/variant/AllTraffic"],
                ]
            },
        },
    )
    target = next(iter(resources_of(default.template_json(stack), "AWS::ApplicationAutoScaling::ScalableTarget")))
    # No RoleARN: the service-linked role of Application Auto Scaling is used.
    assert "RoleARN" not in default.template_json(stack)["Resources"][target]["Properties"]
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "TargetTrackingScaling",
            "ScalingTargetId": {"Ref": target},
            "TargetTrackingScalingPolicyConfiguration": {
                "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"},
                "TargetValue": Match.any_value(),
                "ScaleInCooldown": 300,
                "ScaleOutCooldown": 60,
            },
        },
    )


def test_autoscaling_settings_reach_the_template(synth: Callable[..., Synthesized]) -> None:
    template = synth(**{"gpt2.max_capacity": 7, "gpt2.target_invocations_per_instance": 250}).template("Gpt2Stack")
    template.has_resource_properties("AWS::ApplicationAutoScaling::ScalableTarget", {"MaxCapacity": 7})
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {"TargetTrackingScalingPolicyConfiguration": Match.object_like({"TargetValue": 250})},
    )


@pytest.mark.parametrize(("stack", "latency_ms"), [("Gpt2Stack", 600), ("GptjStack", 15_000)])
def test_alarms_use_the_dimensions_sagemaker_publishes(default: Synthesized, stack: str, latency_ms: int) -> None:
    template = default.template(stack)
    dimensions = Match.array_with(
        [
            {"Name": "EndpointName", "Value": {"Fn::GetAtt": [Match.any_value(), "EndpointName"]}},
            {"Name": "VariantName", "Value": "AllTraffic"},
        ]
    )
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": "AWS/SageMaker",
            "MetricName": "ModelLatency",
            "Statistic": "Average",
            "Dimensions": dimensions,
            # ModelLatency is in microseconds.
            "Threshold": latency_ms * 1000,
            "ComparisonOperator": "GreaterThanThreshold",
        },
    )
    template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "Namespace": "AWS/SageMaker",
            "MetricName": "Invocation5XXErrors",
            "Statistic": "Sum",
            "Dimensions": dimensions,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold",
        },
    )


def _endpoint_role(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    (role,) = [
        (logical, role)
        for logical, role in resources_of(template, "AWS::IAM::Role").items()
        if role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]
        == {"Service": "sagemaker.amazonaws.com"}
    ]
    return role


def _statements_of(template: dict[str, Any], role: str) -> list[dict[str, Any]]:
    return [
        statement
        for policy in resources_of(template, "AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _role_statements(synthesized: Synthesized, stack: str) -> list[dict[str, Any]]:
    template = synthesized.template_json(stack)
    return _statements_of(template, _endpoint_role(template)[0])


def _copies(template: dict[str, Any]) -> dict[str, Any]:
    """The custom resources that copy GPT-J's payload files (not the endpoint's update check)."""
    return {k: v for k, v in resources_of(template, "Custom::AWS").items() if "copyObject" in json.dumps(v)}


def _payload_prefix(artifacts: Any) -> str:
    return sha256_file(artifacts / "gptj" / "model" / PAYLOAD_MANIFEST)


@pytest.mark.parametrize("stack", SAGEMAKER_STACKS)
def test_execution_role_is_least_privilege(default: Synthesized, stack: str, artifacts: Any) -> None:
    template = default.template_json(stack)
    logical, role = _endpoint_role(template)
    assert "ManagedPolicyArns" not in role["Properties"]
    by_action = {action: s for s in _statements_of(template, logical) for action in actions_of(s)}
    reads = {"s3:GetObject", "s3:ListBucket"} if stack == "GptjStack" else {"s3:GetObject"}
    assert set(by_action) == reads | {
        "ecr:BatchCheckLayerAvailability",
        "ecr:BatchGetImage",
        "ecr:GetDownloadUrlForLayer",
        "ecr:GetAuthorizationToken",
        "logs:CreateLogGroup",
        "logs:CreateLogStream",
        "logs:DescribeLogStreams",
        "logs:PutLogEvents",
        "cloudwatch:PutMetricData",
        "cloudwatch:DescribeAlarms",
    }
    object_arn = by_action["s3:GetObject"]["Resource"]["Fn::Join"][1]
    if stack == "GptjStack":
        # The stack's own model bucket, which holds only its payloads (an old model's instances
        # may still download the old prefix during an update); nothing in any other bucket.
        assert object_arn[1] == "/*" and "ModelFilesBucket" in object_arn[0]["Fn::GetAtt"][0]
        assert "ModelFilesBucket" in by_action["s3:ListBucket"]["Resource"]["Fn::GetAtt"][0]
    else:
        # Read of that one asset object: the key is the asset hash, not a wildcard.
        assert object_arn[-1].endswith(".gz") and "*" not in object_arn[-1]
    # Pull of that one image repository.
    assert by_action["ecr:BatchGetImage"]["Resource"] != "*"
    assert by_action["cloudwatch:PutMetricData"]["Condition"] == {
        "StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}
    }
    # SageMaker reads the states of the update's rollback alarms, which are the stack's own.
    names = {a["Properties"]["AlarmName"] for a in resources_of(template, "AWS::CloudWatch::Alarm").values()}
    described = by_action["cloudwatch:DescribeAlarms"]["Resource"]
    assert described and all(json.dumps(arn).count(":alarm:") == 1 for arn in described)
    assert {json.dumps(arn).rsplit(":alarm:", 1)[1].split('"')[0] for arn in described} <= names


def test_model_waits_for_its_role_policy_and_its_files(default: Synthesized) -> None:
    template = default.template_json("GptjStack")
    model = next(iter(resources_of(template, "AWS::SageMaker::Model").values()))
    role, _ = _endpoint_role(template)
    (policy,) = [
        k for k, v in resources_of(template, "AWS::IAM::Policy").items() if {"Ref": role} in v["Properties"]["Roles"]
    ]
    assert policy in model["DependsOn"]
    copies = set(_copies(template))
    assert copies and copies <= set(model["DependsOn"]), "SageMaker must find every file under the prefix"


def test_gpt2_image_is_built_from_the_container_folder(default: Synthesized) -> None:
    template = default.template("Gpt2Stack")
    template.has_resource_properties(
        "AWS::SageMaker::Model",
        {
            "EnableNetworkIsolation": True,
            "PrimaryContainer": Match.object_like(
                {
                    "Image": {"Fn::Sub": Match.string_like_regexp(r"dkr\.ecr\..*container-assets.*:[0-9a-f]{64}$")},
                    "ModelDataUrl": {"Fn::Sub": Match.string_like_regexp(r"^s3://cdk-.*/[0-9a-f]{64}\.gz$")},
                }
            ),
        },
    )
    images = json.loads((default.outdir / "Gpt2Stack.assets.json").read_text())["dockerImages"]
    # Staged into cdk.out, as CDK stages every asset but the payloads: the build reads that copy.
    (directory,) = [image["source"]["directory"] for image in images.values()]
    staged = default.outdir / directory
    assert (
        directory.startswith("asset.")
        and (staged / "Dockerfile").read_bytes() == (ROOT / "serving" / "gpt2" / "Dockerfile").read_bytes()
    )


def test_gpt2_image_by_uri_pulls_that_repository(synth: Callable[..., Synthesized]) -> None:
    uri = "111122223333.dkr.ecr.eu-west-1.amazonaws.com/team/gpt2-trt:1.2.3"
    result = synth(**{"gpt2.image_uri": uri})
    template = result.template("Gpt2Stack")
    template.has_resource_properties("AWS::SageMaker::Model", {"PrimaryContainer": Match.object_like({"Image": uri})})
    statements = _role_statements(result, "Gpt2Stack")
    pull = next(s for s in statements if "ecr:BatchGetImage" in actions_of(s))
    assert pull["Resource"] == {
        "Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":ecr:eu-west-1:111122223333:repository/team/gpt2-trt"]]
    }
    assert json.loads((result.outdir / "Gpt2Stack.assets.json").read_text()).get("dockerImages", {}) == {}


def test_model_data_asset_uses_the_manifest_hash(default: Synthesized, artifacts: Any) -> None:
    manifest = json.loads((artifacts / "gpt2" / "manifest.json").read_text())
    sha = manifest["files"]["model.tar.gz"]["sha256"]
    model = next(iter(resources_of(default.template_json("Gpt2Stack"), "AWS::SageMaker::Model").values()))
    # CDK keys a custom-hash asset by the sha256 of the given hash: no byte of the file is read.
    key = hashlib.sha256(sha.encode()).hexdigest()
    assert model["Properties"]["PrimaryContainer"]["ModelDataUrl"]["Fn::Sub"].endswith(f"/{key}.gz")
    asset_manifest = json.loads((default.outdir / "Gpt2Stack.assets.json").read_text())
    # A ModelAsset is published from the artifacts folder, not from a copy in cdk.out.
    assert asset_manifest["files"][key]["source"]["path"] == str(artifacts / "gpt2" / "model.tar.gz")


def test_gptj_ships_its_payload_folder_uncompressed_under_one_prefix(default: Synthesized, artifacts: Any) -> None:
    template = default.template_json("GptjStack")
    prefix = _payload_prefix(artifacts)
    model = next(iter(resources_of(template, "AWS::SageMaker::Model").values()))
    container = model["Properties"]["PrimaryContainer"]
    assert "ModelDataUrl" not in container
    source = container["ModelDataSource"]["S3DataSource"]
    assert (source["CompressionType"], source["S3DataType"]) == ("None", "S3Prefix")
    assert source["S3Uri"]["Fn::Join"][1][-1] == f"/{prefix}/"  # SageMaker wants the trailing slash

    folder = artifacts / "gptj" / "model"
    payload = json.loads((folder / PAYLOAD_MANIFEST).read_text())["files"]
    expected = {**{name: e["sha256"] for name, e in payload.items()}, PAYLOAD_MANIFEST: prefix}
    assets = json.loads((default.outdir / "GptjStack.assets.json").read_text())["files"]
    copies = {}
    for resource in _copies(template).values():
        create = json.loads(
            "".join(p if isinstance(p, str) else "TOKEN" for p in resource["Properties"]["Create"]["Fn::Join"][1])
        )
        assert create["action"] == "copyObject" and resource["Properties"]["Update"] == resource["Properties"]["Create"]
        delete = "".join(p for p in resource["Properties"]["Delete"]["Fn::Join"][1] if isinstance(p, str))
        name = create["parameters"]["Key"].removeprefix(f"{prefix}/")
        assert f'"Key":"{prefix}/{name}"' in delete and '"action":"deleteObject"' in delete
        copies[name] = create["parameters"]["CopySource"].rsplit("/", 1)[1]
    assert set(copies) == set(expected), "one copy per payload file, named as in the payload"
    for name, sha in expected.items():
        # Each file is an asset keyed by the builder's sha256 (never re-read at synthesis),
        # published from the artifacts folder itself.
        key = hashlib.sha256(sha.encode()).hexdigest()
        assert copies[name].startswith(key)
        assert assets[key]["source"]["path"] == str(folder / name)


def test_copy_role_writes_only_to_the_model_bucket(default: Synthesized) -> None:
    """Put and delete anywhere in the stack's model bucket, not only under the current prefix:
    CloudFormation deletes the old payload's copies after an update, with the new policy."""
    template = default.template_json("GptjStack")
    lambda_principal = {"Service": "lambda.amazonaws.com"}
    (copy_role,) = [
        k
        for k, v in resources_of(template, "AWS::IAM::Role").items()
        if v["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == lambda_principal
        and "ModelFiles" in k
    ]
    statements = _statements_of(template, copy_role)
    writes = [s for s in statements if "s3:PutObject" in actions_of(s)]
    assert [actions_of(s) for s in writes] == [["s3:PutObject", "s3:DeleteObject"]]
    bucket_arn, objects = writes[0]["Resource"]["Fn::Join"][1]
    assert objects == "/*" and "ModelFilesBucket" in bucket_arn["Fn::GetAtt"][0]
    reads = [s for s in statements if actions_of(s) == ["s3:GetObject"]]
    assert len(reads) == len(_copies(template))
    assert all("*" not in s["Resource"]["Fn::Join"][1][-1] for s in reads), "each asset object by its key"
    (function,) = resources_of(template, "AWS::Lambda::Function").values()
    assert function["Properties"]["Role"] == {"Fn::GetAtt": [copy_role, "Arn"]}
    # The same function (one per stack) reads the endpoint after an update, with that role.
    (describe,) = [s for s in statements if "sagemaker:DescribeEndpoint" in actions_of(s)]
    # The endpoint's ARN as SageMaker reports it (Ref): its ARNs write the name in lower case.
    (endpoint,) = resources_of(template, "AWS::SageMaker::Endpoint")
    assert describe["Resource"] == {"Ref": endpoint}
    assert "LogGroup" in function["Properties"]["LoggingConfig"]


def test_gptj_tarball_ships_as_model_data_url(synth: Callable[..., Synthesized], artifacts: Any) -> None:
    from artifacts_builder.tarball import pack_directory

    tarball = artifacts / "gptj-tarball" / "model.tar.gz"
    tarball.parent.mkdir(exist_ok=True)
    pack_directory(artifacts / "gptj" / "model", tarball)
    write_manifest(tarball.parent, "gptj", [tarball])
    template = synth(**{"gptj.model_data": str(tarball)}).template_json("GptjStack")
    container = next(iter(resources_of(template, "AWS::SageMaker::Model").values()))["Properties"]["PrimaryContainer"]
    assert "ModelDataSource" not in container and container["ModelDataUrl"]["Fn::Sub"].endswith(".gz")
    assert not _copies(template) and not resources_of(template, "AWS::S3::Bucket")


def test_payload_file_over_one_copy_fails_synthesis(
    synth_some: Callable[..., Any], tmp_path: Any, artifacts: Any
) -> None:
    import shutil

    folder = tmp_path / "art"
    shutil.copytree(artifacts, folder)
    payload = folder / "gptj" / "model"
    with open(payload / "model-00001-of-00001.safetensors", "r+b") as f:
        f.truncate(5 * 1000**3 + 1)  # sparse: nothing is written, and synthesis reads nothing
    entries = json.loads((payload / PAYLOAD_MANIFEST).read_text())
    entries["files"]["model-00001-of-00001.safetensors"]["size"] = 5 * 1000**3 + 1
    (payload / PAYLOAD_MANIFEST).write_text(json.dumps(entries))
    assert_left_out(
        synth_some,
        tmp_path,
        folder,
        r"one S3 copy takes at most 5 GB: .*rebuild it with `python -m artifacts_builder gptj`, whose "
        "--shard-size-mb",
    )


def test_a_volume_smaller_than_the_payload_fails_synthesis(
    synth: Callable[..., Synthesized], tmp_path: Any, artifacts: Any
) -> None:
    import shutil

    folder = tmp_path / "art"
    shutil.copytree(artifacts, folder)
    payload = folder / "gptj" / "model"
    with open(payload / "model-00001-of-00001.safetensors", "r+b") as f:
        f.truncate(3 * 2**30)  # sparse: 3 GiB that take no disk
    entries = json.loads((payload / PAYLOAD_MANIFEST).read_text())
    entries["files"]["model-00001-of-00001.safetensors"]["size"] = 3 * 2**30
    (payload / PAYLOAD_MANIFEST).write_text(json.dumps(entries))
    small = {"project.artifacts_dir": str(folder), "gptj.instance_type": "ml.p3.2xlarge"}
    with pytest.raises(
        ConfigError, match=r"^gptj.volume_size_gb=3 is invalid: allowed is at least 5 \(GB\): the payload files"
    ):
        synth(**small, **{"gptj.volume_size_gb": 3})
    assert synth(**small, **{"gptj.volume_size_gb": 5}).template_json("GptjStack")


@pytest.mark.parametrize("name", ["../outside.json", "/etc/passwd", "code//inference.py", "a/./b"])
def test_payload_file_name_outside_the_folder_fails_synthesis(
    synth_some: Callable[..., Any], tmp_path: Any, artifacts: Any, name: str
) -> None:
    import shutil

    folder = tmp_path / "art"
    shutil.copytree(artifacts, folder)
    manifest_path = folder / "gptj" / "model" / PAYLOAD_MANIFEST
    entries = json.loads(manifest_path.read_text())
    entries["files"][name] = {"sha256": "0" * 64, "size": 1}
    manifest_path.write_text(json.dumps(entries))
    assert_left_out(synth_some, tmp_path, folder, r"a payload file must be a relative path")


def test_payload_folder_without_manifest_names_the_fix(
    synth_some: Callable[..., Any], tmp_path: Any, artifacts: Any
) -> None:
    import shutil

    folder = tmp_path / "art"
    shutil.copytree(artifacts, folder)
    (folder / "gptj" / "model" / PAYLOAD_MANIFEST).unlink()
    assert_left_out(
        synth_some,
        tmp_path,
        folder,
        r"payload-manifest.json does not exist: .*rebuild it with `python -m artifacts_builder gptj`",
    )


def test_gptj_container_contract(default: Synthesized) -> None:
    template = default.template("GptjStack")
    template.has_resource_properties(
        "AWS::SageMaker::Model",
        {
            "PrimaryContainer": Match.object_like(
                {
                    # Exactly what the image's toolkit reads (a variable it ignores would mislead).
                    "Environment": {
                        "SAGEMAKER_PROGRAM": "inference.py",
                        "HF_TASK": "text-generation",
                        "SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS": "60",
                        "SAGEMAKER_MODEL_SERVER_WORKERS": "1",
                    },
                    "Image": regional_dlc_image(
                        "huggingface-pytorch-inference:2.6.0-transformers4.51.3-gpu-py312-cu124-ubuntu22.04"
                    ),
                }
            )
        },
    )


def test_gptj_in_a_pinned_region_gets_a_literal_image(synth: Callable[..., Synthesized]) -> None:
    result = synth(**{"project.region": "eu-west-1", "project.account": "111122223333"})
    template = result.template_json("GptjStack")
    assert "Mappings" not in template
    model = next(iter(resources_of(template, "AWS::SageMaker::Model").values()))
    image = model["Properties"]["PrimaryContainer"]["Image"]
    # The registry of eu-west-1 from the SDK's JSON, not a mapping lookup.
    assert image["Fn::Join"][1][0] == "763104351884.dkr.ecr.eu-west-1."
    assert "FindInMap" not in json.dumps(template)


@pytest.mark.parametrize("stack", SAGEMAKER_STACKS)
def test_outputs(default: Synthesized, stack: str) -> None:
    outputs = default.template(stack).find_outputs("*")
    assert {"EndpointName", "ModelDataUrl"} <= set(outputs)
    assert outputs["EndpointName"]["Value"]["Fn::GetAtt"][1] == "EndpointName"


@pytest.mark.parametrize("stack", SAGEMAKER_STACKS)
def test_tags_from_configuration(default: Synthesized, stack: str) -> None:
    Template.from_stack(default.stacks[stack]).has_resource_properties(
        "AWS::SageMaker::Endpoint", {"Tags": Match.array_with([{"Key": "project", "Value": "llm-inference-cdk"}])}
    )


def test_updates_keep_the_autoscaled_instance_count(default: Synthesized) -> None:
    for stack in SAGEMAKER_STACKS:
        default.template(stack).has_resource_properties(
            "AWS::SageMaker::Endpoint", {"RetainAllVariantProperties": True}
        )


def test_a_new_instance_type_makes_a_new_endpoint(default: Synthesized, synth: Callable[..., Synthesized]) -> None:
    """SageMaker refuses an in-place instance type change of an autoscaled variant: a new type
    must be a new endpoint (new logical id), and nothing else is replaced needlessly."""
    before = default.template_json("GptjStack")
    after = synth(**{"gptj.instance_type": "ml.g5.2xlarge"}).template_json("GptjStack")
    old, new = (
        set(resources_of(before, "AWS::SageMaker::Endpoint")),
        set(resources_of(after, "AWS::SageMaker::Endpoint")),
    )
    assert len(old) == len(new) == 1 and old != new
    for type_name in ("AWS::SageMaker::Model", "AWS::ApplicationAutoScaling::ScalableTarget", "AWS::CloudWatch::Alarm"):
        assert set(resources_of(before, type_name)) == set(resources_of(after, type_name)), type_name
    (target,) = resources_of(after, "AWS::ApplicationAutoScaling::ScalableTarget").values()
    assert next(iter(new)) in json.dumps(target["Properties"]["ResourceId"])


def test_alarms_notify_the_configured_topic(synth: Callable[..., Synthesized]) -> None:
    topic = "arn:aws:sns:eu-west-1:111122223333:oncall"
    template = synth(**{"gptj.alarm_topic_arn": topic}).template_json("GptjStack")
    alarms = resources_of(template, "AWS::CloudWatch::Alarm").values()
    assert len(alarms) == 5
    assert all(a["Properties"]["AlarmActions"] == a["Properties"]["OKActions"] == [topic] for a in alarms)
    assert not resources_of(template, "AWS::SNS::Topic"), "a given topic replaces the stack's own"
    assert template["Outputs"]["AlarmTopicArn"]["Value"] == topic


def test_alarms_notify_the_stacks_own_encrypted_topic(synth: Callable[..., Synthesized]) -> None:
    template = synth(**{"gpt2.alarm_email": "oncall@example.com"}).template_json("Gpt2Stack")
    ((topic_id, topic),) = resources_of(template, "AWS::SNS::Topic").items()
    key_id = topic["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0]
    key = resources_of(template, "AWS::KMS::Key")[key_id]["Properties"]
    assert key["EnableKeyRotation"] is True
    principal = {"Service": "cloudwatch.amazonaws.com"}
    (cloudwatch,) = [s for s in key["KeyPolicy"]["Statement"] if s["Principal"] == principal]
    assert sorted(cloudwatch["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"]
    assert set(cloudwatch["Condition"]) == {"StringEquals", "ArnLike"}  # this account's alarms only
    for alarm in resources_of(template, "AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["AlarmActions"] == alarm["Properties"]["OKActions"] == [{"Ref": topic_id}]
    (subscription,) = resources_of(template, "AWS::SNS::Subscription").values()
    assert subscription["Properties"]["Protocol"] == "email"
    assert subscription["Properties"]["Endpoint"] == "oncall@example.com"
    (policy,) = resources_of(template, "AWS::SNS::TopicPolicy").values()
    assert '"aws:SecureTransport": "false"' in json.dumps(policy)
    assert template["Outputs"]["AlarmTopicArn"]["Value"] == {"Ref": topic_id}


def test_gpt2_batch_size_must_fit_the_built_model(tmp_path: Any, synthesize_at: Callable[..., Any]) -> None:
    from llm_contracts.manifest import write_manifest
    from project_config import ConfigError
    from tests.infra.helpers import make_artifacts

    artifacts = make_artifacts(tmp_path / "artifacts")
    tar = artifacts / "gpt2" / "model.tar.gz"
    write_manifest(tar.parent, "gpt2", [tar], generation={"max_batch_size": 4})
    with pytest.raises(ConfigError, match=r"gpt2.max_batch_size=8 is invalid: .* at most 4; .*--max-batch-size 8"):
        synthesize_at(tmp_path / "out", artifacts, **{"gpt2.max_batch_size": 8})
    synthesize_at(tmp_path / "out-ok", artifacts, **{"gpt2.max_batch_size": 4})


def test_missing_gptj_payload_names_the_builder(
    synth_some: Callable[..., Any], tmp_path: Path, artifacts: Path
) -> None:
    pattern = r"gptj.model_data='.*nowhere' does not exist: build it with `python -m artifacts_builder gptj`"
    assert_left_out(synth_some, tmp_path, artifacts, pattern, **{"gptj.model_data": str(tmp_path / "nowhere")})


def assert_left_out(
    synth_some: Callable[..., Any],
    tmp_path: Path,
    artifacts: Path,
    reason: str,
    stack: str = "GptjStack",
    **overrides: Any,
) -> None:
    """`stack` alone is left out of the synthesis, for `reason`; the others are synthesized."""
    synthesized, left_out = synth_some(tmp_path / "out", artifacts, **overrides)
    assert list(left_out) == [stack] and re.search(reason, left_out[stack]), left_out
    assert set(synthesized.stacks) == {"Gpt2Stack", "GptjStack", "LlmStack", "Inf2Stack"} - {stack}
    assert not (tmp_path / "out" / f"{stack}.template.json").exists()
