"""The DJL Serving LMI neuronx image (Inf2 on SageMaker) as a local container: the DJL front-end
stand-in of local_aws/images/lmi_entrypoint.py serving the bundle's ``model.py`` under ``.venv-lmi``,
the environment pinned to the image's transformers (serving/inf2/requirements-lmi.txt), with
transformers-neuronx replaced by its CPU stand-in (local_aws/images/neuronx_cpu.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from local_aws.sagemaker.containers import LOCAL_AWS, PROJECT_ROOT, Container, venv_python

LMI_VENV = PROJECT_ROOT / ".venv-lmi"
LMI_ENTRYPOINT = LOCAL_AWS / "images" / "lmi_entrypoint.py"
#: The image's repository (llm_inference_cdk.dlc.djl_neuronx: ``djl-inference:<v>-neuronx-sdk<s>``).
LMI_NEURONX_REPOSITORY = "/djl-inference:"


def is_lmi_neuronx(image: str) -> bool:
    return LMI_NEURONX_REPOSITORY in image and "-neuronx-" in image


class LmiContainer(Container):
    """The LMI neuronx image: DJL Serving's front end and Python worker around ``model.py``."""

    def command(self, run_dir: Path) -> Sequence[str]:
        return [str(venv_python(LMI_VENV, "the environment pinned to the LMI neuronx image")), str(LMI_ENTRYPOINT)]

    def process_environment(self, run_dir: Path) -> dict[str, str]:
        env = super().process_environment(run_dir)
        tmp = str(run_dir / "tmp")
        env.update(
            {
                "SAGEMAKER_BASE_DIR": str(self.base_dir),
                "TMPDIR": tmp,
                "HOME": str(run_dir),
                "PYTHONUNBUFFERED": "1",
                "PYTHONDONTWRITEBYTECODE": "1",
                # The image keeps the hub cache in /tmp/.cache (HF_HOME), on the ML storage volume.
                "HF_HOME": str(run_dir / "tmp" / ".cache"),
                # The handler's split checkpoint and compiled graphs (model.py: NEURON_CACHE_DIR).
                "NEURON_CACHE_DIR": str(run_dir / "tmp" / "neuron-cache"),
                # Nothing here reaches the hub: a bundle served locally ships its model (--tiny).
                "HF_HUB_OFFLINE": "1",
            }
        )
        return env
