"""kctl.daemon.server.run records the daemon's network flags where agents read them (kube-system ConfigMaps)."""

from __future__ import annotations

import threading

from kctl.client.clusterconfig import ClusterNetwork, read_cluster_network
from kctl.daemon.server import run
from kctl.daemon.settings import DaemonSettings

WAIT_SECONDS = 30.0  # how long the daemon may take to stop before the test fails as hung


def test_run_writes_the_cluster_network(api):
    """--cluster-cidr, --cluster-dns and --cluster-domain are in kube-proxy/kubelet-config once the daemon runs."""
    stop = threading.Event()
    stop.set()  # run records the settings first, then returns at once
    settings = DaemonSettings(agents=False, control_plane=True, cluster_cidr="10.200.0.0/16",
                              cluster_dns="10.96.0.53", cluster_domain="corp.test", cluster_dns_port=None)
    thread = threading.Thread(target=run, args=(settings,), kwargs={"api": api, "stop": stop}, daemon=True)
    thread.start()
    thread.join(WAIT_SECONDS)
    assert not thread.is_alive()
    assert read_cluster_network(api) == ClusterNetwork(cluster_cidr="10.200.0.0/16", cluster_dns=("10.96.0.53",),
                                                       cluster_domain="corp.test")


def test_a_daemon_without_control_plane_records_nothing(api):
    """Only a daemon running the control plane records the network (agents take its presence to mean node-ipam)."""
    stop = threading.Event()
    stop.set()
    settings = DaemonSettings(agents=False, control_plane=False, cluster_cidr="10.200.0.0/16")
    thread = threading.Thread(target=run, args=(settings,), kwargs={"api": api, "stop": stop}, daemon=True)
    thread.start()
    thread.join(WAIT_SECONDS)
    assert not thread.is_alive()
    assert api.list(api.resource("configmaps"), namespace="kube-system")[0] == []
