"""The ``gptj`` section: GPT-J 6B on a SageMaker endpoint with the Hugging Face inference image."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from llm_contracts import instances
from llm_inference_cdk.dlc import ImageResolutionError, huggingface_inference
from llm_inference_cdk.endpoint_props import SageMakerEndpointProps
from llm_inference_cdk.props import PropError, instance_of, integer, invalid, prop, text, validate
from project_config.endpoint import (
    ALARM_EMAIL,
    TOPIC_ARN,
    check_environment,
    check_family,
    check_notifications,
    read_endpoint,
)
from project_config.gpt2 import ECR_URI
from project_config.reader import Section, read_props

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


@dataclass(frozen=True, kw_only=True)
class HuggingFaceImage:
    """The Hugging Face PyTorch inference DLC, resolved from the sagemaker SDK's image JSON."""

    transformers_version: str = prop("4.51.3", check=text(_VERSION, what="a version such as 4.51.3"))
    pytorch_version: str = prop("2.6.0", check=text(_VERSION, what="a version such as 2.6.0"))
    py_version: str = prop("py312", check=text(re.compile(r"^py3[0-9]+$"), what="py3xx"))

    def __post_init__(self) -> None:
        validate(self)


@dataclass(frozen=True, kw_only=True)
class GptjSettings:
    endpoint: SageMakerEndpointProps = prop(check=instance_of(SageMakerEndpointProps))
    hf_image: HuggingFaceImage = prop(check=instance_of(HuggingFaceImage))
    #: The payload folder (shipped uncompressed under an S3 prefix) or a model.tar.gz
    #: (None: ``<artifacts_dir>/gptj/model``).
    model_data: Path = prop(check=instance_of(Path))
    #: An explicit image URI that replaces the resolved Hugging Face image (None: resolve).
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
        gpus = max(1, instances.gpus(self.endpoint.instance_type))
        if self.model_server_workers > gpus:
            yield invalid(
                self,
                "model_server_workers",
                f"at most {gpus}: {self.endpoint.instance_type} has {gpus} GPU{'s' if gpus > 1 else ''}, and each "
                "worker loads its own 12 GB copy of the weights onto a GPU of its own",
            )

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


def read(section: Section, artifacts: Path) -> GptjSettings:
    endpoint = read_endpoint(section, ENDPOINT_DEFAULTS)
    check_family(section, endpoint, GPTJ_FAMILIES, "GPUs with at least 16 GB for 12 GB of fp16 weights")
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
        hf_image=hf_image,
    )
    check_environment(
        section,
        endpoint.environment,
        {
            "HF_TASK": "",
            "SAGEMAKER_PROGRAM": "",
            "SAGEMAKER_MODEL_SERVER_WORKERS": "model_server_workers",
            "SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS": "model_server_timeout_s",
            # Refused too: Multi Model Server reads it as minutes.
            "SAGEMAKER_MODEL_SERVER_TIMEOUT": "model_server_timeout_s (in seconds; MMS reads this variable as minutes)",
        },
    )
    check_notifications(section, settings.alarm_topic_arn, settings.alarm_email)
    section.done()
    return settings
