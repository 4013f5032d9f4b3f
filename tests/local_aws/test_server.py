"""The local AWS's own conveniences for its callers (local_aws/server.py)."""

from __future__ import annotations

from botocore.config import Config

from local_aws import LocalAws


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
