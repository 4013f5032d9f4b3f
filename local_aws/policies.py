"""AWS's policy evaluation logic for the calls the deployed resources make on each other and the
calls a stack's grants are for, built on moto's own evaluator (``moto/iam/access_control.py``).

moto's :class:`~moto.iam.access_control.IAMPolicyStatement` matches a statement's Action and
Resource, and :class:`~moto.iam.access_control.AssumedRoleAccessKey` collects an assumed role's
inline and attached policies; what it lacks, and this module adds (docs/LOCAL_AWS_POLICIES.md):

- every condition operator the stacks' policies use (``String*``, ``Arn*``, ``Bool``, ``Null``,
  ``Numeric*``, with ``...IfExists`` and ``ForAnyValue:``/``ForAllValues:``), keys compared
  without regard to case, values as AWS compares them (IAM User Guide, "IAM JSON policy
  elements: Condition operators");
- principals of resource policies: ``*``, ``{"AWS": ...}`` (a role, its sessions, an account),
  ``{"Service": ...}``, and ``NotPrincipal``; ``NotAction`` and ``NotResource``;
- wildcards as IAM reads them (``*`` and ``?``; actions without regard to case, resources with);
- the decision as AWS takes it within one account (IAM User Guide, "Policy evaluation logic"):
  an explicit deny in any policy denies; else an allow of the identity-based policies or one of
  the resource-based policy naming the caller allows; a KMS key's policy must allow the caller
  itself or the account (which then defers to the identity-based policies: AWS KMS Developer
  Guide, "Default key policy"); else the call is denied, implicitly.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from moto.iam.access_control import IAMPolicy, IAMPolicyStatement
from moto.iam.exceptions import NotFoundException
from moto.iam.models import iam_backends
from moto.sts.models import sts_backends
from moto.utilities.utils import get_partition

#: Every request the local AWS receives, and every call its services make on each other, counts
#: as made over TLS: loopback stands in for it (the stacks deny aws:SecureTransport=false).
TRANSPORT: dict[str, str | list[str]] = {"aws:SecureTransport": "true"}


@dataclass(frozen=True)
class Caller:
    """Who makes a call: a role (``arn`` its ARN, ``session`` the ARN of the session that
    assumed it) or an AWS service principal (``arn`` its name, e.g. ``cloudwatch.amazonaws.com``)."""

    arn: str
    account: str
    service: bool = False
    session: str | None = None
    #: The identity-based policies (JSON documents) of a role: inline and attached.
    policies: tuple[str, ...] = field(default=(), repr=False)

    @property
    def shown(self) -> str:
        """How AWS names the caller in an access-denied message."""
        return self.session or self.arn


@dataclass(frozen=True)
class Decision:
    allowed: bool
    #: AWS's access-denied message ("" when allowed).
    message: str = ""


class _Match(Enum):
    NONE = 0
    #: The statement names the caller itself (or everyone).
    DIRECT = 1
    #: The statement names the caller's account: it defers to the account's identity policies.
    ACCOUNT = 2


def _glob(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    """IAM's wildcards: ``*`` any run of characters, ``?`` one character, nothing else special."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, (re.IGNORECASE if ignore_case else 0) | re.DOTALL) is not None


def _values(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return [str(v).lower() if isinstance(v, bool) else str(v) for v in items]


# The positive test of each operator: (actual value, policy value) -> bool.
_OPERATORS: dict[str, Any] = {
    "StringEquals": lambda a, e: a == e,
    "StringEqualsIgnoreCase": lambda a, e: a.lower() == e.lower(),
    "StringLike": lambda a, e: _glob(e, a),
    # "ArnEquals and ArnLike behave identically" (IAM User Guide, condition operators: ARN).
    "ArnEquals": lambda a, e: _glob(e, a),
    "ArnLike": lambda a, e: _glob(e, a),
    "Bool": lambda a, e: a.lower() == e.lower(),
    "NumericEquals": lambda a, e: float(a) == float(e),
    "NumericLessThan": lambda a, e: float(a) < float(e),
    "NumericLessThanEquals": lambda a, e: float(a) <= float(e),
    "NumericGreaterThan": lambda a, e: float(a) > float(e),
    "NumericGreaterThanEquals": lambda a, e: float(a) >= float(e),
}
# Each negated operator: the positive one it is the negation of.
_NEGATED = {
    "StringNotEquals": "StringEquals",
    "StringNotEqualsIgnoreCase": "StringEqualsIgnoreCase",
    "StringNotLike": "StringLike",
    "ArnNotEquals": "ArnEquals",
    "ArnNotLike": "ArnLike",
    "NumericNotEquals": "NumericEquals",
}


def condition_holds(operator: str, key: str, expected: Any, context: Mapping[str, Any]) -> bool:
    """Whether one condition of a statement holds for the request's ``context``.

    A key the request lacks: ``...IfExists`` holds; ``Null`` holds when it expects ``true``;
    ``ForAllValues:`` holds (no value fails it); a negated operator holds (nothing equals the
    value); any other does not. An operator this evaluator does not know never holds: an Allow
    it guards allows nothing (AWS refuses such a policy when it is written)."""
    name = operator.removesuffix("IfExists")
    if_exists = name != operator
    qualifier, _, name = name.rpartition(":")
    found = {k.lower(): v for k, v in context.items()}.get(key.lower())
    wanted = _values(expected)
    if name == "Null":
        return (found is None) == (wanted[0].lower() == "true")
    if found is None:
        return if_exists or qualifier == "ForAllValues" or name in _NEGATED
    actual = _values(found)
    positive = _OPERATORS.get(_NEGATED.get(name, name))
    if positive is None:
        return False

    def matches(value: str) -> bool:
        try:
            return any(positive(value, e) for e in wanted)
        except ValueError:  # a number operator given a non-number
            return False

    if name in _NEGATED:
        return not any(matches(a) for a in actual)
    if qualifier == "ForAllValues":
        return all(matches(a) for a in actual)
    return any(matches(a) for a in actual)


class Statement(IAMPolicyStatement):
    """One statement of an identity-based or resource-based policy (moto's, extended)."""

    @property
    def effect(self) -> str:
        return str(self._statement.get("Effect", ""))

    def applies(self, caller: Caller | None, action: str, resource: str, context: Mapping[str, Any]) -> _Match:
        """Whether the statement is about this request; with ``caller`` (a resource policy's
        statement), how its principal names the caller."""
        s = self._statement
        if ("NotAction" in s) == self._any("NotAction" if "NotAction" in s else "Action", action, ignore_case=True):
            return _Match.NONE
        if "NotResource" in s:
            if self._any("NotResource", resource):
                return _Match.NONE
        elif "Resource" in s and not self._any("Resource", resource):
            return _Match.NONE
        match = _Match.DIRECT if caller is None else _principal_of(s, caller)
        if match is _Match.NONE:
            return _Match.NONE
        for operator, keys in (s.get("Condition") or {}).items():
            for key, expected in keys.items():
                if not condition_holds(operator, key, expected, context):
                    return _Match.NONE
        return match

    def _any(self, element: str, value: str, *, ignore_case: bool = False) -> bool:
        return any(_glob(p, value, ignore_case=ignore_case) for p in _values(self._statement.get(element, [])))


def _principal_of(statement: Mapping[str, Any], caller: Caller) -> _Match:
    """How a resource policy's statement names the caller (NotPrincipal: everyone it does not)."""
    if "NotPrincipal" in statement:
        return _Match.NONE if _principal(statement["NotPrincipal"], caller) is not _Match.NONE else _Match.DIRECT
    return _principal(statement.get("Principal", {}), caller)


def _principal(element: Any, caller: Caller) -> _Match:
    if element == "*":
        return _Match.DIRECT
    best = _Match.NONE
    for kind, values in (element or {}).items():
        for value in _values(values):
            if value == "*" and kind == "AWS":
                return _Match.DIRECT
            if kind == "Service" and caller.service and value == caller.arn:
                return _Match.DIRECT
            if kind == "AWS" and not caller.service:
                if value in (caller.arn, caller.session):
                    return _Match.DIRECT
                if value in (caller.account, f"arn:aws:iam::{caller.account}:root"):
                    best = _Match.ACCOUNT
    return best


def statements(document: str | Mapping[str, Any] | Any) -> list[Statement]:
    """The statements of a policy: a JSON document, a parsed one, or a moto policy."""
    if isinstance(document, Mapping):
        parsed: Any = document
    else:
        parsed = IAMPolicy(document)._policy_json
    found = parsed.get("Statement", [])
    return [Statement(s) for s in (found if isinstance(found, list) else [found])]


def evaluate(
    caller: Caller,
    action: str,
    resource: str,
    *,
    resource_policy: str | Mapping[str, Any] | None = None,
    key_policy: bool = False,
    context: Mapping[str, Any] | None = None,
) -> Decision:
    """AWS's decision on ``caller`` calling ``action`` on ``resource`` of the caller's account.

    :param resource_policy: the resource's own policy (a topic's, a bucket's, a key's).
    :param key_policy: whether that policy is a KMS key policy, which must allow the call itself
        or delegate to the account's identity-based policies.
    :param context: the request's condition keys beyond aws:SecureTransport (always true here).
    """
    ctx = {
        **TRANSPORT,
        "aws:PrincipalAccount": caller.account,
        # Every resource here is the caller's account's (S3's ARNs name no account).
        "aws:ResourceAccount": [*resource.split(":"), "", "", "", "", ""][4] or caller.account,
        **(context or {}),
    }
    if not caller.service:
        ctx.setdefault("aws:PrincipalArn", caller.arn)
    identity = [s for doc in caller.policies for s in statements(doc)]
    resource_statements = statements(resource_policy) if resource_policy is not None else []

    def denied(where: str) -> Decision:
        return Decision(False, _message(caller, action, resource, f"with an explicit deny in {where} policy"))

    if any(s.effect == "Deny" and s.applies(None, action, resource, ctx) is _Match.DIRECT for s in identity):
        return denied("an identity-based")
    matched = [(s, s.applies(caller, action, resource, ctx)) for s in resource_statements]
    if any(s.effect == "Deny" and m is not _Match.NONE for s, m in matched):
        return denied("a resource-based")
    direct = any(s.effect == "Allow" and m is _Match.DIRECT for s, m in matched)
    delegated = any(s.effect == "Allow" and m is _Match.ACCOUNT for s, m in matched)
    by_identity = any(s.effect == "Allow" and s.applies(None, action, resource, ctx) is _Match.DIRECT for s in identity)
    if direct or (by_identity and (delegated or not key_policy)):
        return Decision(True)
    if caller.service or (key_policy and not delegated):
        why = "no resource-based policy allows"
    else:
        why = "no identity-based policy allows"
    return Decision(False, _message(caller, action, resource, f"because {why} the {action} action"))


def _message(caller: Caller, action: str, resource: str, why: str) -> str:
    return f"User: {caller.shown} is not authorized to perform: {action} on resource: {resource} {why}"


def role_caller(role: Any, account: str, *, session: str | None = None) -> Caller:
    """A moto IAM role as a caller, with its inline and attached policies."""
    inline = [doc if isinstance(doc, str) else json.dumps(doc) for doc in role.policies.values()]
    attached = [_default_version(p) for p in role.managed_policies.values()]
    return Caller(arn=role.arn, account=account, session=session, policies=(*inline, *attached))


def _default_version(policy: Any) -> str:
    return str(next(v.document for v in policy.versions if v.is_default))


def service_caller(service: str, account: str) -> Caller:
    return Caller(arn=service, account=account, service=True)


def first_denial(decisions: Iterable[Decision]) -> Decision:
    """The first denial of ``decisions`` (evaluated lazily, in order), else an allow."""
    for decision in decisions:
        if not decision.allowed:
            return decision
    return Decision(True)


__all__: Sequence[str] = (
    "TRANSPORT",
    "Caller",
    "Decision",
    "Statement",
    "condition_holds",
    "evaluate",
    "first_denial",
    "role_caller",
    "service_caller",
    "statements",
)


def assumed_role_caller(headers: Mapping[str, str], account_id: str, region_name: str) -> Caller | None:
    """The role a request is signed as, when its credentials came from the local AWS's
    sts:AssumeRole (an access key with a session token); None for the account's own
    credentials (those `python -m local_aws` prints), which stay its administrator's."""
    said = re.search(r"Credential=([^/,\s]+)/", headers.get("Authorization") or "")
    if said is None or not headers.get("X-Amz-Security-Token"):
        return None
    partition = get_partition(region_name)
    session = sts_backends[account_id][partition].get_assumed_role_from_access_key(said.group(1))
    if session is None:
        return None
    try:
        role = iam_backends[session.account_id][partition].get_role_by_arn(session.role_arn)
    except NotFoundException:  # a role deleted since, or never created: it may do nothing
        return Caller(arn=session.role_arn, account=session.account_id, session=session.arn)
    return role_caller(role, session.account_id, session=session.arn)
