"""The public SageMaker constructs, each in a bare ``Stack()`` outside this app: what they make,
what they grant, and the error of each prop they refuse."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Match, Template

from llm_contracts.aws import inference_ami_versions
from llm_contracts.manifest import write_manifest
from llm_inference_cdk import (
    AlarmProps,
    AutoscalingProps,
    ContainerImage,
    DeploymentProps,
    ModelData,
    PropError,
    S3PrefixModelData,
    SageMakerEndpoint,
    SageMakerEndpointProps,
    huggingface_inference,
)
from tests.library.helpers import IMAGE_URI, VARIANT_METRICS, endpoint


def statements(template: Template) -> list[dict[str, Any]]:
    return [
        s
        for p in template.find_resources("AWS::IAM::Policy").values()
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_endpoint_with_autoscaling_and_alarms() -> None:
    stack = Stack()
    scaling = AutoscalingProps(min_capacity=2, max_capacity=6, target_invocations_per_instance=100)
    endpoint(stack, autoscaling=scaling, alarms=AlarmProps(latency_ms=500), environment={"LOG_LEVEL": "info"})
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::SageMaker::Model",
        {
            "PrimaryContainer": {
                "Image": IMAGE_URI,
                "ModelDataUrl": "s3://my-models/gpt2/model.tar.gz",
                "Environment": {"LOG_LEVEL": "info"},
            },
            "EnableNetworkIsolation": True,
        },
    )
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ProductionVariants": [
                Match.object_like(
                    {"InstanceType": "ml.g5.xlarge", "InitialInstanceCount": 2, "VariantName": "AllTraffic"}
                )
            ]
        },
    )
    # ml.g5 has NVMe storage: no volume size and no KMS key (SageMaker rejects both there).
    config = next(iter(template.find_resources("AWS::SageMaker::EndpointConfig").values()))["Properties"]
    assert "KmsKeyId" not in config and "VolumeSizeInGB" not in config["ProductionVariants"][0]
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {"MinCapacity": 2, "MaxCapacity": 6, "ScalableDimension": "sagemaker:variant:DesiredInstanceCount"},
    )
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {"TargetTrackingScalingPolicyConfiguration": Match.object_like({"TargetValue": 100})},
    )
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    assert {a["Properties"]["MetricName"] for a in alarms.values()} == {
        "ModelLatency",
        "Invocation5XXErrors",
        "InvocationModelErrors",
        "DiskUtilization",
        "GPUMemoryUtilization",
    }
    latency = next(a["Properties"] for a in alarms.values() if a["Properties"]["MetricName"] == "ModelLatency")
    assert latency["Threshold"] == 500_000 and latency["Period"] == 60
    assert sorted(d["Name"] for d in latency["Dimensions"]) == ["EndpointName", "VariantName"]


def test_least_privilege_role_reads_its_object_and_pulls_its_repository() -> None:
    stack = Stack()
    endpoint(stack)
    granted = statements(Template.from_stack(stack))
    reads = [s for s in granted if "s3:GetObject*" in s["Action"] or s["Action"] == "s3:GetObject"]
    assert reads and all("gpt2/model.tar.gz" in json.dumps(s["Resource"]) for s in reads)
    pulls = [s for s in granted if "ecr:BatchGetImage" in s["Action"]]
    assert len(pulls) == 1 and "repository/my-model" in json.dumps(pulls[0]["Resource"])
    assert not any(
        "FullAccess" in json.dumps(r) for r in Template.from_stack(stack).find_resources("AWS::IAM::Role").values()
    )


def test_an_image_of_another_region_than_the_stacks_is_refused() -> None:
    from aws_cdk import App, Environment

    def in_region(region: str) -> Stack:
        return Stack(App(), "S", env=Environment(account="111122223333", region=region))

    # IMAGE_URI is in eu-west-1: SageMaker pulls a model's image from its own region only.
    assert endpoint(in_region("eu-west-1")).image_uri == IMAGE_URI
    assert endpoint(Stack()).image_uri == IMAGE_URI  # an environment-agnostic stack's region is unknown
    with pytest.raises(PropError) as error:
        endpoint(in_region("us-east-1"))
    assert str(error.value) == (
        f"SageMakerEndpoint: image={IMAGE_URI!r} is invalid: allowed is an ECR image of the stack's region us-east-1"
    )


def test_a_caller_supplied_role_is_used_and_granted() -> None:
    stack = Stack()
    role = iam.Role(stack, "Mine", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    bucket = s3.Bucket.from_bucket_name(stack, "Models", "my-models")
    made = SageMakerEndpoint(
        stack,
        "Endpoint",
        image=ContainerImage.from_uri(IMAGE_URI),
        model_data=ModelData.from_bucket(bucket, "a/model.tar.gz"),
        props=SageMakerEndpointProps(instance_type="ml.g5.xlarge"),
        role=role,
    )
    template = Template.from_stack(stack)
    assert made.role is role
    sagemaker_roles = [
        r for r in template.find_resources("AWS::IAM::Role").values() if "sagemaker.amazonaws.com" in json.dumps(r)
    ]
    assert len(sagemaker_roles) == 1  # no execution role of its own
    model = next(iter(template.find_resources("AWS::SageMaker::Model").values()))
    assert model["Properties"]["ExecutionRoleArn"] == {
        "Fn::GetAtt": [stack.get_logical_id(role.node.default_child), "Arn"]
    }
    assert any("ecr:BatchGetImage" in s["Action"] for s in statements(template))


def test_grant_invoke_names_this_endpoint_alone() -> None:
    stack = Stack()
    made = endpoint(stack)
    caller = iam.Role(stack, "Caller", assumed_by=iam.AccountRootPrincipal())
    made.grant_invoke(caller)
    (grant,) = [s for s in statements(Template.from_stack(stack)) if s["Action"] == "sagemaker:InvokeEndpoint"]
    # The endpoint's own ARN as SageMaker reports it (Ref): SageMaker writes the generated,
    # mixed-case name in lower case in its ARNs, and IAM compares ARNs case-sensitively, so an
    # ARN formatted from the name would deny every call.
    (endpoint_id,) = Template.from_stack(stack).find_resources("AWS::SageMaker::Endpoint")
    assert grant["Resource"] == {"Ref": endpoint_id} == stack.resolve(made.endpoint_arn)


#: The IAM action AWS authorizes each synchronous SageMaker runtime call with (Service Authorization
#: Reference for SageMaker, and the InvokeEndpointWithResponseStream API reference: "the same
#: permission as InvokeEndpoint"): there is no sagemaker:InvokeEndpointWithResponseStream action.
RUNTIME_ACTIONS = {
    "InvokeEndpoint": "sagemaker:InvokeEndpoint",
    "InvokeEndpointWithResponseStream": "sagemaker:InvokeEndpoint",
}


@pytest.mark.parametrize("operation", sorted(RUNTIME_ACTIONS))
def test_grant_invoke_covers_each_synchronous_runtime_call(operation: str) -> None:
    import botocore.session

    # The operation is one the runtime API has (botocore's sagemaker-runtime model).
    runtime = botocore.session.get_session().get_service_model("sagemaker-runtime")
    assert operation in runtime.operation_names
    stack = Stack()
    made = endpoint(stack)
    caller = iam.Role(stack, "Caller", assumed_by=iam.AccountRootPrincipal())
    made.grant_invoke(caller)
    granted = [
        s
        for s in statements(Template.from_stack(stack))
        if s["Effect"] == "Allow" and RUNTIME_ACTIONS[operation] in _actions(s)
    ]
    assert [s["Resource"] for s in granted] == [stack.resolve(made.endpoint_arn)]


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


@pytest.mark.parametrize(("method", "namespace", "name", "statistic"), VARIANT_METRICS)
def test_metrics_carry_the_dimensions_sagemaker_publishes(
    method: str, namespace: str, name: str, statistic: str
) -> None:
    stack = Stack()
    metric = getattr(endpoint(stack), method)()
    assert (metric.namespace, metric.metric_name, metric.statistic) == (namespace, name, statistic)
    assert set(metric.dimensions) == {"EndpointName", "VariantName"}
    assert metric.period.to_seconds() == 60


def test_autoscaling_and_alarms_can_be_added_later_and_once() -> None:
    stack = Stack()
    made = endpoint(stack, initial_instance_count=2)
    topic = sns.Topic(stack, "Pager")
    made.auto_scale_instance_count(AutoscalingProps(min_capacity=1, max_capacity=3, target_invocations_per_instance=50))
    made.add_alarms(AlarmProps(), topic=topic)
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", 1)
    alarms = template.find_resources("AWS::CloudWatch::Alarm").values()
    assert len(alarms) == 4  # no latency threshold: 5xx, model errors, disk, GPU memory
    for alarm in alarms:
        assert (
            alarm["Properties"]["AlarmActions"]
            == alarm["Properties"]["OKActions"]
            == [{"Ref": stack.get_logical_id(topic.node.default_child)}]
        )
    with pytest.raises(ValueError, match="autoscaling is already configured"):
        made.auto_scale_instance_count(AutoscalingProps(max_capacity=3, target_invocations_per_instance=50))
    with pytest.raises(
        PropError, match=r"min_capacity=3 is invalid: allowed is at most the initial instance count \(2\)"
    ):
        endpoint(Stack(), initial_instance_count=2).auto_scale_instance_count(
            AutoscalingProps(min_capacity=3, max_capacity=4, target_invocations_per_instance=50)
        )


def test_volume_and_key_on_a_family_without_nvme() -> None:
    stack = Stack()
    endpoint(stack, instance_type="ml.p3.2xlarge", volume_size_gb=100)
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {"ProductionVariants": [Match.object_like({"VolumeSizeInGB": 100})], "KmsKeyId": Match.any_value()},
    )
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    # Grants on the key only for the AWS services that attach the volume.
    granting = [s for s in statements(template) if "kms:CreateGrant" in json.dumps(s["Action"])]
    assert [s["Condition"] for s in granting] == [{"Bool": {"kms:GrantIsForAWSResource": True}}]


def test_uncompressed_prefix_of_the_callers_bucket() -> None:
    stack = Stack()
    bucket = s3.Bucket.from_bucket_name(stack, "Models", "my-models")
    SageMakerEndpoint(
        stack,
        "Endpoint",
        image=ContainerImage.from_uri(IMAGE_URI),
        model_data=ModelData.from_s3_prefix(bucket, "gptj/v1/"),
        props=SageMakerEndpointProps(instance_type="ml.g5.2xlarge"),
    )
    template = Template.from_stack(stack)
    template.has_resource_properties(
        "AWS::SageMaker::Model",
        {
            "PrimaryContainer": Match.object_like(
                {
                    "ModelDataSource": {
                        "S3DataSource": {
                            "S3Uri": "s3://my-models/gptj/v1/",
                            "S3DataType": "S3Prefix",
                            "CompressionType": "None",
                        }
                    }
                }
            )
        },
    )
    reads = [s for s in statements(template) if "s3:GetObject*" in s["Action"]]
    assert reads and "gptj/v1/*" in json.dumps(reads[0]["Resource"])


def test_payload_folder_copied_under_a_prefix(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    (folder / "code").mkdir(parents=True)
    (folder / "weights.safetensors").write_bytes(b"w" * 64)
    (folder / "code" / "inference.py").write_text("# handler\n")
    write_manifest(
        folder,
        "payload",
        {"weights.safetensors": folder / "weights.safetensors", "code/inference.py": folder / "code/inference.py"},
        name="payload-manifest.json",
    )
    stack = Stack(App(), "S")
    data = S3PrefixModelData(stack, "Files", folder=folder)
    SageMakerEndpoint(
        stack,
        "Endpoint",
        image=ContainerImage.from_uri(IMAGE_URI),
        model_data=data,
        props=SageMakerEndpointProps(instance_type="ml.g5.xlarge"),
    )
    template = Template.from_stack(stack)
    copies = {k: c for k, c in template.find_resources("Custom::AWS").items() if "copyObject" in json.dumps(c)}
    keys = {
        re.search(r'"Key":"[0-9a-f]{64}/([^"]+)"', json.dumps(c["Properties"]["Create"]).replace("\\", "")).group(1)
        for c in copies.values()
    }
    assert keys == {"weights.safetensors", "code/inference.py", "payload-manifest.json"}
    template.has_resource_properties("AWS::S3::Bucket", {"BucketEncryption": Match.any_value()})
    # SageMaker reads the prefix when it creates the model: every copy must be done first.
    model = next(iter(template.find_resources("AWS::SageMaker::Model").values()))
    assert set(copies) <= set(model["DependsOn"])


def test_deep_learning_container_resolves_per_region() -> None:
    stack = Stack()
    image = huggingface_inference(transformers_version="4.51.3", pytorch_version="2.6.0", py_version="py312")
    endpoint_with_dlc = SageMakerEndpoint(
        stack,
        "Endpoint",
        image=ContainerImage.from_dlc(image),
        model_data=ModelData.from_bucket(s3.Bucket.from_bucket_name(stack, "B", "models-b"), "m.tar.gz"),
        props=SageMakerEndpointProps(instance_type="ml.g5.xlarge"),
    )
    template = Template.from_stack(stack)
    assert len(template.find_mappings("*")) == 1  # one registry per region, looked up on AWS::Region
    assert "Fn::FindInMap" in json.dumps(stack.resolve(endpoint_with_dlc.image_uri))


# --- every prop the constructs refuse ---------------------------------------------------------

SCALING = {"max_capacity": 4, "target_invocations_per_instance": 10}
REFUSED = [
    (
        AutoscalingProps,
        {"min_capacity": 5, "max_capacity": 2, "target_invocations_per_instance": 10},
        r"max_capacity=2 is invalid: allowed is at least min_capacity \(5\)",
    ),
    (
        AutoscalingProps,
        {**SCALING, "target_invocations_per_instance": 0},
        r"target_invocations_per_instance=0 is invalid: allowed is a whole number from 1",
    ),
    (AutoscalingProps, {**SCALING, "min_capacity": 0}, r"min_capacity=0 is invalid"),
    (AutoscalingProps, {**SCALING, "scale_in_cooldown_s": -1}, r"scale_in_cooldown_s=-1"),
    (AlarmProps, {"period_s": 90}, r"period_s=90 is invalid: allowed is a multiple of 60"),
    (AlarmProps, {"period_s": 60, "evaluation_periods": 100, "latency_ms": 0}, r"latency_ms=0"),
    (
        AlarmProps,
        {"period_s": 7200, "evaluation_periods": 100},
        r"evaluation_periods=100 is invalid: allowed is at most 84 with period_s=7200",
    ),
    (
        SageMakerEndpointProps,
        {"instance_type": "g5.xlarge"},
        r"instance_type='g5.xlarge' is invalid: allowed is a SageMaker instance type",
    ),
    (
        SageMakerEndpointProps,
        {"instance_type": "ml.g5.3xlarge"},
        r"instance_type='ml.g5.3xlarge' is invalid: allowed is a size of ml.g5: xlarge, 2xlarge",
    ),
    (
        SageMakerEndpointProps,
        {"instance_type": "ml.g5.xlarge", "volume_size_gb": 50},
        r"volume_size_gb=50 is invalid: allowed is unset for ml.g5.xlarge: its family has NVMe",
    ),
    (
        SageMakerEndpointProps,
        {"instance_type": "ml.g5.xlarge", "initial_instance_count": 9, "autoscaling": AutoscalingProps(**SCALING)},
        r"initial_instance_count=9 is invalid: allowed is between min_capacity \(1\) and max_capacity \(4\)",
    ),
    (
        SageMakerEndpointProps,
        {"instance_type": "ml.g5.xlarge", "initial_instance_count": 0},
        r"initial_instance_count=0",
    ),
    (
        SageMakerEndpointProps,
        {"instance_type": "ml.t2.medium", "autoscaling": AutoscalingProps(**SCALING)},
        r"instance_type='ml.t2.medium' is invalid: allowed is a type that is not burstable",
    ),
    (
        SageMakerEndpointProps,
        {"instance_type": "ml.g5.xlarge", "startup_health_check_timeout_s": 30},
        r"startup_health_check_timeout_s=30 is invalid: allowed is a whole number from 60 to 3600",
    ),
    (
        SageMakerEndpointProps,
        {"instance_type": "ml.g5.xlarge", "environment": {"BAD-NAME": "x"}},
        r"environment=.* is invalid: allowed is at most 100 environment variable names",
    ),
    (
        SageMakerEndpointProps,
        {"instance_type": "ml.g5.xlarge", "inference_ami_version": "latest"},
        r"inference_ami_version='latest'",
    ),
    (
        SageMakerEndpointProps,
        {"instance_type": "ml.g5.xlarge", "inference_ami_version": "al2-ami-sagemaker-inference-gpu-9"},
        r"inference_ami_version='al2-ami-sagemaker-inference-gpu-9' is invalid: allowed is one of "
        r"al2-ami-sagemaker-inference-gpu-2, .*al2023-ami-sagemaker-inference-gpu-4-1 \(botocore's SageMaker model\)",
    ),
    (
        SageMakerEndpointProps,
        {"instance_type": "ml.g5.xlarge", "inference_ami_version": "al2-ami-sagemaker-inference-neuron-2"},
        r"inference_ami_version='al2-ami-sagemaker-inference-neuron-2' is invalid: allowed is an AMI for "
        r"ml.g5.xlarge: al2-ami-sagemaker-inference-gpu-2, ",
    ),
    (
        SageMakerEndpointProps,
        {"instance_type": "ml.inf2.xlarge", "inference_ami_version": "al2023-ami-sagemaker-inference-gpu-4-1"},
        r"inference_ami_version='al2023-ami-sagemaker-inference-gpu-4-1' is invalid: allowed is an AMI for "
        r"ml.inf2.xlarge: al2-ami-sagemaker-inference-neuron-2$",
    ),
    (SageMakerEndpointProps, {"instance_type": "ml.g5.xlarge", "variant_name": "-x"}, r"variant_name='-x'"),
    (
        SageMakerEndpointProps,
        {"instance_type": "ml.g5.xlarge", "enable_network_isolation": "yes"},
        r"enable_network_isolation='yes' is invalid: allowed is true or false",
    ),
]


def test_every_inference_ami_botocore_lists_is_accepted() -> None:
    """The accepted AMIs are botocore's enum, read from its model (not a list of ours)."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    listed = model.shape_for("ProductionVariantInferenceAmiVersion").enum
    assert "al2023-ami-sagemaker-inference-gpu-4-1" in listed
    assert inference_ami_versions()["al2023-ami-sagemaker-inference-gpu-4-1"] == "13.0"
    assert inference_ami_versions()["al2-ami-sagemaker-inference-gpu-3-1"] == "12.4"
    for ami in listed:
        instance_type = "ml.inf2.xlarge" if "-neuron-" in ami else "ml.g5.xlarge"
        props = SageMakerEndpointProps(instance_type=instance_type, inference_ami_version=ami)
        assert props.inference_ami_version == ami


@pytest.mark.parametrize(("cls", "given", "message"), REFUSED, ids=[f"{c.__name__}-{m[:30]}" for c, _, m in REFUSED])
def test_each_refused_prop_names_itself_its_value_and_what_is_allowed(
    cls: type, given: dict[str, Any], message: str
) -> None:
    with pytest.raises(PropError, match=rf"^{cls.__name__}: {message}"):
        cls(**given)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: ContainerImage.from_uri("docker.io/library/model:1"),
            r"uri='docker.io/library/model:1' is invalid: allowed is an ECR image URI",
        ),
        (
            lambda: ModelData.from_bucket(s3.Bucket.from_bucket_name(Stack(), "B", "models-b"), "model.zip"),
            r"key='model.zip' is invalid: allowed is the key of a gzipped tar",
        ),
        (
            lambda: ModelData.from_s3_prefix(s3.Bucket.from_bucket_name(Stack(), "B", "models-b"), "models/gptj"),
            r"prefix='models/gptj' is invalid: allowed is a key prefix ending in /",
        ),
    ],
)
def test_image_and_model_data_refuse_what_sagemaker_cannot_read(make: Any, message: str) -> None:
    with pytest.raises(PropError, match=message):
        make()


def test_the_former_name_endpoint_props_still_works_and_warns() -> None:
    import llm_inference_cdk
    from llm_inference_cdk import endpoint_props

    for module in (llm_inference_cdk, endpoint_props):
        with pytest.warns(DeprecationWarning, match=r"EndpointProps is deprecated: use SageMakerEndpointProps"):
            old = module.EndpointProps  # type: ignore[attr-defined]
        assert old is SageMakerEndpointProps
    with pytest.warns(DeprecationWarning):
        from llm_inference_cdk import EndpointProps  # type: ignore[attr-defined]
    stack = Stack()
    made = endpoint(stack, EndpointProps)
    Template.from_stack(stack).resource_count_is("AWS::SageMaker::Endpoint", 1)
    assert made.endpoint_name
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchProps'"):
        _ = llm_inference_cdk.NoSuchProps  # type: ignore[attr-defined]


def test_the_props_class_is_exported_under_the_name_of_its_construct() -> None:
    import llm_inference_cdk

    assert "SageMakerEndpointProps" in llm_inference_cdk.__all__
    assert "EndpointProps" not in llm_inference_cdk.__all__


def test_every_refused_prop_is_reported_together_one_line_each() -> None:
    with pytest.raises(PropError) as error:
        SageMakerEndpointProps(
            instance_type="ml.g5.xlarge", initial_instance_count=0, variant_name="-x", enable_network_isolation="yes"
        )
    assert str(error.value).splitlines() == [
        "SageMakerEndpointProps: initial_instance_count=0 is invalid: allowed is a whole number from 1 to 100, "
        "or unset",
        "SageMakerEndpointProps: enable_network_isolation='yes' is invalid: allowed is true or false",
        "SageMakerEndpointProps: variant_name='-x' is invalid: allowed is 1 to 63 letters, digits and hyphens, "
        "not starting with one",
    ]
    assert [p.prop for p in error.value.problems] == [
        "initial_instance_count",
        "enable_network_isolation",
        "variant_name",
    ]
    # Rules across props, the props' own and their parts', are reported together as well.
    with pytest.raises(PropError) as error:
        SageMakerEndpointProps(
            instance_type="ml.g5.xlarge",
            volume_size_gb=50,
            deployment=DeploymentProps(strategy="canary"),
            alarms=AlarmProps(period_s=60, evaluation_periods=20),
        )
    assert [(p.owner, p.prop) for p in error.value.problems] == [
        ("SageMakerEndpointProps", "volume_size_gb"),
        ("DeploymentProps", "strategy"),
        ("DeploymentProps", "wait_interval_s"),
    ]
    assert len(str(error.value).splitlines()) == 3


def test_a_valid_endpoint_props_builds_in_a_bare_stack_after_its_checks() -> None:
    stack = Stack()
    endpoint(stack, volume_size_gb=None, variant_name="Blue")
    Template.from_stack(stack).has_resource_properties(
        "AWS::SageMaker::EndpointConfig", {"ProductionVariants": [Match.object_like({"VariantName": "Blue"})]}
    )


def test_the_endpoint_shows_what_a_user_needs_read_only_and_no_props() -> None:
    stack = Stack()
    made = endpoint(stack, variant_name="Blue", initial_instance_count=2)
    assert not hasattr(made, "props")
    assert (made.instance_type, made.variant_name, made.instance_count) == ("ml.g5.xlarge", "Blue", 2)
    assert (made.mode, made.deployment_strategy) == ("realtime", "rolling")
    endpoint_resource = next(iter(Template.from_stack(stack).find_resources("AWS::SageMaker::Endpoint")))
    assert stack.resolve(made.endpoint_arn) == {"Ref": endpoint_resource}
    assert stack.resolve(made.endpoint_name) == {"Fn::GetAtt": [endpoint_resource, "EndpointName"]}
    for name in ("endpoint_name", "endpoint_arn", "variant_name", "instance_type", "mode", "deployment_strategy"):
        with pytest.raises(AttributeError):
            setattr(made, name, "other")
