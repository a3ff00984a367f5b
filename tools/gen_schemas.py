"""Regenerate schemas/ from the Kubernetes OpenAPI schemas that kubernetes-validate ships.

Run by hand when moving to a newer Kubernetes API (`make schemas`); the output is
committed. Keeps only the definitions reachable from kctl's built-in kinds, rewrites
every `$ref` to `#/$defs/NAME`, and marks Quantity strings with kctl's own format so
validation can parse them (kctl.machinery.quantity). kctl's own kinds (kctl.io) and the metrics
API's (metrics.k8s.io, an aggregated API Kubernetes' OpenAPI lacks) are written by hand in
schemas/ and are left alone.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import kubernetes_validate  # dev-only: pip install kubernetes-validate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kctl.machinery.resources import BUILTIN, KCTL_GROUP, METRICS_GROUP  # noqa: E402

K8S_VERSION = "v1.37.0-local-strict"
SOURCE = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / K8S_VERSION
OUT = Path(__file__).resolve().parents[1] / "schemas"
REF_PREFIX = "/api/_definitions.json#/$defs/"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"


def rewrite(node, found: set[str]):
    """Point refs at the local $defs and collect the names they reach."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                name = value.split("#/$defs/")[-1]
                found.add(name)
                out[key] = "#/$defs/" + name
            else:
                out[key] = rewrite(value, found)
        return out
    if isinstance(node, list):
        return [rewrite(v, found) for v in node]
    return node


def main() -> None:
    defs = json.loads((SOURCE / "_definitions.json").read_text())["$defs"]
    reachable: dict[str, dict] = {}
    for rt in BUILTIN:
        if rt.group in (KCTL_GROUP, METRICS_GROUP):  # hand-written: not in Kubernetes' OpenAPI
            continue
        kind_schema = json.loads((SOURCE / rt.schema_name).read_text())
        found: set[str] = set()
        kind_schema = rewrite(kind_schema, found)
        kind_schema.pop("$id", None)
        pending = list(found)
        while pending:
            name = pending.pop()
            if name in reachable:
                continue
            more: set[str] = set()
            reachable[name] = rewrite(defs[name], more)
            pending.extend(more - reachable.keys())
        (OUT / rt.schema_name).write_text(json.dumps(kind_schema, indent=1, sort_keys=True) + "\n")
    reachable[QUANTITY] = {
        "description": defs[QUANTITY].get("description", ""),
        "type": ["string", "number", "null"],
        "format": "quantity",
    }
    (OUT / "_definitions.json").write_text(
        json.dumps({"$defs": dict(sorted(reachable.items()))}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(reachable)} definitions to {OUT}")


if __name__ == "__main__":
    main()
