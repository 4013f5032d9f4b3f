"""Shapes of AWS identifiers the constructs and the app both check."""

from __future__ import annotations

import re

#: An image in ECR, by tag or digest (SageMaker and the inf2 host pull only from ECR).
ECR_IMAGE = re.compile(
    r"^(?P<account>[0-9]{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/"
    r"(?P<repository>[a-z0-9][a-z0-9._/-]*)(?::(?P<tag>[A-Za-z0-9_.-]{1,128})|@sha256:[0-9a-f]{64})$"
)
#: An SNS topic's ARN.
SNS_TOPIC_ARN = re.compile(r"^arn:aws(-cn|-us-gov|-iso[a-z]*)?:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}$")
