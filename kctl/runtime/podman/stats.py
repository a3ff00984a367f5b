"""Usage samples from Podman: containers' (libpod stats API) and the host's (/proc), for the metrics scraper.

A part of PodmanRuntime (kctl.runtime.podman.runtime), called by kctl.agent.metrics through
the Runtime interface. `container_stats(labels)` makes two calls whatever the number of
containers: the running containers carrying the labels (`/containers/json`, for their labels)
and one `/containers/stats?stream=false` of every running container (naming containers there
would fail the whole call when one of them stops in between). Podman 4.3 answers
`{"Error": null, "Stats": [{"ContainerID", "CPUNano" (cumulative CPU time), "MemUsage" (bytes),
"SystemNano" (the host's clock, ns since the epoch), ...}]}`.

`host_stats()` reads /proc/stat and /proc/meminfo on the runtime's host with one command
(`run_on_host`: locally, or over the runtime's SSH connection). Podman's /info has only
since-boot CPU percentages and free (not available) memory, so /proc it is. The pure parsers
(`parse_container_stats`, `parse_host_stats`) are what the unit tests check.
"""

from __future__ import annotations

import time
from typing import Any

from kctl.runtime.interface import ContainerStats, ExecResult, HostStats, RuntimeError_
from kctl.runtime.podman.connection import ServiceCalls
from kctl.runtime.podman.errors import calling, one_line
from kctl.runtime.podman.specgen import label_filters, labels_match

#: the kernel's clock ticks per second in /proc/stat (USER_HZ: 100 on every Linux architecture kctl runs on)
USER_HZ = 100
#: /proc/stat's `cpu` fields that count busy time (idle and iowait do not): user nice system _ _ irq softirq steal
BUSY_FIELDS = (0, 1, 2, 5, 6, 7)
HOST_STATS_COMMAND = ["cat", "/proc/stat", "/proc/meminfo"]


def parse_container_stats(payload: Any, listed: list[dict[str, Any]]) -> list[ContainerStats]:
    """Podman's stats answer joined with the listed containers (their labels), in the listing's order.

    A listed container absent from the answer (it stopped in between) is left out; an answer
    that carries an error and no stats raises RuntimeError_.
    """
    if not isinstance(payload, dict):
        raise RuntimeError_(f"container stats: unexpected answer {str(payload)[:80]!r}")
    stats = payload.get("Stats")
    if stats is None and payload.get("Error"):
        raise RuntimeError_(f"container stats: {one_line(str(payload['Error']))}")
    by_id = {str(entry.get("ContainerID", "")): entry for entry in stats or () if isinstance(entry, dict)}
    result = []
    for container in listed:
        entry = by_id.get(str(container.get("Id", "")))
        if entry is None:
            continue
        system_nano = entry.get("SystemNano") or 0
        result.append(ContainerStats(
            id=str(container["Id"]), cpu_nanos=int(entry.get("CPUNano") or 0),
            memory_bytes=int(entry.get("MemUsage") or 0),
            timestamp=system_nano / 1e9 if system_nano else time.time(),
            labels=dict(container.get("Labels") or {})))
    return result


def parse_host_stats(text: str, *, timestamp: float) -> HostStats:
    """The busy CPU time (all CPUs) of /proc/stat's `cpu` line and MemTotal - MemAvailable of /proc/meminfo."""
    busy_ticks: int | None = None
    memory: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "cpu" and busy_ticks is None:
            values = [int(value) for value in fields[1:]]
            busy_ticks = sum(values[i] for i in BUSY_FIELDS if i < len(values))
        elif fields[0] in ("MemTotal:", "MemAvailable:") and len(fields) >= 2:
            unit = 1024 if len(fields) > 2 and fields[2].lower() == "kb" else 1
            memory[fields[0][:-1]] = int(fields[1]) * unit
    if busy_ticks is None or "MemTotal" not in memory or "MemAvailable" not in memory:
        raise RuntimeError_("host stats: /proc/stat or /proc/meminfo lacks the cpu, MemTotal or MemAvailable line")
    return HostStats(cpu_nanos=busy_ticks * (1_000_000_000 // USER_HZ),
                     memory_used_bytes=max(0, memory["MemTotal"] - memory["MemAvailable"]), timestamp=timestamp)


class Stats(ServiceCalls):
    """The usage calls of PodmanRuntime."""

    def container_stats(self, labels: dict[str, str]) -> list[ContainerStats]:
        """One sample of every running container (not pods' infra containers) carrying all the labels."""
        with calling("list containers"):
            listed = [entry for entry in self._get("/containers/json", params=label_filters(labels)) or ()
                      if not entry.get("IsInfra") and labels_match(entry.get("Labels"), labels)]
        if not listed:
            return []
        with calling("container stats"):
            payload = self._get("/containers/stats", params={"stream": False})
        return parse_container_stats(payload, listed)

    def host_stats(self) -> HostStats:
        """One sample of the host: /proc/stat and /proc/meminfo read by one command on it."""
        result: ExecResult = self.run_on_host(HOST_STATS_COMMAND, timeout=self._timeout)  # type: ignore[attr-defined]
        if result.exit_code != 0:
            detail = one_line(result.stderr.decode(errors="replace")) or f"exit status {result.exit_code}"
            raise RuntimeError_(f"host stats: {' '.join(HOST_STATS_COMMAND)}: {detail}")
        with calling("host stats"):
            return parse_host_stats(result.stdout.decode(errors="replace"), timestamp=time.time())


__all__ = ["HOST_STATS_COMMAND", "Stats", "parse_container_stats", "parse_host_stats"]
