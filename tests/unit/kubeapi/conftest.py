"""The `kubeapi` fixture: kctl's HTTPS API served in-process over a fresh store, with its PKI and a kubeconfig.

Tests of kctl.kubeapi reach it as kubectl does (`kubeapi.kubectl(...)`), over raw HTTPS
(`kubeapi.request(...)`, the admin's certificate unless another user is named), or through the
official Python client (the kubeconfig at `kubeapi.kubeconfig`). `kubeapi.api` is the APIServer
behind it (to arrange objects directly), `kubeapi.pki` its PKI. Authentication and authorization
are the real ones (the admin is in system:masters; the default RBAC policy is stored, as a daemon's
rbac-bootstrap controller writes it). The server stops when the test ends.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import ssl
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kctl.apiserver import bootstrappolicy
from kctl.apiserver.server import APIServer
from kctl.kubeapi import admissionwarnings, serving
from kctl.kubeapi.app import ServerContext
from kctl.kubeapi.pki import ADMIN_GROUPS, ADMIN_USER, PKI
from kctl.store.sqlite import Store

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
#: seconds a raw request may take before the test fails
REQUEST_TIMEOUT = 30.0


@dataclass
class Reply:
    """One HTTP answer: status, headers, body."""

    status: int
    headers: Any
    body: bytes

    def json(self) -> Any:
        """The body as JSON."""
        return json.loads(self.body)

    def warnings(self) -> list[str]:
        """The Warning headers' values."""
        return self.headers.get_all("Warning") or []


@dataclass
class KubeAPIServer:
    """A running in-process HTTPS API (see the module docstring)."""

    url: str
    kubeconfig: Path
    api: APIServer
    pki: PKI
    serving: serving.Serving
    host: str = "127.0.0.1"
    port: int = 0
    _contexts: dict = field(default_factory=dict)

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        self.serving.stop()

    def ssl_context(self, *, user: str | None = ADMIN_USER, groups: tuple[str, ...] = ADMIN_GROUPS) -> ssl.SSLContext:
        """A client TLS context trusting the cluster CA, with a certificate for user in groups (None: none)."""
        key = (user, tuple(groups))
        if key not in self._contexts:
            if user is None:
                self._contexts[key] = self.pki.client_ssl_context()
            elif user == ADMIN_USER and tuple(groups) == ADMIN_GROUPS:
                self._contexts[key] = self.pki.client_ssl_context(cert_file=self.pki.admin.crt,
                                                                  key_file=self.pki.admin.key)
            else:
                cert, private = self.pki.issue_client_cert(user, groups)
                folder = self.kubeconfig.parent / "certs"
                folder.mkdir(mode=0o700, exist_ok=True)
                crt = folder / f"{len(self._contexts)}.crt"
                pem = folder / f"{len(self._contexts)}.key"
                crt.write_bytes(cert)
                pem.write_bytes(private)
                pem.chmod(0o600)
                self._contexts[key] = self.pki.client_ssl_context(cert_file=crt, key_file=pem)
        return self._contexts[key]

    def request(self, method: str, path: str, *, body: Any = None, headers: dict | None = None,
                content_type: str = "application/json", user: str | None = ADMIN_USER,
                groups: tuple[str, ...] = ADMIN_GROUPS, timeout: float = REQUEST_TIMEOUT) -> Reply:
        """One HTTPS request (a dict/list body is sent as JSON) as user (None: no client certificate)."""
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ssl_context(user=user, groups=groups),
                                           timeout=timeout)
        try:
            data = None
            all_headers = {"Accept": "application/json", **(headers or {})}
            if body is not None:
                data = body if isinstance(body, (bytes, str)) else json.dumps(body)
                all_headers["Content-Type"] = content_type
            conn.request(method, path, body=data, headers=all_headers)
            response = conn.getresponse()
            return Reply(response.status, response.headers, response.read())
        finally:
            conn.close()

    def stream(self, path: str, *, user: str | None = ADMIN_USER, groups: tuple[str, ...] = ADMIN_GROUPS,
               headers: dict | None = None, timeout: float = REQUEST_TIMEOUT) -> tuple[http.client.HTTPSConnection,
                                                                                       http.client.HTTPResponse]:
        """Open a streaming GET (a watch): (connection, response); read lines with response.readline(); close
        the connection when done."""
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ssl_context(user=user, groups=groups),
                                           timeout=timeout)
        conn.request("GET", path, headers={"Accept": "application/json", **(headers or {})})
        return conn, conn.getresponse()

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 60,
                env: dict | None = None) -> subprocess.CompletedProcess:
        """Run the real kubectl against this server (text in and out; never raises on a non-zero exit)."""
        full_env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "HOME": str(self.kubeconfig.parent),
                    **(env or {})}
        return subprocess.run([KUBECTL, "--kubeconfig", str(self.kubeconfig), *args], input=input,
                              capture_output=True, text=True, timeout=timeout, env=full_env)


@pytest.fixture(scope="session")
def _kubeapi_pki_template(tmp_path_factory) -> Path:
    """A PKI folder made once per session (key generation is slow), copied into each test's store."""
    store_path = tmp_path_factory.mktemp("kubeapi-pki") / "kctl.db"
    pki = PKI.for_store(store_path)
    pki.ensure(sans=["127.0.0.1", "localhost"])
    return pki.folder


def start_kubeapi(tmp_path: Path, template: Path, *, bookmark_interval: float = 1.0) -> KubeAPIServer:
    """A server over a new store in tmp_path, its PKI copied from template."""
    from kctl.kubeapi.authn import Authenticator
    from kctl.kubeapi.authz import Authorizer

    store_path = tmp_path / "kubeapi" / "kctl.db"
    store = Store(store_path)
    api = APIServer(store, user="tester", audit_log=None)
    admissionwarnings.route(api)
    bootstrappolicy.ensure(api)  # the default ClusterRoles and bindings, as the daemon's rbac-bootstrap writes them
    pki = PKI.for_store(store_path)
    shutil.copytree(template, pki.folder)
    authorizer = Authorizer(api)
    ctx = ServerContext(api=api, pki=pki, authenticator=Authenticator(pki=pki, api=api), authorizer=authorizer,
                        bookmark_interval=bookmark_interval)
    handle = serving.start(ctx, host="127.0.0.1", port=0)
    kubeconfig = tmp_path / "kubeapi" / "kubeconfig"
    kubeconfig.write_text(pki.kubeconfig(server_url=handle.url))
    kubeconfig.chmod(0o600)
    return KubeAPIServer(url=handle.url, kubeconfig=kubeconfig, api=api, pki=pki, serving=handle,
                         port=handle.port)


@pytest.fixture
def kubeapi(tmp_path, _kubeapi_pki_template):
    """kctl's HTTPS API on 127.0.0.1:<free port> over a fresh store (see the module docstring)."""
    server = start_kubeapi(tmp_path, _kubeapi_pki_template)
    try:
        yield server
    finally:
        server.stop()
        server.api.close()
