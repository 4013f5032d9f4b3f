"""README and the pages of docs/, read as the tests that check them read them: the fenced blocks
(with the heading they stand under and the `<!-- commands: ... -->` marker above them), the shell
commands in them and in inline code, what the blocks' comments say a command prints, and the
request bodies the pages document.

tests/test_docs.py and tests/test_doc_commands.py check what the pages say against the code;
the end-to-end tests send the documented bodies (`bodies_for`) and run the blocks a marker names
them for (`commands_under`).
"""

from __future__ import annotations

import ast
import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^[ \t]*```(?P<language>\S*)[^\n]*\n(?P<text>.*?)^[ \t]*```", flags=re.S | re.M)
_MARKER = re.compile(r"<!--\s*commands:\s*(?P<marker>(?:(?!-->).)*?)\s*-->\s*\Z", flags=re.S)
_HEADING = re.compile(r"^#{1,6} (.+)$", flags=re.M)
SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "console"})
#: Words an inline code span starts with when it is a command (`make demo`, `npx cdk deploy ...`).
_COMMAND_START = re.compile(r"(?:\S*/)?(?:make|python3?|npx|cdk|aws|pytest|curl|pip) ")


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@dataclass(frozen=True)
class Block:
    """A fenced block of a page."""

    page: Path
    #: The line of its opening fence (1-based).
    line: int
    language: str
    #: The heading it stands under ("" above the first).
    heading: str
    #: What the `<!-- commands: ... -->` comment right above it says, if there is one.
    marker: str | None
    text: str

    @property
    def where(self) -> str:
        return f"{page_id(self.page)}:{self.line}"


@cache
def blocks(page: Path) -> tuple[Block, ...]:
    text = page.read_text()
    found = []
    for match in _FENCE.finditer(text):
        before = text[: match.start()]
        headings = _HEADING.findall(_FENCE.sub("", before))
        marker = _MARKER.search(before.rstrip() + "\n")
        found.append(
            Block(
                page=page,
                line=before.count("\n") + 1,
                language=match.group("language"),
                heading=headings[-1].strip() if headings else "",
                marker=marker.group("marker") if marker else None,
                text=match.group("text"),
            )
        )
    return tuple(found)


def shell_blocks() -> list[Block]:
    return [block for page in PAGES for block in blocks(page) if block.language in SHELL_LANGUAGES]


def commands_of(text: str) -> list[str]:
    """The commands of a shell block, one string each: a line ending in a backslash, an indented
    line (a synopsis wrapped) and a quoted string left open continue the command; comments and
    blank lines are dropped."""
    return [command for _, command in numbered_commands(text)]


def numbered_commands(text: str) -> list[tuple[range, str]]:
    """:func:`commands_of` with the lines of `text` (0-based) each command spans."""
    commands: list[tuple[range, str]] = []
    pending, joint, start = "", "\n", 0
    for index, line in enumerate(text.splitlines()):
        if pending:
            pending += joint + (line.strip() if joint == " " else line)
        elif line[:1].isspace() and line.strip() and commands:
            lines, command = commands[-1]
            commands[-1] = (range(lines.start, index + 1), command + " " + line.strip())
            continue
        else:
            pending, start = line, index
        if pending.endswith("\\"):
            pending, joint = pending[:-1].rstrip(), " "
            continue
        joint = "\n"
        try:
            words = shlex.split(pending, comments=True)
        except ValueError:  # a quote still open: the command goes on
            continue
        if words:
            commands.append((range(start, index + 1), _without_comment(pending).strip()))
        pending = ""
    return commands


def _without_comment(command: str) -> str:
    """`command` without a trailing `# comment` outside quotes."""
    quote: str | None = None
    for index, char in enumerate(command):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or command[index - 1].isspace()):
            return command[:index]
    return command


#: A shell comment's claim of what its command prints: `# your model; prints its commit`.
_PRINTS = re.compile(r"(?:^|[\s;,(])prints (?P<what>[^;#()]+)")


@dataclass(frozen=True)
class PrintClaim:
    """A comment of a shell block that says what a command prints: the command on its line, or,
    on a line of its own, the next command."""

    block: Block
    #: The comment's line of the page (1-based).
    line: int
    #: The command it is about ("" where none follows it).
    command: str
    #: What it says the command prints: "its commit and the deploy command below".
    what: str
    #: The block's command after it, which "below" points to (None where it is the last).
    following: str | None

    @property
    def where(self) -> str:
        return f"{page_id(self.block.page)}:{self.line}"


def print_claims() -> list[PrintClaim]:
    """Every shell block's claims of what a command prints (tests/test_doc_commands.py checks each)."""
    found = []
    for block in shell_blocks():
        numbered = numbered_commands(block.text)
        for index, line in enumerate(block.text.splitlines()):
            for match in _PRINTS.finditer(line[len(_without_comment(line)) :]):
                at = next((i for i, (lines, _) in enumerate(numbered) if lines.stop > index), len(numbered))
                found.append(
                    PrintClaim(
                        block=block,
                        line=block.line + 1 + index,
                        command=numbered[at][1] if at < len(numbered) else "",
                        what=match.group("what").strip(),
                        following=numbered[at + 1][1] if at + 1 < len(numbered) else None,
                    )
                )
    return found


def commands_under(page: Path, heading: str) -> list[str]:
    """The commands of the one shell block under `heading` of `page` (for the test that runs them)."""
    (block,) = [b for b in blocks(page) if b.heading == heading and b.language in SHELL_LANGUAGES]
    return commands_of(block.text)


@cache
def code_spans(page: Path) -> tuple[str, ...]:
    """The inline code of a page (fenced blocks left out), each with its whitespace collapsed."""
    text = _FENCE.sub("", page.read_text())
    return tuple(" ".join(span.split()) for span in re.findall(r"`([^`]+)`", text))


def inline_commands(page: Path) -> list[str]:
    return [span for span in code_spans(page) if _COMMAND_START.match(span + " ")]


def all_commands() -> Iterator[tuple[str, str]]:
    """(where, command) for every documented command: the shell blocks' and the inline ones."""
    for block in shell_blocks():
        for command in commands_of(block.text):
            yield block.where, command
    for page in PAGES:
        for command in inline_commands(page):
            yield page_id(page), command


def is_placeholder(word: str) -> bool:
    """A word that stands for a value the reader fills in (`<name>`, `PATH`, `[--seconds 30]`'s
    brackets, `gpt2|PATH`, `{gpt2,gptj}`): it is not checked as a literal."""
    return bool(re.search(r"[<>\[\]{}|]|\.\.\.", word)) or bool(re.fullmatch(r"[A-Z][A-Z0-9_]*", word))


# --- Request bodies -------------------------------------------------------------------------

#: The keys of a request body, by the endpoint whose body has them.
REQUEST_KEYS = {
    "input": "gpt2",
    "prompt": "gptj-vllm",
    "messages": "gptj-vllm",
    "inputs": "gptj-toolkit",
    # Inf2's handler takes `text`, which the other bodies' answers hold too: its `seq_length` tells.
    "seq_length": "inf2",
}


@dataclass(frozen=True)
class Body:
    """A request body a page documents, literal enough to send."""

    where: str
    body: dict[str, Any]

    @property
    def endpoint(self) -> str:
        """Which endpoint it is for: `gpt2` (Gpt2Stack), `gptj-vllm` (GptjStack on its default
        engine), `gptj-toolkit` (GptjStack with gptj.engine=hf-toolkit) or `inf2` (Inf2Stack's
        handler), by its keys."""
        (endpoint,) = {REQUEST_KEYS[key] for key in self.body if key in REQUEST_KEYS}
        return endpoint

    @property
    def streamed(self) -> bool:
        return self.body.get("stream") is True

    @property
    def id(self) -> str:
        return f"{self.endpoint}:{json.dumps(self.body, sort_keys=True)}"


def _objects(text: str) -> Iterator[str]:
    """Every balanced `{...}` substring of `text` (braces in strings counted too: a body whose
    string holds a brace is not found, which no body here does)."""
    starts: list[int] = []
    for index, char in enumerate(text):
        if char == "{":
            starts.append(index)
        elif char == "}" and starts:
            yield text[starts.pop() : index + 1]


def _literal(candidate: str) -> Any:
    """`candidate` read as JSON, a Python literal (`True`) or JSON escaped in a string (`\\"`)."""
    for text in (candidate, candidate.replace('\\"', '"')):
        for read in (json.loads, ast.literal_eval):
            try:
                return read(text)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
    return None


def _request(value: Any) -> dict[str, Any] | None:
    """The request body `value` is (or, for a load-test request file's document, holds)."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("body"), dict) and "content_type" in value:
        return _request(value["body"])
    # A placeholder `[...]` reads as Ellipsis (ast.literal_eval): not a body to send.
    if not any(key in REQUEST_KEYS for key in value) or "..." in json.dumps(
        value, default=lambda o: "..." if o is Ellipsis else str(o)
    ):
        return None
    return value


def documented_bodies() -> list[Body]:
    """Every literal request body of the pages (in prose, inline code, shell and JSON blocks),
    and those of the request files they point to (loadtest/requests/), each once."""
    found: dict[str, Body] = {}
    for page in PAGES:
        for candidate in _objects(page.read_text()):
            body = _request(_literal(candidate))
            if body is not None:
                found.setdefault(Body("", body).id, Body(page_id(page), body))
    for path in sorted((ROOT / "loadtest" / "requests").glob("*.json")):
        body = _request(json.loads(path.read_text()))
        assert body is not None, f"{path} holds no request body"
        found.setdefault(Body("", body).id, Body(str(path.relative_to(ROOT)), body))
    return list(found.values())


def bodies_for(*endpoints: str) -> list[Body]:
    return [body for body in documented_bodies() if body.endpoint in endpoints]
