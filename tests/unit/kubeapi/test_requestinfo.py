"""Request parsing (kctl.kubeapi.requestinfo): the cases of Kubernetes' RequestInfoFactory tests."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest

from kctl.kubeapi.requestinfo import parse

# method, URL, verb, prefix, group, version, namespace, resource, subresource, name, parts
RESOURCE_CASES = [
    ("GET", "/api/v1/namespaces", "list", "api", "", "v1", "", "namespaces", "", "", ("namespaces",)),
    ("GET", "/api/v1/namespaces/other", "get", "api", "", "v1", "other", "namespaces", "", "other",
     ("namespaces", "other")),
    ("GET", "/api/v1/namespaces/other/pods", "list", "api", "", "v1", "other", "pods", "", "", ("pods",)),
    ("GET", "/api/v1/namespaces/other/pods/foo", "get", "api", "", "v1", "other", "pods", "", "foo",
     ("pods", "foo")),
    ("HEAD", "/api/v1/namespaces/other/pods/foo", "get", "api", "", "v1", "other", "pods", "", "foo",
     ("pods", "foo")),
    ("GET", "/api/v1/pods", "list", "api", "", "v1", "", "pods", "", "", ("pods",)),
    ("HEAD", "/api/v1/pods", "list", "api", "", "v1", "", "pods", "", "", ("pods",)),
    ("GET", "/api/v1/proxy/namespaces/other/pods/foo", "proxy", "api", "", "v1", "other", "pods", "", "foo",
     ("pods", "foo")),
    ("GET", "/api/v1/redirect/namespaces/other/pods/foo", "redirect", "api", "", "v1", "other", "pods", "", "foo",
     ("pods", "foo")),
    ("GET", "/api/v1/watch/pods", "watch", "api", "", "v1", "", "pods", "", "", ("pods",)),
    ("GET", "/api/v1/pods?watch=true", "watch", "api", "", "v1", "", "pods", "", "", ("pods",)),
    ("GET", "/api/v1/pods?watch=false", "list", "api", "", "v1", "", "pods", "", "", ("pods",)),
    ("GET", "/api/v1/watch/namespaces/other/pods", "watch", "api", "", "v1", "other", "pods", "", "", ("pods",)),
    ("GET", "/api/v1/namespaces/other/pods?watch=1", "watch", "api", "", "v1", "other", "pods", "", "", ("pods",)),
    ("GET", "/api/v1/namespaces/other/pods?watch=0", "list", "api", "", "v1", "other", "pods", "", "", ("pods",)),
    ("GET", "/api/v1/namespaces/other/pods/foo/status", "get", "api", "", "v1", "other", "pods", "status", "foo",
     ("pods", "foo", "status")),
    ("GET", "/api/v1/namespaces/other/pods/foo/proxy/subpath", "get", "api", "", "v1", "other", "pods", "proxy",
     "foo", ("pods", "foo", "proxy", "subpath")),
    ("PUT", "/api/v1/namespaces/other/finalize", "update", "api", "", "v1", "other", "namespaces", "finalize",
     "other", ("namespaces", "other", "finalize")),
    ("PUT", "/api/v1/namespaces/other/status", "update", "api", "", "v1", "other", "namespaces", "status", "other",
     ("namespaces", "other", "status")),
    ("PATCH", "/api/v1/namespaces/other/pods/foo", "patch", "api", "", "v1", "other", "pods", "", "foo",
     ("pods", "foo")),
    ("DELETE", "/api/v1/namespaces/other/pods/foo", "delete", "api", "", "v1", "other", "pods", "", "foo",
     ("pods", "foo")),
    ("POST", "/api/v1/namespaces/other/pods", "create", "api", "", "v1", "other", "pods", "", "", ("pods",)),
    ("DELETE", "/api/v1/nodes", "deletecollection", "api", "", "v1", "", "nodes", "", "", ("nodes",)),
    ("DELETE", "/api/v1/namespaces", "deletecollection", "api", "", "v1", "", "namespaces", "", "",
     ("namespaces",)),
    ("DELETE", "/api/v1/namespaces/other/pods", "deletecollection", "api", "", "v1", "other", "pods", "", "",
     ("pods",)),
    ("DELETE", "/apis/extensions/v1/namespaces/other/pods", "deletecollection", "apis", "extensions", "v1", "other",
     "pods", "", "", ("pods",)),
    ("POST", "/apis/extensions/v1/namespaces/other/pods", "create", "apis", "extensions", "v1", "other", "pods", "",
     "", ("pods",)),
    ("POST", "/apis/extensions/v1beta3/namespaces/other/pods", "create", "apis", "extensions", "v1beta3", "other",
     "pods", "", "", ("pods",)),
    ("GET", "/apis/apps/v1/namespaces/web/deployments/front/scale", "get", "apis", "apps", "v1", "web",
     "deployments", "scale", "front", ("deployments", "front", "scale")),
    ("POST", "/api/v1/namespaces/web/pods/p/eviction", "create", "api", "", "v1", "web", "pods", "eviction", "p",
     ("pods", "p", "eviction")),
    # a list or watch whose field selector pins metadata.name is about that name (Kubernetes 1.27+)
    ("GET", "/api/v1/namespaces/other/pods?fieldSelector=metadata.name%3Dfoo", "list", "api", "", "v1", "other",
     "pods", "", "foo", ("pods",)),
    ("GET", "/api/v1/namespaces/other/pods?watch=true&fieldSelector=metadata.name%3D%3Dfoo", "watch", "api", "",
     "v1", "other", "pods", "", "foo", ("pods",)),
    ("GET", "/api/v1/namespaces/other/pods?fieldSelector=metadata.name!%3Dfoo", "list", "api", "", "v1", "other",
     "pods", "", "", ("pods",)),
]


def _parse(method: str, url: str):
    split = urlsplit(url)
    return parse(method, split.path, dict(parse_qsl(split.query)))


@pytest.mark.parametrize("case", RESOURCE_CASES, ids=[f"{c[0]} {c[1]}" for c in RESOURCE_CASES])
def test_resource_requests(case):
    """Verb, group, version, namespace, resource, subresource, name and parts as Kubernetes finds them."""
    method, url, verb, prefix, group, version, namespace, resource, sub, name, parts = case
    info = _parse(method, url)
    assert info.resource_request
    assert (info.verb, info.api_prefix, info.api_group, info.api_version, info.namespace, info.resource,
            info.subresource, info.name, info.parts) == (verb, prefix, group, version, namespace, resource, sub,
                                                         name, parts)
    assert info.path == urlsplit(url).path


NON_RESOURCE_CASES = [
    ("GET", "/", "get"), ("GET", "/api", "get"), ("GET", "/apis", "get"), ("GET", "/apis/apps", "get"),
    ("GET", "/api/v1", "get"), ("GET", "/apis/apps/v1", "get"), ("GET", "/healthz", "get"),
    ("GET", "/version", "get"), ("GET", "/openapi/v2", "get"), ("POST", "/logs", "post"),
    ("GET", "/api/v1/watch", "get"),
]


@pytest.mark.parametrize("method,url,verb", NON_RESOURCE_CASES, ids=[c[1] for c in NON_RESOURCE_CASES])
def test_non_resource_requests(method, url, verb):
    """Discovery, health and other paths are non-resource requests whose verb is the method in lower case."""
    info = _parse(method, url)
    assert not info.resource_request
    assert info.verb == verb and info.path == url
