"""Issue 38: what a container sees of its instance, and where an inference component's copies
are placed (local_aws/sagemaker/placement.py): through SageMaker's API on a local AWS, with the
echo image and AWS's vLLM image (its entrypoint's check fails before any model loads)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest

from local_aws import LocalAws
from local_aws.images.vllm_entrypoint import world_size_refusal
from local_aws.sagemaker.containers import cpu_binding
from local_aws.sagemaker.placement import Fleet, Need, Slot
from tests.local_aws.helpers import (
    ECHO_IMAGE,
    ROLE_ARN,
    client,
    component_stack,
    deploy_stack,
    failures,
    stack_status,
)

G5_12XLARGE = "ml.g5.12xlarge"  # 4 A10G GPUs, 48 vCPUs, 192 GiB (llm_contracts/instances.py)
TWO_GPUS = {"NumberOfAcceleratorDevicesRequired": 2, "NumberOfCpuCoresRequired": 4, "MinMemoryRequiredInMb": 8192}
VLLM_IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:0.11-gpu-py312"


def fleet(most: int) -> Fleet:
    return Fleet.of({
        "InstanceType": G5_12XLARGE, "InitialInstanceCount": 1,
        "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 1, "MaxInstanceCount": most},
    })  # fmt: skip


@pytest.mark.fast
def test_copies_fill_an_instance_then_a_new_one_where_managed_scaling_allows() -> None:
    two = Need.of(TWO_GPUS)
    room = fleet(most=2)
    first, second = room.place(two), room.place(two)
    assert (first, second) == (Slot(0, (0, 1), (0, 1, 2, 3), 8192), Slot(0, (2, 3), (4, 5, 6, 7), 8192))
    third = room.place(two)
    assert third == Slot(1, (0, 1), (0, 1, 2, 3), 8192) and room.instance_count == 2
    assert room.place(two) is not None and room.place(two) is None  # both instances full, no third
    # The empty instance goes once its copies do, down to MinInstanceCount (1).
    room.release(third)
    assert room.instance_count == 2
    full = fleet(most=1)
    assert full.place(two) and full.place(two) and full.place(two) is None  # waits: no second instance
    assert full.place(Need(accelerators=5)) is None  # no instance of the type holds it
    assert (
        full.never_fits(Need(accelerators=5))
        == "a copy asks for 5 accelerator devices, and an ml.g5.12xlarge instance has 4"
    )


@pytest.mark.fast
def test_memory_and_cores_bound_a_copy_as_accelerators_do() -> None:
    room = fleet(most=1)
    assert room.place(Need(memory_mb=150 * 1024)) is not None
    assert room.place(Need(memory_mb=50 * 1024)) is None  # 192 GiB on the instance
    assert room.place(Need(cores=40.5)) is not None  # 41 of the 48 vCPUs, once rounded up
    assert room.place(Need(cores=8)) is None
    assert room.place(Need(cores=7)) is not None


@pytest.mark.fast
def test_a_copys_cores_are_taken_onto_the_cpus_this_host_gives() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    assert Slot(0, (), (len(allowed) + 1,), 0).host_cpus() == (allowed[1 % len(allowed)],)
    assert set(Slot(0, (), tuple(range(48)), 0).host_cpus()) == set(allowed)
    assert cpu_binding("2", (4, 5, 9)) == "4|5" and cpu_binding("1", (4, 5, 6)) == "4-6"


@pytest.mark.fast
def test_vllm_refuses_more_ranks_than_gpus_in_its_own_words() -> None:
    ranks = {"SM_VLLM_TENSOR_PARALLEL_SIZE": "4"}
    assert world_size_refusal({**ranks, "CUDA_VISIBLE_DEVICES": "0,1,2,3"}) is None
    assert world_size_refusal(ranks) is None  # no GPU listed: not a GPU instance
    refusal = world_size_refusal({**ranks, "SM_VLLM_PIPELINE_PARALLEL_SIZE": "2", "CUDA_VISIBLE_DEVICES": "2,3"})
    assert refusal is not None and refusal.startswith(
        "World size (8) is larger than the number of available GPUs (2) in this node."
    )


def endpoint_of_components(aws: LocalAws, name: str, most: int) -> None:
    sm = client(aws, "sagemaker")
    sm.create_endpoint_config(
        EndpointConfigName=f"{name}-config",
        ExecutionRoleArn=ROLE_ARN,
        ProductionVariants=[{
            "VariantName": "AllTraffic", "InstanceType": G5_12XLARGE, "InitialInstanceCount": 1,
            "ManagedInstanceScaling": {"Status": "ENABLED", "MinInstanceCount": 1, "MaxInstanceCount": most},
        }],
    )  # fmt: skip
    sm.create_endpoint(EndpointName=name, EndpointConfigName=f"{name}-config")


def component(
    aws: LocalAws,
    name: str,
    endpoint: str,
    image: str,
    environment: dict[str, str],
    copies: int,
    requirements: dict[str, int] = TWO_GPUS,
) -> None:
    sm = client(aws, "sagemaker")
    sm.create_model(
        ModelName=f"{name}-model",
        ExecutionRoleArn=ROLE_ARN,
        PrimaryContainer={"Image": image, "Environment": environment},
    )
    sm.create_inference_component(
        InferenceComponentName=name,
        EndpointName=endpoint,
        VariantName="AllTraffic",
        Specification={
            "ModelName": f"{name}-model",
            "ComputeResourceRequirements": requirements,
            "StartupParameters": {"ContainerStartupHealthCheckTimeoutInSeconds": 60},
        },
        RuntimeConfig={"CopyCount": copies},
    )


def settled(aws: LocalAws, name: str, timeout_s: float = 60) -> dict[str, Any]:
    sm = client(aws, "sagemaker")
    # clock: a deadline, not a bound: a component settles in about a second here, and a caller
    # asserts the status it settled in, so only one that never settles reaches the deadline.
    deadline = time.monotonic() + timeout_s
    while True:
        found = sm.describe_inference_component(InferenceComponentName=name)
        if (
            found["InferenceComponentStatus"] not in ("Creating", "Updating") or time.monotonic() > deadline
        ):  # clock: above
            return dict(found)
        time.sleep(0.1)


def test_a_third_copy_of_two_gpus_waits_on_one_full_four_gpu_instance(aws: LocalAws) -> None:
    aws.reset()
    endpoint_of_components(aws, "placed", most=1)
    component(aws, "halves", "placed", ECHO_IMAGE, {}, copies=2)
    assert settled(aws, "halves")["RuntimeConfig"] == {"DesiredCopyCount": 2, "CurrentCopyCount": 2}
    runtime = client(aws, "sagemaker-runtime")
    seen = {}
    for _ in range(40):
        answer = json.loads(
            runtime.invoke_endpoint(EndpointName="placed", InferenceComponentName="halves", Body=b"{}")["Body"].read()
        )
        seen[answer["visible_devices"]] = tuple(answer["cpus"])
        if len(seen) == 2:
            break
    # Each copy its own two of the instance's four GPUs, and its four vCPUs taken onto this host's.
    assert seen == {
        "0,1": Slot(0, (0, 1), (0, 1, 2, 3), 8192).host_cpus(),
        "2,3": Slot(0, (2, 3), (4, 5, 6, 7), 8192).host_cpus(),
    }
    client(aws, "sagemaker").update_inference_component_runtime_config(
        InferenceComponentName="halves", DesiredRuntimeConfig={"CopyCount": 3}
    )
    time.sleep(1)
    # MaxInstanceCount 1: no instance to add, the third copy waits.
    found = settled(aws, "halves")
    assert found["InferenceComponentStatus"] == "InService"
    assert found["RuntimeConfig"] == {"DesiredCopyCount": 3, "CurrentCopyCount": 2}
    aws.reset()


def test_a_third_copy_of_two_gpus_gets_a_second_instance_where_managed_scaling_allows(aws: LocalAws) -> None:
    aws.reset()
    endpoint_of_components(aws, "grown", most=2)
    component(aws, "thirds", "grown", ECHO_IMAGE, {}, copies=3)
    assert settled(aws, "thirds")["RuntimeConfig"] == {"DesiredCopyCount": 3, "CurrentCopyCount": 3}
    (fleet_of,) = aws_fleets(aws).values()
    assert fleet_of.instance_count == 2
    aws.reset()


def aws_fleets(aws: LocalAws) -> dict[tuple[str, str, str], Fleet]:
    from local_aws.sagemaker.runtime import hosting_backends

    return hosting_backends[aws.account][aws.region].fleets


def test_a_copy_with_fewer_gpus_than_vllm_ranks_fails_as_the_engine_fails(aws: LocalAws) -> None:
    aws.reset()
    endpoint_of_components(aws, "ranks", most=1)
    component(aws, "tp4", "ranks", VLLM_IMAGE, {"SM_VLLM_TENSOR_PARALLEL_SIZE": "4"}, copies=1)
    found = settled(aws, "tp4")
    assert found["InferenceComponentStatus"] == "Failed"
    reason = found["FailureReason"]
    assert reason.startswith("The primary container for production variant AllTraffic did not pass the ping")
    assert "World size (4) is larger than the number of available GPUs (2) in this node." in reason
    # A copy no instance of the type could hold fails at once.
    five = {**TWO_GPUS, "NumberOfAcceleratorDevicesRequired": 5}
    component(aws, "gpus5", "ranks", ECHO_IMAGE, {}, copies=1, requirements=five)
    assert settled(aws, "gpus5")["FailureReason"].endswith("a copy asks for 5 accelerator devices, and an "
                                                           "ml.g5.12xlarge instance has 4")  # fmt: skip
    aws.reset()


def test_a_stack_whose_component_asks_for_more_ranks_than_gpus_rolls_back(aws: LocalAws) -> None:
    aws.reset()
    template: Any = component_stack("1")
    template["Resources"]["Model"]["Properties"]["PrimaryContainer"] = {
        "Image": VLLM_IMAGE, "Environment": {"SM_VLLM_TENSOR_PARALLEL_SIZE": "2"},
    }  # fmt: skip
    assert deploy_stack(aws, "ranks", template) is None  # as the CDK CLI deploys
    assert stack_status(aws, "ranks") == "ROLLBACK_COMPLETE"  # ml.g5.xlarge: one GPU a copy
    assert "World size (2) is larger than the number of available GPUs (1)" in failures(aws, "ranks")["Component"]
    aws.reset()
