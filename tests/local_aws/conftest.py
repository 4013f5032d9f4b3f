"""One local AWS for the module, whose endpoints can run the echo image (helpers:
tests/local_aws/helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from local_aws import LocalAws
from local_aws.clock import Clock
from local_aws.sagemaker.runtime import hosting_plane
from tests.local_aws.helpers import echo_launcher


@pytest.fixture(scope="module")
def aws() -> Iterator[LocalAws]:
    # Without AWS's managed policies, which moto loads again at every reset (a second each); on a
    # clock that moves only when a test moves it (no alarm is evaluated behind a test's back).
    with LocalAws(aws_managed_policies=False, clock=Clock(speed=0)) as local:
        yield local


@pytest.fixture(autouse=True)
def echo_image(monkeypatch: pytest.MonkeyPatch) -> None:
    """Endpoints on ECHO_IMAGE run tests/local_aws/echo_image.py."""
    monkeypatch.setattr(hosting_plane(), "launcher", echo_launcher)
