"""The props of an inf2 model server host. Standard library only: the CDK app reads cdk.json
into this class without loading the AWS CDK."""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from llm_inference_cdk.props import Check, PropError, integer, optional, prop, text, validate

INF2_INSTANCE = re.compile(r"^inf2\.(xlarge|8xlarge|24xlarge|48xlarge)$")
#: The Neuron DLAMI with every framework, Ubuntu 22.04 (AWS publishes only ``latest``).
NEURON_DLAMI = "/aws/service/neuron/dlami/multi-framework/ubuntu-22.04/latest/image_id"
_SSM_PARAMETER = re.compile(r"^/[A-Za-z0-9_./-]+$")
#: The widest public range that may reach the server: a site's or a VPN's egress block.
WIDEST_PUBLIC_PREFIX = 24


MAX_PROBE_BYTES = 1024


def _json_object(value: Any) -> bool:
    try:
        return isinstance(value, str) and len(value.encode()) <= MAX_PROBE_BYTES and isinstance(json.loads(value), dict)
    except ValueError:
        return False


@dataclass(frozen=True, kw_only=True)
class Inf2ServerProps:
    #: An inf2 instance type.
    instance_type: str = prop(
        "inf2.48xlarge",
        check=text(INF2_INSTANCE, what="an inf2 type: inf2.xlarge, inf2.8xlarge, inf2.24xlarge or inf2.48xlarge"),
    )
    #: An SSM parameter that holds the AMI id, resolved at deploy time (default: the newest Neuron
    #: DLAMI, which a new release replaces at the next deploy: pin it in a parameter of yours).
    ami_ssm_parameter: str = prop(
        NEURON_DLAMI, check=text(_SSM_PARAMETER, what=f"an SSM parameter path such as {NEURON_DLAMI}")
    )
    #: The encrypted gp3 root volume, GB: the DLAMI (about 100 GB), the model, its split copy
    #: and the compiled graphs.
    volume_size_gb: int = prop(512, check=integer(200, 16_384))
    #: DJL Serving's port on the host.
    port: int = prop(8080, check=integer(1024, 65_535))
    #: A CIDR that may reach `port` (None: no ingress at all; use SSM port forwarding).
    ingress_cidr: str | None = prop(None, check=optional(text(what="an IPv4 CIDR such as 203.0.113.0/24")))
    #: Seconds the host waits for ``/ping`` after the container starts before it reports the
    #: server down: DJL opens its port only once every copy of the model has loaded.
    load_timeout_s: int = prop(4500, check=integer(60, 86_400))
    #: The body of the request the host sends the server every minute to time an invocation (the
    #: InvocationLatency metric): one new token, in the bundle's model.py's format (default).
    probe_request: str = prop(
        '{"text": ["Hello"], "max_new_tokens": 1}',
        check=Check(_json_object, f"a JSON object of at most {MAX_PROBE_BYTES} bytes, the body of a request"),
    )

    def __post_init__(self) -> None:
        validate(self, self._rules)

    def _rules(self) -> Iterator[PropError]:
        if self.ingress_cidr is not None:
            problem = ingress_problem(self.ingress_cidr)
            if problem is not None:
                yield PropError(type(self).__name__, "ingress_cidr", self.ingress_cidr, problem)


def ingress_problem(cidr: str) -> str | None:
    """What is wrong with `cidr` as the model server's ingress (None: nothing). The server has no
    authentication, so a public range may be at most a /24 (a site's or a VPN's egress block);
    private ranges and single addresses are fine."""
    try:
        network = ipaddress.IPv4Network(cidr)
    except ValueError:
        try:  # host bits set: name the network the user most likely meant
            meant = ipaddress.IPv4Network(cidr, strict=False)
        except ValueError:
            return "an IPv4 CIDR such as 203.0.113.0/24"
        return f"a network address: did you mean {meant}?"
    if network.is_private or network.prefixlen >= WIDEST_PUBLIC_PREFIX:
        return None
    return (
        f"a private network, or a public one of at most {2 ** (32 - WIDEST_PUBLIC_PREFIX)} addresses "
        f"(/{WIDEST_PUBLIC_PREFIX} or narrower): {cidr} opens the model server, which has no authentication, to "
        f"{network.num_addresses} addresses; put a load balancer with authentication in front to open it wider"
    )
