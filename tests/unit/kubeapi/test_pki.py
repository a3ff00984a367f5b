"""The cluster PKI (kctl.kubeapi.pki): files and modes, SANs, regeneration, identities, kubeconfigs."""

from __future__ import annotations

import base64
import datetime as dt
import multiprocessing
import ssl

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from ruamel.yaml import YAML

from kctl.kubeapi import pki as pki_module
from kctl.kubeapi.pki import PKI, PKIError

FILES = ("ca.crt", "ca.key", "apiserver.crt", "apiserver.key", "admin.crt", "admin.key", "sa.key", "sa.pub")


@pytest.fixture
def pki(tmp_path):
    """A PKI made beside a store path in a temporary folder."""
    p = PKI.for_store(tmp_path / "state" / "kctl.db")
    p.ensure(sans=["api.example.test", "192.0.2.10"])
    return p


def _cert(path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _sans(cert) -> set[str]:
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {*ext.get_values_for_type(x509.DNSName), *(str(a) for a in ext.get_values_for_type(x509.IPAddress))}


def test_files_and_modes(pki, tmp_path):
    """`<store>.pki/` is 0700 and every file in it 0600."""
    assert pki.folder == tmp_path / "state" / "kctl.db.pki"
    assert pki.folder.stat().st_mode & 0o777 == 0o700
    for name in FILES:
        assert (pki.folder / name).stat().st_mode & 0o777 == 0o600, name
    assert not [p for p in pki.folder.iterdir() if p.name.endswith(".tmp")]


def test_serving_certificate_names(pki):
    """The serving certificate carries loopback, the kubernetes Service's names and IP, and the extra SANs."""
    cert = _cert(pki.apiserver.crt)
    sans = _sans(cert)
    for name in ("localhost", "127.0.0.1", "::1", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                 "kubernetes.default.svc.cluster.local", "10.96.0.1", "api.example.test", "192.0.2.10"):
        assert name in sans, name
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usage
    days = (cert.not_valid_after_utc - cert.not_valid_before_utc).days
    assert 364 <= days <= 366
    ca = _cert(pki.ca.crt)
    assert (ca.not_valid_after_utc - ca.not_valid_before_utc).days >= 3649
    cert.verify_directly_issued_by(ca)


def test_admin_certificate_identity(pki):
    """admin.crt is CN=kctl-admin, O=system:masters, for client authentication."""
    cert = _cert(pki.admin.crt)
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == ["kctl-admin"]
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == ["system:masters"]
    assert ExtendedKeyUsageOID.CLIENT_AUTH in cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value


def test_ensure_again_keeps_everything(pki):
    """A second ensure with the same SANs rewrites nothing."""
    before = {name: (pki.folder / name).read_bytes() for name in FILES}
    pki.ensure(sans=["192.0.2.10", "api.example.test"])
    assert {name: (pki.folder / name).read_bytes() for name in FILES} == before


def test_changed_sans_make_a_new_serving_certificate(pki):
    """New SANs remake apiserver.crt (same CA); the CA and the admin certificate stay."""
    ca, admin, serving = pki.ca.crt.read_bytes(), pki.admin.crt.read_bytes(), pki.apiserver.crt.read_bytes()
    pki.ensure(sans=["other.example.test"])
    assert pki.apiserver.crt.read_bytes() != serving
    assert "other.example.test" in _sans(_cert(pki.apiserver.crt))
    assert "api.example.test" not in _sans(_cert(pki.apiserver.crt))
    assert pki.ca.crt.read_bytes() == ca and pki.admin.crt.read_bytes() == admin


@pytest.mark.parametrize("damage", ["expiring", "foreign", "mismatched-key", "missing"])
def test_due_certificates_are_made_again(pki, tmp_path, damage):
    """An admin certificate that expires within 30 days, is another CA's, is not of its key, or is gone is remade."""
    old = pki.admin.crt.read_bytes()
    if damage == "expiring":
        cert, key = pki.issue_client_cert("kctl-admin", ["system:masters"], days=10)
        pki.admin.crt.write_bytes(cert)
        pki.admin.key.write_bytes(key)
        old = cert
    elif damage == "foreign":
        other = PKI.for_store(tmp_path / "other" / "kctl.db")
        other.ensure(sans=[])
        pki.admin.crt.write_bytes(other.admin.crt.read_bytes())
        pki.admin.key.write_bytes(other.admin.key.read_bytes())
        old = other.admin.crt.read_bytes()
    elif damage == "mismatched-key":
        pki.admin.key.write_bytes(pki.apiserver.key.read_bytes())
    else:
        pki.admin.crt.unlink()
    pki.ensure(sans=["api.example.test", "192.0.2.10"])
    new = _cert(pki.admin.crt)
    assert pki.admin.crt.read_bytes() != old
    new.verify_directly_issued_by(_cert(pki.ca.crt))
    assert (new.not_valid_after_utc - dt.datetime.now(dt.timezone.utc)).days > 300


def test_half_a_ca_is_an_error(pki):
    """ca.crt without ca.key is refused with one line naming the file (never a silent new CA)."""
    pki.ca.key.unlink()
    with pytest.raises(PKIError, match="ca.key is missing"):
        pki.ensure(sans=[])


def test_client_certificate_identity(pki):
    """issue_client_cert: CN is the user, each O a group, signed by the CA, valid `days`."""
    cert_pem, key_pem = pki.issue_client_cert("alice", ["dev", "ops"], days=30)
    cert = x509.load_pem_x509_certificate(cert_pem)
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == ["alice"]
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == ["dev", "ops"]
    assert 29 <= (cert.not_valid_after_utc - dt.datetime.now(dt.timezone.utc)).days <= 30
    cert.verify_directly_issued_by(_cert(pki.ca.crt))
    assert b"PRIVATE KEY" in key_pem


def test_kubeconfig_shape(pki):
    """kubeconfig() is kubectl's Config with the CA, the server and a client certificate, data embedded."""
    text = pki.kubeconfig(server_url="https://127.0.0.1:6443", user="system:serviceaccount:x", groups=["g"])
    doc = YAML(typ="safe").load(text)
    assert doc["apiVersion"] == "v1" and doc["kind"] == "Config" and doc["current-context"] == "kctl"
    cluster = doc["clusters"][0]["cluster"]
    assert cluster["server"] == "https://127.0.0.1:6443"
    assert base64.b64decode(cluster["certificate-authority-data"]) == pki.ca_pem()
    assert doc["contexts"][0]["context"] == {"cluster": "kctl", "user": "system:serviceaccount:x"}
    user = doc["users"][0]
    assert user["name"] == "system:serviceaccount:x"
    cert = x509.load_pem_x509_certificate(base64.b64decode(user["user"]["client-certificate-data"]))
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "system:serviceaccount:x"


def test_admin_kubeconfig_uses_admin_certificate(pki):
    """The default kubeconfig is the admin's: admin.crt embedded."""
    doc = YAML(typ="safe").load(pki.kubeconfig())
    assert base64.b64decode(doc["users"][0]["user"]["client-certificate-data"]) == pki.admin.crt.read_bytes()


def test_server_ssl_context_asks_for_optional_client_certificates(pki):
    """The serving context verifies client certificates when given, but does not demand them."""
    ctx = pki.server_ssl_context()
    assert ctx.verify_mode == ssl.CERT_OPTIONAL
    assert ctx.minimum_version >= ssl.TLSVersion.TLSv1_2


def _ensure_in_process(store: str, sans: list[str]) -> None:
    PKI.for_store(store).ensure(sans=sans)


def test_concurrent_ensure_makes_one_ca(tmp_path):
    """Several processes ensuring one store's PKI at once end with one CA that signed every certificate."""
    store = str(tmp_path / "kctl.db")
    mp = multiprocessing.get_context("spawn")
    procs = [mp.Process(target=_ensure_in_process, args=(store, ["a.test"])) for _ in range(4)]
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.join(timeout=120)
            assert p.exitcode == 0
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
    result = PKI.for_store(store)
    ca = _cert(result.ca.crt)
    for pair in (result.apiserver, result.admin):
        _cert(pair.crt).verify_directly_issued_by(ca)
    result.ensure(sans=["a.test"])  # nothing due: the processes agreed
    assert not [p for p in result.folder.iterdir() if p.name.endswith(".tmp")]


def test_wanted_sans_normalise():
    """wanted_sans drops wildcard listen addresses, strips brackets and normalises IPs."""
    names = pki_module.wanted_sans(["0.0.0.0", "[::1]", "API.Example.Test", "0:0::0:1"])
    assert "0.0.0.0" not in names and "api.example.test" in names and names.count("::1") == 1
