"""Helpers of the GPT-2 tests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Quantized:
    """The tiny model built with one `--cpu-precision` (its gate passed, or the build failed)."""

    out: Path
    tar: Path
    model_dir: Path
