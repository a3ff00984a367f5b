"""TLS and authentication of the HTTPS API: CAs, client certificates, no credentials, ServiceAccount tokens.

Against the in-process server (H1's `kubeapi` fixture) with raw HTTPS and the real kubectl.
"""

from __future__ import annotations

import datetime as dt
import http.client
import json
import ssl

import pytest

from kctl.kubeapi.pki import PKI, render_kubeconfig


def _other_pki(tmp_path) -> PKI:
    other = PKI.for_store(tmp_path / "other" / "kctl.db")
    other.ensure(sans=["127.0.0.1"])
    return other


def _get(kubeapi, context: ssl.SSLContext, path: str = "/api/v1/namespaces/default/pods",
         headers: dict | None = None) -> tuple[int, dict]:
    conn = http.client.HTTPSConnection(kubeapi.host, kubeapi.port, context=context, timeout=30)
    try:
        conn.request("GET", path, headers={"Accept": "application/json", **(headers or {})})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


def _client_context(kubeapi, tmp_path, cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    crt, key = tmp_path / "client.crt", tmp_path / "client.key"
    crt.write_bytes(cert_pem)
    key.write_bytes(key_pem)
    key.chmod(0o600)
    return kubeapi.pki.client_ssl_context(cert_file=crt, key_file=key)


def _kubeconfig(kubeapi, tmp_path, **user) -> str:
    path = tmp_path / "user.kubeconfig"
    path.write_text(render_kubeconfig(server_url=kubeapi.url, ca_pem=kubeapi.pki.ca_pem(), user="u", **user))
    path.chmod(0o600)
    return str(path)


def test_wrong_ca_fails_the_handshake(kubeapi, tmp_path):
    """A client trusting another CA refuses the server's certificate (raw TLS and kubectl)."""
    other = _other_pki(tmp_path)
    with pytest.raises(ssl.SSLCertVerificationError):
        _get(kubeapi, other.client_ssl_context())
    path = tmp_path / "wrong-ca.kubeconfig"
    path.write_text(render_kubeconfig(server_url=kubeapi.url, ca_pem=other.ca_pem(), user="kctl-admin",
                                      cert_pem=kubeapi.pki.admin.crt.read_bytes(),
                                      key_pem=kubeapi.pki.admin.key.read_bytes()))
    result = kubeapi.kubectl("--kubeconfig", str(path), "get", "pods")
    assert result.returncode != 0 and "certificate signed by unknown authority" in result.stderr


@pytest.mark.parametrize("case", ["other-ca", "expired"])
def test_bad_client_certificate_is_refused(kubeapi, tmp_path, case):
    """A client certificate of another CA, or an expired one, is refused by the TLS layer: no answer at all."""
    if case == "other-ca":
        cert, key = _other_pki(tmp_path).issue_client_cert("mallory", ["system:masters"])
    else:
        cert, key = kubeapi.pki.issue_client_cert("kctl-admin", ["system:masters"], days=1, not_before=dt.datetime.now(
            dt.timezone.utc) - dt.timedelta(days=5))
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.RemoteDisconnected)):
        _get(kubeapi, _client_context(kubeapi, tmp_path, cert, key))


def test_no_credentials_is_401(kubeapi, tmp_path):
    """No certificate and no token: 401 Status Unauthorized; kubectl with a token the API does not accept says it
    must be logged in (with no credentials at all kubectl asks for a password instead, as against any cluster)."""
    status, body = _get(kubeapi, kubeapi.pki.client_ssl_context())
    assert status == 401
    assert body["kind"] == "Status" and body["reason"] == "Unauthorized" and body["code"] == 401
    result = kubeapi.kubectl("--kubeconfig", _kubeconfig(kubeapi, tmp_path, token="not-a-token"), "get", "pods")
    assert result.returncode == 1
    # kubectl 1.32 words the 401 of its discovery request so (older ones print "(Unauthorized)")
    assert "error: You must be logged in to the server (" in result.stderr


def test_client_certificate_user_reaches_rbac(kubeapi):
    """A CA-signed certificate for alice (no RBAC) is authenticated: 403 naming User "alice", not 401."""
    reply = kubeapi.request("GET", "/api/v1/namespaces/default/pods", user="alice", groups=("dev",))
    assert reply.status == 403
    assert 'User "alice" cannot list resource "pods"' in reply.json()["message"]


def test_admin_kubeconfig_works_by_hostname(kubeapi, tmp_path):
    """The serving certificate names localhost: a kubeconfig with https://localhost:PORT verifies."""
    path = tmp_path / "localhost.kubeconfig"
    path.write_text(kubeapi.pki.kubeconfig(server_url=f"https://localhost:{kubeapi.port}"))
    result = kubeapi.kubectl("--kubeconfig", str(path), "get", "namespaces", "-o", "name")
    assert result.returncode == 0, result.stderr


def _service_account(kubeapi, name: str = "default") -> dict:
    return kubeapi.api.create({"apiVersion": "v1", "kind": "ServiceAccount",
                               "metadata": {"name": name, "namespace": "default"}})


def test_token_request_endpoint(kubeapi):
    """POST .../serviceaccounts/NAME/token answers 201 with a TokenRequest and its token."""
    _service_account(kubeapi, "robot")
    reply = kubeapi.request("POST", "/api/v1/namespaces/default/serviceaccounts/robot/token",
                            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                  "spec": {"expirationSeconds": 600}})
    assert reply.status == 201, reply.body
    body = reply.json()
    assert body["kind"] == "TokenRequest" and body["status"]["token"].count(".") == 2
    assert body["spec"]["expirationSeconds"] == 600
    missing = kubeapi.request("POST", "/api/v1/namespaces/default/serviceaccounts/nobody/token", body={})
    assert missing.status == 404 and missing.json()["reason"] == "NotFound"
    short = kubeapi.request("POST", "/api/v1/namespaces/default/serviceaccounts/robot/token",
                            body={"spec": {"expirationSeconds": 10}})
    assert short.status == 422 and "may not specify a duration less than 10 minutes" in short.json()["message"]


def test_kubectl_create_token_and_use_it(kubeapi, tmp_path):
    """`kubectl create token default` prints a token; used as a bearer token it is that ServiceAccount."""
    _service_account(kubeapi)
    result = kubeapi.kubectl("create", "token", "default", "--duration", "15m")
    assert result.returncode == 0, result.stderr
    token = result.stdout.strip()
    status, body = _get(kubeapi, kubeapi.pki.client_ssl_context(), headers={"Authorization": f"Bearer {token}"})
    assert status == 403
    assert 'User "system:serviceaccount:default:default" cannot list resource "pods"' in body["message"]
    whoami = kubeapi.kubectl("--kubeconfig", _kubeconfig(kubeapi, tmp_path, token=token), "auth", "whoami",
                             "-o", "json")
    if whoami.returncode == 0:  # SelfSubjectReview served (kctl.kubeapi.authz.reviews)
        info = json.loads(whoami.stdout)["status"]["userInfo"]
        assert info["username"] == "system:serviceaccount:default:default"
        assert {"system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"} \
            <= set(info["groups"])


def test_token_of_deleted_service_account_is_401(kubeapi):
    """Once its ServiceAccount is gone, a token no longer authenticates (after the 10 s cache, as Kubernetes)."""
    _service_account(kubeapi, "gone")
    token = kubeapi.api.create_token("default", "gone", {})["status"]["token"]
    kubeapi.api.delete(kubeapi.api.resource("serviceaccounts"), "gone", namespace="default")
    status, body = _get(kubeapi, kubeapi.pki.client_ssl_context(), headers={"Authorization": f"Bearer {token}"})
    assert status == 401 and body["reason"] == "Unauthorized"


def test_garbage_token_is_401(kubeapi):
    """A bearer token that is no valid JWT is 401, and the token is not echoed."""
    status, body = _get(kubeapi, kubeapi.pki.client_ssl_context(),
                        headers={"Authorization": "Bearer not.a.token-secret-value"})
    assert status == 401 and "secret-value" not in json.dumps(body)


def _pb(number: int, value: bytes | int) -> bytes:
    """One protobuf field (length-delimited bytes or a varint)."""
    def varint(n: int) -> bytes:
        out = b""
        while True:
            byte, n = n & 0x7F, n >> 7
            out += bytes([byte | (0x80 if n else 0)])
            if not n:
                return out
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    return varint(number << 3 | 2) + varint(len(value)) + value


def test_protobuf_token_request_is_read():
    """A TokenRequest in Kubernetes' protobuf (as kubectl's typed client sends it) decodes like its JSON."""
    from kctl.kubeapi.authn.tokens import decode_token_request

    ref = _pb(1, b"Pod") + _pb(2, b"v1") + _pb(3, b"web") + _pb(4, b"uid-1")
    spec = _pb(1, b"vault") + _pb(1, b"api") + _pb(3, ref) + _pb(4, 900)
    message = _pb(1, _pb(1, b"")) + _pb(2, spec)
    raw = b"k8s\x00" + _pb(1, _pb(1, b"authentication.k8s.io/v1") + _pb(2, b"TokenRequest")) + _pb(2, message)
    assert decode_token_request(raw) == {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"audiences": ["vault", "api"], "expirationSeconds": 900,
                 "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "web", "uid": "uid-1"}}}
