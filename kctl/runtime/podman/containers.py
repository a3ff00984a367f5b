"""Containers on Podman: create in a pod, start, stop, remove, inspect, and files written into one.

A part of PodmanRuntime (kctl.runtime.podman.runtime), called by the node agent through the
Runtime interface. Bodies come from kctl.runtime.podman.specgen, archives from
kctl.runtime.podman.files.
"""

from __future__ import annotations

import contextlib
import time
from typing import Callable, TypeVar

from podman import errors as podman_errors

from kctl.runtime.interface import ContainerSpec, ContainerState, Mount, NotFoundInRuntime, RuntimeError_
from kctl.runtime.podman.connection import ServiceCalls
from kctl.runtime.podman.errors import calling, one_line
from kctl.runtime.podman.files import files_tar, safe_join
from kctl.runtime.podman.specgen import container_specgen, container_state, label_filters, labels_match

T = TypeVar("T")
STOP_HTTP_SLACK = 15.0           # seconds a stop call may take beyond its own timeout
#: Podman's inspect races a container's exit: it reads /proc/<pid>/cgroup of a process that has just ended and
#: answers 500 "... /cgroup: no such process" (seen by a fresh-clone run); asked again a moment later, it reports
#: the exit. Inspect asks up to INSPECT_ATTEMPTS times, EXIT_RACE_PAUSE seconds apart, for that answer only.
EXIT_RACE = "/cgroup: no such process"
INSPECT_ATTEMPTS = 3
EXIT_RACE_PAUSE = 0.1
#: Podman's archive copy into a container ran its copier subprocess, which ended before taking the files: 500
#: "passing bulk input to subprocess: write |1: broken pipe" (seen by a fresh-clone run, a created container
#: under load). The same files are put again, up to INSPECT_ATTEMPTS times, for that answer only.
COPY_RACE = "passing bulk input to subprocess"


class Containers(ServiceCalls):
    """The container calls of PodmanRuntime."""

    def list_containers(self, labels: dict[str, str]) -> list[ContainerState]:
        """Containers (not pods' infra containers) carrying all the labels, inspected."""
        with calling("list containers"):
            listed = self._get("/containers/json", params={"all": True, **label_filters(labels)}) or []
        result = []
        for entry in listed:
            if entry.get("IsInfra") or not labels_match(entry.get("Labels"), labels):
                continue
            with contextlib.suppress(NotFoundInRuntime):
                result.append(self.inspect_container(entry["Id"]))
        return result

    def create_container(self, pod_id: str, spec: ContainerSpec, *, warnings: list[str] | None = None) -> str:
        """Create the container; Podman's warnings (settings it ignores) are appended to `warnings`.

        Rootless Podman on cgroup v1, for one, creates the container but drops its
        resource limits, and says so only in the response's "Warnings".
        """
        with calling(f"create container {spec.name}"):
            binds = {mount.target: self._bind_source(mount) for mount in spec.mounts
                     if mount.host_path or mount.sub_path}
            body = container_specgen(pod_id, spec, binds)
            created = self._post("/containers/create", body=body).json()
            if warnings is not None:
                warnings.extend(one_line(str(text)) for text in created.get("Warnings") or ())
            return str(created["Id"])

    def _bind_source(self, mount: Mount) -> str:
        """The host path bound for a host-path mount, or for a volume's sub_path."""
        if mount.volume:
            base = self._get(f"/volumes/{mount.volume}/json")["Mountpoint"]
        elif mount.host_path:
            base = mount.host_path
        else:
            raise ValueError(f"mount at {mount.target} names neither a volume nor a host path")
        return safe_join(base, mount.sub_path) if mount.sub_path else base

    def start_container(self, container_id: str) -> None:
        with calling(f"start container {container_id[:12]}"):
            self._post(f"/containers/{container_id}/start")

    def stop_container(self, container_id: str, *, timeout: int) -> None:
        """SIGTERM (or the image's stop signal), SIGKILL after `timeout` s; stopped is fine."""
        with calling(f"stop container {container_id[:12]}"):
            self._post(f"/containers/{container_id}/stop", params={"timeout": max(0, int(timeout))},
                       timeout=max(0, timeout) + STOP_HTTP_SLACK)

    def remove_container(self, container_id: str) -> None:
        """Kill (SIGKILL) and remove with its anonymous volumes; missing is fine.

        Podman's own force-removal first waits the stop timeout (10 s) for SIGTERM.
        """
        with calling(f"remove container {container_id[:12]}"):
            with contextlib.suppress(podman_errors.APIError):
                self._api().post(f"/containers/{container_id}/kill", params={"signal": "SIGKILL"})
            self._delete(f"/containers/{container_id}", params={"force": True, "v": True})

    def inspect_container(self, container_id: str) -> ContainerState:
        return _asking_again(f"inspect container {container_id[:12]}", EXIT_RACE,
                             lambda: container_state(self._get(f"/containers/{container_id}/json")))

    def write_files(self, container_id: str, directory: str, files: dict[str, tuple[bytes, int]]) -> None:
        """Put files (relative path -> (content, mode)) under directory in a created or running container."""
        def put() -> None:
            response = self._api().put(f"/containers/{container_id}/archive",
                                       params={"path": directory}, data=files_tar(files))
            response.raise_for_status()

        _asking_again(f"write files to {directory} in container {container_id[:12]}", COPY_RACE, put)


def _asking_again(what: str, transient: str, call: Callable[[], T]) -> T:
    """call() as `what`, again (INSPECT_ATTEMPTS in all, EXIT_RACE_PAUSE apart) while Podman answers `transient`."""
    for attempt in range(1, INSPECT_ATTEMPTS + 1):
        try:
            with calling(what):
                return call()
        except RuntimeError_ as error:
            if transient not in str(error) or attempt == INSPECT_ATTEMPTS:
                raise
            time.sleep(EXIT_RACE_PAUSE)
    raise AssertionError("unreachable")


__all__ = ["Containers"]
