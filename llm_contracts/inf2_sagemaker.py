"""The inf2 bundle on a SageMaker endpoint of an ``ml.inf2`` type (``inf2.platform=sagemaker``):
what SageMaker offers there, its limits, and the budgets of time and storage that loading and
compiling the model need, checked at synthesis. Standard library only: synthesis imports it.

Sources (each read on 2026-12-04):

* the modes: SageMaker hosts ``ml.inf2`` for "real-time and asynchronous inference" (AWS
  Machine Learning Blog, "Achieve high performance with lowest cost for generative AI
  inference using AWS Inferentia2 and AWS Trainium on Amazon SageMaker"); deployment
  guardrails exclude only Marketplace containers and Inf1 (sagemaker/latest/dg/
  deployment-guardrails-exclusions.html). Inference components are left out: their
  ``NumberOfAcceleratorDevicesRequired`` "include[s] GPUs and AWS Inferentia", but no page we
  found says whether it counts Inferentia2 chips or NeuronCores, which decides how many copies
  fit and how DJL's NeuronCores are split;
* the limits: botocore's ``ProductionVariant`` (``ContainerStartupHealthCheckTimeoutInSeconds``
  and ``ModelDataDownloadTimeoutInSeconds`` 60-3600, ``VolumeSizeInGB`` 1-512) and its
  ``ProductionVariantInferenceAmiVersion`` (``al2-ami-sagemaker-inference-neuron-2``:
  "Accelerator: Inferentia2 and Trainium, Neuron driver version: 2.19");
* ml.inf2 has no instance storage (EC2's inf2 types are EBS-only), so the endpoint takes an ML
  storage volume, as Hugging Face's own SageMaker examples on ml.inf2 set one;
* the model data: LMI documents it for SageMaker as an uncompressed S3 prefix with
  ``serving.properties`` at its top, "useful when deploying SageMaker endpoints with network
  isolation" (djl-serving v0.29.0, serving/docs/lmi/deployment_guide/deploying-your-endpoint.md);
* the time: DJL's ``option.model_loading_timeout`` (1800 s by default) bounds one load of one
  copy, and "on SageMaker, if you set this value, you should also set
  container_startup_health_check_timeout=<at least model loading timeout>" (djl-serving v0.29.0,
  serving/docs/lmi/deployment_guide/configurations.md). For a model of OPT-13B's size there is no
  published measurement of the load and compilation on Inferentia2; DJL's own integration tests
  of this image give one load of Llama-2-13B (the same 40 layers and 5120 hidden size) 3600 s,
  and GPT-J 6B 2400 s (tests/integration/llm/prepare.py at v0.29.0). SageMaker's ceiling for the
  whole start is also 3600 s, so the first copy gets all of it but :data:`START_MARGIN_S`, and the
  copies after it reuse its split checkpoint and compiled graphs from the instance's cache
  (serving/inf2/model.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_contracts.inf2 import COMPILED_SHARE

#: The endpoint modes SageMaker documents for ml.inf2 (the module's docstring).
MODES = ("realtime", "async")
#: Where those modes are documented.
MODES_SOURCE = (
    "SageMaker hosts ml.inf2 for real-time and asynchronous inference (AWS ML Blog, 'Achieve high performance "
    "with lowest cost for generative AI inference using AWS Inferentia2 and AWS Trainium on Amazon SageMaker')"
)
#: SageMaker's Neuron inference AMI: Neuron driver 2.19, which runs the LMI neuronx 0.29.0 image's
#: runtime (SDK 2.19.1: the driver stays compatible with older runtimes, nrt-troubleshoot.rst) and
#: does not move under a deployed endpoint as the family's default AMI may.
NEURON_AMI = "al2-ami-sagemaker-inference-neuron-2"
#: botocore's ProductionVariant limits.
MAX_STARTUP_S = 3600
MAX_DOWNLOAD_S = 3600
MAX_VOLUME_GB = 512
#: What DJL does before the first load starts: the JVM, the Python worker, the bundle's pip
#: requirements. A choice, not a measurement on SageMaker: the EC2 host allows 900 s for this and
#: for pulling the image (project_config.inf2.START_MARGIN_S).
START_MARGIN_S = 300
#: SageMaker ends a real-time invocation after 60 s (the caller gets an error).
REALTIME_INVOCATION_S = 60
#: The ML storage volume besides the model: the container's own files and logs, the hub's small
#: files, the interpreter caches.
VOLUME_BASE_GB = 5


def sagemaker_instance_type(instance_type: str) -> str:
    """``inf2.48xlarge`` or ``ml.inf2.48xlarge`` as SageMaker names it: ``ml.inf2.48xlarge``."""
    return instance_type if instance_type.startswith("ml.") else f"ml.{instance_type}"


def ec2_instance_type(instance_type: str) -> str:
    """The EC2 name of an instance type given either way (the NeuronCore tables use it)."""
    return instance_type.removeprefix("ml.")


def timeout_problems(*, model_loading_timeout_s: int, startup_s: int, mode: str, predict_timeout_s: int) -> list[str]:
    """DJL's per-load limit against SageMaker's health check, and the handler's per-call limit
    against SageMaker's real-time invocation limit; each problem names its key."""
    problems = []
    if model_loading_timeout_s + START_MARGIN_S > startup_s:
        problems.append(
            f"inf2.model_loading_timeout_s={model_loading_timeout_s} is invalid: allowed is at most "
            f"{startup_s - START_MARGIN_S}: SageMaker fails the instance when /ping has not answered within "
            f"inf2.startup_health_check_timeout_s ({startup_s} s, at most {MAX_STARTUP_S}), and DJL opens its port "
            f"only after its last load, {START_MARGIN_S} s after the container starts at the earliest"
        )
    if mode == "realtime" and predict_timeout_s >= REALTIME_INVOCATION_S:
        problems.append(
            f"inf2.predict_timeout_s={predict_timeout_s} is invalid: allowed is at most {REALTIME_INVOCATION_S - 1} "
            f"on a real-time endpoint: SageMaker answers the caller with an error after {REALTIME_INVOCATION_S} s "
            "while the model goes on generating (or use inf2.endpoint_mode=async)"
        )
    return problems


@dataclass(frozen=True)
class VolumePart:
    what: str
    gb: float


def volume_parts(*, weights_bytes: int, bundle_bytes: int, downloads_weights: bool) -> list[VolumePart]:
    """What the ML storage volume holds: the model data SageMaker copies (the bundle's files),
    the weights the container downloads from the hub (a bundle without them), the handler's
    split checkpoint (one copy of the weights in the serving precision) and the compiled graphs
    (a tenth of the weights: llm_contracts.inf2.COMPILED_SHARE's margin)."""
    parts = [
        VolumePart("the container's own files", VOLUME_BASE_GB),
        VolumePart("the bundle as SageMaker copies it", bundle_bytes / 1e9),
    ]
    if downloads_weights:
        parts.append(VolumePart("the weights downloaded from the hub", weights_bytes / 1e9))
    parts += [
        VolumePart("the split checkpoint", weights_bytes / 1e9),
        VolumePart("the compiled graphs", COMPILED_SHARE * weights_bytes / 1e9),
    ]
    return parts


def volume_problems(*, volume_size_gb: int, model_id: str, parts: list[VolumePart]) -> list[str]:
    needed = -(-int(sum(p.gb for p in parts) * 1e9) // 10**9)
    if volume_size_gb >= needed:
        return []
    spelled = ", ".join(f"{p.what} ({p.gb:.0f} GB)" for p in parts)
    fix = "" if needed <= MAX_VOLUME_GB else f"; more than SageMaker's {MAX_VOLUME_GB} GB: serve a smaller model"
    return [
        f"inf2.volume_size_gb={volume_size_gb} is invalid: allowed is at least {needed} for {model_id} on "
        f"SageMaker: {spelled}{fix}"
    ]
