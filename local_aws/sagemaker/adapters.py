"""Adapter inference components, as SageMaker runs them (SageMaker Developer Guide, "Fine-tune
models with adapter inference components"; API reference, InferenceComponentSpecification): a
component whose ``Specification.BaseInferenceComponentName`` names a component of the same
endpoint that holds the foundation model, and whose ``Container.ArtifactUrl`` is the adapter, "a
single gzip compressed tar archive (.tar.gz suffix)". It has no compute of its own ("Omit
[ComputeResourceRequirements] if your request is meant to create an adapter inference
component"): it runs in its base's copies. Each copy gets the adapter unpacked and registered
with the container's server (``POST /adapters {name, src}``, the contract of AWS's vLLM image:
aws/model-hosting-container-standards, sagemaker/lora), a copy that starts later gets every
adapter of its base before its first invocation, and an invocation named by the adapter goes to
a copy of the base with the ``X-Amzn-SageMaker-Adapter-Identifier`` header, which the container
maps to the adapter. Deleting the component sends ``DELETE /adapters/<name>`` to each copy.

What SageMaker does not document, the local AWS decides and says so: the words of its refusals
(AWS's API reference names the rules, not the messages), the folder an adapter is unpacked into
(:data:`ADAPTERS_FOLDER`), and the adapter name it registers (the component's).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Mapping
from typing import Any

from moto.sagemaker.exceptions import ValidationError

from local_aws.sagemaker.arns import sagemaker_arn
from local_aws.sagemaker.components import InferenceComponent, component_named, components
from local_aws.sagemaker.containers import Container, ContainerError
from local_aws.sagemaker.hosting import fetch
from local_aws.sagemaker.runtime import hosting_plane

log = logging.getLogger("local_aws.sagemaker.adapters")

#: The header by which the container's /invocations picks an adapter (aws/model-hosting-container-standards,
#: sagemaker/__init__.py: vLLM's image maps it to the request's model).
ADAPTER_HEADER = "X-Amzn-SageMaker-Adapter-Identifier"
#: Where under /opt/ml a copy gets its adapters unpacked, one folder each (not documented by AWS).
ADAPTERS_FOLDER = "adapters"
#: How long registering an adapter with one copy may take (loading a few hundred MB of weights).
REGISTER_TIMEOUT_S = 300.0


def is_adapter(specification: Mapping[str, Any] | None) -> bool:
    return bool((specification or {}).get("BaseInferenceComponentName"))


def check(account: str, region: str, endpoint_name: str, specification: Mapping[str, Any]) -> InferenceComponent:
    """The base of an adapter component `specification` asks for on `endpoint_name`, or SageMaker's
    refusal (ValidationError) of what the API reference rules out."""
    base_name = str(specification["BaseInferenceComponentName"])
    if specification.get("ComputeResourceRequirements"):
        raise ValidationError(
            message="An adapter inference component uses the compute resources of its base inference component: "
            "omit ComputeResourceRequirements."
        )
    url = str((specification.get("Container") or {}).get("ArtifactUrl") or "")
    if not url:
        raise ValidationError(
            message="An adapter inference component needs Container.ArtifactUrl: the S3 location of its adapter."
        )
    if not url.endswith(".tar.gz"):
        raise ValidationError(
            message=f"Container.ArtifactUrl {url} must point to a single gzip compressed tar archive (.tar.gz suffix)."
        )
    base = component_named(account, region, base_name)
    if base.base is not None:
        raise ValidationError(
            message=f"Inference component {base_name} is an adapter inference component: the base inference "
            "component must hold the foundation model."
        )
    if base.endpoint_name != endpoint_name:
        raise ValidationError(
            message=f"Inference component {base_name} is on endpoint {base.endpoint_name}, not {endpoint_name}: an "
            "adapter inference component is created on its base's endpoint."
        )
    return base


def adapters_of(base: InferenceComponent) -> list[InferenceComponent]:
    """The adapter components of `base`, registered or being registered."""
    account, region, _ = base.hosting_key
    return [ic for ic in list(components(account, region).values()) if ic.base == base.name]


def base_of(ic: InferenceComponent) -> InferenceComponent | None:
    account, region, _ = ic.hosting_key
    return components(account, region).get(ic.base) if ic.base else None


def create(
    account: str, region: str, name: str, endpoint_name: str, endpoint_arn: str, specification: Mapping[str, Any]
) -> InferenceComponent:
    """The adapter component, registered with every copy of its base: InService, or Failed with
    the reason (what the container answered)."""
    base = check(account, region, endpoint_name, specification)
    ic = InferenceComponent(
        name=name,
        arn=sagemaker_arn("inference-component", name, account, region),
        endpoint_name=endpoint_name,
        endpoint_arn=endpoint_arn,
        variant_name=base.variant_name,
        specification=dict(specification),
        copies=base.copies,
        base=base.name,
    )
    components(account, region)[name] = ic
    deploy(ic)
    return ic


def deploy(ic: InferenceComponent) -> None:
    """Register `ic` with each copy of its base now running (an update registers it again)."""
    base = base_of(ic)
    done: list[Container] = []
    try:
        if base is None:
            raise ContainerError(f"its base inference component {ic.base} is gone")
        for container in _copies(base):
            register(ic, container)
            done.append(container)
    except ContainerError as exc:
        for container in done:
            unregister(ic, container)
        ic.status, ic.failure_reason = "Failed", str(exc)
        log.warning("adapter inference component %s failed: %s", ic.name, exc)
        return
    ic.status, ic.failure_reason = "InService", None


def update(ic: InferenceComponent, specification: Mapping[str, Any]) -> None:
    """A new archive (or base) for the adapter: unregistered from each copy, then registered anew."""
    account, region, _ = ic.hosting_key
    check(account, region, ic.endpoint_name, specification)
    base = base_of(ic)
    for container in _copies(base) if base is not None else []:
        unregister(ic, container)
    ic.specification, ic.base = dict(specification), str(specification["BaseInferenceComponentName"])
    ic.status = "Updating"
    deploy(ic)


def remove(ic: InferenceComponent) -> None:
    """The adapter unregistered from each copy of its base, and forgotten."""
    base = base_of(ic)
    for container in _copies(base) if base is not None else []:
        unregister(ic, container)
    account, region, _ = ic.hosting_key
    components(account, region).pop(ic.name, None)


def on_ready(base: InferenceComponent) -> Any:
    """What a new copy of `base` gets before its first invocation: each of its adapters in service."""

    def ready(container: Container) -> None:
        for adapter in adapters_of(base):
            if adapter.status == "InService":
                register(adapter, container)

    return ready


def _copies(base: InferenceComponent) -> list[Container]:
    hosted = hosting_plane().find(base.hosting_key)
    if hosted is None or hosted.live is None:
        return []
    return list(hosted.live.instances.get(base.variant_name, []))


def register(ic: InferenceComponent, container: Container) -> None:
    """The adapter's archive unpacked into the copy's adapters folder and registered with its server."""
    account, region, _ = ic.hosting_key
    url = str(ic.specification["Container"]["ArtifactUrl"])
    folder = container.base_dir / ADAPTERS_FOLDER / ic.name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    fetch(account, region)({"ModelDataUrl": url}, folder)
    body = json.dumps({"name": ic.name, "src": str(folder.resolve())}).encode()
    answer = container.call(
        "POST", "/adapters", body, headers={"Content-Type": "application/json"}, timeout=REGISTER_TIMEOUT_S
    )
    if answer.status != 200:
        raise ContainerError(f"the model server refused adapter {ic.name} ({answer.status}): {_said(answer.body)}")


def unregister(ic: InferenceComponent, container: Container) -> None:
    answer = container.call("DELETE", f"/adapters/{ic.name}", timeout=REGISTER_TIMEOUT_S)
    if answer.status not in (200, 404):  # 404: it never took it, or forgot it
        log.warning("adapter %s: the model server answered %s to its removal", ic.name, answer.status)
    shutil.rmtree(container.base_dir / ADAPTERS_FOLDER / ic.name, ignore_errors=True)


def _said(body: bytes) -> str:
    text = body.decode(errors="replace").strip()
    try:
        found = json.loads(text)
    except ValueError:
        return text[:500]
    error = found.get("error") if isinstance(found, dict) else None
    return str(error.get("message") if isinstance(error, dict) else found)[:500]
