"""`kctl get` output: kubectl's tables for every built-in kind, and -o wide/name/yaml/json/jsonpath/custom-columns."""

from __future__ import annotations

import io
import json
import re
from datetime import datetime, timezone

import pytest

from kctl.machinery.resources import ResourceType, builtin_registry
from kctl.output.formats import parse_output
from kctl.output.printers import print_objects

NOW = datetime(2026, 12, 2, 17, 0, 0, tzinfo=timezone.utc)
CREATED = "2026-12-02T16:00:00Z"  # 60m before NOW
REGISTRY = builtin_registry()
WIDGETS = ResourceType("example.com", "v1", "Widget", "widgets", True, crd_schema={"type": "object"})


def meta(name: str, namespace: str | None = "default", **extra) -> dict:
    m = {"name": name, "creationTimestamp": CREATED, **extra}
    if namespace:
        m["namespace"] = namespace
    return m


def pod(name: str, *, phase: str = "Running", statuses: list | None = None, containers: int = 1,
        deleting: bool = False, **status) -> dict:
    m = meta(name, labels={"app": "web"})
    if deleting:
        m["deletionTimestamp"] = "2026-12-02T17:00:30Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": m,
            "spec": {"nodeName": "h1",
                     "containers": [{"name": f"c{i}", "image": "busybox"} for i in range(containers)]},
            "status": {"phase": phase, "containerStatuses": statuses or [], **status}}


RUNNING = {"running": {"startedAt": CREATED}}
CRASHLOOP = pod("crash", statuses=[{
    "name": "c0", "ready": False, "restartCount": 5, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
    "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "2026-12-02T16:55:00Z"}}}])
COMPLETED = pod("done", phase="Succeeded", statuses=[{
    "name": "c0", "ready": False, "restartCount": 0,
    "state": {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": "2026-12-02T16:10:00Z"}}}])
TERMINATING = pod("going", deleting=True, statuses=[{"name": "c0", "ready": True, "restartCount": 0,
                                                     "state": RUNNING}])
CREATING = pod("new", phase="Pending", statuses=[{"name": "c0", "ready": False, "restartCount": 0,
                                                  "state": {"waiting": {"reason": "ContainerCreating"}}}])
PULL_ERROR = pod("badimg", phase="Pending", statuses=[{"name": "c0", "ready": False, "restartCount": 0,
                                                       "state": {"waiting": {"reason": "ErrImagePull"}}}])
UNSCHEDULED = pod("waiting", phase="Pending", conditions=[
    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}])
HALF_READY = pod("half", containers=2, statuses=[
    {"name": "c0", "ready": True, "restartCount": 0, "state": RUNNING},
    {"name": "c1", "ready": False, "restartCount": 0, "state": RUNNING}])
KILLED = pod("killed", phase="Failed", statuses=[{"name": "c0", "ready": False, "restartCount": 0,
                                                  "state": {"terminated": {"exitCode": 137}}}])
INIT = pod("init", phase="Pending", initContainerStatuses=[
    {"name": "setup", "ready": False, "restartCount": 0, "state": {"running": {"startedAt": CREATED}}}])
INIT["spec"]["initContainers"] = [{"name": "setup", "image": "busybox"}]

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta("web"),
              "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.25"},
                                                            {"name": "log", "image": "busybox"}]}}},
              "status": {"replicas": 3, "updatedReplicas": 3, "readyReplicas": 2, "availableReplicas": 2}}
REPLICASET = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta("web-7d4b9c"),
              "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}},
              "status": {"replicas": 3, "readyReplicas": 2}}
DAEMONSET = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta("agent"),
             "spec": {"template": {"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}}}},
             "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2,
                        "updatedNumberScheduled": 3, "numberAvailable": 2}}
JOB_DONE = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("migrate"),
            "spec": {"completions": 1},
            "status": {"succeeded": 1, "startTime": "2026-12-02T16:00:05Z",
                       "completionTime": "2026-12-02T16:00:35Z",
                       "conditions": [{"type": "Complete", "status": "True"}]}}
JOB_RUNNING = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("crunch"),
               "spec": {"parallelism": 2}, "status": {"startTime": "2026-12-02T16:55:00Z", "active": 2}}
CRONJOB = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta("backup"),
           "spec": {"schedule": "*/5 * * * *", "suspend": False},
           "status": {"active": [{"name": "backup-1"}], "lastScheduleTime": "2026-12-02T16:58:00Z"}}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": meta("web"),
           "spec": {"type": "NodePort", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                    "ports": [{"port": 80, "protocol": "TCP"}, {"port": 443, "nodePort": 30443}],
                    "selector": {"app": "web"}}}
LB_SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": meta("lb"),
              "spec": {"type": "LoadBalancer", "clusterIPs": ["10.96.0.11"],
                       "ports": [{"port": 53, "protocol": "UDP"}]}}
ENDPOINTS = {"apiVersion": "v1", "kind": "Endpoints", "metadata": meta("web"),
             "subsets": [{"addresses": [{"ip": f"10.88.0.{i}"} for i in range(2, 6)],
                          "ports": [{"port": 80}]}]}
CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta("cfg"),
             "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}}
SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": meta("db"), "type": "Opaque",
          "data": {"password": "c2VjcmV0"}}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": meta("prod", None),
             "status": {"phase": "Terminating"}}
NODE_DOWN = {"apiVersion": "v1", "kind": "Node", "metadata": meta("h2", None),
             "spec": {"unschedulable": True},
             "status": {"conditions": [{"type": "Ready", "status": "Unknown"}],
                        "nodeInfo": {"kubeletVersion": "kctl-0.1.0"}}}
NODE_UP = {"apiVersion": "v1", "kind": "Node",
           "metadata": meta("h1", None, labels={"node-role.kubernetes.io/control-plane": ""}),
           "status": {"conditions": [{"type": "Ready", "status": "True"}],
                      "addresses": [{"type": "InternalIP", "address": "10.77.0.11"}],
                      "nodeInfo": {"kubeletVersion": "kctl-0.1.0", "osImage": "Debian GNU/Linux 12",
                                   "kernelVersion": "6.1.0", "containerRuntimeVersion": "podman://4.3.1"},
                      "capacity": {"cpu": "2", "memory": "24522316Ki"}}}
NODE_NEW = {"apiVersion": "v1", "kind": "Node", "metadata": meta("h3", None), "status": {}}
EVENT = {"apiVersion": "v1", "kind": "Event", "metadata": meta("crash.17a"), "type": "Warning",
         "reason": "BackOff", "message": "Back-off restarting failed container\n", "count": 3,
         "involvedObject": {"kind": "Pod", "name": "crash"},
         "firstTimestamp": "2026-12-02T16:50:00Z", "lastTimestamp": "2026-12-02T16:55:00Z"}
LEASE = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta("h1", "kctl-node-lease"),
         "spec": {"holderIdentity": "h1"}}
CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": meta("widgets.example.com", None)}
HOOK = {"apiVersion": "kctl.io/v1alpha1", "kind": "ValidatingAdmissionHook", "metadata": meta("deny-latest", None),
        "spec": {"failurePolicy": "Ignore", "timeoutSeconds": 5}}
WIDGET = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": meta("w1"), "spec": {"size": 3}}


def run(objs, rt, spec=None, **kw) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    print_objects(objs, rt, parse_output(spec), out, err=err, now=NOW, **kw)
    return out.getvalue(), err.getvalue()


def cells(text: str) -> list[list[str]]:
    """Table text back into cells (columns are at least three spaces apart)."""
    return [re.split(r" {3,}", line.rstrip()) for line in text.splitlines()]


TABLE_CASES = [
    ("pod-crashloop", [CRASHLOOP], "pods",
     [["NAME", "READY", "STATUS", "RESTARTS", "AGE"], ["crash", "0/1", "CrashLoopBackOff", "5 (5m ago)", "60m"]]),
    ("pod-completed", [COMPLETED], "pods", [["done", "0/1", "Completed", "0", "60m"]]),
    ("pod-terminating", [TERMINATING], "pods", [["going", "1/1", "Terminating", "0", "60m"]]),
    ("pod-creating", [CREATING], "pods", [["new", "0/1", "ContainerCreating", "0", "60m"]]),
    ("pod-errimagepull", [PULL_ERROR], "pods", [["badimg", "0/1", "ErrImagePull", "0", "60m"]]),
    ("pod-unscheduled", [UNSCHEDULED], "pods", [["waiting", "0/1", "Pending", "0", "60m"]]),
    ("pod-half-ready", [HALF_READY], "pods", [["half", "1/2", "Running", "0", "60m"]]),
    ("pod-exitcode", [KILLED], "pods", [["killed", "0/1", "ExitCode:137", "0", "60m"]]),
    ("pod-init", [INIT], "pods", [["init", "0/1", "Init:0/1", "0", "60m"]]),
    ("deployment", [DEPLOYMENT], "deployments",
     [["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"], ["web", "2/3", "3", "2", "60m"]]),
    ("replicaset", [REPLICASET], "rs",
     [["NAME", "DESIRED", "CURRENT", "READY", "AGE"], ["web-7d4b9c", "3", "3", "2", "60m"]]),
    ("daemonset", [DAEMONSET], "ds",
     [["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE", "NODE SELECTOR", "AGE"],
      ["agent", "3", "3", "2", "3", "2", "kubernetes.io/os=linux", "60m"]]),
    ("job", [JOB_DONE, JOB_RUNNING], "jobs",
     [["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"], ["migrate", "Complete", "1/1", "30s", "60m"],
      ["crunch", "Running", "0/1 of 2", "5m", "60m"]]),
    ("cronjob", [CRONJOB], "cronjobs",
     [["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "AGE"],
      ["backup", "*/5 * * * *", "<none>", "False", "1", "2m", "60m"]]),
    ("service", [SERVICE, LB_SERVICE], "svc",
     [["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"],
      ["web", "NodePort", "10.96.0.10", "<none>", "80/TCP,443:30443/TCP", "60m"],
      ["lb", "LoadBalancer", "10.96.0.11", "<pending>", "53/UDP", "60m"]]),
    ("endpoints", [ENDPOINTS], "ep",
     [["NAME", "ENDPOINTS", "AGE"], ["web", "10.88.0.2:80,10.88.0.3:80,10.88.0.4:80 + 1 more...", "60m"]]),
    ("configmap", [CONFIGMAP], "cm", [["NAME", "DATA", "AGE"], ["cfg", "3", "60m"]]),
    ("secret", [SECRET], "secrets", [["NAME", "TYPE", "DATA", "AGE"], ["db", "Opaque", "1", "60m"]]),
    ("namespace", [NAMESPACE], "ns", [["NAME", "STATUS", "AGE"], ["prod", "Terminating", "60m"]]),
    ("node", [NODE_UP, NODE_DOWN, NODE_NEW], "nodes",
     [["NAME", "STATUS", "ROLES", "AGE", "VERSION"], ["h1", "Ready", "control-plane", "60m", "kctl-0.1.0"],
      ["h2", "NotReady,SchedulingDisabled", "<none>", "60m", "kctl-0.1.0"], ["h3", "Unknown", "<none>", "60m"]]),
    ("event", [EVENT], "events",
     [["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
      ["5m", "Warning", "BackOff", "pod/crash", "Back-off restarting failed container"]]),
    ("lease", [LEASE], "leases", [["NAME", "HOLDER", "AGE"], ["h1", "h1", "60m"]]),
    ("crd", [CRD], "crds", [["NAME", "CREATED AT"], ["widgets.example.com", CREATED]]),
    ("hook", [HOOK], "vhook",
     [["NAME", "FAILURE-POLICY", "TIMEOUT", "AGE"], ["deny-latest", "Ignore", "5s", "60m"]]),
    ("custom-resource", [WIDGET], WIDGETS, [["NAME", "AGE"], ["w1", "60m"]]),
]


@pytest.mark.parametrize("objs,resource,expected", [c[1:] for c in TABLE_CASES], ids=[c[0] for c in TABLE_CASES])
def test_table_columns_and_values(objs, resource, expected):
    """Each kind prints kubectl's columns and the values kubectl computes."""
    rt = resource if isinstance(resource, ResourceType) else REGISTRY.lookup(resource)
    out, err = run(objs, rt)
    rows = cells(out)
    assert len(rows) == len(objs) + 1
    assert rows[-len(expected):] == expected
    assert err == ""


def test_table_alignment_is_kubectls():
    """Columns are padded to the widest cell plus three spaces (at least six); the last is not padded."""
    out, _ = run([CRASHLOOP, COMPLETED], REGISTRY.lookup("pods"))
    assert out == (
        "NAME    READY   STATUS             RESTARTS     AGE\n"
        "crash   0/1     CrashLoopBackOff   5 (5m ago)   60m\n"
        "done    0/1     Completed          0            60m\n")


WIDE_CASES = [
    ("pods", [CRASHLOOP],
     "NAME    READY   STATUS             RESTARTS     AGE   IP       NODE   NOMINATED NODE   READINESS GATES\n"
     "crash   0/1     CrashLoopBackOff   5 (5m ago)   60m   <none>   h1     <none>           <none>\n"),
    ("deployments", [DEPLOYMENT],
     "NAME   READY   UP-TO-DATE   AVAILABLE   AGE   CONTAINERS   IMAGES               SELECTOR\n"
     "web    2/3     3            2           60m   web,log      nginx:1.25,busybox   app=web\n"),
    ("nodes", [NODE_UP],
     "NAME   STATUS   ROLES           AGE   VERSION      INTERNAL-IP   EXTERNAL-IP   OS-IMAGE              "
     "KERNEL-VERSION   CONTAINER-RUNTIME   CAPACITY        REASON\n"
     "h1     Ready    control-plane   60m   kctl-0.1.0   10.77.0.11    <none>        Debian GNU/Linux 12  "
     " 6.1.0            podman://4.3.1      2 cpu, 23.4Gi   <none>\n"),
    ("svc", [SERVICE],
     "NAME   TYPE       CLUSTER-IP   EXTERNAL-IP   PORT(S)                AGE   SELECTOR\n"
     "web    NodePort   10.96.0.10   <none>        80/TCP,443:30443/TCP   60m   app=web\n"),
]


@pytest.mark.parametrize("resource,objs,expected", WIDE_CASES, ids=[c[0] for c in WIDE_CASES])
def test_wide(resource, objs, expected):
    """-o wide adds kubectl's extra columns."""
    assert run(objs, REGISTRY.lookup(resource), "wide")[0] == expected


def test_all_namespaces_adds_namespace_column():
    """-A puts NAMESPACE first for namespaced kinds."""
    other = pod("api")
    other["metadata"]["namespace"] = "prod"
    out, _ = run([CRASHLOOP, other], REGISTRY.lookup("pods"), all_namespaces=True)
    assert cells(out) == [["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"],
                          ["default", "crash", "0/1", "CrashLoopBackOff", "5 (5m ago)", "60m"],
                          ["prod", "api", "0/1", "Running", "0", "60m"]]


def test_all_namespaces_cluster_scoped_has_no_namespace_column():
    """-A on a cluster-scoped kind prints no NAMESPACE column, as kubectl."""
    out, _ = run([NODE_UP], REGISTRY.lookup("nodes"), all_namespaces=True)
    assert out.startswith("NAME ")


def test_show_kind_and_mixed_kinds():
    """Several kinds print one table each, blank line between, names prefixed `kind.group/`."""
    out, _ = run([CRASHLOOP, DEPLOYMENT], None, show_kind=True)
    assert out == ("NAME        READY   STATUS             RESTARTS     AGE\n"
                   "pod/crash   0/1     CrashLoopBackOff   5 (5m ago)   60m\n"
                   "\n"
                   "NAME                  READY   UP-TO-DATE   AVAILABLE   AGE\n"
                   "deployment.apps/web   2/3     3            2           60m\n")


def test_no_headers_and_labels():
    """--no-headers drops the header; -L adds a column per label; --show-labels adds LABELS."""
    out, _ = run([CRASHLOOP], REGISTRY.lookup("pods"), no_headers=True)
    assert cells(out) == [["crash", "0/1", "CrashLoopBackOff", "5 (5m ago)", "60m"]]
    out, _ = run([CRASHLOOP, COMPLETED], REGISTRY.lookup("pods"), show_labels=True,
                 label_columns=["app.kubernetes.io/name", "app"])
    assert cells(out)[0][-3:] == ["NAME", "APP", "LABELS"]
    assert out.splitlines()[1].endswith("60m          web   app=web")


EMPTY_CASES = [
    ("namespaced", "pods", {"namespace": "dev"}, "No resources found in dev namespace.\n"),
    ("all-namespaces", "pods", {"namespace": "dev", "all_namespaces": True}, "No resources found\n"),
    ("cluster-scoped", "nodes", {"namespace": "dev"}, "No resources found\n"),
]


@pytest.mark.parametrize("resource,kw,message", [c[1:] for c in EMPTY_CASES], ids=[c[0] for c in EMPTY_CASES])
def test_empty_table_says_no_resources_on_err(resource, kw, message):
    """An empty table prints kubectl's "No resources found" to err and nothing to out."""
    out, err = run([], REGISTRY.lookup(resource), **kw)
    assert (out, err) == ("", message)


def test_name_output():
    """-o name prints `kind.group/name`, lower-case kind, core kinds without a group."""
    out, _ = run([CRASHLOOP, DEPLOYMENT, WIDGET, NODE_UP], None, "name")
    assert out == "pod/crash\ndeployment.apps/web\nwidget.example.com/w1\nnode/h1\n"


def test_custom_columns():
    """custom-columns: several values joined by commas, `<none>` when missing, maps as Go prints them."""
    spec = ("custom-columns=NAME:.metadata.name,IMAGES:.spec.containers[*].image,NODE:spec.nodeName,"
            "X:{.spec.nope},L:.metadata.labels")
    out, _ = run([CRASHLOOP, HALF_READY], REGISTRY.lookup("pods"), spec)
    assert out == ("NAME    IMAGES            NODE   X        L\n"
                   "crash   busybox           h1     <none>   map[app:web]\n"
                   "half    busybox,busybox   h1     <none>   map[app:web]\n")


def test_custom_columns_no_headers_empty():
    """custom-columns with no objects still prints its header (and no "No resources" message)."""
    assert run([], REGISTRY.lookup("pods"), "custom-columns=N:.metadata.name") == ("N\n", "")


def test_jsonpath_single_object_and_list():
    """-o jsonpath sees the object itself for one object, a `kind: List` for several."""
    rt = REGISTRY.lookup("pods")
    assert run([CRASHLOOP], rt, "jsonpath={.metadata.name}")[0] == "crash"
    assert run([CRASHLOOP, COMPLETED], rt, "jsonpath={.kind}:{.items[*].metadata.name}")[0] == "List:crash done"
    assert run([CRASHLOOP], rt, "jsonpath={.kind}", force_list=True)[0] == "List"


def test_json_and_yaml_list():
    """-o json/yaml: one object as itself, several as kubectl's `kind: List`."""
    rt = REGISTRY.lookup("pods")
    assert json.loads(run([CRASHLOOP], rt, "json")[0]) == CRASHLOOP
    assert json.loads(run([CRASHLOOP, COMPLETED], rt, "json")[0]) == {
        "apiVersion": "v1", "items": [CRASHLOOP, COMPLETED], "kind": "List", "metadata": {"resourceVersion": ""}}
    text = run([CRASHLOOP, COMPLETED], rt, "yaml")[0]
    assert "kind: List" in text and "resourceVersion: \"\"" in text.replace("''", '""')
