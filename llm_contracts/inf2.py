"""The inf2 recipe's contract: the tensor-parallel rules for transformers-neuronx on
Inferentia2 (checked by the builder and at synthesis), and DJL Serving's ``serving.properties``
as the builder writes it into the bundle and the stack checks it against the settings.

The rules come from the Neuron documentation that the seed quotes:

* the attention-head count must be divisible by the tensor-parallel degree (each
  NeuronCore holds whole heads);
* the Neuron runtime supports only some degrees (inf2: 1, 2, 4, 8, 24; trn1: 1, 2, 8, 32),
  and a degree cannot exceed the NeuronCores of the instance;
* weights plus KV cache must fit in 16 GiB of HBM per NeuronCore times the degree;
* the weights in the serving precision, with a margin for the split copy the handler
  writes, must fit in the instance's host memory (the handler loads the whole model on
  the host before sharding it).

A model's head count and size come from its ``config.json`` when the bundle carries the
model (the artifacts builder records them in the bundle's manifest), else from
:data:`KNOWN_MODELS`. Every problem names the setting, its value and the fix. Standard
library only: synthesis imports this module.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol

#: NeuronCore-v2 count per instance type (2 per Inferentia2 chip).
NEURON_CORES = {"inf2.xlarge": 2, "inf2.8xlarge": 2, "inf2.24xlarge": 12, "inf2.48xlarge": 24}
#: Degrees the Neuron runtime supports for tensor parallelism, per instance family.
ALLOWED_DEGREES = {"inf2": (1, 2, 4, 8, 24), "trn1": (1, 2, 8, 32)}
HBM_PER_CORE_BYTES = 16 * 2**30
#: Host memory (GiB) per instance type.
HOST_MEMORY_GIB = {"inf2.xlarge": 16, "inf2.8xlarge": 128, "inf2.24xlarge": 384, "inf2.48xlarge": 768}
#: Host memory needed per byte of weights: the loaded model plus the split copy being written.
HOST_MEMORY_MARGIN = 1.2
DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4}
GIB = 2**30


@dataclass(frozen=True, kw_only=True)
class ModelFacts:
    """What the rules need to know about a decoder-only model."""

    num_attention_heads: int
    num_key_value_heads: int
    num_hidden_layers: int
    hidden_size: int
    num_parameters: int
    max_position_embeddings: int
    #: Where the facts come from, for error messages.
    source: str = "the table of known models"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelFacts:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def _opt(layers: int, hidden: int, heads: int, params: float) -> ModelFacts:
    return ModelFacts(
        num_attention_heads=heads,
        num_key_value_heads=heads,
        num_hidden_layers=layers,
        hidden_size=hidden,
        num_parameters=int(params),
        max_position_embeddings=2048,
    )


#: Published configurations of the models the seed's recipe serves (OPT, Meta's model cards).
KNOWN_MODELS: dict[str, ModelFacts] = {
    "facebook/opt-125m": _opt(12, 768, 12, 125.2e6),
    "facebook/opt-350m": _opt(24, 1024, 16, 331.2e6),
    "facebook/opt-1.3b": _opt(24, 2048, 32, 1.316e9),
    "facebook/opt-2.7b": _opt(32, 2560, 32, 2.652e9),
    "facebook/opt-6.7b": _opt(32, 4096, 32, 6.658e9),
    "facebook/opt-13b": _opt(40, 5120, 40, 12.853e9),
    "facebook/opt-30b": _opt(48, 7168, 56, 29.975e9),
    "facebook/opt-66b": _opt(64, 9216, 72, 65.7e9),
}


def facts_from_config(config: Mapping[str, Any], *, source: str) -> ModelFacts:
    """Facts from a Hugging Face ``config.json`` (OPT, GPT-2, GPT-J and Llama key names).
    The parameter count is estimated from the shapes: decoder blocks plus embeddings."""

    def first(*keys: str) -> int:
        for key in keys:
            value = config.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        raise ValueError(f"{source} has none of {', '.join(keys)}: not a decoder config.json this stack can serve")

    heads = first("num_attention_heads", "n_head")
    hidden = first("hidden_size", "n_embd", "d_model")
    layers = first("num_hidden_layers", "n_layer")
    vocab = first("vocab_size")
    positions = first("max_position_embeddings", "n_positions", "n_ctx")
    kv_heads = config.get("num_key_value_heads") or heads
    ffn = config.get("ffn_dim") or config.get("intermediate_size") or config.get("n_inner") or 4 * hidden
    head_dim = hidden // heads
    attention = hidden * hidden * 2 + 2 * hidden * kv_heads * head_dim
    per_layer = attention + 2 * hidden * ffn
    embeddings = vocab * hidden * (1 if config.get("tie_word_embeddings", True) else 2)
    return ModelFacts(
        num_attention_heads=heads,
        num_key_value_heads=int(kv_heads),
        num_hidden_layers=layers,
        hidden_size=hidden,
        num_parameters=layers * per_layer + embeddings + positions * hidden,
        max_position_embeddings=positions,
        source=source,
    )


def memory_bytes(facts: ModelFacts, *, dtype: str, n_positions: int, batch_size: int) -> tuple[int, int]:
    """(weights, KV cache) in bytes: every parameter in `dtype`, and a key and a value
    vector per layer, position, sequence and KV head."""
    width = DTYPE_BYTES[dtype]
    head_dim = facts.hidden_size // facts.num_attention_heads
    kv_cache = 2 * facts.num_hidden_layers * n_positions * batch_size * facts.num_key_value_heads * head_dim * width
    return facts.num_parameters * width, kv_cache


def copies_loaded_in_turn(*, instance_type: str, degree: int, extra_properties: Mapping[str, str]) -> int:
    """How many model loads DJL Serving 0.29.0 runs one after another before it opens its port
    (read in deepjavalibrary/djl-serving at tag v0.29.0). It loads one copy per `degree`
    NeuronCores of the instance, each a worker on its own cores (wlm/.../ModelInfo.java,
    getLoadOnDevices: NeuronCores / degree, floored), or one per device that a
    ``load_on_devices`` property lists; one after another unless ``option.parallel_loading`` is
    true (serving/.../models/ModelManager.java, registerWorkflow); and binds its port only once
    every load is done (serving/.../ModelServer.java, loadModels: wait_model_loading defaults to
    true). Each load may take ``option.model_loading_timeout`` (engines/python/.../PyModel.java)."""
    listed = extra_properties.get("load_on_devices", "*")
    copies = NEURON_CORES[instance_type] // degree if listed == "*" else len(listed.split(";"))
    parallel = extra_properties.get("option.parallel_loading", "false").lower() == "true"
    return 1 if parallel else max(copies, 1)


def instance_problems(*, instance_type: str, degree: int, prefix: str = "") -> list[str]:
    """The rules that depend on the instance alone; `instance_type` in EC2's naming, shown with
    `prefix` (``ml.``: SageMaker's names of the same types)."""
    family = instance_type.split(".")[0]
    if family not in ALLOWED_DEGREES or instance_type not in NEURON_CORES:
        return [
            f"inf2.instance_type={prefix + instance_type!r} is invalid: the DJL neuronx container needs an inf2 "
            f"instance; use one of {', '.join(prefix + t for t in NEURON_CORES)}"
        ]
    problems = []
    allowed = ALLOWED_DEGREES[family]
    if degree not in allowed:
        problems.append(
            f"inf2.tensor_parallel_degree={degree} is invalid: the Neuron runtime supports degrees "
            f"{', '.join(map(str, allowed))} on {family}; use one of these"
        )
    cores = NEURON_CORES[instance_type]
    if degree > cores:
        bigger = [prefix + t for t, n in NEURON_CORES.items() if n >= degree]
        problems.append(
            f"inf2.tensor_parallel_degree={degree} is invalid: {prefix}{instance_type} has only {cores} NeuronCores; "
            f"lower the degree to at most {cores}" + (f" or use {' or '.join(bigger)}" if bigger else "")
        )
    return problems


def model_problems(
    facts: ModelFacts,
    *,
    model_id: str,
    degree: int,
    dtype: str,
    n_positions: int,
    batch_size: int,
    instance_type: str | None = None,
    prefix: str = "",
) -> list[str]:
    """The rules that depend on the model and the server settings; a degree the fix asks for
    that `instance_type` (as for :func:`instance_problems`) cannot hold names the types that can."""
    problems = []
    heads = facts.num_attention_heads
    if heads % degree:
        divisors = [d for d in ALLOWED_DEGREES["inf2"] if heads % d == 0]
        problems.append(
            f"inf2.tensor_parallel_degree={degree} is invalid: {model_id} has {heads} attention heads "
            f"({facts.source}), which must be divisible by the degree; use one of {', '.join(map(str, divisors))}"
        )
    if n_positions > facts.max_position_embeddings:
        problems.append(
            f"inf2.n_positions={n_positions} is invalid: {model_id} has {facts.max_position_embeddings} "
            f"positions ({facts.source}); use at most {facts.max_position_embeddings}"
        )
    weights, kv_cache = memory_bytes(facts, dtype=dtype, n_positions=n_positions, batch_size=batch_size)
    budget = HBM_PER_CORE_BYTES * degree
    if weights + kv_cache > budget:
        needed = -(-(weights + kv_cache) // HBM_PER_CORE_BYTES)
        larger = [d for d in ALLOWED_DEGREES["inf2"] if d >= needed and heads % d == 0]
        fix = f"raise the degree to {larger[0]}" if larger else "use a smaller model"
        if larger and instance_type in NEURON_CORES and larger[0] > NEURON_CORES[instance_type]:
            holders = [prefix + t for t, n in NEURON_CORES.items() if n >= larger[0]]
            fix += f" on {' or '.join(holders)} ({prefix}{instance_type} has {NEURON_CORES[instance_type]} NeuronCores)"
        problems.append(
            f"inf2.tensor_parallel_degree={degree} is invalid: {model_id} needs "
            f"{weights / GIB:.1f} GiB of {dtype} weights plus {kv_cache / GIB:.1f} GiB of KV cache "
            f"(n_positions={n_positions}, batch_size={batch_size}), more than the {budget / GIB:.0f} GiB of "
            f"{degree} NeuronCores (16 GiB each); {fix}, or lower n_positions or batch_size"
        )
    return problems


def host_memory_problems(
    facts: ModelFacts, *, model_id: str, instance_type: str, dtype: str, prefix: str = ""
) -> list[str]:
    """The weights, loaded on the host in `dtype`, with the margin, must fit in its memory
    (`instance_type` and `prefix` as for :func:`instance_problems`)."""
    if instance_type not in HOST_MEMORY_GIB:
        return []  # instance_problems names the instance type
    weights = facts.num_parameters * DTYPE_BYTES[dtype]
    needed = weights * HOST_MEMORY_MARGIN
    available = HOST_MEMORY_GIB[instance_type] * GIB
    if needed <= available:
        return []
    bigger = [prefix + t for t, gib in HOST_MEMORY_GIB.items() if gib * GIB >= needed]
    fixes = [f"use {' or '.join(bigger)}"] if bigger else []
    smaller = [d for d, width in DTYPE_BYTES.items() if width < DTYPE_BYTES[dtype]]
    if smaller and facts.num_parameters * DTYPE_BYTES[smaller[0]] * HOST_MEMORY_MARGIN <= available:
        fixes.append(f"set inf2.dtype={smaller[0]}")
    fixes.append("use a smaller model")
    return [
        f"inf2.instance_type={prefix + instance_type!r} is invalid: {model_id} needs about {needed / GIB:.1f} GiB of "
        f"host memory to load its {weights / GIB:.1f} GiB of {dtype} weights (x{HOST_MEMORY_MARGIN} for the split "
        f"copy), more than the {HOST_MEMORY_GIB[instance_type]} GiB of {prefix}{instance_type}; {', or '.join(fixes)}"
    ]


#: What the root volume holds besides the model: the Neuron DLAMI (about 100 GB) and the DJL
#: LMI neuronx image, pulled onto it (about 20 GB).
VOLUME_BASE_GB = 120
#: The compiled Neuron graphs, as a share of the weights (a margin: their size varies with the
#: degree, batch size and positions).
COMPILED_SHARE = 0.1


def volume_problems(
    facts: ModelFacts, *, model_id: str, dtype: str, volume_size_gb: int, bundle_bytes: int
) -> list[str]:
    """The root volume must hold the DLAMI and the image, the bundle as downloaded, the model's
    checkpoint (extracted from the bundle, or downloaded from the hub) and its split copy in
    `dtype`, and the compiled graphs."""
    weights = facts.num_parameters * DTYPE_BYTES[dtype]
    parts = {
        "the DLAMI and the DJL image": VOLUME_BASE_GB * 10**9,
        "the bundle as downloaded": bundle_bytes,
        f"the {dtype} checkpoint and its split copy": 2 * weights,
        "the compiled graphs": COMPILED_SHARE * weights,
    }
    needed = -(-int(sum(parts.values())) // 10**9)
    if volume_size_gb >= needed:
        return []
    spelled = ", ".join(f"{what} ({size / 10**9:.0f} GB)" for what, size in parts.items())
    return [f"inf2.volume_size_gb={volume_size_gb} is invalid: allowed is at least {needed} for {model_id}: {spelled}"]


#: The model served when inf2.model_id is unset and the bundle ships none.
DEFAULT_MODEL = "facebook/opt-13b"
#: Hub commits pinned by default: a commit's files never change, where a branch ("main") moves.
#: facebook/opt-13b's main as of this writing (it has not moved since its weights were sharded).
PINNED_REVISIONS = {DEFAULT_MODEL: "e515202d1e7750da62d245fbccb2723b9c1790f5"}
#: A full commit hash: what the hub's revisions must be here (branches and tags move).
COMMIT = re.compile(r"^[0-9a-f]{40}$")
#: The bundle's list of the hub files the handler downloads, with their sha256 and size
#: (``{"repo", "revision", "files": {name: {"sha256", "size"}}}``); serving/inf2/model.py reads it.
HUB_FILES = "hub-files.json"


def known_model(model_id: str) -> ModelFacts | None:
    return KNOWN_MODELS.get(model_id)


def unknown_model_message(model_id: str) -> str:
    return (
        f"inf2.model_id={model_id!r} is invalid for synthesis-time checks: its head count and size are "
        "unknown; build the bundle from a local copy of the model (python -m artifacts_builder inf2 "
        "--model-dir PATH) so that its config.json is read, or use one of " + ", ".join(KNOWN_MODELS)
    )


class ServingOptions(Protocol):
    """The settings that go into serving.properties (the app's inf2 model server settings)."""

    @property
    def entry_point(self) -> str: ...

    @property
    def tensor_parallel_degree(self) -> int: ...

    @property
    def n_positions(self) -> int: ...

    @property
    def dtype(self) -> str: ...

    @property
    def model_loading_timeout_s(self) -> int: ...

    @property
    def predict_timeout_s(self) -> int: ...

    @property
    def rolling_batch(self) -> str: ...

    @property
    def batch_size(self) -> int: ...

    @property
    def max_batch_delay_ms(self) -> int: ...

    @property
    def extra_properties(self) -> Mapping[str, str]: ...


def serving_properties(ms: ServingOptions, *, model_id: str, revision: str | None = None) -> dict[str, str]:
    """`serving.properties` as DJL Serving reads it. ``batch_size`` and ``max_batch_delay``
    are DJL's request batching; ``option.batch_size`` is the compiled batch of the model.
    `revision`: the hub commit of a model the instance downloads (None: the bundle ships it)."""
    props = {
        "engine": "Python",
        "option.entryPoint": ms.entry_point,
        "option.model_id": model_id,
        **({"option.revision": revision} if revision is not None else {}),
        "option.tensor_parallel_degree": str(ms.tensor_parallel_degree),
        "option.n_positions": str(ms.n_positions),
        "option.dtype": ms.dtype,
        "option.model_loading_timeout": str(ms.model_loading_timeout_s),
        "option.predict_timeout": str(ms.predict_timeout_s),
        "option.rolling_batch": ms.rolling_batch,
    }
    if ms.rolling_batch == "disable":
        props["option.batch_size"] = props["batch_size"] = str(ms.batch_size)
        props["max_batch_delay"] = str(ms.max_batch_delay_ms)
    else:
        props["option.max_rolling_batch_size"] = str(ms.batch_size)
    props.update(ms.extra_properties)
    return props


def render_properties(props: Mapping[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in props.items())


def stale_properties(built: Mapping[str, str], wanted: Mapping[str, str]) -> list[str]:
    """The properties in which a built bundle differs from the current settings."""
    return [
        f"{key}: bundle {built.get(key)!r}, settings {wanted.get(key)!r}"
        for key in sorted(set(built) | set(wanted))
        if built.get(key) != wanted.get(key)
    ]


# --- the Neuron DLAMI the host boots ---------------------------------------------------------------


@dataclass(frozen=True)
class DlamiParameter:
    """A public SSM parameter AWS publishes a Neuron DLAMI's image id under."""

    #: The Neuron SDK release of the last image it names, for a parameter AWS no longer updates
    #: (None: it follows each release).
    frozen_at: str | None
    #: The Neuron driver (aws-neuronx-dkms) of that last image (None: the newest release's).
    driver: str | None
    #: Where AWS says so.
    source: str


_NEURON_DOCS = "aws-neuron/aws-neuron-sdk at 81ce03ae (Neuron 2.32.0, 2026-08-17)"
_SUPPORTED = f"{_NEURON_DOCS}: deploy/environments/dlami.rst, the SSM parameter prefixes of supported DLAMIs"
#: The Neuron DLAMI parameters AWS publishes (``<prefix>/latest/image_id``: AWS publishes only
#: ``latest``): the supported prefixes, which follow each Neuron release, and the Ubuntu 22.04
#: base DLAMI's, frozen on its last image, which Neuron's release notes say stays retrievable.
#: The Ubuntu 22.04 multi-framework DLAMI (the stack's parameter before 2026-12) is no longer
#: published from Neuron 2.29.0 (release-notes/components/dlamis.rst): it is not listed.
NEURON_DLAMI_PARAMETERS: dict[str, DlamiParameter] = {
    **{
        f"/aws/service/neuron/dlami/{prefix}/latest/image_id": DlamiParameter(None, None, _SUPPORTED)
        for prefix in (
            "multi-framework/ubuntu-24.04",
            "jax-0.10/amazon-linux-2023",
            "jax-0.10/ubuntu-24.04",
            "pytorch-inference-vllm-0.24.0.1.1.0/ubuntu-24.04",
            "base/amazon-linux-2023",
            "base/ubuntu-24.04",
        )
    },
    "/aws/service/neuron/dlami/base/ubuntu-22.04/latest/image_id": DlamiParameter(
        "2.29.1",
        "2.27.4",
        f"{_NEURON_DOCS}: release-notes/components/dlamis.rst (Neuron 2.30.0: no longer supported, the last "
        "image retrievable via this parameter); src/helperscripts/n2-manifest.json (2.29.1: aws-neuronx-dkms "
        "2.27.4.0)",
    ),
}
#: The parameter Inf2Server boots from by default: the newest Neuron DLAMI whose driver runs the
#: pinned LMI image's Neuron runtime (SDK 2.19.1: aws-neuronx-runtime-lib 2.21.41). The driver
#: "remains backwards compatible with older versions of Neuron Runtime" (neuron-runtime/
#: nrt-troubleshoot.rst), except that Neuron 2.31's driver 2.29 "requires Neuron Runtime Library
#: 2.33 or later" (release-notes/components/runtime.rst), and no later note lifts that: every
#: parameter that follows the releases now names an image with driver 2.30.2 (Neuron 2.32.0).
#: The Ubuntu 22.04 base DLAMI's, frozen at Neuron 2.29.1 with driver 2.27.4, is the newest
#: image before it. Frozen: no more fixes reach it (docs/IMAGES.md).
NEURON_DLAMI = "/aws/service/neuron/dlami/base/ubuntu-22.04/latest/image_id"
