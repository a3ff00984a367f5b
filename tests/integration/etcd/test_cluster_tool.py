"""kctl.testing.etcdcluster: a TLS member starts, refuses clients without a certificate, survives kill/restart."""

from __future__ import annotations

import base64
import json
import os
import random
import secrets
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from kctl.testing.etcdcluster import EtcdCluster, EtcdClusterError, main


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _put(cluster: EtcdCluster, index: int, key: str, value: str) -> None:
    with cluster.session() as session:
        response = session.post(cluster.client_urls[index] + "/v3/kv/put",
                                json={"key": _b64(key), "value": _b64(value)}, timeout=10)
    response.raise_for_status()


def _get(cluster: EtcdCluster, index: int, key: str) -> str | None:
    with cluster.session() as session:
        response = session.post(cluster.client_urls[index] + "/v3/kv/range", json={"key": _b64(key)}, timeout=10)
    response.raise_for_status()
    kvs = response.json().get("kvs", [])
    return base64.b64decode(kvs[0]["value"]).decode() if kvs else None


@pytest.fixture
def single(tmp_path):
    """A one-member TLS cluster of this test's own, stopped afterwards."""
    cluster = EtcdCluster(tmp_path / "etcd")
    cluster.start()
    yield cluster
    cluster.stop()


def test_member_serves_with_client_certificate_and_key_files_are_private(single):
    """A started member answers a put/get with the client certificate; every key and certificate file is 0600."""
    _put(single, 0, "/t/a", "1")
    assert _get(single, 0, "/t/a") == "1"
    assert single.address == f"etcd://127.0.0.1:{single.members[0].client_port}"
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in single.pki.iterdir()}
    assert set(modes) >= {"ca.crt", "ca.key", "m0.crt", "m0.key", "client.crt", "client.key"}
    assert set(modes.values()) == {0o600}


@pytest.mark.parametrize("cert", [False, True], ids=["no-client-cert", "no-ca"])
def test_tls_refuses_clients_without_certificate_or_trust(single, cert):
    """Without a client certificate the member refuses the connection; without its CA the client refuses the member."""
    session = requests.Session()
    session.trust_env = False
    if cert:
        session.cert = (str(single.client_cert_file), str(single.client_key_file))
    else:
        session.verify = str(single.ca_file)
    with session, pytest.raises(requests.exceptions.SSLError):
        session.get(single.client_urls[0] + "/health", timeout=10)


def test_kill_and_restart_keeps_data(single):
    """kill() ends the member (SIGKILL); restart() brings it back on its data."""
    _put(single, 0, "/t/kept", "yes")
    pid = single.members[0].pid
    single.kill(0)
    assert single.members[0].pid is None and not os.path.exists(f"/proc/{pid}/cmdline")
    single.restart(0)
    single.wait_healthy()
    assert _get(single, 0, "/t/kept") == "yes"


def test_stop_removes_data_and_processes(tmp_path):
    """stop() ends every member and deletes the data dirs; a failed start leaves nothing running."""
    cluster = EtcdCluster(tmp_path / "etcd", tls=False)
    cluster.start()
    pid, data = cluster.members[0].pid, cluster.members[0].data_dir
    assert cluster.members[0].client_url.startswith("http://") and cluster.tls is None
    cluster.stop()
    assert not os.path.exists(f"/proc/{pid}/cmdline") and not os.path.exists(data)
    with socket.socket() as holder:                    # the client port is taken: etcd exits at once
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        broken = EtcdCluster(tmp_path / "broken", base_port=holder.getsockname()[1])
        with pytest.raises(EtcdClusterError, match="m0.*address already in use"):
            broken.start(timeout=20)
    assert all(member.pid is None for member in broken.members)
    assert not os.path.exists(broken.members[0].data_dir)


def test_command_line_up_status_down(tmp_path, capsys):
    """`up` leaves a detached cluster recorded in cluster.json, `status` shows it, `down` stops it."""
    folder = tmp_path / "cli"
    try:
        assert main(["up", "--dir", str(folder), "-n", "1"]) == 0
        state = json.loads((folder / "cluster.json").read_text())
        pid = state["members"][0]["pid"]
        assert os.path.exists(f"/proc/{pid}/cmdline")
        assert main(["status", "--dir", str(folder)]) == 0
        assert f"--store {state['address']}" in capsys.readouterr().out
    finally:
        assert main(["down", "--dir", str(folder)]) == 0
    assert not os.path.exists(f"/proc/{pid}/cmdline")
    assert main(["status", "--dir", str(folder)]) == 0
    assert "stopped" in capsys.readouterr().out


def test_rejects_bad_shapes(tmp_path):
    """Member counts and per-member lists that do not fit give one clear ValueError."""
    with pytest.raises(ValueError, match="at least one member"):
        EtcdCluster(tmp_path, members=0)
    with pytest.raises(ValueError, match="netns lists 1 namespaces for 3 members"):
        EtcdCluster(tmp_path, members=3, netns=["a"])


def test_start_chooses_new_ports_when_one_is_taken(tmp_path, monkeypatch):
    """A free port taken before etcd binds it (another process raced us) makes start() choose new ports."""
    import kctl.testing.etcdcluster as etcdcluster

    original, handed = etcdcluster._free_port, []
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()

        def racing(host, probes):
            if not handed:
                handed.append(holder.getsockname()[1])
                return handed[0]
            return original(host, probes)

        monkeypatch.setattr(etcdcluster, "_free_port", racing)
        cluster = EtcdCluster(tmp_path / "etcd")
        try:
            cluster.start()
            assert handed and cluster.members[0].client_port != handed[0]
            assert _get(cluster, 0, "/t/none") is None
        finally:
            cluster.stop()


def test_die_with_parent_members_end_when_their_process_is_killed(tmp_path):
    """With die_with_parent, a member ends when the process that started it is SIGKILLed (no stop(), no atexit)."""
    code = ("import sys, time\nfrom kctl.testing.etcdcluster import EtcdCluster\n"
            "c = EtcdCluster(sys.argv[1], die_with_parent=True)\nc.start()\nprint(c.members[0].pid, flush=True)\n"
            "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "etcd")], stdout=subprocess.PIPE, text=True)
    member = None
    try:
        member = int(parent.stdout.readline())
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 30
        while _running(member) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _running(member)
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()
        if member and _running(member) and str(tmp_path).encode() in Path(f"/proc/{member}/cmdline").read_bytes():
            os.kill(member, signal.SIGKILL)


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def namespace():
    """A network namespace of this test's own with a veth link to this one: (netns, its address); removed after."""
    tag = secrets.token_hex(3)
    netns, veth, octet = f"kctl-etcdt-{tag}", f"ket{tag}", random.randrange(2, 250)
    here, there = f"10.213.{octet}.1", f"10.213.{octet}.2"
    steps = [["ip", "netns", "add", netns],
             ["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns],
             ["ip", "addr", "add", f"{here}/30", "dev", veth], ["ip", "link", "set", veth, "up"],
             ["ip", "-n", netns, "addr", "add", f"{there}/30", "dev", "eth0"],
             ["ip", "-n", netns, "link", "set", "eth0", "up"], ["ip", "-n", netns, "link", "set", "lo", "up"]]
    try:
        for step in steps:
            subprocess.run(step, check=True, capture_output=True)
        yield netns, there
    finally:
        subprocess.run(["ip", "link", "del", veth], capture_output=True)
        subprocess.run(["ip", "netns", "del", netns], capture_output=True)


def test_member_in_a_network_namespace_listens_on_its_address(tmp_path, namespace):
    """netns/hosts: the member runs inside the namespace on etcd's usual port, its certificate names its address."""
    netns, address = namespace
    cluster = EtcdCluster(tmp_path / "etcd", netns=[netns], hosts=[address])
    try:
        cluster.start()
        assert cluster.address == f"etcd://{address}:2379"
        assert os.stat(f"/proc/{cluster.members[0].pid}/ns/net").st_ino == os.stat(f"/run/netns/{netns}").st_ino
        _put(cluster, 0, "/t/ns", "inside")
        assert _get(cluster, 0, "/t/ns") == "inside"
    finally:
        cluster.stop()
