"""/version and the health endpoints of the HTTPS API (kctl.kubeapi.discovery.version), as kube-apiserver answers
them."""

from __future__ import annotations

import json

import pytest

from kctl.kubeapi.discovery import version


def test_git_version_is_kubernetes_semver_with_kctl_build_metadata():
    """gitVersion is v1.32.0+kctl.<kctl version>; major/minor agree with it."""
    from kctl import __version__

    info = version.version_info()
    assert info["gitVersion"] == f"v1.32.0+kctl.{__version__}"
    assert (info["major"], info["minor"]) == ("1", "32")
    assert all(isinstance(value, str) for value in info.values())


def test_version_endpoint_is_public_and_complete(kubeapi):
    """GET /version without credentials answers version.Info with every field the clients require."""
    reply = kubeapi.request("GET", "/version", user=None)
    assert reply.status == 200
    body = reply.json()
    assert set(body) == {"major", "minor", "gitVersion", "gitCommit", "gitTreeState", "buildDate", "goVersion",
                         "compiler", "platform"}
    assert body["gitVersion"].startswith("v1.32.0+kctl.")


def test_kubectl_version_prints_server_version_without_skew_warning(kubeapi):
    """`kubectl version` shows the server's version and no version-skew WARNING."""
    result = kubeapi.kubectl("version", "-o", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["serverVersion"]["gitVersion"].startswith("v1.32.0+kctl.")
    assert "WARNING" not in result.stderr


@pytest.mark.parametrize("path, body", [
    ("/healthz", "ok"),
    ("/livez", "ok"),
    ("/readyz", "ok"),
    ("/readyz/ping", "ok"),
    ("/livez/etcd", "ok"),
], ids=["healthz", "livez", "readyz", "readyz-ping", "livez-etcd"])
def test_health_endpoints_answer_ok(kubeapi, path, body):
    """Each health endpoint (without credentials) and a single named check answers 200 `ok` in text/plain."""
    anonymous = {"user": None} if path.count("/") == 1 else {}  # /readyz/NAME is not a public path
    reply = kubeapi.request("GET", path, **anonymous)
    assert reply.status == 200
    assert reply.body.decode() == body
    assert reply.headers["Content-Type"].startswith("text/plain")


@pytest.mark.parametrize("path, lines", [
    ("/healthz?verbose", ["[+]ping ok", "[+]log ok", "[+]etcd ok", "healthz check passed"]),
    ("/readyz?verbose", ["[+]ping ok", "[+]log ok", "[+]etcd ok", "[+]shutdown ok", "readyz check passed"]),
    ("/livez?verbose&exclude=etcd", ["[+]ping ok", "[+]log ok", "[+]etcd excluded: ok", "livez check passed"]),
], ids=["healthz", "readyz", "livez-exclude"])
def test_health_verbose_lists_each_check(kubeapi, path, lines):
    """?verbose lists every check as kube-apiserver does (`[+]name ok`), excluded ones said so."""
    reply = kubeapi.request("GET", path, user=None)
    assert reply.status == 200
    assert reply.body.decode().splitlines() == lines


def test_unknown_health_check_is_not_found(kubeapi):
    """/readyz/NAME for a check that does not exist answers 404."""
    assert kubeapi.request("GET", "/readyz/nosuchcheck").status == 404


def test_readyz_fails_while_shutting_down(kubeapi):
    """Once the server is stopping, /readyz answers 500 naming the failed shutdown check; /livez stays ok."""
    kubeapi.serving.ctx.stopping.set()
    reply = kubeapi.request("GET", "/readyz?verbose")
    assert reply.status == 500
    assert "[-]shutdown failed: reason withheld" in reply.body.decode().splitlines()
    assert reply.body.decode().splitlines()[-1] == "readyz check failed"
