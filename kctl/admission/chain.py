"""The admission chain every write passes, in Kubernetes' order.

defaulting (and, on create, the fields Kubernetes' strategies set: a Pod's phase Pending and
qosClass, a Namespace's phase Active) -> built-in mutating plugins (kctl.admission.plugins:
LimitRanger, Priority, DefaultStorageClass, ...) -> mutating hooks -> a Job's generated
selector -> schema validation -> Pod Security and built-in validating plugins -> validating
hooks -> ResourceQuota.
Called by the API layer (kctl.apiserver.server) for writes from every client: the CLI,
controllers, the scheduler and node agents alike. Hook objects themselves are never
sent to hooks (kctl.admission.hooks.matches), so a broken hook can always be removed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from kctl.admission import defaults, hooks, plugins, podsecurity, validation
from kctl.admission.hooks import AdmissionRequest
from kctl.machinery.errors import Forbidden, Invalid


def admit(request: AdmissionRequest, *, mutating: list[dict], validating: list[dict],
          namespace_labels: dict[str, str] | None, warn: Callable[[str], None],
          lister: plugins.Lister | None = None) -> dict | None:
    """Run the chain for one request; returns the object to store (None for DELETE).

    Raises Invalid (schema, with field paths) or Forbidden (Pod Security, a plugin, a hook).
    `lister` reads stored objects for the built-in plugins; without one they do not run.
    """
    rt = request.rt
    what = f'{rt.group_kind} "{request.name}"'
    lister = plugins.per_request(lister) if lister is not None else None
    warnings: list[str] = []
    try:
        if request.operation == "DELETE":
            if lister is not None:
                plugins.run_validating(_attributes(request, None), lister, last=False)
            hooks.run_validating_hooks(validating, request, namespace_labels=namespace_labels, warnings=warnings)
            return None
        obj = defaults.apply_defaults(request.obj, rt)
        if request.operation == "CREATE" and isinstance(obj, dict):
            defaults.prepare_for_create(obj, rt)
        if lister is not None:
            plugins.run_mutating(_attributes(request, obj), lister)
        request = replace(request, obj=obj)
        patched = hooks.run_mutating_hooks(mutating, request, namespace_labels=namespace_labels,
                                           warnings=warnings)
        if patched is not None:
            obj = patched
            request = replace(request, obj=obj)
        if rt.group == "batch" and rt.kind == "Job" and isinstance(obj, dict):  # as its strategy does
            obj = defaults.generate_job_selector(obj, old=request.old_obj)  # (obj is our copy)
            request = replace(request, obj=obj)
        errors = validation.validate(obj, rt)
        if errors:
            raise Invalid(what, errors)
        if rt.namespaced:
            refused = podsecurity.check(obj, rt, namespace_labels or {}, old_obj=request.old_obj)
            if refused:
                raise Forbidden(f"{what} is forbidden: " + "; ".join(str(e) for e in refused))
        if lister is not None:
            plugins.run_validating(_attributes(request, obj), lister, last=False)
        hooks.run_validating_hooks(validating, request, namespace_labels=namespace_labels, warnings=warnings)
        if lister is not None:
            plugins.run_validating(_attributes(request, obj), lister, last=True)
        return obj
    finally:
        for message in warnings:
            warn(message)


def _attributes(request: AdmissionRequest, obj: dict | None) -> plugins.Attributes:
    return plugins.Attributes(operation=request.operation, rt=request.rt, namespace=request.namespace,
                              name=request.name, obj=obj, old_obj=request.old_obj, dry_run=request.dry_run)
