"""Kubernetes' ValidatePodSpec, the parts users run into: volumes, containers, ports, resources.

Called by the per-kind checks (kinds.py) for a Pod's spec and for the pod template of
Deployments, ReplicaSets, DaemonSets, Jobs and CronJobs.
"""

from __future__ import annotations

from typing import Any

from kctl.admission.validation.fields import (Path, dig, invalid_value, join_path, required_value, show_value,
                                              unsupported_value)
from kctl.admission.validation.file_modes import file_mode_errors
from kctl.admission.validation.names import dns1123_label_problems, name_errors, port_name_problems
from kctl.machinery.errors import FieldError
from kctl.machinery.quantity import is_quantity, parse_quantity


PROTOCOLS = ("SCTP", "TCP", "UDP")


def port_number_errors(path: Path, value: Any, *, zero_ok: bool = False) -> list[FieldError]:
    """A port number outside 1..65535 (0 allowed where `zero_ok`, meaning unset)."""
    if isinstance(value, bool) or not isinstance(value, int) or (zero_ok and value == 0):
        return []
    if 1 <= value <= 65535:
        return []
    return [invalid_value(path, value, "must be between 1 and 65535, inclusive")]


def pod_spec_errors(spec: Any, path: Path, *, restart_policies: tuple[str, ...] | None = None,
                     restart_required: bool = False) -> list[FieldError]:
    """Kubernetes' ValidatePodSpec, the parts users run into."""
    if not isinstance(spec, dict):
        return []
    errors: list[FieldError] = []
    volumes = spec.get("volumes") if isinstance(spec.get("volumes"), list) else []
    volume_names: set[str] = set()
    for i, volume in enumerate(volumes):
        errors.extend(file_mode_errors(volume, (*path, "volumes", i)))
        name = dig(volume, "name")
        if isinstance(name, str) and name:
            errors.extend(name_errors((*path, "volumes", i, "name"), name, dns1123_label_problems))
            if name in volume_names:
                errors.append(FieldError(join_path((*path, "volumes", i, "name")),
                                         f"Duplicate value: {show_value(name)}"))
            volume_names.add(name)

    containers = spec.get("containers")
    if not containers:
        errors.append(required_value((*path, "containers")))
    container_names: set[str] = set()
    port_names: set[str] = set()
    for field in ("initContainers", "containers", "ephemeralContainers"):
        items = spec.get(field)
        for i, container in enumerate(items if isinstance(items, list) else ()):
            if isinstance(container, dict):
                errors.extend(_container_errors(container, (*path, field, i), container_names, port_names,
                                                volume_names, check_image=field != "ephemeralContainers"))

    policy = spec.get("restartPolicy")
    policies = restart_policies or ("Always", "OnFailure", "Never")
    if isinstance(policy, str):
        if policy not in policies:
            errors.append(unsupported_value((*path, "restartPolicy"), policy, policies))
    elif policy is None and restart_required:
        errors.append(required_value((*path, "restartPolicy"),
                                "valid values: " + ", ".join(show_value(p) for p in policies)))
    return errors


def _container_errors(container: dict, path: Path, container_names: set[str], port_names: set[str],
                      volume_names: set[str], *, check_image: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    name = container.get("name")
    if name == "":
        errors.append(required_value((*path, "name")))
    elif isinstance(name, str):
        errors.extend(name_errors((*path, "name"), name, dns1123_label_problems))
        if name in container_names:
            errors.append(FieldError(join_path((*path, "name")), f"Duplicate value: {show_value(name)}"))
        container_names.add(name)
    if check_image and not container.get("image"):
        errors.append(required_value((*path, "image")))

    ports = container.get("ports")
    for j, port in enumerate(ports if isinstance(ports, list) else ()):
        if not isinstance(port, dict):
            continue
        where = (*path, "ports", j)
        errors.extend(port_number_errors((*where, "containerPort"), port.get("containerPort")))
        errors.extend(port_number_errors((*where, "hostPort"), port.get("hostPort"), zero_ok=True))
        protocol = port.get("protocol")
        if isinstance(protocol, str) and protocol not in PROTOCOLS:
            errors.append(unsupported_value((*where, "protocol"), protocol, PROTOCOLS))
        port_name = port.get("name")
        if isinstance(port_name, str) and port_name:
            errors.extend(name_errors((*where, "name"), port_name, port_name_problems))
            if port_name in port_names:
                errors.append(FieldError(join_path((*where, "name")), f"Duplicate value: {show_value(port_name)}"))
            port_names.add(port_name)

    mounts = container.get("volumeMounts")
    for j, mount in enumerate(mounts if isinstance(mounts, list) else ()):
        mount_name = dig(mount, "name")
        if isinstance(mount_name, str) and mount_name not in volume_names:
            errors.append(FieldError(join_path((*path, "volumeMounts", j, "name")),
                                     f"Not found: {show_value(mount_name)}"))

    resources = container.get("resources")
    if isinstance(resources, dict):
        errors.extend(_resources_errors(resources, (*path, "resources")))
    return errors


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _resources_errors(resources: dict, path: Path) -> list[FieldError]:
    errors: list[FieldError] = []
    limits = resources.get("limits") if isinstance(resources.get("limits"), dict) else {}
    requests = resources.get("requests") if isinstance(resources.get("requests"), dict) else {}
    for field, values in (("limits", limits), ("requests", requests)):
        for name, value in values.items():
            maybe_negative = value.startswith("-") if isinstance(value, str) else _is_number(value) and value < 0
            if maybe_negative and is_quantity(value) and parse_quantity(value) < 0:
                errors.append(invalid_value((*path, field, name), value, "must be greater than or equal to 0"))
    for name, request in requests.items():
        limit = limits.get(name)
        if limit is None or request is None or request == limit or not (is_quantity(request) and is_quantity(limit)):
            continue
        if parse_quantity(request) > parse_quantity(limit):
            errors.append(invalid_value((*path, "requests"), request,
                                   f"must be less than or equal to {name} limit of {limit}"))
    return errors
