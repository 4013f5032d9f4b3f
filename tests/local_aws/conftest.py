"""One local AWS for the module (helpers: tests/local_aws/helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from local_aws import LocalAws


@pytest.fixture(scope="module")
def aws() -> Iterator[LocalAws]:
    # Without AWS's managed policies, which moto loads again at every reset (a second each).
    with LocalAws(aws_managed_policies=False) as local:
        yield local
