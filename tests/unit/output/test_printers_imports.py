"""What printing loads: each -o format imports only the modules it prints with (kept off `kctl get`'s start-up path)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: (-o value, modules that must be loaded, module prefixes that must not be)
CASES = [
    (None, ["kctl.output.tables", "kctl.output.cells"],
     ["kctl.manifests", "kctl.output.jsonpath", "kctl.output.gotemplate", "kctl.output.crdcolumns",
      "kctl.output.sorting"]),
    ("wide", ["kctl.output.tables"], ["kctl.manifests", "kctl.output.jsonpath", "kctl.output.gotemplate"]),
    ("name", [], ["kctl.output.tables", "kctl.output.cells", "kctl.manifests", "kctl.output.jsonpath",
                  "kctl.output.gotemplate"]),
    ("yaml", ["kctl.manifests.writer"],
     ["kctl.manifests.yamlio", "kctl.manifests.fastreader", "kctl.manifests.ruamelreader",
      "kctl.manifests.jsonreader", "kctl.output.tables", "ruamel"]),
    ("json", [], ["kctl.manifests", "kctl.output.tables", "ruamel"]),  # orjson writes it (printers._fast_json)
]


@pytest.mark.parametrize("spec, loaded, absent", CASES, ids=[str(c[0]) for c in CASES])
def test_a_format_loads_only_what_it_prints_with(spec: str | None, loaded: list[str], absent: list[str]) -> None:
    """A table loads the per-kind rows but no YAML code; -o yaml/json load the writer but no reader."""
    code = ("import io, json, sys\n"
            "from kctl.machinery.resources import builtin_registry\n"
            "from kctl.output.formats import parse_output\n"
            "from kctl.output.printers import print_objects\n"
            "pod = {'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': 'a', 'namespace': 'default'}}\n"
            f"print_objects([pod], builtin_registry().lookup('pods'), parse_output({spec!r}), io.StringIO(),\n"
            "              err=io.StringIO())\n"
            "print(json.dumps(sorted(sys.modules)))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    modules = json.loads(result.stdout)
    assert [m for m in loaded if m not in modules] == []
    assert [m for m in modules if any(m == p or m.startswith(p + ".") for p in absent)] == []
