"""The commands README and docs/ give work as written.

Every fenced shell block says how it is checked, by a `<!-- commands: ... -->` comment right
above it, or has none:

- none: this module runs its commands (each of a kind it knows how to run offline);
- `run by <path>[::<test>]`: that test (or script) runs them, reading them from the page;
- `need AWS`, `need a GPU`, `need the hub` (or several: `need the hub and AWS`): they cannot
  run here, and each must name what it needs (an AWS call, a GPU, a download from the hub);
- `synopsis`: usage lines with placeholders, not commands to run.

A comment that says what a command prints (`# prints its commit`) is checked whatever the
block's marker: the command runs here offline (the builder from a stand-in hub) and what it
prints must hold what the comment claims.

Whatever its block, every documented command (the inline ones too) is also checked against the
code: a `make` target exists and takes its variables, a `python -m` command's flags and literal
values are its parser's, a `cdk` command names the app's stacks and settings it accepts, and a
`pytest` command selects existing paths and markers. So is every `section.key` setting a page
names. tests/docs_pages.py reads the pages.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import os
import re
import runpy
import shlex
import subprocess
import sys
import tomllib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from unittest import mock

import pytest
from _pytest.mark.expression import Expression

from project_config import SECTIONS, ConfigError, load_config, parse_context_pairs, settings_of
from tests.docs_pages import (
    PAGES,
    ROOT,
    Block,
    PrintClaim,
    all_commands,
    commands_of,
    is_placeholder,
    page_id,
    print_claims,
    shell_blocks,
)
from tests.inf2.helpers import COMMIT, FakeHub
from tests.tiers import TIERS

#: What a `need ...` marker may name, and how a command shows that it needs it.
NEEDS = {
    # An AWS CLI call, a CDK CLI command that calls CloudFormation, or boto3.
    "AWS": re.compile(r"\baws [a-z0-9-]+ [a-z0-9-]+|\bcdk (?:bootstrap|deploy|destroy|diff)\b|\bboto3\b"),
    "a GPU": re.compile(r"nvidia-smi|--gpu\b|-m gpu\b|tensorrt|CUDA_VISIBLE_DEVICES"),
    # The builder downloads the real model unless it builds a tiny one or is given a folder (a
    # path or a placeholder; a hub id such as owner/name is downloaded).
    "the hub": re.compile(
        r"artifacts_builder(?:\.\w+)? (?!.*--(?:tiny|model-dir|random-weights)\b)(?!.*--model (?:[./~]|\S*<))"
    ),
}
#: The words a command of a block without a marker starts with, each a kind this module runs.
RUNNABLE = ("export ", ".venv/bin/python -c ", ".venv/bin/python -m pytest ")


def block_id(block: Block) -> str:
    return block.where


BLOCKS = shell_blocks()


def needs_of(marker: str) -> set[str]:
    words = marker.removeprefix("need ").split(";")[0]
    return {need.strip() for need in re.split(r",|\band\b", words) if need.strip()}


@pytest.mark.parametrize("block", BLOCKS, ids=block_id)
def test_every_shell_block_says_how_it_is_checked(block: Block) -> None:
    commands = commands_of(block.text)
    assert commands, f"{block.where}: a shell block without a command"
    marker = block.marker
    if marker is None:
        unknown = [c for c in commands if not c.startswith(RUNNABLE)]
        assert not unknown, (
            f"{block.where}: no test runs {unknown}: mark the block `<!-- commands: run by <test> -->` (a test that "
            "reads it with tests/docs_pages.py's commands_under) or `<!-- commands: need AWS -->` (or a GPU, the hub)"
        )
    elif marker.startswith("need "):
        needs = needs_of(marker)
        assert needs and needs <= set(NEEDS), f"{block.where}: {marker!r} names what is not one of {sorted(NEEDS)}"
        for command in commands:
            named = [need for need in needs if NEEDS[need].search(command)]
            assert named, f"{block.where}: {command!r} is marked as needing {sorted(needs)} but names none of them"
    elif marker.startswith("run by "):
        runner = marker.removeprefix("run by ").split(";")[0].strip()
        path, _, test = runner.partition("::")
        source = (ROOT / path).read_text()
        if test:
            assert f"def {test}(" in source, f"{block.where}: {runner} does not exist"
            source = source[source.index(f"def {test}(") :]
            source = source[: (m.start() if (m := re.search(r"^(?:def|class|@) ?", source[1:], re.M)) else None)]
        reads_page = all(words in source for words in ("commands_under(", block.page.name, block.heading))
        assert reads_page or all(c in source for c in commands), (
            f"{block.where}: {runner} neither reads the block (commands_under({block.page.name!r}, "
            f"{block.heading!r})) nor runs {commands}"
        )
    elif marker.startswith("synopsis"):
        literal = [c for c in commands if not any(is_placeholder(word) for word in shlex.split(c))]
        assert not literal, f"{block.where}: {literal} has no placeholder: a command, not a synopsis"
    else:
        pytest.fail(f"{block.where}: unknown marker {marker!r}")


#: The commands of blocks without a marker that this module runs: only those of the kinds it
#: knows (never a `make`, `cdk` or `aws` command, which would set up, deploy or call AWS).
RUN_HERE = [
    # A Python command imports the project (moto, the CDK): seconds, so not in the fast tier.
    pytest.param(block.where, c, marks=[pytest.mark.slow] if "python" in c else [])
    for block in BLOCKS
    if block.marker is None
    for c in commands_of(block.text)
    if c.startswith(RUNNABLE) and " -m pytest " not in c
]


@pytest.mark.parametrize(("where", "command"), RUN_HERE)
def test_an_unmarked_command_runs(where: str, command: str) -> None:
    """Run as a reader would, from the repository's root: it exits 0 and says something (or,
    for an `export`, sets what it exports)."""
    script = f"{command}\nenv" if command.startswith("export ") else command
    done = subprocess.run(
        ["bash", "-ec", script], cwd=ROOT, capture_output=True, text=True, timeout=120, env=os.environ.copy()
    )
    assert done.returncode == 0, f"{where}: {command!r} failed: {done.stderr[-2000:]}"
    assert done.stdout.strip(), f"{where}: {command!r} printed nothing"
    if command.startswith("export "):
        for name in re.findall(r"(\w+)=", command):
            assert f"\n{name}=" in "\n" + done.stdout, f"{where}: {name} is not exported"


# --- pytest commands: the paths, markers and names they select --------------------------------


@cache
def known_markers() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    return {line.split(":")[0].strip() for line in config["markers"]} | set(TIERS) | {"fast"}


def names_of_tests(paths: list[Path]) -> list[set[str]]:
    """For each test function under `paths`: the names `-k` matches it by (its own, its class's,
    its module's)."""
    found = []
    for path in paths:
        files = [path] if path.is_file() else sorted(path.rglob("test_*.py"))
        for file in files:
            tree = ast.parse(file.read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef | ast.Module):
                    for child in node.body:
                        if isinstance(child, ast.FunctionDef) and child.name.startswith("test"):
                            names = {child.name, file.stem, file.name}
                            found.append(names | ({node.name} if isinstance(node, ast.ClassDef) else set()))
    return found


PYTEST = sorted({(where, c) for where, c in all_commands() if re.search(r"(?:^|\s)pytest(?:\s|$)", c)})


@pytest.mark.parametrize(("where", "command"), PYTEST)
def test_a_pytest_command_selects_tests(where: str, command: str) -> None:
    words = shlex.split(command)
    words = words[words.index("pytest") + 1 :]
    paths, marker_expression, keyword_expression = [], None, None
    while words:
        word = words.pop(0)
        if word == "-m":
            marker_expression = words.pop(0)
        elif word == "-k":
            keyword_expression = words.pop(0)
        elif not word.startswith("-"):
            paths.append(word)
    for path in paths:
        assert (ROOT / path.split("::")[0]).exists(), f"{where}: {command!r} names {path}, which does not exist"
    if marker_expression:
        used: set[str] = set()
        Expression.compile(marker_expression).evaluate(lambda name, **_: used.add(name) or False)
        assert used <= known_markers(), f"{where}: {command!r} names markers {used - known_markers()} no test has"
    if keyword_expression:
        candidates = names_of_tests([ROOT / p.split("::")[0] for p in paths] or [ROOT / "tests"])
        expression = Expression.compile(keyword_expression)
        selected = [
            names
            for names in candidates
            if expression.evaluate(lambda key, names=names, **_: any(key.lower() in n.lower() for n in names))
        ]
        assert selected, f"{where}: {command!r} selects no test by {keyword_expression!r}"


# --- make: targets and variables -------------------------------------------------------------

MAKE = sorted({(where, c) for where, c in all_commands() if c.startswith("make ")})


def make_invocations(command: str) -> Iterator[list[str]]:
    """The `make ...` calls of a command (`make a && .venv/bin/python ...` holds one)."""
    for part in re.split(r"\s(?:&&|\|\||;)\s", command):
        words = shlex.split(part)
        if words and words[0] == "make":
            yield words[1:]


@pytest.mark.parametrize(("where", "command"), MAKE)
def test_a_make_command_names_targets_and_variables_the_makefile_has(where: str, command: str) -> None:
    makefile = (ROOT / "Makefile").read_text()
    for arguments in make_invocations(command):
        words = [w.strip("[]") for w in arguments if w not in ("|",)]
        variables = [w.split("=")[0] for w in words if "=" in w]
        targets = [w for w in words if "=" not in w and not is_placeholder(w)]
        for variable in variables:
            assert re.search(rf"^{variable} \?=|\$\({variable}\)", makefile, re.M), (
                f"{where}: {command!r} sets {variable}, which the Makefile does not read"
            )
        # A dry run (`make -n`) finds each target's rule without running it; variables the
        # reader fills in are left out.
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
        done = subprocess.run(
            ["make", "-n", "--no-print-directory", *targets], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert "No rule to make target" not in done.stderr, f"{where}: {command!r}: {done.stderr.strip()}"
        assert done.returncode == 0, f"{where}: {command!r}: {done.stderr.strip()}"


# --- python -m: the project's command lines and their flags -----------------------------------


class _Parser(Exception):
    """Not an error: how the parser is handed out of the module that builds it."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


@cache
def parser_of(module: str) -> argparse.ArgumentParser:
    """The parser `python -m module` builds, taken from it when it parses (nothing after runs)."""

    def capture(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        raise _Parser(self)

    with mock.patch.object(argparse.ArgumentParser, "parse_args", capture), mock.patch.object(sys, "argv", [module]):
        # runpy notes that the package imported the module before it runs it as __main__.
        warnings.filterwarnings("ignore", "'.*' found in sys.modules", RuntimeWarning)
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=False)
        except _Parser as captured:
            return captured.parser
    raise AssertionError(f"python -m {module} parsed no command line")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def unknown_arguments(parser: argparse.ArgumentParser, words: list[str]) -> list[str]:
    """What of `words` (a command line, placeholders included) `parser` does not take: a flag it
    does not have, a subcommand it does not have, a literal value its choices or type refuse."""
    problems: list[str] = []
    words = [w.strip("[]") for w in words if w.strip("[]") and w != "|"]
    while words:
        word = words.pop(0)
        subcommands = _subcommands(parser)
        if subcommands and not word.startswith("-"):
            names = word.strip("{}").split(",") if word.startswith("{") else [word]
            problems += [f"subcommand {n}" for n in names if n not in subcommands]
            if len(names) == 1 and names[0] in subcommands:
                parser = subcommands[names[0]]
        elif word.startswith("-") and not is_placeholder(word):
            flag, _, inline = word.partition("=")
            action = parser._option_string_actions.get(flag)
            if action is None:
                problems.append(f"flag {flag}")
            elif action.nargs != 0:
                problems += [f"{flag} {value}" for value in _values(action, words, inline) if _refused(action, value)]
    return problems


def _values(action: argparse.Action, words: list[str], inline: str) -> list[str]:
    """The literal values given to `action` (taken off `words`)."""
    if inline:
        return [inline]
    values = []
    while words and not words[0].startswith("-") and not is_placeholder(words[0]):
        values.append(words.pop(0))
        if action.nargs in (None, "?", 1):
            break
    return values


def _refused(action: argparse.Action, value: str) -> bool:
    if action.choices is not None:
        return value not in action.choices
    if callable(action.type):
        try:
            action.type(value)
        except (ValueError, TypeError, argparse.ArgumentTypeError):
            return True
    return False


def ours(module: str) -> bool:
    return (ROOT / module.split(".")[0]).is_dir() and (ROOT / module.split(".")[0] / "__init__.py").exists()


PYTHON_M = sorted(
    {
        (where, c)
        for where, c in all_commands()
        if (m := re.search(r"python3? -m ([\w.]+)", c)) and ours(m.group(1)) and " -m pytest" not in c
    }
)


@pytest.mark.parametrize(("where", "command"), PYTHON_M)
def test_a_python_command_has_the_flags_and_values_it_names(where: str, command: str) -> None:
    for part in re.split(r"\s(?:&&|\|\||;)\s", command):
        match = re.search(r"python3? -m ([\w.]+)(.*)", part, re.S)
        if match is None or not ours(match.group(1)):
            continue
        try:
            words = shlex.split(match.group(2))
        except ValueError:
            words = match.group(2).split()
        problems = unknown_arguments(parser_of(match.group(1)), words)
        assert not problems, f"{where}: `python -m {match.group(1)}` has no {problems} ({command!r})"


# --- cdk and the settings: stacks the app has, keys and values it takes ------------------------


@cache
def app_stacks() -> set[str]:
    return set(re.findall(r'"(\w+Stack)": lambda', (ROOT / "app.py").read_text()))


SETTINGS_COMMANDS = sorted({(where, c) for where, c in all_commands() if re.search(r"\bcdk \w|(?:^| )-c \S+=", c)})


@pytest.mark.parametrize(("where", "command"), SETTINGS_COMMANDS)
def test_a_cdk_command_names_the_apps_stacks_and_settings_it_takes(where: str, command: str) -> None:
    words = shlex.split(command)
    pairs = [words[i + 1] for i, word in enumerate(words[:-1]) if word in ("-c", "--context")]
    if (cdk := re.search(r"\bcdk (deploy|destroy|diff|synth)\b(.*)", command)) is not None:
        names = [w for w in shlex.split(cdk.group(2)) if not w.startswith("-") and w not in pairs]
        unknown = [n for n in names if n not in app_stacks() and not is_placeholder(n)]
        assert not unknown, f"{where}: {command!r} names stacks the app does not have: {unknown} ({app_stacks()})"
    literal = [p for p in pairs if not is_placeholder(p)]
    for pair in pairs:
        section, _, key = pair.partition("=")[0].partition(".")
        if not is_placeholder(key):
            assert key in settings_of(section), f"{where}: {command!r} sets {section}.{key}, which is no setting"
    try:
        load_config(parse_context_pairs(literal))
    except ConfigError as exc:
        pytest.fail(f"{where}: {command!r} is refused: {exc}")


#: `section.key` where a page names a setting (not a file such as `gptj.py`, nor a placeholder).
_SETTING = re.compile(rf"(?<![\w./<-])({'|'.join(SECTIONS)})\.([a-z_][a-z0-9_]*)(?![\w/<-]|\.\w)")


def named_settings(page: Path) -> set[tuple[str, str]]:
    files = {
        Path(p).name
        for p in subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
    }
    return {
        (m.group(1), m.group(2))
        for m in _SETTING.finditer(page.read_text())
        if f"{m.group(1)}.{m.group(2)}" not in files
    }


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_setting_a_page_names_exists(page: Path) -> None:
    unknown = sorted(f"{s}.{k}" for s, k in named_settings(page) if k not in settings_of(s))
    assert not unknown, f"{page_id(page)} names settings the configuration does not read: {unknown}"


# --- what a command is said to print ---------------------------------------------------------


@dataclass(frozen=True)
class Printed:
    """What an offline run of a documented command printed."""

    stdout: str
    #: The values the run resolved that the page writes as placeholders (`<commit>`).
    placeholders: dict[str, str]
    #: Words the offline run adds to a command it prints, which the reader's run leaves out (its
    #: output folder, a temporary one here).
    added: list[str]


def _llm_builder_from_a_stand_in_hub(command: str, tmp_path: Path, tiny_sources: Callable[[str], Path]) -> Printed:
    """`python -m artifacts_builder llm --model <hub id> ...` as written, into `tmp_path`, its hub a
    stand-in serving a tiny Qwen2 as that id's revision (main unless the command names one) at
    COMMIT."""
    from artifacts_builder import llm
    from artifacts_builder.__main__ import build_parser, main

    words = shlex.split(command)
    argv = words[words.index("artifacts_builder") + 1 :]
    args = build_parser().parse_args(argv)
    hub = FakeHub(
        tiny_sources("qwen2"), into=tmp_path, repo=args.model, commit=args.revision or "main", resolves_to=COMMIT
    )
    out, stdout = tmp_path / "out", io.StringIO()
    with mock.patch.object(llm, "hub_api", lambda: hub), contextlib.redirect_stdout(stdout):
        code = main([*argv, "--out", str(out)])
    assert code == 0, f"{command!r} failed offline: {stdout.getvalue()}"
    return Printed(
        stdout.getvalue(), {"commit": COMMIT, "hub-id": args.model}, ["-c", f"project.artifacts_dir={out.resolve()}"]
    )


#: How each command a page says prints something runs here, offline, by what it starts with.
PRINTERS: dict[re.Pattern[str], Callable[[str, Path, Callable[[str], Path]], Printed]] = {
    re.compile(r"(?:\S*/)?python3? -m artifacts_builder llm --model (?![./~<])"): _llm_builder_from_a_stand_in_hub,
}


def _shows_the_commit(claim: PrintClaim, printed: Printed) -> str | None:
    commit = printed.placeholders.get("commit")
    if commit is None:
        return "its offline run resolves no commit"
    return None if re.search(rf"\b{commit}\b", printed.stdout) else f"the commit {commit} is not in its output"


def _shows_the_command_below(claim: PrintClaim, printed: Printed) -> str | None:
    """The block's next command, its placeholders filled with what the run resolved, is a line of
    the output (with the words the offline run adds)."""
    if claim.following is None:
        return "no command follows it in the block"
    unknown = set(re.findall(r"<([\w-]+)>", claim.following)) - set(printed.placeholders)
    if unknown:
        return f"the command below has placeholders {sorted(unknown)} the run does not resolve"
    filled = re.sub(r"<([\w-]+)>", lambda m: printed.placeholders[m.group(1)], claim.following)
    expected = shlex.split(filled) + printed.added
    lines = [line.strip() for line in printed.stdout.splitlines()]
    if any(line.startswith(expected[0]) and shlex.split(line) == expected for line in lines):
        return None
    return f"no line of its output is {shlex.join(expected)!r}"


#: What a claim may say a command prints (each part of it: "its commit and the deploy command
#: below" is two), and how its output shows it.
CLAIMS: dict[re.Pattern[str], Callable[[PrintClaim, Printed], str | None]] = {
    re.compile(r"(?:its|the) commit(?: it resolved)?"): _shows_the_commit,
    re.compile(r"the (?:`?(?:npx )?cdk deploy`? |deploy )(?:command|line) below"): _shows_the_command_below,
}


@pytest.mark.parametrize("claim", print_claims(), ids=lambda claim: claim.where)
def test_what_a_command_is_said_to_print_is_printed(
    claim: PrintClaim, tmp_path: Path, tiny_sources: Callable[[str], Path]
) -> None:
    printers = [run for pattern, run in PRINTERS.items() if pattern.match(claim.command)]
    assert printers, (
        f"{claim.where}: says {claim.command!r} prints {claim.what!r}, and no test runs it: add its offline "
        "run to PRINTERS in tests/test_doc_commands.py"
    )
    parts = [part for part in re.split(r"\s*(?:,|\band\b)\s*", claim.what) if part]
    checks = [next((check for pattern, check in CLAIMS.items() if pattern.fullmatch(part)), None) for part in parts]
    unchecked = [part for part, check in zip(parts, checks, strict=True) if check is None]
    assert not unchecked, (
        f"{claim.where}: says {claim.command!r} prints {unchecked}, which no check reads: word it as one of "
        f"{[p.pattern for p in CLAIMS]} or add a check to CLAIMS in tests/test_doc_commands.py"
    )
    printed = printers[0](claim.command, tmp_path, tiny_sources)
    problems = [problem for check in checks if check is not None and (problem := check(claim, printed))]
    assert not problems, (
        f"{claim.where}: {claim.command!r} is said to print {claim.what!r}, but {problems}; it printed:\n"
        f"{printed.stdout}"
    )
