"""`make test`'s workers take a group of tests at a time (tests/conftest.py's xdist_group): this
module's tests run on one worker, named by their group, which pytest-xdist adds to the node id
when it has read the group before scheduling. It once read none (its worker's hook ran before
the conftest's), and every end-to-end module ran on every worker with a local AWS of its own."""

from __future__ import annotations

import os

import pytest


def test_a_worker_runs_this_test_as_part_of_its_group(request: pytest.FixtureRequest) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") is None or not request.config.getvalue("loadgroup"):
        pytest.skip("runs under pytest-xdist's --dist loadgroup (make test)")
    assert request.node.nodeid.endswith("@tests/test_groups.py"), request.node.nodeid
