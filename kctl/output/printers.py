"""Output of `kctl get`: kubectl's tables (`-o wide`) and its -o yaml/json/name/jsonpath/custom-columns/go-template.

`parse_output` reads the `-o` flag; `print_objects` writes objects in that format to a
stream; `WatchPrinter` writes one object or watch event at a time (`get -w`). Every
built-in kind prints the columns kubectl prints, with the values kubectl computes (pod
STATUS, RESTARTS "(5m ago)", node STATUS ...); a CustomResourceDefinition's kinds print
its `additionalPrinterColumns` (`crd_columns`); other kinds print NAME AGE. YAML, JSON and
templates see every mapping's keys sorted, as kubectl prints what an API server sends.
Called by the `get` command (kctl.cli); pure functions except for writing to the given
streams. Kept cheap to import: YAML/JSON writers, jsonpath-ng and the Go template
interpreter load only when used.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Iterable, TextIO

from kctl.machinery.errors import ClientSideError
from kctl.machinery.resources import BUILTIN, ResourceType
from kctl.machinery.times import parse_time

__all__ = ["OutputFormat", "parse_output", "print_objects", "age", "human_duration", "parse_time",
           "format_labels", "format_label_selector", "node_roles", "node_status", "PrinterColumn", "crd_columns",
           "WatchPrinter", "sort_objects"]

_FORMATS = ("custom-columns", "custom-columns-file", "go-template", "go-template-file", "json", "jsonpath",
            "jsonpath-file", "name", "template", "templatefile", "wide", "yaml")


@dataclass(frozen=True)
class OutputFormat:
    """A parsed `-o` value.

    `kind` is one of table, wide, yaml, json, name, jsonpath, custom-columns, go-template;
    `template` is the jsonpath or Go template; `columns` the custom columns as (header, template).
    """

    kind: str = "table"
    template: str = ""
    columns: tuple[tuple[str, str], ...] = ()

    @property
    def is_table(self) -> bool:
        """kubectl's human-readable printers (the ones that say "No resources found")."""
        return self.kind in ("table", "wide")


def parse_output(spec: str | None) -> OutputFormat:
    """kubectl's `-o` value -> OutputFormat; ClientSideError with kubectl's wording if unknown."""
    if spec is not None and spec.startswith("="):  # `-o=json`: click leaves the "="
        spec = spec[1:]
    if spec is None or spec == "":
        return OutputFormat("table")
    if spec in ("wide", "yaml", "json", "name"):
        return OutputFormat(spec)
    kind, sep, arg = spec.partition("=")
    if kind in ("jsonpath-file", "go-template-file", "templatefile", "custom-columns-file"):
        if not arg:
            raise ClientSideError("template format specified but no template given")
        arg = _read_template_file(arg)
        kind = {"jsonpath-file": "jsonpath", "custom-columns-file": "custom-columns-file"}.get(kind, "go-template")
    if kind == "jsonpath":
        if not arg:
            raise ClientSideError("template format specified but no template given")
        from kctl.output.jsonpath import parse_template
        parse_template(arg)
        return OutputFormat("jsonpath", template=arg)
    if kind in ("go-template", "template"):
        if not arg:
            raise ClientSideError("template format specified but no template given")
        from kctl.output import gotemplate
        try:
            gotemplate.parse(arg)
        except gotemplate.TemplateError as exc:
            raise ClientSideError(f"error parsing template {arg}, {exc}") from None
        return OutputFormat("go-template", template=arg)
    if kind == "custom-columns-file":
        return OutputFormat("custom-columns", columns=_custom_columns_file(arg))
    if kind == "custom-columns":
        if not arg:
            raise ClientSideError("custom-columns format specified but no custom columns given")
        return OutputFormat("custom-columns", columns=_parse_custom_columns(arg))
    raise ClientSideError(f'unable to match a printer suitable for the output format "{spec}", '
                     f'allowed formats are: {",".join(_FORMATS)}')


def _read_template_file(path: str) -> str:
    """The text of a `-o ...-file=PATH` template; one clear error line if it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ClientSideError(f"error reading template {path}: {reason}") from None


def _custom_columns_file(text: str) -> tuple[tuple[str, str], ...]:
    """kubectl's custom-columns-file: a line of headers, then a line of JSONPath expressions."""
    from kctl.output.jsonpath import parse_template

    lines = [line.split() for line in text.splitlines() if line.strip()]
    if len(lines) != 2 or len(lines[0]) != len(lines[1]):
        raise ClientSideError("custom-columns-file must hold two lines: the headers and as many expressions")
    columns = []
    for header, expr in zip(lines[0], lines[1]):
        template = relaxed_jsonpath(expr)
        parse_template(template)
        columns.append((header, template))
    return tuple(columns)


def _parse_custom_columns(spec: str) -> tuple[tuple[str, str], ...]:
    from kctl.output.jsonpath import parse_template

    columns = []
    for part in spec.split(","):
        header, sep, expr = part.partition(":")
        if not sep:
            raise ClientSideError(f"unexpected custom-columns spec: {part}, "
                             "expected <header>:<json-path-expr>")
        template = relaxed_jsonpath(expr)
        parse_template(template)
        columns.append((header, template))
    return tuple(columns)


def relaxed_jsonpath(expr: str) -> str:
    """kubectl's RelaxedJSONPathExpression: `a.b`, `.a.b`, `{a.b}`, `{.a.b}` -> `{.a.b}`."""
    if not expr:
        return expr
    inner = expr[1:-1] if expr.startswith("{") and expr.endswith("}") else expr
    if not inner.lstrip(".") or "{" in inner or "}" in inner:
        raise ClientSideError("unexpected path string, expected a 'name1.name2' or '.name1.name2' "
                         "or '{name1.name2}' or '{.name1.name2}'")
    return "{." + (inner[1:] if inner.startswith(".") else inner) + "}"


# --- time -------------------------------------------------------------------------

def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery's HumanDuration: 45s, 5m30s, 3h2m, 2d5h, 400d, 2y30d."""
    secs = int(seconds)
    if secs < -1:
        return "<invalid>"
    if secs < 0:
        return "0s"
    if secs < 120:
        return f"{secs}s"
    minutes = secs // 60
    if minutes < 10:
        s = secs % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = secs // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def _now(now: datetime | None) -> datetime:
    if now is None:
        return datetime.now(timezone.utc)
    return now if now.tzinfo else now.replace(tzinfo=timezone.utc)


def age(timestamp: object, now: datetime) -> str:
    """kubectl's translateTimestampSince: the human duration since `timestamp`, `<unknown>` if none."""
    parsed = parse_time(timestamp)
    if parsed is None:
        return "<unknown>"
    return human_duration((now - parsed).total_seconds())


# --- small formatters shared with describe ---------------------------------------

def format_labels(labels: dict | None) -> str:
    """labels.FormatLabels: `a=1,b=2` sorted by key, `<none>` if empty."""
    if not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def format_label_selector(selector: dict | None, *, empty: str = "<none>") -> str:
    """metav1.FormatLabelSelector: `app=web,tier in (a,b),!canary`, sorted by key."""
    if not selector:
        return empty
    reqs: list[tuple[str, str]] = []
    for key, value in (selector.get("matchLabels") or {}).items():
        reqs.append((key, f"{key}={value}"))
    for expr in selector.get("matchExpressions") or ():
        key, op = expr.get("key", ""), expr.get("operator", "")
        values = ",".join(sorted(expr.get("values") or ()))
        text = {"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})",
                "Exists": key, "DoesNotExist": f"!{key}"}.get(op, f"{key} {op} ({values})")
        reqs.append((key, text))
    if not reqs:
        return empty
    return ",".join(text for _, text in sorted(reqs, key=lambda r: r[0]))


def _containers_cells(containers: list | None) -> list[str]:
    containers = containers or []
    return [",".join(c.get("name", "") for c in containers),
            ",".join(c.get("image", "") for c in containers)]


def _cond_true(conditions: list | None, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True" for c in conditions or ())


# --- rows, one function per kind -------------------------------------------------
# Each takes (obj, wide, now) and returns the cells; the first cell is the name.

def _pod_row(pod: dict, wide: bool, now: datetime) -> list[str]:
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    containers = spec.get("containers") or ()
    init_specs = {c.get("name"): c for c in spec.get("initContainers") or ()}
    total = len(containers) + sum(1 for c in init_specs.values() if c.get("restartPolicy") == "Always")
    ready = restarts = sidecar_restarts = 0
    last_restart = sidecar_last_restart = ""
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    conditions = status.get("conditions") or ()
    for c in conditions:
        if c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    initializing = False
    init_statuses = status.get("initContainerStatuses") or ()
    for i, cs in enumerate(init_statuses):
        restarts += cs.get("restartCount") or 0
        finished = ((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt") or ""
        last_restart = max(last_restart, finished)
        sidecar = (init_specs.get(cs.get("name")) or {}).get("restartPolicy") == "Always"
        if sidecar:
            sidecar_restarts += cs.get("restartCount") or 0
            sidecar_last_restart = max(sidecar_last_restart, finished)
        state = cs.get("state") or {}
        term, waiting = state.get("terminated"), state.get("waiting")
        if term is not None and (term.get("exitCode") or 0) == 0:
            continue
        if sidecar and cs.get("started"):
            if cs.get("ready"):
                ready += 1
            continue
        if term is not None:
            if term.get("reason"):
                reason = "Init:" + term["reason"]
            elif term.get("signal"):
                reason = f"Init:Signal:{term['signal']}"
            else:
                reason = f"Init:ExitCode:{term.get('exitCode') or 0}"
        elif waiting is not None and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break

    if not initializing or _cond_true(conditions, "Initialized"):
        restarts, last_restart = sidecar_restarts, sidecar_last_restart
        has_running = False
        for cs in reversed(status.get("containerStatuses") or ()):
            restarts += cs.get("restartCount") or 0
            finished = ((cs.get("lastState") or {}).get("terminated") or {}).get("finishedAt") or ""
            if finished > last_restart:
                last_restart = finished
            state = cs.get("state") or {}
            waiting, term = state.get("waiting"), state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                reason = waiting["reason"]
            elif term is not None and term.get("reason"):
                reason = term["reason"]
            elif term is not None:
                reason = (f"Signal:{term['signal']}" if term.get("signal")
                          else f"ExitCode:{term.get('exitCode') or 0}")
            elif cs.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            reason = "Running" if _cond_true(conditions, "Ready") else "NotReady"

    if meta.get("deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif phase not in ("Succeeded", "Failed"):
            reason = "Terminating"

    restarts_cell = str(restarts)
    if restarts and last_restart:
        restarts_cell = f"{restarts} ({age(last_restart, now)} ago)"
    row = [meta.get("name", ""), f"{ready}/{total}", reason, restarts_cell,
           age(meta.get("creationTimestamp"), now)]
    if wide:
        ips = status.get("podIPs") or ()
        ip = (ips[0].get("ip") if ips else "") or status.get("podIP") or "<none>"
        gates = spec.get("readinessGates") or ()
        gates_cell = "<none>"
        if gates:
            by_type = {}
            for c in conditions:
                by_type.setdefault(c.get("type"), c.get("status"))
            true = sum(1 for g in gates if by_type.get(g.get("conditionType")) == "True")
            gates_cell = f"{true}/{len(gates)}"
        row += [ip, spec.get("nodeName") or "<none>", status.get("nominatedNodeName") or "<none>",
                gates_cell]
    return row


def _template_spec(obj: dict) -> dict:
    return ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}


def _deployment_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    desired = spec.get("replicas", 1)
    row = [meta.get("name", ""), f"{status.get('readyReplicas') or 0}/{desired}",
           str(status.get("updatedReplicas") or 0), str(status.get("availableReplicas") or 0),
           age(meta.get("creationTimestamp"), now)]
    if wide:
        row += _containers_cells(_template_spec(obj).get("containers"))
        row.append(format_label_selector(spec.get("selector"), empty=""))
    return row


def _replicaset_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    row = [meta.get("name", ""), str(spec.get("replicas", 1)), str(status.get("replicas") or 0),
           str(status.get("readyReplicas") or 0), age(meta.get("creationTimestamp"), now)]
    if wide:
        row += _containers_cells(_template_spec(obj).get("containers"))
        row.append(format_label_selector(spec.get("selector"), empty=""))
    return row


def _daemonset_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    tspec = _template_spec(obj)
    row = [meta.get("name", "")] + [str(status.get(k) or 0) for k in (
        "desiredNumberScheduled", "currentNumberScheduled", "numberReady", "updatedNumberScheduled",
        "numberAvailable")] + [format_labels(tspec.get("nodeSelector")),
                               age(meta.get("creationTimestamp"), now)]
    if wide:
        row += _containers_cells(tspec.get("containers"))
        row.append(format_label_selector(spec.get("selector"), empty=""))
    return row


def _job_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    succeeded = status.get("succeeded") or 0
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{spec['completions']}"
    elif (spec.get("parallelism") or 0) > 1:
        completions = f"{succeeded}/1 of {spec['parallelism']}"
    else:
        completions = f"{succeeded}/1"
    start, end = parse_time(status.get("startTime")), parse_time(status.get("completionTime"))
    duration = ""
    if start is not None:
        duration = human_duration(((end or now) - start).total_seconds())
    conditions = status.get("conditions")
    if _cond_true(conditions, "Complete"):
        state = "Complete"
    elif _cond_true(conditions, "Failed"):
        state = "Failed"
    elif meta.get("deletionTimestamp"):
        state = "Terminating"
    elif _cond_true(conditions, "Suspended"):
        state = "Suspended"
    elif _cond_true(conditions, "FailureTarget"):
        state = "FailureTarget"
    elif _cond_true(conditions, "SuccessCriteriaMet"):
        state = "SuccessCriteriaMet"
    else:
        state = "Running"
    row = [meta.get("name", ""), state, completions, duration, age(meta.get("creationTimestamp"), now)]
    if wide:
        row += _containers_cells(_template_spec(obj).get("containers"))
        row.append(format_label_selector(spec.get("selector")))
    return row


def _cronjob_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    suspend = spec.get("suspend")
    last = status.get("lastScheduleTime")
    row = [meta.get("name", ""), spec.get("schedule", ""), spec.get("timeZone") or "<none>",
           "<unset>" if suspend is None else ("True" if suspend else "False"),
           str(len(status.get("active") or ())), age(last, now) if last else "<none>",
           age(meta.get("creationTimestamp"), now)]
    if wide:
        job_spec = (spec.get("jobTemplate") or {}).get("spec") or {}
        row += _containers_cells(_template_spec({"spec": job_spec}).get("containers"))
        row.append(format_label_selector(job_spec.get("selector")))
    return row


def _service_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    svc_type = spec.get("type") or "ClusterIP"
    cluster_ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    external = spec.get("externalIPs") or []
    if svc_type in ("ClusterIP", "NodePort"):
        external_cell = ",".join(external) or "<none>"
    elif svc_type == "LoadBalancer":
        ingress = [i.get("ip") or i.get("hostname") or ""
                   for i in (status.get("loadBalancer") or {}).get("ingress") or ()]
        lb = ",".join(i for i in ingress if i)
        if not wide and len(lb) > 16:
            lb = lb[:13] + "..."
        parts = (lb.split(",") if lb else []) + external
        external_cell = ",".join(parts) or "<pending>"
    elif svc_type == "ExternalName":
        external_cell = spec.get("externalName", "")
    else:
        external_cell = "<unknown>"
    ports = []
    for p in spec.get("ports") or ():
        proto = p.get("protocol") or "TCP"
        ports.append(f"{p.get('port')}:{p['nodePort']}/{proto}" if p.get("nodePort")
                     else f"{p.get('port')}/{proto}")
    row = [meta.get("name", ""), svc_type, cluster_ips[0] if cluster_ips else "<none>", external_cell,
           ",".join(ports) or "<none>", age(meta.get("creationTimestamp"), now)]
    if wide:
        row.append(format_labels(spec.get("selector")))
    return row


def _endpoints_cell(obj: dict) -> str:
    subsets = obj.get("subsets") or ()
    if not subsets:
        return "<none>"
    shown: list[str] = []
    count, more, limit = 0, False, 3
    for ss in subsets:
        addresses = ss.get("addresses") or ()
        ports = ss.get("ports") or ()
        if not ports:
            count += len(addresses)
            for a in addresses:
                if len(shown) == limit:
                    more = True
                    break
                shown.append(a.get("ip", ""))
            continue
        for port in ports:
            count += len(addresses)
            for a in addresses:
                if len(shown) == limit:
                    more = True
                    break
                ip = a.get("ip", "")
                host = f"[{ip}]" if ":" in ip else ip
                shown.append(f"{host}:{port.get('port')}")
    text = ",".join(shown)
    return f"{text} + {count - limit} more..." if more else text


def _endpoints_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    meta = obj.get("metadata") or {}
    return [meta.get("name", ""), _endpoints_cell(obj), age(meta.get("creationTimestamp"), now)]


def _configmap_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    meta = obj.get("metadata") or {}
    count = len(obj.get("data") or {}) + len(obj.get("binaryData") or {})
    return [meta.get("name", ""), str(count), age(meta.get("creationTimestamp"), now)]


def _secret_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    meta = obj.get("metadata") or {}
    return [meta.get("name", ""), obj.get("type") or "Opaque", str(len(obj.get("data") or {})),
            age(meta.get("creationTimestamp"), now)]


def _namespace_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    meta = obj.get("metadata") or {}
    phase = (obj.get("status") or {}).get("phase") or "Active"
    return [meta.get("name", ""), phase, age(meta.get("creationTimestamp"), now)]


def node_roles(node: dict) -> list[str]:
    """Roles from `node-role.kubernetes.io/ROLE` and `kubernetes.io/role` labels, sorted."""
    roles = set()
    for key, value in ((node.get("metadata") or {}).get("labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/"):
            role = key[len("node-role.kubernetes.io/"):]
            if role:
                roles.add(role)
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return sorted(roles)


def node_status(node: dict) -> str:
    """Ready / NotReady / Unknown, plus `,SchedulingDisabled` when cordoned."""
    states = []
    for c in (node.get("status") or {}).get("conditions") or ():
        if c.get("type") == "Ready":
            states = ["Ready" if c.get("status") == "True" else "NotReady"]
    if not states:
        states = ["Unknown"]
    if (node.get("spec") or {}).get("unschedulable"):
        states.append("SchedulingDisabled")
    return ",".join(states)


def _node_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    info = status.get("nodeInfo") or {}
    row = [meta.get("name", ""), node_status(obj), ",".join(node_roles(obj)) or "<none>",
           age(meta.get("creationTimestamp"), now), info.get("kubeletVersion", "")]
    if wide:
        addresses = status.get("addresses") or ()
        internal = next((a.get("address") for a in addresses if a.get("type") == "InternalIP"), None)
        external = next((a.get("address") for a in addresses if a.get("type") == "ExternalIP"), None)
        row += [internal or "<none>", external or "<none>", info.get("osImage") or "<unknown>",
                info.get("kernelVersion") or "<unknown>",
                info.get("containerRuntimeVersion") or "<unknown>",
                _capacity(status.get("capacity") or {}), _node_reason(obj)]
    return row


def _node_reason(node: dict) -> str:
    """Why a node is not Ready (kctl's addition to the wide view): the Ready condition's reason when it is
    not True, else the cause its agent just found (kctl.io/unreachable-reason), else <none>."""
    for c in (node.get("status") or {}).get("conditions") or ():
        if c.get("type") == "Ready" and c.get("status") != "True" and c.get("reason"):
            return str(c["reason"])
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get("kctl.io/unreachable-reason") or "<none>")


def _capacity(capacity: dict) -> str:
    """A node's capacity in one column: `2 cpu, 23.4Gi` (kctl's addition to kubectl's wide view)."""
    if not capacity:
        return "<unknown>"
    from kctl.machinery.quantity import parse_quantity

    parts = []
    if capacity.get("cpu"):
        parts.append(f"{capacity['cpu']} cpu")
    if capacity.get("memory"):
        parts.append(f"{float(parse_quantity(capacity['memory'])) / 2 ** 30:.1f}Gi")
    return ", ".join(parts) or "<unknown>"


def _event_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    involved = obj.get("involvedObject") or {}
    first = age(obj.get("firstTimestamp") or obj.get("eventTime"), now)
    last = age(obj["lastTimestamp"], now) if obj.get("lastTimestamp") else first
    count = obj.get("count") or 1
    series = obj.get("series")
    if series:
        last, count = age(series.get("lastObservedTime"), now), series.get("count") or count
    kind = (involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    message = (obj.get("message") or "").strip()
    if not wide:
        return [last, obj.get("type", ""), obj.get("reason", ""), target, message]
    source = obj.get("source") or {}
    component = source.get("component") or obj.get("reportingComponent") or ""
    host = source.get("host") or obj.get("reportingInstance") or ""
    source_cell = f"{component}, {host}" if host else component
    return [last, obj.get("type", ""), obj.get("reason", ""), target,
            involved.get("fieldPath", ""), source_cell, message, first, str(count),
            (obj.get("metadata") or {}).get("name", "")]


def _lease_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    meta = obj.get("metadata") or {}
    return [meta.get("name", ""), (obj.get("spec") or {}).get("holderIdentity") or "",
            age(meta.get("creationTimestamp"), now)]


def _crd_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    meta = obj.get("metadata") or {}
    return [meta.get("name", ""), meta.get("creationTimestamp") or ""]


def _hook_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    policy = spec.get("failurePolicy") or obj.get("failurePolicy") or "Fail"
    timeout = spec.get("timeoutSeconds", obj.get("timeoutSeconds", 10))
    return [meta.get("name", ""), policy, f"{timeout}s", age(meta.get("creationTimestamp"), now)]


def short_revision(revision: str) -> str:
    """`main@abcdef123456` (or `folder:abcdef123456`): a GitSource revision with a 12-character hash.

    The form git sync writes (kctl.sync.reconcile.short_revision); output sits below sync, so it
    keeps this copy (a test checks the two agree).
    """
    if revision.startswith("folder:"):
        return revision[:len("folder:") + 12]
    ref, sep, commit = revision.rpartition("@")
    return f"{ref}{sep}{commit[:12]}" if sep else revision[:12]


def _gitsource_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    ready = next((c for c in status.get("conditions") or () if isinstance(c, dict) and c.get("type") == "Ready"),
                 None) or {}
    revision = status.get("lastAppliedRevision")
    return [meta.get("name", ""), spec.get("url") or "", short_revision(revision) if revision else "<none>",
            ready.get("status") or "Unknown", ready.get("message") or "", age(meta.get("creationTimestamp"), now)]


def _generic_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    meta = obj.get("metadata") or {}
    return [meta.get("name", ""), age(meta.get("creationTimestamp"), now)]


@dataclass(frozen=True)
class _Table:
    headers: tuple[str, ...]
    wide_headers: tuple[str, ...]
    row: Callable[[dict, bool, datetime], list[str]]


# --- CustomResourceDefinition printer columns ---------------------------------------

@dataclass(frozen=True)
class PrinterColumn:
    """One of a CRD version's `additionalPrinterColumns`."""

    name: str
    type: str
    json_path: str
    priority: int = 0
    format: str = ""


#: what the API server serves for a CRD version that declares no columns
_DEFAULT_CRD_COLUMNS = (PrinterColumn("Age", "date", ".metadata.creationTimestamp"),)


def crd_columns(crd: dict, version: str) -> tuple[PrinterColumn, ...]:
    """The printer columns of `version` of a CustomResourceDefinition, Age if it declares none."""
    for v in (crd.get("spec") or {}).get("versions") or ():
        if v.get("name") != version:
            continue
        columns = []
        for c in v.get("additionalPrinterColumns") or ():
            if not isinstance(c, dict) or not c.get("name") or not c.get("jsonPath"):
                continue
            priority = c.get("priority") or 0
            columns.append(PrinterColumn(str(c["name"]), str(c.get("type") or "string"), str(c["jsonPath"]),
                                         priority if isinstance(priority, int) else 0, str(c.get("format") or "")))
        return tuple(columns) or _DEFAULT_CRD_COLUMNS
    return _DEFAULT_CRD_COLUMNS


def _crd_cell(column: PrinterColumn, obj: dict, now: datetime) -> str:
    """The apiextensions table convertor's cell (cellForJSONValue), as kubectl prints it."""
    from kctl.output.jsonpath import format_value, go_sprint, parse_template

    try:
        values = parse_template("{" + column.json_path + "}").values(obj)
    except ClientSideError:
        return ""
    if not values or values[0] is None:
        return ""
    value = values[0]
    kind = column.type
    if kind == "string":
        return format_value(value)
    if kind == "integer" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(int(value))
    if kind == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return go_sprint(float(value))
    if kind == "boolean" and isinstance(value, bool):
        return "true" if value else "false"
    if kind == "date" and isinstance(value, str):
        return age(value, now) if parse_time(value) is not None else "<invalid>"
    return ""


def _crd_table(columns: tuple[PrinterColumn, ...], wide: bool) -> _Table:
    shown = [c for c in columns if wide or not c.priority]

    def row(obj: dict, _wide: bool, now: datetime) -> list[str]:
        return [(obj.get("metadata") or {}).get("name", "")] + [_crd_cell(c, obj, now) for c in shown]

    return _Table(("NAME",) + tuple(c.name.upper() for c in shown), (), row)


# --- --sort-by ------------------------------------------------------------------------

def _natural_less(a: str, b: str) -> bool:
    """vbom.ml/util/sortorder.NaturalLess, kubectl's order for strings: digit runs compare as numbers."""
    s1, s2 = a.encode(), b.encode()
    i = j = 0
    while i < len(s1) and j < len(s2):
        c1, c2 = s1[i], s2[j]
        d1, d2 = 48 <= c1 <= 57, 48 <= c2 <= 57
        if d1 != d2:
            return d1
        if not d1:
            if c1 != c2:
                return c1 < c2
            i += 1
            j += 1
            continue
        while i < len(s1) and s1[i] == 48:
            i += 1
        while j < len(s2) and s2[j] == 48:
            j += 1
        nz1, nz2 = i, j
        while i < len(s1) and 48 <= s1[i] <= 57:
            i += 1
        while j < len(s2) and 48 <= s2[j] <= 57:
            j += 1
        if i - nz1 != j - nz2:
            return i - nz1 < j - nz2
        if s1[nz1:i] != s2[nz2:j]:
            return s1[nz1:i] < s2[nz2:j]
        if nz1 != nz2:
            return nz1 < nz2
    return len(s1) < len(s2)


def _sort_less(a: object, b: object, field: str) -> bool:
    """kubectl's isLess on two decoded JSON values: numbers numerically, quantities as quantities."""
    if a is None and b is None:
        return False
    if a is None:
        return True
    if b is None:
        return False
    if isinstance(a, bool) and isinstance(b, bool):
        return not a and b
    if isinstance(a, (int, float)) and not isinstance(a, bool) and isinstance(b, (int, float)) \
            and not isinstance(b, bool):
        return a < b
    if isinstance(a, str) and isinstance(b, str):
        from kctl.machinery.quantity import parse_quantity

        try:
            qa, qb = parse_quantity(a), parse_quantity(b)
        except ValueError:  # not both quantities: natural string order
            return _natural_less(a, b)
        return qa < qb
    raise ClientSideError(f"Field {field} is an unsortable type: {type(a).__name__}, "
                          f"or the values differ in type ({type(b).__name__})")


def sort_objects(objs: list[dict], sort_by: str) -> list[dict]:
    """`--sort-by`: objects ordered by the value of a JSONPath (`{.metadata.name}` or `.metadata.name`).

    As kubectl: strings in natural order (or as quantities when both are), numbers
    numerically, objects missing the field first, ties keep their order; an error if no
    object has the field.
    """
    import functools

    from kctl.output.jsonpath import parse_template

    field = relaxed_jsonpath(sort_by)
    template = parse_template(field)
    keyed = []
    found = False
    for obj in objs:
        values = template.values(obj)
        value = values[0] if values else None
        found = found or bool(values)
        keyed.append((value, obj))
    if objs and not found:
        raise ClientSideError(f"couldn't find any field with path \"{field}\" in the list of objects")

    def compare(x: tuple, y: tuple) -> int:
        if _sort_less(x[0], y[0], field):
            return -1
        if _sort_less(y[0], x[0], field):
            return 1
        return 0

    return [obj for _, obj in sorted(keyed, key=functools.cmp_to_key(compare))]


_CW = ("CONTAINERS", "IMAGES", "SELECTOR")
_TABLES: dict[str, _Table] = {
    "Pod": _Table(("NAME", "READY", "STATUS", "RESTARTS", "AGE"),
                  ("IP", "NODE", "NOMINATED NODE", "READINESS GATES"), _pod_row),
    "Deployment.apps": _Table(("NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"), _CW,
                              _deployment_row),
    "ReplicaSet.apps": _Table(("NAME", "DESIRED", "CURRENT", "READY", "AGE"), _CW, _replicaset_row),
    "DaemonSet.apps": _Table(("NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE",
                              "NODE SELECTOR", "AGE"), _CW, _daemonset_row),
    "Job.batch": _Table(("NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"), _CW, _job_row),
    "CronJob.batch": _Table(("NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE",
                             "AGE"), _CW, _cronjob_row),
    "Service": _Table(("NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"), ("SELECTOR",),
                      _service_row),
    "Endpoints": _Table(("NAME", "ENDPOINTS", "AGE"), (), _endpoints_row),
    "ConfigMap": _Table(("NAME", "DATA", "AGE"), (), _configmap_row),
    "Secret": _Table(("NAME", "TYPE", "DATA", "AGE"), (), _secret_row),
    "Namespace": _Table(("NAME", "STATUS", "AGE"), (), _namespace_row),
    "Node": _Table(("NAME", "STATUS", "ROLES", "AGE", "VERSION"),
                   ("INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME", "CAPACITY",
                    "REASON"),
                   _node_row),
    "Event": _Table(("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"), (), _event_row),
    "Lease.coordination.k8s.io": _Table(("NAME", "HOLDER", "AGE"), (), _lease_row),
    "CustomResourceDefinition.apiextensions.k8s.io": _Table(("NAME", "CREATED AT"), (), _crd_row),
    "MutatingAdmissionHook.kctl.io": _Table(("NAME", "FAILURE-POLICY", "TIMEOUT", "AGE"), (),
                                            _hook_row),
    "ValidatingAdmissionHook.kctl.io": _Table(("NAME", "FAILURE-POLICY", "TIMEOUT", "AGE"), (),
                                              _hook_row),
    "GitSource.kctl.io": _Table(("NAME", "URL", "REVISION", "READY", "STATUS", "AGE"), (), _gitsource_row),
}
#: kubectl's formatEventType: the EVENT column of `get -w --output-watch-events`
_EVENT_CELLS = {"ADDED": "ADDED   ", "MODIFIED": "MODIFIED", "DELETED": "DELETED ", "ERROR": "ERROR   "}
_EVENT_WIDE = ("LAST SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE", "MESSAGE",
               "FIRST SEEN", "COUNT", "NAME")
_GENERIC = _Table(("NAME", "AGE"), (), _generic_row)
_BUILTIN_SCOPE = {rt.group_kind: rt.namespaced for rt in BUILTIN}


def _group_kind(obj: dict, rt: ResourceType | None) -> tuple[str, str]:
    """(group, Kind) from the object's apiVersion/kind, else from rt."""
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    if isinstance(kind, str) and kind and isinstance(api_version, str):
        group = api_version.rpartition("/")[0] if "/" in api_version else ""
        return group, kind
    if rt is not None:
        return rt.group, rt.kind
    return "", str(kind or "")


def _kind_prefix(group: str, kind: str) -> str:
    """kubectl's `kind.group/` (lower-cased kind): `pod/`, `deployment.apps/`."""
    return f"{kind.lower()}.{group}/" if group else f"{kind.lower()}/"


# --- writing ----------------------------------------------------------------------

def align_columns(rows: list[list[str]], out: TextIO) -> None:
    """Go's tabwriter as kubectl sets it up (min width 6, padding 3); last column unpadded."""
    if not rows:
        return
    ncols = len(rows[0])
    widths = []
    for col in range(ncols - 1):
        width = 3 + max(len(r[col]) for r in rows)
        widths.append(width if width > 6 else 6)
    lines = []
    for r in rows:
        lines.append("".join([c.ljust(w) for c, w in zip(r, widths)]) + r[-1])
    out.write("\n".join(lines) + "\n")


def print_objects(objs: list[dict], rt: ResourceType | None, fmt: OutputFormat, out: TextIO, *,
                  err: TextIO | None = None, namespace: str | None = None,
                  all_namespaces: bool = False, show_kind: bool = False, no_headers: bool = False,
                  show_labels: bool = False, label_columns: Iterable[str] = (),
                  now: datetime | None = None, force_list: bool = False,
                  columns: tuple[PrinterColumn, ...] | None = None) -> None:
    """Write `objs` to `out` in `fmt`, as `kubectl get` does.

    rt: the kind listed (None: take each object's apiVersion/kind; mixed kinds print one
    table per kind). err: where "No resources found" goes (default stderr); namespace:
    named in that message. force_list: for yaml/json/jsonpath/go-template, wrap even a
    single object in a `kind: List`, as kubectl does for a list query (`get pods`, not
    `get pod NAME`); without it one object prints as itself and any other number as a List.
    columns: a CRD's printer columns for rt's kind (`crd_columns`).
    """
    name = fmt.kind
    if name in ("table", "wide"):
        _print_tables(objs, rt, name == "wide", out, err if err is not None else sys.stderr,
                      namespace=namespace, all_namespaces=all_namespaces, show_kind=show_kind,
                      no_headers=no_headers, show_labels=show_labels,
                      label_columns=list(label_columns), now=_now(now), columns=columns)
    elif name == "name":
        out.write("".join(_name_line(o, rt) + "\n" for o in objs))
    elif name == "custom-columns":
        _print_custom_columns(objs, fmt.columns, out, no_headers=no_headers)
    else:
        out.write(_render_data(_as_data(objs, force_list), fmt))


def _name_line(obj: dict, rt: ResourceType | None) -> str:
    return _kind_prefix(*_group_kind(obj, rt)) + ((obj.get("metadata") or {}).get("name") or "")


def _render_data(data: dict, fmt: OutputFormat, *, event: str | None = None) -> str:
    """yaml/json/jsonpath/go-template text of one object or List, keys sorted; with `event`, of
    the watch event `{"type": event, "object": data}` (JSON keeps metav1.WatchEvent's field order)."""
    from kctl.output.keyorder import sorted_keys

    data = sorted_keys(data)
    if event is not None:
        data = {"type": event, "object": data} if fmt.kind == "json" else {"object": data, "type": event}
    if fmt.kind == "jsonpath":
        from kctl.output.jsonpath import parse_template
        return parse_template(fmt.template).render(data)
    if fmt.kind == "go-template":
        from kctl.output import gotemplate
        try:
            return gotemplate.parse(fmt.template).execute(data)
        except gotemplate.TemplateError as exc:
            # kubectl also dumps the object to stdout here; kctl does not (it may hold secrets)
            raise ClientSideError(f"error executing template {_go_quoted(fmt.template)}: {exc}") from None
    from kctl.manifests import yamlio
    text = yamlio.dump_yaml(data) if fmt.kind == "yaml" else yamlio.dump_json(data)
    return text if text.endswith("\n") else text + "\n"


def _go_quoted(text: str) -> str:
    import json
    return json.dumps(text, ensure_ascii=False)


class WatchPrinter:
    """Prints objects one at a time as `kubectl get -w` does (called by the get command).

    Tables print their header with the first row only (and `EVENT` first with
    `events`); YAML documents after the first are preceded by `---`; with `events`
    the yaml/json/template formats print `{"type": ..., "object": ...}` watch events
    and `-o name` prefixes the event type.
    """

    def __init__(self, rt: ResourceType, fmt: OutputFormat, out: TextIO, *, events: bool = False,
                 all_namespaces: bool = False, no_headers: bool = False, show_labels: bool = False,
                 label_columns: Iterable[str] = (), columns: tuple[PrinterColumn, ...] | None = None) -> None:
        self.rt, self.fmt, self.out, self.events = rt, fmt, out, events
        self.all_namespaces, self.no_headers = all_namespaces, no_headers
        self.show_labels, self.label_columns = show_labels, list(label_columns)
        self.columns = columns
        self.count = 0

    def print_list(self, objs: list[dict], *, now: datetime | None = None) -> None:
        """The list a watch starts from: one aligned table, or one document per object (ADDED)."""
        if not objs:
            return
        if self.fmt.kind in ("table", "wide"):
            self._rows(objs, "ADDED", now)
            self.count += len(objs)
            self.out.flush()
            return
        for obj in objs:
            self.print("ADDED", obj, now=now)

    def _rows(self, objs: list[dict], event: str, now: datetime | None) -> None:
        wide = self.fmt.kind == "wide"
        table, namespaced = _table_for(objs[0], self.rt, wide, self.columns)
        _print_table(objs, table, wide, self.out, with_namespace=self.all_namespaces and namespaced,
                     kind_prefix="", no_headers=self.no_headers or self.count > 0, show_labels=self.show_labels,
                     label_columns=self.label_columns, now=_now(now), is_event=self.rt.group_kind == "Event",
                     event_type=event if self.events else None)

    def print(self, event: str, obj: dict, *, now: datetime | None = None) -> None:
        """Print one object that the watch reported as `event` (ADDED, MODIFIED, DELETED)."""
        kind = self.fmt.kind
        if kind in ("table", "wide"):
            self._rows([obj], event, now)
            self.count += 1
            self.out.flush()
            return
        self.count += 1
        if kind == "name":
            self.out.write((f"{event} " if self.events else "") + _name_line(obj, self.rt) + "\n")
        elif kind == "custom-columns":
            _print_custom_columns([obj], self.fmt.columns, self.out, no_headers=self.no_headers or self.count > 1)
        else:
            if kind == "yaml" and self.count > 1:
                self.out.write("---\n")
            self.out.write(_render_data(obj, self.fmt, event=event if self.events else None))
        self.out.flush()


def _as_data(objs: list[dict], force_list: bool) -> dict:
    if len(objs) == 1 and not force_list:
        return objs[0]
    return {"apiVersion": "v1", "items": list(objs), "kind": "List", "metadata": {"resourceVersion": ""}}


def _print_custom_columns(objs: list[dict], columns: tuple[tuple[str, str], ...], out: TextIO, *,
                          no_headers: bool) -> None:
    from kctl.output.jsonpath import go_sprint, parse_template

    templates = [parse_template(t) for _, t in columns]
    rows = [] if no_headers else [[h for h, _ in columns]]
    for obj in objs:
        row = []
        for template in templates:
            values = template.values(obj)
            row.append(",".join(go_sprint(v) for v in values) if values else "<none>")
        rows.append(row)
    align_columns(rows, out)


def _table_for(obj: dict, rt: ResourceType | None, wide: bool,
               columns: tuple[PrinterColumn, ...] | None) -> tuple[_Table, bool]:
    """The table of one object's kind, and whether that kind is namespaced."""
    group, kind = _group_kind(obj, rt)
    group_kind = f"{kind}.{group}" if group else kind
    if rt is not None and rt.group_kind == group_kind:
        namespaced = rt.namespaced
        if columns is not None:
            return _crd_table(columns, wide), namespaced
    elif group_kind in _BUILTIN_SCOPE:
        namespaced = _BUILTIN_SCOPE[group_kind]
    else:
        namespaced = bool((obj.get("metadata") or {}).get("namespace"))
    return _TABLES.get(group_kind, _GENERIC), namespaced


def _print_tables(objs: list[dict], rt: ResourceType | None, wide: bool, out: TextIO, err: TextIO, *,
                  namespace: str | None, all_namespaces: bool, show_kind: bool, no_headers: bool,
                  show_labels: bool, label_columns: list[str], now: datetime,
                  columns: tuple[PrinterColumn, ...] | None = None) -> None:
    if not objs:
        namespaced = rt.namespaced if rt is not None else bool(namespace)
        if namespaced and not all_namespaces and namespace:
            err.write(f"No resources found in {namespace} namespace.\n")
        else:
            err.write("No resources found\n")
        return
    # One table per run of objects of one kind, as kubectl prints `get pods,deploy`.
    groups: list[tuple[tuple[str, str], list[dict]]] = []
    for obj in objs:
        key = _group_kind(obj, rt)
        if groups and groups[-1][0] == key:
            groups[-1][1].append(obj)
        else:
            groups.append((key, [obj]))
    for index, ((group, kind), members) in enumerate(groups):
        if index and not no_headers:
            out.write("\n")
        group_kind = f"{kind}.{group}" if group else kind
        table, namespaced = _table_for(members[0], rt, wide, columns)
        if not (rt is not None and rt.group_kind == group_kind) and group_kind not in _BUILTIN_SCOPE:
            namespaced = any((o.get("metadata") or {}).get("namespace") for o in members)
        _print_table(members, table, wide, out,
                     with_namespace=all_namespaces and namespaced,
                     kind_prefix=_kind_prefix(group, kind) if show_kind else "",
                     no_headers=no_headers, show_labels=show_labels, label_columns=label_columns,
                     now=now, is_event=group_kind == "Event")


def _print_table(objs: list[dict], table: _Table, wide: bool, out: TextIO, *, with_namespace: bool,
                 kind_prefix: str, no_headers: bool, show_labels: bool, label_columns: list[str],
                 now: datetime, is_event: bool, event_type: str | None = None) -> None:
    headers = list(_EVENT_WIDE if is_event and wide else
                   table.headers + table.wide_headers if wide else table.headers)
    if with_namespace:
        headers.insert(0, "NAMESPACE")
    if event_type is not None:
        headers.insert(0, "EVENT")
    headers += [key.rsplit("/", 1)[-1].upper() for key in label_columns]
    if show_labels:
        headers.append("LABELS")
    rows = [] if no_headers else [headers]
    row_fn = table.row
    extras = bool(label_columns) or show_labels
    for obj in objs:
        row = row_fn(obj, wide, now)
        if kind_prefix:
            row[0] = kind_prefix + row[0]
        meta = obj.get("metadata") or {}
        if with_namespace:
            row.insert(0, meta.get("namespace") or "")
        if event_type is not None:
            row.insert(0, _EVENT_CELLS.get(event_type, event_type))
        if extras:
            labels = meta.get("labels") or {}
            row += [labels.get(key, "") for key in label_columns]
            if show_labels:
                row.append(format_labels(labels))
        rows.append(row)
    align_columns(rows, out)
