"""One snapshot per stack. They change only on purpose: review the diff, then run
`pytest tests/infra/test_snapshots.py --snapshot-update` and say why in the commit."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from tests.infra.helpers import Synthesized, normalized


@pytest.fixture
def snapshot_json(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(JSONSnapshotExtension)


@pytest.mark.parametrize("stack", ["Gpt2Stack", "GptjStack", "LlmStack", "Inf2Stack"])
def test_template_snapshot(synth: Callable[..., Synthesized], snapshot_json: SnapshotAssertion, stack: str) -> None:
    assert normalized(synth().template_json(stack)) == snapshot_json
