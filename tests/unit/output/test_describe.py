"""`kctl describe`: kubectl's layouts for Pod, Deployment, Node, Secret, ConfigMap, and its generic describer."""

from __future__ import annotations

import copy
import time
from datetime import datetime, timezone

import pytest

from kctl.machinery.resources import ResourceType, builtin_registry
from kctl.output.describe import describe, smart_label, tabwrite

NOW = datetime(2026, 12, 2, 17, 0, 0, tzinfo=timezone.utc)
CREATED = "2026-12-02T16:00:00Z"
REGISTRY = builtin_registry()
WIDGETS = ResourceType("example.com", "v1", "Widget", "widgets", True, crd_schema={"type": "object"})


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    """Timestamps print in the local zone, as kubectl's do: pin it to UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def event(reason: str, message: str, *, first: str, last: str | None = None, count: int = 1,
          type_: str = "Normal", component: str = "kubelet") -> dict:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"x.{reason}", "namespace": "default"},
            "type": type_, "reason": reason, "message": message, "count": count,
            "firstTimestamp": first, "lastTimestamp": last or first, "source": {"component": component}}


CRASHING_POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "web-1", "namespace": "default", "creationTimestamp": CREATED,
                 "labels": {"app": "web", "pod-template-hash": "abc"},
                 "annotations": {"kubectl.kubernetes.io/last-applied-configuration": '{"secret": "x"}',
                                 "note": "hi"},
                 "ownerReferences": [{"kind": "ReplicaSet", "name": "web-abc", "controller": True}]},
    "spec": {"nodeName": "h1",
             "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "exit 1"],
                             "ports": [{"containerPort": 80}],
                             "env": [{"name": "A", "value": "1"},
                                     {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                                     {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "s", "key": "pw"}}}],
                             "resources": {"limits": {"memory": "128Mi"},
                                           "requests": {"cpu": "100m", "memory": "64Mi"}},
                             "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
                             "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
             "volumes": [{"name": "data", "emptyDir": {}}],
             "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                              "effect": "NoExecute", "tolerationSeconds": 300}]},
    "status": {"phase": "Running", "hostIP": "10.77.0.11", "podIP": "10.88.0.2", "podIPs": [{"ip": "10.88.0.2"}],
               "startTime": "2026-12-02T16:00:01Z",
               "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "False"},
                              {"type": "ContainersReady", "status": "False"},
                              {"type": "PodScheduled", "status": "True"}],
               "containerStatuses": [{
                   "name": "c", "ready": False, "restartCount": 5, "containerID": "podman://abc",
                   "imageID": "sha256:1", "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                   "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": "2026-12-02T16:54:58Z",
                                                "finishedAt": "2026-12-02T16:55:00Z"}}}]},
}
CRASH_EVENTS = [
    event("BackOff", "Back-off restarting failed container", type_="Warning",
          first="2026-12-02T16:50:00Z", last="2026-12-02T16:55:00Z", count=3),
    event("Scheduled", "Successfully assigned default/web-1 to h1", first=CREATED, component="default-scheduler"),
]

CRASHING_POD_TEXT = """\
Name:         web-1
Namespace:    default
Node:         h1/10.77.0.11
Start Time:   Wed, 02 Dec 2026 16:00:01 +0000
Labels:       app=web
              pod-template-hash=abc
Annotations:  note: hi
Status:       Running
IP:           10.88.0.2
IPs:
  IP:           10.88.0.2
Controlled By:  ReplicaSet/web-abc
Containers:
  c:
    Container ID:  podman://abc
    Image:         busybox
    Image ID:      sha256:1
    Port:          80/TCP
    Host Port:     0/TCP
    Command:
      sh
      -c
      exit 1
    State:          Waiting
      Reason:       CrashLoopBackOff
    Last State:     Terminated
      Reason:       Error
      Exit Code:    1
      Started:      Wed, 02 Dec 2026 16:54:58 +0000
      Finished:     Wed, 02 Dec 2026 16:55:00 +0000
    Ready:          False
    Restart Count:  5
    Limits:
      memory:  128Mi
    Requests:
      cpu:     100m
      memory:  64Mi
    Liveness:  http-get http://:8080/healthz delay=0s timeout=1s period=10s #success=1 #failure=3
    Environment:
      A:    1
      POD:  web-1 (v1:metadata.name)
      PW:   <set to the key 'pw' in secret 's'>  Optional: false
    Mounts:
      /data from data (rw)
Conditions:
  Type              Status
  Initialized       True 
  Ready             False 
  ContainersReady   False 
  PodScheduled      True 
Volumes:
  data:
    Type:        EmptyDir (a temporary directory that shares a pod's lifetime)
    Medium:      
    SizeLimit:   <unset>
QoS Class:       Burstable
Node-Selectors:  <none>
Tolerations:     node.kubernetes.io/not-ready:NoExecute op=Exists for 300s
Events:
  Type     Reason     Age               From               Message
  ----     ------     ----              ----               -------
  Normal   Scheduled  60m               default-scheduler  Successfully assigned default/web-1 to h1
  Warning  BackOff    5m (x3 over 10m)  kubelet            Back-off restarting failed container
"""


def test_pod_with_events():
    """A crash-looping pod reads as kubectl describe pod, events sorted with `(x3 over 10m)`."""
    assert describe(CRASHING_POD, REGISTRY.lookup("pods"), CRASH_EVENTS, now=NOW) == CRASHING_POD_TEXT


def test_pending_pod_shows_scheduler_reason():
    """An unschedulable pod shows the scheduler's message without reading events."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "busybox",
                                    "resources": {"requests": {"cpu": "64"}}}]},
           "status": {"phase": "Pending", "conditions": [{
               "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
               "message": "0/3 nodes are available: 3 Insufficient cpu."}]}}
    text = describe(pod, REGISTRY.lookup("pods"), [
        event("FailedScheduling", "0/3 nodes are available: 3 Insufficient cpu.", type_="Warning",
              first="2026-12-02T16:59:00Z", component="default-scheduler")], now=NOW)
    assert "Node:         <none>\n" in text
    assert "Message:      0/3 nodes are available: 3 Insufficient cpu.\n" in text
    assert "  PodScheduled   False \n" in text
    assert "  Warning  FailedScheduling  60s   default-scheduler  0/3 nodes are available" in text
    assert "Containers:\n  c:\n    Image:      busybox\n" in text


def test_terminating_pod_status():
    """A pod being deleted says Terminating and its grace period."""
    pod = copy.deepcopy(CRASHING_POD)
    pod["metadata"].update(deletionTimestamp="2026-12-02T16:59:30Z", deletionGracePeriodSeconds=30)
    text = describe(pod, REGISTRY.lookup("pods"), [], now=NOW)
    assert "Status:                    Terminating (lasts 30s)\n" in text
    assert "Termination Grace Period:  30s\n" in text
    assert text.endswith("Events:          <none>\n")


SECRETS = [
    ("data", {"data": {"password": "c3VwZXJzZWNyZXQxMg==", "user": "YWRtaW4="}},
     ["supersecret12", "c3VwZXJzZWNyZXQxMg==", "admin", "YWRtaW4="], "password:  13 bytes\nuser:      5 bytes\n"),
    ("stringData", {"stringData": {"token": "hunter2hunter2"}}, ["hunter2"], "token:  14 bytes\n"),
]


@pytest.mark.parametrize("fields,hidden,sizes", [c[1:] for c in SECRETS], ids=[c[0] for c in SECRETS])
def test_secret_values_never_printed(fields, hidden, sizes):
    """A Secret shows each key's size in bytes, never its value."""
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"name": "db", "namespace": "default"}, **fields}
    text = describe(secret, REGISTRY.lookup("secrets"), [], now=NOW)
    assert text.startswith("Name:         db\nNamespace:    default\n")
    assert "\nType:  Opaque\n\nData\n====\n" + sizes == text[text.index("\nType:"):]
    for value in hidden:
        assert value not in text


def test_configmap():
    """A ConfigMap prints kubectl's Data / BinaryData layout."""
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "default"},
          "data": {"app.properties": "color=blue\nsize=3", "b": "x"}, "binaryData": {"bin": "AAEC"}}
    assert describe(cm, REGISTRY.lookup("cm"), [], now=NOW) == (
        "Name:         cfg\nNamespace:    default\nLabels:       <none>\nAnnotations:  <none>\n"
        "\nData\n====\napp.properties:\n----\ncolor=blue\nsize=3\nb:\n----\nx\n"
        "\nBinaryData\n====\nbin: 3 bytes\n\nEvents:  <none>\n")


WIDGET = {"apiVersion": "example.com/v1", "kind": "Widget",
          "metadata": {"name": "w1", "namespace": "default", "creationTimestamp": CREATED, "uid": "abc",
                       "resourceVersion": "12", "generation": 1, "managedFields": [{"manager": "kctl"}],
                       "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
          "spec": {"replicas": 3, "podIP": "x", "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}],
                   "tags": ["a", "b"], "app.kubernetes.io/name": "x", "enabled": True, "ratio": 0.5},
          "status": {"phase": "Ready"}}

WIDGET_TEXT = """\
Name:         w1
Namespace:    default
Labels:       <none>
Annotations:  <none>
API Version:  example.com/v1
Kind:         Widget
Metadata:
  Creation Timestamp:  2026-12-02T16:00:00Z
  Generation:          1
  Resource Version:    12
  UID:                 abc
Spec:
  app.kubernetes.io/name:  x
  Enabled:                 true
  Pod IP:                  x
  Ports:
    Name:    http
    Port:    80
    Name:    https
    Port:    443
  Ratio:     0.5
  Replicas:  3
  Tags:
    a
    b
Status:
  Phase:  Ready
Events:
"""


def test_generic_custom_resource():
    """A custom resource gets kubectl's generic describer: every field as an indented `Key:  value`."""
    events = [event("Reconciled", "done", first="2026-12-02T16:58:00Z", component="widget-controller")]
    text = describe(WIDGET, WIDGETS, events, now=NOW)
    head, _, table = text.partition("Events:\n")
    assert head + "Events:\n" == WIDGET_TEXT
    assert table == ("  Type    Reason      Age   From               Message\n"
                     "  ----    ------      ----  ----               -------\n"
                     "  Normal  Reconciled  2m    widget-controller  done\n")
    assert "managedFields" not in text and "Managed Fields" not in text


def test_generic_builtin_kind():
    """A built-in kind without its own layout (a Lease) uses the generic describer."""
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "h1", "namespace": "kctl-node-lease"},
             "spec": {"holderIdentity": "h1", "leaseDurationSeconds": 40}}
    text = describe(lease, REGISTRY.lookup("leases"), [], now=NOW)
    assert "Spec:\n  Holder Identity:         h1\n  Lease Duration Seconds:  40\n" in text
    assert text.endswith("Events:                    <none>\n")


TEMPLATE = {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]}}
DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "web", "namespace": "default", "uid": "u1", "creationTimestamp": CREATED,
                           "labels": {"app": "web"}},
              "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE},
              "status": {"replicas": 3, "updatedReplicas": 3, "readyReplicas": 2, "availableReplicas": 2,
                         "unavailableReplicas": 1,
                         "conditions": [{"type": "Available", "status": "False",
                                         "reason": "MinimumReplicasUnavailable"},
                                        {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}]}}


def replica_set(name: str, image: str, replicas: int, created: str) -> dict:
    template = copy.deepcopy(TEMPLATE)
    template["metadata"]["labels"]["pod-template-hash"] = name.rsplit("-", 1)[1]
    template["spec"]["containers"][0]["image"] = image
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": created,
                         "ownerReferences": [{"kind": "Deployment", "name": "web", "uid": "u1", "controller": True}]},
            "spec": {"replicas": replicas, "template": template}, "status": {"replicas": replicas}}


DEPLOYMENT_TEXT = """\
Name:                   web
Namespace:              default
CreationTimestamp:      Wed, 02 Dec 2026 16:00:00 +0000
Labels:                 app=web
Annotations:            <none>
Selector:               app=web
Replicas:               3 desired | 3 updated | 3 total | 2 available | 1 unavailable
StrategyType:           RollingUpdate
MinReadySeconds:        0
RollingUpdateStrategy:  25% max unavailable, 25% max surge
Pod Template:
  Labels:  app=web
  Containers:
   web:
    Image:         nginx:1.25
    Port:          80/TCP
    Host Port:     0/TCP
    Environment:   <none>
    Mounts:        <none>
  Volumes:         <none>
  Node-Selectors:  <none>
  Tolerations:     <none>
Conditions:
  Type           Status  Reason
  ----           ------  ------
  Available      False   MinimumReplicasUnavailable
  Progressing    True    NewReplicaSetAvailable
OldReplicaSets:  web-5f6a (1/1 replicas created)
NewReplicaSet:   web-7d4b9c (3/3 replicas created)
Events:          <none>
"""

RS_CASES = [
    ("rolling", [replica_set("web-5f6a", "nginx:1.24", 1, "2026-12-02T15:00:00Z"),
                 replica_set("web-7d4b9c", "nginx:1.25", 3, CREATED)],
     "OldReplicaSets:  web-5f6a (1/1 replicas created)\nNewReplicaSet:   web-7d4b9c (3/3 replicas created)\n"),
    ("old-scaled-down", [replica_set("web-5f6a", "nginx:1.24", 0, "2026-12-02T15:00:00Z"),
                         replica_set("web-7d4b9c", "nginx:1.25", 3, CREATED)],
     "OldReplicaSets:  <none>\nNewReplicaSet:   web-7d4b9c (3/3 replicas created)\n"),
    ("none-yet", [], "OldReplicaSets:  <none>\nNewReplicaSet:   <none>\n"),
]


def test_deployment():
    """A Deployment reads as kubectl describe deployment: replicas line, strategy, pod template, RSes."""
    text = describe(DEPLOYMENT, REGISTRY.lookup("deploy"), [], now=NOW,
                    replica_sets=RS_CASES[0][1])
    assert text == DEPLOYMENT_TEXT


@pytest.mark.parametrize("sets,lines", [c[1:] for c in RS_CASES], ids=[c[0] for c in RS_CASES])
def test_deployment_replica_sets(sets, lines):
    """OldReplicaSets lists only old sets still holding pods; NewReplicaSet is the one matching the template."""
    assert lines in describe(DEPLOYMENT, REGISTRY.lookup("deploy"), [], now=NOW, replica_sets=sets)


def test_deployment_without_replica_sets_omits_them():
    """Without ReplicaSets from the caller the Old/New lines are left out."""
    text = describe(DEPLOYMENT, REGISTRY.lookup("deploy"), [], now=NOW)
    assert "OldReplicaSets" not in text and "NewReplicaSet:" not in text


NODE = {"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "h2", "creationTimestamp": CREATED, "labels": {"kubernetes.io/hostname": "h2"}},
        "spec": {"unschedulable": True,
                 "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                            {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}]},
        "status": {"conditions": [{"type": "Ready", "status": "Unknown", "lastHeartbeatTime": "2026-12-02T16:50:00Z",
                                   "lastTransitionTime": "2026-12-02T16:51:00Z", "reason": "NodeStatusUnknown",
                                   "message": "Kubelet stopped posting node status."}],
                   "addresses": [{"type": "InternalIP", "address": "10.77.0.12"},
                                 {"type": "Hostname", "address": "h2"}],
                   "capacity": {"cpu": "2", "memory": "24Gi", "pods": "110"},
                   "allocatable": {"cpu": "2", "memory": "24Gi", "pods": "110"},
                   "nodeInfo": {"kernelVersion": "6.1.0", "osImage": "Debian GNU/Linux 12",
                                "operatingSystem": "linux", "architecture": "amd64",
                                "containerRuntimeVersion": "podman://4.3.1", "kubeletVersion": "kctl-0.1.0"}}}

NODE_TEXT = """\
Name:               h2
Roles:              <none>
Labels:             kubernetes.io/hostname=h2
Annotations:        <none>
CreationTimestamp:  Wed, 02 Dec 2026 16:00:00 +0000
Taints:             node.kubernetes.io/unreachable:NoExecute
                    node.kubernetes.io/unschedulable:NoSchedule
Unschedulable:      true
Conditions:
  Type    Status    LastHeartbeatTime                 LastTransitionTime                Reason              Message
  ----    ------    -----------------                 ------------------                ------              -------
  Ready   Unknown   Wed, 02 Dec 2026 16:50:00 +0000   Wed, 02 Dec 2026 16:51:00 +0000   NodeStatusUnknown   Kubelet stopped posting node status.
Addresses:
  InternalIP:  10.77.0.12
  Hostname:    h2
Capacity:
  cpu:     2
  memory:  24Gi
  pods:    110
Allocatable:
  cpu:     2
  memory:  24Gi
  pods:    110
System Info:
  Machine ID:                 
  System UUID:                
  Boot ID:                    
  Kernel Version:             6.1.0
  OS Image:                   Debian GNU/Linux 12
  Operating System:           linux
  Architecture:               amd64
  Container Runtime Version:  podman://4.3.1
  Kubelet Version:            kctl-0.1.0
  Kube-Proxy Version:         
Events:                       <none>
"""


def test_node():
    """A cordoned, unreachable Node shows taints, Unschedulable, conditions, addresses, capacity, system info."""
    assert describe(NODE, REGISTRY.lookup("nodes"), [], now=NOW) == NODE_TEXT


def test_event_series_and_order():
    """Events sort by last time seen; a repeated one reads `LAST (xN over FIRST)`."""
    events = [event("Late", "b", first="2026-12-02T16:59:00Z"),
              event("Repeated", "a", first="2026-12-02T14:00:00Z", last="2026-12-02T16:30:00Z", count=12),
              {**event("Series", "c", first=""), "lastTimestamp": None, "firstTimestamp": None,
               "eventTime": "2026-12-02T16:10:00Z",
               "series": {"count": 4, "lastObservedTime": "2026-12-02T16:40:00Z"}}]
    text = describe(WIDGET, WIDGETS, events, now=NOW)
    table = text.partition("Events:\n")[2].splitlines()
    assert [line.split()[1] for line in table[2:]] == ["Repeated", "Series", "Late"]
    assert "30m (x12 over 3h)" in table[2]
    assert "20m (x4 over 50m)" in table[3]
    assert "  Normal  Late      60s" in table[4]


TABWRITER_CASES = [
    ("one block", "a:\t1\nlonger:\t2\n", "a:       1\nlonger:  2\n"),
    ("blocks end at a line without a tab", "a:\t1\nx\nlonger:\t2\n", "a:  1\nx\nlonger:  2\n"),
    ("empty first cell continues", "Labels:\ta=1\n\tb=2\n", "Labels:  a=1\n         b=2\n"),
    ("nested columns", "T\tS\tR\nlong\tx\ty\n", "T     S  R\nlong  x  y\n"),
    ("trailing cell unpadded", "k:\tv \t\n", "k:  v   \n"),
]


@pytest.mark.parametrize("text,expected", [c[1:] for c in TABWRITER_CASES], ids=[c[0] for c in TABWRITER_CASES])
def test_tabwrite(text, expected):
    """Cells align as Go's tabwriter aligns them (padding 2, column blocks)."""
    assert tabwrite(text) == expected


LABELS = [("apiVersion", "API Version"), ("creationTimestamp", "Creation Timestamp"), ("uid", "UID"),
          ("podIP", "Pod IP"), ("hostIPs", "Host I Ps"), ("app.kubernetes.io/name", "app.kubernetes.io/name"),
          ("replicas2", "replicas2"), ("max-surge", "Max - Surge"), ("URLPath", "URL Path")]


@pytest.mark.parametrize("field,label", LABELS, ids=[c[0] for c in LABELS])
def test_smart_label(field, label):
    """Field names become kubectl's labels (camel case split, acronyms upper-cased)."""
    assert smart_label(field) == label
