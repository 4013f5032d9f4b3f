"""The local AWS publishes a Neuron DLAMI parameter only under a name AWS publishes one
(llm_contracts/inf2.py's NEURON_DLAMI_PARAMETERS, from Neuron's DLAMI guide and release notes)."""

from __future__ import annotations

import pytest

from llm_contracts.inf2 import NEURON_DLAMI, NEURON_DLAMI_PARAMETERS
from local_aws.server import LocalAws, seed_neuron_dlami

RETIRED = "/aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id"


def test_the_default_parameter_is_one_aws_publishes(aws: LocalAws) -> None:
    image = seed_neuron_dlami(aws, NEURON_DLAMI)
    parameter = aws.client("ssm").get_parameter(Name=NEURON_DLAMI)["Parameter"]
    assert parameter["Value"] == image and parameter["DataType"] == "aws:ec2:image"
    (described,) = aws.client("ec2").describe_images(ImageIds=[image])["Images"]
    assert described["RootDeviceType"] == "ebs"


@pytest.mark.parametrize("name", [RETIRED, "/llm-inference/inf2-ami"])
def test_a_name_aws_does_not_publish_is_refused(aws: LocalAws, name: str) -> None:
    """The multi-framework Ubuntu 22.04 DLAMI is no longer published (Neuron 2.29.0), and a
    parameter of the user's own is the user's to put."""
    assert name not in NEURON_DLAMI_PARAMETERS
    with pytest.raises(ValueError, match=f"^{name} is not a Neuron DLAMI parameter AWS publishes: one of "):
        seed_neuron_dlami(aws, name)
    assert name not in [p["Name"] for p in aws.client("ssm").describe_parameters()["Parameters"]]
