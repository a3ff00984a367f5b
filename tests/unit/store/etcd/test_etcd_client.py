"""The etcd gateway client: TLS, failover and the errors a user reads (quorum lost, no member answers)."""

from __future__ import annotations

import socket
import time

import pytest

from kctl.store.contract import StoreError, StoreUnavailable
from kctl.store.etcd.address import EtcdAddress, EtcdTLS
from kctl.store.etcd.client import EtcdClient


def _dead_endpoint() -> str:
    """host:port where nothing listens (a port bound and closed again)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def test_tls_without_client_certificate_is_refused_with_one_clear_line(make_etcd_store, etcd_cluster):
    """A client with the CA but no certificate gets a StoreError naming TLS and the options, no traceback text."""
    with pytest.raises(StoreError) as info:
        make_etcd_store(tls=EtcdTLS(ca_file=etcd_cluster.tls.ca_file))
    message = info.value.message
    assert "TLS" in message and "--etcd-certfile" in message and "\n" not in message
    assert not isinstance(info.value, StoreUnavailable)


def test_requests_ca_bundle_in_the_environment_does_not_break_tls(make_etcd_store, monkeypatch, tmp_path):
    """REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE naming another CA do not replace the store's CA (trust_env off)."""
    bogus = tmp_path / "other-ca.pem"
    bogus.write_text("not a certificate\n")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(bogus))
    monkeypatch.setenv("CURL_CA_BUNDLE", str(bogus))
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    store = make_etcd_store()
    assert store.get("Namespace", "", "default")["metadata"]["name"] == "default"


def test_a_dead_member_is_skipped(make_etcd_store, etcd_cluster):
    """With a member that does not answer listed first, reads and writes go to the next one."""
    from kctl.store.etcd.address import parse_address

    live = parse_address(etcd_cluster.address).endpoints
    store = make_etcd_store()
    other = make_etcd_store(prefix=store.address.prefix)
    other.client.urls = (other.client.urls[0].replace(live[0], _dead_endpoint()), *other.client.urls)
    with other.transaction() as txn:
        txn.put("ConfigMap", "default", "a", {"metadata": {"name": "a"}}, event="ADDED")
    assert store.get("ConfigMap", "default", "a") is not None


def test_no_member_answers_is_unavailable_within_the_timeout():
    """A cluster whose only member does not answer gives StoreUnavailable naming it, within request_timeout."""
    dead = _dead_endpoint()
    client = EtcdClient(EtcdAddress((dead,)), request_timeout=3)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable) as info:
        client.call("/kv/range", {"key": "YQ=="})
    assert time.monotonic() - started < 30
    assert f"http://{dead}" in info.value.message and "no member answers" in info.value.message
    assert info.value.code == 503


@pytest.mark.parametrize("write, unknown, outcome", [
    (True, True, "this write's outcome is unknown (it may still be applied): read before retrying"),
    (True, False, "nothing was written"),
    (False, False, "the read failed"),
], ids=["write-timed-out", "write-not-sent", "read"])
def test_quorum_lost_message_names_the_silent_members(monkeypatch, write, unknown, outcome):
    """2 of 3 members silent: the message says the quorum is lost, names them, and what became of the request."""
    client = EtcdClient(EtcdAddress(("10.0.0.1:2379", "10.0.0.2:2379", "10.0.0.3:2379")),
                        tls=EtcdTLS(ca_file="ca"))
    monkeypatch.setattr(client, "silent_members", lambda: ["https://10.0.0.2:2379", "https://10.0.0.3:2379"])
    error = client.unavailable({"https://10.0.0.1:2379": "etcdserver: request timed out"}, write=write,
                               unknown=unknown)
    assert isinstance(error, StoreUnavailable)
    assert error.message.startswith("etcd: the cluster has lost its quorum: 2 of 3 members do not answer "
                                    "(https://10.0.0.2:2379, https://10.0.0.3:2379); ")
    assert error.message.endswith(outcome) or outcome in error.message


def test_one_silent_member_of_three_is_not_a_lost_quorum(monkeypatch):
    """With a majority answering, the message names the silent member and etcd's error, not a lost quorum."""
    client = EtcdClient(EtcdAddress(("a:1", "b:1", "c:1")))
    monkeypatch.setattr(client, "silent_members", lambda: ["http://c:1"])
    error = client.unavailable({"http://a:1": "etcdserver: leader changed"}, write=False, unknown=False)
    assert "quorum" not in error.message and "1 of 3 members do not answer: http://c:1" in error.message
    assert "leader changed" in error.message
