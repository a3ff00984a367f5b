"""Only the composition points choose the store backend: everything else types against kctl.store.contract.

An AST walk of kctl/: an import of kctl.store.sqlite (the SQLite backend) appears only in
kctl/store itself (kctl.store.open chooses SQLite or etcd from the address for every other
caller: the CLI, kctl/apiserver/serve.py, kctl/kubeapi/pki.py) and in `kctl init`
(kctl/cli/maintenance.py), which makes a SQLite store's folder as well.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

KCTL = Path(__file__).resolve().parents[3] / "kctl"
BACKEND = "kctl.store.sqlite"
#: module (relative to kctl/, a trailing / for a whole package) -> the names it may import (None: any)
ALLOWED: dict[str, frozenset[str] | None] = {
    "store/": None,
    "cli/maintenance.py": frozenset({"Store"}),
}


def backend_imports(source: str) -> list[tuple[int, str]]:
    """(line, name) for each name a module imports from the SQLite backend ("*" for the module itself)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == BACKEND:
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module == "kctl.store":
            found += [(node.lineno, "*") for alias in node.names if alias.name == "sqlite"]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, "*") for alias in node.names if alias.name == BACKEND]
    return found


def allowed(relative: str, name: str) -> bool:
    """Whether the module at kctl/<relative> may import `name` from the SQLite backend."""
    for where, names in ALLOWED.items():
        if relative == where or (where.endswith("/") and relative.startswith(where)):
            return names is None or name in names
    return False


@pytest.mark.parametrize("source,relative,expected", [
    ("from kctl.store.sqlite import Store\n", "apiserver/server.py", ["apiserver/server.py:1: Store"]),
    ("from kctl.store.contract import Store\n", "apiserver/server.py", []),
    ("import kctl.store.sqlite\n", "controllers/x.py", ["controllers/x.py:1: *"]),
    ("from kctl.store import sqlite\n", "ops/x.py", ["ops/x.py:1: *"]),
    ("def f():\n    from kctl.store.sqlite import Store\n", "cli/x.py", ["cli/x.py:2: Store"]),
    ("def f():\n    from kctl.store.sqlite import Store\n", "cli/maintenance.py", []),
    ("from kctl.store.sqlite import default_path\n", "kubeapi/pki.py", ["kubeapi/pki.py:1: default_path"]),
    ("from kctl.store.open import open_store\n", "apiserver/serve.py", []),
], ids=["server-sqlite", "server-contract", "import-module", "from-package", "cli-opens-through-open",
        "init-makes-sqlite", "pki-through-open", "serve-through-open"])
def test_the_checker_finds_backend_imports(source, relative, expected):
    """The walk reports imports of the backend outside the composition points, and only those."""
    assert [f"{relative}:{line}: {name}" for line, name in backend_imports(source)
            if not allowed(relative, name)] == expected


def test_only_composition_points_import_the_sqlite_backend():
    """No module of kctl/ outside the composition points imports kctl.store.sqlite."""
    bad = []
    for path in sorted(KCTL.rglob("*.py")):
        relative = path.relative_to(KCTL).as_posix()
        bad += [f"{relative}:{line}: {name}" for line, name in backend_imports(path.read_text())
                if not allowed(relative, name)]
    assert bad == []


def protocol_members(protocol: type) -> dict[str, object]:
    """The public members a Protocol declares (methods, properties and annotated attributes)."""
    members = {name: value for name, value in vars(protocol).items()
               if not name.startswith("_") and (callable(value) or isinstance(value, property))}
    members.update({name: None for name in getattr(protocol, "__annotations__", {})})
    return members


def parameters(fn: object) -> list[tuple[str, object]]:
    """(name, kind) of a function's parameters, self left out."""
    return [(p.name, p.kind) for p in inspect.signature(fn).parameters.values()][1:]


@pytest.mark.parametrize("protocol_name,implementation", [
    ("Store", "kctl.store.sqlite:Store"), ("Transaction", "kctl.store.sqlite:Transaction"),
], ids=["store", "transaction"])
def test_sqlite_backend_implements_the_contract(protocol_name, implementation):
    """The SQLite classes have every member of the Protocols, with the same parameters (names and kinds)."""
    from kctl.store import contract

    module, _, cls_name = implementation.partition(":")
    cls = getattr(importlib.import_module(module), cls_name)
    protocol = getattr(contract, protocol_name)
    problems = []
    for name, declared in protocol_members(protocol).items():
        if declared is None:
            continue  # an attribute (Store.path): set by the constructor, checked by the contract suite
        actual = getattr(cls, name, None)
        if actual is None:
            problems.append(f"{name}: missing")
        elif isinstance(declared, property) != isinstance(actual, property):
            problems.append(f"{name}: property in one, not the other")
        elif callable(declared) and parameters(declared) != parameters(actual):
            problems.append(f"{name}: {parameters(actual)} != {parameters(declared)}")
    assert problems == []
