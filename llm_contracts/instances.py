"""Facts about SageMaker instance types that the constructs, the app and its checks share.

From AWS's instance type tables (SageMaker's "Instance types for hosting" and EC2's
accelerated computing instances), for the families this project's recipes use; a family
absent from a table is not checked against it. :class:`InstanceType` is one type with its
facts; the functions of one fact by name serve code that holds the name alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: ``ml.<family>.<size>``.
SAGEMAKER_INSTANCE = re.compile(r"^ml\.([a-z][a-z0-9-]*)\.([0-9]*xlarge|large|medium|small|metal)$")

#: Families with local NVMe instance storage: SageMaker rejects ``VolumeSizeInGB`` and
#: ``KmsKeyId`` on their variants (the instance store is encrypted by the hardware). Not inf2:
#: its types are EBS-only (EC2's Inf2 page), and Hugging Face's SageMaker examples on ml.inf2 set
#: the volume's size; AWS's large-model page asks for a larger volume on instances "without a
#: local disk" (sagemaker/latest/dg/large-model-inference-hosting.html).
NVME_FAMILIES = frozenset(
    {
        "c5d", "c6id", "g4dn", "g5", "g6", "g6e", "m5d", "m6id", "p3dn",
        "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "r5d", "r6id", "trn1",
    }
)  # fmt: skip

#: Burstable families: SageMaker does not autoscale them.
BURSTABLE_FAMILIES = frozenset({"t2", "t3"})


@dataclass(frozen=True)
class GpuFamily:
    gpu: str
    #: Memory of one GPU, GiB: the card's nominal size (CUDA reports a few percent less).
    gpu_memory_gib: int
    #: Sizes of the family and how many GPUs each has.
    gpus_per_size: dict[str, int]
    #: Sizes and (vCPUs, memory GiB) of each.
    host_per_size: dict[str, tuple[int, int]]
    #: The GPU's CUDA compute capability (NVIDIA's CUDA GPUs table): what a kernel, a dtype or a
    #: quantization needs (bfloat16 from 8.0).
    compute_capability: tuple[int, int] = (0, 0)
    #: The GPU's architecture, by NVIDIA's name.
    architecture: str = ""
    #: On-demand price of one instance of each size for SageMaker real-time inference in
    #: us-east-1, USD per hour (:data:`PRICE_SOURCE`); a size without a price is not in the sources.
    usd_per_hour: dict[str, float] = field(default_factory=dict)


_G4DN_HOST = {"xlarge": (4, 16), "2xlarge": (8, 32), "4xlarge": (16, 64), "8xlarge": (32, 128),
              "12xlarge": (48, 192), "16xlarge": (64, 256)}  # fmt: skip
_G5_HOST = {**_G4DN_HOST, "24xlarge": (96, 384), "48xlarge": (192, 768)}
_G6E_HOST = {size: (cpus, memory * 2) for size, (cpus, memory) in _G5_HOST.items()}
_G5_GPUS = {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 1, "12xlarge": 4, "24xlarge": 4,
            "48xlarge": 8}  # fmt: skip

#: Where the prices are from: AWS's Price List API (``AmazonSageMaker`` offer, us-east-1, the
#: ``USE1-Host:ml.<type>`` rows of real-time inference), as copied by aws-samples/
#: foundation-model-benchmarking-tool (``fmbench/configs/pricing_fallback.yml``, 2025: g4dn, g5,
#: g6, p3.2xlarge, p4d, p5) and by public cost notes quoting the same offer (2026: g6.xlarge,
#: g6.4xlarge, g6.8xlarge, g6e, g5.16xlarge); p3.8xlarge and p3.16xlarge from
#: aws.amazon.com/sagemaker/pricing as tabulated in goerlitz/nlp-classification. Not rechecked
#: since (this project is built offline): a price here is for choosing between types, not a bill.
PRICE_SOURCE = "SageMaker real-time inference, on-demand, us-east-1 (AWS Price List API, USE1-Host rows)"

#: Families with NVIDIA GPUs, from EC2's instance type pages (aws.amazon.com/ec2/instance-types/
#: g4, g5, g6, g6e, p3, p4, p5, p6: GPUs, GPU memory and host of each size) and NVIDIA's CUDA GPUs
#: table (compute capability). tests/llm/test_instances.py checks every type against botocore's
#: list of SageMaker hosting instance types (ProductionVariantInstanceType), which has no p3dn.
GPU_FAMILIES: dict[str, GpuFamily] = {
    "g4dn": GpuFamily("T4", 16, {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "12xlarge": 4, "16xlarge": 1},
                      _G4DN_HOST, (7, 5), "Turing",
                      {"xlarge": 0.7364, "2xlarge": 0.94, "4xlarge": 1.505, "8xlarge": 2.72, "12xlarge": 4.89,
                       "16xlarge": 5.44}),
    "g5": GpuFamily("A10G", 24, _G5_GPUS, _G5_HOST, (8, 6), "Ampere",
                    {"xlarge": 1.4084, "2xlarge": 1.515, "4xlarge": 2.03, "8xlarge": 3.06, "16xlarge": 5.12,
                     "12xlarge": 7.09, "24xlarge": 10.18, "48xlarge": 20.36}),
    "g6": GpuFamily("L4", 24, _G5_GPUS, _G5_HOST, (8, 9), "Ada Lovelace",
                    {"xlarge": 1.1267, "2xlarge": 1.222, "4xlarge": 1.654, "8xlarge": 2.518, "16xlarge": 4.246,
                     "12xlarge": 5.752, "24xlarge": 8.344, "48xlarge": 16.688}),
    "g6e": GpuFamily("L40S", 48, _G5_GPUS, _G6E_HOST, (8, 9), "Ada Lovelace",
                     {"xlarge": 2.6054, "2xlarge": 2.8026, "4xlarge": 3.7553, "8xlarge": 5.6607, "12xlarge": 13.1158,
                      "24xlarge": 18.832, "48xlarge": 37.664}),
    "p3": GpuFamily("V100", 16, {"2xlarge": 1, "8xlarge": 4, "16xlarge": 8},
                    {"2xlarge": (8, 61), "8xlarge": (32, 244), "16xlarge": (64, 488)}, (7, 0), "Volta",
                    {"2xlarge": 3.825, "8xlarge": 14.688, "16xlarge": 28.152}),
    "p4d": GpuFamily("A100", 40, {"24xlarge": 8}, {"24xlarge": (96, 1152)}, (8, 0), "Ampere", {"24xlarge": 37.688}),
    "p4de": GpuFamily("A100", 80, {"24xlarge": 8}, {"24xlarge": (96, 1152)}, (8, 0), "Ampere"),
    "p5": GpuFamily("H100", 80, {"4xlarge": 1, "48xlarge": 8}, {"4xlarge": (16, 256), "48xlarge": (192, 2048)},
                    (9, 0), "Hopper", {"48xlarge": 113.068}),
    "p5e": GpuFamily("H200", 141, {"48xlarge": 8}, {"48xlarge": (192, 2048)}, (9, 0), "Hopper"),
    "p5en": GpuFamily("H200", 141, {"48xlarge": 8}, {"48xlarge": (192, 2048)}, (9, 0), "Hopper"),
    "p6-b200": GpuFamily("B200", 180, {"48xlarge": 8}, {"48xlarge": (192, 2048)}, (10, 0), "Blackwell"),
}  # fmt: skip
#: GPU families of botocore's hosting instance types that the table above does not describe (no
#: source for their GPUs here): a stack that needs GPU facts refuses them by name.
UNDESCRIBED_GPU_FAMILIES = frozenset({"g7", "g7e", "p2", "p6-b300", "p6e-gb200"})


def gpu_family(instance_type: str) -> GpuFamily | None:
    """The GPU facts of `instance_type`'s family; None for a family without NVIDIA GPUs here."""
    return InstanceType(instance_type).gpu


def price_per_hour(instance_type: str) -> float | None:
    """USD per hour of one instance (:data:`PRICE_SOURCE`); None where the sources give none."""
    return InstanceType(instance_type).price_per_hour


def gpu_instance_types() -> list[str]:
    """Every ``ml.`` type of :data:`GPU_FAMILIES`."""
    return [f"ml.{name}.{size}" for name, gpu in GPU_FAMILIES.items() for size in gpu.gpus_per_size]


def host(instance_type: str) -> tuple[int, int] | None:
    """(vCPUs, memory GiB) of a GPU instance type; None for a type this module has no facts of."""
    return InstanceType(instance_type).host


#: Families TensorRT 10 still supports (Volta, the p3 families, was dropped in 10.5) and the GPT-2
#: recipe was checked for.
TENSORRT_FAMILIES = frozenset({"g4dn", "g5", "g6", "g6e", "p4d", "p4de", "p5", "p5e"})


def split(instance_type: str) -> tuple[str, str]:
    """(family, size) of ``ml.<family>.<size>``; ValueError if it is not of that shape."""
    match = SAGEMAKER_INSTANCE.match(instance_type)
    if match is None:
        raise ValueError(f"{instance_type!r} is not a SageMaker instance type such as ml.g5.xlarge")
    return match[1], match[2]


#: Families with AWS's own accelerators (Inferentia, Trainium).
NEURON_FAMILIES = frozenset({"inf1", "inf2", "trn1", "trn1n", "trn2"})


@dataclass(frozen=True)
class InstanceType:
    """A SageMaker instance type and what the tables above know of it, looked up in one place:
    a template holds the name alone (:attr:`name`, also ``str()``), and every check and count
    reads the same facts from here rather than from the tables again."""

    #: ``ml.<family>.<size>``, as SageMaker names it.
    name: str
    family: str = field(init=False)
    size: str = field(init=False)

    def __post_init__(self) -> None:
        fam, size = split(self.name)  # ValueError, naming the value, for another shape
        object.__setattr__(self, "family", fam)
        object.__setattr__(self, "size", size)

    def __str__(self) -> str:
        return self.name

    @property
    def gpu(self) -> GpuFamily | None:
        """The GPU facts of the family; None for a family without NVIDIA GPUs here."""
        return GPU_FAMILIES.get(self.family)

    @property
    def gpus(self) -> int:
        """NVIDIA GPUs of the type (0 for a type without, or a size the table lacks)."""
        return self.gpu.gpus_per_size.get(self.size, 0) if self.gpu is not None else 0

    @property
    def gpu_memory_gib(self) -> int:
        """Memory of one of its GPUs, GiB (0 without GPUs)."""
        return self.gpu.gpu_memory_gib if self.gpu is not None else 0

    @property
    def host(self) -> tuple[int, int] | None:
        """(vCPUs, memory GiB) of a GPU type; None for a type this module has no facts of."""
        return self.gpu.host_per_size.get(self.size) if self.gpu is not None else None

    @property
    def price_per_hour(self) -> float | None:
        """USD per hour of one instance (:data:`PRICE_SOURCE`); None where the sources give none."""
        return self.gpu.usd_per_hour.get(self.size) if self.gpu is not None else None

    @property
    def has_nvme(self) -> bool:
        return self.family in NVME_FAMILIES

    @property
    def is_neuron(self) -> bool:
        return self.family in NEURON_FAMILIES

    @property
    def is_accelerated(self) -> bool:
        """Whether the type has GPUs or Neuron devices: scarce, and what costs."""
        return self.gpus > 0 or self.is_neuron

    @property
    def size_exists(self) -> bool:
        """False when the family is known and has no such size (ml.g5.3xlarge)."""
        return self.gpu is None or self.size in self.gpu.gpus_per_size


# The functions below are the value object's facts by name, for code that holds a string.


def family(instance_type: str) -> str:
    return split(instance_type)[0]


def has_nvme(instance_type: str) -> bool:
    return InstanceType(instance_type).has_nvme


def gpus(instance_type: str) -> int:
    """NVIDIA GPUs of the instance type (0 for a type without)."""
    return InstanceType(instance_type).gpus


def is_accelerated(instance_type: str) -> bool:
    """Whether the instance type has GPUs or Neuron devices: scarce, and what costs."""
    return InstanceType(instance_type).is_accelerated


def size_exists(instance_type: str) -> bool:
    """False when the family is known and has no such size (ml.g5.3xlarge)."""
    return InstanceType(instance_type).size_exists


def sizes(family_name: str) -> list[str]:
    return sorted(GPU_FAMILIES[family_name].gpus_per_size, key=lambda s: (len(s), s))


@dataclass(frozen=True)
class CpuFamily:
    #: The processors an instance of the family may land on.
    processors: str
    #: Whether each of them multiplies uint8 by int8 with int32 sums: x86's AVX512-VNNI,
    #: AVX-VNNI or AMX, or any Arm (ONNX Runtime's Arm kernels widen to int32). Without it,
    #: ONNX Runtime's x86 kernels add pairs of products in int16 (VPMADDUBSW), which saturates
    #: on 8-bit weights.
    int8_dot_product: bool


_SKYLAKE_OR_CASCADE = CpuFamily("Intel Xeon Skylake-SP or Cascade Lake (only Cascade Lake has VNNI)", False)
_ICE_LAKE = CpuFamily("Intel Xeon Ice Lake (AVX512-VNNI)", True)
_SAPPHIRE_RAPIDS = CpuFamily("Intel Xeon Sapphire Rapids (AVX512-VNNI, AMX)", True)
_GRAVITON = {2: CpuFamily("AWS Graviton2 (Neoverse N1, Arm)", True), 3: CpuFamily("AWS Graviton3 (Arm)", True),
             4: CpuFamily("AWS Graviton4 (Arm)", True)}  # fmt: skip

#: The CPU families SageMaker hosts (botocore's ``ProductionVariantInstanceType``) and their
#: processors, from EC2's instance type pages (aws.amazon.com/ec2/instance-types, "Processor"
#: of each family) and Intel's ISA of each generation (VNNI from Cascade Lake on). A family
#: that may land on a processor without an int8 dot product counts as without one.
CPU_FAMILIES: dict[str, CpuFamily] = {
    "t2": CpuFamily("Intel Xeon Haswell or Broadwell", False),
    "c4": CpuFamily("Intel Xeon E5-2666 v3 (Haswell)", False),
    "m4": CpuFamily("Intel Xeon E5-2686 v4 (Broadwell) or E5-2676 v3 (Haswell)", False),
    **dict.fromkeys(("c5", "c5d", "m5", "m5d", "r5", "r5d"), _SKYLAKE_OR_CASCADE),
    **dict.fromkeys(("c6i", "c6in", "m6i", "r6i"), _ICE_LAKE),
    **dict.fromkeys(("c7i", "m7i", "r7i"), _SAPPHIRE_RAPIDS),
    **dict.fromkeys(("c6g", "c6gd", "c6gn", "m6g", "m6gd", "r6g", "r6gd"), _GRAVITON[2]),
    **dict.fromkeys(("c7g", "r7gd"), _GRAVITON[3]),
    **dict.fromkeys(("c8g", "m8g", "r8g"), _GRAVITON[4]),
}


def int8_dot_product(instance_type: str) -> bool:
    """Whether every CPU `instance_type` may land on has an int8 dot product (`CpuFamily`);
    ValueError, naming the families known, for a type of another family."""
    fam = family(instance_type)
    if fam not in CPU_FAMILIES:
        raise ValueError(
            f"{instance_type!r} is not of a SageMaker CPU family this project knows the int8 instructions of: "
            f"use one of {', '.join(f'ml.{name}' for name in sorted(CPU_FAMILIES))}"
        )
    return CPU_FAMILIES[fam].int8_dot_product
