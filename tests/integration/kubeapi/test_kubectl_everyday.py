"""Everyday kubectl commands against a real `kctl daemon --listen` on Podman, as a new user types them.

The commands that failed in the acceptance pass of issue 16 (kubectl's typed `create quota|pdb|ingress|
priorityclass` send protobuf; `kubectl debug` crashed on a 404 without `details`), and `kubectl describe` of
a Deployment and of its Pod (the issue's list). Objects made with `kubectl create` are compared with what
`kubectl create --dry-run=client -o json` says the same command means.
"""

from __future__ import annotations

import json

import pytest

NAMESPACE = "everyday"


@pytest.fixture(scope="module")
def everyday(kube_daemon):
    """The kube_daemon with namespace `everyday` (its objects go with the daemon's store)."""
    made = kube_daemon.kubectl("create", "namespace", NAMESPACE)
    assert made.returncode == 0, made.stderr
    return kube_daemon


def _differences(want: object, got: object, path: str = "") -> list[str]:
    """Where got lacks or differs from what want sets (got may hold more: server defaults)."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return [f"{path}: {got!r} is not an object"]
        return [d for key, value in want.items()
                for d in (_differences(value, got[key], f"{path}.{key}") if key in got else [f"{path}.{key} missing"])]
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return [f"{path}: {got!r} != {want!r}"]
        return [d for i, (a, b) in enumerate(zip(want, got)) for d in _differences(a, b, f"{path}[{i}]")]
    return [] if want == got else [f"{path}: {got!r} != {want!r}"]


CREATES = [
    ("quota", "resourcequota", "q1", ["--hard=pods=10,requests.cpu=1,count/configmaps=5", "--scopes=NotTerminating"]),
    ("pdb", "poddisruptionbudget", "pdb-min", ["--selector=app=web", "--min-available=1"]),
    ("pdb", "poddisruptionbudget", "pdb-max", ["--selector=app=web", "--max-unavailable=50%"]),
    ("ingress", "ingress", "ing1", ["--class=default", "--rule=foo.com/bar=svc1:80",
                                    "--rule=foo.com/*=svc1:http,tls=my-cert", "--default-backend=svc1:8080"]),
    ("priorityclass", "priorityclass", "everyday-high", ["--value=1000", "--description=high",
                                                         "--preemption-policy=Never"]),
    ("priorityclass", "priorityclass", "everyday-zero", ["--value=0"]),
]


@pytest.mark.parametrize("command,resource,name,flags", CREATES, ids=[c[2] for c in CREATES])
def test_typed_create_sent_as_protobuf(everyday, command, resource, name, flags):
    """kubectl create quota|pdb|ingress|priorityclass (protobuf bodies) makes the object the command means."""
    scope = [] if resource == "priorityclass" else ["-n", NAMESPACE]
    created = everyday.kubectl("create", command, name, *flags, *scope)
    try:
        assert created.returncode == 0, created.stderr
        assert "created" in created.stdout
        meant = everyday.kubectl("create", command, name, *flags, *scope, "--dry-run=client", "-o", "json")
        assert meant.returncode == 0, meant.stderr
        stored = everyday.kubectl("get", resource, name, *scope, "-o", "json")
        assert stored.returncode == 0, stored.stderr
        want, got = json.loads(meant.stdout), json.loads(stored.stdout)
        fields = [key for key in want if key not in ("apiVersion", "kind", "metadata", "status")]
        assert fields, want
        assert _differences({k: want[k] for k in fields}, got) == []
    finally:  # (the quota would refuse the pods of the tests below: they ask for no cpu)
        everyday.kubectl("delete", resource, name, *scope, "--ignore-not-found")


DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: everyday
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        image: localhost/busybox:demo
        command: ["sleep", "3600"]
"""


@pytest.fixture(scope="module")
def web(everyday):
    """Deployment everyday/web rolled out (one pod Running); the name of its pod."""
    applied = everyday.kubectl("apply", "-f", "-", input=DEPLOYMENT)
    assert applied.returncode == 0, applied.stderr
    rolled = everyday.kubectl("rollout", "status", "deployment/web", "-n", NAMESPACE, "--timeout=60s", timeout=90)
    if rolled.returncode != 0:
        pods = everyday.kubectl("describe", "pods", "-n", NAMESPACE)
        log = "\n".join(line for line in everyday.log_text().splitlines() if "WARNING" in line or "ERROR" in line)
        pytest.fail(f"{rolled.stderr}\n{pods.stdout}{pods.stderr}\n{log[-6000:]}")
    pods = everyday.kubectl("get", "pods", "-n", NAMESPACE, "-l", "app=web", "-o",
                            "jsonpath={.items[*].metadata.name}")
    assert pods.returncode == 0, pods.stderr
    names = pods.stdout.split()
    assert len(names) == 1, pods.stdout
    return names[0]


def test_describe_deployment(everyday, web):
    """kubectl describe deployment: kubectl's layout (replicas line, pod template, conditions, new RS, events)."""
    described = everyday.kubectl("describe", "deployment", "web", "-n", NAMESPACE)
    assert described.returncode == 0, described.stderr
    text = described.stdout
    for line in ("Name:                   web", "Namespace:              everyday", "Selector:               app=web",
                 "Replicas:               1 desired | 1 updated | 1 total | 1 available | 0 unavailable",
                 "StrategyType:           RollingUpdate", "Image:      localhost/busybox:demo"):
        assert line in text, text
    assert "NewReplicaSet:   web-" in text and "(1/1 replicas created)" in text
    assert "Available      True    MinimumReplicasAvailable" in text
    assert "ScalingReplicaSet" in text and "deployment-controller" in text


def test_describe_pod(everyday, web):
    """kubectl describe pod: node, status, IP, the container's state, conditions and the kubelet's events."""
    described = everyday.kubectl("describe", "pod", web, "-n", NAMESPACE)
    assert described.returncode == 0, described.stderr
    text = described.stdout
    for line in (f"Name:             {web}", "Namespace:        everyday", "Node:             kube-node/",
                 "Status:           Running", "Controlled By:  ReplicaSet/web-", "    State:          Running",
                 "    Ready:          True", "QoS Class:"):
        assert line in text, text
    assert "Successfully assigned everyday/" in text and "Started container main" in text


def test_debug_is_refused_in_one_line(everyday, web):
    """kubectl debug (ephemeral containers, not served): kubectl's own one-line refusal, not a crash."""
    debug = everyday.kubectl("debug", web, "-n", NAMESPACE, "--image=localhost/busybox:demo", "--profile=general",
                             "--", "true")
    assert debug.returncode != 0
    assert "panic" not in debug.stderr
    assert "ephemeral containers are disabled for this cluster" in debug.stderr, debug.stderr
