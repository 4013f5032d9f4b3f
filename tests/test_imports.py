"""Which top-level package may import which: no cycle, and the leaves stay leaves.

Read from the source (every ``import`` and ``from ... import``, including those inside
functions), not from what a run happens to import.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    "llm_contracts",
    "llm_inference_cdk",
    "project_config",
    "stacks",
    "artifacts_builder",
    "serving",
    "local_aws",
    "loadtest",
    "bench",
)
#: What each package may import of the others (app.py and tests are above them all).
ALLOWED = {
    "llm_contracts": set(),
    "llm_inference_cdk": {"llm_contracts"},
    # The project's configuration (cdk.json), read into the library's props, and the GPT-2
    # server's own settings (one definition for both); shared by the app, the builder and the
    # local AWS, it imports none of them.
    "project_config": {"llm_contracts", "llm_inference_cdk", "serving"},
    "stacks": {"llm_contracts", "llm_inference_cdk", "project_config", "serving"},
    "serving": set(),  # runs inside the images, where nothing else of the project is
    # The builder runs the serving code for its parity gates, and reads the shared settings;
    # neither it nor the local AWS imports the app's stacks.
    "artifacts_builder": {"llm_contracts", "llm_inference_cdk", "project_config", "serving"},
    "local_aws": {"llm_contracts", "llm_inference_cdk", "project_config", "serving"},
    # A client of any SageMaker endpoint, on AWS or the local AWS: boto3, nothing of the project.
    "loadtest": set(),
    "bench": {"llm_contracts", "artifacts_builder", "serving", "local_aws", "project_config", "stacks", "loadtest"},
}


def imports_of(package: str) -> dict[str, set[str]]:
    """For each module file of `package`, the other top-level packages it imports."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = {n for n in names if n in PACKAGES and n != package}
    return found


def graph() -> dict[str, set[str]]:
    return {package: set().union(*imports_of(package).values()) for package in PACKAGES}


def test_each_package_imports_only_what_it_may() -> None:
    for package in PACKAGES:
        for module, imported in imports_of(package).items():
            assert imported <= ALLOWED[package], f"{module} imports {sorted(imported - ALLOWED[package])}"


def assert_no_cycle(edges: dict[str, set[str]]) -> None:
    """Fails naming the first circle found in `edges` (a node -> what it imports)."""
    visiting: list[str] = []
    done: set[str] = set()

    def visit(node: str) -> None:
        assert node not in visiting, " -> ".join([*visiting[visiting.index(node) :], node])
        if node in done:
            return
        visiting.append(node)
        for other in sorted(edges[node]):
            visit(other)
        visiting.pop()
        done.add(node)

    for node in sorted(edges):
        visit(node)


def test_no_cycle_between_top_level_packages() -> None:
    assert_no_cycle(graph())


def test_serving_code_in_each_image_imports_only_its_own_folder() -> None:
    for component in ("gpt2", "gptj", "inf2"):
        for path in (ROOT / "serving" / component).rglob("*.py"):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("serving."):
                    assert node.module.startswith(f"serving.{component}"), f"{path} imports {node.module}"


def test_tests_import_helpers_not_conftest() -> None:
    """Shared test code lives in helper modules; a conftest.py holds fixtures alone."""
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.endswith("conftest"), f"{path} imports {node.module}"


# --- Inside the local AWS ------------------------------------------------------------------------

LOCAL_AWS = ROOT / "local_aws"
#: What wires the emulation into moto: its patches, and the server that applies them.
WIRING = ("local_aws.patches", "local_aws.server")
#: What the images' interpreters (.venv-hf, .venv-vllm, .venv-lmi) run by path: those have none
#: of the project's packages to import.
IMAGE_STAND_INS = ("hf_entrypoint", "vllm_entrypoint", "lmi_entrypoint", "djl", "neuronx_cpu")


def local_aws_modules() -> dict[str, Path]:
    found = {}
    for path in sorted(LOCAL_AWS.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def local_aws_imports() -> dict[str, set[str]]:
    """For each module of local_aws, the modules of local_aws it imports (its own packages left
    out: Python imports them before it in any case)."""
    modules = local_aws_modules()

    def module_of(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
                targets += submodules if len(submodules) == len(node.names) else [*submodules, base]
        found = {module_of(t) for t in targets if t == "local_aws" or t.startswith("local_aws.")}
        edges[name] = {m for m in found if m is not None and m != name and not name.startswith(m + ".")}
    return edges


def test_the_local_aws_behaviour_never_imports_its_patches() -> None:
    """Patches wire the emulation into moto; what they wire in does not know them."""
    for module, imported in local_aws_imports().items():
        if not module.startswith(WIRING):
            wired = sorted(m for m in imported if m.startswith("local_aws.patches"))
            assert not wired, f"{module} imports {wired}: move what it needs out of the patches"


def test_no_cycle_between_the_local_aws_modules() -> None:
    assert_no_cycle(local_aws_imports())


def test_what_the_images_run_by_path_imports_nothing_of_the_project() -> None:
    assert {p.stem for p in (LOCAL_AWS / "images").glob("*.py")} == {*IMAGE_STAND_INS, "__init__"}
    for name in IMAGE_STAND_INS:
        path = LOCAL_AWS / "images" / f"{name}.py"
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] if node.level == 0 else [f".{node.module}"]
            project = [n for n in names if n.split(".")[0] in (*PACKAGES, "") or n.startswith(".")]
            assert not project, f"{path.name} imports {project}: its interpreter has no such package"


def test_the_local_aws_import_graph_is_read_as_python_imports() -> None:
    """The reading itself: a relative import, a name of a package and a module of it resolve to
    the module imported; a package's own parent is left out."""
    edges = local_aws_imports()
    assert "local_aws.sagemaker.runtime" in edges["local_aws.sagemaker.components"]
    assert "local_aws.patches.base" in edges["local_aws.patches.iam"]
    assert "local_aws" not in edges["local_aws.sagemaker.runtime"]


# --- State of the local AWS ----------------------------------------------------------------------

#: Calls whose result a module may hold: a BackendDict (moto's home of an account's and region's
#: state), the one host (local_aws/host.py), and values that never change.
STATELESS_CALLS = {
    "BackendDict", "frozenset", "tuple", "Path", "TypeVar", "getLogger", "compile", "resolve", "with_name",
    "datetime", "timedelta", "log", "object", "Documented", "DocumentedNumber", "Unresolved", "Rollout", "Host",
}  # fmt: skip
#: The patch registry's machinery: a registry of code (the patches, in order), the lock it
#: installs and reverts under, where a patch being installed records, and the servers whose
#: routes follow it. Which patch is installed is the patches' own state, not an emulated thing's.
PATCH_REGISTRY = {
    ("local_aws.patches.base", "PATCHES"), ("local_aws.patches.base", "_lock"),
    ("local_aws.patches.base", "_recording"), ("local_aws.patches.base", "_DISPATCHERS"),
}  # fmt: skip
MUTATORS = ("append", "extend", "insert", "add", "update", "pop", "popitem", "remove", "discard", "clear",
            "setdefault")  # fmt: skip


def _held(name: str, target: str, value: ast.expr, sources: dict[str, str]) -> str | None:
    """What is wrong with module `name` holding `value` as `target`, if anything."""
    if isinstance(value, ast.Call):
        callee = value.func
        called = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
        return None if called in STATELESS_CALLS else f"{name}.{target} = {called}(...)"
    if isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp):
        changed = re.compile(rf"\b{target}\s*(\.({'|'.join(MUTATORS)})\(|\[[^\]]*\]\s*=[^=]|\[[^\]]*\]\s*[-+]=)")
        changers = [other for other, text in sources.items() if changed.search(text)]
        return f"{name}.{target}, changed in {', '.join(changers)}" if changers else None
    return None


def module_level_state(modules: dict[str, Path]) -> list[str]:
    """Each module-level name of `modules` that holds or may hold state: a call's result but
    for STATELESS_CALLS, a mutable table some code of theirs changes, a name some function
    rebinds with `global`."""
    sources = {n: p.read_text() for n, p in modules.items()}
    found = []
    for name, source in sources.items():
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                found += [f"{name}.{g} (rebound with global)" for g in node.names if (name, g) not in PATCH_REGISTRY]
        for node in tree.body:
            if isinstance(node, ast.Assign):
                pairs = [(t, node.value) for t in node.targets]
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                pairs = [(node.target, node.value)]
            else:
                continue
            for target, value in pairs:
                if isinstance(target, ast.Name) and target.id != "__all__" and (name, target.id) not in PATCH_REGISTRY:
                    problem = _held(name, target.id, value, sources)
                    found += [problem] if problem else []
    return found


def test_the_local_aws_holds_no_state_outside_its_backends_and_its_host() -> None:
    """Every account's and region's state sits in a BackendDict's backend, reset with moto's
    reset; what the process holds beside (its clock, its faults, the services' planes) sits in
    the one host (local_aws/host.py). No module keeps a registry, queue, cache or flag of its own;
    images/ is what other processes run."""
    modules = {n: p for n, p in local_aws_modules().items() if not n.startswith("local_aws.images")}
    assert module_level_state(modules) == []


def test_the_state_check_finds_a_module_s_own_state(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "import threading\n\n_seen = {}\nTABLE = {'a': 1}\nLOCK = threading.Lock()\nBACKENDS = BackendDict(X)\n"
        "NAMES = {'a': 'b'}\n\n\ndef see(key):\n    _seen[key] = True\n\n\ndef flag():\n    global TABLE\n"
    )
    assert sorted(module_level_state({"planted": planted})) == [
        "planted.LOCK = Lock(...)",
        "planted.TABLE (rebound with global)",
        "planted._seen, changed in planted",
    ]
