"""No test depends on how busy the host is: every read of the wall clock in tests/ is either in a
test marked ``timing`` or says beside it why it is not a bound on speed (docs/DEVELOPING.md,
"Time in tests").

The rule, checked on every Python file under tests/ by its syntax tree:

* A *clock read* is any use of ``time.monotonic``, ``time.perf_counter``, ``time.time`` or their
  ``_ns`` forms, however imported (``import time as t``, ``from time import monotonic``), called
  or passed on as a function.
* A clock read inside a test function (``test_*`` at module level or in a ``Test*`` class, and
  anything nested in it) is allowed when the test is marked ``timing``: by its own decorator,
  its class's, or the module's ``pytestmark``. Such a test compares wall-clock durations, and
  says beside the comparison how its margin was derived; ``pytest -m timing --collect-only -q``
  lists them, ``make test-stress`` runs them with every core busy.
* Any other clock read (in a test not marked ``timing``, a helper, a fixture, a conftest, a
  stand-in server, module-level code) needs a comment ``# clock: <why>`` on one of the lines of
  its statement, or on the comment lines just above it, saying why it is not a bound on speed: a polling
  loop's deadline whose expiry fails the test only after a generous wait (say how generous), a
  clock that paces something rather than judging it. A ``# clock:`` comment with no reason does
  not count.
* A helper never measures for its callers: a marker cannot sit on a helper, and a duration it
  returned would escape this check. A test that compares durations measures them itself.

What this check cannot see: durations measured by the code under test (loadtest's StreamTiming,
a level's latencies) and then compared by a test. Those were reviewed by hand (issue 37): such
a test injects a clock it controls, or is marked ``timing``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent

#: The functions of the time module that read the wall clock.
CLOCKS = frozenset({"monotonic", "perf_counter", "time", "monotonic_ns", "perf_counter_ns", "time_ns"})
#: A comment that says why a clock read is no bound: at least one word after the colon.
REASON = re.compile(r"#\s*clock:\s*\w")


@dataclass(frozen=True)
class Read:
    path: Path
    line: int
    name: str
    #: The test function it is in (None: a helper, a fixture, module-level code).
    test: str | None
    allowed: bool

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def clock_names(tree: ast.Module) -> tuple[set[str], dict[str, str]]:
    """The names the time module goes by in `tree`, and the clock functions imported by name
    (local name: function)."""
    modules, functions = {"time"}, {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.asname or alias.name for alias in node.names if alias.name == "time"}
        elif isinstance(node, ast.ImportFrom) and node.module == "time":
            functions |= {alias.asname or alias.name: alias.name for alias in node.names if alias.name in CLOCKS}
    return modules, functions


def is_timing_mark(node: ast.expr) -> bool:
    """`node` is ``pytest.mark.timing`` or ``pytest.mark.timing(...)``, or a list or tuple of
    marks with it among them (a module's ``pytestmark``)."""
    if isinstance(node, ast.List | ast.Tuple):
        return any(is_timing_mark(element) for element in node.elts)
    if isinstance(node, ast.Call):
        node = node.func
    return isinstance(node, ast.Attribute) and node.attr == "timing" and ast.unparse(node.value).endswith("mark")


def module_is_timing(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Assign)
        and any(isinstance(target, ast.Name) and target.id == "pytestmark" for target in node.targets)
        and is_timing_mark(node.value)
        for node in tree.body
    )


def marked_tests(tree: ast.Module) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool]]:
    """The test functions of a module, each with whether it is marked ``timing`` (itself or its
    class)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            yield node, any(is_timing_mark(d) for d in node.decorator_list)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            marked = any(is_timing_mark(d) for d in node.decorator_list)
            for member in node.body:
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef) and member.name.startswith("test"):
                    yield member, marked or any(is_timing_mark(d) for d in member.decorator_list)


def statements_by_line(tree: ast.Module) -> dict[int, tuple[int, int]]:
    """For each line, the (first, last) lines of the innermost statement that spans it."""
    spans: dict[int, tuple[int, int]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and node.end_lineno is not None:
            first = node.lineno
            # A compound statement's own lines are its header's, not its body's.
            last = node.body[0].lineno - 1 if hasattr(node, "body") and node.body else node.end_lineno
            last = max(first, last)
            for line in range(first, last + 1):
                if line not in spans or spans[line][1] - spans[line][0] > last - first:
                    spans[line] = (first, last)
    return spans


def reads(path: Path) -> list[Read]:
    """Every clock read of the file at `path`, each with whether the rule allows it."""
    source = path.read_text()
    tree = ast.parse(source, filename=str(path))
    lines = source.splitlines()
    modules, functions = clock_names(tree)
    timing_module = module_is_timing(tree)
    owner: dict[int, tuple[str, bool]] = {}  # id of a node in a test: (test, marked timing)
    for test, marked in marked_tests(tree):
        for node in ast.walk(test):
            owner[id(node)] = (test.name, marked or timing_module)
    spans = statements_by_line(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in CLOCKS:
            if not (isinstance(node.value, ast.Name) and node.value.id in modules):
                continue
            name = f"time.{node.attr}"
        elif isinstance(node, ast.Name) and node.id in functions and isinstance(node.ctx, ast.Load):
            name = f"time.{functions[node.id]}"
        else:
            continue
        test, marked = owner.get(id(node), (None, False))
        first, last = spans.get(node.lineno, (node.lineno, node.lineno))
        commented = any(REASON.search(lines[line - 1]) for line in range(first, last + 1))
        above = first - 1
        while not commented and above >= 1 and lines[above - 1].strip().startswith("#"):
            commented = bool(REASON.search(lines[above - 1]))
            above -= 1
        found.append(Read(path, node.lineno, name, test, marked or commented))
    return sorted(found, key=lambda read: read.line)


def python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def test_every_clock_read_in_the_tests_is_a_timing_test_or_says_why_it_is_no_bound() -> None:
    offenders = [read for path in python_files() for read in reads(path) if not read.allowed]
    assert not offenders, (
        "a read of the wall clock that may bound how fast a busy host runs (tests/test_timing.py "
        "says the rule: mark the test `timing` and derive its margin in a comment, or say "
        "`# clock: <why this is no bound>` beside it):\n"
        + "\n".join(f"  {r.where()}: {r.name} in {r.test or 'a helper'}" for r in offenders)
    )


# --- The check itself, on examples --------------------------------------------------------------


def check(tmp_path: Path, source: str) -> list[tuple[int, str | None, bool]]:
    path = tmp_path / "test_example.py"
    path.write_text(source)
    return [(r.line, r.test, r.allowed) for r in reads(path)]


def test_a_bound_in_an_unmarked_test_is_found_however_time_is_imported(tmp_path: Path) -> None:
    source = (
        "import time\nimport time as t\nfrom time import perf_counter as pc, sleep\n"
        "def test_a():\n    started = time.monotonic()\n    assert t.time() - started < 1\n"
        "    assert pc() > 0\n    sleep(1)\n"
        "def helper():\n    return time.monotonic_ns()\n"
    )
    assert check(tmp_path, source) == [(5, "test_a", False), (6, "test_a", False), (7, "test_a", False),
                                       (10, None, False)]  # fmt: skip


def test_a_timing_test_and_a_reason_are_allowed(tmp_path: Path) -> None:
    source = (
        "import time\nimport pytest\n"
        "@pytest.mark.timing\ndef test_a():\n    def inner():\n        return time.monotonic()\n"
        "class TestB:\n    pytestmark = []\n    @pytest.mark.timing\n    def test_b(self):\n"
        "        return time.perf_counter()\n"
        "def test_c():\n    deadline = (\n        time.monotonic()\n        + 60\n    )  # clock: a deadline\n"
        "    # clock: the comment above says it,\n    # on two lines\n    time.monotonic()\n"
        "    time.monotonic()  # clock:\n"
        "    time.monotonic()\n"
    )
    # The last: a reason on the statement above is that statement's, not this one's.
    assert check(tmp_path, source) == [(6, "test_a", True), (11, "test_b", True), (14, "test_c", True),
                                       (19, "test_c", True), (20, "test_c", False), (21, "test_c", False)]  # fmt: skip


def test_a_timing_module_allows_its_tests_but_not_its_helpers(tmp_path: Path) -> None:
    source = (
        "import time\nimport pytest\npytestmark = [pytest.mark.slow, pytest.mark.timing]\n"
        "def test_a():\n    return time.monotonic()\ndef helper():\n    return time.monotonic()\n"
    )
    assert check(tmp_path, source) == [(5, "test_a", True), (7, None, False)]


def test_a_body_line_is_not_the_statement_of_its_block(tmp_path: Path) -> None:
    # The comment on a while's header speaks for its condition, not for the clock in its body.
    source = (
        "import time\ndef test_a():\n    while True:  # clock: a deadline\n        x = 1\n"
        "        print(time.monotonic())\n"
    )
    assert check(tmp_path, source) == [(5, "test_a", False)]


def test_the_timing_marker_is_registered() -> None:
    import tomllib

    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    assert any(m.startswith("timing:") for m in markers)
