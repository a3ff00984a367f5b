"""Authentication (kctl.kubeapi.authn): client certificates (CN user, O groups) and ServiceAccount bearer tokens."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from kctl.kubeapi.authn import AUTHENTICATED_GROUP, Authenticator, UserInfo
from kctl.kubeapi.pki import PKI


@pytest.fixture
def pki(tmp_path, api):
    """The PKI of the test store."""
    p = PKI.for_store(api.local_path)
    p.ensure(sans=[])
    return p


@pytest.fixture
def authn(pki, api):
    """An Authenticator over the test store's API and PKI."""
    return Authenticator(pki=pki, api=api)


def _der(cert_pem: bytes) -> bytes:
    return x509.load_pem_x509_certificate(cert_pem).public_bytes(serialization.Encoding.DER)


def test_client_certificate_names_user_and_groups(pki, authn):
    """A CA-signed certificate: CN is the user, O the groups, plus system:authenticated."""
    cert, _ = pki.issue_client_cert("alice", ["dev", "ops"])
    user = authn.authenticate(peercert=None, der_cert=_der(cert), authorization=None)
    assert user == UserInfo(name="alice", groups=("dev", "ops", AUTHENTICATED_GROUP))


def test_admin_certificate_is_system_masters(pki, authn):
    """admin.crt authenticates kctl-admin in system:masters."""
    user = authn.authenticate(peercert=None, der_cert=_der(pki.admin.crt.read_bytes()), authorization=None)
    assert user.name == "kctl-admin" and "system:masters" in user.groups


@pytest.mark.parametrize("case", ["other-ca", "expired", "not-yet-valid", "server-cert"])
def test_bad_client_certificates_are_refused(pki, authn, tmp_path, case):
    """Another CA's certificate, one out of its validity, or a serving certificate: nobody."""
    if case == "other-ca":
        other = PKI.for_store(tmp_path / "other" / "kctl.db")
        other.ensure(sans=[])
        cert, _ = other.issue_client_cert("mallory", ["system:masters"])
    elif case == "expired":
        cert, _ = pki.issue_client_cert("alice", [], days=1,
                                        not_before=dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=3))
    elif case == "not-yet-valid":
        cert, _ = pki.issue_client_cert("alice", [], days=1,
                                        not_before=dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=3))
    else:
        cert = pki.apiserver.crt.read_bytes()
    assert authn.authenticate(peercert=None, der_cert=_der(cert), authorization=None) is None


def test_peercert_dict_is_read_when_no_der(authn):
    """ssl's getpeercert() dict (TLS-verified) gives CN and O."""
    peercert = {"subject": ((("organizationName", "g1"),), (("organizationName", "g2"),), (("commonName", "bob"),))}
    user = authn.authenticate(peercert=peercert, der_cert=None, authorization=None)
    assert user.name == "bob" and user.groups == ("g1", "g2", AUTHENTICATED_GROUP)


def test_service_account_bearer_token(api, authn):
    """A TokenRequest's token authenticates as its ServiceAccount with Kubernetes' groups and uid."""
    sa = api.create({"apiVersion": "v1", "kind": "ServiceAccount",
                     "metadata": {"name": "robot", "namespace": "default"}})
    token = api.create_token("default", "robot", {})["status"]["token"]
    user = authn.authenticate(peercert=None, der_cert=None, authorization=f"Bearer {token}")
    assert user.name == "system:serviceaccount:default:robot"
    assert user.groups == ("system:serviceaccounts", "system:serviceaccounts:default", AUTHENTICATED_GROUP)
    assert user.uid == sa["metadata"]["uid"]


@pytest.mark.parametrize("header", ["", "Bearer ", "Basic YWxpY2U6c2VjcmV0", "Bearer abc.def.ghi", "Bearer x"],
                         ids=["empty", "no-token", "basic", "bad-jwt", "garbage"])
def test_no_or_bad_credentials_are_nobody(authn, header):
    """No credentials, another scheme, or a token that is no valid JWT: None (the server answers 401)."""
    assert authn.authenticate(peercert=None, der_cert=None, authorization=header or None) is None


def test_certificate_wins_over_token(api, pki, authn):
    """With both a certificate and a token, the certificate's user is the request's (as the union authenticator)."""
    api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot", "namespace": "default"}})
    token = api.create_token("default", "robot", {})["status"]["token"]
    cert, _ = pki.issue_client_cert("alice", [])
    user = authn.authenticate(peercert=None, der_cert=_der(cert), authorization=f"Bearer {token}")
    assert user.name == "alice"
