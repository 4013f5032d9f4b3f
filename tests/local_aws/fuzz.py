"""A fuzz of the SageMaker runtime's three calls, derived from botocore's ``sagemaker-runtime``
model: every member of each operation's input shape is left out, given a value its shape allows
(its pattern, its lengths or range), or given one it refuses; a body is any bytes, up to and past
6 MB, or JSON made of the container's own keys; the endpoint exists, does not, was deleted or is
not in service; a streamed answer is cut by the caller at a random point.

Each case is sent through boto3 and the real server, and its answer must be what AWS documents
for it, decided here from the case alone (never from the local AWS's own checks): HTTP 413 past
6 MB; ``ValidationError`` for a value the model refuses, an endpoint that cannot be invoked, or a
header the endpoint has no use for (a target model, container or variant it lacks, a component
of an endpoint without components); otherwise the container's answer, which the fuzz asks the
container for directly too: 200 with its content type, or ``ModelError`` (424) with its status.
Never a 5xx of the local AWS, never HTML (tests/conftest.py also fails a test during which the
local AWS met a fault of its own). Hypothesis runs with a fixed seed, without its database.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import botocore.session
from botocore.config import Config
from botocore.exceptions import ClientError, EventStreamError
from botocore.model import OperationModel, Shape
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from local_aws import LocalAws
from local_aws.sagemaker.containers import Container

#: The seed every fuzz runs with.
SEED = 20261204
#: SageMaker's largest body, and the largest inline body of an async request (botocore's model).
MAX_BODY = 6 * 1024 * 1024
ASYNC_MAX_BODY = 128_000
#: A body from which a container's early answer and the upload race (see ask).
RACY_BODY = 1024 * 1024
#: The runtime's operations: boto3's method, and whether the caller can read a stream.
OPERATIONS = {
    "InvokeEndpoint": "invoke_endpoint",
    "InvokeEndpointWithResponseStream": "invoke_endpoint_with_response_stream",
    "InvokeEndpointAsync": "invoke_endpoint_async",
}
#: What a header value can hold and still reach the server as sent: printable ASCII (HTTP strips
#: spaces at either end, and refuses control characters).
PRINTABLE = st.characters(min_codepoint=0x20, max_codepoint=0x7E)
#: A character the models' ASCII patterns refuse that HTTP carries (as Latin-1).
NOT_ASCII = "é"
#: Content types a caller sends, beside any the model allows.
CONTENT_TYPES = [
    "application/json",
    "text/csv",
    "text/plain",
    "image/png",
    "application/octet-stream",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/x-amz-json-1.1",
    "application/jsonlines",
]


@cache
def operation(name: str) -> OperationModel:
    return botocore.session.get_session().get_service_model("sagemaker-runtime").operation_model(name)


def _python_pattern(java: str) -> str:
    """A botocore (Java) pattern as Python's re reads it, over printable ASCII."""
    replaced = java.replace("[\\p{Print}]", "[\\x20-\\x7e]").replace("\\S", "[\\x21-\\x7e]")
    return replaced.replace("\\z", "\\Z")


def valid_strings(shape: Shape) -> st.SearchStrategy[str]:
    """Values the member's shape allows, as HTTP carries them."""
    low, high = int(shape.metadata.get("min", 0)), int(shape.metadata.get("max", 256))
    pattern = shape.metadata.get("pattern")
    if pattern in (None, ".*", r"\p{ASCII}*"):
        values = st.text(PRINTABLE, min_size=low, max_size=min(high, 64)) | st.just("a" * high)
    else:
        values = st.from_regex(_python_pattern(pattern), fullmatch=True, alphabet=PRINTABLE)
    return values.map(str.strip).filter(lambda v: low <= len(v) <= high and (v or low == 0))


def invalid_strings(shape: Shape) -> st.SearchStrategy[str]:
    """Values the member's shape refuses, as HTTP carries them."""
    high = int(shape.metadata.get("max", 0))
    refused: list[st.SearchStrategy[str]] = []
    if high:
        refused.append(st.integers(high + 1, high + 40).map(lambda n: "a" * n))
    pattern = shape.metadata.get("pattern", "")
    if "ASCII" in pattern:
        refused.append(valid_strings(shape).map(lambda v: (v + NOT_ASCII)[-high:] if high else v + NOT_ASCII))
    elif pattern.startswith("^[a-zA-Z0-9]"):
        refused.append(st.sampled_from(["-a", "a_b", "a b", "a.b", "a--", "_"]))
    return st.one_of(refused)


def valid_integers(shape: Shape) -> st.SearchStrategy[int]:
    return st.integers(int(shape.metadata.get("min", 0)), int(shape.metadata.get("max", 2**31 - 1)))


def invalid_integers(shape: Shape) -> st.SearchStrategy[int]:
    return st.integers(-5, int(shape.metadata["min"]) - 1) | st.integers(
        int(shape.metadata["max"]) + 1, int(shape.metadata["max"]) + 100
    )


@dataclass(frozen=True)
class Value:
    """A member's generated value, and whether the model allows it."""

    value: Any
    valid: bool


def member_values(shape: Shape) -> st.SearchStrategy[Value | None]:
    """Left out (most often), allowed or refused."""
    if shape.type_name == "integer":
        allowed, refused = valid_integers(shape), invalid_integers(shape)
    else:
        allowed, refused = valid_strings(shape), invalid_strings(shape)
    return st.one_of(
        st.none(),
        st.none(),
        allowed.map(lambda v: Value(v, True)),
        refused.map(lambda v: Value(v, False)),
    )


# --- What is invoked ------------------------------------------------------------------------------


@dataclass
class Target:
    """An endpoint to fuzz, and the names of those that cannot answer, in one local AWS."""

    aws: LocalAws
    #: The endpoint that answers, its variant and its container (asked directly for the answer
    #: the local AWS must pass on).
    endpoint: str
    variant: str
    container: Callable[[], Container]
    #: Requests the container answers (its seeds), and the keys of its requests.
    seeds: Sequence[bytes]
    keys: Sequence[str]
    #: Names of endpoints that do not exist, were deleted, or are not InService.
    unusable: Mapping[str, str] = field(default_factory=dict)
    #: Whether the container is this project's (its 5xx would be a bug of ours, not an answer).
    ours: bool = False
    #: S3 URIs of async inputs that exist, for InvokeEndpointAsync.
    inputs: Sequence[str] = ()
    #: Whether the endpoint is an asynchronous one.
    is_async: bool = False
    #: Where each accepted async request's answer or failure will be.
    accepted: list[tuple[str, str]] = field(default_factory=list)


def json_bodies(keys: Sequence[str]) -> st.SearchStrategy[bytes]:
    """JSON objects of the container's own keys and random values: near-valid requests."""
    scalars = st.none() | st.booleans() | st.integers(-3, 64) | st.text(PRINTABLE, max_size=40)
    values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(list(keys)) | st.text(PRINTABLE, max_size=8), inner, max_size=3), max_leaves=8)  # fmt: skip
    return st.dictionaries(st.sampled_from(list(keys)), values, max_size=4).map(lambda d: json.dumps(d).encode())


def bodies(target: Target) -> st.SearchStrategy[bytes]:
    """Any bytes (mostly small), the container's seeds, JSON of its keys, and bodies of exactly 6
    MB and one byte more."""
    big = st.tuples(st.sampled_from([MAX_BODY, MAX_BODY + 1]), st.binary(max_size=16)).map(
        lambda sized: sized[1] + b"\0" * (sized[0] - len(sized[1]))
    )
    kinds = st.sampled_from(["seed"] * 8 + ["bytes", "json", "json", "repeated"] * 2 + ["big"])
    strategies = {
        "bytes": st.binary(max_size=2048),
        "seed": st.sampled_from(list(target.seeds)),
        "json": json_bodies(target.keys),
        "repeated": st.binary(min_size=1, max_size=64).map(lambda b: b * 100),
        "big": big,
    }
    return kinds.flatmap(strategies.__getitem__)


@dataclass(frozen=True)
class Case:
    operation: str
    endpoint: str
    #: Why the endpoint cannot be invoked ("" when it can).
    unusable: str
    body: bytes | None
    members: Mapping[str, Value]
    #: For a stream: the parts the caller reads before it goes away (None: all).
    cut_after: int | None = None

    @property
    def kwargs(self) -> dict[str, Any]:
        found: dict[str, Any] = {"EndpointName": self.endpoint}
        if self.body is not None:
            found["Body"] = self.body
        found.update({name: v.value for name, v in self.members.items()})
        return found

    def expected(self, target: Target) -> str:
        """What AWS answers, by the documented rules alone (see the module's docstring)."""
        if self.body is not None and len(self.body) > MAX_BODY:
            return "413"
        if any(not v.valid for v in self.members.values()):
            return "ValidationError"
        if self.operation == "InvokeEndpointAsync":
            inline = bool(self.body)
            if inline == ("InputLocation" in self.members) or len(self.body or b"") > ASYNC_MAX_BODY:
                return "ValidationError"
        if self.unusable:
            return "ValidationError"
        given = {name for name in self.members}
        if given & {"TargetModel", "TargetContainerHostname", "InferenceComponentName"}:
            return "ValidationError"
        if "TargetVariant" in given and self.members["TargetVariant"].value != target.variant:
            return "ValidationError"
        if self.operation == "InvokeEndpointAsync":
            return "202" if target.is_async and self.endpoint == target.endpoint else "ValidationError"
        if target.is_async:
            return "ValidationError"  # a real-time call to an asynchronous endpoint
        return "container"


#: Members no endpoint here has a use for: a value the model allows is still refused.
INAPPLICABLE = ("TargetModel", "TargetContainerHostname", "InferenceComponentName")
#: How a case goes wrong, if it does (weights: most cases are requests AWS hands the container,
#: some of them a seed request as a client sends it).
FLAWS = ["plain"] * 3 + ["none"] * 6 + ["member", "endpoint", "inapplicable"]


#: How often (in four) an optional member is given: the content type mostly, as callers do.
GIVEN = {"ContentType": 3, "Accept": 2}


def _allowed(member: str, shape: Shape, target: Target) -> st.SearchStrategy[Any]:
    if member in ("ContentType", "Accept"):
        common = st.sampled_from(["application/json"] * len(CONTENT_TYPES) + CONTENT_TYPES)
        return common | common | valid_strings(shape)
    if member == "TargetVariant":
        return st.just(target.variant)
    if member == "InputLocation":
        return st.sampled_from([*target.inputs, "s3://fuzz-missing/none"])
    return valid_integers(shape) if shape.type_name == "integer" else valid_strings(shape)


def _refused(shape: Shape) -> st.SearchStrategy[Any]:
    return invalid_integers(shape) if shape.type_name == "integer" else invalid_strings(shape)


@st.composite
def async_input(draw: st.DrawFn, shape: Shape, target: Target, members: dict[str, Value], body: bytes | None) -> Any:
    """Exactly one of Body and InputLocation (the API reference), or a flawed request with both or
    neither: the body, and InputLocation set in `members`."""
    given = draw(st.sampled_from(["location", "location", "inline", "inline", "both", "neither"]))
    if given in ("location", "both"):
        members["InputLocation"] = Value(draw(_allowed("InputLocation", shape.members["InputLocation"], target)), True)
    return None if given in ("location", "neither") else body


@st.composite
def _flaw(
    draw: st.DrawFn, flaw: str, shape: Shape, target: Target, members: dict[str, Value], names: list[str]
) -> tuple[str, str]:
    """Apply `flaw` to the request: a refused member, an endpoint that cannot answer (or a name
    off its pattern), or a member the endpoint has no use for (set in `members`); the endpoint
    invoked, and why it cannot answer ("" when it can)."""
    if flaw == "member":
        member = draw(st.sampled_from(names))
        members[member] = Value(draw(_refused(shape.members[member])), False)
    elif flaw == "endpoint":
        endpoint, unusable = draw(st.sampled_from([*target.unusable.items(), ("", "off-pattern")]))
        if unusable == "off-pattern":
            endpoint = draw(invalid_strings(shape.members["EndpointName"]))
        return endpoint, unusable
    elif flaw == "inapplicable" and set(INAPPLICABLE) & set(names):
        member = draw(st.sampled_from([m for m in INAPPLICABLE if m in names]))
        members[member] = Value(draw(_allowed(member, shape.members[member], target)), True)
    return target.endpoint, ""


def cases(target: Target, name: str) -> st.SearchStrategy[Case]:
    """A request of operation `name`: each optional member left out or allowed, then at most one
    flaw: a member the model refuses, an endpoint that cannot answer (or a name off its
    pattern), or a member the endpoint has no use for."""
    shape = operation(name).input_shape
    optional = [
        m
        for m in shape.members
        if m not in ("EndpointName", "Body", *shape.required_members)
        and not (m == "InputLocation" and name == "InvokeEndpointAsync")
    ]
    required = [m for m in shape.required_members if m not in ("EndpointName", "Body")]
    # The strategies that do not depend on what a case drew, made once: built anew in each draw,
    # hypothesis validated them again each time.
    allowed = {m: _allowed(m, shape.members[m], target) for m in [*optional, *required] if m not in INAPPLICABLE}
    flaws, quarter, body_of = st.sampled_from(FLAWS), st.integers(0, 3), bodies(target)

    @st.composite
    def case(draw: st.DrawFn) -> Case:
        flaw = draw(flaws)
        members: dict[str, Value] = {}
        for member in optional:
            if member in INAPPLICABLE or draw(quarter) >= GIVEN.get(member, 1):
                continue
            members[member] = Value(draw(allowed[member]), True)
        for member in required:
            members[member] = Value(draw(allowed[member]), True)
        endpoint, unusable = draw(_flaw(flaw, shape, target, members, [*optional, *required]))
        body = draw(body_of) if "Body" in shape.members else None
        if flaw == "plain":  # a seed request as a client sends it: its body, as JSON
            members = {"ContentType": Value("application/json", True)}
            body = draw(st.sampled_from(list(target.seeds))) if body is not None else None
        if name == "InvokeEndpointAsync":
            body = draw(async_input(shape, target, members, body))
        streamed = name == "InvokeEndpointWithResponseStream"
        cut = draw(st.one_of(st.none(), st.integers(0, 3))) if streamed else None
        return Case(name, endpoint, unusable, body, members, cut)

    return case()


# --- Asking, and checking the answer ---------------------------------------------------------------


def outcome_of(response: Mapping[str, Any]) -> str:
    """A ClientError's response as the fuzz counts it."""
    code = str(response["Error"]["Code"])
    if code == "ModelError":
        return f"ModelError {response.get('OriginalStatusCode')}"
    return code


def direct(target: Target, case: Case) -> int:
    """The container's status for the case's request, asked directly as SageMaker would (0: it
    gave no answer)."""
    members = case.members
    accept = members["Accept"].value if "Accept" in members else None
    # What SageMaker hands the container besides the body: the custom attributes, and the session
    # id of stateful sessions (sagemaker/latest/dg/stateful-sessions.html).
    headers = {
        header: members[member].value
        for member, header in (("CustomAttributes", "X-Amzn-SageMaker-Custom-Attributes"),
                               ("SessionId", "X-Amzn-SageMaker-Session-Id"))
        if member in members and members[member].value
    }  # fmt: skip
    content_type = members["ContentType"].value if "ContentType" in members else "application/octet-stream"
    try:
        answer = target.container().invoke(
            case.body or b"", content_type=content_type or "application/octet-stream", accept=accept or None,
            headers=headers, timeout=60,
        )  # fmt: skip
    except OSError:  # no answer: the container closed or reset the connection
        return 0
    return answer.status


def ask(target: Target, case: Case, runtime: Any) -> str:
    """The case's outcome: the answer's status or error, checked against what AWS answers."""
    expected = case.expected(target)
    call = getattr(runtime, OPERATIONS[case.operation])
    try:
        answer = call(**case.kwargs)
    except ClientError as exc:
        got = outcome_of(exc.response)
        status = exc.response["ResponseMetadata"]["HTTPStatusCode"]
        assert "<html" not in str(exc.response["Error"].get("Message", "")).lower(), exc.response
        if expected == "container":
            assert got.startswith("ModelError "), (case, exc.response)
            assert status == 424, exc.response
            container_status = direct(target, case)
            original = int(exc.response.get("OriginalStatusCode", -1))
            # A container that answers a large body before reading it, then closes the connection
            # (vLLM's server does, with 6 MB), is heard or not as the race with the upload goes.
            raced = len(case.body or b"") >= RACY_BODY and 0 in (original, container_status)
            assert original == container_status or raced, (case, exc.response, container_status)
            assert not (target.ours and original >= 500), ("our container answered 5xx", case, exc.response)
            return got
        assert got == expected, (case, expected, exc.response)
        return got
    if case.operation == "InvokeEndpointAsync":
        assert expected == "202", (case, answer)
        target.accepted.append((answer["OutputLocation"], answer["FailureLocation"]))
        return "202"
    assert expected == "container", (case, expected, answer)
    if case.operation == "InvokeEndpointWithResponseStream":
        return read_stream(answer, case)
    data = answer["Body"].read()
    assert direct(target, case) == 200, case
    assert answer["InvokedProductionVariant"] == target.variant
    return "200" if data or case.body is not None else "200 (empty)"


def read_stream(answer: Mapping[str, Any], case: Case) -> str:
    events = answer["Body"]
    read = 0
    try:
        for event in events:
            assert set(event) == {"PayloadPart"}, event
            read += 1
            if case.cut_after is not None and read >= case.cut_after:
                events.close()
                return "stream cut by the caller"
    except EventStreamError as exc:
        return f"ModelStreamError {exc.response['Error'].get('ErrorCode') or exc.response['Error']['Code']}"
    return "200 stream"


#: The outcomes of each operation's cases, by fuzz (the figures of docs/LOCAL_AWS.md).
OUTCOMES: dict[str, dict[str, Counter[str]]] = {}


def boundaries(target: Target, name: str) -> list[Case]:
    """The model's limits, each on both sides, besides what Hypothesis draws: a body of exactly
    6 MB and one byte more, CustomAttributes of 1,024 characters and 1,025."""
    found = []
    sizes = (MAX_BODY, MAX_BODY + 1) if name != "InvokeEndpointAsync" else (ASYNC_MAX_BODY, ASYNC_MAX_BODY + 1)
    for size in sizes:
        found.append(Case(name, target.endpoint, "", target.seeds[0] + b" " * (size - len(target.seeds[0])), {}))
    required: dict[str, Value] = {}
    body: bytes | None = target.seeds[0]
    if name == "InvokeEndpointAsync":
        required, body = {"InputLocation": Value(target.inputs[0], True)}, None
    for size, valid in ((1024, True), (1025, False)):
        members = {**required, "CustomAttributes": Value("a" * size, valid)}
        found.append(Case(name, target.endpoint, "", body, members))
    return found


def fuzz(target: Target, name: str, operations: Mapping[str, int]) -> dict[str, Counter[str]]:
    """Run each operation's cases against `target`: `operations` maps an operation to the number
    of cases Hypothesis draws, after its boundaries."""
    runtime = target.aws.client("sagemaker-runtime", config=Config(retries={"total_max_attempts": 1},
                                                                   read_timeout=120))  # fmt: skip
    found: dict[str, Counter[str]] = {}
    for op, examples in operations.items():
        counts: Counter[str] = Counter()

        @seed(SEED)
        @settings(
            max_examples=examples,
            database=None,
            deadline=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(cases(target, op))
        def run(case: Case) -> None:
            counts[ask(target, case, runtime)] += 1  # noqa: B023 -- run at once, in this iteration

        for case in boundaries(target, op):
            counts[ask(target, case, runtime)] += 1
        run()
        found[op] = counts
    OUTCOMES[name] = found
    print(f"fuzz {name}: " + json.dumps({op: dict(c) for op, c in found.items()}, sort_keys=True))
    return found


def summary(outcomes: Mapping[str, Counter[str]]) -> str:
    return "; ".join(f"{op}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())) for op, c in outcomes.items())


def only(pattern: str, values: Sequence[str]) -> list[str]:
    return [v for v in values if re.fullmatch(pattern, v)]
