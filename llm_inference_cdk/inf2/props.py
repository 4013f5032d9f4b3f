"""The props of an inf2 model server host. Standard library only: the CDK app reads cdk.json
into this class without loading the AWS CDK."""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from llm_contracts.inf2 import NEURON_DLAMI
from llm_inference_cdk.props import Check, PropError, integer, optional, prop, text, validate

INF2_INSTANCE = re.compile(r"^inf2\.(xlarge|8xlarge|24xlarge|48xlarge)$")
_SSM_PARAMETER = re.compile(r"^/[A-Za-z0-9_./-]+$")
#: The addresses that can reach a host with no public address in a private subnet: those of its
#: VPC and of the networks connected to it (VPN, Direct Connect, peering, a transit gateway), which
#: are private (RFC 1918) or shared (RFC 6598: carrier-grade NAT, and VPCs that use it).
REACHABLE_NETWORKS = tuple(
    ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
)


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
    #: An SSM parameter that holds the AMI id, resolved at deploy time (default: the Ubuntu 22.04
    #: base Neuron DLAMI's, frozen on its last image, whose driver runs the pinned LMI image's Neuron
    #: runtime; the newer DLAMIs' drivers do not: llm_contracts/inf2.py's NEURON_DLAMI).
    ami_ssm_parameter: str = prop(
        NEURON_DLAMI, check=text(_SSM_PARAMETER, what=f"an SSM parameter path such as {NEURON_DLAMI}")
    )
    #: The encrypted gp3 root volume, GB: the DLAMI (about 100 GB), the model, its split copy
    #: and the compiled graphs.
    volume_size_gb: int = prop(512, check=integer(200, 16_384))
    #: DJL Serving's port on the host.
    port: int = prop(8080, check=integer(1024, 65_535))
    #: The network whose hosts may reach `port` directly: inside the VPC, or connected to it (VPN,
    #: Direct Connect, peering, a transit gateway), of private or shared addresses (None: no ingress
    #: at all; use SSM port forwarding).
    ingress_cidr: str | None = prop(None, check=optional(text(what="an IPv4 CIDR such as 10.0.0.0/16")))
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
    """What is wrong with `cidr` as the model server's ingress (None: nothing). The setting names
    the callers that may reach DJL's port directly: hosts of the instance's VPC or of a network
    connected to it. The instance has no public address and its subnet takes no traffic from the
    internet (the NAT gateway passes only replies), so a public range would be a rule that admits
    nothing, or, once someone gives the host a public address, the whole range to a server
    without authentication."""
    try:
        network = ipaddress.IPv4Network(cidr)
    except ValueError:
        try:  # host bits set: name the network the user most likely meant
            meant = ipaddress.IPv4Network(cidr, strict=False)
        except ValueError:
            return "an IPv4 CIDR such as 10.0.0.0/16"
        return f"a network address: did you mean {meant}?"
    if any(network.subnet_of(reachable) for reachable in REACHABLE_NETWORKS):
        return None
    return (
        "a network inside the VPC or connected to it by VPN, Direct Connect, peering or a transit gateway, "
        f"of private or shared addresses ({', '.join(map(str, REACHABLE_NETWORKS))}): the instance has no public "
        f"address, so {cidr} can never reach it; serve callers outside the VPC through a load balancer with "
        "authentication"
    )
