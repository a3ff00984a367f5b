"""`kctl top pods|nodes`: the rows kubectl top prints, from the PodMetrics and NodeMetrics in the API.

kctl.cli.top reads the flags, calls `pod_rows` or `node_rows` and prints the rows (Go's
tabwriter as kubectl's top printer sets it up). The metrics are what the
node agents' scrapers wrote (kctl.agent.metrics, metrics.k8s.io/v1beta1); everything follows
kubectl's `top pod` / `top node` (staging/src/k8s.io/kubectl/pkg/cmd/top, pkg/metricsutil):

- CPU is printed in millicores, rounded up (`quantity.MilliValue()`), memory in Mi, rounded
  down (`quantity.Value() / (1024*1024)`); a pod's usage is the sum of its containers';
- rows are sorted by namespace (with -A) and name, or with `--sort-by cpu|memory` by that
  usage, largest first;
- nodes: CPU(%) and MEMORY(%) of the Node's allocatable (capacity with `show_capacity`),
  truncated; a Node without metrics gets a row of `<unknown>`;
- no metrics at all is MetricsNotAvailable ("metrics not available yet") when there are pods
  (nodes) they could be of, else an empty result (the CLI says "No resources found").

No printing here: the API's NotFound, ClientSideError for bad flags (kctl.machinery.errors) and
MetricsNotAvailable carry the message for the caller.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from kctl.machinery.errors import ClientSideError
from kctl.machinery.quantity import parse_quantity

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

POD_COLUMNS = ("NAME", "CPU(cores)", "MEMORY(bytes)")
NODE_COLUMNS = ("NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)")
SORT_KEYS = ("cpu", "memory")
UNKNOWN = "<unknown>"
MI = 1024 * 1024


class MetricsNotAvailable(Exception):
    """No metrics (yet) for what was asked; str() is kubectl's message."""

    def __init__(self) -> None:
        super().__init__("metrics not available yet")


@dataclass(frozen=True)
class Usage:
    """CPU in cores and memory in bytes (exact)."""

    cpu: Fraction = Fraction(0)
    memory: Fraction = Fraction(0)

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(self.cpu + other.cpu, self.memory + other.memory)

    def value(self, key: str) -> Fraction:
        return self.cpu if key == "cpu" else self.memory


def usage_of(usage: object) -> Usage:
    """A metrics `usage` map ({cpu, memory} quantities) as exact numbers; malformed or missing values count 0."""
    values = usage if isinstance(usage, dict) else {}

    def one(key: str) -> Fraction:
        try:
            return parse_quantity(values.get(key, 0))
        except ValueError:
            return Fraction(0)

    return Usage(one("cpu"), one("memory"))


def millicores(cpu: Fraction) -> str:
    """kubectl's `%vm` of quantity.MilliValue() (rounded up)."""
    return f"{math.ceil(cpu * 1000)}m"


def mebibytes(memory: Fraction) -> str:
    """kubectl's `%vMi` of quantity.Value()/(1024*1024) (Value rounds up, the division down)."""
    return f"{math.ceil(memory) // MI}Mi"


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def _check_sort(sort_by: str | None) -> None:
    if sort_by and sort_by not in SORT_KEYS:
        raise ClientSideError("--sort-by accepts only cpu or memory")


def _by_usage(entries: list, usage_of_entry, sort_by: str | None) -> list:
    """Largest usage first for --sort-by (stable: equal ones keep the name order)."""
    if not sort_by:
        return entries
    return sorted(entries, key=lambda e: usage_of_entry(e).value(sort_by), reverse=True)


def _selector(label_selector: str | None):
    if not label_selector:
        return None
    from kctl.machinery.selectors import parse_label_selector

    return parse_label_selector(label_selector)


# -- pods ------------------------------------------------------------------------------------

def pod_rows(api: API, *, namespace: str | None, name: str | None = None, label_selector: str | None = None,
             containers: bool = False, sort_by: str | None = None, headers: bool = True) -> list[list[str]]:
    """kubectl top pod's table: namespace None = every namespace (a NAMESPACE column first).

    [] when no pod matches; MetricsNotAvailable when pods match but none has metrics.
    """
    _check_sort(sort_by)
    if name and label_selector:
        raise ClientSideError("only one of NAME or --selector can be provided")
    metrics_rt, pods_rt = api.resource("pods.metrics.k8s.io"), api.resource("pods")
    ns = api.namespace_of(pods_rt, namespace) if namespace is not None else None
    if name:
        found = api.find(metrics_rt, name, namespace=ns)
        if found is None:
            api.get(pods_rt, name, namespace=ns)  # NotFound: pods "x" not found
            raise MetricsNotAvailable()
        items = [found]
    else:
        items, _ = api.list(metrics_rt, namespace=ns, label_selector=_selector(label_selector))
        if not items:
            pods, _ = api.list(pods_rt, namespace=ns, label_selector=_selector(label_selector))
            if pods:
                raise MetricsNotAvailable()
            return []
    all_namespaces = namespace is None
    items = sorted(items, key=lambda m: ((_meta(m).get("namespace", "") if all_namespaces else ""),
                                         _meta(m).get("name", "")))
    totals = {id(m): sum((usage_of(c.get("usage")) for c in _containers(m)), Usage()) for m in items}
    items = _by_usage(items, lambda m: totals[id(m)], sort_by)
    rows: list[list[str]] = []
    if headers:
        rows.append([*(["NAMESPACE"] if all_namespaces else []), *(["POD"] if containers else []), *POD_COLUMNS])
    for m in items:
        prefix = [_meta(m).get("namespace", "")] if all_namespaces else []
        if containers:
            for c in _containers(m):
                usage = usage_of(c.get("usage"))
                rows.append([*prefix, _meta(m).get("name", ""), str(c.get("name", "")), millicores(usage.cpu),
                             mebibytes(usage.memory)])
        else:
            usage = totals[id(m)]
            rows.append([*prefix, _meta(m).get("name", ""), millicores(usage.cpu), mebibytes(usage.memory)])
    return rows


def _containers(metrics: dict) -> list[dict]:
    return [c for c in metrics.get("containers") or () if isinstance(c, dict)]


# -- nodes -----------------------------------------------------------------------------------

def node_rows(api: API, *, name: str | None = None, label_selector: str | None = None, sort_by: str | None = None,
              show_capacity: bool = False, headers: bool = True) -> list[list[str]]:
    """kubectl top node's table; MetricsNotAvailable when none of the Nodes has metrics."""
    _check_sort(sort_by)
    if name and label_selector:
        raise ClientSideError("only one of NAME or --selector can be provided")
    nodes_rt, metrics_rt = api.resource("nodes"), api.resource("nodes.metrics.k8s.io")
    if name:
        nodes = [api.get(nodes_rt, name)]  # NotFound: nodes "x" not found
    else:
        nodes, _ = api.list(nodes_rt, label_selector=_selector(label_selector))
    wanted = {_meta(n).get("name", ""): n for n in nodes}
    if name:
        found = api.find(metrics_rt, name)
        metrics = [found] if found is not None else []
    else:
        metrics = [m for m in api.list(metrics_rt)[0] if _meta(m).get("name") in wanted]
    if not metrics:
        raise MetricsNotAvailable()
    metrics = _by_usage(sorted(metrics, key=lambda m: _meta(m).get("name", "")),
                        lambda m: usage_of(m.get("usage")), sort_by)
    rows: list[list[str]] = [list(NODE_COLUMNS)] if headers else []
    for m in metrics:
        node_name = _meta(m).get("name", "")
        status = wanted[node_name].get("status") or {}
        available = usage_of(status.get("capacity" if show_capacity else "allocatable"))
        usage = usage_of(m.get("usage"))
        rows.append([node_name, millicores(usage.cpu), _percent(usage.cpu * 1000, available.cpu * 1000),
                     mebibytes(usage.memory), _percent(usage.memory, available.memory)])
    seen = {_meta(m).get("name") for m in metrics}
    rows.extend([node_name, *[UNKNOWN] * 4] for node_name in sorted(wanted) if node_name not in seen)
    return rows


def _percent(used: Fraction, available: Fraction) -> str:
    """kubectl's int64(float64(used.MilliValue()) / float64(available.MilliValue()) * 100)."""
    if available <= 0:
        return UNKNOWN
    return f"{int(math.ceil(used) / math.ceil(available) * 100)}%"


__all__ = ["MetricsNotAvailable", "NODE_COLUMNS", "POD_COLUMNS", "Usage", "mebibytes",
           "millicores", "node_rows", "pod_rows", "usage_of"]
