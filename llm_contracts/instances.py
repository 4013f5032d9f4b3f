"""Facts about SageMaker instance types that the constructs, the app and its checks share.

From AWS's instance type tables (SageMaker's "Instance types for hosting" and EC2's
accelerated computing instances), for the families this project's recipes use; a family
absent from a table is not checked against it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: ``ml.<family>.<size>``.
SAGEMAKER_INSTANCE = re.compile(r"^ml\.([a-z][a-z0-9-]*)\.([0-9]*xlarge|large|medium|small|metal)$")

#: Families with local NVMe instance storage: SageMaker rejects ``VolumeSizeInGB`` and
#: ``KmsKeyId`` on their variants (the instance store is encrypted by the hardware).
NVME_FAMILIES = frozenset(
    {
        "c5d", "c6id", "g4dn", "g5", "g6", "g6e", "m5d", "m6id", "p3dn",
        "p4d", "p4de", "p5", "p5e", "r5d", "r6id", "trn1", "inf2",
    }
)  # fmt: skip

#: Burstable families: SageMaker does not autoscale them.
BURSTABLE_FAMILIES = frozenset({"t2", "t3"})


@dataclass(frozen=True)
class GpuFamily:
    gpu: str
    #: Memory of one GPU, GiB.
    gpu_memory_gib: int
    #: Sizes of the family and how many GPUs each has.
    gpus_per_size: dict[str, int]


#: Families with NVIDIA GPUs.
GPU_FAMILIES: dict[str, GpuFamily] = {
    "g4dn": GpuFamily("T4", 16, {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "12xlarge": 4, "16xlarge": 1}),
    **{
        family: GpuFamily(gpu, memory, {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 1,
                                        "12xlarge": 4, "24xlarge": 4, "48xlarge": 8})
        for family, gpu, memory in (("g5", "A10G", 24), ("g6", "L4", 24), ("g6e", "L40S", 48))
    },
    "p3": GpuFamily("V100", 16, {"2xlarge": 1, "8xlarge": 4, "16xlarge": 8}),
    "p3dn": GpuFamily("V100", 32, {"24xlarge": 8}),
    "p4d": GpuFamily("A100", 40, {"24xlarge": 8}),
    "p4de": GpuFamily("A100", 80, {"24xlarge": 8}),
    "p5": GpuFamily("H100", 80, {"48xlarge": 8}),
    "p5e": GpuFamily("H200", 141, {"48xlarge": 8}),
}  # fmt: skip

#: Families TensorRT 10 still supports (Volta, the p3 families, was dropped in 10.5).
TENSORRT_FAMILIES = frozenset(GPU_FAMILIES) - {"p3", "p3dn"}


def split(instance_type: str) -> tuple[str, str]:
    """(family, size) of ``ml.<family>.<size>``; ValueError if it is not of that shape."""
    match = SAGEMAKER_INSTANCE.match(instance_type)
    if match is None:
        raise ValueError(f"{instance_type!r} is not a SageMaker instance type such as ml.g5.xlarge")
    return match[1], match[2]


def family(instance_type: str) -> str:
    return split(instance_type)[0]


def has_nvme(instance_type: str) -> bool:
    return family(instance_type) in NVME_FAMILIES


def gpus(instance_type: str) -> int:
    """NVIDIA GPUs of the instance type (0 for a type without)."""
    fam, size = split(instance_type)
    return GPU_FAMILIES[fam].gpus_per_size.get(size, 0) if fam in GPU_FAMILIES else 0


#: Families with AWS's own accelerators (Inferentia, Trainium).
NEURON_FAMILIES = frozenset({"inf1", "inf2", "trn1", "trn1n", "trn2"})


def is_accelerated(instance_type: str) -> bool:
    """Whether the instance type has GPUs or Neuron devices: scarce, and what costs."""
    return gpus(instance_type) > 0 or family(instance_type) in NEURON_FAMILIES


def size_exists(instance_type: str) -> bool:
    """False when the family is known and has no such size (ml.g5.3xlarge)."""
    fam, size = split(instance_type)
    return fam not in GPU_FAMILIES or size in GPU_FAMILIES[fam].gpus_per_size


def sizes(family_name: str) -> list[str]:
    return sorted(GPU_FAMILIES[family_name].gpus_per_size, key=lambda s: (len(s), s))
