"""Startup, liveness and readiness probes of the node agent, as the kubelet's prober.

kctl.agent.containersync calls `ProbeManager.check` for each running app container on every
sync (the node agent re-syncs pods with probes about once a second); the manager keeps,
per container instance, when each probe last ran and its consecutive successes and
failures, and says when `failureThreshold` is reached. kctl.agent.status asks `started`
and `ready` for containerStatuses and the Ready condition. One manager serves all the
pods of a node agent; it is thread-safe.

Rules, as Kubernetes: a probe first runs `initialDelaySeconds` after the container was
first seen running, then every `periodSeconds`; liveness and readiness wait until the
startup probe has succeeded; a container is ready only after `successThreshold`
successes of its readiness probe (ready from the start when it has none); startup or
liveness failing `failureThreshold` times in a row gets the container killed.

Handlers: exec runs through `Runtime.exec` (with `timeoutSeconds`). httpGet and tcpSocket
are made from the agent's process to the pod IP (200-399 is success). For a remote host
(`remote=True`, or no pod IP known) the pod IP cannot be reached from the agent's
machine, so they run inside the container instead: `wget -q -O /dev/null URL` and
`nc -z -w N 127.0.0.1 PORT` (falling back to plain `nc -w N` for busybox, which lacks
-z). Remote http/tcp probes therefore need wget / nc (and sh) in the image; exec probes
always work. grpc probes are not supported: they count as successes, with a message.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Mapping

from kctl.runtime.interface import Runtime, RuntimeError_

STARTUP, LIVENESS, READINESS = "startup", "liveness", "readiness"
PROBE_FIELDS = {STARTUP: "startupProbe", LIVENESS: "livenessProbe", READINESS: "readinessProbe"}
MESSAGE_MAX = 256


@dataclass
class _ProbeState:
    successes: int = 0
    failures: int = 0
    last_run: float | None = None
    verdict: bool = False
    message: str = ""


@dataclass
class _ContainerProbes:
    container_id: str
    since: float
    states: dict[str, _ProbeState] = field(default_factory=dict)


@dataclass(frozen=True)
class ProbeOutcome:
    """One probe run: `kill` when startup/liveness reached its failureThreshold."""

    kind: str  # startup | liveness | readiness
    ok: bool
    message: str
    kill: bool = False

    @property
    def title(self) -> str:
        return self.kind.capitalize()


def _settings(probe: Mapping[str, object]) -> tuple[float, float, int, int, float]:
    """(initialDelay, period, successThreshold, failureThreshold, timeout) with Kubernetes' defaults."""
    def number(key: str, default: float) -> float:
        value = probe.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default
    return (number("initialDelaySeconds", 0), max(1.0, number("periodSeconds", 10)),
            max(1, int(number("successThreshold", 1))), max(1, int(number("failureThreshold", 3))),
            max(1.0, number("timeoutSeconds", 1)))


class ProbeManager:
    """Probe state of every container instance of a node (see the module docstring)."""

    def __init__(self) -> None:
        self._containers: dict[tuple[str, str], _ContainerProbes] = {}
        self._lock = threading.Lock()

    # -- bookkeeping ----------------------------------------------------------------------

    def _entry(self, pod_uid: str, name: str, container_id: str, now: float) -> _ContainerProbes:
        """The state of this container instance; a new instance starts afresh."""
        entry = self._containers.get((pod_uid, name))
        if entry is None or entry.container_id != container_id:
            entry = _ContainerProbes(container_id=container_id, since=now)
            self._containers[(pod_uid, name)] = entry
        return entry

    def observe(self, pod_uid: str, name: str, container_id: str, now: float) -> None:
        """The instance `container_id` is running: its initial delays count from the first call."""
        with self._lock:
            self._entry(pod_uid, name, container_id, now)

    def _known(self, pod_uid: str, name: str, container_id: str) -> _ContainerProbes | None:
        entry = self._containers.get((pod_uid, name))
        return entry if entry is not None and entry.container_id == container_id else None

    def started(self, pod_uid: str, container: dict, container_id: str) -> bool:
        """Whether the startup probe succeeded (true without one)."""
        if not container.get(PROBE_FIELDS[STARTUP]):
            return True
        with self._lock:
            entry = self._known(pod_uid, str(container.get("name", "")), container_id)
            return bool(entry and entry.states.get(STARTUP, _ProbeState()).verdict)

    def ready(self, pod_uid: str, container: dict, container_id: str) -> bool:
        """Whether the container passes readiness (started, and readiness succeeded if it has one)."""
        if not self.started(pod_uid, container, container_id):
            return False
        if not container.get(PROBE_FIELDS[READINESS]):
            return True
        with self._lock:
            entry = self._known(pod_uid, str(container.get("name", "")), container_id)
            return bool(entry and entry.states.get(READINESS, _ProbeState()).verdict)

    def forget(self, pod_uid: str, *, name: str | None = None) -> None:
        """Drop the state of a pod's containers (or of one)."""
        with self._lock:
            for key in [k for k in self._containers if k[0] == pod_uid and (name is None or k[1] == name)]:
                del self._containers[key]

    # -- scheduling -----------------------------------------------------------------------

    def due(self, pod: dict, container: dict, now: float, *, container_id: str) -> list[str]:
        """The probe kinds to run now for this running instance, startup first."""
        uid, name = str(pod["metadata"]["uid"]), str(container.get("name", ""))
        with self._lock:
            entry = self._entry(uid, name, container_id, now)
            return [kind for kind in self._kinds(container, entry) if self._is_due(container, entry, kind, now)]

    def _kinds(self, container: dict, entry: _ContainerProbes) -> list[str]:
        """Kinds that may run: only startup until it succeeded."""
        if container.get(PROBE_FIELDS[STARTUP]) and not entry.states.get(STARTUP, _ProbeState()).verdict:
            return [STARTUP]
        return [kind for kind in (LIVENESS, READINESS) if container.get(PROBE_FIELDS[kind])]

    @staticmethod
    def _is_due(container: dict, entry: _ContainerProbes, kind: str, now: float) -> bool:
        initial, period, _, _, _ = _settings(container[PROBE_FIELDS[kind]])
        state = entry.states.get(kind)
        if state is None or state.last_run is None:
            return now >= entry.since + initial
        return now >= state.last_run + period

    def next_due(self, pod: dict, containers: Mapping[str, str], now: float) -> float | None:
        """Seconds until the next probe of the pod is due; containers maps name -> running instance id."""
        uid = str(pod["metadata"]["uid"])
        waits: list[float] = []
        with self._lock:
            for container in (pod.get("spec") or {}).get("containers") or ():
                name = str(container.get("name", ""))
                entry = self._known(uid, name, containers.get(name, ""))
                if entry is None:
                    continue
                for kind in self._kinds(container, entry):
                    initial, period, _, _, _ = _settings(container[PROBE_FIELDS[kind]])
                    state = entry.states.get(kind)
                    at = entry.since + initial if state is None or state.last_run is None else state.last_run + period
                    waits.append(max(0.0, at - now))
        return min(waits) if waits else None

    def record(self, pod_uid: str, container: dict, kind: str, ok: bool, message: str, now: float, *,
               container_id: str) -> ProbeOutcome:
        """Count one result; the outcome says whether the container must be killed."""
        _, _, success_threshold, failure_threshold, _ = _settings(container[PROBE_FIELDS[kind]])
        with self._lock:
            entry = self._entry(pod_uid, str(container.get("name", "")), container_id, now)
            state = entry.states.setdefault(kind, _ProbeState(verdict=(kind == LIVENESS)))
            state.last_run, state.message = now, message
            if ok:
                state.successes, state.failures = state.successes + 1, 0
                if state.successes >= (success_threshold if kind == READINESS else 1):
                    state.verdict = True
                return ProbeOutcome(kind=kind, ok=True, message=message)
            state.failures, state.successes = state.failures + 1, 0
            if state.failures < failure_threshold:
                return ProbeOutcome(kind=kind, ok=False, message=message)
            state.verdict = False
            kill = kind in (STARTUP, LIVENESS)
            if kill:
                state.failures = 0
            return ProbeOutcome(kind=kind, ok=False, message=message, kill=kill)

    def check(self, pod: dict, container: dict, *, runtime: Runtime, container_id: str, pod_ip: str,
              host_ip: str, now: float, remote: bool = False) -> list[ProbeOutcome]:
        """Run the probes due now for a running instance and record them; stops at a kill."""
        outcomes = []
        uid = str(pod["metadata"]["uid"])
        for kind in self.due(pod, container, now, container_id=container_id):
            ok, message = self.run(container[PROBE_FIELDS[kind]], runtime=runtime, container_id=container_id,
                                   pod_ip=pod_ip, host_ip=host_ip, remote=remote, ports=named_ports(container))
            outcome = self.record(uid, container, kind, ok, message, now, container_id=container_id)
            outcomes.append(outcome)
            if outcome.kill:
                break
        return outcomes

    # -- running one probe ----------------------------------------------------------------

    def run(self, probe: dict, *, runtime: Runtime, container_id: str, pod_ip: str, host_ip: str,
            remote: bool = False, ports: Mapping[str, int] | None = None) -> tuple[bool, str]:
        """Run one probe (or lifecycle hook) handler: (success, message)."""
        _, _, _, _, timeout = _settings(probe)
        try:
            if isinstance(probe.get("exec"), dict):
                return _run_exec(runtime, container_id, [str(a) for a in probe["exec"].get("command") or ()],
                                 timeout)
            if isinstance(probe.get("httpGet"), dict):
                return _run_http(probe["httpGet"], runtime=runtime, container_id=container_id, pod_ip=pod_ip,
                                 remote=remote, ports=ports or {}, timeout=timeout)
            if isinstance(probe.get("tcpSocket"), dict):
                return _run_tcp(probe["tcpSocket"], runtime=runtime, container_id=container_id, pod_ip=pod_ip,
                                remote=remote, ports=ports or {}, timeout=timeout)
        except (ValueError, RuntimeError_) as error:
            return False, _short(str(error))
        if isinstance(probe.get("grpc"), dict):
            return True, "grpc probes are not supported by kctl: counted as success"
        return False, "the probe has no exec, httpGet or tcpSocket handler"


def named_ports(container: dict) -> dict[str, int]:
    """The container's named ports (name -> containerPort), for probes that name a port."""
    return {str(p["name"]): int(p["containerPort"]) for p in container.get("ports") or ()
            if p.get("name") and p.get("containerPort")}


def _port(value: object, ports: Mapping[str, int]) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    if isinstance(value, str) and value in ports:
        return ports[value]
    raise ValueError(f"port {value!r} is not a number nor a named port of the container")


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MESSAGE_MAX else text[: MESSAGE_MAX - 3] + "..."


def _run_exec(runtime: Runtime, container_id: str, argv: list[str], timeout: float) -> tuple[bool, str]:
    if not argv:
        return False, "exec probe has no command"
    try:
        result = runtime.exec(container_id, argv, timeout=timeout)
    except RuntimeError_ as error:
        return False, _short(str(error))
    output = _short((result.stdout + result.stderr).decode("utf-8", errors="replace"))
    if result.exit_code == 0:
        return True, output
    return False, output or f"command {argv[0]!r} exited with {result.exit_code}"


def _http_url(action: Mapping[str, object], host: str, port: int) -> str:
    scheme = str(action.get("scheme") or "HTTP").lower()
    path = str(action.get("path") or "/")
    if not path.startswith("/"):
        path = "/" + path
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}{path}"


def _headers(action: Mapping[str, object]) -> dict[str, str]:
    headers = action.get("httpHeaders")
    if not isinstance(headers, list):
        return {}
    return {str(h["name"]): str(h.get("value", "")) for h in headers if isinstance(h, dict) and h.get("name")}


def _run_http(action: Mapping[str, object], *, runtime: Runtime, container_id: str, pod_ip: str, remote: bool,
              ports: Mapping[str, int], timeout: float) -> tuple[bool, str]:
    port = _port(action.get("port"), ports)
    host = str(action.get("host") or "")
    if remote or not (host or pod_ip):
        url = _http_url(action, host or "127.0.0.1", port)
        argv = ["wget", "-q", "-O", "/dev/null", "--no-check-certificate"]
        for name, value in _headers(action).items():
            argv += ["--header", f"{name}: {value}"]
        ok, message = _run_exec(runtime, container_id, [*argv, url], timeout)
        return ok, message if ok or message else f"HTTP probe of {url} failed"
    return _http_get(_http_url(action, host or pod_ip, port), _headers(action), timeout)


def _http_get(url: str, headers: Mapping[str, str], timeout: float) -> tuple[bool, str]:
    """GET from the agent's process, as the kubelet's prober: 200-399 is a success."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the kubelet does not verify probe certificates either
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context))
    request = urllib.request.Request(url, headers={"User-Agent": "kctl-probe/1.0", **headers})
    try:
        with opener.open(request, timeout=timeout) as response:
            status = int(response.status)
    except urllib.error.HTTPError as error:
        status = int(error.code)
    except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
        reason = getattr(error, "reason", error)
        return False, _short(f"Get {url!r}: {reason}")
    if 200 <= status < 400:
        return True, ""
    return False, f"HTTP probe failed with statuscode: {status}"


def _run_tcp(action: Mapping[str, object], *, runtime: Runtime, container_id: str, pod_ip: str, remote: bool,
             ports: Mapping[str, int], timeout: float) -> tuple[bool, str]:
    port = _port(action.get("port"), ports)
    host = str(action.get("host") or "")
    if remote or not (host or pod_ip):
        target, seconds = host or "127.0.0.1", max(1, int(timeout))
        script = (f"nc -z -w {seconds} {target} {port} 2>/dev/null || "
                  f"nc -w {seconds} {target} {port} </dev/null >/dev/null")
        ok, message = _run_exec(runtime, container_id, ["sh", "-c", script], timeout + 1)
        return ok, "" if ok else (message or f"dial tcp {target}:{port}: connection refused")
    try:
        with socket.create_connection((host or pod_ip, port), timeout=timeout):
            return True, ""
    except OSError as error:
        return False, _short(f"dial tcp {host or pod_ip}:{port}: {error.strerror or error}")


__all__ = ["LIVENESS", "PROBE_FIELDS", "READINESS", "STARTUP", "ProbeManager", "ProbeOutcome", "named_ports"]
