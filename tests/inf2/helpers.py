"""Helpers of the inf2 tests."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def builder_args(out: Path, *extra: str) -> argparse.Namespace:
    from artifacts_builder.__main__ import build_parser

    return build_parser().parse_args(["inf2", "--out", str(out), *extra])


def stand_in_artifacts(root: Path) -> None:
    """The other stacks only hash and upload their payloads: small stand-ins do."""
    from tests.infra.helpers import make_artifacts

    make_artifacts(root, components=("gpt2", "gptj"))


def cdk_context(artifacts: Path, **overrides: Any) -> dict[str, Any]:
    context: dict[str, Any] = json.loads((ROOT / "cdk.json").read_text())["context"]
    return {**context, "project.artifacts_dir": str(artifacts), **overrides}
