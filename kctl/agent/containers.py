"""How a kctl Pod becomes Podman objects: names, labels and the runtime specs.

The pod logic calls `sandbox_spec` to create a pod's Podman pod (kctl.agent.sandbox) and
`container_spec` for each container it creates (kctl.agent.lifecycle); `spec_hash`, `pull_policy` and the
name helpers are also used there, by kctl.agent.status, and by `kctl logs`.

Names (Podman's are unique per host, so each carries the pod uid's first 8 characters):

    Podman pod          kctl_<namespace>_<pod>_<uid[:8]>
    container           kctl_<namespace>_<pod>_<uid[:8]>_<container>_<restart count>
    named volume        kctl_<namespace>_<pod>_<uid[:8]>_<volume>   (kctl.agent.volumes)

Every object carries the interface's labels (managed, pod uid/namespace/name; containers
also container name, kind init|app, spec hash, restart count) plus LABEL_IMAGE, the image
the container was made from as the Pod spec names it, so an image change is seen even when
Podman reports the image under a longer name.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import TYPE_CHECKING, Mapping

from kctl.agent.env import expand
from kctl.machinery.quantity import parse_quantity
from kctl.runtime.interface import (
    LABEL_CONTAINER,
    LABEL_CONTAINER_KIND,
    LABEL_MANAGED,
    LABEL_POD_NAME,
    LABEL_POD_NAMESPACE,
    LABEL_POD_UID,
    LABEL_RESTART,
    LABEL_SPEC_HASH,
    ContainerSpec,
    Mount,
    PodSandboxSpec,
    PortMapping,
)

if TYPE_CHECKING:
    from kctl.agent.poddns import PodDNS

#: the image of the Pod spec a container was made from (kctl's own, beside interface.LABEL_*)
LABEL_IMAGE = "io.kctl.container.image"
KIND_INIT = "init"
KIND_APP = "app"
HOSTNAME_MAX = 63


def _meta(pod: dict) -> dict:
    return pod.get("metadata") or {}


def pod_uid(pod: dict) -> str:
    return str(_meta(pod).get("uid", ""))


def sandbox_name(pod: dict) -> str:
    """kctl_<namespace>_<name>_<uid[:8]>: the Podman pod of a kctl Pod."""
    meta = _meta(pod)
    return f"kctl_{meta.get('namespace') or 'default'}_{meta.get('name', '')}_{pod_uid(pod)[:8]}"


def container_name(pod: dict, name: str, restart_count: int) -> str:
    """The Podman name of one instance of a container (unique: it carries the restart count)."""
    return f"{sandbox_name(pod)}_{name}_{restart_count}"


def pod_labels(pod: dict) -> dict[str, str]:
    """The labels that name a kctl Pod; on its Podman pod, containers and volumes."""
    meta = _meta(pod)
    return {LABEL_MANAGED: "true", LABEL_POD_UID: pod_uid(pod),
            LABEL_POD_NAMESPACE: str(meta.get("namespace") or "default"), LABEL_POD_NAME: str(meta.get("name", ""))}


def spec_hash(container: dict) -> str:
    """A stable hash of a container's spec (key order does not matter)."""
    text = json.dumps(container, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def pull_policy(container: dict) -> str:
    """imagePullPolicy, defaulted as the API server does (Always for :latest or no tag)."""
    policy = container.get("imagePullPolicy")
    if policy in ("Always", "IfNotPresent", "Never"):
        return str(policy)
    image = str(container.get("image", ""))
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.rpartition(":")[2] if ":" in last else "latest"
    return "Always" if tag == "latest" else "IfNotPresent"


# -- the Podman pod ------------------------------------------------------------------------------

def sandbox_spec(pod: dict, *, dns: PodDNS | None = None, network: str = "") -> PodSandboxSpec:
    """The Podman pod: hostname, every container's hostPort published, resolv.conf (dns: kctl.agent.poddns),
    the Podman network it joins (network: the pod network's, kctl.agent.podnetwork; "" Podman's default)."""
    spec = pod.get("spec") or {}
    hostname = str(spec.get("hostname") or _meta(pod).get("name", ""))[:HOSTNAME_MAX]
    return PodSandboxSpec(name=sandbox_name(pod), labels=pod_labels(pod), hostname=hostname,
                          port_mappings=host_ports(pod), network=network,
                          dns_servers=dns.servers if dns else (), dns_searches=dns.searches if dns else (),
                          dns_options=dns.options if dns else ())


def host_ports(pod: dict) -> tuple[PortMapping, ...]:
    """PortMappings of all containers' ports that have a hostPort (deduplicated, in order)."""
    spec = pod.get("spec") or {}
    seen: dict[tuple[int, str, str], PortMapping] = {}
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or ():
            for port in container.get("ports") or ():
                if not port.get("hostPort"):
                    continue
                mapping = PortMapping(container_port=int(port["containerPort"]), host_port=int(port["hostPort"]),
                                      protocol=str(port.get("protocol") or "TCP").upper(),
                                      host_ip=str(port.get("hostIP") or ""))
                seen.setdefault((mapping.host_port, mapping.protocol, mapping.host_ip), mapping)
    return tuple(seen.values())


# -- a container ---------------------------------------------------------------------------------

def container_labels(pod: dict, container: dict, *, kind: str, restart_count: int) -> dict[str, str]:
    return {**pod_labels(pod), LABEL_CONTAINER: str(container.get("name", "")), LABEL_CONTAINER_KIND: kind,
            LABEL_SPEC_HASH: spec_hash(container), LABEL_RESTART: str(restart_count),
            LABEL_IMAGE: str(container.get("image", ""))}


def container_spec(pod: dict, container: dict, *, kind: str, env: dict[str, str], mounts: tuple[Mount, ...],
                   restart_count: int) -> ContainerSpec:
    """The runtime spec of one instance of `container` (command and args expanded with env)."""
    security = _security(pod, container)
    resources = (container.get("resources") or {}).get("limits") or {}
    capabilities = security.get("capabilities") or {}
    return ContainerSpec(
        name=container_name(pod, str(container.get("name", "")), restart_count),
        image=str(container.get("image", "")),
        labels=container_labels(pod, container, kind=kind, restart_count=restart_count),
        entrypoint=_expanded(container.get("command"), env),
        command=_expanded(container.get("args"), env),
        env=dict(env),
        working_dir=container.get("workingDir") or None,
        mounts=mounts,
        cpu_limit_millis=_cpu_millis(resources.get("cpu")),
        memory_limit_bytes=_bytes(resources.get("memory")),
        user=_user(security),
        read_only_rootfs=bool(security.get("readOnlyRootFilesystem")),
        cap_add=tuple(str(c) for c in capabilities.get("add") or ()),
        cap_drop=tuple(str(c) for c in capabilities.get("drop") or ()),
        privileged=bool(security.get("privileged")),
        stdin=bool(container.get("stdin")),
        tty=bool(container.get("tty")),
    )


def _expanded(words: list | None, env: Mapping[str, str]) -> list[str] | None:
    if not words:
        return None
    return [expand(str(word), env) for word in words]


def _security(pod: dict, container: dict) -> dict:
    """The container's securityContext, with runAsUser/runAsGroup/runAsNonRoot from the pod's."""
    pod_context = (pod.get("spec") or {}).get("securityContext") or {}
    merged = {key: pod_context[key] for key in ("runAsUser", "runAsGroup", "runAsNonRoot") if key in pod_context}
    merged.update({k: v for k, v in (container.get("securityContext") or {}).items() if v is not None})
    return merged


def _user(security: Mapping[str, object]) -> str | None:
    """"uid" or "uid:gid"; a runAsGroup without runAsUser cannot be said to Podman and is dropped."""
    uid, gid = security.get("runAsUser"), security.get("runAsGroup")
    if uid is None:
        return None
    return f"{uid}:{gid}" if gid is not None else str(uid)


def security_error(pod: dict, container: dict) -> str | None:
    """The kubelet's refusal of a container that runAsNonRoot forbids, as far as the spec tells."""
    security = _security(pod, container)
    if security.get("runAsNonRoot") and security.get("runAsUser") == 0:
        return "container's runAsUser breaks non-root policy"
    return None


def _cpu_millis(value: object) -> int | None:
    if value is None:
        return None
    return math.ceil(parse_quantity(value) * 1000)  # type: ignore[arg-type]


def _bytes(value: object) -> int | None:
    if value is None:
        return None
    return math.ceil(parse_quantity(value))  # type: ignore[arg-type]


__all__ = ["KIND_APP", "KIND_INIT", "LABEL_IMAGE", "container_labels", "container_name", "container_spec",
           "host_ports", "pod_labels", "pod_uid", "pull_policy", "sandbox_name", "sandbox_spec",
           "security_error", "spec_hash"]
