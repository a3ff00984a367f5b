"""The API is a contract (kctl.apiserver.contract): nothing above the API server reaches a store or others' privates.

An AST walk of kctl/: outside kctl/store and kctl/apiserver nothing reads an attribute called
`store` (the store behind an API belongs to the API server; a module path such as
`kctl.store.sqlite` is fine),
and no call `x._name(...)` reaches a private method of another module's object (x is not
self/cls, the module defines no `_name` of its own, and x is not a module it imported).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

KCTL = Path(__file__).resolve().parents[2] / "kctl"
#: a named tuple's public methods, which begin with an underscore so as not to clash with fields
NAMEDTUPLE = {"_replace", "_asdict", "_make"}


def _dotted(node: ast.expr) -> str | None:
    """`a.b.c` for a chain of names and attributes, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def violations(source: str, where: str = "<test>") -> list[str]:
    """Each reach around the API layer in one module's source, as `where:line: what`."""
    tree = ast.parse(source)
    own = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    modules = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
               for a in n.names if not a.name.startswith("kctl")}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "store":
            dotted = _dotted(node)
            if dotted is None or not dotted.startswith("kctl."):
                found.append(f"{where}:{node.lineno}: reads .store ({ast.unparse(node)})")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value == "store":
            found.append(f"{where}:{node.lineno}: reads .store ({ast.unparse(node)})")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name, base = node.func.attr, node.func.value
            if not name.startswith("_") or (name.startswith("__") and name.endswith("__")) or name in NAMEDTUPLE:
                continue
            if isinstance(base, ast.Name) and (base.id in ("self", "cls") or base.id in modules):
                continue
            if name in own:
                continue
            found.append(f"{where}:{node.lineno}: calls another module's private {ast.unparse(node.func)}()")
    return found


@pytest.mark.parametrize("source, expected", [
    ("api.store.get('Pod', 'default', 'p')", ["reads .store"]),
    ("self.api.store.watch(0)", ["reads .store"]),
    ("connect.api().store.backup(f)", ["reads .store"]),
    ("getattr(api, 'store', None)", ["reads .store"]),
    ("server._namespace_of(rt, None)", ["calls another module's private server._namespace_of()"]),
    ("self.api._prepare_update(obj, None)", ["calls another module's private self.api._prepare_update()"]),
    ("import kctl.store.sqlite\nkctl.store.sqlite.default_path()", []),
    ("self._helper()\ncls._make()", []),
    ("import os\nos._exit(1)", []),
    ("def _step(): pass\nrun._step()", []),
    ("api.get_by_uid(uid)\nobj.__class__.__name__\nx.__enter__()", []),
    ("term._replace(values=())\npoint._asdict()", []),
])
def test_checker_finds_reaches_around_the_api(source, expected):
    """The checker flags store reads and private calls on others' objects, and nothing else."""
    found = violations(source)
    assert len(found) == len(expected)
    for line, what in zip(found, expected):
        assert what in line


def test_no_module_outside_the_api_layer_reaches_around_it():
    """Outside the store and the API server, no module reads a store or calls a private method of another."""
    found = []
    for path in sorted(KCTL.rglob("*.py")):
        relative = path.relative_to(KCTL.parent)
        if relative.parts[1] in ("store", "apiserver"):
            continue
        found += violations(path.read_text(), str(relative))
    assert found == []
