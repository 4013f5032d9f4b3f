"""The one place where configuration is read.

`cdk.json` context (one section per stack, plus `project`) is parsed into frozen,
validated dataclasses that the stacks receive as keyword-only arguments. No
construct calls ``try_get_context``.

Every setting can be overridden on the command line with a dotted key, for
example ``cdk deploy GptjStack -c gptj.instance_type=ml.g5.2xlarge``; the value
is read as JSON when it parses as JSON, else as a plain string.

A bad value raises :class:`ConfigError`, whose message names the key, the value
and what is allowed, and synthesis stops there.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from stacks.inf2_rules import instance_problems

SECTIONS = ("project", "gpt2", "gptj", "inf2")
#: Relative paths in the configuration are relative to the project root (where cdk.json is).
PROJECT_ROOT = Path(__file__).resolve().parent.parent

# SageMaker instance families with local NVMe instance storage: they reject
# `VolumeSizeInGB` and `KmsKeyId` on the production variant (the instance store
# is encrypted by the hardware), so both are set only for the other families.
NVME_FAMILIES = frozenset(
    {
        "c5d", "c6id", "g4dn", "g5", "g6", "g6e", "m5d", "m6id", "p3dn",
        "p4d", "p4de", "p5", "p5e", "r5d", "r6id", "trn1", "inf2",
    }
)  # fmt: skip

# Families with NVIDIA GPUs: a container on one of them must not quietly serve from the CPU.
NVIDIA_GPU_FAMILIES = frozenset({"g4dn", "g5", "g6", "g6e", "p3", "p3dn", "p4d", "p4de", "p5", "p5e"})
# Families TensorRT 10 still supports (Volta, i.e. p3, was dropped in 10.5).
TENSORRT_GPU_FAMILIES = frozenset({"g4dn", "g5", "g6", "g6e", "p4d", "p4de", "p5", "p5e"})
# GPU families with at least 16 GB per GPU: enough for GPT-J 6B in fp16 (12 GB).
GPTJ_GPU_FAMILIES = frozenset({"g4dn", "g5", "g6", "g6e", "p3", "p3dn", "p4d", "p4de", "p5", "p5e"})
# GPUs per instance where there is more than one (AWS's accelerated computing instance table):
# each GPT-J worker holds its own copy of the weights on its own GPU.
MULTI_GPU_INSTANCES = {
    "ml.g4dn.12xlarge": 4,
    **{f"ml.{family}.{size}": 4 for family in ("g5", "g6", "g6e") for size in ("12xlarge", "24xlarge")},
    **{f"ml.{family}.48xlarge": 8 for family in ("g5", "g6", "g6e", "p5", "p5e")},
    "ml.p3.8xlarge": 4,
    "ml.p3.16xlarge": 8,
    **{f"ml.{family}.24xlarge": 8 for family in ("p3dn", "p4d", "p4de")},
}

_SAGEMAKER_INSTANCE = re.compile(r"^ml\.([a-z0-9]+)\.([0-9]*x?large|[0-9]+xlarge|medium|large)$")
_INF2_INSTANCE = re.compile(r"^inf2\.(xlarge|8xlarge|24xlarge|48xlarge)$")
ECR_IMAGE = re.compile(
    r"^(?P<account>[0-9]{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/"
    r"(?P<repository>[a-z0-9][a-z0-9._/-]*)(?::(?P<tag>[A-Za-z0-9_.-]{1,128})|@sha256:[0-9a-f]{64})$"
)
_SSM_PARAMETER = re.compile(r"^/[A-Za-z0-9_./-]+$")
_ACCOUNT = re.compile(r"^[0-9]{12}$")
_REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-[0-9]$")
_VPC_ID = re.compile(r"^vpc-[0-9a-f]{8,17}$")
_SUBNET_ID = re.compile(r"^subnet-[0-9a-f]{8,17}$")
_AZ = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-[0-9][a-z]$")
SNS_TOPIC_ARN = re.compile(r"^arn:aws(-cn|-us-gov|-iso[a-z]*)?:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}$")
_SECTION_LIKE = re.compile(r"^[a-z][a-z0-9_]*$")
_HF_MODEL_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_ENTRY_POINT = re.compile(r"^(model\.py|(?!.*\.py$)[A-Za-z_]\w*(\.[A-Za-z_]\w*)+)$")
_PROPERTY_KEY = re.compile(r"^(option\.)?[A-Za-z_][A-Za-z0-9_.]{0,127}$")
_PINNED_REQUIREMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9_,-]+\])?==[A-Za-z0-9.+!-]+$")


class ConfigError(ValueError):
    """A context value that cannot be used; the message names key, value and what is allowed."""


T = TypeVar("T")


class _Section:
    """Reads one context section; every key read is checked, unknown keys are refused."""

    def __init__(self, name: str, raw: Any, overrides: Mapping[str, Any] | None = None) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{name}={raw!r} is invalid: a section must be a JSON object of settings")
        self.name = name
        self._raw = dict(raw)
        # `-c gptj.instance_type=...` on the CLI; it wins over the section in cdk.json.
        self._overrides = dict(overrides or {})
        self._read: set[str] = set()

    def key(self, key: str) -> str:
        return f"{self.name}.{key}"

    def _fail(self, key: str, value: Any, allowed: str) -> ConfigError:
        return ConfigError(f"{self.key(key)}={value!r} is invalid: allowed is {allowed}")

    def get(self, key: str, default: T, *, as_text: bool = False) -> Any:
        """The value of `key`: a `-c section.key=...` given on the CLI wins over cdk.json.
        CLI values arrive as text and are read as JSON unless `as_text`."""
        self._read.add(key)
        given = self._overrides.get(key)
        if given is not None:
            return parse_value(given) if isinstance(given, str) and not as_text else given
        return self._raw.get(key, default)

    def has(self, key: str) -> bool:
        return self.get(key, None) is not None

    def integer(self, key: str, default: int, *, lo: int, hi: int) -> int:
        value = self.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise self._fail(key, value, f"a whole number from {lo} to {hi}")
        return value

    def optional_integer(self, key: str, *, lo: int, hi: int) -> int | None:
        if not self.has(key):
            self._read.add(key)
            return None
        return self.integer(key, lo, lo=lo, hi=hi)

    def number(self, key: str, default: float, *, lo: float, hi: float) -> float:
        value = self.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
            raise self._fail(key, value, f"a number from {lo} to {hi}")
        return float(value)

    def boolean(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise self._fail(key, value, "true or false")
        return value

    def string(self, key: str, default: str, *, pattern: re.Pattern[str] | None = None, what: str = "") -> str:
        value = self.get(key, default, as_text=True)
        if not isinstance(value, str) or not value or (pattern is not None and not pattern.match(value)):
            raise self._fail(key, value, what or "a non-empty string")
        return value

    def optional_string(self, key: str, *, pattern: re.Pattern[str] | None = None, what: str = "") -> str | None:
        if not self.has(key):
            self._read.add(key)
            return None
        return self.string(key, "", pattern=pattern, what=what)

    def choice(self, key: str, default: str, allowed: tuple[str, ...]) -> str:
        value = self.get(key, default)
        if value not in allowed:
            raise self._fail(key, value, "one of " + ", ".join(allowed))
        return str(value)

    def string_map(self, key: str, *, key_pattern: re.Pattern[str], what: str) -> dict[str, str]:
        value = self.get(key, {})
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and key_pattern.match(k) and isinstance(v, str) and len(v) <= 256
            for k, v in value.items()
        ):
            raise self._fail(key, value, what)
        return dict(value)

    def check(self, key: str, value: Any, ok: bool, allowed: str) -> None:
        if not ok:
            raise self._fail(key, value, allowed)

    def done(self) -> None:
        given = {**self._raw, **self._overrides}
        unknown = sorted(set(given) - self._read)
        if unknown:
            raise ConfigError(
                f"{self.key(unknown[0])}={given[unknown[0]]!r} is invalid: unknown setting; "
                f"allowed keys of {self.name!r} are " + ", ".join(sorted(self._read))
            )


def _instance_family(instance_type: str) -> str:
    return instance_type.split(".")[1]


@dataclass(frozen=True, kw_only=True)
class AutoscalingSettings:
    """Target tracking on `SageMakerVariantInvocationsPerInstance` (invocations per minute)."""

    min_capacity: int
    max_capacity: int
    target_invocations_per_instance: int
    scale_in_cooldown_s: int = 300
    scale_out_cooldown_s: int = 60


@dataclass(frozen=True, kw_only=True)
class AlarmSettings:
    """CloudWatch alarms on the variant's `ModelLatency` (average) and `Invocation5XXErrors` (sum)."""

    latency_ms: int
    errors_5xx: int = 5
    period_s: int = 60
    evaluation_periods: int = 3
    #: An SNS topic notified when an alarm fires or clears (None: the alarms notify no one).
    topic_arn: str | None = None


@dataclass(frozen=True, kw_only=True)
class EndpointSettings:
    """What the shared SageMaker-endpoint construct needs, whatever the model."""

    instance_type: str
    initial_instance_count: int
    startup_health_check_timeout_s: int
    model_data_download_timeout_s: int
    autoscaling: AutoscalingSettings
    alarms: AlarmSettings
    #: None for instance types with NVMe storage (they reject it); default 30 GB otherwise.
    volume_size_gb: int | None = None
    enable_network_isolation: bool = True
    environment: Mapping[str, str] = field(default_factory=dict)
    #: SageMaker's inference AMI (driver and CUDA) such as al2-ami-sagemaker-inference-gpu-3-1
    #: (None: the instance family's default AMI).
    inference_ami_version: str | None = None

    @property
    def has_nvme(self) -> bool:
        return _instance_family(self.instance_type) in NVME_FAMILIES


@dataclass(frozen=True, kw_only=True)
class Gpt2Settings:
    endpoint: EndpointSettings
    #: The packaged `model.tar.gz` (ONNX, engine, tokenizer, manifest).
    model_data: Path
    #: Folder of the container image (Dockerfile, serve, nginx.conf, ...).
    container_dir: Path
    #: An ECR image URI to use instead of building the container folder (None: build it).
    image_uri: str | None = None
    #: auto picks TensorRT, then PyTorch with CUDA graphs, then ONNX Runtime.
    backend: str = "auto"
    #: Dynamic batching, as Triton's max_batch_size (0: the limit the model was built for).
    max_batch_size: int = 0
    #: How long a batch waits for more rows, from the oldest arrival or the end of the
    #: previous batch, whichever is later (serving/gpt2/batching.py says why).
    max_queue_delay_us: int = 20_000
    #: Completions waiting beyond this are refused with 503 + Retry-After.
    max_queue_size: int = 64
    #: Below SageMaker's 60 s invocation limit, so that the container answers first.
    request_timeout_s: int = 50

    def container_environment(self) -> dict[str, str]:
        """The variables `serving/gpt2/settings.py` reads."""
        return {
            "GPT2_REQUIRE_GPU": str(_instance_family(self.endpoint.instance_type) in NVIDIA_GPU_FAMILIES).lower(),
            "GPT2_BACKEND": self.backend,
            "GPT2_MAX_BATCH_SIZE": str(self.max_batch_size),
            "GPT2_MAX_QUEUE_DELAY_US": str(self.max_queue_delay_us),
            "GPT2_MAX_QUEUE_SIZE": str(self.max_queue_size),
            "GPT2_REQUEST_TIMEOUT_S": str(self.request_timeout_s),
        }


@dataclass(frozen=True, kw_only=True)
class HuggingFaceImage:
    """The Hugging Face PyTorch inference DLC, resolved from the sagemaker SDK's image JSON."""

    transformers_version: str = "4.51.3"
    pytorch_version: str = "2.6.0"
    py_version: str = "py312"


@dataclass(frozen=True, kw_only=True)
class GptjSettings:
    endpoint: EndpointSettings
    #: The payload folder (shipped uncompressed under an S3 prefix) or a model.tar.gz
    #: (default: <artifacts_dir>/gptj/model).
    model_data: Path
    hf_image: HuggingFaceImage
    #: An explicit image URI that replaces the resolved Hugging Face image (None: resolve).
    image_uri: str | None = None
    model_server_workers: int = 1
    model_server_timeout_s: int = 60

    def container_environment(self) -> dict[str, str]:
        """The Hugging Face toolkit's contract: our handler in code/inference.py. Only what the
        image's toolkit (sagemaker-inference 1.10.1 under sagemaker-huggingface-inference-toolkit
        2.6.0) reads: SAGEMAKER_MODEL_SERVER_TIMEOUT (without _SECONDS) would be read by Multi
        Model Server as minutes."""
        return {
            "HF_TASK": "text-generation",
            "SAGEMAKER_PROGRAM": "inference.py",
            "SAGEMAKER_MODEL_SERVER_WORKERS": str(self.model_server_workers),
            "SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS": str(self.model_server_timeout_s),
        }


@dataclass(frozen=True, kw_only=True)
class ModelServerSettings:
    """DJL Serving (LMI) with transformers-neuronx, rendered into `serving.properties`.

    The image, the entry point and any further property are settings, so the stack can
    move to the successor stack (NxD Inference, vLLM on Neuron) without code changes."""

    model_id: str = "facebook/opt-13b"
    #: NeuronCores that shard one copy of the model (rules: stacks/inf2_rules.py).
    tensor_parallel_degree: int = 8
    #: Longest sequence (prompt plus generated tokens) the compiled graphs accept.
    n_positions: int = 512
    dtype: str = "fp16"
    #: Sequences per compiled forward pass (static batching) or per rolling batch.
    batch_size: int = 4
    rolling_batch: str = "disable"
    max_batch_delay_ms: int = 100
    model_loading_timeout_s: int = 3600
    #: The LMI neuronx image tag, resolved from the sagemaker SDK's `djl-neuronx` JSON.
    #: 0.29.0 (Neuron SDK 2.19.1) is the last DJL release with transformers-neuronx.
    image_version: str = "0.29.0"
    #: An explicit image URI (None: the DJL neuronx image of `image_version` for the region).
    image_uri: str | None = None
    #: `model.py` (the bundle's handler) or a handler module of the image, such as
    #: `djl_python.transformers_neuronx`.
    entry_point: str = "model.py"
    #: Further `serving.properties` entries, for options this project does not type.
    extra_properties: Mapping[str, str] = field(default_factory=dict)
    #: Pip requirements the container installs from the bundle at start (pinned, `name==version`).
    requirements: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Inf2Settings:
    instance_type: str = "inf2.48xlarge"
    ami_ssm_parameter: str = "/aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id"
    volume_size_gb: int = 512
    #: An existing VPC (None: a new VPC with one NAT gateway).
    vpc_id: str | None = None
    subnet_id: str | None = None
    #: The zone of `subnet_id`; for a new VPC, the one zone it spans (None: the first two).
    availability_zone: str | None = None
    vpc_cidr: str = "10.42.0.0/16"
    #: A CIDR that may reach port 8080 (None: no ingress at all; use SSM port forwarding).
    ingress_cidr: str | None = None
    port: int = 8080
    bundle: Path = PROJECT_ROOT / "artifacts" / "inf2" / "bundle.tar.gz"
    model_server: ModelServerSettings = field(default_factory=ModelServerSettings)


@dataclass(frozen=True, kw_only=True)
class ProjectSettings:
    artifacts_dir: Path = PROJECT_ROOT / "artifacts"
    tags: Mapping[str, str] = field(default_factory=dict)
    #: Account and region to pin the stacks to (None: environment-agnostic stacks).
    account: str | None = None
    region: str | None = None


@dataclass(frozen=True, kw_only=True)
class AppConfig:
    project: ProjectSettings
    gpt2: Gpt2Settings
    gptj: GptjSettings
    inf2: Inf2Settings


def _endpoint(
    s: _Section,
    *,
    instance_type: str,
    allowed_families: frozenset[str],
    family_reason: str,
    max_capacity: int,
    target_invocations: int,
    startup_timeout_s: int,
    download_timeout_s: int,
    latency_ms: int,
) -> EndpointSettings:
    itype = s.string(
        "instance_type",
        instance_type,
        pattern=_SAGEMAKER_INSTANCE,
        what="a SageMaker instance type such as ml.g5.xlarge",
    )
    s.check(
        "instance_type",
        itype,
        _instance_family(itype) in allowed_families,
        f"an instance of the families {', '.join(sorted(allowed_families))} ({family_reason})",
    )
    min_capacity = s.integer("min_capacity", 1, lo=1, hi=100)
    max_cap = s.integer("max_capacity", max_capacity, lo=1, hi=100)
    s.check("max_capacity", max_cap, max_cap >= min_capacity, f"at least min_capacity ({min_capacity})")
    initial = s.integer("initial_instance_count", min_capacity, lo=1, hi=100)
    s.check(
        "initial_instance_count",
        initial,
        min_capacity <= initial <= max_cap,
        f"between min_capacity ({min_capacity}) and max_capacity ({max_cap})",
    )
    has_nvme = _instance_family(itype) in NVME_FAMILIES
    volume = s.optional_integer("volume_size_gb", lo=1, hi=512)
    s.check(
        "volume_size_gb",
        volume,
        volume is None or not has_nvme,
        f"unset for {itype}: its family has NVMe instance storage and SageMaker rejects VolumeSizeInGB",
    )
    if volume is None and not has_nvme:
        volume = 30
    env = s.string_map(
        "environment",
        key_pattern=re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"),
        what="an object of environment variable names to string values (at most 256 characters)",
    )
    return EndpointSettings(
        instance_type=itype,
        initial_instance_count=initial,
        startup_health_check_timeout_s=s.integer("startup_health_check_timeout_s", startup_timeout_s, lo=60, hi=3600),
        model_data_download_timeout_s=s.integer("model_data_download_timeout_s", download_timeout_s, lo=60, hi=3600),
        volume_size_gb=volume,
        enable_network_isolation=s.boolean("enable_network_isolation", True),
        environment=env,
        inference_ami_version=s.optional_string(
            "inference_ami_version",
            pattern=re.compile(r"^al2-ami-sagemaker-inference-gpu-[0-9]+(-[0-9]+)?$"),
            what="a GPU inference AMI version such as al2-ami-sagemaker-inference-gpu-3-1",
        ),
        autoscaling=AutoscalingSettings(
            min_capacity=min_capacity,
            max_capacity=max_cap,
            target_invocations_per_instance=s.integer(
                "target_invocations_per_instance", target_invocations, lo=1, hi=100_000
            ),
            scale_in_cooldown_s=s.integer("scale_in_cooldown_s", 300, lo=0, hi=86_400),
            scale_out_cooldown_s=s.integer("scale_out_cooldown_s", 60, lo=0, hi=86_400),
        ),
        alarms=AlarmSettings(
            latency_ms=s.integer("latency_alarm_ms", latency_ms, lo=1, hi=60_000),
            errors_5xx=s.integer("errors_5xx_alarm_threshold", 5, lo=1, hi=1_000_000),
            **_alarm_window(s),
            topic_arn=_alarm_topic(s),
        ),
    )


def _alarm_topic(s: _Section) -> str | None:
    return s.optional_string(
        "alarm_topic_arn", pattern=SNS_TOPIC_ARN, what="an SNS topic ARN: arn:aws:sns:<region>:<account>:<topic>"
    )


def _alarm_window(s: _Section) -> dict[str, int]:
    # SageMaker publishes endpoint metrics once a minute: a shorter period would see no data and,
    # with missing data not breaching, never fire.
    period = s.integer("alarm_period_s", 60, lo=60, hi=86_400)
    s.check("alarm_period_s", period, period % 60 == 0, "a multiple of 60 (endpoint metrics are per minute)")
    periods = s.integer("alarm_evaluation_periods", 3, lo=1, hi=100)
    # CloudWatch's limit on the evaluated window (PutMetricAlarm).
    window = 86_400 if period < 3600 else 604_800
    s.check(
        "alarm_evaluation_periods",
        periods,
        period * periods <= window,
        f"at most {window // period} with alarm_period_s={period} (CloudWatch evaluates at most {window} s)",
    )
    return {"period_s": period, "evaluation_periods": periods}


def _path(s: _Section, key: str, default: str) -> Path:
    value = s.string(key, default, what="a path, absolute or relative to the project root")
    return PROJECT_ROOT / value


def _image_uri(s: _Section, key: str = "image_uri") -> str | None:
    return s.optional_string(
        key,
        pattern=ECR_IMAGE,
        what="an ECR image URI: <account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag>",
    )


def _project(s: _Section) -> ProjectSettings:
    tags = s.string_map(
        "tags",
        key_pattern=re.compile(r"^(?!aws:)[\w .:/=+\-@]{1,128}$"),
        what="an object of tag keys (1-128 characters, not starting with 'aws:') to values (at most 256 characters)",
    )
    settings = ProjectSettings(
        artifacts_dir=_path(s, "artifacts_dir", "artifacts"),
        tags=tags,
        account=s.optional_string("account", pattern=_ACCOUNT, what="a 12-digit AWS account id"),
        region=s.optional_string("region", pattern=_REGION, what="an AWS region name such as us-east-1"),
    )
    s.done()
    return settings


def _gpt2(s: _Section, artifacts: Path) -> Gpt2Settings:
    requested = s.get("instance_type", "", as_text=True)
    if isinstance(requested, str) and requested.split(".")[1:2] in (["p3"], ["p3dn"]):
        raise ConfigError(
            f"gpt2.instance_type={requested!r} is invalid: TensorRT 10.5 and later no longer "
            "support Volta (V100) GPUs, so the seed's ml.p3 cannot run the engine; use ml.g5.xlarge "
            "(A10G) or ml.g4dn.xlarge (T4)"
        )
    endpoint = _endpoint(
        s,
        instance_type="ml.g5.xlarge",
        allowed_families=TENSORRT_GPU_FAMILIES,
        family_reason="GPUs that TensorRT 10 supports",
        max_capacity=4,
        target_invocations=600,
        startup_timeout_s=600,
        download_timeout_s=600,
        latency_ms=600,
    )
    settings = Gpt2Settings(
        endpoint=endpoint,
        model_data=_path(s, "model_data", str(artifacts / "gpt2" / "model.tar.gz")),
        container_dir=_path(s, "container_dir", "serving/gpt2"),
        image_uri=_image_uri(s),
        backend=s.choice("backend", "auto", ("auto", "tensorrt", "torch-cuda", "onnxruntime", "torch")),
        max_batch_size=s.integer("max_batch_size", 0, lo=0, hi=1024),
        max_queue_delay_us=s.integer("max_queue_delay_us", 20_000, lo=0, hi=10_000_000),
        max_queue_size=s.integer("max_queue_size", 64, lo=1, hi=4096),
        request_timeout_s=s.integer("request_timeout_s", 50, lo=1, hi=59),
    )
    _typed_variables_stay_typed(
        s,
        endpoint,
        settings.container_environment(),
        {
            "GPT2_REQUIRE_GPU": "gpt2.instance_type",
            "GPT2_BACKEND": "gpt2.backend",
            "GPT2_MAX_BATCH_SIZE": "gpt2.max_batch_size",
            "GPT2_MAX_QUEUE_DELAY_US": "gpt2.max_queue_delay_us",
            "GPT2_MAX_QUEUE_SIZE": "gpt2.max_queue_size",
            "GPT2_REQUEST_TIMEOUT_S": "gpt2.request_timeout_s",
        },
    )
    s.done()
    return settings


def _gptj(s: _Section, artifacts: Path) -> GptjSettings:
    endpoint = _endpoint(
        s,
        instance_type="ml.g4dn.xlarge",
        allowed_families=GPTJ_GPU_FAMILIES,
        family_reason="GPUs with at least 16 GB for 12 GB of fp16 weights",
        max_capacity=2,
        target_invocations=20,
        startup_timeout_s=900,
        download_timeout_s=1200,
        latency_ms=15_000,
    )
    version = re.compile(r"^[0-9]+\.[0-9]+(\.[0-9]+)?$")
    settings = GptjSettings(
        endpoint=endpoint,
        model_data=_path(s, "model_data", str(artifacts / "gptj" / "model")),
        hf_image=HuggingFaceImage(
            transformers_version=s.string(
                "transformers_version", "4.51.3", pattern=version, what="a version such as 4.51.3"
            ),
            pytorch_version=s.string("pytorch_version", "2.6.0", pattern=version, what="a version such as 2.6.0"),
            py_version=s.string("py_version", "py312", pattern=re.compile(r"^py3[0-9]+$"), what="py3xx"),
        ),
        image_uri=_image_uri(s),
        model_server_workers=_gptj_workers(s, endpoint.instance_type),
        model_server_timeout_s=s.integer("model_server_timeout_s", 60, lo=1, hi=3600),
    )
    _typed_variables_stay_typed(
        s,
        endpoint,
        # SAGEMAKER_MODEL_SERVER_TIMEOUT is refused too: Multi Model Server reads it as minutes.
        {**settings.container_environment(), "SAGEMAKER_MODEL_SERVER_TIMEOUT": ""},
        {
            "SAGEMAKER_MODEL_SERVER_WORKERS": "gptj.model_server_workers",
            "SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS": "gptj.model_server_timeout_s",
            "SAGEMAKER_MODEL_SERVER_TIMEOUT": "gptj.model_server_timeout_s (in seconds; MMS reads this variable as "
            "minutes)",
        },
    )
    s.done()
    return settings


def _typed_variables_stay_typed(
    s: _Section, endpoint: EndpointSettings, stack_sets: Mapping[str, str], setting_of: Mapping[str, str]
) -> None:
    """`environment` may not set a variable the stack sets: say which setting to change instead,
    or that the variable is the handler's contract and fixed."""
    clashes = sorted(set(endpoint.environment) & set(stack_sets))
    fixes = [
        f"{name} comes from {setting_of[name]}: set that instead"
        if name in setting_of
        else f"{name} is fixed by the stack (the serving handler's contract)"
        for name in clashes
    ]
    s.check(
        "environment", dict(endpoint.environment), not clashes, f"free of {', '.join(clashes)} ({'; '.join(fixes)})"
    )


def _gptj_workers(s: _Section, instance_type: str) -> int:
    gpus = MULTI_GPU_INSTANCES.get(instance_type, 1)
    workers = s.integer("model_server_workers", 1, lo=1, hi=8)
    s.check(
        "model_server_workers",
        workers,
        workers <= gpus,
        f"at most {gpus}: {instance_type} has {gpus} GPU{'s' if gpus > 1 else ''}, and each worker loads its "
        "own 12 GB copy of the weights onto a GPU of its own",
    )
    return workers


def _inf2(s: _Section, artifacts: Path) -> Inf2Settings:
    vpc_id = s.optional_string("vpc_id", pattern=_VPC_ID, what="a VPC id such as vpc-0123456789abcdef0")
    subnet_id = s.optional_string("subnet_id", pattern=_SUBNET_ID, what="a subnet id such as subnet-0123abcd")
    az = s.optional_string("availability_zone", pattern=_AZ, what="an availability zone such as us-east-1a")
    if vpc_id is not None:
        s.check("subnet_id", subnet_id, subnet_id is not None, "a subnet id of vpc_id, required with vpc_id")
        s.check("availability_zone", az, az is not None, "the subnet's availability zone, required with vpc_id")
    else:
        s.check("subnet_id", subnet_id, subnet_id is None, "unset unless vpc_id is set")
    # The subnet plan (per zone, a /24 public and a /20 private subnet) needs a /19 for the one
    # zone of a configured availability_zone, a /18 for the default two.
    widest = 19 if az is not None else 18
    vpc_cidr = s.string("vpc_cidr", "10.42.0.0/16", what=f"an IPv4 CIDR from /16 to /{widest}")
    try:
        net = ipaddress.IPv4Network(vpc_cidr)
        ok = 16 <= net.prefixlen <= widest
    except ValueError:
        ok = False
    s.check(
        "vpc_cidr",
        vpc_cidr,
        ok,
        f"an IPv4 network from /16 to /{widest} such as 10.42.0.0/16 (each zone gets a /24 public and a /20 "
        "private subnet)",
    )
    ingress = s.optional_string("ingress_cidr", what="an IPv4 CIDR such as 203.0.113.0/24")
    if ingress is not None:
        try:
            ok = ipaddress.IPv4Network(ingress).prefixlen > 0
        except ValueError:
            ok = False
            try:  # host bits set: name the network the user most likely meant
                meant: ipaddress.IPv4Network | None = ipaddress.IPv4Network(ingress, strict=False)
            except ValueError:
                meant = None
            s.check("ingress_cidr", ingress, meant is None, f"a network address: did you mean {meant}?")
        s.check(
            "ingress_cidr",
            ingress,
            ok,
            "an IPv4 CIDR narrower than 0.0.0.0/0 such as 203.0.113.0/24 (the model server has no "
            "authentication; put a load balancer in front to open it to the world)",
        )
    settings = Inf2Settings(
        instance_type=s.string(
            "instance_type",
            "inf2.48xlarge",
            pattern=_INF2_INSTANCE,
            what="an inf2 type: inf2.xlarge, inf2.8xlarge, inf2.24xlarge or inf2.48xlarge",
        ),
        ami_ssm_parameter=s.string(
            "ami_ssm_parameter",
            Inf2Settings.ami_ssm_parameter,
            pattern=_SSM_PARAMETER,
            what="an SSM parameter path such as /aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id",
        ),
        volume_size_gb=s.integer("volume_size_gb", 512, lo=200, hi=16_384),
        vpc_id=vpc_id,
        subnet_id=subnet_id,
        availability_zone=az,
        vpc_cidr=vpc_cidr,
        ingress_cidr=ingress,
        port=s.integer("port", 8080, lo=1024, hi=65_535),
        bundle=_path(s, "bundle", str(artifacts / "inf2" / "bundle.tar.gz")),
        model_server=_model_server(s),
    )
    s.done()
    problems = instance_problems(
        instance_type=settings.instance_type, degree=settings.model_server.tensor_parallel_degree
    )
    if problems:
        raise ConfigError("; ".join(problems))
    return settings


def _model_server(s: _Section) -> ModelServerSettings:
    ms = ModelServerSettings()
    entry_point = s.string(
        "entry_point",
        ms.entry_point,
        pattern=_ENTRY_POINT,
        what="model.py (the bundle's handler) or a handler module of the image such as djl_python.transformers_neuronx",
    )
    rolling_batch = s.choice("rolling_batch", ms.rolling_batch, ("disable", "auto"))
    s.check(
        "rolling_batch",
        rolling_batch,
        rolling_batch == "disable" or entry_point != "model.py",
        "disable while entry_point is model.py (it serves static batches); for rolling batches set "
        "entry_point to the image's handler, such as djl_python.transformers_neuronx",
    )
    typed = {
        "engine", "batch_size", "max_batch_delay", "option.entryPoint", "option.model_id",
        "option.tensor_parallel_degree", "option.n_positions", "option.dtype", "option.batch_size",
        "option.rolling_batch", "option.max_rolling_batch_size", "option.model_loading_timeout",
    }  # fmt: skip
    extra = s.string_map(
        "extra_properties",
        key_pattern=_PROPERTY_KEY,
        what="an object of serving.properties keys (such as option.context_length_estimate) to string values",
    )
    clash = sorted(set(extra) & typed)
    s.check(
        "extra_properties",
        extra,
        not clash,
        f"keys other than the typed settings; set {', '.join(clash)} through its own inf2 setting",
    )
    requirements = s.get("requirements", [])
    s.check(
        "requirements",
        requirements,
        isinstance(requirements, list)
        and all(isinstance(r, str) and _PINNED_REQUIREMENT.match(r) for r in requirements),
        'a list of pinned pip requirements such as ["sentencepiece==0.2.0"] (the image pins the rest)',
    )
    return ModelServerSettings(
        model_id=s.string("model_id", ms.model_id, pattern=_HF_MODEL_ID, what="a Hugging Face model id"),
        # The Neuron rules (stacks/inf2_rules.py) say which degrees work; this bound only
        # keeps the number sane.
        tensor_parallel_degree=s.integer("tensor_parallel_degree", ms.tensor_parallel_degree, lo=1, hi=128),
        n_positions=s.integer("n_positions", ms.n_positions, lo=16, hi=8192),
        dtype=s.choice("dtype", ms.dtype, ("fp16", "bf16", "fp32")),
        batch_size=s.integer("batch_size", ms.batch_size, lo=1, hi=64),
        rolling_batch=rolling_batch,
        max_batch_delay_ms=s.integer("max_batch_delay_ms", ms.max_batch_delay_ms, lo=0, hi=60_000),
        model_loading_timeout_s=s.integer("model_loading_timeout_s", ms.model_loading_timeout_s, lo=60, hi=14_400),
        image_version=s.string(
            "image_version",
            ms.image_version,
            pattern=re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$"),
            what="a DJL LMI neuronx version such as 0.29.0",
        ),
        image_uri=_image_uri(s),
        entry_point=entry_point,
        extra_properties=extra,
        requirements=tuple(requirements),
    )


def parse_value(raw: str) -> Any:
    """A `-c key=value` from the CLI arrives as a string: read it as JSON where it is JSON."""
    try:
        return json.loads(raw)
    except (ValueError, TypeError):
        return raw


def load_config(context: Mapping[str, Any]) -> AppConfig:
    """Parse every section of `context` (``app.node.get_all_context()``): the sections of
    cdk.json and the dotted overrides (``gptj.instance_type``) given with ``-c``."""

    for key in context:
        head, dot, _ = key.partition(".")
        # A dotted key that looks like ours but names no section is a typo (`gtpj.max_capacity`);
        # CDK's own keys (`aws:cdk:...`, `@aws-cdk/...`) never take this shape.
        if dot and head not in SECTIONS and _SECTION_LIKE.match(head):
            raise ConfigError(
                f"{key}={context[key]!r} is invalid: {head!r} is no section; allowed sections are "
                + ", ".join(SECTIONS)
            )

    def section(name: str) -> _Section:
        raw = context.get(name)
        if isinstance(raw, str):
            raw = parse_value(raw)
        prefix = f"{name}."
        overrides = {k.removeprefix(prefix): v for k, v in context.items() if k.startswith(prefix)}
        return _Section(name, raw, overrides)

    project = _project(section("project"))
    artifacts = project.artifacts_dir
    return AppConfig(
        project=project,
        gpt2=_gpt2(section("gpt2"), artifacts),
        gptj=_gptj(section("gptj"), artifacts),
        inf2=_inf2(section("inf2"), artifacts),
    )


def parse_context_pairs(pairs: Sequence[str]) -> dict[str, str]:
    """``-c KEY=VALUE`` pairs of a CLI, kept as text exactly as the CDK CLI passes them (the
    settings read JSON where a setting wants it); ConfigError on a pair without ``=``."""
    context: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"-c {pair!r} is invalid: allowed is KEY=VALUE such as gptj.max_capacity=3")
        context[key] = value
    return context


def from_cdk_json(overrides: Mapping[str, Any] | None = None, *, path: Path = PROJECT_ROOT / "cdk.json") -> AppConfig:
    """The configuration as `cdk synth` would see it, for tools run outside the CDK app
    (the artifacts builder): cdk.json's context plus dotted overrides."""
    context = json.loads(path.read_text()).get("context", {})
    return load_config({**context, **(overrides or {})})
