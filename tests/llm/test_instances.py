"""The GPU table (llm_contracts/instances.py) against botocore's list of SageMaker hosting
instance types, and what the stacks read of it."""

from __future__ import annotations

import botocore.session
import pytest

from llm_contracts import instances


def hosting_types() -> set[str]:
    model = botocore.session.get_session().get_service_model("sagemaker")
    return set(model.shape_for("ProductionVariantInstanceType").enum)


def test_every_gpu_type_of_the_table_is_a_sagemaker_hosting_type() -> None:
    assert set(instances.gpu_instance_types()) - hosting_types() == set()


def test_every_gpu_family_sagemaker_hosts_is_described_or_named_as_not() -> None:
    """A GPU family botocore adds fails here until the table describes it (or says it cannot)."""
    families = {name.split(".")[1] for name in hosting_types()}
    gpu_like = {f for f in families if f[0] in "gp" and f not in instances.CPU_FAMILIES}
    assert gpu_like - set(instances.GPU_FAMILIES) - instances.UNDESCRIBED_GPU_FAMILIES == set()
    assert families >= instances.UNDESCRIBED_GPU_FAMILIES
    assert not instances.UNDESCRIBED_GPU_FAMILIES & set(instances.GPU_FAMILIES)


@pytest.mark.parametrize("family", sorted(instances.GPU_FAMILIES))
def test_each_family_is_complete(family: str) -> None:
    gpu = instances.GPU_FAMILIES[family]
    assert set(gpu.host_per_size) == set(gpu.gpus_per_size)
    assert set(gpu.usd_per_hour) <= set(gpu.gpus_per_size)
    assert gpu.compute_capability >= (7, 0) and gpu.architecture and gpu.gpu_memory_gib >= 16
    assert all(0 < price < 200 for price in gpu.usd_per_hour.values())


def test_what_the_stacks_and_the_alarms_read() -> None:
    assert instances.gpus("ml.g5.12xlarge") == 4 and instances.gpus("ml.p5.4xlarge") == 1
    assert instances.GPU_FAMILIES["g5"].gpus_per_size["48xlarge"] == 8
    assert instances.gpus("ml.m5.xlarge") == 0
    assert instances.price_per_hour("ml.g5.xlarge") == pytest.approx(1.4084)
    assert instances.price_per_hour("ml.p5e.48xlarge") is None  # no price in the sources
    assert instances.gpu_family("ml.g4dn.xlarge").compute_capability == (7, 5)  # type: ignore[union-attr]
    assert instances.has_nvme("ml.p5en.48xlarge")


def test_an_instance_type_knows_its_facts() -> None:
    """The value object the props and checks read: the same facts as the functions by name."""
    g5 = instances.InstanceType("ml.g5.12xlarge")
    assert (str(g5), g5.family, g5.size, g5.gpus, g5.gpu_memory_gib, g5.host) == (
        "ml.g5.12xlarge", "g5", "12xlarge", 4, 24, (48, 192),
    )  # fmt: skip
    assert g5.gpu is instances.GPU_FAMILIES["g5"] and g5.has_nvme and g5.is_accelerated and g5.size_exists
    assert g5.price_per_hour == instances.price_per_hour("ml.g5.12xlarge")
    cpu, inf2 = instances.InstanceType("ml.m5.xlarge"), instances.InstanceType("ml.inf2.xlarge")
    assert (cpu.gpus, cpu.gpu_memory_gib, cpu.host, cpu.gpu, cpu.is_accelerated) == (0, 0, None, None, False)
    assert inf2.is_neuron and inf2.is_accelerated and inf2.gpus == 0
    assert not instances.InstanceType("ml.g5.3xlarge").size_exists
    with pytest.raises(ValueError, match=r"'g5.xlarge' is not a SageMaker instance type such as ml.g5.xlarge"):
        instances.InstanceType("g5.xlarge")
