"""Pod sandboxes on Podman: one kctl Pod is one Podman pod (its infra container holds the network).

A part of PodmanRuntime (kctl.runtime.podman.runtime), called by the node agent through the
Runtime interface: list, create (and start, so the pod has its IP when returned), remove.
A pod made here names its infra container `<pod name>-infra` (INFRA_SUFFIX), so the IP is
one inspect of that name after the start (not a pod inspect for the infra's id first).
"""

from __future__ import annotations

import contextlib
from typing import Any

from podman import errors as podman_errors

from kctl.runtime.interface import PodSandbox, PodSandboxSpec, RuntimeError_
from kctl.runtime.podman.connection import ServiceCalls
from kctl.runtime.podman.errors import calling, one_line
from kctl.runtime.podman.specgen import infra_running, label_filters, labels_match, port_mappings, with_managed_label

INFRA_SUFFIX = "-infra"  # the infra container of pod NAME is NAME-infra (Podman's default: <pod id[:12]>-infra)


class PodSandboxes(ServiceCalls):
    """The pod calls of PodmanRuntime."""

    def list_pods(self, labels: dict[str, str]) -> list[PodSandbox]:
        with calling("list pods"):
            pods = self._get("/pods/json", params=label_filters(labels)) or []
        result = []
        for pod in pods:
            if labels_match(pod.get("Labels"), labels):
                running = infra_running(pod)
                ip = self._infra_ip(pod.get("InfraId", "")) if running else ""
                result.append(PodSandbox(id=pod["Id"], name=pod.get("Name", ""),
                                         labels=dict(pod.get("Labels") or {}),
                                         running=running, ip=ip))
        return result

    def create_pod(self, spec: PodSandboxSpec) -> PodSandbox:
        """Create the pod and start its infra container, so it has its IP when returned."""
        labels = with_managed_label(spec.labels)
        infra_name = spec.name + INFRA_SUFFIX
        body: dict[str, Any] = {"name": spec.name, "labels": labels, "infra_name": infra_name,
                                "portmappings": port_mappings(spec)}
        if spec.hostname:
            body["hostname"] = spec.hostname
        if spec.network:  # a named network (the pod network's bridge) instead of Podman's default
            body["netns"], body["Networks"] = {"nsmode": "bridge"}, {spec.network: {}}
        # the pod's resolv.conf (PodSpecGenerator's PodNetworkConfig); a field left out is the host's
        for key, values in (("dns_server", spec.dns_servers), ("dns_search", spec.dns_searches),
                            ("dns_option", spec.dns_options)):
            if values:
                body[key] = list(values)
        with calling(f"create pod {spec.name}"):
            pod_id = self._post("/pods/create", body=body).json()["Id"]
        try:
            with calling(f"start pod {spec.name}"):
                self._start_pod(pod_id, spec.name)
            ip = self._infra_ip(infra_name)
        except RuntimeError_:
            with contextlib.suppress(RuntimeError_):
                self.remove_pod(pod_id)
            raise
        return PodSandbox(id=pod_id, name=spec.name, labels=labels, running=True, ip=ip)

    def _start_pod(self, pod_id: str, name: str) -> None:
        """Start the pod; its errors come as a list ("Errs"), the first one is reported."""
        response = self._api().post(f"/pods/{pod_id}/start")
        if response.status_code == 304:
            return
        with contextlib.suppress(ValueError, AttributeError):
            errors = (response.json() or {}).get("Errs") or []
            if errors:
                raise RuntimeError_(f"start pod {name}: {one_line(str(errors[0]))}")
        response.raise_for_status()

    def _infra_ip(self, infra_id: str) -> str:
        if not infra_id:
            return ""
        with contextlib.suppress(RuntimeError_), calling("inspect infra container"):
            settings = self._get(f"/containers/{infra_id}/json").get("NetworkSettings") or {}
            for network in (settings.get("Networks") or {}).values():
                if network.get("IPAddress"):
                    return str(network["IPAddress"])
            return str(settings.get("IPAddress", "") or "")
        return ""

    def remove_pod(self, pod_id: str) -> None:
        """Kill (SIGKILL) and remove the pod with its containers; a missing pod is fine.

        Killing first makes removal take about 0.2 s instead of each container's stop
        timeout (10 s by default).
        """
        with calling(f"remove pod {pod_id[:12]}"):
            with contextlib.suppress(podman_errors.APIError):
                self._api().post(f"/pods/{pod_id}/kill", params={"signal": "SIGKILL"})
            self._delete(f"/pods/{pod_id}", params={"force": True})


__all__ = ["INFRA_SUFFIX", "PodSandboxes"]
