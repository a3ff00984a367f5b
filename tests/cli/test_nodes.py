"""`kctl cordon`, `uncordon` and `drain` against a real store.

The node n1 runs a DaemonSet pod, a bare pod and a pod owned by a ReplicaSet. A thread
stands in for n1's node agent: it removes each pod marked for deletion, as the agent
does after stopping its containers.
"""

from __future__ import annotations

import threading

import pytest

from kctl.machinery.errors import NotFound
from kctl.cli.nodes import DrainOptions, pods_for_deletion


def pod(name: str, *, owner: str | None = None, node: str = "n1", volumes: list | None = None,
        phase: str = "Running") -> dict:
    meta: dict = {"name": name, "namespace": "default"}
    if owner:
        kind, _, owner_name = owner.partition("/")
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": kind, "name": owner_name,
                                    "uid": f"uid-{owner_name}", "controller": True}]
    spec: dict = {"nodeName": node, "containers": [{"name": "c", "image": "busybox:1.36"}]}
    if volumes:
        spec["volumes"] = volumes
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


@pytest.fixture
def node_with_pods(server):
    """Node n1 with pods ds-1 (DaemonSet agent), bare (no owner) and web-1 (ReplicaSet web)."""
    server.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
    server.create({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "default"},
                   "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
                       "metadata": {"labels": {"app": "agent"}},
                       "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}}}})
    for p in (pod("ds-1", owner="DaemonSet/agent"), pod("bare"), pod("web-1", owner="ReplicaSet/web")):
        server.create(p)
    return server


@pytest.fixture
def agent(server):
    """A stand-in node agent: removes every pod marked for deletion until the test ends."""
    stop = threading.Event()
    rt = server.resource("pods")
    since = server.revision()  # before the thread starts: a deletion made while it starts is not missed

    def run():
        for _type, obj in server.watch(rt, since=since, stop=stop):
            meta = obj["metadata"]
            if _type != "DELETED" and meta.get("deletionTimestamp"):
                try:
                    server.delete(rt, meta["name"], namespace=meta["namespace"], grace_period=0)
                except NotFound:
                    pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(10)


def pod_names(server) -> list[str]:
    items, _ = server.list(server.resource("pods"), namespace="default")
    return sorted(p["metadata"]["name"] for p in items)


def unschedulable(server, name: str = "n1") -> bool:
    return bool(server.get(server.resource("nodes"), name).get("spec", {}).get("unschedulable"))


def test_cordon_uncordon(kctl, node_with_pods):
    """cordon/uncordon flip spec.unschedulable and say 'already' when nothing changes."""
    server = node_with_pods
    assert kctl("cordon", "n1").out == "node/n1 cordoned\n"
    assert unschedulable(server)
    assert kctl("cordon", "n1").out == "node/n1 already cordoned\n"
    assert kctl("uncordon", "n1").out == "node/n1 uncordoned\n"
    assert not unschedulable(server)
    assert kctl("uncordon", "n1").out == "node/n1 already uncordoned\n"
    missing = kctl("cordon", "n9")
    assert missing.code == 3 and 'nodes "n9" not found' in missing.err


UNMANAGED = "cannot delete Pods declare no controller (use --force to override): default/bare"
DAEMONSET = "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): default/ds-1"


@pytest.mark.parametrize("flags,message,errors", [
    ([], f"[{UNMANAGED}, {DAEMONSET}]", [UNMANAGED, DAEMONSET]),
    (["--ignore-daemonsets"], UNMANAGED, [UNMANAGED]),
    (["--force"], DAEMONSET, [DAEMONSET]),
], ids=["no-flags", "ignore-daemonsets", "force"])
def test_drain_refuses_as_kubectl(kctl, node_with_pods, flags, message, errors):
    """drain cordons, then refuses with kubectl's messages (each error last on its own line) and evicts nothing."""
    server = node_with_pods
    result = kctl("drain", "n1", *flags)
    assert result.code == 1
    assert result.out == "node/n1 cordoned\n"
    assert result.err.splitlines() == [
        f'error: unable to drain node "n1" due to error: {message}, continuing command...',
        "There are pending nodes to be drained:", " n1", *errors]
    assert pod_names(server) == ["bare", "ds-1", "web-1"]
    assert unschedulable(server)


def test_drain_several_nodes_cordons_all_first(kctl, node_with_pods):
    """As kubectl, every node is cordoned first; a refusal on one lists it and the nodes after it as pending."""
    server = node_with_pods
    server.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n0"}})
    server.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}})
    result = kctl("drain", "n0", "n1", "n2", "--ignore-daemonsets")
    assert result.code == 1
    assert result.out == "node/n0 cordoned\nnode/n1 cordoned\nnode/n2 cordoned\nnode/n0 drained\n"
    assert result.err.splitlines()[1:] == ["There are pending nodes to be drained:", " n1", " n2", UNMANAGED]
    assert unschedulable(server, "n2")


def test_drain_evicts_and_waits(kctl, node_with_pods, agent):
    """With --ignore-daemonsets --force, bare and owned pods are evicted and waited for; the DaemonSet pod stays."""
    server = node_with_pods
    result = kctl("drain", "n1", "--ignore-daemonsets", "--force")
    assert result.code == 0, result.err
    out = result.out.splitlines()
    assert out[0] == "node/n1 cordoned" and out[-1] == "node/n1 drained"
    assert sorted(out[1:-1]) == ["pod/bare evicted", "pod/web-1 evicted"]
    assert result.err.splitlines() == [
        "Warning: deleting Pods that declare no controller: default/bare; "
        "ignoring DaemonSet-managed Pods: default/ds-1",
        "evicting pod default/bare",
        "evicting pod default/web-1",
    ]
    assert pod_names(server) == ["ds-1"]


def test_drain_grace_period_zero_needs_no_agent(kctl, node_with_pods):
    """--grace-period 0 removes the pods at once, so the drain ends without a node agent."""
    result = kctl("drain", "n1", "--ignore-daemonsets", "--force", "--grace-period", "0")
    assert result.code == 0, result.err
    assert pod_names(node_with_pods) == ["ds-1"]


def test_drain_times_out_without_agent(kctl, node_with_pods):
    """Evicted pods that never go (no agent) end the drain at --timeout with exit 9, kubectl's error per pod."""
    server = node_with_pods
    result = kctl("drain", "n1", "--ignore-daemonsets", "--force", "--timeout", "300ms")
    assert result.code == 9
    errors = ['error when waiting for pod "bare" terminating: global timeout reached: 300ms',
              'error when waiting for pod "web-1" terminating: global timeout reached: 300ms']
    aggregate = "[" + ", ".join(errors) + "]"
    assert result.err.splitlines()[-8:] == [
        f'There are pending pods in node "n1" when an error occurred: {aggregate}',
        "pod/bare", "pod/web-1",
        f'error: unable to drain node "n1" due to error: {aggregate}, continuing command...',
        "There are pending nodes to be drained:", " n1", *errors]
    web = server.get(server.resource("pods"), "web-1", namespace="default")
    assert web["metadata"]["deletionTimestamp"]


def test_drain_disable_eviction_deletes_and_times_out_as_before(kctl, node_with_pods):
    """--disable-eviction deletes directly (no `evicting pod` line); at --timeout: drain did not complete within D."""
    server = node_with_pods
    result = kctl("drain", "n1", "--ignore-daemonsets", "--force", "--timeout", "300ms", "--disable-eviction")
    assert result.code == 9
    assert "evicting pod" not in result.err
    assert result.err.splitlines()[-7:] == [
        'There are pending pods in node "n1" when an error occurred: drain did not complete within 300ms',
        "pod/bare", "pod/web-1",
        'error: unable to drain node "n1" due to error: drain did not complete within 300ms, continuing command...',
        "There are pending nodes to be drained:", " n1", "error: drain did not complete within 300ms"]
    web = server.get(server.resource("pods"), "web-1", namespace="default")
    assert web["metadata"]["deletionTimestamp"]


def test_drain_empty_node(kctl, server):
    """A node without pods is cordoned and drained at once."""
    server.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}})
    result = kctl("drain", "n2")
    assert (result.code, result.out) == (0, "node/n2 cordoned\nnode/n2 drained\n")


def _exists(names):
    return lambda ns, name: name in names


@pytest.mark.parametrize("p,opts,delete,reason,message", [
    (pod("a", owner="ReplicaSet/web"), DrainOptions(), True, "Okay", ""),
    (pod("a"), DrainOptions(), False, "Error", "Pods declare no controller (use --force to override)"),
    (pod("a"), DrainOptions(force=True), True, "Warning", "deleting Pods that declare no controller"),
    (pod("a", phase="Succeeded"), DrainOptions(), True, "Okay", ""),
    (pod("a", owner="DaemonSet/agent"), DrainOptions(ignore_daemonsets=True), False, "Warning",
     "ignoring DaemonSet-managed Pods"),
    (pod("a", owner="DaemonSet/gone"), DrainOptions(), False, "Error", 'daemonsets.apps "gone" not found'),
    (pod("a", owner="DaemonSet/gone"), DrainOptions(force=True), True, "Warning", 'daemonsets.apps "gone" not found'),
    (pod("a", owner="ReplicaSet/web", volumes=[{"name": "v", "emptyDir": {}}]), DrainOptions(), False, "Error",
     "Pods with local storage (use --delete-emptydir-data to override)"),
    (pod("a", owner="ReplicaSet/web", volumes=[{"name": "v", "emptyDir": {}}]),
     DrainOptions(delete_emptydir_data=True), True, "Warning", "deleting Pods with local storage"),
], ids=["owned", "bare", "bare-force", "finished", "daemonset-ignored", "daemonset-gone", "daemonset-gone-force",
        "emptydir", "emptydir-allowed"])
def test_drain_filters(p, opts, delete, reason, message):
    """Each pod gets kubectl's drain verdict for the flags given."""
    (verdict,) = pods_for_deletion([p], opts, _exists({"agent"}))
    assert (verdict.delete, verdict.reason, verdict.message) == (delete, reason, message)


# -- kctl node add / remove ------------------------------------------------------------------

def test_node_add_writes_the_node(kctl, server, tmp_path, store_path):
    """node add: a Node naming its Podman over SSH, with labels, taints and kctl's known_hosts."""
    key = tmp_path / "id"
    key.write_text("not really a key\n")
    result = kctl("node", "add", "h1", "--ssh", "kctl@127.0.0.1:1", "--identity", str(key),
                  "--socket", "/run/user/1000/podman/podman.sock", "-l", "zone=a", "--taint", "gpu=yes:NoSchedule")
    assert result.code == 0, result.err
    assert result.out == "node/h1 added\n"
    # Nothing listens on port 1: the key cannot be read, and the user is told how to check it.
    assert "cannot read the host key of 127.0.0.1:1" in result.err and "kctl node trust h1" in result.err
    node = server.get(server.resource("nodes"), "h1")
    assert node["metadata"]["annotations"] == {
        "kctl.io/podman-url": "ssh://kctl@127.0.0.1:1/run/user/1000/podman/podman.sock",
        "kctl.io/ssh-identity": str(key),
        "kctl.io/ssh-known-hosts": str(store_path.parent / "known_hosts")}
    assert node["metadata"]["labels"]["zone"] == "a"
    assert node["spec"]["taints"] == [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]
    again = kctl("node", "add", "h1", "--ssh", "127.0.0.1:1")
    assert again.code != 0 and "AlreadyExists" in again.err


@pytest.mark.parametrize("args, message", [
    (["--ssh", "a@b@c"], "--ssh 'a@b@c': expected [user@]host[:port]"),
    (["--ssh", "host:99999"], "expected [user@]host[:port]"),
    (["--ssh", "kctl@host"], "--socket is required for the rootless user kctl"),
    (["--ssh", "host", "--taint", "gpu=yes:Sometimes"], "--taint 'gpu=yes:Sometimes': expected key[=value]:Effect"),
    (["--ssh", "host", "-l", "zone"], "--label 'zone': expected key=value"),
    (["--ssh", "host", "--identity", "/nonexistent/key"], "--identity /nonexistent/key: no such readable file"),
    (["--ssh", "host", "--socket", "podman.sock"], "expected an absolute path"),
])
def test_node_add_refuses_bad_input(kctl, server, args, message):
    """Bad flags: one line, non-zero exit, no Node written."""
    result = kctl("node", "add", "h1", *args)
    assert result.code != 0
    assert message in result.err and len(result.err.strip().splitlines()) == 1
    assert server.list(server.resource("nodes"))[0] == []


def test_node_remove_drains_everything_then_deletes(kctl, node_with_pods, agent):
    """node remove: every pod on the node goes (DaemonSet and bare pods too), then the Node."""
    server = node_with_pods
    result = kctl("node", "remove", "n1", "--timeout", "20s")
    assert result.code == 0, result.err
    assert result.out.endswith("node/n1 removed\n")
    assert pod_names(server) == []
    with pytest.raises(NotFound):
        server.get(server.resource("nodes"), "n1")


def test_node_remove_times_out_on_a_silent_host(kctl, node_with_pods):
    """No agent stops the pods: remove gives up, says so, and keeps the Node; --force removes it."""
    server = node_with_pods
    result = kctl("node", "remove", "n1", "--timeout", "1s")
    assert result.code != 0
    assert "node/n1 not removed: 3 pod(s) still on it" in result.err and "--force" in result.err
    assert unschedulable(server)
    forced = kctl("node", "remove", "n1", "--force")
    assert forced.code == 0, forced.err
    assert pod_names(server) == []
    with pytest.raises(NotFound):
        server.get(server.resource("nodes"), "n1")


def test_node_trust_needs_an_ssh_node(kctl, server):
    server.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "local", "annotations": {
        "kctl.io/podman-url": "unix:///run/podman/podman.sock"}}})
    result = kctl("node", "trust", "local")
    assert result.code != 0 and "not SSH" in result.err
