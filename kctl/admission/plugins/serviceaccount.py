"""Kubernetes' ServiceAccount admission plugin: a new pod runs as a ServiceAccount and gets its API token volume.

On Pod CREATE (plugin/pkg/admission/serviceaccount/admission.go), for pods that are not mirror pods:
`spec.serviceAccountName` defaults to `default`; unless `automountServiceAccountToken` is false (the
pod's, else the ServiceAccount's), every container and init container that has no mount at
/var/run/secrets/kubernetes.io/serviceaccount gets one (read-only) of a projected volume
`kube-api-access-<5 random letters>` with exactly Kubernetes' sources: a `serviceAccountToken`
(path token, expirationSeconds 3607), the `kube-root-ca.crt` ConfigMap's `ca.crt`, and the
downward API's `metadata.namespace` as `namespace`, defaultMode 420. The node agent writes the
token (kctl.agent.serviceaccounttokens, through the API's create_token), the CA and the namespace
there, so an in-pod client (client-go's or the Python client's in-cluster config) works.

kctl deviations, both so that kctl without its HTTPS API behaves as before:
- the volume is added only while the cluster serves the Kubernetes API, i.e. the `kubernetes`
  Service exists in `default` (kctl.controllers.kubernetesservice makes it when `kctl daemon
  --listen` runs); a pod made before that has no token, as a Kubernetes pod with automount off;
- a ServiceAccount that does not exist (yet) does not refuse the pod (Kubernetes refuses it until
  the ServiceAccount controller made `default`); the agent's token request waits for it instead.

On UPDATE the injected volume and mounts are kept when a replacing object leaves them out (a
`replace` of the original manifest must not drop what admission added: a pod's volumes cannot change).
Registered in kctl.admission.plugins.builtin_plugins, after LimitRanger, as kube-apiserver orders it.
"""

from __future__ import annotations

import secrets

from kctl.admission.plugins import AdmissionPlugin, Attributes, Lister

#: where the token, ca.crt and namespace files are mounted (DefaultAPITokenMountPath)
TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
#: the volume's name prefix (ServiceAccountVolumeName + "-")
VOLUME_PREFIX = "kube-api-access-"
#: the projected token's lifetime (WarnOnlyBoundTokenExpirationSeconds), the CA ConfigMap's name
TOKEN_EXPIRATION_SECONDS = 3607
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
DEFAULT_ACCOUNT = "default"
#: the characters of generated name suffixes (k8s.io/apiserver/pkg/storage/names: utilrand.String)
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def token_volume_source() -> dict:
    """The projected volume source of the API access volume (TokenVolumeSource), as Kubernetes writes it."""
    return {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
        {"configMap": {"name": ROOT_CA_CONFIGMAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}


def _serves_kubernetes_api(lister: Lister) -> bool:
    """The `kubernetes` Service exists in `default` (a daemon serves the HTTPS API)."""
    return any((s.get("metadata") or {}).get("name") == "kubernetes" for s in lister("Service", "default"))


def _should_automount(spec: dict, account: dict | None) -> bool:
    """The pod's automountServiceAccountToken, else the ServiceAccount's, else true (shouldAutomount)."""
    if isinstance(spec.get("automountServiceAccountToken"), bool):
        return spec["automountServiceAccountToken"]
    if account is not None and isinstance(account.get("automountServiceAccountToken"), bool):
        return account["automountServiceAccountToken"]
    return True


def _containers(spec: dict) -> list[dict]:
    return [c for key in ("initContainers", "containers") for c in spec.get(key) or () if isinstance(c, dict)]


def mount_token(spec: dict, *, suffix: str | None = None) -> None:
    """Mount the API access volume in each container lacking a mount at TOKEN_MOUNT_PATH (mountServiceAccountToken)."""
    volumes = spec.get("volumes") if isinstance(spec.get("volumes"), list) else []
    existing = next((v.get("name") for v in volumes if isinstance(v, dict)
                     and str(v.get("name", "")).startswith(VOLUME_PREFIX)), None)
    name = existing or VOLUME_PREFIX + (suffix or "".join(secrets.choice(_ALPHABET) for _ in range(5)))
    needed = False
    for container in _containers(spec):
        mounts = container.get("volumeMounts") if isinstance(container.get("volumeMounts"), list) else []
        if any(isinstance(m, dict) and m.get("mountPath") == TOKEN_MOUNT_PATH for m in mounts):
            continue
        container["volumeMounts"] = [*mounts, {"name": name, "readOnly": True, "mountPath": TOKEN_MOUNT_PATH}]
        needed = True
    if needed and existing is None:
        spec["volumes"] = [*volumes, {"name": name, "projected": token_volume_source()}]


def _keep_injected(spec: dict, old_spec: dict) -> None:
    """An UPDATE that left out the injected volume and its mounts gets them back from the stored pod."""
    old_volume = next((v for v in old_spec.get("volumes") or () if isinstance(v, dict)
                       and str(v.get("name", "")).startswith(VOLUME_PREFIX) and v.get("projected")), None)
    if old_volume is None or any(isinstance(v, dict) and v.get("name") == old_volume["name"]
                                 for v in spec.get("volumes") or ()):
        return
    spec["volumes"] = [*(spec.get("volumes") or []), old_volume]
    old_mounts = {c.get("name"): [m for m in c.get("volumeMounts") or () if m.get("name") == old_volume["name"]]
                  for c in _containers(old_spec)}
    for container in _containers(spec):
        mounts = container.get("volumeMounts") if isinstance(container.get("volumeMounts"), list) else []
        for mount in old_mounts.get(container.get("name")) or ():
            if not any(isinstance(m, dict) and m.get("mountPath") == mount.get("mountPath") for m in mounts):
                mounts = [*mounts, mount]
        container["volumeMounts"] = mounts


def mutate(attrs: Attributes, lister: Lister) -> None:
    """Default a new pod's ServiceAccount and mount its API token volume (see the module docstring)."""
    obj = attrs.obj
    spec = obj.get("spec") if isinstance(obj, dict) else None
    if not isinstance(spec, dict) or attrs.subresource:
        return
    if attrs.operation == "UPDATE":
        _keep_injected(spec, (attrs.old_obj or {}).get("spec") or {})
        return
    if attrs.operation != "CREATE":
        return
    if MIRROR_ANNOTATION in ((obj.get("metadata") or {}).get("annotations") or {}):
        return
    if not spec.get("serviceAccountName"):
        spec["serviceAccountName"] = spec.get("serviceAccount") or DEFAULT_ACCOUNT
    if not _serves_kubernetes_api(lister):
        return
    name = spec["serviceAccountName"]
    account = next((a for a in lister("ServiceAccount", attrs.namespace or "default")
                    if (a.get("metadata") or {}).get("name") == name), None)
    if _should_automount(spec, account):
        mount_token(spec)


PLUGIN = AdmissionPlugin(name="ServiceAccount", kinds=frozenset({"Pod"}), mutate=mutate)

__all__ = ["PLUGIN", "ROOT_CA_CONFIGMAP", "TOKEN_EXPIRATION_SECONDS", "TOKEN_MOUNT_PATH", "VOLUME_PREFIX",
           "mount_token", "token_volume_source"]
