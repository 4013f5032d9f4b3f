"""A causal language model on a SageMaker endpoint, and the ``llm`` section: any model the vLLM
engine serves (a hub id at a pinned revision, or a folder), built into a payload by
``python -m artifacts_builder llm`` and checked at synthesis from that payload (its architecture
against the pinned vLLM's registry, its weights from the safetensors headers, its KV cache from
config.json, against the GPUs one copy of the model gets: :func:`check_payload`).

GPT-J (the ``gptj`` section, project_config/gptj.py) is this same code path with GPT-J's defaults
(:class:`ModelProfile`), and the seed's second engine, the Hugging Face toolkit."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_contracts import aws, instances, lora
from llm_contracts.causal_lm import (
    DTYPE_BYTES,
    ENGINE_OVERHEAD_GIB,
    ModelFacts,
    PayloadError,
    architecture_problem,
    describe_price,
    engine_problem,
    plan,
    resolved_dtype,
    smallest_fit,
)
from llm_contracts.inf2 import COMMIT
from llm_contracts.lora import ALLOWED_RANKS, DEFAULT_MAX_RANK
from llm_contracts.manifest import PAYLOAD_MANIFEST, ManifestError, read_manifest
from llm_inference_cdk.dlc import cuda_of
from llm_inference_cdk.endpoint_props import SageMakerEndpointProps
from llm_inference_cdk.props import Check, PropError, instance_of, integer, invalid, optional, prop, text, validate
from project_config.endpoint import (
    ALARM_EMAIL,
    TOPIC_ARN,
    check_environment,
    check_family,
    check_notifications,
    check_volume,
    read_endpoint,
    require_payload,
)
from project_config.engines import FIXED_ENVIRONMENT, Engine, HfToolkitEngine, VllmEngine, read_engine
from project_config.gpt2 import ECR_URI
from project_config.reader import PROJECT_ROOT, ConfigError, Problems, Section, read_props

#: A Hugging Face model id: ``owner/name``.
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
#: The vllm engine's endpoint needs: the image's CUDA 13.0 wants an AMI with driver 580
#: (botocore's ProductionVariant.InferenceAmiVersion documentation); the default AMI's is older.
VLLM_AMI = "al2023-ami-sagemaker-inference-gpu-4-1"
#: The endpoint's defaults for a model of a few billion parameters (GPT-J 6B's): a minute or more
#: per answer under load, a start that downloads GBs.
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


@dataclass(frozen=True)
class ModelProfile:
    """What one section's model brings: its name, engines, defaults and payload."""

    #: The cdk.json section and the artifacts builder's component.
    section: str
    #: The engines it may run on, the first the default.
    engines: tuple[str, ...]
    #: The endpoint's defaults, and those of each engine where they differ.
    endpoint_defaults: Mapping[str, Any]
    engine_endpoint_defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: Each engine's settings' defaults where they differ from the engine's own.
    engine_defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: The instance families allowed (None: every family of llm_contracts.instances.GPU_FAMILIES).
    families: frozenset[str] | None = None
    families_reason: str = ""
    #: Whether the section names its model (``model``, ``revision``) or its payload (``model_data``).
    names_model: bool = False


def _engine_check() -> Check:
    return Check(lambda v: isinstance(v, VllmEngine | HfToolkitEngine), "a VllmEngine or an HfToolkitEngine")


#: An adapter's name: its inference component's, in the builder's folder (letters, digits, hyphens).
ADAPTER_NAME = re.compile(r"^[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?$")
ADAPTER_NAMES = (
    'a list of adapter names such as ["support", "legal"] (letters, digits and hyphens, no name twice), each '
    "built with `python -m artifacts_builder lora --name <name>`"
)
RANKS = f"one of {', '.join(str(r) for r in ALLOWED_RANKS)}"  # vLLM's --max-lora-rank


def _adapter_names(value: Any) -> bool:
    names = list(value) if isinstance(value, list | tuple) else None
    return (
        names is not None
        and all(isinstance(n, str) and ADAPTER_NAME.match(n) for n in names)
        and len(set(names)) == len(names)
    )


@dataclass(frozen=True, kw_only=True)
class LlmSettings:
    """One causal language model's stack: its section, endpoint, engine and payload."""

    #: The cdk.json section these settings come from (for the names in messages).
    section_name: str = prop(check=text())
    endpoint: SageMakerEndpointProps = prop(check=instance_of(SageMakerEndpointProps))
    #: The serving engine and its settings.
    engine: Engine = prop(check=_engine_check())
    #: The payload folder (shipped uncompressed under an S3 prefix) or a model.tar.gz.
    model_data: Path = prop(check=instance_of(Path))
    #: The model the payload must have been built from: a hub id or a folder (None: whatever
    #: the payload holds).
    model: str | None = prop(None, check=optional(text()))
    #: The hub commit of `model` (40 hex digits; None for a folder).
    revision: str | None = prop(None, check=optional(text(COMMIT, what="a commit of 40 hex digits")))
    #: An explicit image URI that replaces the engine's resolved image (None: resolve).
    image_uri: str | None = prop(None, check=ECR_URI)
    #: An SNS topic the alarms notify, on ALARM and OK (None: the stack's own encrypted topic).
    alarm_topic_arn: str | None = prop(None, check=TOPIC_ARN)
    #: An e-mail address subscribed to the stack's own alarm topic (None: no subscription).
    alarm_email: str | None = prop(None, check=ALARM_EMAIL)
    #: LoRA adapters served as adapter inference components on the model's component, by name:
    #: each `python -m artifacts_builder lora --name <name>`'s archive in <artifacts>/llm/adapters/.
    adapters: tuple[str, ...] = prop((), check=Check(_adapter_names, ADAPTER_NAMES))
    #: The largest adapter rank the engine takes (vLLM's --max-lora-rank).
    max_lora_rank: int = prop(DEFAULT_MAX_RANK, check=Check(lambda v: v in ALLOWED_RANKS, RANKS))
    #: Adapters one batch may use at once, each reserved on the GPU at max_lora_rank (vLLM's
    #: --max-loras). Not derived from the list: a value that followed it would change the engine's
    #: settings, and so replace the model and restart its copies, at every adapter added.
    max_loras: int = prop(4, check=integer(1, 64))
    #: Adapters kept in the host's memory, the rest read again from disk when asked for (vLLM's
    #: --max-cpu-loras, at least max_loras).
    max_cpu_loras: int = prop(16, check=integer(1, 1024))

    def __post_init__(self) -> None:
        validate(self, self._rules)
        # cdk.json gives a list; checked as given (its problem shows the value so), kept as a tuple.
        object.__setattr__(self, "adapters", tuple(self.adapters))

    def _rules(self) -> Iterator[PropError]:
        if not self.adapters:
            return
        if self.endpoint.inference_component is None:
            yield invalid(self, "adapters", "none without inference-component mode: an adapter inference component "
                          "runs on a base component (set inference_component)")  # fmt: skip
        if not isinstance(self.engine, VllmEngine):
            yield invalid(self, "adapters", "none on the hf-toolkit engine: the vllm engine serves LoRA adapters")
        if self.max_cpu_loras < self.max_loras:
            yield invalid(self, "max_cpu_loras", f"at least max_loras ({self.max_loras})")

    def lora_limits(self) -> tuple[int, int]:
        """(max_loras, max_cpu_loras) the engine gets for the adapters."""
        return self.max_loras, self.max_cpu_loras

    @property
    def adapters_dir(self) -> Path:
        """Where the builder writes the adapters of this payload."""
        return self.model_data.parent / "adapters"

    def adapter_archive(self, name: str) -> Path:
        """The archive of adapter `name`, as `python -m artifacts_builder lora --name <name>` writes it."""
        return self.adapters_dir / name / f"{name}.tar.gz"

    def key(self, name: str) -> str:
        return f"{self.section_name}.{name}"

    @property
    def gpus(self) -> int:
        """The GPUs one copy of the model runs on (:func:`copy_gpus`)."""
        return copy_gpus(self.endpoint)

    def container_environment(self) -> dict[str, str]:
        """The engine's environment on the GPUs one copy of the model gets (with adapters: LoRA on)."""
        found = self.engine.container_environment(gpus=self.gpus)
        if self.adapters:
            on_gpu, on_host = self.lora_limits()
            found.update(lora.environment(max_loras=on_gpu, max_rank=self.max_lora_rank, max_cpu_loras=on_host))
        return found


def copy_gpus(endpoint: SageMakerEndpointProps) -> int:
    """The GPUs one copy of the model runs on: an inference component's copy gets exactly its
    accelerators and its container sees those alone (botocore's SageMaker model,
    InferenceComponentComputeResourceRequirements: "the number of accelerators to allocate to run
    a model that you assign to an inference component"); otherwise the model has every GPU of the
    instance type."""
    component = endpoint.inference_component
    return component.accelerators if component is not None else endpoint.instance.gpus


def read(section: Section, artifacts: Path, profile: ModelProfile) -> LlmSettings:
    """`section`'s settings, with `profile`'s defaults."""
    image_uri_set = section.has("image_uri")
    engine = read_engine(section, profile.engines, profile.engine_defaults, image_uri_set=image_uri_set)
    endpoint = read_endpoint(
        section,
        {**profile.endpoint_defaults, **profile.engine_endpoint_defaults.get(engine.name, {})},
        framework="vllm" if isinstance(engine, VllmEngine) else None,
    )
    check_hardware(section, profile, endpoint, engine, image_uri_set=image_uri_set)
    given: dict[str, Any] = {"section_name": section.name, "endpoint": endpoint, "engine": engine}
    read = ["image_uri", "alarm_topic_arn", "alarm_email", "adapters", "max_lora_rank", "max_loras", "max_cpu_loras"]
    if profile.names_model:
        given.update(_model_source(section, artifacts))
    else:
        read.append("model_data")
    settings = read_props(
        section, LlmSettings, defaults={"model_data": artifacts / profile.section / "model"}, only=read, **given
    )
    if isinstance(engine, VllmEngine) and settings.model_data.name.endswith(".tar.gz"):
        raise section.fail(
            "model_data",
            str(settings.model_data),
            f"a payload folder with {section.key('engine')}=vllm (shipped uncompressed under an S3 prefix; "
            "synthesis reads its config.json and safetensors headers to check that the GPUs hold the model)",
        )
    check_environment(section, endpoint.environment, FIXED_ENVIRONMENT[engine.name])
    check_notifications(section, settings.alarm_topic_arn, settings.alarm_email)
    section.done()
    return settings


def check_hardware(
    section: Section, profile: ModelProfile, endpoint: SageMakerEndpointProps, engine: Engine, *, image_uri_set: bool
) -> None:
    """Every check at reading of the keys that the instance type's GPUs bound, in one place: the
    instance type (its family; the vllm image's CUDA), the GPUs the engine spreads over
    (``accelerators``, ``tensor_parallel_size``, ``model_server_workers``), the dtype and the AMI.
    One ConfigError lists every problem, a line each; a family refused stops there, as the rest
    read the GPUs of a family this project describes. (The payload's checks run once it is built:
    :func:`check_payload`.)"""
    instance = endpoint.instance
    families, reason = (
        (profile.families, profile.families_reason)
        if profile.families is not None
        else (frozenset(instances.GPU_FAMILIES), "NVIDIA GPUs this project describes (llm_contracts/instances.py)")
    )
    check_family(section, endpoint, families, reason)
    gpu = instance.gpu
    assert gpu is not None  # every family allowed has GPUs this project describes
    problems = Problems(section)
    image = engine.image() if isinstance(engine, VllmEngine) and not image_uri_set else None
    needed = cuda_of(image) if image is not None else None
    if needed is not None and _version(needed) >= (13,):
        problems.check(
            "instance_type",
            endpoint.instance_type,
            gpu.compute_capability >= (7, 5),
            f"a GPU that the vllm image's CUDA {needed} runs on (Turing or newer: T4, A10G, L4, L40S, A100, H100, "
            f"H200, B200); CUDA 13 dropped the {gpu.gpu}",
        )
    _check_gpus(problems, endpoint, engine)
    if isinstance(engine, VllmEngine):
        problems.check(
            "dtype",
            engine.dtype,
            not (engine.dtype == "bfloat16" and gpu.compute_capability < (8, 0)),
            f"float16, float32 or auto on {endpoint.instance_type}: its {gpu.gpu} ({gpu.architecture}) has no "
            "bfloat16, which needs Ampere or later",
        )
    if image is not None and needed is not None:
        # The AMI's driver runs the image's CUDA.
        amis = aws.inference_ami_versions()
        fits = [name for name, cuda in amis.items() if cuda is not None and _version(cuda) >= _version(needed)]
        ami = endpoint.inference_ami_version
        problems.check(
            "inference_ami_version",
            ami,
            ami in fits,
            f"an AMI whose CUDA runs the vllm image's {needed} ({image.repository}:{image.tag}): " + ", ".join(fits),
        )
    problems.raise_any()


def _check_gpus(problems: Problems, endpoint: SageMakerEndpointProps, engine: Engine) -> None:
    """What the engine spreads over GPUs fits the GPUs one copy of the model gets: the instance
    type's, or an inference component's accelerators (:func:`copy_gpus`)."""
    gpus = copy_gpus(endpoint)
    plural = "s" if gpus != 1 else ""
    if endpoint.inference_component is not None:
        _check_copy_gpus(problems, engine, gpus)
        have = (
            f"each copy of the inference component gets {problems.key('accelerators')}={gpus} GPU{plural} and sees "
            f"{'it' if gpus == 1 else 'them'} alone"
        )
    else:
        have = f"{endpoint.instance_type} has {gpus} GPU{plural}"
    if isinstance(engine, HfToolkitEngine):
        # Multi Model Server gives its workers the GPUs it sees in turn: more workers than GPUs
        # put two copies of the weights on one GPU.
        problems.check(
            "model_server_workers",
            engine.model_server_workers,
            engine.model_server_workers <= max(1, gpus),
            f"at most {max(1, gpus)}: {have}, and each worker loads its own copy of the weights onto a GPU of its own",
        )
    elif engine.tensor_parallel_size is not None and endpoint.inference_component is None:
        problems.check(
            "tensor_parallel_size",
            engine.tensor_parallel_size,
            engine.tensor_parallel_size <= gpus,
            f"at most {gpus}: {have}",
        )


def _check_copy_gpus(problems: Problems, engine: Engine, gpus: int) -> None:
    """vLLM splits a component's copy over exactly the accelerators it gets: its container sees
    those alone, and vLLM refuses a larger degree at start ("World size (N) is larger than the
    number of available GPUs (M) in this node"), while a smaller one leaves GPUs the copy
    reserves, and no other copy may use, idle."""
    if not isinstance(engine, VllmEngine):
        return
    problems.check(
        "accelerators",
        gpus,
        gpus >= 1,
        f"at least 1 with the vllm engine: vLLM serves on GPUs, and the GPUs of each copy are its tensor-parallel "
        f"degree ({problems.key('tensor_parallel_size')})",
    )
    degree = engine.tensor_parallel_size
    problems.check(
        "tensor_parallel_size",
        degree,
        degree is None or degree == gpus,
        f"{problems.key('accelerators')} ({gpus}), the GPUs each copy of the inference component gets: its container "
        "sees those alone, and vLLM splits the model over exactly its degree (a larger one stops it at start, a "
        "smaller one leaves GPUs the copy reserves idle); set both to the same number",
    )


def _model_source(section: Section, artifacts: Path) -> dict[str, Any]:
    """``model`` and ``revision``, and the payload they point at: a folder holding a built payload
    is the payload; otherwise the builder's output under the artifacts folder, built from them."""
    model = section.get("model", as_text=True)
    revision = section.get("revision", as_text=True)
    payload = artifacts / section.name / "model"
    if model is None:
        section.check("revision", revision, revision is None, f"unset while {section.key('model')} is unset")
        return {"model_data": payload}
    folder = PROJECT_ROOT / str(model)
    if folder.is_dir():
        section.check(
            "revision",
            revision,
            revision is None,
            f"unset: {section.key('model')} is a folder, which no revision names",
        )
        return {"model": str(folder), "model_data": folder if (folder / PAYLOAD_MANIFEST).is_file() else payload}
    section.check(
        "model",
        model,
        isinstance(model, str) and bool(HUB_ID.match(model)),
        "a Hugging Face model id (owner/name) or a model folder that exists",
    )
    section.check(
        "revision",
        revision,
        isinstance(revision, str) and bool(COMMIT.match(revision)),
        f"the commit of {model} on the Hugging Face hub (40 hex digits) that its payload is built from: a branch "
        "or tag can move to other files",
    )
    return {"model": model, "revision": revision, "model_data": payload}


def _version(value: str) -> tuple[int, ...]:
    return tuple(int(part) for part in value.split("."))


# --- synthesis: the payload against the settings ---------------------------------------------------


def payload_facts(settings: LlmSettings) -> ModelFacts:
    """The model's facts, read from its payload (ConfigError naming the key that set it)."""
    key = "model" if settings.model is not None else "model_data"
    value = settings.model if settings.model is not None else str(settings.model_data)
    manifest = read_manifest(settings.model_data, PAYLOAD_MANIFEST)
    if not any(name.endswith(".safetensors") for name in manifest["files"]):
        raise ConfigError(
            f"{settings.key(key)}={value!r} is invalid: allowed is a payload with safetensors weights with "
            f"{settings.key('engine')}=vllm (vLLM loads no torch.save pickle): rebuild it with --format safetensors"
        )
    try:
        return ModelFacts.from_payload(settings.model_data, manifest["files"])
    except PayloadError as exc:
        raise ConfigError(
            f"{settings.key(key)}={value!r} is invalid: allowed is a causal language model's payload: {exc}"
        ) from None


def check_built(settings: LlmSettings, builder: str) -> None:
    """The settings against the payload as built, before the stack reads it: ManifestError (the
    stack is left out) when it is not built (`builder`: the artifacts builder's arguments that
    build it), ConfigError when it was built from another model or the volume cannot hold it. The
    model's own checks follow once the stack has read the payload's manifest (:func:`check_payload`)."""
    key = settings.key("model_data" if settings.model is None else "model")
    require_payload(settings.model_data, key, builder)
    if settings.model is not None:
        check_source(settings)
    check_volume(settings.section_name, settings.endpoint, settings.model_data)


def _lora_bytes(settings: LlmSettings, dtype_bytes: int) -> int:
    """What vLLM reserves on the GPU for adapters: max_loras of them at max_lora_rank."""
    if not settings.adapters:
        return 0
    config = json.loads((settings.model_data / "config.json").read_text())
    return settings.lora_limits()[0] * lora.lora_bytes(config, settings.max_lora_rank, dtype_bytes)


def check_adapters(settings: LlmSettings) -> None:
    """Each adapter of `settings` built, for this payload's model, at a rank the engine takes:
    ManifestError (the stack is left out) naming the builder's command when one is not built,
    ConfigError in one line when it was built for another model or is of too high a rank."""
    if not settings.adapters:
        return
    base = read_manifest(settings.model_data.parent)["model"]["source"]
    for name in settings.adapters:
        command = (
            f"python -m artifacts_builder lora --name {name} --adapter <folder, or hub id with --revision> "
            f"--max-rank {settings.max_lora_rank}"
        )
        manifest = read_manifest(settings.adapters_dir / name, fix=f"build it: {command}")
        if not settings.adapter_archive(name).is_file():
            raise ManifestError(f"{settings.adapter_archive(name)} does not exist: build it: {command}")
        built_for, rank = manifest["base"]["source"], int(manifest["adapter"]["rank"])
        if built_for != base:
            raise ConfigError(
                f"{settings.key('adapters')}={list(settings.adapters)!r} is invalid: allowed are adapters of the "
                f"payload's model {base}, and {name} was built for {built_for}; rebuild it: {command}"
            )
        if rank > settings.max_lora_rank:
            fits = ", ".join(str(r) for r in ALLOWED_RANKS if r >= rank)
            raise ConfigError(
                f"{settings.key('max_lora_rank')}={settings.max_lora_rank} is invalid: allowed is a rank that takes "
                f"adapter {name}'s r={rank}: {fits}"
            )


def check_source(settings: LlmSettings) -> None:
    """The payload was built from the model the settings name (the builder's manifest says what
    from): ManifestError (the stack is left out) when it was not built, ConfigError when it was
    built from another model."""
    if settings.model is None or settings.model_data == Path(settings.model):
        return
    command = f"python -m artifacts_builder {settings.section_name} --model {settings.model}" + (
        f" --revision {settings.revision}" if settings.revision else ""
    )
    manifest = read_manifest(settings.model_data.parent, fix=f"build it: {command}")
    record = manifest.get("model")
    built: dict[str, Any] = record if isinstance(record, dict) else {}
    source, revision = built.get("source"), built.get("revision")
    if source != settings.model or (settings.revision is not None and revision != settings.revision):
        what = f"{source} at {revision}" if revision else str(source)
        raise ConfigError(
            f"{settings.key('model')}={settings.model!r} is invalid: allowed is the model {settings.model_data} was "
            f"built from ({what}); rebuild it: {command}"
        )


def check_payload(settings: LlmSettings) -> None:
    """ConfigError, in one line naming the key, unless the vllm engine can serve the payload on the
    GPUs one copy of it gets (the instance type's, or an inference component's accelerators): an
    architecture the pinned vLLM serves, a quantization and a dtype the GPU runs, a
    tensor-parallel degree that divides the heads, ``max_model_len`` within the model's, and each
    GPU's memory, up to ``gpu_memory_utilization``, holding its share of the weights, the
    engine's overhead and the KV cache of ``max_num_seqs`` sequences of ``max_model_len`` tokens
    (llm_contracts/causal_lm.py says how each is counted). vLLM allocates its cache in blocks as
    sequences grow, so this is the worst case, every sequence at full length at once; a model that
    does not fit is refused with the cheapest instance type that holds it, and its price (a
    component's copy with the accelerators of its instance type that would)."""
    engine = settings.engine
    if not isinstance(engine, VllmEngine):
        return
    facts = payload_facts(settings)
    _check_serves(settings, engine, facts)
    _check_memory(settings, engine, facts)


def _fit_hint(facts: ModelFacts, engine: VllmEngine, tokens: int) -> str:
    """The cheapest instance type that holds the model and `tokens` tokens of KV cache, in words."""
    found = smallest_fit(facts, dtype_setting=engine.dtype, utilization=engine.gpu_memory_utilization, tokens=tokens)
    if found is None:
        return "no SageMaker GPU instance type in llm_contracts/instances.py holds it"
    name, best = found
    instance = instances.InstanceType(name)
    assert instance.gpu is not None
    return (
        f"the cheapest type that holds it is {name} ({instance.gpus} x {instance.gpu.gpu}, "
        f"{instance.gpu_memory_gib} GiB each, tensor_parallel_size {best.degree}; {describe_price(name)})"
    )


def _length(engine: VllmEngine, facts: ModelFacts) -> int:
    return engine.max_model_len if engine.max_model_len is not None else facts.max_model_len


def _check_serves(settings: LlmSettings, engine: VllmEngine, facts: ModelFacts) -> None:
    """The architecture, the GPU, the tensor-parallel degree and the length."""
    source_key = "model" if settings.model is not None else "model_data"
    source = settings.model if settings.model is not None else str(settings.model_data)
    problem = architecture_problem(facts.architecture)
    if problem is not None:
        raise ConfigError(
            f"{settings.key(source_key)}={source!r} is invalid: allowed is a model vLLM "
            f"{engine.vllm_version} serves: {problem}"
        )
    instance_type, instance = settings.endpoint.instance_type, settings.endpoint.instance
    gpu = instance.gpu
    assert gpu is not None
    problem = engine_problem(facts, gpu, instance_type)
    if problem is not None:
        raise ConfigError(
            f"{settings.key('instance_type')}={instance_type!r} is invalid: allowed is a GPU that runs the model: "
            f"{problem}; {_fit_hint(facts, engine, _length(engine, facts) * engine.max_num_seqs)}"
        )
    degree = engine.tensor_parallel_size or settings.gpus
    problem = facts.parallel_problem(degree)
    if problem is not None:
        degrees = ", ".join(str(d) for d in facts.parallel_degrees(instance.gpus))
        if settings.endpoint.inference_component is not None:
            # A copy's degree is its accelerators (read() refuses another): the key to change.
            raise ConfigError(
                f"{settings.key('accelerators')}={degree} is invalid: allowed is a number of GPUs the model splits "
                f"into on {instance_type}: {degrees} (each copy's GPUs are its tensor-parallel degree, "
                f"{settings.key('tensor_parallel_size')}): {problem}"
            )
        value = engine.tensor_parallel_size if engine.tensor_parallel_size is not None else f"unset ({degree} GPUs)"
        raise ConfigError(
            f"{settings.key('tensor_parallel_size')}={value!r} is invalid: allowed is a degree the model splits into "
            f"on {instance_type}: {degrees}: {problem}"
        )
    if engine.max_model_len is not None and engine.max_model_len > facts.max_model_len:
        raise ConfigError(
            f"{settings.key('max_model_len')}={engine.max_model_len} is invalid: allowed is at most "
            f"{facts.max_model_len} ({facts.max_len_key} in {settings.model_data / 'config.json'})"
        )


def _check_memory(settings: LlmSettings, engine: VllmEngine, facts: ModelFacts) -> None:
    """Each GPU holds its share of the weights, the overhead and the KV cache of every sequence."""
    instance_type = settings.endpoint.instance_type
    gpu = settings.endpoint.instance.gpu
    assert gpu is not None
    dtype = resolved_dtype(engine.dtype, facts.config_dtype, gpu.compute_capability)
    degree = engine.tensor_parallel_size or settings.gpus
    length = _length(engine, facts)
    wanted = length * engine.max_num_seqs
    memory = plan(facts, instance_type, degree=degree, dtype=dtype, utilization=engine.gpu_memory_utilization,
                  lora_bytes=_lora_bytes(settings, DTYPE_BYTES[dtype]))  # fmt: skip
    tokens = memory.tokens
    if tokens >= wanted:
        return
    gib = 2**30
    dtype_bytes = DTYPE_BYTES[dtype]
    on = f"{degree} x " if degree > 1 else ""
    share = f"1/{degree} of " if degree > 1 else ""
    why = (
        f"on {instance_type} ({on}{gpu.gpu}, {gpu.gpu_memory_gib} GiB) gpu_memory_utilization "
        f"{engine.gpu_memory_utilization} gives {memory.budget / gib:.1f} GiB a GPU for {share}the weights "
        f"({facts.parameters() / 1e9:.2f}e9 parameters as {dtype}: {facts.weight_bytes(dtype_bytes) / gib:.1f} GiB), "
        f"the engine's overhead ({ENGINE_OVERHEAD_GIB:g} GiB) and a KV cache of "
        f"{memory.kv_per_token / 1024:g} KiB a token ({facts.kv_formula(dtype_bytes, degree)}), which leaves "
        f"{tokens} tokens, fewer than max_model_len x max_num_seqs = {length} x {engine.max_num_seqs}; "
        f"{_fit_hint(facts, engine, wanted)}"
    )
    value: object
    holding = _copy_degrees_that_hold(settings, facts, dtype, engine, wanted) if tokens < 16 else []
    if holding:
        # A copy of more of the instance type's GPUs holds it: the copy's key to change.
        key, value = "accelerators", degree
        allowed = (
            f"{', '.join(str(d) for d in holding[:-1])}{' or ' if len(holding) > 1 else ''}{holding[-1]} (GPUs a "
            "copy, its tensor-parallel degree, whose memory holds the model and its KV cache)"
        )
    elif tokens < 16:  # the smallest max_model_len
        key, value, allowed = "instance_type", instance_type, "a GPU instance type that holds the model"
    elif tokens < length:
        key, allowed = "max_model_len", f"at most {tokens}"
        value = (
            engine.max_model_len
            if engine.max_model_len is not None
            else f"unset (the model's {facts.max_len_key}, {length})"
        )
    else:
        key, value, allowed = "max_num_seqs", engine.max_num_seqs, f"at most {tokens // length}"
    raise ConfigError(f"{settings.key(key)}={value!r} is invalid: allowed is {allowed}: {why}")


def _copy_degrees_that_hold(
    settings: LlmSettings, facts: ModelFacts, dtype: str, engine: VllmEngine, tokens: int
) -> list[int]:
    """The numbers of GPUs an inference component's copy may get on its instance type whose
    memory holds the model and `tokens` tokens of KV cache, smallest first ([] outside that mode)."""
    if settings.endpoint.inference_component is None:
        return []
    instance_type, utilization = settings.endpoint.instance_type, engine.gpu_memory_utilization
    degrees = facts.parallel_degrees(settings.endpoint.instance.gpus)
    return sorted(
        d
        for d in degrees
        if plan(facts, instance_type, degree=d, dtype=dtype, utilization=utilization).tokens >= tokens
    )


#: The ``llm`` section's defaults: GPT-J's endpoint (a 7B model's needs are alike) on the vllm
#: engine alone, on an A10G, any GPU family, the model named by ``model`` and ``revision``.
LLM = ModelProfile(
    section="llm",
    engines=("vllm",),
    endpoint_defaults={**ENDPOINT_DEFAULTS, "instance_type": "ml.g5.xlarge", "inference_ami_version": VLLM_AMI},
    names_model=True,
)


def read_section(section: Section, artifacts: Path) -> LlmSettings:
    """The ``llm`` section."""
    return read(section, artifacts, LLM)


__all__ = [
    "LLM",
    "VLLM_AMI",
    "LlmSettings",
    "ManifestError",
    "ModelProfile",
    "check_built",
    "check_hardware",
    "check_payload",
    "check_source",
    "copy_gpus",
    "payload_facts",
    "read",
    "read_section",
]
