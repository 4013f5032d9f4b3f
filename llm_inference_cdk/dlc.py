"""AWS Deep Learning Container images, from the sagemaker SDK's own image configuration.

The SDK ships one JSON file per framework with the registry account of every region. Those
files are read straight from the installed `sagemaker-core` distribution instead of importing
the SDK (a 4 s import at every synthesis) and turned into a URI: a literal for a stack pinned
to a region, or a `CfnMapping` lookup on `AWS::Region` for an environment-agnostic stack. No
account id is written in this repository. Resolving a version needs no AWS CDK (the app's
configuration checks versions with it); building a URI in a stack does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from typing import Any

from llm_inference_cdk.props import PropError

SDK_DISTRIBUTION = "sagemaker-core"


class ImageResolutionError(PropError):
    """A Deep Learning Container that does not exist for the versions or the region asked for."""


@cache
def _image_config(framework: str) -> dict[str, Any]:
    wanted = f"sagemaker/core/image_uri_config/{framework}.json"
    for file in metadata.files(SDK_DISTRIBUTION) or []:
        if str(file) == wanted:
            return json.loads(file.read_text())  # type: ignore[no-any-return]
    raise RuntimeError(f"{SDK_DISTRIBUTION} has no {wanted}: install a sagemaker-core that ships it")


@dataclass(frozen=True)
class DlcImage:
    """One image of an AWS-owned ECR repository, present in many regions."""

    repository: str
    tag: str
    registries: Mapping[str, str]  # region -> registry account

    def _account(self, scope: Any) -> str:
        from aws_cdk import Aws, CfnMapping, Stack, Token

        stack = Stack.of(scope)
        if not Token.is_unresolved(stack.region):
            if stack.region not in self.registries:
                raise ImageResolutionError(
                    self.repository,
                    "region",
                    stack.region,
                    f"a region where {self.repository}:{self.tag} is published: {', '.join(sorted(self.registries))}",
                )
            return self.registries[stack.region]
        map_id = f"{self.repository}-registry".replace("-", "")
        mapping = stack.node.try_find_child(map_id)
        if mapping is None:
            mapping = CfnMapping(
                stack,
                map_id,
                mapping={region: {"account": account} for region, account in sorted(self.registries.items())},
            )
        assert isinstance(mapping, CfnMapping)
        return mapping.find_in_map(Aws.REGION, "account")

    def uri(self, scope: Any) -> str:
        """The image's URI in the registry of `scope`'s stack's region."""
        from aws_cdk import Fn, Stack

        stack = Stack.of(scope)
        return Fn.join(
            "",
            [self._account(scope), ".dkr.ecr.", stack.region, ".", stack.url_suffix, f"/{self.repository}:{self.tag}"],
        )

    def repository_arn(self, scope: Any) -> str:
        from aws_cdk import Fn, Stack

        stack = Stack.of(scope)
        return Fn.join(
            "",
            [
                "arn:",
                stack.partition,
                ":ecr:",
                stack.region,
                ":",
                self._account(scope),
                f":repository/{self.repository}",
            ],
        )


def huggingface_inference(*, transformers_version: str, pytorch_version: str, py_version: str) -> DlcImage:
    """The Hugging Face PyTorch inference image for GPU instances (as `image_uris.retrieve`)."""
    owner = "huggingface_inference"
    config = _image_config("huggingface")["inference"]
    versions = config["versions"]
    version = config.get("version_aliases", {}).get(transformers_version, transformers_version)
    if version not in versions:
        raise ImageResolutionError(owner, "transformers_version", transformers_version, "one of " + ", ".join(versions))
    base_key = f"pytorch{pytorch_version}"
    entry = versions[version]
    base_key = entry.get("version_aliases", {}).get(base_key, base_key)
    if base_key not in entry:
        bases = [k.removeprefix("pytorch") for k in entry if k.startswith("pytorch")]
        raise ImageResolutionError(
            owner, "pytorch_version", pytorch_version, f"one built with transformers {version}: {', '.join(bases)}"
        )
    base = entry[base_key]
    if py_version not in base["py_versions"]:
        raise ImageResolutionError(
            owner, "py_version", py_version, f"one built for transformers {version}: {', '.join(base['py_versions'])}"
        )
    tag = f"{pytorch_version}-transformers{version}-gpu-{py_version}"
    if base.get("container_version", {}).get("gpu"):
        tag += "-" + base["container_version"]["gpu"]
    return DlcImage(repository=base["repository"], tag=tag, registries=base["registries"])


def djl_neuronx(version: str) -> DlcImage:
    """The DJL Serving large-model-inference image for Neuron (inf2/trn1)."""
    config = _image_config("djl-neuronx")
    versions = config["versions"]
    version = config.get("version_aliases", {}).get(version, version)
    if version not in versions:
        raise ImageResolutionError("djl_neuronx", "image_version", version, "one of " + ", ".join(versions))
    entry = versions[version]
    return DlcImage(repository=entry["repository"], tag=entry["tag_prefix"], registries=entry["registries"])


def vllm_sagemaker(version: str) -> DlcImage:
    """AWS's vLLM image for SageMaker endpoints (GPU), as ``image_uris.retrieve(framework="vllm")``:
    ``vllm:<version>-gpu-<py>-<cuda>-<os>-sagemaker``. Its entrypoint turns each ``SM_VLLM_*``
    variable into the matching ``vllm serve`` flag and serves ``/opt/ml/model`` on port 8080
    (deep-learning-containers ``scripts/docker/vllm/sagemaker_entrypoint.sh``, ``sagemaker_args.py``)."""
    config = _image_config("vllm")["inference"]
    versions = config["versions"]
    version = config.get("version_aliases", {}).get(version, version)
    if version not in versions:
        raise ImageResolutionError("vllm_sagemaker", "vllm_version", version, "one of " + ", ".join(versions))
    entry = versions[version]
    tag = f"{entry['tag_prefix']}-gpu-{entry['py_versions'][-1]}-{entry['container_version']['gpu']}"
    return DlcImage(repository=entry["repository"], tag=tag, registries=entry["registries"])


def cuda_of(image: DlcImage) -> str | None:
    """The CUDA version an image's tag names (``...-cu130-...`` -> ``13.0``), None if it names none."""
    match = re.search(r"-cu([0-9]+)([0-9])(?:-|$)", image.tag)
    return f"{match[1]}.{match[2]}" if match else None
