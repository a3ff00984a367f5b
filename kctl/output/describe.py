"""`kctl describe`: one object as kubectl describe shows it, with its events.

Pods, Deployments, Nodes, Secrets and ConfigMaps have kubectl's own layouts; every
other kind (custom resources included) gets kubectl's generic describer, which prints
the object's fields as indented `Key:  value` lines. The text is aligned exactly as
kubectl's tabwriter aligns it (cells separated by tabs, padding 2). A Secret's values
are never printed, only their sizes. Called by the `describe` command (kctl.cli), which
fetches the object, its events, and (for a Deployment) its ReplicaSets.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import datetime, timezone
from typing import Callable, Iterable

from kctl.machinery.resources import ResourceType
from kctl.machinery.times import parse_time
from kctl.output.cells import age, format_label_selector, format_labels
from kctl.output.jsonpath import go_sprint
from kctl.output.tables import node_roles

__all__ = ["describe", "rfc1123z", "smart_label", "tabwrite"]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_MAX_ANNOTATION_LEN = 140
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def describe(obj: dict, rt: ResourceType, events: list[dict], *, now: datetime | None = None,
             replica_sets: list[dict] | None = None, endpoint_slices: list[dict] | None = None) -> str:
    """kubectl describe's text for `obj` (ends with a newline).

    events: the events whose involvedObject is `obj` (any order; sorted here).
    replica_sets: for a Deployment, the ReplicaSets in its namespace (those it controls
    are picked out to print OldReplicaSets/NewReplicaSet); None omits those lines.
    endpoint_slices: for a Service, its EndpointSlices (label kubernetes.io/service-name),
    for the `Endpoints:` line of each port; None prints `<none>` there.
    """
    if now is None:
        now = datetime.now(timezone.utc)
    ctx = _Context(now=now if now.tzinfo else now.replace(tzinfo=timezone.utc),
                   events=list(events or ()), replica_sets=replica_sets,
                   endpoint_slices=list(endpoint_slices or ()))
    w = PrefixWriter()
    _DESCRIBERS.get(rt.group_kind, _describe_generic)(w, obj, ctx)
    return w.text()


@dataclass
class _Context:
    now: datetime
    events: list[dict]
    replica_sets: list[dict] | None
    endpoint_slices: list[dict] = dataclass_field(default_factory=list)


# --- Go's tabwriter, as kubectl describe sets it up ---------------------------------

def tabwrite(text: str, *, minwidth: int = 0, padding: int = 2) -> str:
    """Align tab-separated cells as Go's text/tabwriter does (column blocks, last cell free)."""
    lines = [line.split("\t") for line in text.split("\n")]
    widths: list[int] = []
    out: list[str] = []

    def write_lines(line0: int, line1: int) -> None:
        for cells in lines[line0:line1]:
            parts = [c.ljust(widths[j]) if j < len(widths) else c for j, c in enumerate(cells[:-1])]
            parts.append(cells[-1])
            out.append("".join(parts))

    def fmt(line0: int, line1: int) -> None:
        column = len(widths)
        this = line0
        while this < line1:
            if column >= len(lines[this]) - 1:
                this += 1
                continue
            write_lines(line0, this)
            line0 = this
            width = minwidth
            while this < line1 and column < len(lines[this]) - 1:
                width = max(width, len(lines[this][column]) + padding)
                this += 1
            widths.append(width)
            fmt(line0, this)
            widths.pop()
            line0 = this
        write_lines(line0, line1)

    fmt(0, len(lines))
    return "\n".join(out)


class PrefixWriter:
    """kubectl's PrefixWriter over a tabwriter: `write(level, text)` indents by two spaces a level."""

    def __init__(self) -> None:
        self._done: list[str] = []
        self._buf: list[str] = []

    def write(self, level: int, text: str) -> None:
        self._buf.append("  " * level + text)

    def flush(self) -> None:
        if self._buf:
            self._done.append(tabwrite("".join(self._buf)))
            self._buf = []

    def text(self) -> str:
        self.flush()
        return "".join(self._done)


# --- shared pieces ----------------------------------------------------------------

def rfc1123z(timestamp: object) -> str:
    """Go's time.RFC1123Z in the local zone (`Wed, 02 Dec 2026 16:00:00 +0000`), as kubectl prints."""
    parsed = parse_time(timestamp)
    if parsed is None:
        return "Mon, 01 Jan 0001 00:00:00 +0000"
    local = parsed.astimezone()
    return (f"{_DAYS[local.weekday()]}, {local.day:02d} {_MONTHS[local.month - 1]} {local.year:04d} "
            f"{local.hour:02d}:{local.minute:02d}:{local.second:02d} {local.strftime('%z')}")


def _labels(w: PrefixWriter, title: str, labels: dict | None) -> None:
    w.write(0, f"{title}:\t")
    if not labels:
        w.write(0, "<none>\n")
        return
    for i, key in enumerate(sorted(labels)):
        if i:
            w.write(0, "\t")
        w.write(0, f"{key}={labels[key]}\n")


def _annotations(w: PrefixWriter, title: str, annotations: dict | None) -> None:
    w.write(0, f"{title}:\t")
    keys = sorted(k for k in annotations or {} if k != LAST_APPLIED)
    if not keys:
        w.write(0, "<none>\n")
        return
    for i, key in enumerate(keys):
        if i:
            w.write(0, "\t")
        value = str(annotations[key]).removesuffix("\n")
        if len(value) + len(key) + 2 > _MAX_ANNOTATION_LEN or "\n" in value:
            w.write(0, f"{key}:\n")
            for line in value.split("\n"):
                limit = _MAX_ANNOTATION_LEN - 2
                w.write(0, f"\t  {line[:limit] + '...' if len(line) > limit else line}\n")
        else:
            w.write(0, f"{key}: {value}\n")


def _tolerations(w: PrefixWriter, title: str, tolerations: list | None) -> None:
    w.write(0, f"{title}:\t")
    if not tolerations:
        w.write(0, "<none>\n")
        return
    for i, t in enumerate(sorted(tolerations, key=lambda t: t.get("key") or "")):
        if i:
            w.write(0, "\t")
        text = t.get("key") or ""
        if t.get("value"):
            text += f"={t['value']}"
        if t.get("effect"):
            text += f":{t['effect']}"
        if t.get("operator") == "Exists" and not t.get("value"):
            text += " op=Exists" if (t.get("key") or t.get("effect")) else "op=Exists"
        if t.get("tolerationSeconds") is not None:
            text += f" for {t['tolerationSeconds']}s"
        w.write(0, text + "\n")


def _taints(w: PrefixWriter, title: str, taints: list | None) -> None:
    w.write(0, f"{title}:\t")
    if not taints:
        w.write(0, "<none>\n")
        return
    ordered = sorted(taints, key=lambda t: f"{t.get('effect', '')},{t.get('key', '')}")
    for i, t in enumerate(ordered):
        if i:
            w.write(0, "\t")
        text = t.get("key", "") + (f"={t['value']}" if t.get("value") else "")
        w.write(0, f"{text}:{t.get('effect', '')}\n")


def _controller(obj: dict) -> str:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return f"{ref.get('kind', '')}/{ref.get('name', '')}"
    return ""


def _events(w: PrefixWriter, events: list[dict], now: datetime) -> None:
    """kubectl's DescribeEvents: a table sorted by lastTimestamp; `5m (x3 over 10m)` when repeated."""
    if not events:
        w.write(0, "Events:\t<none>\n")
        return
    w.flush()

    def last_seen(e: dict) -> str:
        return (e.get("lastTimestamp") or (e.get("series") or {}).get("lastObservedTime")
                or e.get("eventTime") or e.get("firstTimestamp") or "")

    w.write(0, "Events:\n  Type\tReason\tAge\tFrom\tMessage\n")
    w.write(1, "----\t------\t----\t----\t-------\n")
    for e in sorted(events, key=lambda e: parse_time(last_seen(e)) or datetime.min.replace(
            tzinfo=timezone.utc)):
        first = age(e.get("eventTime") or e.get("firstTimestamp"), now)
        series = e.get("series")
        if series:
            interval = f"{age(series.get('lastObservedTime'), now)} (x{series.get('count', 0)} over {first})"
        elif (e.get("count") or 0) > 1:
            interval = f"{age(e.get('lastTimestamp'), now)} (x{e['count']} over {first})"
        else:
            interval = first
        source = (e.get("source") or {}).get("component") or e.get("reportingComponent") or ""
        message = (e.get("message") or "").strip()
        w.write(1, f"{e.get('type', '')}\t{e.get('reason', '')}\t{interval}\t{source}\t{message}\n")


def _header(w: PrefixWriter, meta: dict, *, namespace: bool = True) -> None:
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    if namespace:
        w.write(0, f"Namespace:\t{meta.get('namespace', '')}\n")


# --- Pod --------------------------------------------------------------------------

def _describe_pod(w: PrefixWriter, pod: dict, ctx: _Context) -> None:
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    _header(w, meta)
    if spec.get("priority") is not None:
        w.write(0, f"Priority:\t{spec['priority']}\n")
    if spec.get("priorityClassName"):
        w.write(0, f"Priority Class Name:\t{spec['priorityClassName']}\n")
    if spec.get("serviceAccountName"):
        w.write(0, f"Service Account:\t{spec['serviceAccountName']}\n")
    node = spec.get("nodeName")
    w.write(0, f"Node:\t{node}/{status.get('hostIP', '')}\n" if node else "Node:\t<none>\n")
    if status.get("startTime"):
        w.write(0, f"Start Time:\t{rfc1123z(status['startTime'])}\n")
    _labels(w, "Labels", meta.get("labels"))
    _annotations(w, "Annotations", meta.get("annotations"))
    phase = status.get("phase", "")
    if meta.get("deletionTimestamp") and phase not in ("Failed", "Succeeded"):
        w.write(0, f"Status:\tTerminating (lasts {age(meta['deletionTimestamp'], ctx.now)})\n")
        grace = meta.get("deletionGracePeriodSeconds", spec.get("terminationGracePeriodSeconds", 30))
        w.write(0, f"Termination Grace Period:\t{grace}s\n")
    else:
        w.write(0, f"Status:\t{phase}\n")
    if status.get("reason"):
        w.write(0, f"Reason:\t{status['reason']}\n")
    message = status.get("message") or ""
    if not message:
        # Not in kubectl: the scheduler's reason, visible without reading events.
        for c in status.get("conditions") or ():
            if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("message"):
                message = c["message"]
    if message:
        w.write(0, f"Message:\t{message}\n")
    w.write(0, f"IP:\t{status.get('podIP', '')}\n")
    ips = status.get("podIPs") or ()
    if ips:
        w.write(0, "IPs:\n")
        for ip in ips:
            w.write(1, f"IP:\t{ip.get('ip', '')}\n")
    else:
        w.write(0, "IPs:\t<none>\n")
    controller = _controller(pod)
    if controller:
        w.write(0, f"Controlled By:\t{controller}\n")
    if status.get("nominatedNodeName"):
        w.write(0, f"NominatedNodeName:\t{status['nominatedNodeName']}\n")
    resolve = _env_resolver(pod)
    if spec.get("initContainers"):
        _containers(w, "Init Containers", spec["initContainers"], status.get("initContainerStatuses"),
                    resolve, "")
    _containers(w, "Containers", spec.get("containers"), status.get("containerStatuses"), resolve, "")
    gates = spec.get("readinessGates") or ()
    conditions = status.get("conditions") or ()
    if gates:
        w.write(0, "Readiness Gates:\n  Type\tStatus\n")
        by_type = {c.get("type"): c.get("status") for c in conditions}
        for g in gates:
            w.write(1, f"{g.get('conditionType', '')} \t{by_type.get(g.get('conditionType'), '<none>')} \n")
    if conditions:
        w.write(0, "Conditions:\n  Type\tStatus\n")
        for c in conditions:
            w.write(1, f"{c.get('type', '')} \t{c.get('status', '')} \n")
    _volumes(w, spec.get("volumes"), "")
    w.write(0, f"QoS Class:\t{status.get('qosClass') or _qos_class(spec)}\n")
    _labels(w, "Node-Selectors", spec.get("nodeSelector"))
    _tolerations(w, "Tolerations", spec.get("tolerations"))
    _events(w, ctx.events, ctx.now)


def _env_resolver(pod: dict) -> Callable[[str], str]:
    """The value of a fieldRef path on the pod (metadata.name, status.podIP, labels['x'] ...)."""
    def resolve(path: str) -> str:
        meta = pod.get("metadata") or {}
        for prefix, mapping in (("metadata.labels", meta.get("labels")),
                                ("metadata.annotations", meta.get("annotations"))):
            if path.startswith(prefix + "['") and path.endswith("']"):
                return str((mapping or {}).get(path[len(prefix) + 2:-2], ""))
            if path == prefix:
                return "\n".join(f'{k}="{v}"' for k, v in sorted((mapping or {}).items()))
        value: object = pod
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if path == "status.podIPs":
            return ",".join(ip.get("ip", "") for ip in (pod.get("status") or {}).get("podIPs") or ())
        return "" if value is None or isinstance(value, (dict, list)) else str(value)
    return resolve


def _containers(w: PrefixWriter, label: str, containers: list | None, statuses: list | None,
                resolve: Callable[[str], str] | None, space: str) -> None:
    containers = containers or []
    if not containers:
        w.write(0, f"{space}{label}: <none>\n")
        return
    w.write(0, f"{space}{label}:\n")
    by_name = {s.get("name"): s for s in statuses or ()}
    name_indent = " " if space else ""
    for c in containers:
        st = by_name.get(c.get("name"))
        w.write(1, f"{name_indent}{c.get('name', '')}:\n")
        if st is not None:
            w.write(2, f"Container ID:\t{st.get('containerID', '')}\n")
        w.write(2, f"Image:\t{c.get('image', '')}\n")
        if st is not None:
            w.write(2, f"Image ID:\t{st.get('imageID', '')}\n")
        ports = c.get("ports") or ()
        port_text = ", ".join(f"{p.get('containerPort', 0)}/{p.get('protocol') or 'TCP'}" for p in ports)
        host_text = ", ".join(f"{p.get('hostPort', 0)}/{p.get('protocol') or 'TCP'}" for p in ports)
        w.write(2, f"Ports:\t{port_text}\n" if "," in port_text else f"Port:\t{port_text or '<none>'}\n")
        w.write(2, f"Host Ports:\t{host_text}\n" if "," in host_text
                else f"Host Port:\t{host_text or '<none>'}\n")
        for title, items in (("Command", c.get("command")), ("Args", c.get("args"))):
            if items:
                w.write(2, f"{title}:\n")
                for item in items:
                    for line in str(item).split("\n"):
                        w.write(3, f"{line}\n")
        if st is not None:
            _container_state(w, "State", st.get("state") or {})
            last = st.get("lastState") or {}
            if last.get("terminated"):
                _container_state(w, "Last State", last)
            w.write(2, f"Ready:\t{'True' if st.get('ready') else 'False'}\n")
            w.write(2, f"Restart Count:\t{st.get('restartCount', 0)}\n")
        resources = c.get("resources") or {}
        for title, key in (("Limits", "limits"), ("Requests", "requests")):
            if resources.get(key):
                w.write(2, f"{title}:\n")
                for name in sorted(resources[key]):
                    w.write(3, f"{name}:\t{resources[key][name]}\n")
        for title, key in (("Liveness", "livenessProbe"), ("Readiness", "readinessProbe"),
                           ("Startup", "startupProbe")):
            if c.get(key):
                w.write(2, f"{title}:\t{_probe(c[key])}\n")
        if c.get("envFrom"):
            _env_from(w, c["envFrom"])
        _env(w, c, resolve)
        mounts = c.get("volumeMounts") or ()
        w.write(2, "Mounts:\t<none>\n" if not mounts else "Mounts:\n")
        for m in sorted(mounts, key=lambda m: m.get("mountPath", "")):
            flags = ["ro" if m.get("readOnly") else "rw"]
            if m.get("subPath"):
                flags.append(f'path="{m["subPath"]}"')
            w.write(3, f"{m.get('mountPath', '')} from {m.get('name', '')} ({','.join(flags)})\n")


def _container_state(w: PrefixWriter, title: str, state: dict) -> None:
    if state.get("running") is not None:
        w.write(2, f"{title}:\tRunning\n")
        w.write(3, f"Started:\t{rfc1123z(state['running'].get('startedAt'))}\n")
    elif state.get("waiting") is not None:
        w.write(2, f"{title}:\tWaiting\n")
        if state["waiting"].get("reason"):
            w.write(3, f"Reason:\t{state['waiting']['reason']}\n")
    elif state.get("terminated") is not None:
        t = state["terminated"]
        w.write(2, f"{title}:\tTerminated\n")
        if t.get("reason"):
            w.write(3, f"Reason:\t{t['reason']}\n")
        if t.get("message"):
            w.write(3, f"Message:\t{t['message']}\n")
        w.write(3, f"Exit Code:\t{t.get('exitCode', 0)}\n")
        if t.get("signal"):
            w.write(3, f"Signal:\t{t['signal']}\n")
        w.write(3, f"Started:\t{rfc1123z(t.get('startedAt'))}\n")
        w.write(3, f"Finished:\t{rfc1123z(t.get('finishedAt'))}\n")
    else:
        w.write(2, f"{title}:\tWaiting\n")


def _probe(probe: dict) -> str:
    attrs = (f"delay={probe.get('initialDelaySeconds', 0)}s timeout={probe.get('timeoutSeconds', 1)}s "
             f"period={probe.get('periodSeconds', 10)}s #success={probe.get('successThreshold', 1)} "
             f"#failure={probe.get('failureThreshold', 3)}")
    if probe.get("exec") is not None:
        return f"exec [{' '.join(str(a) for a in probe['exec'].get('command') or ())}] {attrs}"
    if probe.get("httpGet") is not None:
        h = probe["httpGet"]
        port = str(h.get("port", ""))
        host = h.get("host", "")
        netloc = (f"[{host}]:{port}" if ":" in host else f"{host}:{port}") if port else host
        return f"http-get {(h.get('scheme') or 'HTTP').lower()}://{netloc}{h.get('path', '')} {attrs}"
    if probe.get("tcpSocket") is not None:
        t = probe["tcpSocket"]
        return f"tcp-socket {t.get('host', '')}:{t.get('port', '')} {attrs}"
    if probe.get("grpc") is not None:
        g = probe["grpc"]
        return f"grpc <pod>:{g.get('port', '')} {g.get('service', '')} {attrs}"
    return f"unknown {attrs}"


def _env_from(w: PrefixWriter, sources: list) -> None:
    w.write(2, "Environment Variables from:\n")
    for e in sources:
        origin, ref = ("ConfigMap", e["configMapRef"]) if e.get("configMapRef") else \
            ("Secret", e.get("secretRef") or {})
        optional = "true" if ref.get("optional") else "false"
        what = f"{origin} with prefix '{e['prefix']}'" if e.get("prefix") else origin
        w.write(3, f"{ref.get('name', '')}\t{what}\tOptional: {optional}\n")


def _env(w: PrefixWriter, container: dict, resolve: Callable[[str], str] | None) -> None:
    env = container.get("env") or ()
    w.write(2, "Environment:\t<none>\n" if not env else "Environment:\n")
    for e in env:
        name, source = e.get("name", ""), e.get("valueFrom")
        if source is None:
            for i, line in enumerate(str(e.get("value", "")).split("\n")):
                w.write(3, f"{name}:\t{line}\n" if i == 0 else f"\t{line}\n")
        elif source.get("fieldRef") is not None:
            ref = source["fieldRef"]
            value = resolve(ref.get("fieldPath", "")) if resolve else ""
            w.write(3, f"{name}:\t{value} ({ref.get('apiVersion') or 'v1'}:{ref.get('fieldPath', '')})\n")
        elif source.get("resourceFieldRef") is not None:
            ref = source["resourceFieldRef"]
            resource = ref.get("resource", "")
            kind, _, rname = resource.partition(".")
            value = ((container.get("resources") or {}).get(kind) or {}).get(rname, "")
            w.write(3, f"{name}:\t{value} ({resource})\n")
        elif source.get("secretKeyRef") is not None:
            ref = source["secretKeyRef"]
            w.write(3, f"{name}:\t<set to the key '{ref.get('key', '')}' in secret '{ref.get('name', '')}'>"
                       f"\tOptional: {'true' if ref.get('optional') else 'false'}\n")
        elif source.get("configMapKeyRef") is not None:
            ref = source["configMapKeyRef"]
            w.write(3, f"{name}:\t<set to the key '{ref.get('key', '')}' of config map "
                       f"'{ref.get('name', '')}'>\tOptional: {'true' if ref.get('optional') else 'false'}\n")


def _volumes(w: PrefixWriter, volumes: list | None, space: str) -> None:
    if not volumes:
        w.write(0, f"{space}Volumes:\t<none>\n")
        return
    w.write(0, f"{space}Volumes:\n")
    for v in volumes:
        w.write(1, f"{' ' if space else ''}{v.get('name', '')}:\n")
        if v.get("hostPath") is not None:
            hp = v["hostPath"]
            w.write(2, "Type:\tHostPath (bare host directory volume)\n"
                       f"    Path:\t{hp.get('path', '')}\n    HostPathType:\t{hp.get('type') or '<none>'}\n")
        elif v.get("emptyDir") is not None:
            ed = v["emptyDir"]
            w.write(2, "Type:\tEmptyDir (a temporary directory that shares a pod's lifetime)\n"
                       f"    Medium:\t{ed.get('medium', '')}\n    SizeLimit:\t{ed.get('sizeLimit') or '<unset>'}\n")
        elif v.get("secret") is not None:
            s = v["secret"]
            w.write(2, "Type:\tSecret (a volume populated by a Secret)\n"
                       f"    SecretName:\t{s.get('secretName', '')}\n"
                       f"    Optional:\t{'true' if s.get('optional') else 'false'}\n")
        elif v.get("configMap") is not None:
            cm = v["configMap"]
            w.write(2, "Type:\tConfigMap (a volume populated by a ConfigMap)\n"
                       f"    Name:\t{cm.get('name', '')}\n"
                       f"    Optional:\t{'true' if cm.get('optional') else 'false'}\n")
        elif v.get("persistentVolumeClaim") is not None:
            pvc = v["persistentVolumeClaim"]
            w.write(2, "Type:\tPersistentVolumeClaim (a reference to a PersistentVolumeClaim in the "
                       f"same namespace)\n    ClaimName:\t{pvc.get('claimName', '')}\n"
                       f"    ReadOnly:\t{'true' if pvc.get('readOnly') else 'false'}\n")
        else:
            w.write(1, "<unknown>\n")


def _qos_class(spec: dict) -> str:
    """BestEffort / Guaranteed / Burstable from cpu and memory requests and limits."""
    containers = list(spec.get("containers") or ()) + list(spec.get("initContainers") or ())
    any_set, guaranteed = False, True
    for c in containers:
        res = c.get("resources") or {}
        limits = {k: v for k, v in (res.get("limits") or {}).items() if k in ("cpu", "memory")}
        requests = {k: v for k, v in (res.get("requests") or {}).items() if k in ("cpu", "memory")}
        if limits or requests:
            any_set = True
        if set(limits) != {"cpu", "memory"} or any(str(requests[k]) != str(limits.get(k))
                                                   for k in requests):
            guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


# --- Deployment -------------------------------------------------------------------

def _describe_deployment(w: PrefixWriter, d: dict, ctx: _Context) -> None:
    meta, spec, status = d.get("metadata") or {}, d.get("spec") or {}, d.get("status") or {}
    _header(w, meta)
    w.write(0, f"CreationTimestamp:\t{rfc1123z(meta.get('creationTimestamp'))}\n")
    _labels(w, "Labels", meta.get("labels"))
    _annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, f"Selector:\t{format_label_selector(spec.get('selector'), empty='')}\n")
    w.write(0, f"Replicas:\t{spec.get('replicas', 1)} desired | {status.get('updatedReplicas', 0)} updated"
               f" | {status.get('replicas', 0)} total | {status.get('availableReplicas', 0)} available"
               f" | {status.get('unavailableReplicas', 0)} unavailable\n")
    strategy = spec.get("strategy") or {"type": "RollingUpdate"}
    w.write(0, f"StrategyType:\t{strategy.get('type', '')}\n")
    w.write(0, f"MinReadySeconds:\t{spec.get('minReadySeconds', 0)}\n")
    if strategy.get("type") == "RollingUpdate" or strategy.get("rollingUpdate"):
        ru = strategy.get("rollingUpdate") or {}
        w.write(0, f"RollingUpdateStrategy:\t{ru.get('maxUnavailable', '25%')} max unavailable, "
                   f"{ru.get('maxSurge', '25%')} max surge\n")
    describe_pod_template(w, spec.get("template") or {})
    conditions = status.get("conditions") or ()
    if conditions:
        w.write(0, "Conditions:\n  Type\tStatus\tReason\n")
        w.write(1, "----\t------\t------\n")
        for c in conditions:
            w.write(1, f"{c.get('type', '')} \t{c.get('status', '')}\t{c.get('reason', '')}\n")
    if ctx.replica_sets is not None:
        old, new = _split_replica_sets(d, ctx.replica_sets)
        w.write(0, f"OldReplicaSets:\t{_replica_set_list([rs for rs in old if _rs_replicas(rs)])}\n")
        w.write(0, f"NewReplicaSet:\t{_replica_set_list([new] if new else [])}\n")
    _events(w, ctx.events, ctx.now)


def describe_pod_template(w: PrefixWriter, template: dict) -> None:
    """A pod template's `Pod Template:` section, as kubectl's DescribePodTemplate (describe, rollout history)."""
    meta, spec = template.get("metadata") or {}, template.get("spec") or {}
    w.write(0, "Pod Template:\n")
    _labels(w, "  Labels", meta.get("labels"))
    if meta.get("annotations"):
        _annotations(w, "  Annotations", meta["annotations"])
    if spec.get("serviceAccountName"):
        w.write(1, f"Service Account:\t{spec['serviceAccountName']}\n")
    if spec.get("initContainers"):
        _containers(w, "Init Containers", spec["initContainers"], None, None, "  ")
    _containers(w, "Containers", spec.get("containers"), None, None, "  ")
    _volumes(w, spec.get("volumes"), "  ")
    if spec.get("priorityClassName"):
        w.write(1, f"Priority Class Name:\t{spec['priorityClassName']}\n")
    _labels(w, "  Node-Selectors", spec.get("nodeSelector"))
    _tolerations(w, "  Tolerations", spec.get("tolerations"))


def _rs_replicas(rs: dict) -> int:
    return (rs.get("spec") or {}).get("replicas", 1)


def _without_hash(template: dict) -> dict:
    meta = dict(template.get("metadata") or {})
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != "pod-template-hash"}
    if labels:
        meta["labels"] = labels
    else:
        meta.pop("labels", None)
    return {**template, "metadata": meta}


def _split_replica_sets(d: dict, replica_sets: Iterable[dict]) -> tuple[list[dict], dict | None]:
    """The ReplicaSets `d` controls: (old ones, the one whose template is d's), oldest first."""
    uid, name = (d.get("metadata") or {}).get("uid"), (d.get("metadata") or {}).get("name")
    owned = []
    for rs in replica_sets:
        for ref in (rs.get("metadata") or {}).get("ownerReferences") or ():
            if ref.get("controller") and ref.get("kind") == "Deployment" and \
                    (ref.get("uid") == uid if uid and ref.get("uid") else ref.get("name") == name):
                owned.append(rs)
                break
    owned.sort(key=lambda rs: ((rs.get("metadata") or {}).get("creationTimestamp") or "",
                               (rs.get("metadata") or {}).get("name") or ""))
    template = _without_hash((d.get("spec") or {}).get("template") or {})
    new = next((rs for rs in owned
                if _without_hash((rs.get("spec") or {}).get("template") or {}) == template), None)
    return [rs for rs in owned if rs is not new], new


def _replica_set_list(sets: list[dict]) -> str:
    text = ", ".join(f"{(rs.get('metadata') or {}).get('name', '')} "
                     f"({(rs.get('status') or {}).get('replicas', 0)}/{_rs_replicas(rs)} replicas created)"
                     for rs in sets)
    return text or "<none>"


# --- Node -------------------------------------------------------------------------

def _describe_node(w: PrefixWriter, node: dict, ctx: _Context) -> None:
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    _header(w, meta, namespace=False)
    w.write(0, f"Roles:\t{','.join(node_roles(node)) or '<none>'}\n")
    _labels(w, "Labels", meta.get("labels"))
    _annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, f"CreationTimestamp:\t{rfc1123z(meta.get('creationTimestamp'))}\n")
    _taints(w, "Taints", spec.get("taints"))
    w.write(0, f"Unschedulable:\t{'true' if spec.get('unschedulable') else 'false'}\n")
    conditions = status.get("conditions") or ()
    if conditions:
        w.write(0, "Conditions:\n  Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\tReason\tMessage\n")
        w.write(1, "----\t------\t-----------------\t------------------\t------\t-------\n")
        for c in conditions:
            w.write(1, f"{c.get('type', '')} \t{c.get('status', '')} \t"
                       f"{rfc1123z(c.get('lastHeartbeatTime'))} \t{rfc1123z(c.get('lastTransitionTime'))} \t"
                       f"{c.get('reason', '')} \t{c.get('message', '')}\n")
    w.write(0, "Addresses:\n")
    for a in status.get("addresses") or ():
        w.write(1, f"{a.get('type', '')}:\t{a.get('address', '')}\n")
    for title, key in (("Capacity", "capacity"), ("Allocatable", "allocatable")):
        if status.get(key):
            w.write(0, f"{title}:\n")
            for name in sorted(status[key]):
                w.write(0, f"  {name}:\t{status[key][name]}\n")
    info = status.get("nodeInfo") or {}
    w.write(0, "System Info:\n")
    for title, key in (("Machine ID", "machineID"), ("System UUID", "systemUUID"), ("Boot ID", "bootID"),
                       ("Kernel Version", "kernelVersion"), ("OS Image", "osImage"),
                       ("Operating System", "operatingSystem"), ("Architecture", "architecture"),
                       ("Container Runtime Version", "containerRuntimeVersion"),
                       ("Kubelet Version", "kubeletVersion"), ("Kube-Proxy Version", "kubeProxyVersion")):
        w.write(0, f"  {title}:\t{info.get(key, '')}\n")
    if spec.get("podCIDR"):
        w.write(0, f"PodCIDR:\t{spec['podCIDR']}\n")
    if spec.get("podCIDRs"):
        w.write(0, f"PodCIDRs:\t{','.join(spec['podCIDRs'])}\n")
    if spec.get("providerID"):
        w.write(0, f"ProviderID:\t{spec['providerID']}\n")
    _events(w, ctx.events, ctx.now)


# --- Secret, ConfigMap ------------------------------------------------------------

def _decoded_size(value: object) -> int:
    try:
        return len(base64.b64decode(str(value), validate=True))
    except (binascii.Error, ValueError):
        return len(str(value).encode())


def _describe_secret(w: PrefixWriter, secret: dict, ctx: _Context) -> None:
    """kubectl's layout; values are never printed, only their decoded sizes."""
    meta = secret.get("metadata") or {}
    _header(w, meta)
    _labels(w, "Labels", meta.get("labels"))
    _annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, f"\nType:\t{secret.get('type') or 'Opaque'}\n")
    w.write(0, "\nData\n====\n")
    sizes = {k: _decoded_size(v) for k, v in (secret.get("data") or {}).items()}
    for k, v in (secret.get("stringData") or {}).items():
        sizes[k] = len(str(v).encode())
    for key in sorted(sizes):
        w.write(0, f"{key}:\t{sizes[key]} bytes\n")


def _describe_configmap(w: PrefixWriter, cm: dict, ctx: _Context) -> None:
    meta = cm.get("metadata") or {}
    _header(w, meta)
    _labels(w, "Labels", meta.get("labels"))
    _annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, "\nData\n====\n")
    data = cm.get("data") or {}
    for key in sorted(data):
        w.write(0, f"{key}:\n----\n{data[key]}\n")
    w.write(0, "\nBinaryData\n====\n")
    binary = cm.get("binaryData") or {}
    for key in sorted(binary):
        w.write(0, f"{key}: {_decoded_size(binary[key])} bytes\n")
    w.write(0, "\n")
    _events(w, ctx.events, ctx.now)


# --- Service ----------------------------------------------------------------------

def _describe_service(w: PrefixWriter, svc: dict, ctx: _Context) -> None:
    """kubectl's describeService; `Endpoints:` per port from the Service's EndpointSlices."""
    meta, spec, status = svc.get("metadata") or {}, svc.get("spec") or {}, svc.get("status") or {}
    _header(w, meta)
    _labels(w, "Labels", meta.get("labels"))
    _annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, f"Selector:\t{format_labels(spec.get('selector'))}\n")
    w.write(0, f"Type:\t{spec.get('type') or 'ClusterIP'}\n")
    if spec.get("ipFamilyPolicy"):
        w.write(0, f"IP Family Policy:\t{spec['ipFamilyPolicy']}\n")
    w.write(0, f"IP Families:\t{','.join(spec.get('ipFamilies') or ()) or '<none>'}\n")
    w.write(0, f"IP:\t{spec.get('clusterIP') or ''}\n")
    w.write(0, f"IPs:\t{','.join(spec.get('clusterIPs') or ()) or '<none>'}\n")
    if spec.get("externalIPs"):
        w.write(0, f"External IPs:\t{','.join(spec['externalIPs'])}\n")
    if spec.get("loadBalancerIP"):
        w.write(0, f"IP:\t{spec['loadBalancerIP']}\n")
    if spec.get("externalName"):
        w.write(0, f"External Name:\t{spec['externalName']}\n")
    ingress = (status.get("loadBalancer") or {}).get("ingress") or ()
    if ingress:
        shown = [(i.get("ip") or i.get("hostname") or "") + (f" ({i['ipMode']})" if i.get("ipMode") else "")
                 for i in ingress]
        w.write(0, f"LoadBalancer Ingress:\t{', '.join(shown)}\n")
    for port in spec.get("ports") or ():
        name = port.get("name") or "<unset>"
        protocol = port.get("protocol") or "TCP"
        w.write(0, f"Port:\t{name}\t{port.get('port')}/{protocol}\n")
        w.write(0, f"TargetPort:\t{port.get('targetPort', port.get('port'))}/{protocol}\n")
        if port.get("nodePort"):
            w.write(0, f"NodePort:\t{name}\t{port['nodePort']}/{protocol}\n")
        w.write(0, f"Endpoints:\t{_slice_endpoints(ctx.endpoint_slices, port.get('name') or '')}\n")
    w.write(0, f"Session Affinity:\t{spec.get('sessionAffinity') or 'None'}\n")
    for key, title in (("externalTrafficPolicy", "External Traffic Policy"),
                       ("internalTrafficPolicy", "Internal Traffic Policy"),
                       ("healthCheckNodePort", "HealthCheck NodePort")):
        if spec.get(key):
            w.write(0, f"{title}:\t{spec[key]}\n")
    if spec.get("loadBalancerSourceRanges"):
        w.write(0, f"LoadBalancer Source Ranges:\t{','.join(spec['loadBalancerSourceRanges'])}\n")
    _events(w, ctx.events, ctx.now)


def _slice_endpoints(slices: list[dict], port_name: str) -> str:
    """formatEndpointSlices: the ready `address:port`s of the slices' port of that name (three, `+ N more...`)."""
    if not slices:
        return "<none>"
    shown: list[str] = []
    more, count, limit = False, 0, 3
    for slice_ in slices:
        ports = slice_.get("ports") or ()
        pairs = [(None, e) for e in slice_.get("endpoints") or ()] if not ports else \
            [(p, e) for p in ports if (p.get("name") or "") == port_name for e in slice_.get("endpoints") or ()]
        for port, endpoint in pairs:
            if len(shown) == limit:
                more = True
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            address = str((endpoint.get("addresses") or [""])[0])
            if not more:
                if port is None:
                    shown.append(address)
                else:
                    host = f"[{address}]" if ":" in address else address
                    shown.append(f"{host}:{port.get('port')}")
            count += 1
    text = ",".join(shown)
    return f"{text} + {count - limit} more..." if more else text


# --- everything else: kubectl's generic describer -----------------------------------

_GENERIC_SKIP = frozenset({".metadata.managedFields", ".metadata.name", ".metadata.namespace",
                           ".metadata.labels", ".metadata.annotations"})
_ACRONYMS = frozenset({"API", "URL", "UID", "OSB", "GUID"})


def _camel_split(text: str) -> list[str]:
    """github.com/fatih/camelcase Split: `apiVersion` -> [api, Version], `PDFLoader` -> [PDF, Loader]."""
    runs: list[list[str]] = []
    last = 0
    for ch in text:
        cls = 1 if ch.islower() else 2 if ch.isupper() else 3 if ch.isdigit() else 4
        if cls == last:
            runs[-1].append(ch)
        else:
            runs.append([ch])
        last = cls
    for i in range(len(runs) - 1):
        if runs[i] and runs[i][0].isupper() and runs[i + 1][0].islower():
            runs[i + 1].insert(0, runs[i].pop())
    return ["".join(r) for r in runs if r]


def smart_label(field: str) -> str:
    """kubectl's smartLabelFor: `creationTimestamp` -> `Creation Timestamp`, `uid` -> `UID`."""
    if any(not (ch.isalpha() or ch == "-") for ch in field):
        return field
    parts = []
    for part in _camel_split(field):
        if part == "_":
            continue
        parts.append(part.upper() if part.upper() in _ACRONYMS else _go_title(part))
    return " ".join(parts)


def _go_title(word: str) -> str:
    out, prev_letter = [], False
    for ch in word:
        out.append(ch if prev_letter else ch.upper())
        prev_letter = ch.isalnum() or ch == "_"
    return "".join(out)


def _unstructured(w: PrefixWriter, level: int, content: dict, skip_prefix: str) -> None:
    for field in sorted(content):
        value = content[field]
        path = f"{skip_prefix}.{field}"
        if path in _GENERIC_SKIP:
            continue
        if isinstance(value, dict):
            w.write(level, f"{smart_label(field)}:\n")
            _unstructured(w, level + 1, value, path)
        elif isinstance(value, list):
            w.write(level, f"{smart_label(field)}:\n")
            for child in value:
                if isinstance(child, dict):
                    _unstructured(w, level + 1, child, path)
                else:
                    w.write(level + 1, f"{go_sprint(child)}\n")
        else:
            w.write(level, f"{smart_label(field)}:\t{go_sprint(value)}\n")


def _describe_generic(w: PrefixWriter, obj: dict, ctx: _Context) -> None:
    meta = obj.get("metadata") or {}
    _header(w, meta)
    _labels(w, "Labels", meta.get("labels"))
    _annotations(w, "Annotations", meta.get("annotations"))
    _unstructured(w, 0, obj, "")
    _events(w, ctx.events, ctx.now)


_DESCRIBERS: dict[str, Callable[[PrefixWriter, dict, _Context], None]] = {
    "Pod": _describe_pod,
    "Deployment.apps": _describe_deployment,
    "Node": _describe_node,
    "Secret": _describe_secret,
    "ConfigMap": _describe_configmap,
    "Service": _describe_service,
}
