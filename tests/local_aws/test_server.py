"""The local AWS's own conveniences for its callers (local_aws/server.py)."""

from __future__ import annotations

from botocore.config import Config

from local_aws import LocalAws
from local_aws.sagemaker.runtime import hosting_plane


def test_a_client_without_options_is_made_once_a_service_and_answers_after_a_restart(aws: LocalAws) -> None:
    sagemaker = aws.client("sagemaker")
    assert aws.client("sagemaker") is sagemaker
    assert aws.client("s3") is not sagemaker
    # A client of its own: for event handlers, which would otherwise reach every later caller.
    assert aws.client("sagemaker", fresh=True) is not sagemaker
    assert aws.client("sagemaker", config=Config(retries={"total_max_attempts": 1})) is not sagemaker
    assert sagemaker.list_endpoints()["Endpoints"] == []


def test_a_restart_forgets_the_clients_of_the_old_port(aws: LocalAws) -> None:
    first = aws.client("sts")
    assert first.get_caller_identity()["Account"] == aws.account
    aws.stop()
    aws.start()
    again = aws.client("sts")
    assert again is not first
    assert again.get_caller_identity()["Account"] == aws.account


def test_the_containers_share_one_compile_cache_while_the_local_aws_runs(aws: LocalAws) -> None:
    """vLLM's containers compile the same kernels and torch's precompiled header for their first
    request: compiled once while the local AWS runs, removed when it stops (docs/LOCAL_AWS.md)."""
    cache = hosting_plane().compile_cache
    assert cache is not None and cache.is_dir()
    aws.stop()
    assert hosting_plane().compile_cache is None and not cache.exists()
    aws.start()
    assert hosting_plane().compile_cache is not None and hosting_plane().compile_cache != cache
