"""The semantic checks a schema cannot say, by kind: metadata, workloads, Jobs, Services, config.

`metadata_errors` applies to every object; `KIND_CHECKS` maps a group-kind to its checks.
Both are applied by `kctl.admission.validation.validate` once the schema step passes.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from typing import Any

from kctl.admission.validation.autoscaling import hpa_errors
from kctl.admission.validation.crd import validate_crd
from kctl.admission.validation.fields import (Path, dig, invalid_value, join_path, required_value, show_value,
                                              unsupported_value)
from kctl.admission.validation.names import (annotations_errors, dns1035_label_problems, dns1123_label_problems,
                                             dns1123_subdomain_problems, labels_errors, name_errors,
                                             path_segment_name_problems, port_name_problems, selector_errors,
                                             selector_matches)
from kctl.admission.validation.podspec import PROTOCOLS, pod_spec_errors, port_number_errors
from kctl.machinery.errors import FieldError
from kctl.machinery.resources import ResourceType


_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_PERCENT = re.compile(r"[0-9]+%")


def _name_check_for(rt: ResourceType) -> Callable[[str], list[str]]:
    if rt.group == "" and rt.kind == "Namespace":
        return dns1123_label_problems
    if rt.group == "" and rt.kind == "Service":
        return dns1035_label_problems
    if rt.group == "rbac.authorization.k8s.io":  # Kubernetes' ValidateRBACName: `system:basic-user` is valid
        return path_segment_name_problems
    return dns1123_subdomain_problems


def metadata_errors(obj: dict, rt: ResourceType) -> list[FieldError]:
    """Every object's metadata: name or generateName, namespace, labels and annotations."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return [required_value(("metadata", "name"), "name or generateName is required")]
    errors = []
    name = metadata.get("name")
    if name:
        errors.extend(name_errors(("metadata", "name"), name, _name_check_for(rt)))
    elif not metadata.get("generateName"):
        errors.append(required_value(("metadata", "name"), "name or generateName is required"))
    namespace = metadata.get("namespace")
    if namespace:
        errors.extend(name_errors(("metadata", "namespace"), namespace, dns1123_label_problems))
    errors.extend(labels_errors(("metadata", "labels"), metadata.get("labels")))
    errors.extend(annotations_errors(("metadata", "annotations"), metadata.get("annotations")))
    return errors


def _non_negative(obj: dict, *keys: str) -> list[FieldError]:
    value = dig(obj, *keys)
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        return [invalid_value(keys, value, "must be greater than or equal to 0")]
    return []


def _workload_errors(obj: dict, *, selector_required: bool, restart_policies: tuple[str, ...],
                     restart_required: bool = False) -> list[FieldError]:
    """Deployment, ReplicaSet, DaemonSet, Job: selector vs template, and the template's pod spec."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    errors = _non_negative(obj, "spec", "replicas")
    selector = spec.get("selector")
    template_labels = dig(spec, "template", "metadata", "labels")
    errors.extend(labels_errors(("spec", "template", "metadata", "labels"), template_labels))
    if selector is None:
        if selector_required:
            errors.append(required_value(("spec", "selector")))
    elif isinstance(selector, dict):
        errors.extend(selector_errors(("spec", "selector"), selector))
        if not selector.get("matchLabels") and not selector.get("matchExpressions"):
            errors.append(invalid_value(("spec", "selector"), selector,
                                   f"empty selector is invalid for {obj.get('kind', 'object').lower()}"))
        elif isinstance(spec.get("template"), dict):
            labels = template_labels if isinstance(template_labels, dict) else {}
            if not selector_matches(selector, labels):
                errors.append(FieldError("spec.template.metadata.labels",
                                         f"Invalid value: {json.dumps(labels, sort_keys=True)}: "
                                         "selector does not match template labels"))
    errors.extend(pod_spec_errors(dig(spec, "template", "spec"), ("spec", "template", "spec"),
                                   restart_policies=restart_policies, restart_required=restart_required))
    return errors


def _int_or_percent_errors(path: Path, value: Any) -> list[FieldError]:
    if isinstance(value, str) and not _PERCENT.fullmatch(value):
        return [invalid_value(path, value, "a valid percent string must be a numeric string followed by an "
                                      "ending '%' (e.g. '1%', or '93%')")]
    if isinstance(value, int) and not isinstance(value, bool) and value < 0:
        return [invalid_value(path, value, "must be greater than or equal to 0")]
    return []


def _is_zero(value: Any) -> bool:
    return value == 0 or value == "0%"


def _deployment_errors(obj: dict) -> list[FieldError]:
    errors = _workload_errors(obj, selector_required=True, restart_policies=("Always",))
    strategy = dig(obj, "spec", "strategy")
    if not isinstance(strategy, dict):
        return errors
    kind, rolling = strategy.get("type"), strategy.get("rollingUpdate")
    if isinstance(kind, str) and kind not in ("Recreate", "RollingUpdate"):
        errors.append(unsupported_value(("spec", "strategy", "type"), kind, ("Recreate", "RollingUpdate")))
    if kind == "Recreate" and rolling is not None:
        errors.append(FieldError("spec.strategy.rollingUpdate",
                                 "Forbidden: may not be specified when strategy `type` is 'Recreate'"))
    if isinstance(rolling, dict):
        path = ("spec", "strategy", "rollingUpdate")
        surge, unavailable = rolling.get("maxSurge"), rolling.get("maxUnavailable")
        errors.extend(_int_or_percent_errors((*path, "maxSurge"), surge))
        errors.extend(_int_or_percent_errors((*path, "maxUnavailable"), unavailable))
        if isinstance(unavailable, str) and _PERCENT.fullmatch(unavailable) and int(unavailable[:-1]) > 100:
            errors.append(invalid_value((*path, "maxUnavailable"), unavailable, "must not be greater than 100%"))
        if _is_zero(surge) and _is_zero(unavailable):
            errors.append(invalid_value((*path, "maxUnavailable"), unavailable, "may not be 0 when `maxSurge` is 0"))
    return errors


def _replicaset_errors(obj: dict) -> list[FieldError]:
    return _workload_errors(obj, selector_required=True, restart_policies=("Always",))


def _daemonset_errors(obj: dict) -> list[FieldError]:
    errors = _workload_errors(obj, selector_required=True, restart_policies=("Always",))
    kind = dig(obj, "spec", "updateStrategy", "type")
    if isinstance(kind, str) and kind not in ("OnDelete", "RollingUpdate"):
        errors.append(unsupported_value(("spec", "updateStrategy", "type"), kind, ("OnDelete", "RollingUpdate")))
    return errors


_JOB_RESTART = ("OnFailure", "Never")


def _job_spec_errors(spec: Any, path: Path) -> list[FieldError]:
    if not isinstance(spec, dict):
        return []
    errors = []
    for field in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
        value = spec.get(field)
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            errors.append(invalid_value((*path, field), value, "must be greater than or equal to 0"))
    errors.extend(pod_spec_errors(dig(spec, "template", "spec"), (*path, "template", "spec"),
                                   restart_policies=_JOB_RESTART, restart_required=True))
    labels = dig(spec, "template", "metadata", "labels")
    errors.extend(labels_errors((*path, "template", "metadata", "labels"), labels))
    return errors


_JOB_LABELS = (("controller-uid", "uid"), ("job-name", "name"),
               ("batch.kubernetes.io/controller-uid", "uid"), ("batch.kubernetes.io/job-name", "name"))


def _generated_selector_errors(obj: dict) -> list[FieldError]:
    """Kubernetes' validateGeneratedSelector: unless spec.manualSelector is true, a Job's pod
    template carries the labels made of its uid and name, and its selector is the generated one.

    Only for a stored-to-be Job (one with a uid) that has a selector: the API layer generates
    it on create (kctl.admission.defaults.generate_job_selector).
    """
    spec, meta = obj.get("spec"), obj.get("metadata")
    if not isinstance(spec, dict) or not isinstance(meta, dict) or spec.get("manualSelector") is True:
        return []
    selector, uid = spec.get("selector"), meta.get("uid")
    if not isinstance(selector, dict) or not isinstance(uid, str) or not uid:
        return []
    labels = dig(spec, "template", "metadata", "labels")
    labels = labels if isinstance(labels, dict) else {}
    expected = {key: meta.get(field) for key, field in _JOB_LABELS}
    errors: list[FieldError] = []
    for key, value in expected.items():
        path = ("spec", "template", "metadata", "labels", key)
        if key not in labels:
            errors.append(required_value(path, f"must be '{value}'"))
        elif labels[key] != value:
            errors.append(invalid_value(path, labels[key], f"must be '{value}'"))
    if not selector_errors(("spec", "selector"), selector) and not selector_matches(selector, expected):
        errors.append(FieldError("spec.selector", f"Invalid value: {json.dumps(selector, sort_keys=True)}: "
                                                  "`selector` not auto-generated (set spec.manualSelector: "
                                                  "true to choose your own)"))
    return errors


def _job_errors(obj: dict) -> list[FieldError]:
    errors = _job_spec_errors(obj.get("spec"), ("spec",))
    errors.extend(_generated_selector_errors(obj))
    spec = obj.get("spec")
    selector = dig(spec, "selector")
    if isinstance(selector, dict):
        errors.extend(selector_errors(("spec", "selector"), selector))
        labels = dig(spec, "template", "metadata", "labels")
        if not selector_matches(selector, labels if isinstance(labels, dict) else {}):
            errors.append(FieldError("spec.template.metadata.labels",
                                     f"Invalid value: {json.dumps(labels or {}, sort_keys=True)}: "
                                     "selector does not match template labels"))
    return errors


_CRON_MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_CRON_FIELD = re.compile(r"[0-9A-Za-z*?,/\-]+")


def _cronjob_errors(obj: dict) -> list[FieldError]:
    errors: list[FieldError] = []
    name = dig(obj, "metadata", "name")
    if isinstance(name, str) and len(name) > 52:
        errors.append(invalid_value(("metadata", "name"), name, "must be no more than 52 characters"))
    schedule = dig(obj, "spec", "schedule")
    if isinstance(schedule, str):
        text = schedule.strip()
        if text.startswith(("TZ=", "CRON_TZ=")):
            text = text.split(None, 1)[1] if " " in text else ""
        fields = text.split()
        valid = (text in _CRON_MACROS or text.startswith("@every ")
                 or (len(fields) == 5 and all(_CRON_FIELD.fullmatch(f) for f in fields)))
        if not valid:
            errors.append(invalid_value(("spec", "schedule"), schedule,
                                   "must be a cron schedule of 5 fields (minute hour day-of-month month "
                                   "day-of-week, e.g. '*/5 * * * *') or a macro such as @hourly"))
    policy = dig(obj, "spec", "concurrencyPolicy")
    if isinstance(policy, str) and policy not in ("Allow", "Forbid", "Replace"):
        errors.append(unsupported_value(("spec", "concurrencyPolicy"), policy, ("Allow", "Forbid", "Replace")))
    errors.extend(_job_spec_errors(dig(obj, "spec", "jobTemplate", "spec"), ("spec", "jobTemplate", "spec")))
    return errors


def _pod_errors(obj: dict) -> list[FieldError]:
    return pod_spec_errors(obj.get("spec"), ("spec",))


_SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")


def _service_errors(obj: dict) -> list[FieldError]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    errors = labels_errors(("spec", "selector"), spec.get("selector"))
    kind = spec.get("type")
    if isinstance(kind, str) and kind not in _SERVICE_TYPES:
        errors.append(unsupported_value(("spec", "type"), kind, _SERVICE_TYPES))
    ports = spec.get("ports") if isinstance(spec.get("ports"), list) else []
    names: set[str] = set()
    for i, port in enumerate(ports):
        if not isinstance(port, dict):
            continue
        path = ("spec", "ports", i)
        errors.extend(port_number_errors((*path, "port"), port.get("port")))
        errors.extend(port_number_errors((*path, "nodePort"), port.get("nodePort"), zero_ok=True))
        target = port.get("targetPort")
        if isinstance(target, str):
            errors.extend(name_errors((*path, "targetPort"), target, port_name_problems))
        else:
            errors.extend(port_number_errors((*path, "targetPort"), target, zero_ok=True))
        protocol = port.get("protocol")
        if isinstance(protocol, str) and protocol not in PROTOCOLS:
            errors.append(unsupported_value((*path, "protocol"), protocol, PROTOCOLS))
        name = port.get("name")
        if isinstance(name, str) and name:
            errors.extend(name_errors((*path, "name"), name, dns1123_label_problems))
            if name in names:
                errors.append(FieldError(join_path((*path, "name")), f"Duplicate value: {show_value(name)}"))
            names.add(name)
        elif len(ports) > 1:
            errors.append(required_value((*path, "name")))
    return errors


def _config_key_errors(obj: dict, *, base64_data: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: dict[str, str] = {}
    for field in ("data", "binaryData", "stringData"):
        values = obj.get(field)
        for key, value in (values.items() if isinstance(values, dict) else ()):
            if not isinstance(key, str):
                continue
            path = (field, key)
            if len(key) > 253:
                errors.append(invalid_value(path, key, "must be no more than 253 characters"))
            if not _CONFIG_KEY.fullmatch(key):
                errors.append(invalid_value(path, key, "a valid config key must consist of alphanumeric characters, "
                                                  "'-', '_' or '.' (e.g. 'key.name', or 'KEY_NAME', or 'key-name')"))
            if field != "stringData":
                if key in seen:
                    errors.append(invalid_value(path, key, f"duplicate of key present in {seen[key]}"))
                seen[key] = field
            encoded = field == "binaryData" or (field == "data" and base64_data)
            if encoded and isinstance(value, str):
                try:
                    base64.b64decode(value.replace("\n", "").replace("\r", ""), validate=True)
                except (binascii.Error, ValueError):
                    errors.append(FieldError(join_path(path), 'Invalid value: "<data>": must be base64-encoded'))
    return errors


def _configmap_errors(obj: dict) -> list[FieldError]:
    return _config_key_errors(obj, base64_data=False)


def _secret_errors(obj: dict) -> list[FieldError]:
    return _config_key_errors(obj, base64_data=True)


def _hook_errors(obj: dict) -> list[FieldError]:
    errors: list[FieldError] = []
    for field in ("namespaceSelector", "objectSelector"):
        errors.extend(selector_errors(("spec", field), dig(obj, "spec", field)))
    return errors


def _crd_errors(obj: dict) -> list[FieldError]:
    return validate_crd(obj)


KIND_CHECKS: dict[str, tuple[Callable[[dict], list[FieldError]], ...]] = {
    "Pod": (_pod_errors,),
    "Service": (_service_errors,),
    "ConfigMap": (_configmap_errors,),
    "Secret": (_secret_errors,),
    "Deployment.apps": (_deployment_errors,),
    "ReplicaSet.apps": (_replicaset_errors,),
    "DaemonSet.apps": (_daemonset_errors,),
    "Job.batch": (_job_errors,),
    "CronJob.batch": (_cronjob_errors,),
    "HorizontalPodAutoscaler.autoscaling": (hpa_errors,),
    "CustomResourceDefinition.apiextensions.k8s.io": (_crd_errors,),
    "MutatingAdmissionHook.kctl.io": (_hook_errors,),
    "ValidatingAdmissionHook.kctl.io": (_hook_errors,),
}
