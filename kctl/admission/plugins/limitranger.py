"""Kubernetes' LimitRanger admission plugin: a namespace's LimitRanges fill and bound what pods ask for.

As plugin/pkg/admission/limitranger, for the LimitRanges of the request's namespace:
- **mutate, Pod CREATE**: each container and init container missing a request or limit
  gets the `Container` items' `defaultRequest` / `default`, and the pod the annotation
  `kubernetes.io/limit-ranger: LimitRanger plugin set: cpu request for container app; ...`
  (its qosClass is computed again: Kubernetes computes it after admission);
- **validate, Pod CREATE**: each container against the `Container` items' min, max and
  maxLimitRequestRatio, the pod's totals against the `Pod` items', with Kubernetes' messages
  (`pods "x" is forbidden: maximum cpu usage per Container is 500m, but limit is 1`);
- **validate, PersistentVolumeClaim CREATE/UPDATE**: the requested storage against the
  `PersistentVolumeClaim` items' min and max.
A LimitRange item of type Container is read with the defaults Kubernetes stores for it
(SetDefaults_LimitRangeItem: a missing `default` is `max`, a missing `defaultRequest` is
`default`, else `min`); kctl applies them when reading the item but does not store them in
the LimitRange (a deviation: `get -o yaml` shows the object as written, and applying the
same manifest again stays `unchanged`). Pod updates are not looked at (a pod's containers
cannot change), as in Kubernetes.
The namespace's LimitRanges are listed once per request, and only for these kinds and
operations. Registered in kctl.admission.plugins.builtin_plugins.
"""

from __future__ import annotations

import copy
from fractions import Fraction

from kctl.admission.plugins import AdmissionPlugin, Attributes, Lister
from kctl.admission.podresources import pod_totals, resource_list
from kctl.machinery.errors import Forbidden
from kctl.machinery.quantity_format import canonical, format_quantity

LIMIT_RANGE, POD, PVC = "LimitRange", "Pod", "PersistentVolumeClaim"
ANNOTATION = "kubernetes.io/limit-ranger"


def _items(limit_range: dict) -> list[dict]:
    limits = (limit_range.get("spec") or {}).get("limits")
    return [item for item in limits if isinstance(item, dict)] if isinstance(limits, list) else []


def default_item(item: dict) -> dict:
    """A LimitRange item with Kubernetes' stored defaults (SetDefaults_LimitRangeItem); a new dict."""
    item = copy.deepcopy(item)
    if item.get("type") != "Container":
        return item
    default = item.get("default") if isinstance(item.get("default"), dict) else {}
    request = item.get("defaultRequest") if isinstance(item.get("defaultRequest"), dict) else {}
    for source, target in ((item.get("max"), default), (default, request), (item.get("min"), request)):
        for key, value in (source if isinstance(source, dict) else {}).items():
            target.setdefault(key, value)
    if default:
        item["default"] = default
    if request:
        item["defaultRequest"] = request
    return item


def _ranges(attrs: Attributes, lister: Lister) -> list[dict]:
    """The items of every LimitRange in the request's namespace, with their defaults (one list)."""
    return [default_item(item) for lr in lister(LIMIT_RANGE, attrs.namespace) for item in _items(lr)]


def mutate(attrs: Attributes, lister: Lister) -> None:
    """Fill a new pod's missing requests and limits from the Container items."""
    obj = attrs.obj
    if not isinstance(obj, dict) or attrs.rt.group_kind != POD or attrs.operation != "CREATE":
        return
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    items = [item for item in _ranges(attrs, lister) if item.get("type") == "Container"]
    if not items:
        return
    limits: dict = {}
    requests: dict = {}
    for item in items:  # defaultContainerResourceRequirements: later items win
        requests.update(item.get("defaultRequest") or {})
        limits.update(item.get("default") or {})
    notes: list[str] = []
    for key, prefix in (("containers", "container"), ("initContainers", "init container")):
        for container in spec.get(key) or []:
            if isinstance(container, dict):
                notes += _merge(container, requests, limits, prefix)
    if notes:
        meta = obj.setdefault("metadata", {})
        annotations = meta.get("annotations")
        if not isinstance(annotations, dict):
            annotations = meta["annotations"] = {}
        annotations[ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)
        from kctl.admission.defaults import pod_qos_class

        status = obj.get("status")
        if isinstance(status, dict) and status.get("qosClass"):
            status["qosClass"] = pod_qos_class(spec)


def _merge(container: dict, requests: dict, limits: dict, prefix: str) -> list[str]:
    """mergeContainerResources: set what the container lacks; the annotation's notes about it."""
    resources = container.get("resources")
    if not isinstance(resources, dict):
        resources = {}
    notes = []
    for which, defaults in (("limits", limits), ("requests", requests)):
        if not defaults:
            continue
        have = resources.get(which)
        if not isinstance(have, dict):
            have = {}
        missing = sorted(k for k in defaults if k not in have)
        if missing:
            for k in missing:
                have[k] = defaults[k]
            resources[which] = have
            container["resources"] = resources
            notes.append(f"{', '.join(missing)} {which[:-1]} for {prefix} {container.get('name', '')}")
    # Kubernetes lists requests before limits
    return sorted(notes, key=lambda note: " limit for " in note)


# -- validate ---------------------------------------------------------------------------------------


def _min(kind: str, name: str, enforced: object, requests: dict, limits: dict, raw: dict) -> str | None:
    bound = _value(enforced)
    if bound is None:
        return None
    if name not in requests:
        return f"minimum {name} usage per {kind} is {_text(enforced)}.  No request is specified"
    if requests[name] < bound:
        return f"minimum {name} usage per {kind} is {_text(enforced)}, but request is {_text(raw['requests'][name])}"
    if name in limits and limits[name] < bound:
        return f"minimum {name} usage per {kind} is {_text(enforced)}, but limit is {_text(raw['limits'][name])}"
    return None


def _max(kind: str, name: str, enforced: object, requests: dict, limits: dict, raw: dict) -> str | None:
    bound = _value(enforced)
    if bound is None:
        return None
    if name not in limits:
        return f"maximum {name} usage per {kind} is {_text(enforced)}.  No limit is specified"
    if limits[name] > bound:
        return f"maximum {name} usage per {kind} is {_text(enforced)}, but limit is {_text(raw['limits'][name])}"
    if name in requests and requests[name] > bound:
        return f"maximum {name} usage per {kind} is {_text(enforced)}, but request is {_text(raw['requests'][name])}"
    return None


def _max_request(kind: str, name: str, enforced: object, requests: dict, raw: dict) -> str | None:
    """maxRequestConstraint: a claim's request (claims have no limits)."""
    bound = _value(enforced)
    if bound is None:
        return None
    if name not in requests:
        return f"maximum {name} usage per {kind} is {_text(enforced)}.  No request is specified"
    if requests[name] > bound:
        return f"maximum {name} usage per {kind} is {_text(enforced)}, but request is {_text(raw['requests'][name])}"
    return None


def _ratio(kind: str, name: str, enforced: object, requests: dict, limits: dict) -> str | None:
    bound = _value(enforced)
    if bound is None:
        return None
    request, limit = requests.get(name, Fraction(0)), limits.get(name, Fraction(0))
    if not request:
        return (f"{name} max limit to request ratio per {kind} is {_text(enforced)}, "
                "but no request is specified or request is 0")
    if not limit:
        return (f"{name} max limit to request ratio per {kind} is {_text(enforced)}, "
                "but no limit is specified or limit is 0")
    observed = limit / request
    if observed > bound:
        return (f"{name} max limit to request ratio per {kind} is {_text(enforced)}, "
                f"but provided ratio is {float(observed):f}")
    return None


def _value(enforced: object) -> Fraction | None:
    amounts, _ = resource_list({"v": enforced})
    return amounts.get("v")


def _text(raw: object) -> str:
    try:
        return canonical(raw)  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return str(raw)


def _check(kind: str, item: dict, requests: dict, limits: dict, raw: dict) -> list[str]:
    errors = []
    for name, enforced in (item.get("min") or {}).items():
        errors.append(_min(kind, name, enforced, requests, limits, raw))
    for name, enforced in (item.get("max") or {}).items():
        errors.append(_max(kind, name, enforced, requests, limits, raw))
    for name, enforced in (item.get("maxLimitRequestRatio") or {}).items():
        errors.append(_ratio(kind, name, enforced, requests, limits))
    return [e for e in errors if e]


def _container_state(container: dict) -> tuple[dict, dict, dict]:
    resources = container.get("resources") or {}
    requests, raw_requests = resource_list(resources.get("requests"))
    limits, raw_limits = resource_list(resources.get("limits"))
    return requests, limits, {"requests": raw_requests, "limits": raw_limits}


def _pod_errors(spec: dict, items: list[dict]) -> list[str]:
    errors: list[str] = []
    for item in items:
        if item.get("type") == "Container":
            for key in ("containers", "initContainers"):
                for container in spec.get(key) or []:
                    if isinstance(container, dict):
                        errors += _check("Container", item, *_container_state(container))
        elif item.get("type") == "Pod":
            requests, raw_requests = pod_totals(spec, "requests")
            limits, raw_limits = pod_totals(spec, "limits")
            raw = {"requests": {k: _total(v, raw_requests.get(k)) for k, v in requests.items()},
                   "limits": {k: _total(v, raw_limits.get(k)) for k, v in limits.items()}}
            errors += _check("Pod", item, requests, limits, raw)
    return errors


def _total(value: Fraction, like: str | None) -> str:
    from kctl.machinery.quantity_format import format_of

    return format_quantity(value, fmt=format_of(like))


def _claim_errors(claim: dict, items: list[dict]) -> list[str]:
    requests, raw_requests = resource_list(((claim.get("spec") or {}).get("resources") or {}).get("requests"))
    raw = {"requests": raw_requests, "limits": {}}
    errors: list[str] = []
    for item in items:
        if item.get("type") != "PersistentVolumeClaim":
            continue
        for name, enforced in (item.get("min") or {}).items():
            errors.append(_min("PersistentVolumeClaim", name, enforced, requests, {}, raw))
        for name, enforced in (item.get("max") or {}).items():
            errors.append(_max_request("PersistentVolumeClaim", name, enforced, requests, raw))
    return [e for e in errors if e]


def validate(attrs: Attributes, lister: Lister) -> None:
    """Refuse a new pod, or a claim, outside its namespace's LimitRanges (every violation, as Kubernetes lists)."""
    obj = attrs.obj
    kind = attrs.rt.group_kind
    if not isinstance(obj, dict) or not isinstance(obj.get("spec"), dict):
        return
    if kind == POD and attrs.operation == "CREATE":
        items = _ranges(attrs, lister)
        errors = _pod_errors(obj["spec"], items) if items else []
    elif kind == PVC and attrs.operation in ("CREATE", "UPDATE"):
        items = _ranges(attrs, lister)
        errors = _claim_errors(obj, items) if items else []
    else:
        return
    if errors:
        text = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        raise Forbidden(f'{attrs.rt.group_resource} "{attrs.name}" is forbidden: {text}')


PLUGIN = AdmissionPlugin(name="LimitRanger", kinds=frozenset({POD, PVC}), mutate=mutate,
                         validate=validate)

__all__ = ["ANNOTATION", "PLUGIN", "default_item"]
