"""End-to-end fixtures: one local AWS per session, the app synthesized once per setting set,
the CDK CLI bootstrapped once (helpers: tests/e2e/helpers.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from local_aws import LocalAws
from local_aws.cli.cdk import Cdk
from local_aws.clock import Clock
from local_aws.server import seed_neuron_dlami
from tests.e2e.helpers import CLI_TIMEOUT_S, UPDATES, Assembly, assembly_of, build_tiny_artifacts
from tests.shared import made_once


@pytest.fixture(scope="session")
def local_aws() -> Iterator[LocalAws]:
    # CloudWatch's clock moves when a test moves it: an alarm is evaluated when the test has
    # produced its data, and no test waits minutes of CloudWatch's schedule.
    with LocalAws(clock=Clock(speed=0)) as aws:
        yield aws


@pytest.fixture(scope="session")
def neuron_ami(local_aws: LocalAws, base: Assembly) -> str:
    return seed_neuron_dlami(local_aws, base.config.inf2.server.ami_ssm_parameter)


@pytest.fixture(scope="session")
def cdk(local_aws: LocalAws) -> Cdk:
    return Cdk(local_aws, timeout_s=CLI_TIMEOUT_S)


@pytest.fixture(scope="session")
def e2e_artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real tiny payloads: the endpoints run their containers, which must load them. One build
    for the end-to-end groups' workers (tests/shared.py): a test that changes a payload copies
    it first."""
    return made_once(tmp_path_factory, "e2e-artifacts", build_tiny_artifacts)


@pytest.fixture(scope="session")
def base(tmp_path_factory: pytest.TempPathFactory, local_aws: LocalAws, e2e_artifacts: Path) -> Assembly:
    return assembly_of(tmp_path_factory.mktemp("cdk.out"), local_aws, e2e_artifacts)


@pytest.fixture(scope="session")
def updated(tmp_path_factory: pytest.TempPathFactory, local_aws: LocalAws, e2e_artifacts: Path) -> Assembly:
    return assembly_of(tmp_path_factory.mktemp("cdk.out-updated"), local_aws, e2e_artifacts, **UPDATES)


@pytest.fixture(scope="session")
def bootstrapped(cdk: Cdk, base: Assembly, neuron_ami: str) -> Cdk:
    cdk.bootstrap(base.path)
    return cdk


# --- Reading a stack back -------------------------------------------------------------------
