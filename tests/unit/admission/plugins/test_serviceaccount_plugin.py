"""The ServiceAccount admission plugin: serviceAccountName defaulted, kube-api-access added as Kubernetes does."""

from __future__ import annotations

import re

import pytest

from kctl.admission.plugins.serviceaccount import TOKEN_MOUNT_PATH

#: the volume kube-apiserver 1.32 adds (`kubectl get pod -o yaml` of a pod in a real cluster)
KUBERNETES_VOLUME = {"projected": {"defaultMode": 420, "sources": [
    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    {"downwardAPI": {"items": [{"path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}


def _serve_api(api):
    """Make the `kubernetes` Service, as a daemon serving the HTTPS API does."""
    api.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kubernetes", "namespace": "default"},
                "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 6443}]}})


def _pod(api, *, name="p", spec_extra=None, init=False, mounts=None):
    spec = {"containers": [{"name": "c", "image": "busybox", **({"volumeMounts": mounts} if mounts else {})}]}
    if init:
        spec["initContainers"] = [{"name": "i", "image": "busybox"}]
    spec.update(spec_extra or {})
    return api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                       "spec": spec})


def _token_volumes(pod):
    return [v for v in pod["spec"].get("volumes") or () if v["name"].startswith("kube-api-access-")]


def test_volume_and_mounts_are_kubernetes_shape(api):
    """A new pod gets kube-api-access-xxxxx, exactly Kubernetes' projected source, mounted read-only everywhere."""
    _serve_api(api)
    pod = _pod(api, init=True)
    (volume,) = _token_volumes(pod)
    assert re.fullmatch(r"kube-api-access-[bcdfghjklmnpqrstvwxz2456789]{5}", volume["name"])
    assert {k: v for k, v in volume.items() if k != "name"} == KUBERNETES_VOLUME
    for container in (*pod["spec"]["containers"], *pod["spec"]["initContainers"]):
        assert container["volumeMounts"] == [{"name": volume["name"], "readOnly": True,
                                              "mountPath": TOKEN_MOUNT_PATH}]
    assert pod["spec"]["serviceAccountName"] == "default"


@pytest.mark.parametrize("pod_flag, account_flag, mounted", [
    (None, None, True), (False, None, False), (None, False, False), (True, False, True), (False, True, False),
], ids=["default", "pod-off", "sa-off", "pod-on-wins", "pod-off-wins"])
def test_automount_follows_pod_then_service_account(api, pod_flag, account_flag, mounted):
    """automountServiceAccountToken: the pod's value wins, else the ServiceAccount's, else true."""
    _serve_api(api)
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot", "namespace": "default"}}
    if account_flag is not None:
        account["automountServiceAccountToken"] = account_flag
    api.create(account)
    extra = {"serviceAccountName": "robot"}
    if pod_flag is not None:
        extra["automountServiceAccountToken"] = pod_flag
    pod = _pod(api, spec_extra=extra)
    assert bool(_token_volumes(pod)) is mounted


def test_existing_mount_at_token_path_is_left_alone(api):
    """A container that mounts something at the token path keeps it; no volume is added when none needs it."""
    _serve_api(api)
    pod = _pod(api, mounts=[{"name": "own", "mountPath": TOKEN_MOUNT_PATH}],
               spec_extra={"volumes": [{"name": "own", "emptyDir": {}}]})
    assert not _token_volumes(pod)
    assert pod["spec"]["containers"][0]["volumeMounts"] == [{"name": "own", "mountPath": TOKEN_MOUNT_PATH}]


def test_no_volume_without_the_kubernetes_service(api):
    """Without the HTTPS API (no `kubernetes` Service) pods are made as before: no token volume."""
    pod = _pod(api)
    assert not _token_volumes(pod) and "volumeMounts" not in pod["spec"]["containers"][0]
    assert pod["spec"]["serviceAccountName"] == "default"


def test_replace_keeps_the_injected_volume(api):
    """An update that leaves out the injected volume and mounts (a replace of the manifest) keeps them."""
    _serve_api(api)
    pod = _pod(api)
    (volume,) = _token_volumes(pod)
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default",
                                                                "labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    updated = api.update(manifest)
    assert _token_volumes(updated) == [volume]
    assert updated["spec"]["containers"][0]["volumeMounts"][0]["name"] == volume["name"]
    assert updated["metadata"]["labels"] == {"a": "b"}
