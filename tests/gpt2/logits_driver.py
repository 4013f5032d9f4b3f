"""Prints, as JSON, the logits of a payload's ONNX Runtime graph for a fixed batch of prompts.

Run by tests/gpt2/test_int8.py under an emulated CPU (``qemu-x86_64 -cpu Haswell-noTSX``: AVX2,
no AVX-512, no VNNI), where ONNX Runtime picks the kernels of that CPU, and on this one; only
numpy and ONNX Runtime are imported, so that the emulated run stays short.

    python tests/gpt2/logits_driver.py MODEL_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    import numpy as np

    from serving.gpt2.backends import OnnxRuntimeBackend
    from serving.gpt2.generation import ModelInfo

    model_dir = Path(sys.argv[1])
    backend = OnnxRuntimeBackend(model_dir, ModelInfo.load(model_dir), threads=1)
    ids = np.random.default_rng(0).integers(5, 200, size=(10, 12)).astype(np.int64)
    positions = np.broadcast_to(np.arange(ids.shape[1]), ids.shape).copy()
    logits, _ = backend.forward(ids, np.ones_like(ids), positions, None)
    print(json.dumps(logits.astype(float).tolist()))


if __name__ == "__main__":
    main()
