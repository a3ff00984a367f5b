"""What a pod requests and is limited to in all, as Kubernetes' resourcehelper.PodRequests/PodLimits add it up.

A pod's requests are the larger of its containers' sum and what its init containers need
while they run (each regular init container on top of the sidecars started before it;
sidecars, init containers with `restartPolicy: Always`, stay for the pod's life), plus
`spec.overhead`. Used by the LimitRanger plugin (the `Pod` type's min/max) and by quota
(kctl.admission.quota: `requests.cpu` ... of a pod). Values are exact Fractions.
"""

from __future__ import annotations

from fractions import Fraction

from kctl.machinery.quantity import parse_quantity

#: resource name -> amount, and the raw value first written for it (its format, for messages)
ResourceAmounts = dict[str, Fraction]


def resource_list(value: object) -> tuple[ResourceAmounts, dict[str, str]]:
    """A `requests`/`limits` map parsed: (name -> amount, name -> the raw value); bad values are skipped."""
    amounts: ResourceAmounts = {}
    raw: dict[str, str] = {}
    if isinstance(value, dict):
        for name, quantity in value.items():
            try:
                amounts[str(name)] = parse_quantity(quantity)
            except (ValueError, TypeError):
                continue
            raw[str(name)] = str(quantity)
    return amounts, raw


def _containers(spec: dict, key: str) -> list[dict]:
    items = spec.get(key)
    return [c for c in items if isinstance(c, dict)] if isinstance(items, list) else []


def _of(container: dict, which: str) -> tuple[ResourceAmounts, dict[str, str]]:
    resources = container.get("resources")
    return resource_list(resources.get(which) if isinstance(resources, dict) else None)


def _add(total: ResourceAmounts, raw: dict[str, str], amounts: ResourceAmounts, more_raw: dict[str, str]) -> None:
    for name, value in amounts.items():
        total[name] = total.get(name, Fraction(0)) + value
        raw.setdefault(name, more_raw.get(name, ""))


def pod_totals(spec: dict, which: str) -> tuple[ResourceAmounts, dict[str, str]]:
    """The pod's total `which` ("requests" or "limits") per resource, and a raw value of each (its format)."""
    total: ResourceAmounts = {}
    raw: dict[str, str] = {}
    for container in _containers(spec, "containers"):
        _add(total, raw, *_of(container, which))
    sidecars: ResourceAmounts = {}
    init_peak: ResourceAmounts = {}
    for container in _containers(spec, "initContainers"):
        amounts, more_raw = _of(container, which)
        if container.get("restartPolicy") == "Always":
            _add(sidecars, raw, amounts, more_raw)
            running = dict(sidecars)
        else:
            running = dict(sidecars)
            _add(running, raw, amounts, more_raw)
        for name, value in running.items():
            init_peak[name] = max(init_peak.get(name, Fraction(0)), value)
    for name, value in sidecars.items():
        total[name] = total.get(name, Fraction(0)) + value
    for name, value in init_peak.items():
        total[name] = max(total.get(name, Fraction(0)), value)
    overhead, overhead_raw = resource_list(spec.get("overhead"))
    _add(total, raw, overhead, overhead_raw)
    return total, raw


__all__ = ["ResourceAmounts", "pod_totals", "resource_list"]
