"""`kctl config kubeconfig`: a kubeconfig with the store's CA and a client certificate for the wanted user."""

from __future__ import annotations

import base64

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID
from ruamel.yaml import YAML

from kctl.kubeapi.pki import PKI


def _subject(doc: dict) -> tuple[str, list[str]]:
    cert = x509.load_pem_x509_certificate(base64.b64decode(doc["users"][0]["user"]["client-certificate-data"]))
    return (cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value,
            [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)])


@pytest.mark.parametrize("args, user, groups, server", [
    ((), "kctl-admin", ["system:masters"], "https://127.0.0.1:6443"),
    (("--user", "alice", "--group", "dev", "--group", "ops"), "alice", ["dev", "ops"], "https://127.0.0.1:6443"),
    (("--user", "bob", "--server", "https://control.example:7443"), "bob", [], "https://control.example:7443"),
], ids=["admin", "user-groups", "server"])
def test_kubeconfig_names_user_and_server(kctl, store_path, args, user, groups, server):
    """The printed kubeconfig has the CA, the server, and a client certificate for the user in the groups."""
    result = kctl("config", "kubeconfig", *args)
    assert result.code == 0, result.err
    doc = YAML(typ="safe").load(result.out)
    assert doc["kind"] == "Config" and doc["current-context"] == "kctl"
    assert doc["clusters"][0]["cluster"]["server"] == server
    pki = PKI.for_store(store_path)
    assert base64.b64decode(doc["clusters"][0]["cluster"]["certificate-authority-data"]) == pki.ca_pem()
    assert _subject(doc) == (user, groups)
    assert pki.folder.stat().st_mode & 0o777 == 0o700


def test_kubeconfig_leaves_a_daemons_serving_certificate(kctl, store_path):
    """The command never remakes the serving certificate a daemon made with its own SANs."""
    pki = PKI.for_store(store_path)
    pki.ensure(sans=["api.example.test"])
    before = pki.apiserver.crt.read_bytes()
    assert kctl("config", "kubeconfig").code == 0
    assert pki.apiserver.crt.read_bytes() == before


@pytest.mark.parametrize("args, message", [
    (("--group", "dev"), "--group needs --user"),
    (("--user", "a", "--days", "0"), "--days 0: must be at least 1"),
    (("--server", "http://127.0.0.1:6443"), "must be an https:// URL"),
], ids=["group-alone", "days", "http"])
def test_bad_options_are_one_line(kctl, store_path, args, message):
    """Bad options: one error line, exit 1, nothing printed on stdout."""
    result = kctl("config", "kubeconfig", *args)
    assert result.code == 1 and result.out == ""
    assert result.err.startswith("error: ") and message in result.err
    assert len(result.err.strip().splitlines()) == 1


def test_missing_store_is_refused(kctl, tmp_path, monkeypatch):
    """A --store that does not exist is the usual one line (no PKI made beside nothing)."""
    monkeypatch.setenv("KCTL_STORE", str(tmp_path / "nope" / "kctl.db"))
    result = kctl("config", "kubeconfig")
    assert result.code == 1 and "no store at" in result.err
    assert not (tmp_path / "nope").exists()
