"""SageMaker hosting as the local runtime runs it (local_aws/sagemaker/runtime.py starts the containers):
what an endpoint config asks for, whether the model's execution role may pull its image and read
its model data, the model data fetched from the local S3, how an update moves traffic
(DeploymentConfig), and the deploy of an endpoint's config with the endpoint's status kept."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from moto.cloudformation.exceptions import ValidationError as CloudFormationValidationError
from moto.cloudwatch.models import cloudwatch_backends
from moto.iam.exceptions import NotFoundException as IamNotFound
from moto.iam.models import iam_backends
from moto.kms.models import kms_backends
from moto.s3.models import s3_backends
from moto.utilities.utils import get_partition

from llm_contracts import instances
from local_aws.policies import Caller, Decision, evaluate, first_denial, role_caller
from local_aws.sagemaker.containers import ContainerError
from local_aws.sagemaker.logs import ENDPOINT_GROUP, LogTarget
from local_aws.sagemaker.runtime import (
    ALL_AT_ONCE,
    DEFAULT_STARTUP_TIMEOUT_S,
    HostedEndpoint,
    Rollout,
    VariantSpec,
    hosting_plane,
    lay_out,
    split_s3_url,
)


def variant_specs(backend: Any, config_name: str, endpoint_name: str) -> list[VariantSpec]:
    """The containers an endpoint config asks for, read from moto's backend; each writes its
    output to the endpoint's log group, stream ``<variant>/<instance-id>`` (local_aws/sagemaker/logs.py)."""
    config = backend.endpoint_configs[config_name]
    group = ENDPOINT_GROUP.format(endpoint_name)
    return [
        variant_spec(
            backend._models[variant["ModelName"]],
            variant["VariantName"],
            variant,
            log_group=group,
            stream_prefix=f"{variant['VariantName']}/",
        )
        for variant in config.production_variants
        # A variant without a model holds the instances of inference components, which bring theirs.
        if "ModelName" in variant
    ]


def variant_spec(
    model: Any, variant: str, startup: Mapping[str, Any], *, log_group: str | None = None, stream_prefix: str = ""
) -> VariantSpec:
    """What the runtime starts for `model` on `variant`, with the startup timeout `startup`
    (a production variant, or a component's StartupParameters) sets; its containers' output goes
    to `log_group` (streams named `stream_prefix` and the instance id), as the model's role."""
    container = dict(model.primary_container or {})
    region, account = model.arn.split(":")[3:5]
    logs = None
    if log_group is not None:
        role = getattr(model, "execution_role_arn", None)
        logs = LogTarget(account, region, log_group, str(role) if role else None, stream_prefix)
    return VariantSpec(
        variant=variant,
        image=str(container.get("Image", "")),
        environment={str(k): str(v) for k, v in (container.get("Environment") or {}).items()},
        model_data={k: container[k] for k in ("ModelDataUrl", "ModelDataSource") if k in container},
        startup_timeout_s=int(startup.get("ContainerStartupHealthCheckTimeoutInSeconds") or DEFAULT_STARTUP_TIMEOUT_S),
        refused=refused(model, container),
        count=int(startup.get("InitialInstanceCount") or 1),
        accelerators=_gpus(str(startup.get("InstanceType") or "")),
        logs=logs,
    )


def _gpus(instance_type: str) -> int:
    """The GPUs of a real-time variant's instance type, all of which its container sees (0 for
    serverless, a component's StartupParameters, or a type without)."""
    return instances.gpus(instance_type) if instances.SAGEMAKER_INSTANCE.match(instance_type) else 0


def refused(model: Any, container: Mapping[str, Any]) -> str | None:
    """Why SageMaker, acting as the model's execution role, could not pull the image or read
    the model data (the role's policies, the bucket's, the key's), else None. A role the
    account does not have is not evaluated (the local AWS's own tests name roles they never
    create; AWS refuses such a model at CreateModel)."""
    region, account = model.arn.split(":")[3:5]
    partition = get_partition(region)
    try:
        role = iam_backends[account][partition].get_role_by_arn(model.execution_role_arn)
    except IamNotFound:
        return None
    caller = role_caller(role, account, session=f"arn:{partition}:sts::{account}:assumed-role/{role.name}/SageMaker")
    image = str(container.get("Image", ""))
    pulled = _pull_refused(caller, image, partition)
    if pulled is not None:
        return pulled
    data = {k: container[k] for k in ("ModelDataUrl", "ModelDataSource") if k in container}
    decision = first_denial(_reads(caller, data, account, partition))
    if decision.allowed:
        return None
    url = data.get("ModelDataUrl") or data["ModelDataSource"]["S3DataSource"]["S3Uri"]
    # AWS's reason for model data it cannot download (its wording), with IAM's denial after it.
    return (
        f'Failed to download model data for container "container_1" from URL: "{url}". Please ensure that there is '
        f"an object located at the URL and that the role passed to CreateModel has permissions to download the "
        f"model. {decision.message}"
    )


def _pull_refused(caller: Caller, image: str, partition: str) -> str | None:
    """SageMaker's reason when the role may not pull `image` from ECR (its registry's repository
    policy is AWS's or the account's own: only the role's side is evaluated)."""
    found = re.fullmatch(r"(\d{12})\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com[^/]*/([^:@]+)[:@].*", image)
    if found is None:
        return None
    registry, region, repository = found.groups()
    arn = f"arn:{partition}:ecr:{region}:{registry}:repository/{repository}"
    for action, resource in (("ecr:GetAuthorizationToken", "*"), ("ecr:BatchGetImage", arn),
                             ("ecr:GetDownloadUrlForLayer", arn)):  # fmt: skip
        if not evaluate(caller, action, resource).allowed:
            name = action.split(":")[1]
            return f"The role '{caller.arn}' does not have {name} permission for the image: '{image}'."
    return None


def _reads(caller: Caller, data: Mapping[str, Any], account: str, partition: str) -> Iterator[Decision]:
    """The decisions on each S3 (and KMS) call SageMaker makes to download the model data."""
    s3 = s3_backends[account][partition]
    if "ModelDataUrl" in data:
        bucket, key = split_s3_url(data["ModelDataUrl"])
        objects = [key]
    elif "S3DataSource" in data.get("ModelDataSource", {}):
        source = data["ModelDataSource"]["S3DataSource"]
        bucket, prefix = split_s3_url(source["S3Uri"])
        if source.get("S3DataType") != "S3Prefix":
            objects = [prefix]
        else:
            yield _s3(caller, "s3:ListBucket", bucket, None, s3, {"s3:prefix": prefix})
            objects = sorted(k for k in getattr(s3.buckets.get(bucket), "keys", {}) if k.startswith(prefix))
    else:
        return
    for key in objects:
        yield _s3(caller, "s3:GetObject", bucket, key, s3, {})
        stored = s3.buckets[bucket].keys.get(key) if bucket in s3.buckets else None
        if stored is not None and stored.encryption == "aws:kms" and stored.kms_key_id:
            key_id = str(stored.kms_key_id)
            region = key_id.split(":")[3] if key_id.startswith("arn:") else s3.buckets[bucket].region_name
            kms_key = kms_backends[account][region].describe_key(key_id)
            yield evaluate(caller, "kms:Decrypt", kms_key.arn, resource_policy=kms_key.policy, key_policy=True)


def _s3(caller: Caller, action: str, bucket: str, key: str | None, s3: Any, context: Mapping[str, str]) -> Decision:
    found = s3.buckets.get(bucket)
    policy = found.policy.decode() if found is not None and found.policy else None
    resource = f"arn:aws:s3:::{bucket}" + (f"/{key}" if key is not None else "")
    return evaluate(caller, action, resource, resource_policy=policy, context=context)


def fetch(account_id: str, region_name: str) -> Any:
    s3 = s3_backends[account_id][get_partition(region_name)]

    def read(bucket: str, key: str) -> bytes:
        found = s3.buckets.get(bucket)
        stored = found.keys.get(key) if found is not None else None
        if stored is None:
            # AWS's reason for model data it cannot download (its wording; refused has it too).
            raise ContainerError(
                f'Failed to download model data for container "container_1" from URL: "s3://{bucket}/{key}". Please '
                "ensure that there is an object located at the URL and that the role passed to CreateModel has "
                "permissions to download the model."
            )
        return bytes(stored.value)

    def fetch(model_data: Mapping[str, Any], folder: Path) -> None:
        lay_out(
            model_data,
            folder,
            read=read,
            keys=lambda bucket, prefix: sorted(
                k for k in getattr(s3.buckets.get(bucket), "keys", {}) if k.startswith(prefix)
            ),
        )

    return fetch


def _capacity(size: Mapping[str, Any], instances: int) -> float:
    """A CapacitySize as a share of the fleet (at least one instance's, or copy's)."""
    if size.get("Type") in ("INSTANCE_COUNT", "COPY_COUNT"):
        return min(1.0, max(1, int(size["Value"])) / max(1, instances))
    return min(1.0, max(int(size["Value"]) / 100, 1 / max(1, instances)))


def _steps(step: float, bake_s: float) -> tuple[tuple[float, float], ...]:
    shares, share = [], 0.0
    while share < 1.0:
        share = min(1.0, share + step)
        shares.append((share, bake_s))
    return tuple(shares)


def rollout_of(deployment_config: Mapping[str, Any] | None, instances: int) -> Rollout:
    """How SageMaker moves traffic under a DeploymentConfig: blue/green all at once, canary or
    linear (each shift followed by WaitIntervalInSeconds of baking), or rolling batches (each
    baked as long); with none, all at once without baking."""
    if not deployment_config:
        return ALL_AT_ONCE
    alarms = tuple(
        str(a["AlarmName"]) for a in deployment_config.get("AutoRollbackConfiguration", {}).get("Alarms", [])
    )
    rolling = deployment_config.get("RollingUpdatePolicy")
    if rolling:
        wait = float(rolling.get("WaitIntervalInSeconds", 0))
        steps = _steps(_capacity(rolling["MaximumBatchSize"], instances), wait)
        timeout = rolling.get("MaximumExecutionTimeoutInSeconds")
    else:
        policy = deployment_config.get("BlueGreenUpdatePolicy", {})
        routing = policy.get("TrafficRoutingConfiguration", {"Type": "ALL_AT_ONCE"})
        wait = float(routing.get("WaitIntervalInSeconds", 0))
        kind = routing.get("Type", "ALL_AT_ONCE")
        if kind == "CANARY":
            steps = ((_capacity(routing["CanarySize"], instances), wait), (1.0, wait))
        elif kind == "LINEAR":
            steps = _steps(_capacity(routing["LinearStepSize"], instances), wait)
        else:
            steps = ((1.0, wait),)
        timeout = policy.get("MaximumExecutionTimeoutInSeconds")
    return Rollout(steps=steps, alarms=alarms, timeout_s=None if timeout is None else float(timeout))


def alarm_states(account_id: str, region_name: str) -> Any:
    def states(names: tuple[str, ...]) -> dict[str, str]:
        alarms = cloudwatch_backends[account_id][region_name].alarms
        return {name: str(alarms[name].state_value) for name in names if name in alarms}

    return states


def deploy(
    backend: Any, endpoint: Any, config_name: str, deployment_config: Mapping[str, Any] | None = None
) -> HostedEndpoint:
    key = (backend.account_id, backend.region_name, endpoint.endpoint_name)

    def settled(hosted: HostedEndpoint) -> None:
        if hosted.live is not None and hosted.live.config_name == config_name:
            # The endpoint describes the config it runs: the new one only once it took over.
            config = backend.endpoint_configs[config_name]
            endpoint.endpoint_config_name = config_name
            endpoint.production_variants = endpoint._process_production_variants(config.production_variants)
            for variant in endpoint.production_variants:
                # The count scaling set, kept through an update (RetainAllVariantProperties).
                name = variant["VariantName"]
                if name in hosted.live.specs:
                    variant["DesiredInstanceCount"] = hosted.live.desired[name]
                    variant["CurrentInstanceCount"] = hosted.live.ready(name)

    variants = variant_specs(backend, config_name, endpoint.endpoint_name)
    instances = sum(int(v["InitialInstanceCount"]) for v in backend.endpoint_configs[config_name].production_variants)
    return hosting_plane().deploy(
        key,
        config_name,
        variants,
        fetch(backend.account_id, backend.region_name),
        settled,
        rollout=rollout_of(deployment_config, instances),
        alarm_states=alarm_states(backend.account_id, backend.region_name),
    )


def hosted_endpoint_of(endpoint: Any) -> HostedEndpoint | None:
    """What the runtime runs of moto's endpoint record: the one owner of its status and failure
    reason (DescribeEndpoint's) from the moment it is deployed."""
    _, _, _, region, account, _ = str(endpoint.arn).split(":", 5)
    return hosting_plane().find((account, region, endpoint.endpoint_name))


def wait_settled(account_id: str, region_name: str, endpoint_name: str) -> None:
    """Until the endpoint settles; a Failed endpoint fails the resource (an update SageMaker
    rolled back leaves it InService, which the resource takes for done)."""
    hosted = hosting_plane().find((account_id, region_name, endpoint_name))
    if hosted is None:
        return
    hosted.settled.wait()
    if hosted.status == "Failed":
        raise CloudFormationValidationError(endpoint_name, f"Endpoint {endpoint_name} failed: {hosted.failure_reason}")
