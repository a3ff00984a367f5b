"""A pod spec's describe sections: containers (state, probes, environment, mounts), volumes,
the QoS class, and a pod template's `Pod Template:` block as kubectl's DescribePodTemplate.

Called by the Pod describer (pods.py), the Deployment describer (workloads.py) and, for
describe_pod_template, `kctl rollout history --revision` (kctl.cli.rollout).
"""

from __future__ import annotations

from typing import Callable

from kctl.output.describe.sections import rfc1123z, write_annotations, write_labels, write_tolerations
from kctl.output.describe.writer import PrefixWriter

__all__ = ["describe_pod_template", "env_resolver", "qos_class", "write_containers", "write_volumes"]


def env_resolver(pod: dict) -> Callable[[str], str]:
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


def write_containers(w: PrefixWriter, label: str, containers: list | None, statuses: list | None,
                     resolve: Callable[[str], str] | None, space: str) -> None:
    """The `label:` section (Containers, Init Containers); `space` indents it inside a pod template."""
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


def write_volumes(w: PrefixWriter, volumes: list | None, space: str) -> None:
    """The `Volumes:` section; `space` indents it inside a pod template."""
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


def qos_class(spec: dict) -> str:
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


def describe_pod_template(w: PrefixWriter, template: dict) -> None:
    """A pod template's `Pod Template:` section, as kubectl's DescribePodTemplate (describe, rollout history)."""
    meta, spec = template.get("metadata") or {}, template.get("spec") or {}
    w.write(0, "Pod Template:\n")
    write_labels(w, "  Labels", meta.get("labels"))
    if meta.get("annotations"):
        write_annotations(w, "  Annotations", meta["annotations"])
    if spec.get("serviceAccountName"):
        w.write(1, f"Service Account:\t{spec['serviceAccountName']}\n")
    if spec.get("initContainers"):
        write_containers(w, "Init Containers", spec["initContainers"], None, None, "  ")
    write_containers(w, "Containers", spec.get("containers"), None, None, "  ")
    write_volumes(w, spec.get("volumes"), "  ")
    if spec.get("priorityClassName"):
        w.write(1, f"Priority Class Name:\t{spec['priorityClassName']}\n")
    write_labels(w, "  Node-Selectors", spec.get("nodeSelector"))
    write_tolerations(w, "  Tolerations", spec.get("tolerations"))
