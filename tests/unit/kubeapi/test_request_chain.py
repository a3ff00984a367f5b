"""The filter chain (kctl.kubeapi.app) and the server's life (kctl.kubeapi.serving): authn, authz, warnings, errors."""

from __future__ import annotations

import socket

import pytest

from kctl.kubeapi import serving
from kctl.kubeapi.app import ServerContext

CM = "/api/v1/namespaces/default/configmaps"


def test_no_credentials_is_401(kubeapi):
    """A request without a client certificate or token: 401 Unauthorized Status."""
    reply = kubeapi.request("GET", CM, user=None)
    assert reply.status == 401
    assert reply.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


def test_bad_bearer_token_is_401(kubeapi):
    """A bearer token the server did not issue: 401."""
    reply = kubeapi.request("GET", CM, user=None, headers={"Authorization": "Bearer not-a-token"})
    assert reply.status == 401


def test_anonymous_may_read_health(kubeapi):
    """Without credentials, /healthz answers (Kubernetes' public info); nothing else does."""
    assert kubeapi.request("GET", "/healthz", user=None).status == 200
    assert kubeapi.request("GET", "/api", user=None).status == 401


def test_forbidden_is_403_with_kubernetes_text(kubeapi):
    """A user RBAC does not allow: 403 with Kubernetes' message and details."""
    reply = kubeapi.request("GET", "/api/v1/namespaces/other/pods/web", user="alice", groups=("dev",))
    assert reply.status == 403
    status = reply.json()
    assert status["reason"] == "Forbidden"
    assert status["message"] == ('pods "web" is forbidden: User "alice" cannot get resource "pods" in API group "" '
                                 'in the namespace "other"')
    assert status["details"] == {"name": "web", "kind": "pods"}


def test_unknown_non_resource_path_is_404(kubeapi):
    """A path no handler serves: 404 NotFound Status."""
    reply = kubeapi.request("GET", "/no/such/path")
    assert reply.status == 404 and reply.json()["reason"] == "NotFound"


def test_admission_warnings_become_warning_headers(kubeapi):
    """A warning the API raises while serving a request comes back as `Warning: 299 - "..."`, only to that request."""
    original = kubeapi.api.create

    def create(obj, **kwargs):
        kubeapi.api.warn('metadata.name: "a" is "quoted"')
        return original(obj, **kwargs)

    kubeapi.api.create = create
    try:
        reply = kubeapi.request("POST", CM, body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})
    finally:
        kubeapi.api.create = original
    assert reply.status == 201
    assert reply.warnings() == ['299 - "metadata.name: \\"a\\" is \\"quoted\\""']
    assert kubeapi.request("GET", f"{CM}/a").warnings() == []


def test_unexpected_failure_is_500_without_details(kubeapi):
    """A bug in a handler: 500 InternalError naming only the error's type (no traceback, no data)."""
    original = kubeapi.api.get

    def get(*args, **kwargs):
        raise ValueError("secret value s3cr3t")

    kubeapi.api.get = get
    try:
        reply = kubeapi.request("GET", f"{CM}/a")
    finally:
        kubeapi.api.get = original
    assert reply.status == 500
    assert reply.json()["message"] == "Internal error occurred: ValueError"
    assert b"s3cr3t" not in reply.body and b"Traceback" not in reply.body


def test_keep_alive_serves_many_requests_on_one_connection(kubeapi):
    """One TLS connection carries several requests (keep-alive)."""
    import http.client

    conn = http.client.HTTPSConnection(kubeapi.host, kubeapi.port, context=kubeapi.ssl_context(), timeout=30)
    try:
        for _ in range(3):
            conn.request("GET", "/api/v1/namespaces/default")
            response = conn.getresponse()
            assert response.status == 200
            response.read()
            assert response.getheader("Connection", "keep-alive").lower() != "close"
    finally:
        conn.close()


def test_address_in_use_is_a_listen_error(kubeapi):
    """start_for_api on a port already taken: ListenError naming the address, nothing left running."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(serving.ListenError, match=f"cannot listen on 127.0.0.1:{port}"):
            serving.start_for_api(kubeapi.api, host="127.0.0.1", port=port)


@pytest.mark.parametrize("text,expected", [("127.0.0.1:6443", ("127.0.0.1", 6443)), (":443", ("0.0.0.0", 443)),
                                           ("[::]:6443", ("::", 6443)), ("localhost:0", ("localhost", 0))],
                         ids=["ipv4", "any", "ipv6", "free-port"])
def test_parse_listen(text, expected):
    """ADDR:PORT as (host, port)."""
    assert serving.parse_listen(text) == expected


def test_stop_is_idempotent(kubeapi):
    """stop() twice is harmless; the port no longer answers."""
    kubeapi.stop()
    kubeapi.stop()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", kubeapi.port), timeout=5).close()


def test_server_context_runs_calls_with_the_request_context():
    """ServerContext.run: a blocking call on the pool sees the caller's context variables."""
    import asyncio
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("v", default="unset")
    ctx = ServerContext(api=None)

    async def main() -> str:
        var.set("request")
        return await ctx.run(var.get)

    try:
        assert asyncio.run(main()) == "request"
    finally:
        ctx.executor.shutdown()


def test_oversized_body_is_a_413_status(kubeapi):
    """A body over the server's limit: 413 RequestEntityTooLarge as a Status, not aiohttp's page."""
    big = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"}, "data": {"k": "x" * (5 << 20)}}
    reply = kubeapi.request("POST", CM, body=big)
    assert reply.status == 413
    assert reply.json()["reason"] == "RequestEntityTooLarge"


def test_a_certificates_user_is_remembered_briefly(kubeapi, monkeypatch):
    """The authenticator checks a client certificate once per CERT_CACHE_SECONDS, not on every request."""
    from kctl.kubeapi import app

    authenticator = kubeapi.serving.ctx.authenticator
    calls = []
    original = authenticator.authenticate

    def authenticate(**kwargs):
        calls.append(kwargs["der_cert"])
        return original(**kwargs)

    monkeypatch.setattr(authenticator, "authenticate", authenticate)
    for _ in range(3):
        assert kubeapi.request("GET", "/api/v1/namespaces/default").status == 200
    assert len(calls) == 1
    monkeypatch.setattr(app, "CERT_CACHE_SECONDS", 0.0)
    kubeapi.serving.ctx.cert_users.clear()
    for _ in range(2):
        assert kubeapi.request("GET", "/api/v1/namespaces/default").status == 200
    assert len(calls) == 3
