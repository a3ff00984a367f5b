"""kctl's import contract (pyproject.toml's [tool.importlinter], DESIGN.md's "Layers"), checked by lint-imports."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run lint-imports on the kctl package found in `cwd`, with `cwd`'s pyproject.toml, leaving no cache."""
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo", str(cwd / "pyproject.toml")],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of kctl/ and pyproject.toml, to plant an import in without touching the work tree."""
    if not LINT_IMPORTS.exists():
        pytest.fail(f"{LINT_IMPORTS} is missing: `make test` installs import-linter (the `test` extra)")
    copy = tmp_path_factory.mktemp("contract")
    shutil.copytree(ROOT / "kctl", copy / "kctl", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def test_the_layers_contract_is_kept() -> None:
    """Every kctl module imports only the layers below its own (the listed exceptions aside)."""
    if not LINT_IMPORTS.exists():
        pytest.fail(f"{LINT_IMPORTS} is missing: `make test` installs import-linter (the `test` extra)")
    result = lint_imports(ROOT)
    assert result.returncode == 0, f"lint-imports found a broken layer:\n{result.stdout}{result.stderr}"
    assert "0 broken" in result.stdout


def private_imports_across_packages(root: Path) -> list[str]:
    """`kctl.a.x imports kctl.b.y._name` lines: private names imported from another top-level kctl package."""
    found = []
    for path in sorted((root / "kctl").rglob("*.py")):
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kctl.")):
                continue
            if node.module.split(".")[:2] == module.split(".")[:2]:
                continue
            found += [f"{module} imports {node.module}.{alias.name}" for alias in node.names
                      if alias.name.startswith("_") and not alias.name.startswith("__")]
    return found


def test_no_private_name_is_imported_from_another_package() -> None:
    """Library packages (kctl.output, kctl.manifests, ...) are used through public names only."""
    assert private_imports_across_packages(ROOT) == []


def test_a_private_import_across_packages_is_found(tmp_path: Path) -> None:
    """The check names a module that imports another package's private helper (kctl.cli.image did)."""
    (tmp_path / "kctl" / "cli").mkdir(parents=True)
    (tmp_path / "kctl" / "cli" / "image.py").write_text(
        "from kctl.output.printers import _align\nfrom kctl.cli.modify import _objects\n")
    assert private_imports_across_packages(tmp_path) == ["kctl.cli.image imports kctl.output.printers._align"]


@pytest.mark.parametrize("module, planted, importer, imported", [
    ("kctl/daemon/__init__.py", "import kctl.cli.main", "kctl.daemon", "kctl.cli.main"),
    ("kctl/sync/__init__.py", "import kctl.cli.main", "kctl.sync", "kctl.cli.main"),
    ("kctl/controllers/__init__.py", "import kctl.sync.reconcile", "kctl.controllers", "kctl.sync.reconcile"),
    ("kctl/manifests/__init__.py", "import kctl.output.keyorder", "kctl.manifests", "kctl.output.keyorder"),
    ("kctl/output/__init__.py", "import kctl.runtime.interface", "kctl.output", "kctl.runtime.interface"),
    ("kctl/scheduler/__init__.py", "import kctl.controllers.base", "kctl.scheduler", "kctl.controllers.base"),
    ("kctl/apiserver/__init__.py", "import kctl.client.workqueue", "kctl.apiserver", "kctl.client.workqueue"),
    ("kctl/store/__init__.py", "import kctl.admission.chain", "kctl.store", "kctl.admission.chain"),
    ("kctl/admission/__init__.py", "import kctl.apiserver.server", "kctl.admission", "kctl.apiserver.server"),
    ("kctl/machinery/__init__.py", "import kctl.output.printers", "kctl.machinery", "kctl.output.printers"),
], ids=["daemon-to-cli", "sync-to-cli", "controllers-to-sync", "manifests-to-output", "output-to-runtime",
        "sibling-reconcilers", "apiserver-to-client", "store-to-admission", "admission-to-apiserver",
        "machinery-to-output"])
def test_an_upward_import_breaks_the_contract(tree_copy: Path, module: str, planted: str, importer: str,
                                              imported: str) -> None:
    """An import of a higher layer (or of an independent sibling) fails the check and names the import."""
    path = tree_copy / module
    original = path.read_text()
    try:
        path.write_text(original + f"\n{planted}  # planted by the test\n")
        result = lint_imports(tree_copy)
    finally:
        path.write_text(original)
    assert result.returncode != 0
    assert f"{importer} -> {imported}" in result.stdout
