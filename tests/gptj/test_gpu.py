"""model_fn on a GPU: fp16 weights placed on the device, served from there."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gptj.helpers import load_inference


def _nvidia_device() -> bool:
    """Whether the host has an NVIDIA device, without importing torch: collection runs in every
    pytest worker, and torch's import costs each several seconds of CPU."""
    return Path("/dev/nvidia0").exists()


@pytest.mark.gpu
@pytest.mark.skipif(not _nvidia_device(), reason="needs a CUDA GPU")
def test_model_fn_loads_fp16_onto_the_gpu(model_dir: Path) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU that this torch can use")
    inference = load_inference(model_dir)
    model = inference.model_fn(str(model_dir))
    params = list(model["model"].parameters())
    assert all(p.device.type == "cuda" and p.dtype == torch.float16 for p in params)
    (out,) = inference.predict_fn({"inputs": "Hello", "parameters": {"max_new_tokens": 4, "num_beams": 2}}, model)
    assert out["generated_text"].startswith("Hello")
