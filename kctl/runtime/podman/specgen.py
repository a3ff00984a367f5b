"""Conversions between kctl's runtime specs and Podman's libpod documents (pure functions).

The runtime (kctl.runtime.podman.*) builds request bodies with these (a container's
SpecGenerator, a pod's port mappings, label filters, a pull's auth header) and reads
Podman's inspect documents back into kctl.runtime.interface's types.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
from typing import Any

from kctl.runtime.interface import LABEL_MANAGED, ContainerSpec, ContainerState, PodSandboxSpec, RegistryAuth
from kctl.runtime.podman.errors import one_line

CPU_PERIOD_US = 100_000          # CFS period; a limit of N millicores is a quota of N*100 µs
MIN_CPU_QUOTA_US = 1_000         # the kernel refuses smaller quotas
ZERO_TIME_PREFIX = "0001-01-01"  # Go's zero time: "never"
_TIMESTAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)?$")

_STATE_MAP = {
    "configured": "created",
    "created": "created",
    "initialized": "created",
    "running": "running",
    "paused": "running",
    "stopping": "running",
    "exited": "exited",
    "stopped": "exited",
    "removing": "exited",
    "dead": "exited",
    "unknown": "exited",
}


def rfc3339(value: str | None) -> str:
    """Podman's timestamp as RFC 3339 UTC to the second ("" for Go's zero time)."""
    match = _TIMESTAMP.match(value or "")
    if not match or match[1].startswith(ZERO_TIME_PREFIX):
        return ""
    offset = "+00:00" if match[2] in (None, "Z") else match[2]
    stamp = dt.datetime.fromisoformat(match[1] + offset)
    return stamp.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def container_state(inspect: dict[str, Any]) -> ContainerState:
    """A ContainerState from the libpod inspect document of a container."""
    state = inspect.get("State") or {}
    status = _STATE_MAP.get(str(state.get("Status", "unknown")).lower(), "exited")
    config = inspect.get("Config") or {}
    return ContainerState(
        id=inspect["Id"],
        name=inspect.get("Name", "").lstrip("/"),
        pod_id=inspect.get("Pod", "") or "",
        labels=dict(config.get("Labels") or {}),
        image=inspect.get("ImageName", "") or config.get("Image", ""),
        image_id=inspect.get("Image", ""),
        state=status,
        exit_code=int(state.get("ExitCode", 0)) if status == "exited" else None,
        oom_killed=bool(state.get("OOMKilled", False)),
        started_at=rfc3339(state.get("StartedAt")),
        finished_at=rfc3339(state.get("FinishedAt")) if status == "exited" else "",
        error=one_line(state.get("Error", "") or ""),
    )


def labels_match(have: dict[str, str] | None, want: dict[str, str]) -> bool:
    """True when every wanted label is present with the wanted value."""
    have = have or {}
    return all(have.get(key) == value for key, value in want.items())


def with_managed_label(labels: dict[str, str]) -> dict[str, str]:
    return {LABEL_MANAGED: "true", **labels}


def port_mappings(spec: PodSandboxSpec) -> list[dict[str, Any]]:
    """podman's portmappings for a pod sandbox."""
    mappings = []
    for port in spec.port_mappings:
        mapping: dict[str, Any] = {"container_port": port.container_port,
                                   "host_port": port.host_port,
                                   "protocol": port.protocol.lower()}
        if port.host_ip:
            mapping["host_ip"] = port.host_ip
        mappings.append(mapping)
    return mappings


def cpu_quota_us(millis: int) -> int:
    return max(MIN_CPU_QUOTA_US, millis * CPU_PERIOD_US // 1000)


def container_specgen(pod_id: str, spec: ContainerSpec, binds: dict[str, str]) -> dict[str, Any]:
    """The libpod create body (SpecGenerator) for a container of a pod.

    `binds` maps a mount's target to the host path bound there (host paths, and volumes
    mounted with a sub_path); other volume mounts are named-volume mounts. The working
    folder is created when the image lacks it, as Kubernetes runtimes do.
    """
    body: dict[str, Any] = {
        "image": spec.image, "name": spec.name, "pod": pod_id,
        "labels": with_managed_label(spec.labels), "env": dict(spec.env),
        "read_only_filesystem": spec.read_only_rootfs, "privileged": spec.privileged,
        "stdin": spec.stdin, "terminal": spec.tty,
        "volumes": [], "mounts": [],
    }
    optional = {"entrypoint": spec.entrypoint, "command": spec.command, "user": spec.user,
                "cap_add": list(spec.cap_add), "cap_drop": list(spec.cap_drop)}
    body.update({key: list(value) if isinstance(value, (list, tuple)) else value
                 for key, value in optional.items() if value is not None and value != []})
    if spec.working_dir:
        body.update(work_dir=spec.working_dir, create_working_dir=True)
    limits = _resource_limits(spec)
    if limits:
        body["resource_limits"] = limits
    for mount in spec.mounts:
        options = ["ro" if mount.read_only else "rw"]
        if mount.target in binds:
            body["mounts"].append({"type": "bind", "source": binds[mount.target],
                                   "destination": mount.target, "options": ["rbind", *options]})
        elif mount.volume:
            body["volumes"].append({"Name": mount.volume, "Dest": mount.target, "Options": options})
    return body


def _resource_limits(spec: ContainerSpec) -> dict[str, Any]:
    limits: dict[str, Any] = {}
    if spec.cpu_limit_millis:
        limits["cpu"] = {"period": CPU_PERIOD_US, "quota": cpu_quota_us(spec.cpu_limit_millis)}
    if spec.memory_limit_bytes:
        limits["memory"] = {"limit": spec.memory_limit_bytes}
    return limits


def registry_auth_header(auth: RegistryAuth) -> str:
    """The X-Registry-Auth header of a pull (podman-py's encode_auth_header): base64url JSON."""
    body = {"username": auth.username, "password": auth.password}
    if auth.registry:
        body["serveraddress"] = auth.registry
    return base64.urlsafe_b64encode(json.dumps(body).encode()).decode()


def saved_name(tags: list[str], ref: str) -> str:
    """The name to save an image under for `ref`: ref itself, the tag a short ref stands for
    (busybox:demo for localhost/busybox:demo), else the image's first tag; "" when it has none."""
    if ref in tags:
        return ref
    last = ref.rsplit("/", 1)[-1]
    wanted = ref if ":" in last or "@" in ref else f"{ref}:latest"
    for tag in tags:
        if tag == wanted or tag.endswith("/" + wanted):
            return tag
    return tags[0] if tags else ""


def label_filters(labels: dict[str, str]) -> dict[str, str]:
    """Query parameters that filter by labels server-side (we check again client-side)."""
    if not labels:
        return {}
    criteria: dict[str, list[str]] = {"label": [f"{key}={value}" for key, value in sorted(labels.items())]}
    return {"filters": json.dumps(criteria)}


def infra_running(pod: dict[str, Any]) -> bool:
    """Whether a listed pod's infra container runs (its IP exists only then)."""
    infra = pod.get("InfraId", "")
    for container in pod.get("Containers") or []:
        if container.get("Id") == infra:
            return str(container.get("Status", "")).lower() == "running"
    return str(pod.get("Status", "")).lower() in ("running", "degraded")


__all__ = ["container_specgen", "container_state", "cpu_quota_us", "infra_running", "label_filters", "labels_match",
           "port_mappings", "registry_auth_header", "rfc3339", "saved_name", "with_managed_label"]
