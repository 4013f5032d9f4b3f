"""README is the front door and docs/ holds the references: every page is reachable from README,
and what the pages (and the code's comments) name is there.

A repository path a page names (in backticks, in a code block, in a link or in its prose) must
exist, unless it is a build output git ignores (`artifacts/`, `bench/results/`, ...); a link must
reach its file, and its `#anchor` a heading of that file. The layers table of docs/DEVELOPING.md
is tests/test_imports.py's, and README's library excerpt is part of the app that
tests/library/test_install.py runs.
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

from tests.test_imports import ALLOWED, PACKAGES

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 250
#: Paths of other repositories that the code's comments name as theirs (not files of ours).
OTHER_REPOSITORIES = {
    path: "djl-serving's, at tag v0.29.0"
    for path in (
        "serving/docker/pytorch-inf2.Dockerfile",
        "serving/docs/lmi/deployment_guide/deploying-your-endpoint.md",
        "serving/docs/lmi/deployment_guide/configurations.md",
        "serving/docs/configurations_model.md",
        "tests/integration/llm/prepare.py",
    )
}

_FENCE = re.compile(r"^```.*?^```", flags=re.S | re.M)
_LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")
# A path's characters; placeholders (<name>, *, {a,b}, ...) end it or rule it out below.
_TOKEN = re.compile(r"[\w.@+/-]+")


@cache
def tracked() -> tuple[str, ...]:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return tuple(line for line in files.splitlines() if line)


@cache
def tracked_top_level() -> frozenset[str]:
    """The names at the repository's top that git tracks (a path naming one of them is ours)."""
    return frozenset(path.split("/")[0] for path in tracked())


@cache
def ignore_patterns() -> tuple[str, ...]:
    lines = (ROOT / ".gitignore").read_text().splitlines()
    return tuple(line.strip().rstrip("/") for line in lines if line.strip() and not line.startswith("#"))


def ignored(path: str) -> bool:
    """Whether git ignores `path` (a build output such as `bench/results/...`), by .gitignore."""
    parts = path.strip("/").split("/")
    for end in range(1, len(parts) + 1):
        prefix, name = "/".join(parts[:end]), parts[end - 1]
        for pattern in ignore_patterns():
            if fnmatch.fnmatch(prefix if "/" in pattern else name, pattern):
                return True
    return False


def named_paths(text: str) -> set[str]:
    """The repository paths `text` names: tokens that start with a top-level name git tracks
    followed by `/` (or that are such a name's file, `app.py`), wherever they stand. Links to
    other sites are left out, with their text (another repository's `serving/...`)."""
    text = _LINK.sub(lambda m: "" if re.match(r"[a-z]+:", m.group(2)) else f"{m.group(1)} {m.group(2)}", text)
    found = set()
    for token in _TOKEN.findall(text):
        token = token.rstrip(".,:;")
        if "..." in token:
            continue
        top = token.split("/")[0]
        if top in tracked_top_level() and ("/" in token or "." in top):
            found.add(token)
    return found


def anchor_of(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    for line in _FENCE.sub("", page.read_text()).splitlines():
        if match := re.match(r"#{1,6} (.+)", line):
            anchor = anchor_of(match.group(1))
            # A repeated heading gets -1, -2, ... as on GitHub.
            count = seen.get(anchor, 0)
            seen[anchor] = count + 1
            if count:
                seen[f"{anchor}-{count}"] = 1
    return set(seen)


def local_links(page: Path) -> list[str]:
    text = _FENCE.sub("", page.read_text())
    return [target for _, target in _LINK.findall(text) if not re.match(r"[a-z]+:", target)]


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_path_a_page_names_exists(page: Path) -> None:
    missing = sorted(p for p in named_paths(page.read_text()) if not ignored(p) and not (ROOT / p).exists())
    assert not missing, f"{page_id(page)} names paths that do not exist: {missing}"


def test_every_path_the_code_names_exists() -> None:
    """Comments and docstrings name files too (`rules: llm_contracts/inf2.py`); a file that moved
    leaves them pointing nowhere."""
    pages = {page_id(page) for page in PAGES}
    missing = []
    for path in tracked():
        if path in pages or path.startswith("tests/inf2/data/") or "__snapshots__" in path:
            continue
        try:
            text = (ROOT / path).read_text()
        except UnicodeDecodeError:
            continue  # images and other binaries
        missing += [
            f"{path}: {p}"
            for p in sorted(named_paths(text))
            if p not in OTHER_REPOSITORIES and not ignored(p) and not (ROOT / p).exists()
        ]
    assert not missing, f"the code names paths that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_link_reaches_its_file_and_heading(page: Path) -> None:
    broken = []
    for target in local_links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target} (no such heading in {file.relative_to(ROOT)})")
    assert not broken, f"{page_id(page)} has broken links: {broken}"


def test_readme_links_every_page_of_docs() -> None:
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in local_links(README)}
    unlinked = [page_id(p) for p in PAGES[1:] if p.resolve() not in linked]
    assert not unlinked, f"README.md does not link {unlinked}"


def test_readme_is_a_front_door() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; the references belong in docs/"
    assert "## Contents" in lines


def test_the_layers_table_is_the_one_test_imports_enforces() -> None:
    text = (ROOT / "docs" / "DEVELOPING.md").read_text()
    table = text[text.index("<!-- layers:") :]
    table = table[table.index("| --- |") : table.index("\n\n")]
    documented = {}
    for row in table.splitlines()[1:]:
        package, _, may_import = (cell.strip() for cell in row.strip("|").split("|"))
        documented[package.strip("`")] = set(re.findall(r"`(\w+)`", may_import))
    assert documented == {package: ALLOWED[package] for package in PACKAGES}


def test_readme_library_excerpt_is_part_of_the_tested_app() -> None:
    """README shows part of docs/LIBRARY.md's example app, which tests/library/test_install.py
    installs and synthesizes: each of its lines (comments aside) must be a line of that app."""
    readme = README.read_text()
    excerpt = readme[readme.index("<!-- excerpt:") :]
    excerpt = excerpt[excerpt.index("```python\n") + len("```python\n") :]
    excerpt = excerpt[: excerpt.index("```")]
    library = (ROOT / "docs" / "LIBRARY.md").read_text()
    app = library[library.index("<!-- example-app:") :]
    app = app[app.index("```python\n") : app.index("```\n", app.index("```python\n") + 3)]
    app_lines = {line.strip() for line in app.splitlines()}
    shown = [line.strip() for line in excerpt.splitlines() if line.strip() and not line.strip().startswith("#")]
    assert shown, "README's library excerpt is gone"
    assert [line for line in shown if line not in app_lines] == []


def test_the_patch_table_names_every_patch_in_its_module() -> None:
    """docs/LOCAL_AWS.md's table of the local AWS's patches: each patch once, in the row of the
    module that registers it (a new or moved patch shows here)."""
    import inspect

    from local_aws import patches

    text = (ROOT / "docs" / "LOCAL_AWS.md").read_text()
    table = text[text.index("<!-- patches:") :]
    table = table[table.index("| --- |") : table.index("\n\n")]
    documented: dict[str, set[str]] = {}
    for row in table.splitlines()[1:]:
        _, modules, names, _ = (cell.strip() for cell in row.strip("|").split("|"))
        for name in re.findall(r"`(\w+)`", names):
            assert name not in documented, f"{name} is listed twice"
            documented[name] = set(re.findall(r"`([\w/]+\.py)`", modules))
    actual = {
        p.name: inspect.getmodule(p.installer).__name__.replace(".", "/") + ".py"  # type: ignore[union-attr]
        for p in patches.PATCHES
    }
    assert set(documented) == set(actual), "the table and local_aws.patches.PATCHES differ"
    misplaced = sorted(name for name, module in actual.items() if module not in documented[name])
    assert not misplaced, f"listed in another module's row: {misplaced}"


def test_readme_names_every_package_the_setup_installs() -> None:
    """A reader who is not root installs README's list before `make demo`: it is the Makefile's."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile[makefile.index("\nsystem-deps:") :]
    recipe = recipe[: recipe.index("\n\n")]
    packages = set(re.findall(r'missing="\$\$missing (\S+)"', recipe))
    assert packages, "the system-deps recipe changed shape"
    setup = README.read_text()
    assert not [p for p in sorted(packages) if f"`{p}`" not in setup]


def test_readme_names_each_benchmark_make_bench_leaves_out() -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile[makefile.index("\nbench:") :]
    run = set(re.findall(r"-m bench\.(\w+)", recipe[: recipe.index("\n\n")]))
    benchmarks = {p.stem for p in (ROOT / "bench").glob("*.py") if p.stem != "__init__"}
    assert run <= benchmarks
    unnamed = [b for b in sorted(benchmarks - run) if f"`bench/{b}.py`" not in README.read_text()]
    assert not unnamed, f"make bench does not run {unnamed}: README's `make bench` sentence must say so"


def test_a_page_on_both_engines_describes_the_default_first() -> None:
    """GptjStack's engines: where a page gives each a heading, the default engine's comes first."""
    from project_config import load_config

    default = load_config({}).gptj.engine.name
    other = {"vllm": "hf-toolkit", "hf-toolkit": "vllm"}[default]
    words = {"vllm": ("vllm", "vLLM"), "hf-toolkit": ("hf-toolkit", "toolkit")}
    for page in PAGES:
        headings = [m.group(1) for m in re.finditer(r"^#{1,6} (.+)$", _FENCE.sub("", page.read_text()), re.M)]
        first = {
            engine: next((i for i, h in enumerate(headings) if any(w in h for w in words[engine])), None)
            for engine in (default, other)
        }
        if first[default] is not None and first[other] is not None:
            assert first[default] < first[other], f"{page_id(page)} describes {other} before the default, {default}"


def test_every_documented_body_is_for_one_endpoint_the_e2e_tests_call() -> None:
    """tests/docs_pages.py finds the request bodies the pages give; each is for one endpoint by
    its keys, and the e2e tests send it there (tests/e2e/test_invoke_endpoint.py for GPT-2 and
    the toolkit's GPT-J, tests/e2e/test_vllm_engine.py for GPT-J on vLLM,
    tests/e2e/test_inf2_sagemaker.py for Inf2's handler)."""
    from tests.docs_pages import documented_bodies
    from tests.e2e.test_invoke_endpoint import STACK_OF

    bodies = documented_bodies()
    assert {body.endpoint for body in bodies} <= {*STACK_OF, "gptj-vllm", "inf2"}
    # The seeds' requests are among them: the finder still finds what the pages give.
    assert {"gpt2", "gptj-toolkit", "gptj-vllm", "inf2"} <= {body.endpoint for body in bodies}


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_every_page_opens_with_what_it_covers(page: Path) -> None:
    """A title, then a paragraph before the first section: what the page is about (the engine or
    mode it describes, where it describes one)."""
    lines = _FENCE.sub("", page.read_text()).splitlines()
    assert lines[0].startswith("# "), f"{page_id(page)} opens without a title"
    opening = lines[1 : next((i for i, line in enumerate(lines) if line.startswith("## ")), len(lines))]
    prose = [line for line in opening if line.strip() and not line.startswith(("|", "<!--", "!["))]
    assert len(" ".join(prose).split()) >= 15, f"{page_id(page)} does not say what it covers before its first section"
