"""The ``gpt2`` section: GPT-2 on a SageMaker endpoint, served from this project's container."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llm_contracts import instances
from llm_contracts.aws import ECR_IMAGE
from llm_contracts.manifest import read_manifest
from llm_inference_cdk.endpoint_props import SageMakerEndpointProps
from llm_inference_cdk.props import instance_of, optional, prop, text, validate
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
from project_config.reader import PROJECT_ROOT, ConfigError, Section, read_props
from serving.gpt2.settings import ServerSettings, stack_settings

#: The endpoint's defaults for this model (the seed's 600 ms latency bar among them).
ENDPOINT_DEFAULTS = {
    "instance_type": "ml.g5.xlarge",
    "max_capacity": 4,
    "target_invocations_per_instance": 600,
    "startup_health_check_timeout_s": 600,
    "model_data_download_timeout_s": 600,
    "latency_ms": 600,
    # An inference component: a copy per GPU; the server's workers share its CPUs.
    "max_copies": 4,
    "target_invocations_per_copy": 600,
    "cpu_cores": 2,
    "memory_mb": 4096,
    "async_max_instances": 4,
}
ECR_URI = optional(
    text(ECR_IMAGE, what="an ECR image URI: <account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag>")
)


@dataclass(frozen=True, kw_only=True)
class Gpt2Settings:
    endpoint: SageMakerEndpointProps = prop(check=instance_of(SageMakerEndpointProps))
    #: The server's settings, which reach the container as its environment.
    server: ServerSettings = prop(check=instance_of(ServerSettings))
    #: The packaged model.tar.gz (None: ``<artifacts_dir>/gpt2/model.tar.gz``).
    model_data: Path = prop(check=instance_of(Path))
    #: Folder of the container image (Dockerfile, serve, nginx.conf, ...).
    container_dir: Path = prop(PROJECT_ROOT / "serving" / "gpt2", check=instance_of(Path))
    #: An ECR image URI to use instead of building the container folder (None: build it).
    image_uri: str | None = prop(None, check=ECR_URI)
    #: An SNS topic the alarms notify, on ALARM and OK (None: the stack's own encrypted topic).
    alarm_topic_arn: str | None = prop(None, check=TOPIC_ARN)
    #: An e-mail address subscribed to the stack's own alarm topic (None: no subscription).
    alarm_email: str | None = prop(None, check=ALARM_EMAIL)

    def __post_init__(self) -> None:
        validate(self)

    def container_environment(self) -> dict[str, str]:
        """The variables the container's settings come from (serving/gpt2/settings.py)."""
        return self.server.to_environment()


def read(section: Section, artifacts: Path) -> Gpt2Settings:
    requested = section.get("instance_type", as_text=True)
    if isinstance(requested, str) and requested.split(".")[1:2] in (["p3"], ["p3dn"]):
        raise ConfigError(
            f"gpt2.instance_type={requested!r} is invalid: TensorRT 10.5 and later no longer "
            "support Volta (V100) GPUs, so the seed's ml.p3 cannot run the engine; use ml.g5.xlarge "
            "(A10G) or ml.g4dn.xlarge (T4)"
        )
    endpoint = read_endpoint(section, ENDPOINT_DEFAULTS)
    check_family(section, endpoint, instances.TENSORRT_FAMILIES, "GPUs that TensorRT 10 supports")
    server = read_props(
        section,
        ServerSettings,
        only=[field.name for field in stack_settings()],
        require_gpu=endpoint.instance.gpus > 0,
    )
    settings = read_props(
        section,
        Gpt2Settings,
        defaults={"model_data": artifacts / "gpt2" / "model.tar.gz"},
        endpoint=endpoint,
        server=server,
    )
    variables = {var: field for field, var in _variables().items()}
    check_environment(section, endpoint.environment, {var: variables.get(var, "") for var in server.to_environment()})
    check_notifications(section, settings.alarm_topic_arn, settings.alarm_email)
    section.done()
    return settings


def _variables() -> dict[str, str]:
    """Each stack setting of the server and its environment variable; require_gpu follows the
    instance type."""
    names = {field.name: field.metadata["env"] for field in stack_settings()}
    return {**names, "instance_type": "GPT2_REQUIRE_GPU"}


def check_payload(settings: Gpt2Settings) -> None:
    """The settings against the built payload, once the stack is synthesized: ManifestError (the
    stack is left out) when it is not built, ConfigError when the volume cannot hold it or the
    server's batches outgrow it."""
    require_payload(settings.model_data, "gpt2.model_data", "gpt2")
    check_volume("gpt2", settings.endpoint, settings.model_data)
    _check_batch_size(settings)


def _check_batch_size(settings: Gpt2Settings) -> None:
    """The ONNX graph and engine accept batches up to the size they were built for: a larger
    setting would only fail when the endpoint starts, minutes into the deploy."""
    built = read_manifest(settings.model_data.parent).get("generation", {}).get("max_batch_size")
    wanted = settings.server.max_batch_size
    if built is not None and wanted > built:
        raise ConfigError(
            f"gpt2.max_batch_size={wanted} is invalid: {settings.model_data} was built for batches of at most "
            f"{built}; lower the setting or rebuild with `python -m artifacts_builder gpt2 --max-batch-size {wanted}`"
        )
