"""PersistentVolumes, claims and StorageClasses from the CLI: the Kubernetes docs' manifests apply unchanged,
`kctl get pv,pvc,sc` prints kubectl's columns (VOLUMEATTRIBUTESCLASS, `(default)`), describe shows kubectl's layout
(a claim's `Used By:`), a claim in use shows Terminating after delete, and bad claims are one clear line."""

from __future__ import annotations

import re

import pytest

#: from kubernetes.io: "Configure a Pod to Use a PersistentVolume for Storage" (task-pv-*), the local volume and
#: StorageClass examples of "Persistent Volumes" / "Storage Classes", unchanged
DOCS = """\
apiVersion: v1
kind: PersistentVolume
metadata:
  name: task-pv-volume
  labels:
    type: local
spec:
  storageClassName: manual
  capacity:
    storage: 10Gi
  accessModes:
    - ReadWriteOnce
  hostPath:
    path: "/mnt/data"
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: task-pv-claim
spec:
  storageClassName: manual
  accessModes:
    - ReadWriteOnce
  resources:
    requests:
      storage: 3Gi
---
apiVersion: v1
kind: Pod
metadata:
  name: task-pv-pod
spec:
  volumes:
    - name: task-pv-storage
      persistentVolumeClaim:
        claimName: task-pv-claim
  containers:
    - name: task-pv-container
      image: nginx
      ports:
        - containerPort: 80
          name: "http-server"
      volumeMounts:
        - mountPath: "/usr/share/nginx/html"
          name: task-pv-storage
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: example-pv
spec:
  capacity:
    storage: 100Gi
  volumeMode: Filesystem
  accessModes:
  - ReadWriteOnce
  persistentVolumeReclaimPolicy: Delete
  storageClassName: local-storage
  local:
    path: /mnt/disks/ssd1
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - key: kubernetes.io/hostname
          operator: In
          values:
          - example-node
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local-storage
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: standard
provisioner: kubernetes.io/aws-ebs
parameters:
  type: gp2
reclaimPolicy: Retain
allowVolumeExpansion: true
mountOptions:
  - debug
volumeBindingMode: Immediate
"""

CREATED = ["persistentvolume/task-pv-volume created", "persistentvolumeclaim/task-pv-claim created",
           "pod/task-pv-pod created", "persistentvolume/example-pv created",
           "storageclass.storage.k8s.io/local-storage created", "storageclass.storage.k8s.io/standard created"]

PV_HEADER = ["NAME", "CAPACITY", "ACCESS MODES", "RECLAIM POLICY", "STATUS", "CLAIM", "STORAGECLASS",
             "VOLUMEATTRIBUTESCLASS", "REASON", "AGE"]
PVC_HEADER = ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS MODES", "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "AGE"]
SC_HEADER = ["NAME", "PROVISIONER", "RECLAIMPOLICY", "VOLUMEBINDINGMODE", "ALLOWVOLUMEEXPANSION", "AGE"]


def _table(out: str) -> tuple[list[str], list[dict[str, str]]]:
    """The header and each row as {header: cell}, cut at the header's column starts (kubectl's aligned layout)."""
    lines = [line for line in out.splitlines() if line.strip()]
    header_line = lines[0]
    names = re.split(r"\s{2,}", header_line.strip())
    starts, pos = [], 0
    for name in names:
        pos = header_line.index(name, pos)
        starts.append(pos)
        pos += len(name)
    rows = []
    for line in lines[1:]:
        cells = [line[a:b].strip() for a, b in zip(starts, starts[1:] + [None])]
        rows.append(dict(zip(names, cells)))
    return names, rows


@pytest.fixture
def applied(kctl):
    result = kctl("apply", "-f", "-", input=DOCS)
    assert (result.code, result.err) == (0, ""), result.err
    return result


def test_the_docs_manifests_apply_unchanged(kctl, applied):
    """Every document is created; a second apply changes nothing."""
    assert applied.out.splitlines() == CREATED
    again = kctl("apply", "-f", "-", input=DOCS)
    assert again.code == 0 and all(line.endswith(" unchanged") for line in again.out.splitlines()), again.out


def test_get_prints_kubectls_columns(kctl, applied, server):
    """pv, pvc and sc have kubectl's headers and cells; a bound pair shows its claim, volume, capacity, modes."""
    header, rows = _table(kctl("get", "pv").out)
    assert header == PV_HEADER
    by_name = {r["NAME"]: r for r in rows}
    assert {k: by_name["task-pv-volume"][k] for k in PV_HEADER[:9]} == {
        "NAME": "task-pv-volume", "CAPACITY": "10Gi", "ACCESS MODES": "RWO", "RECLAIM POLICY": "Retain",
        "STATUS": "Pending", "CLAIM": "", "STORAGECLASS": "manual", "VOLUMEATTRIBUTESCLASS": "<unset>", "REASON": ""}
    assert by_name["example-pv"]["RECLAIM POLICY"] == "Delete"
    header, rows = _table(kctl("get", "pvc").out)
    assert header == PVC_HEADER
    assert {k: rows[0][k] for k in PVC_HEADER[:7]} == {
        "NAME": "task-pv-claim", "STATUS": "Pending", "VOLUME": "", "CAPACITY": "", "ACCESS MODES": "",
        "STORAGECLASS": "manual", "VOLUMEATTRIBUTESCLASS": "<unset>"}

    _bind(server)
    _, rows = _table(kctl("get", "pvc").out)
    assert {k: rows[0][k] for k in ("STATUS", "VOLUME", "CAPACITY", "ACCESS MODES")} == \
        {"STATUS": "Bound", "VOLUME": "task-pv-volume", "CAPACITY": "10Gi", "ACCESS MODES": "RWO"}
    _, rows = _table(kctl("get", "pv", "task-pv-volume").out)
    assert (rows[0]["STATUS"], rows[0]["CLAIM"]) == ("Bound", "default/task-pv-claim")


def test_storage_classes_show_default_and_kubectls_defaults(kctl, applied, server):
    """RECLAIMPOLICY Delete and VOLUMEBINDINGMODE Immediate when unset; a default class's name gets ` (default)`."""
    header, rows = _table(kctl("get", "sc").out)
    assert header == SC_HEADER
    cells = {r["NAME"]: [r[h] for h in SC_HEADER[1:5]] for r in rows}
    assert cells == {"local-storage": ["kubernetes.io/no-provisioner", "Delete", "WaitForFirstConsumer", "false"],
                     "standard": ["kubernetes.io/aws-ebs", "Retain", "Immediate", "true"]}
    assert kctl("annotate", "sc", "standard", "storageclass.kubernetes.io/is-default-class=true").code == 0
    _, rows = _table(kctl("get", "sc").out)
    assert sorted(r["NAME"] for r in rows) == ["local-storage", "standard (default)"]


def test_get_several_kinds_and_wide(kctl, applied):
    """`get pv,pvc,sc` prints one table per kind; `-o wide` adds VOLUMEMODE."""
    result = kctl("get", "pv,pvc,sc")
    assert result.code == 0, result.err
    assert "persistentvolume/task-pv-volume" in result.out and "persistentvolumeclaim/task-pv-claim" in result.out
    assert "storageclass.storage.k8s.io/standard" in result.out
    header, rows = _table(kctl("get", "pvc", "-o", "wide").out)
    assert header == PVC_HEADER + ["VOLUMEMODE"] and rows[0]["VOLUMEMODE"] == "Filesystem"


def test_a_claim_in_use_shows_terminating_after_delete(kctl, applied, server):
    """Deleting a claim a scheduled pod uses leaves it Terminating (its protection finalizer stays)."""
    pod = server.get(server.resource("pods"), "task-pv-pod", namespace="default")
    server.bind("default", "task-pv-pod", "h1", uid=pod["metadata"]["uid"])
    result = kctl("delete", "pvc", "task-pv-claim", "--wait=false")
    assert (result.code, result.out) == (0, 'persistentvolumeclaim "task-pv-claim" deleted\n')
    _, rows = _table(kctl("get", "pvc").out)
    assert rows[0]["STATUS"] == "Terminating"
    described = kctl("describe", "pvc", "task-pv-claim").out
    assert re.search(r"^Status:\s+Terminating \(lasts .+\)$", described, re.M)


def test_describe_layouts(kctl, applied, server):
    """kubectl's describe: a claim's Used By and Finalizers, a volume's source and node affinity, a class's fields."""
    _bind(server)
    pvc = kctl("describe", "pvc", "task-pv-claim").out
    for line in (r"Name:\s+task-pv-claim", r"StorageClass:\s+manual", r"Status:\s+Bound", r"Volume:\s+task-pv-volume",
                 r"Finalizers:\s+\[kubernetes.io/pvc-protection\]", r"Capacity:\s+10Gi", r"Access Modes:\s+RWO",
                 r"VolumeMode:\s+Filesystem", r"Used By:\s+task-pv-pod"):
        assert re.search(f"^{line}$", pvc, re.M), (line, pvc)
    pv = kctl("describe", "pv", "example-pv").out
    assert re.search(r"^Node Affinity:\s*\n  Required Terms:\s*\n    Term 0:\s+kubernetes.io/hostname in "
                     r"\[example-node\]$", pv, re.M), pv
    assert re.search(r"^Source:\n    Type:\s+LocalVolume \(a persistent volume backed by local storage on a node\)\n"
                     r"    Path:\s+/mnt/disks/ssd1$", pv, re.M), pv
    hostpath = kctl("describe", "pv", "task-pv-volume").out
    assert re.search(r"^    Type:\s+HostPath \(bare host directory volume\)\n    Path:\s+/mnt/data\n"
                     r"    HostPathType:\s+<none>$", hostpath, re.M), hostpath
    sc = kctl("describe", "sc", "standard").out
    for line in (r"IsDefaultClass:\s+No", r"Provisioner:\s+kubernetes.io/aws-ebs", r"Parameters:\s+type=gp2",
                 r"AllowVolumeExpansion:\s+True", r"MountOptions:", r"  debug", r"ReclaimPolicy:\s+Retain",
                 r"VolumeBindingMode:\s+Immediate", r"Events:\s+<none>"):
        assert re.search(f"^{line}$", sc, re.M), (line, sc)


@pytest.mark.parametrize("doc, message", [
    ("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: bad}\n"
     "spec: {resources: {requests: {storage: 1Gi}}}\n",
     'PersistentVolumeClaim "bad" is invalid: spec.accessModes: Required value: at least 1 access mode is required'),
    ("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: bad}\nspec: {accessModes: [ReadWriteOnce]}\n",
     "spec.resources[storage]: Required value"),
    ("apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: bad}\n"
     "spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], local: {path: /mnt}}\n",
     "spec.nodeAffinity: Required value: Local volume requires node affinity"),
], ids=["pvc-access-modes", "pvc-storage", "pv-local-affinity"])
def test_a_bad_claim_or_volume_is_one_clear_line(kctl, doc, message):
    """Kubernetes' checks beyond the schema: one line naming the object and field, non-zero exit."""
    result = kctl("apply", "-f", "-", input=doc)
    assert result.code != 0
    assert len(result.err.strip().splitlines()) == 1 and message in result.err, result.err
    assert "Traceback" not in result.err


def test_a_bound_claims_spec_cannot_change(kctl, applied, server):
    """Re-applying a bound claim with other access modes is refused with Kubernetes' message."""
    _bind(server)
    changed = DOCS.split("---\n")[1].replace("ReadWriteOnce", "ReadWriteMany")
    result = kctl("apply", "-f", "-", input=changed)
    assert result.code != 0
    assert "spec: Forbidden: spec is immutable after creation except resources.requests" in result.err
    assert len(result.err.strip().splitlines()) == 1


def _bind(server) -> None:
    """Bind task-pv-claim to task-pv-volume as the binder does (the daemon does not run in CLI tests)."""
    pvc_rt, pv_rt = server.resource("pvc"), server.resource("pv")
    pvc = server.get(pvc_rt, "task-pv-claim", namespace="default")
    pv = server.get(pv_rt, "task-pv-volume")
    pv["spec"]["claimRef"] = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": "default",
                              "name": "task-pv-claim", "uid": pvc["metadata"]["uid"]}
    pv = server.update(pv)
    pv["status"] = {"phase": "Bound"}
    server.update_status(pv)
    pvc["spec"]["volumeName"] = "task-pv-volume"
    pvc = server.update(pvc)
    pvc["status"] = {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "10Gi"}}
    server.update_status(pvc)
