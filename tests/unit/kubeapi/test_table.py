"""Table responses of the HTTPS API (kctl.kubeapi.table): `kubectl get` through it prints what `kctl get` prints."""

from __future__ import annotations

import io
import sys
from datetime import datetime, timezone

import pytest
from kubeapi_crds import crontab, crontab_crd

from kctl.kubeapi import table
from kctl.machinery.resources import builtin_registry

#: columns whose cells are ages (they may tick between the two commands)
AGE_COLUMNS = {"AGE", "LAST SEEN", "FIRST SEEN", "DURATION", "LAST SCHEDULE"}


def _arrange(api) -> None:
    """Objects of a dozen kinds, in two namespaces, some with status."""
    def create(obj: dict) -> dict:
        return api.create(obj)

    for ns in ("default", "other"):
        if api.find(api.resource("namespaces"), ns) is None:
            create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    node = create({"apiVersion": "v1", "kind": "Node",
                   "metadata": {"name": "node-1", "labels": {"node-role.kubernetes.io/control-plane": ""}}})
    node["status"] = {
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        "addresses": [{"type": "InternalIP", "address": "10.0.0.11"}],
        "nodeInfo": {"kubeletVersion": "v1.32.0-kctl", "kubeProxyVersion": "v1.32.0-kctl", "osImage": "Debian 12",
                     "kernelVersion": "6.1", "containerRuntimeVersion": "podman://4.3.1", "operatingSystem": "linux",
                     "architecture": "amd64", "bootID": "b", "machineID": "m", "systemUUID": "u"}}
    api.update_status(node)
    pod = create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1", "namespace": "default",
                                                                  "labels": {"app": "web"}},
                  "spec": {"nodeName": "node-1", "containers": [{"name": "web", "image": "localhost/busybox"}]}})
    pod["status"] = {"phase": "Running", "podIP": "10.88.0.5", "podIPs": [{"ip": "10.88.0.5"}],
                     "conditions": [{"type": "Ready", "status": "True"}],
                     "containerStatuses": [{"name": "web", "ready": True, "restartCount": 0,
                                            "image": "localhost/busybox", "imageID": "sha256:1",
                                            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}
    api.update_status(pod)
    create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "batch-1", "namespace": "other"},
            "spec": {"containers": [{"name": "main", "image": "localhost/busybox"}]}})
    create({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": "localhost/busybox"}]}}}})
    create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}})
    create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "default"},
            "data": {"a": "1", "b": "2"}})
    create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "token", "namespace": "other"},
            "type": "Opaque", "data": {"t": "c2VjcmV0"}})
    create({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once", "namespace": "other"},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "main", "image": "localhost/busybox"}]}}}})
    create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot", "namespace": "default"}})
    create({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"rules": [{"host": "web.example.com", "http": {"paths": [
                {"path": "/", "pathType": "Prefix",
                 "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}})
    create({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web-1.started", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "default"}, "reason": "Started",
            "message": "Started container web", "type": "Normal", "count": 2, "source": {"component": "kubelet"},
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:05:00Z"})
    create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "robot-view", "namespace": "default"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "default"},
                         {"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]})
    create({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    create(crontab_crd())
    create(crontab("nightly"))
    create(crontab("hourly", namespace="other", spec="0 * * * *", replicas=1))


def _kctl_get(store_path, monkeypatch, capsys, *args: str) -> str:
    """What `kctl get ARGS` prints for the store (in-process)."""
    from kctl.cli.main import main

    monkeypatch.setenv("KCTL_STORE", str(store_path))
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    capsys.readouterr()
    try:
        main(["get", *args])
    except SystemExit as exc:
        assert not exc.code, capsys.readouterr().err
    return capsys.readouterr().out


def _cells(output: str) -> list[list[str]]:
    """A printed table as rows of cells (cut at the header's column starts), age cells masked."""
    lines = output.splitlines()
    header = lines[0]
    names, starts, position = [], [], 0
    for name in _header_names(header):
        position = header.index(name, position)
        names.append(name)
        starts.append(position)
        position += len(name)
    rows = [names]
    for line in lines[1:]:
        cells = [line[start:(starts[i + 1] if i + 1 < len(starts) else None)].strip()
                 for i, start in enumerate(starts)]
        rows.append(["<age>" if names[i] in AGE_COLUMNS else cell for i, cell in enumerate(cells)])
    return rows


def _header_names(header: str) -> list[str]:
    """Header cells, which may hold one space (`NOMINATED NODE`) but are separated by at least three."""
    return [cell.strip() for cell in header.split("   ") if cell.strip()]


@pytest.mark.parametrize("args", [
    ("pods", "-A"),
    ("pods", "-A", "-o", "wide"),
    ("pods", "--show-labels"),
    ("deployments", "-o", "wide"),
    ("nodes",),
    ("nodes", "-o", "wide"),
    ("services", "-A"),
    ("configmaps",),
    ("secrets", "-n", "other"),
    ("jobs", "-A", "-o", "wide"),
    ("namespaces",),
    ("serviceaccounts",),
    ("ingresses",),
    ("crontabs", "-A"),
    ("crontabs", "-o", "wide"),
    ("customresourcedefinitions",),
    ("events", "-A"),
    ("events", "-o", "wide"),
    ("rolebindings", "-o", "wide"),
    ("persistentvolumeclaims",),
], ids=["pods-A", "pods-wide", "pods-labels", "deploy-wide", "nodes", "nodes-wide", "svc-A", "cm", "secrets",
        "jobs-wide", "ns", "sa", "ingress", "crontabs-A", "crontabs-wide", "crds", "events-A", "events-wide",
        "rolebindings-wide", "pvc"])
def test_kubectl_get_prints_what_kctl_get_prints(kubeapi, monkeypatch, capsys, args):
    """`kubectl get` through the HTTPS API (server-side Table) equals `kctl get` on the same store, column for
    column (ages may tick)."""
    _arrange(kubeapi.api)
    result = kubeapi.kubectl("get", *args)
    assert result.returncode == 0, result.stderr
    expected = _kctl_get(kubeapi.kubeconfig.parent / "kctl.db", monkeypatch, capsys, *args)
    assert _cells(result.stdout) == _cells(expected)


def test_kubectl_get_all_prints_each_kind_as_kctl_does(kubeapi, monkeypatch, capsys):
    """`kubectl get all -A` (the `all` category from discovery, one Table per kind, a CRD in `all` included) equals
    `kctl get all -A`, table for table."""
    _arrange(kubeapi.api)
    result = kubeapi.kubectl("get", "all", "-A")
    assert result.returncode == 0, result.stderr
    expected = _kctl_get(kubeapi.kubeconfig.parent / "kctl.db", monkeypatch, capsys, "all", "-A")
    got = [_cells(block) for block in result.stdout.split("\n\n")]
    assert got == [_cells(block) for block in expected.split("\n\n")]
    assert any(row[1] == "crontab.stable.example.com/nightly" for block in got for row in block)


def test_table_request_shape(kubeapi):
    """A list asked for as Table answers meta.k8s.io/v1 Table: typed column definitions (wide ones at priority 1),
    rows of cells with PartialObjectMetadata, and the list's resourceVersion."""
    _arrange(kubeapi.api)
    reply = kubeapi.request("GET", "/api/v1/namespaces/default/pods",
                            headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"})
    assert reply.status == 200
    body = reply.json()
    assert (body["kind"], body["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert body["metadata"]["resourceVersion"]
    columns = [(c["name"], c["priority"]) for c in body["columnDefinitions"]]
    assert columns == [("Name", 0), ("Ready", 0), ("Status", 0), ("Restarts", 0), ("Age", 0), ("IP", 1),
                       ("Node", 1), ("Nominated Node", 1), ("Readiness Gates", 1)]
    assert body["columnDefinitions"][0]["format"] == "name"
    row = body["rows"][0]
    assert row["cells"][:4] == ["web-1", "1/1", "Running", "0"]
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert row["object"]["metadata"]["name"] == "web-1"


# -- the builder, without a server ------------------------------------------------------------------

NOW = datetime(2026, 1, 1, 0, 10, tzinfo=timezone.utc)
POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "p", "namespace": "ns", "creationTimestamp": "2026-01-01T00:00:00Z"},
       "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Pending"}}


@pytest.mark.parametrize("include, expected", [
    ("None", None),
    ("Metadata", {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": POD["metadata"]}),
    ("Object", POD),
], ids=["none", "metadata", "object"])
def test_include_object(include, expected):
    """includeObject decides what each row carries: nothing, the metadata, or the whole object."""
    rt = builtin_registry().lookup("pods")
    out = table.to_table(rt, [POD], list_meta={"resourceVersion": "7"}, include_object=include, now=NOW)
    assert out["metadata"] == {"resourceVersion": "7"}
    assert out["rows"][0].get("object") == expected
    assert out["rows"][0]["cells"] == ["p", "0/1", "Pending", "0", "10m", "<none>", "<none>", "<none>", "<none>"]


def test_event_table_orders_columns_as_kubernetes():
    """Event's wide view reorders columns: the table lists them in that order, the non-wide ones at priority 0."""
    rt = builtin_registry().lookup("events")
    out = table.to_table(rt, [], list_meta={}, include_object="None", now=NOW)
    assert [(c["name"], c["priority"]) for c in out["columnDefinitions"]] == [
        ("Last Seen", 0), ("Type", 0), ("Reason", 0), ("Object", 0), ("Subobject", 1), ("Source", 1),
        ("Message", 0), ("First Seen", 1), ("Count", 1), ("Name", 1)]


def test_custom_kind_columns_given():
    """A custom kind's table is Name plus its printer columns with their types and priorities."""
    from kctl.machinery.crd import crd_resource_types
    from kctl.output.crdcolumns import crd_columns

    crd = crontab_crd()
    rt = crd_resource_types(crd)[0]
    obj = crontab("nightly")
    obj["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    out = table.to_table(rt, [obj], list_meta={}, include_object="None", columns=crd_columns(crd, "v1"), now=NOW)
    assert [(c["name"], c["type"], c["priority"]) for c in out["columnDefinitions"]] == [
        ("Name", "string", 0), ("Spec", "string", 0), ("Replicas", "integer", 0), ("Image", "string", 1),
        ("Age", "date", 0)]
    assert out["rows"][0]["cells"] == ["nightly", "*/5 * * * *", "2", "localhost/busybox", "10m"]


@pytest.mark.parametrize("header, name", [
    ("NAME", "Name"), ("UP-TO-DATE", "Up-to-date"), ("NOMINATED NODE", "Nominated Node"), ("PORT(S)", "Port(s)"),
    ("CLUSTER-IP", "Cluster-IP"),
], ids=["name", "up-to-date", "two-words", "ports", "cluster-ip"])
def test_column_names_as_kubernetes_spells_them(header, name):
    """kctl's upper-case headers become Kubernetes' column names (kubectl upper-cases them back)."""
    assert table.column_name(header) == name
