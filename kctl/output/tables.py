"""What `kubectl get` prints for each kind: one row function per kind and the table of their columns.

A row function takes (object, wide, now) and returns the cells of the object's line, the first
cell being its name; `TABLES` maps a kind (`Kind.group`, `Kind` for the core group) to its
`Table`: the headers, the headers `-o wide` adds and the row function. Adding a kind is one row
function and one `TABLES` entry here. Values are the ones kubectl computes (pod STATUS, RESTARTS
"(5m ago)", node STATUS ...); kinds not listed print `GENERIC` (NAME AGE). Called by
kctl.output.printers (and describe, for `node_roles`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Callable

from kctl.machinery.times import parse_time
from kctl.output.cells import age, format_label_selector, format_labels, human_duration

__all__ = ["Table", "TABLES", "GENERIC", "node_roles", "node_status", "short_revision"]

#: a kind's row: (object, wide, now) -> the cells, the first being the name
RowFunction = Callable[[dict, bool, datetime], list[str]]


@dataclass(frozen=True)
class Table:
    """The columns of one kind: `headers`, the ones `-o wide` adds, and the row function that fills them.

    `wide_replaces`: `wide_headers` are the whole wide header, not added after `headers` (Event's
    wide view has its columns in another order).
    """

    headers: tuple[str, ...]
    wide_headers: tuple[str, ...]
    row: RowFunction
    wide_replaces: bool = False

    def header(self, *, wide: bool) -> tuple[str, ...]:
        """The header line's cells."""
        if not wide:
            return self.headers
        return self.wide_headers if self.wide_replaces else self.headers + self.wide_headers


def _containers_cells(containers: list | None) -> list[str]:
    containers = containers or []
    return [",".join(c.get("name", "") for c in containers),
            ",".join(c.get("image", "") for c in containers)]


def _cond_true(conditions: list | None, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True" for c in conditions or ())


# --- rows, one function per kind -------------------------------------------------

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


def _statefulset_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    """kubectl's printStatefulSet: NAME READY AGE (wide: CONTAINERS IMAGES)."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    desired = spec.get("replicas", 1)
    row = [meta.get("name", ""), f"{status.get('readyReplicas') or 0}/{desired}",
           age(meta.get("creationTimestamp"), now)]
    if wide:
        row += _containers_cells(_template_spec(obj).get("containers"))
    return row


def _controller_revision_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    """kubectl's printControllerRevision: CONTROLLER is `<kind>.<group>/<name>` of the controller owner."""
    meta = obj.get("metadata") or {}
    controller = "<none>"
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            group = str(ref.get("apiVersion") or "").rpartition("/")[0]
            kind = str(ref.get("kind") or "").lower()
            controller = f"{kind}.{group}/{ref.get('name', '')}" if group else f"{kind}/{ref.get('name', '')}"
            break
    return [meta.get("name", ""), controller, str(obj.get("revision") or 0), age(meta.get("creationTimestamp"), now)]


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
        ingress = {i.get("ip") or i.get("hostname") or ""
                   for i in (status.get("loadBalancer") or {}).get("ingress") or () if isinstance(i, dict)}
        lb = ",".join(sorted(i for i in ingress if i))  # kubectl's sets.String: sorted, each once
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


def _service_cidr_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    """printServiceCIDR: NAME CIDRS AGE."""
    meta = obj.get("metadata") or {}
    cidrs = (obj.get("spec") or {}).get("cidrs") or []
    return [meta.get("name", ""), ",".join(str(c) for c in cidrs) or "<none>", age(meta.get("creationTimestamp"), now)]


def _ip_address_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    """printIPAddress: NAME PARENTREF (`services/default/web`; the group after the resource when it has one)."""
    ref = (obj.get("spec") or {}).get("parentRef") or {}
    parent = ""
    if ref:
        parent = str(ref.get("resource") or "").lower() + (f".{ref['group']}".lower() if ref.get("group") else "")
        if ref.get("namespace"):
            parent += f"/{ref['namespace']}"
        parent += f"/{ref.get('name', '')}"
    return [(obj.get("metadata") or {}).get("name", ""), parent]


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


def _more_string(shown: list[str], more: bool, count: int, limit: int = 3) -> str:
    """listWithMoreString: three items, then `+ N more...`; `<unset>` when there are none."""
    text = ",".join(shown)
    if more:
        return f"{text} + {count - limit} more..."
    return text or "<unset>"


def _endpointslice_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    """printEndpointSlice: NAME ADDRESSTYPE PORTS ENDPOINTS AGE."""
    meta = obj.get("metadata") or {}
    ports: list[str] = []
    more, count = False, 0
    for port in obj.get("ports") or ():
        if len(ports) < 3:
            number, name = port.get("port"), port.get("name")
            ports.append(str(number) if number is not None else name if name is not None else "*")
        else:
            more = True
        count += 1
    ports_cell = _more_string(ports, more, count)
    addresses: list[str] = []
    more, count = False, 0
    for endpoint in obj.get("endpoints") or ():
        for address in endpoint.get("addresses") or ():
            if len(addresses) < 3:
                addresses.append(str(address))
            else:
                more = True
            count += 1
    return [meta.get("name", ""), obj.get("addressType") or "", ports_cell, _more_string(addresses, more, count),
            age(meta.get("creationTimestamp"), now)]


def _service_account_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    """printServiceAccount: NAME SECRETS AGE."""
    meta = obj.get("metadata") or {}
    return [meta.get("name", ""), str(len(obj.get("secrets") or ())), age(meta.get("creationTimestamp"), now)]


def _created_at_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    """printRole, printClusterRole, printLimitRange: NAME CREATED AT (RFC 3339, UTC)."""
    meta = obj.get("metadata") or {}
    return [meta.get("name", ""), meta.get("creationTimestamp") or ""]


def _binding_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    """printRoleBinding, printClusterRoleBinding: NAME ROLE AGE; wide adds USERS GROUPS SERVICEACCOUNTS."""
    meta, ref = obj.get("metadata") or {}, obj.get("roleRef") or {}
    row = [meta.get("name", ""), f"{ref.get('kind', '')}/{ref.get('name', '')}",
           age(meta.get("creationTimestamp"), now)]
    if wide:
        users, groups, accounts = [], [], []
        for subject in obj.get("subjects") or ():
            kind, name = subject.get("kind"), subject.get("name", "")
            if kind == "ServiceAccount":
                accounts.append(f"{subject.get('namespace', '')}/{name}")
            elif kind == "User":
                users.append(name)
            elif kind == "Group":
                groups.append(name)
        row += [", ".join(users), ", ".join(groups), ", ".join(accounts)]
    return row


def _load_balancer_cell(status: dict, wide: bool) -> str:
    """ingressLoadBalancerStatusStringer: the IPs and hostnames, cut to 16 characters unless wide."""
    found = {i.get("ip") or i.get("hostname") or "" for i in (status.get("loadBalancer") or {}).get("ingress") or ()
             if isinstance(i, dict)}
    text = ",".join(sorted(f for f in found if f))  # kubectl's sets.String: sorted, each once
    return text[:13] + "..." if not wide and len(text) > 16 else text


def _hosts_cell(rules: list) -> str:
    """formatHosts: the first three hosts, `+ N more...` counting every rule past the third; `*` if none."""
    hosts: list[str] = []
    more = False
    for rule in rules:
        if len(hosts) == 3:
            more = True
        if not more and isinstance(rule, dict) and rule.get("host"):
            hosts.append(str(rule["host"]))
    if not hosts:
        return "*"
    return f"{','.join(hosts)} + {len(rules) - 3} more..." if more else ",".join(hosts)


def _ingress_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    """printIngress: NAME CLASS HOSTS ADDRESS PORTS AGE."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    return [meta.get("name", ""), spec.get("ingressClassName") or "<none>", _hosts_cell(spec.get("rules") or []),
            _load_balancer_cell(obj.get("status") or {}, wide), "80, 443" if spec.get("tls") else "80",
            age(meta.get("creationTimestamp"), now)]


def _ingress_class_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    """printIngressClass: NAME CONTROLLER PARAMETERS (`Kind.group/name`) AGE."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    params = spec.get("parameters")
    cell = "<none>"
    if params:
        cell = str(params.get("kind", "")) + (f".{params['apiGroup']}" if params.get("apiGroup") else "")
        cell += f"/{params.get('name', '')}"
    return [meta.get("name", ""), spec.get("controller", ""), cell, age(meta.get("creationTimestamp"), now)]


def _network_policy_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    """printNetworkPolicy: NAME POD-SELECTOR AGE (an empty selector, all pods, is `<none>`)."""
    meta = obj.get("metadata") or {}
    return [meta.get("name", ""), format_label_selector((obj.get("spec") or {}).get("podSelector")),
            age(meta.get("creationTimestamp"), now)]


def _pdb_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    """printPodDisruptionBudget: NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    least, most = spec.get("minAvailable"), spec.get("maxUnavailable")
    return [meta.get("name", ""), "N/A" if least is None else str(least), "N/A" if most is None else str(most),
            str((obj.get("status") or {}).get("disruptionsAllowed") or 0), age(meta.get("creationTimestamp"), now)]


def _quota_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    """printResourceQuota: NAME AGE REQUEST LIMIT, `resource: used/hard` from the status (`limits.*` in LIMIT)."""
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    hard, used = status.get("hard") or {}, status.get("used") or {}
    requests, limits = [], []
    for resource in sorted(hard):
        cell = f"{resource}: {used.get(resource, 0)}/{hard[resource]}"
        (limits if resource.split(".")[0] == "limits" and "." in resource else requests).append(cell)
    return [meta.get("name", ""), age(meta.get("creationTimestamp"), now), ", ".join(requests), ", ".join(limits)]


def _priority_class_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    """printPriorityClass: NAME VALUE GLOBAL-DEFAULT AGE PREEMPTIONPOLICY."""
    meta = obj.get("metadata") or {}
    return [meta.get("name", ""), str(obj.get("value") or 0), "true" if obj.get("globalDefault") is True else "false",
            age(meta.get("creationTimestamp"), now), str(obj.get("preemptionPolicy") or "")]


def _pv_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    """printPersistentVolume: NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS
    VOLUMEATTRIBUTESCLASS REASON AGE; wide adds VOLUMEMODE."""
    from kctl.machinery.persistentvolumes import access_modes_string, volume_class

    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    ref = spec.get("claimRef") or {}
    claim = f"{ref.get('namespace') or ''}/{ref.get('name') or ''}" if spec.get("claimRef") else ""
    phase = "Terminating" if meta.get("deletionTimestamp") else status.get("phase") or ""
    cells = [meta.get("name", ""), str((spec.get("capacity") or {}).get("storage") or "0"),
             access_modes_string(spec.get("accessModes")), str(spec.get("persistentVolumeReclaimPolicy") or ""),
             phase, claim, volume_class(obj), spec.get("volumeAttributesClassName") or "<unset>",
             status.get("reason") or "", age(meta.get("creationTimestamp"), now)]
    if wide:
        cells.append(spec.get("volumeMode") or "<unset>")
    return cells


def _pvc_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    """printPersistentVolumeClaim: NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS VOLUMEATTRIBUTESCLASS AGE;
    capacity and access modes from the status once a volume is named; wide adds VOLUMEMODE."""
    from kctl.machinery.persistentvolumes import access_modes_string, claim_class

    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    phase = "Terminating" if meta.get("deletionTimestamp") else status.get("phase") or ""
    capacity = modes = ""
    if spec.get("volumeName"):
        modes = access_modes_string(status.get("accessModes"))
        capacity = str((status.get("capacity") or {}).get("storage") or "0")
    cells = [meta.get("name", ""), phase, spec.get("volumeName") or "", capacity, modes, claim_class(obj),
             spec.get("volumeAttributesClassName") or "<unset>", age(meta.get("creationTimestamp"), now)]
    if wide:
        cells.append(spec.get("volumeMode") or "<unset>")
    return cells


def _storage_class_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    """printStorageClass: NAME (` (default)` after a default class's) PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE
    ALLOWVOLUMEEXPANSION AGE."""
    from kctl.machinery.persistentvolumes import is_default_class

    meta = obj.get("metadata") or {}
    name = meta.get("name", "") + (" (default)" if is_default_class(obj) else "")
    return [name, str(obj.get("provisioner") or ""), str(obj.get("reclaimPolicy") or "Delete"),
            str(obj.get("volumeBindingMode") or "Immediate"),
            "true" if obj.get("allowVolumeExpansion") is True else "false", age(meta.get("creationTimestamp"), now)]


def _hpa_metric_cell(spec: dict, status: dict | None) -> str:
    """One metric of formatHPAMetrics: `cpu: 12%/70%`, `memory: 3Mi/100Mi`, `<unknown>` for what is not read yet."""
    kind = spec.get("type")
    field = {"Resource": "resource", "ContainerResource": "containerResource", "Pods": "pods", "Object": "object",
             "External": "external"}.get(str(kind))
    if field is None:
        return "<unknown type>"
    source = spec.get(field) or {}
    target = source.get("target") or {}
    current = (status or {}).get(field) if (status or {}).get("type") == kind else None
    now = (current or {}).get("current") or {}
    if kind in ("Resource", "ContainerResource"):
        if target.get("averageValue") is not None:
            value = str(now["averageValue"]) if current is not None and now.get("averageValue") is not None \
                else "<unknown>"
            return f"{source.get('name', '')}: {value}/{target['averageValue']}"
        value = f"{now['averageUtilization']}%" if now.get("averageUtilization") is not None else "<unknown>"
        goal = f"{target['averageUtilization']}%" if target.get("averageUtilization") is not None else "<auto>"
        return f"{source.get('name', '')}: {value}/{goal}"
    if kind == "Pods" or target.get("averageValue") is not None:
        value = str(now.get("averageValue")) if now.get("averageValue") is not None else "<unknown>"
        return f"{value}/{target.get('averageValue')}" + (" (avg)" if kind != "Pods" else "")
    value = str(now.get("value")) if now.get("value") is not None else "<unknown>"
    return f"{value}/{target.get('value')}"


def _hpa_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    """printHorizontalPodAutoscaler: NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE (2 metrics, then + N more)."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    ref = spec.get("scaleTargetRef") or {}
    specs = [m for m in spec.get("metrics") or () if isinstance(m, dict)]
    current = [m if isinstance(m, dict) else {} for m in status.get("currentMetrics") or ()]
    cells = [_hpa_metric_cell(m, current[i] if i < len(current) else None) for i, m in enumerate(specs)]
    targets = ", ".join(cells[:2]) + (f" + {len(cells) - 2} more..." if len(cells) > 2 else "") if cells else "<none>"
    least = spec.get("minReplicas")
    return [meta.get("name", ""), f"{ref.get('kind', '')}/{ref.get('name', '')}", targets,
            "<unset>" if least is None else str(least), str(spec.get("maxReplicas") or 0),
            str(status.get("currentReplicas") or 0), age(meta.get("creationTimestamp"), now)]


def _generic_row(obj: dict, wide: bool, now: datetime) -> list[str]:
    meta = obj.get("metadata") or {}
    return [meta.get("name", ""), age(meta.get("creationTimestamp"), now)]


_CW = ("CONTAINERS", "IMAGES", "SELECTOR")
_BINDING_WIDE = ("USERS", "GROUPS", "SERVICEACCOUNTS")
#: the table of each kind kctl knows, by `Kind.group`
TABLES: dict[str, Table] = {
    "Pod": Table(("NAME", "READY", "STATUS", "RESTARTS", "AGE"),
                 ("IP", "NODE", "NOMINATED NODE", "READINESS GATES"), _pod_row),
    "Deployment.apps": Table(("NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"), _CW,
                             _deployment_row),
    "ReplicaSet.apps": Table(("NAME", "DESIRED", "CURRENT", "READY", "AGE"), _CW, _replicaset_row),
    "DaemonSet.apps": Table(("NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE",
                             "NODE SELECTOR", "AGE"), _CW, _daemonset_row),
    "StatefulSet.apps": Table(("NAME", "READY", "AGE"), ("CONTAINERS", "IMAGES"), _statefulset_row),
    "ControllerRevision.apps": Table(("NAME", "CONTROLLER", "REVISION", "AGE"), (), _controller_revision_row),
    "Job.batch": Table(("NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"), _CW, _job_row),
    "CronJob.batch": Table(("NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE",
                            "AGE"), _CW, _cronjob_row),
    "Service": Table(("NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"), ("SELECTOR",),
                     _service_row),
    "Endpoints": Table(("NAME", "ENDPOINTS", "AGE"), (), _endpoints_row),
    "ConfigMap": Table(("NAME", "DATA", "AGE"), (), _configmap_row),
    "Secret": Table(("NAME", "TYPE", "DATA", "AGE"), (), _secret_row),
    "Namespace": Table(("NAME", "STATUS", "AGE"), (), _namespace_row),
    "Node": Table(("NAME", "STATUS", "ROLES", "AGE", "VERSION"),
                  ("INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME", "CAPACITY",
                   "REASON"),
                  _node_row),
    "Event": Table(("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"),
                   ("LAST SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE", "MESSAGE", "FIRST SEEN", "COUNT",
                    "NAME"), _event_row, wide_replaces=True),
    "Lease.coordination.k8s.io": Table(("NAME", "HOLDER", "AGE"), (), _lease_row),
    "ServiceCIDR.networking.k8s.io": Table(("NAME", "CIDRS", "AGE"), (), _service_cidr_row),
    "IPAddress.networking.k8s.io": Table(("NAME", "PARENTREF"), (), _ip_address_row),
    "EndpointSlice.discovery.k8s.io": Table(("NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"), (),
                                            _endpointslice_row),
    "CustomResourceDefinition.apiextensions.k8s.io": Table(("NAME", "CREATED AT"), (), _crd_row),
    "MutatingAdmissionHook.kctl.io": Table(("NAME", "FAILURE-POLICY", "TIMEOUT", "AGE"), (),
                                           _hook_row),
    "ValidatingAdmissionHook.kctl.io": Table(("NAME", "FAILURE-POLICY", "TIMEOUT", "AGE"), (),
                                             _hook_row),
    "GitSource.kctl.io": Table(("NAME", "URL", "REVISION", "READY", "STATUS", "AGE"), (), _gitsource_row),
    "ServiceAccount": Table(("NAME", "SECRETS", "AGE"), (), _service_account_row),
    "Role.rbac.authorization.k8s.io": Table(("NAME", "CREATED AT"), (), _created_at_row),
    "ClusterRole.rbac.authorization.k8s.io": Table(("NAME", "CREATED AT"), (), _created_at_row),
    "RoleBinding.rbac.authorization.k8s.io": Table(("NAME", "ROLE", "AGE"), _BINDING_WIDE, _binding_row),
    "ClusterRoleBinding.rbac.authorization.k8s.io": Table(("NAME", "ROLE", "AGE"), _BINDING_WIDE, _binding_row),
    "Ingress.networking.k8s.io": Table(("NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"), (), _ingress_row),
    "IngressClass.networking.k8s.io": Table(("NAME", "CONTROLLER", "PARAMETERS", "AGE"), (), _ingress_class_row),
    "NetworkPolicy.networking.k8s.io": Table(("NAME", "POD-SELECTOR", "AGE"), (), _network_policy_row),
    "PodDisruptionBudget.policy": Table(("NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"),
                                        (), _pdb_row),
    "ResourceQuota": Table(("NAME", "AGE", "REQUEST", "LIMIT"), (), _quota_row),
    "LimitRange": Table(("NAME", "CREATED AT"), (), _created_at_row),
    "PersistentVolume": Table(("NAME", "CAPACITY", "ACCESS MODES", "RECLAIM POLICY", "STATUS", "CLAIM", "STORAGECLASS",
                               "VOLUMEATTRIBUTESCLASS", "REASON", "AGE"), ("VOLUMEMODE",), _pv_row),
    "PersistentVolumeClaim": Table(("NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS MODES", "STORAGECLASS",
                                    "VOLUMEATTRIBUTESCLASS", "AGE"), ("VOLUMEMODE",), _pvc_row),
    "StorageClass.storage.k8s.io": Table(("NAME", "PROVISIONER", "RECLAIMPOLICY", "VOLUMEBINDINGMODE",
                                          "ALLOWVOLUMEEXPANSION", "AGE"), (), _storage_class_row),
    "PriorityClass.scheduling.k8s.io": Table(("NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"), (),
                                             _priority_class_row),
    "HorizontalPodAutoscaler.autoscaling": Table(("NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS",
                                                  "AGE"), (), _hpa_row),
}
#: the table of any other kind
GENERIC = Table(("NAME", "AGE"), (), _generic_row)
