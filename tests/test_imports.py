"""Which top-level package may import which: no cycle, and the leaves stay leaves.

Read from the source (every ``import`` and ``from ... import``, including those inside
functions), not from what a run happens to import.
"""

from __future__ import annotations

import ast
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


def test_no_cycle_between_top_level_packages() -> None:
    edges = graph()
    visiting: list[str] = []
    done: set[str] = set()

    def visit(package: str) -> None:
        assert package not in visiting, " -> ".join([*visiting[visiting.index(package) :], package])
        if package in done:
            return
        visiting.append(package)
        for other in edges[package]:
            visit(other)
        visiting.pop()
        done.add(package)

    for package in PACKAGES:
        visit(package)


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
