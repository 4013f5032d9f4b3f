"""Shapes of AWS identifiers the constructs and the app both check."""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
from functools import cache
from pathlib import Path

#: An image in ECR, by tag or digest (SageMaker and the inf2 host pull only from ECR).
ECR_IMAGE = re.compile(
    r"^(?P<account>[0-9]{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/"
    r"(?P<repository>[a-z0-9][a-z0-9._/-]*)(?::(?P<tag>[A-Za-z0-9_.-]{1,128})|@sha256:[0-9a-f]{64})$"
)
#: An SNS topic's ARN.
SNS_TOPIC_ARN = re.compile(r"^arn:aws(-cn|-us-gov|-iso[a-z]*)?:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}$")


@cache
def inference_ami_versions() -> dict[str, str | None]:
    """SageMaker's inference AMI versions (``ProductionVariant.InferenceAmiVersion``) and the
    CUDA version of each GPU one (None for the others), from botocore's model of the SageMaker
    API: the enum ``ProductionVariantInferenceAmiVersion`` and the member's documentation, which
    lists each AMI's driver and CUDA. Read from the installed botocore's data files (no import of
    botocore), so a new AMI is accepted as soon as botocore knows it."""
    spec = importlib.util.find_spec("botocore")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("botocore is not installed: it is a dependency of sagemaker-core (requirements.txt)")
    models = sorted(
        (Path(next(iter(spec.submodule_search_locations))) / "data" / "sagemaker").glob("*/service-2.json*")
    )
    if not models:
        raise RuntimeError("botocore ships no SageMaker service model: reinstall botocore")
    raw = models[-1].read_bytes()
    model = json.loads(gzip.decompress(raw) if models[-1].suffix == ".gz" else raw)
    names: list[str] = model["shapes"]["ProductionVariantInferenceAmiVersion"]["enum"]
    docs = model["shapes"]["ProductionVariant"]["members"]["InferenceAmiVersion"].get("documentation", "")
    cuda = {
        m[1]: m[2]
        for m in re.finditer(r"<dt>([a-z0-9-]+)</dt>\s*<dd>(?:(?!</dd>).)*?CUDA version: ([0-9.]+)", docs, re.S)
    }
    return {name: cuda.get(name) for name in names}
