"""Kubernetes' Priority admission plugin: a pod's `priorityClassName` becomes its `spec.priority`.

On Pod CREATE (plugin/pkg/admission/priority): a named class is looked up (unknown ->
Forbidden `no PriorityClass with name x was found`) and its value and preemptionPolicy are
written into the pod; a pod naming none gets the global default class (`globalDefault: true`,
the lowest value if several) and its name, or priority 0 when there is none. A pod that
states a priority or preemptionPolicy other than its class's is refused, as there. On
UPDATE the stored values are kept when the new object leaves them out (a `replace` of a
manifest must not drop what admission set). The scheduler's queue and preemption read
spec.priority (kctl.scheduler.queue, .plugins.default_preemption).

For PriorityClass objects it does what the registry and this plugin do in Kubernetes:
preemptionPolicy defaults to PreemptLowerPriority; only one class may be the global default;
names starting with `system-` are reserved; a user class's value is at most 1000000000;
value and preemptionPolicy cannot change; the two system classes cannot be deleted.

The system classes `system-cluster-critical` (2000000000) and `system-node-critical`
(2000001000) are known here even when no object stores them: kube-apiserver bootstraps
them as objects, kctl's API has no start-up of its own to do that, so pods can name them
on any store. Registered in kctl.admission.plugins.builtin_plugins.
"""

from __future__ import annotations

from kctl.admission.plugins import AdmissionPlugin, Attributes, Lister
from kctl.machinery.errors import FieldError, Forbidden, Invalid

PRIORITY_CLASS = "PriorityClass.scheduling.k8s.io"
#: the classes kube-apiserver makes at start (pkg/apis/scheduling: SystemPriorityClasses)
SYSTEM_CLASSES: dict[str, dict] = {
    "system-node-critical": {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "system-node-critical"},
        "value": 2000001000, "preemptionPolicy": "PreemptLowerPriority",
        "description": "Used for system critical pods that must not be moved from their current node."},
    "system-cluster-critical": {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "system-cluster-critical"},
        "value": 2000000000, "preemptionPolicy": "PreemptLowerPriority",
        "description": "Used for system critical pods that must run in the cluster, but can be moved to another "
                       "node if necessary."},
}
#: the largest value a class not named system-* may have (HighestUserDefinablePriority)
HIGHEST_USER_DEFINABLE_PRIORITY = 1000000000


def _classes(lister: Lister) -> dict[str, dict]:
    """Every PriorityClass by name: the stored ones, and the system ones where not stored."""
    classes = {name: cls for name, cls in SYSTEM_CLASSES.items()}
    for cls in lister(PRIORITY_CLASS):
        classes[(cls.get("metadata") or {}).get("name", "")] = cls
    return classes


def _default_class(stored: list[dict]) -> dict | None:
    """The global default class: of those marked globalDefault, the lowest value (getDefaultPriorityClass)."""
    defaults = [c for c in stored if c.get("globalDefault") is True]
    return min(defaults, key=lambda c: c.get("value") or 0) if defaults else None


def _forbidden(attrs: Attributes, message: str) -> Forbidden:
    return Forbidden(f'{attrs.rt.group_resource} "{attrs.name}" is forbidden: {message}')


def mutate(attrs: Attributes, lister: Lister) -> None:
    """Resolve a new pod's priority; keep a pod's on update; default a PriorityClass's preemptionPolicy."""
    obj = attrs.obj
    if not isinstance(obj, dict):
        return
    if attrs.rt.group_kind == PRIORITY_CLASS:
        if attrs.operation in ("CREATE", "UPDATE") and obj.get("preemptionPolicy") is None:
            obj["preemptionPolicy"] = "PreemptLowerPriority"  # SetDefaults_PriorityClass
        return
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    if attrs.operation == "UPDATE":
        old = (attrs.old_obj or {}).get("spec") or {}
        for key in ("priority", "preemptionPolicy", "priorityClassName"):
            if spec.get(key) is None and old.get(key) is not None:
                spec[key] = old[key]
        return
    if attrs.operation != "CREATE":
        return
    name = spec.get("priorityClassName")
    if not name:
        found = _default_class(lister(PRIORITY_CLASS))
        if found is not None:
            spec["priorityClassName"] = (found.get("metadata") or {}).get("name")
        priority, policy = (found or {}).get("value") or 0, (found or {}).get("preemptionPolicy")
    else:
        cls = _classes(lister).get(str(name))
        if cls is None:
            raise _forbidden(attrs, f"no PriorityClass with name {name} was found")
        priority, policy = cls.get("value") or 0, cls.get("preemptionPolicy") or "PreemptLowerPriority"
    given = spec.get("priority")
    if given is not None and given != priority:
        raise _forbidden(attrs, f"the integer value of priority ({given}) must not be provided in pod spec; "
                                f"priority admission controller computed {priority} from the given PriorityClass name")
    spec["priority"] = priority
    if policy is not None:
        given_policy = spec.get("preemptionPolicy")
        if given_policy is not None and given_policy != policy:
            raise _forbidden(attrs, f"the string value of PreemptionPolicy ({given_policy}) must not be provided in "
                                    f"pod spec; priority admission controller computed {policy} from the given "
                                    "PriorityClass name")
        spec["preemptionPolicy"] = policy


def validate(attrs: Attributes, lister: Lister) -> None:
    """A PriorityClass: reserved names, the value's ceiling, immutability, one global default, system ones kept."""
    if attrs.rt.group_kind != PRIORITY_CLASS:
        return
    what = f'{attrs.rt.group_kind} "{attrs.name}"'
    if attrs.operation == "DELETE":
        if attrs.name in SYSTEM_CLASSES:
            raise _forbidden(attrs, "this is a system priority class and cannot be deleted")
        return
    obj = attrs.obj or {}
    errors = _field_errors(attrs.name, obj, attrs.old_obj if attrs.operation == "UPDATE" else None)
    if errors:
        raise Invalid(what, errors)
    if obj.get("globalDefault") is True:
        other = _default_class([c for c in lister(PRIORITY_CLASS)
                                if (c.get("metadata") or {}).get("name") != attrs.name])
        if other is not None:
            raise _forbidden(attrs, f"PriorityClass {(other.get('metadata') or {}).get('name')} is marked as "
                                    "default. Only one default can exist")


def _field_errors(name: str, obj: dict, old: dict | None) -> list[FieldError]:
    """ValidatePriorityClass and ValidatePriorityClassUpdate."""
    errors: list[FieldError] = []
    value = obj.get("value")
    if name.startswith("system-"):
        known = SYSTEM_CLASSES.get(name)
        if known is None:
            why = f"{name} is not a known system priority class"
        elif value != known["value"]:
            why = f"value of {name} PriorityClass must be {known['value']}"
        elif obj.get("globalDefault") is True:
            why = f"globalDefault of {name} PriorityClass must be false"
        else:
            why = ""
        if why:
            errors.append(FieldError("metadata.name", "Forbidden: priority class names with 'system-' prefix are "
                                                      f"reserved for system use only. error: {why}"))
    elif isinstance(value, int) and value > HIGHEST_USER_DEFINABLE_PRIORITY:
        errors.append(FieldError("value", "Forbidden: maximum allowed value of a user defined priority is "
                                          f"{HIGHEST_USER_DEFINABLE_PRIORITY}"))
    if old is not None:
        for key in ("value", "preemptionPolicy"):
            if old.get(key) is not None and obj.get(key) != old.get(key):
                errors.append(FieldError(key, "Forbidden: may not be changed in an update."))
    return errors


PLUGIN = AdmissionPlugin(name="Priority", kinds=frozenset({"Pod", PRIORITY_CLASS}), mutate=mutate, validate=validate)

__all__ = ["HIGHEST_USER_DEFINABLE_PRIORITY", "PLUGIN", "PRIORITY_CLASS", "SYSTEM_CLASSES"]
