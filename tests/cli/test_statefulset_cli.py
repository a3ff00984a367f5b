"""`kctl rollout status|history|undo statefulset`, `kctl scale sts`, get and describe, with the real controller.

The StatefulSet controller and a fake kubelet run in this process against the CLI's store
(the `server` fixture); the manifest is the StatefulSet example of the Kubernetes docs
(kubectl has no generator for StatefulSets). Lines are compared with kubectl's.
"""

from __future__ import annotations

import contextlib
import re
import threading
from typing import Iterator

import pytest

from kctl.cli.rollout import statefulset_status
from kctl.testing.waiting import wait_for

WEB = """\
apiVersion: v1
kind: Service
metadata:
  name: nginx
  labels:
    app: nginx
spec:
  ports:
  - port: 80
    name: web
  clusterIP: None
  selector:
    app: nginx
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  selector:
    matchLabels:
      app: nginx # has to match .spec.template.metadata.labels
  serviceName: "nginx"
  replicas: 3 # by default is 1
  minReadySeconds: 0 # by default is 0
  template:
    metadata:
      labels:
        app: nginx # has to match .spec.selector.matchLabels
    spec:
      terminationGracePeriodSeconds: 10
      nodeName: n1
      containers:
      - name: nginx
        image: registry.k8s.io/nginx-slim:0.24
        ports:
        - containerPort: 80
          name: web
        volumeMounts:
        - name: www
          mountPath: /usr/share/nginx/html
  volumeClaimTemplates:
  - metadata:
      name: www
    spec:
      accessModes: [ "ReadWriteOnce" ]
      resources:
        requests:
          storage: 1Gi
"""


@contextlib.contextmanager
def controller(server) -> Iterator[None]:
    """The StatefulSet controller and a fake kubelet for node n1, until the block ends."""
    from kctl.controllers.manager import ControllerManager
    from kctl.controllers.statefulset.controller import StatefulSetController
    from kctl.testing.fake_kubelet import FakeKubelet

    stop = threading.Event()
    kubelet = FakeKubelet(server, nodes=["n1"])
    kubelet.start(stop)
    manager = ControllerManager(server, [StatefulSetController()], leader_election=False)
    manager.start(stop)
    try:
        yield
    finally:
        stop.set()
        manager.stop()
        stopper = getattr(kubelet, "stop", None)
        if callable(stopper):
            stopper()


def sts_status(server) -> dict:
    return server.get(server.resource("sts"), "web", namespace="default").get("status") or {}


def rolled(server, replicas: int = 3) -> bool:
    st = sts_status(server)
    return (st.get("readyReplicas") == replicas and st.get("updatedReplicas") == replicas
            and st.get("currentRevision") == st.get("updateRevision"))


def images(server) -> set[str]:
    pods, _ = server.list(server.resource("pods"), namespace="default")
    return {p["spec"]["containers"][0]["image"] for p in pods if not p["metadata"].get("deletionTimestamp")}


@pytest.fixture
def web(kctl, tmp_path, server):
    """The docs' web StatefulSet applied and rolled out, its controller running."""
    manifest = tmp_path / "web.yaml"
    manifest.write_text(WEB)
    with controller(server):
        result = kctl("apply", "-f", str(manifest))
        assert result.code == 0, result.err
        wait_for(lambda: rolled(server), what="web rolled out")
        yield server


@pytest.mark.parametrize("spec, status, line, done", [
    ({"replicas": 3}, {}, "Waiting for statefulset spec update to be observed...", False),
    ({"replicas": 3}, {"observedGeneration": 1, "readyReplicas": 1}, "Waiting for 2 pods to be ready...", False),
    ({"replicas": 3, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}},
     {"observedGeneration": 1, "readyReplicas": 3, "updatedReplicas": 1},
     "Waiting for partitioned roll out to finish: 1 out of 2 new pods have been updated...", False),
    ({"replicas": 3, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}},
     {"observedGeneration": 1, "readyReplicas": 3, "updatedReplicas": 3},
     "partitioned roll out complete: 3 new pods have been updated...", True),
    ({"replicas": 3, "updateStrategy": {"type": "RollingUpdate"}},
     {"observedGeneration": 1, "readyReplicas": 3, "updatedReplicas": 1, "currentRevision": "web-a",
      "updateRevision": "web-b"}, "waiting for statefulset rolling update to complete 1 pods at revision web-b...",
     False),
    ({"replicas": 3}, {"observedGeneration": 1, "readyReplicas": 3, "currentReplicas": 3, "currentRevision": "web-b",
                       "updateRevision": "web-b"},
     "statefulset rolling update complete 3 pods at revision web-b...", True),
], ids=["not-observed", "pods-not-ready", "partition-waiting", "partition-complete", "rolling", "complete"])
def test_status_viewer_lines(spec, status, line, done):
    """The lines of kubectl's StatefulSetStatusViewer."""
    sts = {"metadata": {"name": "web", "generation": 1}, "spec": spec, "status": status}
    assert statefulset_status(sts) == (line, done)


def test_status_viewer_refuses_on_delete():
    """OnDelete has no rollout status, as in kubectl."""
    with pytest.raises(ValueError, match="only available for RollingUpdate strategy type"):
        statefulset_status({"metadata": {}, "spec": {"updateStrategy": {"type": "OnDelete"}}, "status": {}})


def test_rollout_status_history_undo(kctl, web):
    """status after the rollout; a new image makes revision 2; undo goes back to 1's template."""
    result = kctl("rollout", "status", "statefulset/web")
    assert (result.code, result.out) == (0, "partitioned roll out complete: 3 new pods have been updated...\n"), \
        result.err
    history = kctl("rollout", "history", "sts/web")
    assert history.out == "statefulset.apps/web \nREVISION  CHANGE-CAUSE\n1         <none>\n\n"
    assert kctl("set", "image", "sts/web", "nginx=registry.k8s.io/nginx-slim:0.27").code == 0
    wait_for(lambda: rolled(web) and images(web) == {"registry.k8s.io/nginx-slim:0.27"}, what="rolled to 0.27")
    history = kctl("rollout", "history", "sts/web")
    assert history.out == "statefulset.apps/web \nREVISION  CHANGE-CAUSE\n1         <none>\n2         <none>\n\n"
    one = kctl("rollout", "history", "sts/web", "--revision", "1")
    assert one.out.startswith("statefulset.apps/web with revision #1\nPod Template:\n")
    assert "nginx-slim:0.24" in one.out
    undo = kctl("rollout", "undo", "statefulset/web")
    assert (undo.code, undo.out) == (0, "statefulset.apps/web rolled back\n"), undo.err
    wait_for(lambda: rolled(web) and images(web) == {"registry.k8s.io/nginx-slim:0.24"}, what="rolled back")
    history = kctl("rollout", "history", "sts/web")
    assert history.out == "statefulset.apps/web \nREVISION  CHANGE-CAUSE\n2         <none>\n3         <none>\n\n"
    again = kctl("rollout", "undo", "statefulset/web", "--to-revision", "3")
    assert again.out == "statefulset.apps/web skipped rollback (current template already matches revision 3)\n"
    missing = kctl("rollout", "undo", "statefulset/web", "--to-revision", "9")
    assert (missing.code, missing.err) == (1, "error: unable to find specified revision 9 in history\n")


def test_scale_get_and_describe(kctl, web):
    """scale sts changes replicas; get prints NAME READY AGE and the revisions; describe shows claims."""
    result = kctl("scale", "sts", "web", "--replicas", "1")
    assert (result.code, result.out) == (0, "statefulset.apps/web scaled\n"), result.err
    wait_for(lambda: sts_status(web).get("replicas") == 1, what="scaled to 1")
    table = kctl("get", "sts")
    assert re.fullmatch(r"NAME   READY   AGE\nweb    1/1     \S+\n", table.out), table.out
    wide = kctl("get", "sts", "-o", "wide")
    assert wide.out.splitlines()[0].split() == ["NAME", "READY", "AGE", "CONTAINERS", "IMAGES"]
    revs = kctl("get", "controllerrevisions")
    header, row = revs.out.splitlines()
    assert header.split() == ["NAME", "CONTROLLER", "REVISION", "AGE"]
    assert row.split()[1:3] == ["statefulset.apps/web", "1"] and row.startswith("web-")
    text = kctl("describe", "sts", "web").out
    for line in ("Replicas:           1 desired | 1 total", "Update Strategy:    RollingUpdate",
                 "  Partition:        0", "Pods Status:        1 Running / 0 Waiting / 0 Succeeded / 0 Failed",
                 "Volume Claims:", "  Name:          www", "  Capacity:      1Gi",
                 "  Access Modes:  [ReadWriteOnce]"):
        assert line in text.splitlines(), f"{line!r} not in\n{text}"
    claims = kctl("get", "pvc", "-o", "name")
    assert claims.out.split() == ["persistentvolumeclaim/www-web-0", "persistentvolumeclaim/www-web-1",
                                  "persistentvolumeclaim/www-web-2"], "scale-down keeps the claims (Retain)"


def test_statefulset_defaults(kctl, tmp_path, server):
    """A stored StatefulSet carries the API server's defaults (OrderedReady, partition 0, Retain, history 10)."""
    manifest = tmp_path / "web.yaml"
    manifest.write_text(WEB)
    assert kctl("apply", "-f", str(manifest)).code == 0
    spec = server.get(server.resource("sts"), "web", namespace="default")["spec"]
    assert spec["podManagementPolicy"] == "OrderedReady"
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    assert spec["revisionHistoryLimit"] == 10
    assert spec["volumeClaimTemplates"][0]["spec"]["volumeMode"] == "Filesystem"
    assert spec["volumeClaimTemplates"][0]["status"] == {"phase": "Pending"}
