"""The ``inf2`` section: OPT with DJL Serving (LMI) and transformers-neuronx, on an EC2 inf2 instance
(``platform`` ``ec2``) or a SageMaker endpoint of an ml.inf2 type (``sagemaker``:
project_config/inf2_sagemaker.py reads what is its own)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from llm_contracts.aws import ECR_IMAGE
from llm_contracts.inf2 import (
    COMMIT,
    DEFAULT_MODEL,
    DTYPE_BYTES,
    NEURON_CORES,
    PINNED_REVISIONS,
    ModelFacts,
    copies_loaded_in_turn,
    host_memory_problems,
    instance_problems,
    known_model,
    model_problems,
    serving_properties,
    stale_properties,
    unknown_model_message,
    volume_problems,
)
from llm_contracts.inf2_sagemaker import START_MARGIN_S as SAGEMAKER_START_MARGIN_S
from llm_contracts.inf2_sagemaker import ec2_instance_type, timeout_problems, volume_parts
from llm_contracts.inf2_sagemaker import volume_problems as sagemaker_volume_problems
from llm_contracts.manifest import read_manifest
from llm_inference_cdk.dlc import ImageResolutionError, djl_neuronx
from llm_inference_cdk.endpoint_props import SageMakerEndpointProps
from llm_inference_cdk.inf2.props import Inf2ServerProps
from llm_inference_cdk.props import Check, PropError, integer, invalid, one_of, prop, text, validate
from project_config import inf2_sagemaker
from project_config.endpoint import ALARM_EMAIL, TOPIC_ARN, check_notifications
from project_config.reader import PROJECT_ROOT, ConfigError, Section, read_props

_VPC_ID = re.compile(r"^vpc-[0-9a-f]{8,17}$")
_SUBNET_ID = re.compile(r"^subnet-[0-9a-f]{8,17}$")
_AZ = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-[0-9][a-z]$")
_HF_MODEL_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_ENTRY_POINT = re.compile(r"^(model\.py|(?!.*\.py$)[A-Za-z_]\w*(\.[A-Za-z_]\w*)+)$")
_PROPERTY_KEY = re.compile(r"^(option\.)?[A-Za-z_][A-Za-z0-9_.]{0,127}$")
_PINNED_REQUIREMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9_,-]+\])?==[A-Za-z0-9.+!-]+$")


#: serving.properties keys that a typed setting writes: `extra_properties` may not set them.
TYPED_PROPERTIES = frozenset(
    {
        "engine", "batch_size", "max_batch_delay", "option.entryPoint", "option.model_id",
        "option.tensor_parallel_degree", "option.n_positions", "option.dtype", "option.batch_size",
        "option.rolling_batch", "option.max_rolling_batch_size", "option.model_loading_timeout",
        "option.predict_timeout",
    }
)  # fmt: skip


def _unset_or(pattern: re.Pattern[str], what: str) -> Check:
    """`pattern`'s text, or None (unset), refused in `what`'s words alone."""
    return Check(lambda v: v is None or (isinstance(v, str) and bool(v) and bool(pattern.match(v))), what)


def _properties(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and _PROPERTY_KEY.match(k) and isinstance(v, str) and len(v) <= 256 for k, v in value.items()
    )


def _pinned(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(r, str) and _PINNED_REQUIREMENT.match(r) for r in value)


@dataclass(frozen=True, kw_only=True)
class ModelServerSettings:
    """DJL Serving (LMI) with transformers-neuronx, rendered into `serving.properties`.

    The image, the entry point and any further property are settings (an image of your own, a
    handler module of the image). Moving off transformers-neuronx is not one of them: no Neuron
    serving path still maintained supports OPT, so the handler and the bundle's model rules would
    change with the model (docs/IMAGES.md, "Moving off transformers-neuronx")."""

    #: The hub model the instance downloads (None: the model the bundle ships, else
    #: facebook/opt-13b). A bundle that ships its model refuses any other.
    model_id: str | None = prop(None, check=_unset_or(_HF_MODEL_ID, "a Hugging Face model id"))
    #: The hub commit (40 hex digits) of `model_id` whose files the instance downloads and checks
    #: against the sha256 the bundle lists (None: the commit pinned for facebook/opt-13b; required
    #: for any other hub model, unset for a model the bundle ships).
    model_revision: str | None = prop(
        None,
        check=_unset_or(
            COMMIT,
            "a full commit hash of the model's hub repository (40 hex digits, such as "
            f"{PINNED_REVISIONS[DEFAULT_MODEL]}): a branch or tag can move to other files",
        ),
    )
    #: NeuronCores that shard one copy of the model. The Neuron rules (llm_contracts/inf2.py) say
    #: which degrees work; this bound only keeps the number sane.
    tensor_parallel_degree: int = prop(8, check=integer(1, 128))
    #: Longest sequence (prompt plus generated tokens) the compiled graphs accept.
    n_positions: int = prop(512, check=integer(16, 8192))
    dtype: str = prop("fp16", check=one_of("fp16", "bf16", "fp32"))
    #: Sequences per compiled forward pass (static batching) or per rolling batch.
    batch_size: int = prop(4, check=integer(1, 64))
    rolling_batch: str = prop("disable", check=one_of("disable", "auto"))
    max_batch_delay_ms: int = prop(100, check=integer(0, 60_000))
    #: DJL's limit on loading one copy of the model (download, split, compile, load onto its
    #: NeuronCores); DJL loads every copy (NeuronCores / degree) one after another.
    model_loading_timeout_s: int = prop(3600, check=integer(60, 14_400))
    #: DJL's limit on one call of the handler (option.predict_timeout; the image's default is
    #: 240 s): a call that runs longer makes DJL restart the Python worker and load the copy
    #: again, so the handler keeps every call inside it (serving/inf2/model.py).
    predict_timeout_s: int = prop(240, check=integer(30, 3600))
    #: The LMI neuronx image tag, resolved from the sagemaker SDK's `djl-neuronx` JSON.
    #: 0.29.0 (Neuron SDK 2.19.1) is the last DJL release with transformers-neuronx.
    image_version: str = prop(
        "0.29.0", check=text(re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$"), what="a DJL LMI neuronx version such as 0.29.0")
    )
    #: An explicit image URI (None: the DJL neuronx image of `image_version` for the region).
    image_uri: str | None = prop(
        None,
        check=_unset_or(ECR_IMAGE, "an ECR image URI: <account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag>"),
    )
    #: `model.py` (the bundle's handler) or a handler module of the image, such as
    #: `djl_python.transformers_neuronx`.
    entry_point: str = prop(
        "model.py",
        check=text(
            _ENTRY_POINT,
            what="model.py (the bundle's handler) or a handler module of the image such as "
            "djl_python.transformers_neuronx",
        ),
    )
    #: Further `serving.properties` entries, for options this project does not type.
    extra_properties: Mapping[str, str] = prop(
        factory=dict,
        check=Check(
            _properties,
            "an object of serving.properties keys (such as option.context_length_estimate) to string values",
        ),
    )
    #: Pip requirements the container installs from the bundle at start (pinned, `name==version`).
    requirements: tuple[str, ...] = prop(
        (),
        check=Check(
            _pinned, 'a list of pinned pip requirements such as ["sentencepiece==0.2.0"] (the image pins the rest)'
        ),
    )

    def __post_init__(self) -> None:
        validate(self, self._rules)
        # cdk.json gives a list; checked as given (its problem shows the value so), kept as a tuple.
        object.__setattr__(self, "requirements", tuple(self.requirements))

    def _rules(self) -> Iterator[PropError]:
        if self.rolling_batch != "disable" and self.entry_point == "model.py":
            yield invalid(
                self,
                "rolling_batch",
                "disable while entry_point is model.py (it serves static batches); for rolling batches set "
                "entry_point to the image's handler, such as djl_python.transformers_neuronx",
            )
        clash = sorted(set(self.extra_properties) & TYPED_PROPERTIES)
        if clash:
            yield invalid(
                self,
                "extra_properties",
                f"keys other than the typed settings; set {', '.join(clash)} through its own inf2 setting",
            )


@dataclass(frozen=True, kw_only=True)
class Inf2Settings:
    #: Where the bundle is served: ``ec2`` (an inf2 instance of the stack's own) or ``sagemaker``
    #: (a SageMaker endpoint of an ml.inf2 type).
    platform: str = "ec2"
    #: The host on ``ec2``: instance type, AMI, volume, port, ingress, load timeout (None on
    #: ``sagemaker``).
    server: Inf2ServerProps | None = None
    #: The endpoint on ``sagemaker`` (None on ``ec2``).
    endpoint: SageMakerEndpointProps | None = None
    #: ``enable_network_isolation`` as set on ``sagemaker`` (None: follow the bundle, isolated
    #: when it ships its model, open when the container downloads it from the hub).
    enable_network_isolation: bool | None = None
    #: An existing VPC (None: a new VPC with one NAT gateway).
    vpc_id: str | None = None
    subnet_id: str | None = None
    #: The zone of `subnet_id`; for a new VPC, the one zone it spans (None: the first two).
    availability_zone: str | None = None
    vpc_cidr: str = "10.42.0.0/16"
    #: The bundle: the tarball on ``ec2``, the same files unpacked (a folder) on ``sagemaker``.
    bundle: Path = PROJECT_ROOT / "artifacts" / "inf2" / "bundle.tar.gz"
    model_server: ModelServerSettings = field(default_factory=ModelServerSettings)
    #: An SNS topic the alarms notify, on ALARM and OK (None: the stack's own encrypted topic).
    alarm_topic_arn: str | None = None
    #: An e-mail address subscribed to the stack's own alarm topic (None: no subscription).
    alarm_email: str | None = None

    @property
    def instance_type(self) -> str:
        """The instance type in EC2's naming (``inf2.48xlarge``), which the Neuron tables use."""
        if self.endpoint is not None:
            return ec2_instance_type(self.endpoint.instance_type)
        assert self.server is not None
        return self.server.instance_type

    @property
    def type_prefix(self) -> str:
        """How the platform names the instance type: ``ml.`` on SageMaker."""
        return "ml." if self.endpoint is not None else ""


#: A one-token request to DJL's own handlers (djl_python's input format).
DJL_PROBE_REQUEST = '{"inputs": "Hello", "parameters": {"max_new_tokens": 1}}'
#: Time for the container, DJL's JVM and the bundle's requirements before the first load begins.
START_MARGIN_S = 900


def read(s: Section, artifacts: Path) -> Inf2Settings:
    platform = s.choice("platform", "ec2", inf2_sagemaker.PLATFORMS)
    inf2_sagemaker.refuse_other_platform(s, platform)
    settings = _read_sagemaker(s, artifacts) if platform == "sagemaker" else _read_ec2(s, artifacts)
    if settings.model_server.image_uri is None:
        try:
            djl_neuronx(settings.model_server.image_version)  # the version names an image that exists
        except ImageResolutionError as exc:
            raise s.fail("image_version", exc.value, exc.allowed) from None
    s.done()
    problems = instance_problems(
        instance_type=settings.instance_type,
        degree=settings.model_server.tensor_parallel_degree,
        prefix=settings.type_prefix,
    )
    if problems:
        raise ConfigError("; ".join(problems))
    return settings


def _read_sagemaker(s: Section, artifacts: Path) -> Inf2Settings:
    """The endpoint's settings, then the model server's, whose two timeouts default to what the
    endpoint allows: a load within SageMaker's health check, a real-time call within its 60 s."""
    isolation_set = s.has("enable_network_isolation")
    endpoint = inf2_sagemaker.read(s, {})
    assert endpoint.startup_health_check_timeout_s is not None
    model_server = _model_server(
        s,
        model_loading_timeout_s=endpoint.startup_health_check_timeout_s - SAGEMAKER_START_MARGIN_S,
        predict_timeout_s=inf2_sagemaker.REALTIME_PREDICT_TIMEOUT_S if endpoint.mode == "realtime" else None,
    )
    problems = timeout_problems(
        model_loading_timeout_s=model_server.model_loading_timeout_s,
        startup_s=endpoint.startup_health_check_timeout_s,
        mode=endpoint.mode,
        predict_timeout_s=model_server.predict_timeout_s,
    )
    if problems:
        raise ConfigError("; ".join(problems))
    return Inf2Settings(
        platform="sagemaker",
        endpoint=endpoint,
        enable_network_isolation=endpoint.enable_network_isolation if isolation_set else None,
        bundle=PROJECT_ROOT
        / s.string(
            "bundle", str(artifacts / "inf2" / "bundle"), what="a path, absolute or relative to the project root"
        ),
        model_server=model_server,
        **_notifications(s),
    )


def _read_ec2(s: Section, artifacts: Path) -> Inf2Settings:
    vpc_id = s.optional_string("vpc_id", pattern=_VPC_ID, what="a VPC id such as vpc-0123456789abcdef0")
    subnet_id = s.optional_string("subnet_id", pattern=_SUBNET_ID, what="a subnet id such as subnet-0123abcd")
    az = s.optional_string("availability_zone", pattern=_AZ, what="an availability zone such as us-east-1a")
    if vpc_id is not None:
        s.check("subnet_id", subnet_id, subnet_id is not None, "a subnet id of vpc_id, required with vpc_id")
        s.check("availability_zone", az, az is not None, "the subnet's availability zone, required with vpc_id")
    else:
        s.check("subnet_id", subnet_id, subnet_id is None, "unset unless vpc_id is set")
    # The subnet plan (per zone, a /24 public and a /20 private subnet) needs a /19 for the one
    # zone of a configured availability_zone, a /18 for the default two.
    widest = 19 if az is not None else 18
    vpc_cidr = s.string("vpc_cidr", "10.42.0.0/16", what=f"an IPv4 CIDR from /16 to /{widest}")
    try:
        net = ipaddress.IPv4Network(vpc_cidr)
        ok = 16 <= net.prefixlen <= widest
    except ValueError:
        ok = False
    s.check(
        "vpc_cidr",
        vpc_cidr,
        ok,
        f"an IPv4 network from /16 to /{widest} such as 10.42.0.0/16 (each zone gets a /24 public and a /20 "
        "private subnet)",
    )
    model_server = _model_server(s)
    # DJL answers /ping only once it has loaded every copy of the model, one after another,
    # each within model_loading_timeout_s.
    instance_type = s.get("instance_type", as_text=True) or Inf2ServerProps.instance_type
    copies = copies_loaded_in_turn(
        instance_type=instance_type if instance_type in NEURON_CORES else "inf2.48xlarge",
        degree=model_server.tensor_parallel_degree,
        extra_properties=model_server.extra_properties,
    )
    server = read_props(
        s,
        Inf2ServerProps,
        only=["instance_type", "ami_ssm_parameter", "volume_size_gb", "port", "ingress_cidr"],
        load_timeout_s=copies * model_server.model_loading_timeout_s + START_MARGIN_S,
        # The health check's request, in the handler's format: the bundle's model.py's, or that
        # of DJL's own handlers.
        probe_request=Inf2ServerProps.probe_request if model_server.entry_point == "model.py" else DJL_PROBE_REQUEST,
    )
    if vpc_id is None and server.ingress_cidr is not None:
        # The stack's own VPC routes only within itself and out through its NAT gateway: a reply to
        # any other network would leave by the NAT gateway and be dropped.
        s.check(
            "ingress_cidr",
            server.ingress_cidr,
            ipaddress.IPv4Network(server.ingress_cidr).subnet_of(ipaddress.IPv4Network(vpc_cidr)),
            f"a network inside inf2.vpc_cidr ({vpc_cidr}): the stack's VPC routes to nothing but itself and the "
            "internet through its NAT gateway, so no other network can reach the server; to serve a network "
            "connected by VPN or peering, deploy into a VPC that routes to it (inf2.vpc_id)",
        )
    settings = Inf2Settings(
        server=server,
        vpc_id=vpc_id,
        subnet_id=subnet_id,
        availability_zone=az,
        vpc_cidr=vpc_cidr,
        bundle=PROJECT_ROOT
        / s.string(
            "bundle", str(artifacts / "inf2" / "bundle.tar.gz"), what="a path, absolute or relative to the project root"
        ),
        model_server=model_server,
        **_notifications(s),
    )
    return settings


class _Notifications(TypedDict):
    alarm_topic_arn: str | None
    alarm_email: str | None


def _notifications(s: Section) -> _Notifications:
    """Where the alarms go, read and checked as the SageMaker stacks read them."""
    found = _Notifications(
        alarm_topic_arn=s.get("alarm_topic_arn", as_text=True), alarm_email=s.get("alarm_email", as_text=True)
    )
    s.check("alarm_topic_arn", found["alarm_topic_arn"], TOPIC_ARN(found["alarm_topic_arn"]), TOPIC_ARN.allowed)
    s.check("alarm_email", found["alarm_email"], ALARM_EMAIL(found["alarm_email"]), ALARM_EMAIL.allowed)
    check_notifications(s, found["alarm_topic_arn"], found["alarm_email"])
    return found


def _model_server(
    s: Section, *, model_loading_timeout_s: int | None = None, predict_timeout_s: int | None = None
) -> ModelServerSettings:
    """The model server's settings; the two timeouts' defaults, where given, are the platform's."""
    defaults = {
        "model_loading_timeout_s": max(60, model_loading_timeout_s or ModelServerSettings.model_loading_timeout_s),
        "predict_timeout_s": predict_timeout_s or ModelServerSettings.predict_timeout_s,
    }
    return read_props(s, ModelServerSettings, defaults=defaults)


def settings_problems(settings: Inf2Settings, facts: ModelFacts, *, model_id: str) -> list[str]:
    """Every rule over `settings` for the model described by `facts`."""
    ms = settings.model_server
    instance, prefix = settings.instance_type, settings.type_prefix
    return (
        instance_problems(instance_type=instance, degree=ms.tensor_parallel_degree, prefix=prefix)
        + model_problems(
            facts,
            model_id=model_id,
            degree=ms.tensor_parallel_degree,
            dtype=ms.dtype,
            n_positions=ms.n_positions,
            batch_size=ms.batch_size,
            instance_type=instance,
            prefix=prefix,
        )
        + host_memory_problems(facts, model_id=model_id, instance_type=instance, dtype=ms.dtype, prefix=prefix)
    )


def hub_model(ms: ModelServerSettings) -> tuple[str, str | None]:
    """(model id, commit) of the hub model that a bundle without one makes the instance download
    (commit None: none is set or pinned)."""
    model_id = ms.model_id or DEFAULT_MODEL
    return model_id, ms.model_revision or PINNED_REVISIONS.get(model_id)


def model_source_problems(ms: ModelServerSettings, *, bundled: str | None) -> list[str]:
    """`model_id` and `model_revision` against where the model comes from: the bundle, which
    ships the model named `bundled`, or (`bundled` None) the hub, from a pinned commit."""
    if bundled is None:
        model_id, revision = hub_model(ms)
        if revision is not None:
            return []
        return [
            f"inf2.model_revision=None is invalid: allowed is the commit of {model_id} on the Hugging Face hub "
            f"(40 hex digits) whose files the instance downloads; only {DEFAULT_MODEL} has one pinned by default"
        ]
    problems = []
    if ms.model_id not in (None, bundled):
        problems.append(
            f"inf2.model_id={ms.model_id!r} is invalid: allowed is unset or {bundled!r}, the model the bundle "
            f"ships (to serve {ms.model_id} from the hub, build the bundle without --tiny or --model-dir)"
        )
    if ms.model_revision is not None:
        problems.append(
            f"inf2.model_revision={ms.model_revision!r} is invalid: allowed is unset: the bundle ships its model "
            f"({bundled}), which no hub revision names"
        )
    return problems


# --- synthesis: the built bundle against the settings ----------------------------------------------


def check_bundle(settings: Inf2Settings) -> tuple[ModelFacts, str, bool]:
    """The model settings against where the model comes from (the bundle ships it, or the
    instance downloads a pinned hub commit); the tensor-parallel rules over the model the bundle
    ships (its manifest records the model's config.json facts) or, for a hub model, the table of
    known models; and the bundle's serving.properties against the current settings. Returns the
    model's facts, its name and whether the bundle ships it."""
    ms = settings.model_server
    manifest = read_manifest(settings.bundle.parent)
    model = manifest.get("model")
    # A bundle that ships its model points model_id at its own folder.
    bundled = str(model.get("name")) if isinstance(model, dict) and model.get("source") == "bundle" else None
    problems = model_source_problems(ms, bundled=bundled)
    if problems:
        raise ConfigError("; ".join(problems))
    hub_id, revision = hub_model(ms)
    if isinstance(model, dict) and isinstance(model.get("facts"), dict):
        facts = ModelFacts.from_dict(model["facts"])
        name = str(model.get("name", hub_id))
    else:
        known = known_model(hub_id)
        if known is None:
            raise ConfigError(unknown_model_message(hub_id))
        facts, name = known, hub_id
    problems = settings_problems(settings, facts, model_id=name)
    if settings.server is not None:
        problems += volume_problems(
            facts,
            model_id=name,
            dtype=ms.dtype,
            volume_size_gb=settings.server.volume_size_gb,
            bundle_bytes=settings.bundle.stat().st_size,
        )
    built = manifest.get("serving_properties")
    if isinstance(built, dict):
        wanted = (
            serving_properties(ms, model_id=built.get("option.model_id", ""))
            if bundled is not None
            else serving_properties(ms, model_id=hub_id, revision=revision)
        )
        stale = stale_properties(built, wanted)
        if stale:
            problems.append(
                f"inf2.bundle={str(settings.bundle)!r} is invalid: it was built from other settings ("
                + "; ".join(stale)
                + "); rebuild it with python -m artifacts_builder inf2 and the same settings (cdk.json's, and "
                "the same -c inf2.<key>=<value> as this synthesis: inf2.platform among them)"
            )
    if problems:
        raise ConfigError("; ".join(problems))
    return facts, name, bundled is not None


def bundle_bytes(folder: Mapping[str, Mapping[str, int]]) -> int:
    return sum(int(entry["size"]) for entry in folder.values())


def check_sagemaker_bundle(settings: Inf2Settings, facts: ModelFacts, *, model_id: str, ships_model: bool) -> None:
    """The ML storage volume holds what the start writes, and the container's network follows
    where the model comes from (each problem names its key)."""
    endpoint = settings.endpoint
    assert endpoint is not None
    inner = read_manifest(settings.bundle, fix="rebuild it with python -m artifacts_builder inf2")
    weights = facts.num_parameters * DTYPE_BYTES[settings.model_server.dtype]
    parts = volume_parts(
        weights_bytes=weights, bundle_bytes=bundle_bytes(inner["files"]), downloads_weights=not ships_model
    )
    problems = sagemaker_volume_problems(volume_size_gb=endpoint.volume_size or 0, model_id=model_id, parts=parts)
    if not ships_model and settings.enable_network_isolation:
        problems.append(
            "inf2.enable_network_isolation=True is invalid: allowed is false (or unset) with this bundle: it "
            f"makes the container download {model_id} from the Hugging Face hub; to serve the endpoint without "
            "network, build the bundle with --model-dir so that it ships the model"
        )
    if problems:
        raise ConfigError("; ".join(problems))
