"""The ``inf2`` section on ``platform`` ``sagemaker``: the bundle served by the LMI neuronx image
on a SageMaker endpoint of an ``ml.inf2`` type, through the construct library's
``SageMakerEndpoint``. Its endpoint settings are the SageMaker stacks' own keys
(project_config/endpoint.py), with defaults for OPT-13B on Inferentia2; the host's keys of
``platform`` ``ec2`` are refused here, and these are refused there, each by name."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from llm_contracts import inf2_sagemaker as sm
from llm_contracts.inf2 import NEURON_CORES
from llm_inference_cdk.endpoint_props import SageMakerEndpointProps
from project_config.endpoint import ALARM_KEYS, check_environment, mode_keys, read_endpoint
from project_config.reader import Section

PLATFORMS = ("ec2", "sagemaker")
#: The EC2 host's keys: its network, AMI and port (read on ``platform`` ``ec2`` alone).
EC2_KEYS = ("ami_ssm_parameter", "port", "ingress_cidr", "vpc_id", "subnet_id", "availability_zone", "vpc_cidr")
#: The endpoint's defaults for OPT-13B on ml.inf2 (llm_contracts/inf2_sagemaker.py says why).
ENDPOINT_DEFAULTS: dict[str, Any] = {
    # The EC2 recipe's instance, as SageMaker names it: 24 NeuronCores, three copies at degree 8.
    "instance_type": "ml.inf2.48xlarge",
    # A second instance when one fails or is replaced; a third is not needed to show scaling.
    "min_capacity": 1,
    "max_capacity": 2,
    # Requests a minute per instance: a starting point to measure (make loadtest), not a measurement.
    "target_invocations_per_instance": 60,
    # SageMaker's longest start and download: the first copy compiles the model in it.
    "startup_health_check_timeout_s": sm.MAX_STARTUP_S,
    "model_data_download_timeout_s": sm.MAX_DOWNLOAD_S,
    # Two copies of the weights (downloaded and split), the graphs and the container's files.
    "volume_size_gb": 128,
    "inference_ami_version": sm.NEURON_AMI,
    # A generation of the seed's 64 tokens takes seconds; SageMaker gives up at 60 s.
    "latency_ms": 20_000,
    # No GPU: SageMaker publishes no GPU (nor Neuron) memory metric for ml.inf2.
    "gpu_memory_percent": None,
    # From zero an instance downloads and compiles the model before it serves: keep one.
    "async_min_instances": 1,
    "async_max_instances": 2,
}
#: The handler's limit on a call on a real-time endpoint (``predict_timeout_s``): below SageMaker's
#: 60 s, as the GPT-2 server's ``request_timeout_s``.
REALTIME_PREDICT_TIMEOUT_S = 50
#: The bundle's serving.properties settings, which a container variable would override (DJL reads
#: OPTION_<NAME> over serving.properties): the bundle would then not be what the stack checked.
OPTION_PREFIX = "OPTION_"


@functools.cache
def endpoint_keys() -> frozenset[str]:
    """The keys of the endpoint's settings on ml.inf2: those of its modes, but not the inference
    component's nor the GPU alarm's, which no setting of this section can use (given, they are
    refused by name on platform sagemaker, and are unknown on ec2)."""
    scratch = Section("inf2", {})
    read_endpoint(scratch, ENDPOINT_DEFAULTS)
    unusable = (mode_keys("inference-component") - mode_keys("realtime")) | {ALARM_KEYS["gpu_memory_percent"]}
    return frozenset(scratch._read - unusable)


def refuse_other_platform(section: Section, platform: str) -> None:
    """A key of the other platform, given, is refused by name (and every key is recorded as read,
    so that the section's own check knows it)."""
    other, keys = (
        ("sagemaker", sorted(endpoint_keys() - {"instance_type", "volume_size_gb"}))
        if platform == "ec2"
        else ("ec2", list(EC2_KEYS))
    )
    for key in keys:
        if section.has(key):
            raise section.fail(
                key, section.get(key), f"unset on {section.key('platform')}={platform}: a setting of platform {other}"
            )


def read(section: Section, defaults: Mapping[str, Any]) -> SageMakerEndpointProps:
    """The endpoint's props on ``platform`` ``sagemaker``: an ml.inf2 type, a mode SageMaker
    documents for it, no GPU alarm, no container variable that overrides serving.properties."""
    mode = section.get("endpoint_mode")
    section.check(
        "endpoint_mode",
        mode,
        mode is None or mode in sm.MODES,
        f"{' or '.join(sm.MODES)} on ml.inf2 ({sm.MODES_SOURCE}; no page says how an inference component "
        "counts Inferentia2 devices)",
    )
    given = section.get("instance_type", as_text=True)
    types = ", ".join(sm.sagemaker_instance_type(t) for t in NEURON_CORES)
    section.check(
        "instance_type",
        given,
        given is None or str(given) in {sm.sagemaker_instance_type(t) for t in NEURON_CORES},
        f"an ml.inf2 type on platform sagemaker, SageMaker's name of the instance: {types} (the LMI neuronx image "
        "needs Inferentia2)",
    )
    endpoint = read_endpoint(section, {**ENDPOINT_DEFAULTS, **defaults})
    gpu_key = ALARM_KEYS["gpu_memory_percent"]
    section.check(
        gpu_key,
        section.get(gpu_key),
        not section.has(gpu_key),
        "unset on ml.inf2: it has no GPU, and SageMaker publishes no GPU or Neuron memory metric for it",
    )
    options = {name: "extra_properties" for name in endpoint.environment if name.startswith(OPTION_PREFIX)}
    check_environment(section, endpoint.environment, options)
    return endpoint
