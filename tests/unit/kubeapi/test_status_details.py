"""A 404's Status carries `details` (kctl.kubeapi.status), as kube-apiserver's do: kubectl reads details.name of it."""

from __future__ import annotations

import pytest

from kctl.kubeapi.resources import PathNotFound
from kctl.kubeapi.status import failure, status_of
from kctl.machinery.errors import BadRequest, NotFound


@pytest.mark.parametrize("status,details", [
    (status_of(PathNotFound()), {}),
    (failure(404, "the server could not find the requested resource", details={}), {}),
    (status_of(NotFound("pods", "web")), {"name": "web", "kind": "pods"}),
    (status_of(BadRequest("bad")), None),
    (failure(401, "Unauthorized"), None),
], ids=["path-not-found", "explicit-empty", "named", "bad-request", "unauthorized"])
def test_details_present_where_kube_apiserver_sends_them(status, details):
    """A NotFound always has details ({} when it names nothing); a BadRequest or a 401 has none."""
    assert status.get("details") == details


@pytest.mark.parametrize("method,path", [
    ("PATCH", "/api/v1/namespaces/default/pods/p/ephemeralcontainers"),
    ("GET", "/api/v1/namespaces/default/widgets"),
    ("GET", "/no/such/path"),
], ids=["ephemeralcontainers", "unknown-resource", "unknown-non-resource-path"])
def test_unknown_paths_answer_empty_details(kubeapi, method, path):
    """kubectl debug PATCHes pods/NAME/ephemeralcontainers: the 404 has `details: {}` (nil details crash kubectl)."""
    reply = kubeapi.request(method, path, body={"spec": {}},
                            content_type="application/strategic-merge-patch+json")
    assert reply.status == 404
    assert reply.json()["details"] == {}
