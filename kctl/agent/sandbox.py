"""The Podman pod of a Pod (its sandbox): found by the pod-uid label, adopted, or made.

kctl.agent.podsync calls `ensure_sandbox` first in every sync; kctl.agent.termination
calls `find_sandboxes` to stop and remove a pod. A dead Podman pod is removed and made
again (SandboxChanged), except under restartPolicy Never once containers ran (the pod
then ends as they did). A failed create is retried after a back-off (FailedCreatePodSandBox).
"""

from __future__ import annotations

from kctl.agent.containers import sandbox_spec
from kctl.agent.poddns import HOST_RESOLV_CONF, PodDNS, pod_dns
from kctl.agent.syncstate import PodSyncState, managed
from kctl.client.clusterconfig import KUBE_PROXY_CONFIGMAP, KUBELET_CONFIGMAP, cluster_network_from
from kctl.client.clusterconfig import NAMESPACE as CLUSTER_CONFIG_NAMESPACE
from kctl.runtime.interface import LABEL_POD_UID, PodSandbox, RuntimeError_

SANDBOX_KEY = "sandbox:"  # back-off key (uid, SANDBOX_KEY) for pod sandbox creation
NETWORK_NOT_READY = "network is not ready: the pod network of this node is being set up"
NETWORK_WAIT_SECONDS = 1.0  # how soon a pod waiting for the pod network looks again


def find_sandboxes(s: PodSyncState) -> list[PodSandbox]:
    """Every kctl-made Podman pod of this Pod (normally one)."""
    return [p for p in s.runtime.list_pods({LABEL_POD_UID: s.uid}) if managed(p.labels)]


def ensure_sandbox(s: PodSyncState) -> PodSandbox | None:
    """The pod's running Podman pod: adopted, or made (a dead one is removed first)."""
    found = find_sandboxes(s)
    keep = next((p for p in found if p.running), None)
    if keep is None and found and s.policy == "Never" and _has_run(s, found[0]):
        return found[0]  # as the kubelet: a pod that must not restart gets no new sandbox
    for extra in found:
        if extra is keep:
            continue
        if not extra.running:
            s.event("Normal", "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.")
        s.runtime.remove_pod(extra.id)
    if keep is not None:
        return keep
    key = (s.uid, SANDBOX_KEY)
    if not s.ctx.backoff.ready(key, s.now):
        s.all_waiting(("ContainerCreating", s.previous_waiting_message()))
        s.requeue.append(s.ctx.backoff.remaining(key, s.now))
        return None
    network = s.ctx.pod_network()
    if network is None:  # the pod network is being set up (kctl.agent.podnetwork): wait, as kubelet's NetworkReady
        s.all_waiting(("ContainerCreating", NETWORK_NOT_READY))
        s.requeue.append(NETWORK_WAIT_SECONDS)
        return None
    try:
        sandbox = s.runtime.create_pod(sandbox_spec(s.pod, dns=_pod_dns(s), network=network))
    except RuntimeError_ as error:
        s.ctx.backoff.record(key, s.now)
        message = f"Failed to create pod sandbox: {error}"
        s.event("Warning", "FailedCreatePodSandBox", message)
        s.all_waiting(("ContainerCreating", message))
        s.requeue.append(s.ctx.backoff.remaining(key, s.now))
        return None
    s.ctx.backoff.clear(key)
    s.new_sandbox = True
    return sandbox


def _pod_dns(s: PodSyncState) -> PodDNS:
    """The pod's resolv.conf (kctl.agent.poddns) from the cluster's DNS settings in the agent's ConfigMap cache."""
    network = cluster_network_from(s.ctx.lookup("ConfigMap", CLUSTER_CONFIG_NAMESPACE, KUBE_PROXY_CONFIGMAP),
                                   s.ctx.lookup("ConfigMap", CLUSTER_CONFIG_NAMESPACE, KUBELET_CONFIGMAP))
    dns = pod_dns(s.pod, network, host=HOST_RESOLV_CONF.get(s.runtime))
    for warning in dns.warnings:
        s.event("Warning", "DNSConfigForming", warning)
    return dns


def _has_run(s: PodSyncState, sandbox: PodSandbox) -> bool:
    return any(c.pod_id == sandbox.id and c.started_at and managed(c.labels)
               for c in s.runtime.list_containers({LABEL_POD_UID: s.uid}))


__all__ = ["SANDBOX_KEY", "ensure_sandbox", "find_sandboxes"]
