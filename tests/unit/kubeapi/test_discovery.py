"""API discovery of the HTTPS API (kctl.kubeapi.discovery.groups, kctl.kubeapi.discovery.catalog): what kubectl
and client libraries read before they act."""

from __future__ import annotations

import pytest
from kubeapi_crds import crontab_crd

from kctl.kubeapi.discovery import catalog as catalog_module
from kctl.kubeapi.discovery import groups as discovery
from kctl.machinery.resources import builtin_registry

AGGREGATED_ACCEPT = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                     "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json")
CRUD = "create,delete,deletecollection,get,list,patch,update,watch"


def _rows(output: str) -> dict[tuple[str, str], dict[str, str]]:
    """`kubectl api-resources -o wide` as {(name, apiVersion): {HEADER: cell}} (cells cut at the header's columns)."""
    lines = output.splitlines()
    header = lines[0]
    names = header.split()
    starts = [header.index(name) for name in names]
    rows = {}
    for line in lines[1:]:
        cells = {name: line[start:(starts[i + 1] if i + 1 < len(starts) else None)].strip()
                 for i, (name, start) in enumerate(zip(names, starts))}
        rows[(cells["NAME"], cells["APIVERSION"])] = cells
    return rows


def _kubectl(kubeapi, *args: str):
    result = kubeapi.kubectl(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("name, api_version, expected", [
    ("pods", "v1", {"SHORTNAMES": "po", "NAMESPACED": "true", "KIND": "Pod", "VERBS": CRUD, "CATEGORIES": "all"}),
    ("configmaps", "v1", {"SHORTNAMES": "cm", "NAMESPACED": "true", "KIND": "ConfigMap", "VERBS": CRUD,
                          "CATEGORIES": ""}),
    ("nodes", "v1", {"SHORTNAMES": "no", "NAMESPACED": "false", "KIND": "Node", "VERBS": CRUD, "CATEGORIES": ""}),
    ("deployments", "apps/v1", {"SHORTNAMES": "deploy", "NAMESPACED": "true", "KIND": "Deployment", "VERBS": CRUD,
                                "CATEGORIES": "all"}),
    ("horizontalpodautoscalers", "autoscaling/v2", {"SHORTNAMES": "hpa", "KIND": "HorizontalPodAutoscaler",
                                                    "CATEGORIES": "all"}),
    ("customresourcedefinitions", "apiextensions.k8s.io/v1", {"SHORTNAMES": "crd,crds", "NAMESPACED": "false"}),
    ("pods", "metrics.k8s.io/v1beta1", {"SHORTNAMES": "", "NAMESPACED": "true", "KIND": "PodMetrics",
                                        "VERBS": "get,list"}),
    ("selfsubjectaccessreviews", "authorization.k8s.io/v1", {"NAMESPACED": "false", "KIND": "SelfSubjectAccessReview",
                                                             "VERBS": "create"}),
    ("gitsources", "kctl.io/v1alpha1", {"SHORTNAMES": "gs", "NAMESPACED": "true", "KIND": "GitSource"}),
], ids=["pods", "configmaps", "nodes", "deployments", "hpa", "crds", "podmetrics", "ssar", "gitsources"])
def test_kubectl_api_resources_rows(kubeapi, name, api_version, expected):
    """`kubectl api-resources -o wide` prints the hand-checked row of each kind (short names, scope, verbs, all)."""
    rows = _rows(_kubectl(kubeapi, "api-resources", "-o", "wide"))
    row = rows[(name, api_version)]
    assert {key: row[key] for key in expected} == expected


def test_kubectl_api_resources_hides_subresources(kubeapi):
    """Subresources (pods/log, deployments/scale) are discovery entries but not api-resources rows."""
    names = _kubectl(kubeapi, "api-resources", "-o", "name").split()
    assert "pods" in names and "deployments.apps" in names
    assert not [n for n in names if "/" in n]


def test_kubectl_api_versions(kubeapi):
    """`kubectl api-versions` lists every served group-version."""
    assert _kubectl(kubeapi, "api-versions").split() == [
        "apiextensions.k8s.io/v1", "apps/v1", "authentication.k8s.io/v1", "authorization.k8s.io/v1",
        "autoscaling/v1", "autoscaling/v2", "batch/v1", "coordination.k8s.io/v1", "discovery.k8s.io/v1",
        "kctl.io/v1alpha1",
        "metrics.k8s.io/v1beta1", "networking.k8s.io/v1", "policy/v1", "rbac.authorization.k8s.io/v1",
        "scheduling.k8s.io/v1", "storage.k8s.io/v1", "v1"]


@pytest.mark.parametrize("path, legacy", [("/api", True), ("/apis", False)], ids=["api", "apis"])
def test_aggregated_discovery_v2_when_asked(kubeapi, path, legacy):
    """kubectl's Accept gets apidiscovery.k8s.io/v2 APIGroupDiscoveryList with that Content-Type."""
    reply = kubeapi.request("GET", path, headers={"Accept": AGGREGATED_ACCEPT})
    assert reply.status == 200
    assert reply.headers["Content-Type"] == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    body = reply.json()
    assert (body["kind"], body["apiVersion"]) == ("APIGroupDiscoveryList", "apidiscovery.k8s.io/v2")
    names = [item["metadata"].get("name", "") for item in body["items"]]
    assert names == [""] if legacy else ("" not in names and names[0] == "apps")


def test_aggregated_discovery_subresources_and_response_kinds(kubeapi):
    """Pods list their log/exec/status subresources; deployments/scale answers autoscaling/v1 Scale."""
    core = kubeapi.request("GET", "/api", headers={"Accept": AGGREGATED_ACCEPT}).json()
    pods = next(r for r in core["items"][0]["versions"][0]["resources"] if r["resource"] == "pods")
    subs = {s["subresource"]: s for s in pods["subresources"]}
    assert {"attach", "binding", "eviction", "exec", "log", "portforward", "status"} <= set(subs)
    assert subs["log"]["verbs"] == ["get"]
    assert subs["eviction"]["responseKind"] == {"group": "policy", "version": "v1", "kind": "Eviction"}
    assert (pods["scope"], pods["singularResource"], pods["shortNames"]) == ("Namespaced", "pod", ["po"])
    apis = kubeapi.request("GET", "/apis", headers={"Accept": AGGREGATED_ACCEPT}).json()
    apps = next(item for item in apis["items"] if item["metadata"]["name"] == "apps")
    deployments = next(r for r in apps["versions"][0]["resources"] if r["resource"] == "deployments")
    scale = next(s for s in deployments["subresources"] if s["subresource"] == "scale")
    assert scale["responseKind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}


@pytest.mark.parametrize("path, kind", [
    ("/api", "APIVersions"), ("/apis", "APIGroupList"), ("/apis/apps", "APIGroup"), ("/api/v1", "APIResourceList"),
    ("/apis/apps/v1", "APIResourceList"),
], ids=["api", "apis", "group", "core-v1", "apps-v1"])
def test_legacy_discovery_documents(kubeapi, path, kind):
    """A plain JSON Accept gets the unaggregated documents."""
    reply = kubeapi.request("GET", path)
    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith("application/json")
    assert reply.json()["kind"] == kind


def test_resource_list_names_subresources_with_their_kind(kubeapi):
    """/api/v1 lists pods/log (kind Pod) and /apis/apps/v1 deployments/scale (autoscaling/v1 Scale)."""
    core = {r["name"]: r for r in kubeapi.request("GET", "/api/v1").json()["resources"]}
    assert core["pods/log"]["kind"] == "Pod" and core["pods/log"]["verbs"] == ["get"]
    assert core["pods"]["storageVersionHash"]
    apps = {r["name"]: r for r in kubeapi.request("GET", "/apis/apps/v1").json()["resources"]}
    assert (apps["deployments/scale"]["group"], apps["deployments/scale"]["version"],
            apps["deployments/scale"]["kind"]) == ("autoscaling", "v1", "Scale")


@pytest.mark.parametrize("path", ["/apis/nosuch.example.com", "/apis/apps/v9", "/api/v2"],
                         ids=["group", "apps-version", "core-version"])
def test_unknown_group_or_version_is_not_found(kubeapi, path):
    """A group or version kctl does not serve answers a 404 Status."""
    reply = kubeapi.request("GET", path)
    assert reply.status == 404
    assert reply.json()["reason"] == "NotFound"


def test_etag_answers_not_modified(kubeapi):
    """A discovery document comes with an ETag; asking again with If-None-Match gets 304."""
    first = kubeapi.request("GET", "/apis", headers={"Accept": AGGREGATED_ACCEPT})
    etag = first.headers["ETag"]
    again = kubeapi.request("GET", "/apis", headers={"Accept": AGGREGATED_ACCEPT, "If-None-Match": etag})
    assert again.status == 304


def test_crd_appears_in_discovery_as_created(kubeapi):
    """A CRD created shows up at once: api-resources (short names, categories), api-versions, /apis/G."""
    before = kubeapi.request("GET", "/apis", headers={"Accept": AGGREGATED_ACCEPT}).headers["ETag"]
    kubeapi.api.create(crontab_crd())
    rows = _rows(_kubectl(kubeapi, "api-resources", "-o", "wide"))
    row = rows[("crontabs", "stable.example.com/v1")]
    assert (row["SHORTNAMES"], row["NAMESPACED"], row["KIND"], row["VERBS"], row["CATEGORIES"]) == (
        "ct", "true", "CronTab", CRUD, "all,cron")
    assert {"stable.example.com/v1", "stable.example.com/v1beta1"} <= set(_kubectl(kubeapi, "api-versions").split())
    group = kubeapi.request("GET", "/apis/stable.example.com").json()
    assert group["preferredVersion"]["version"] == "v1"
    assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1"]
    after = kubeapi.request("GET", "/apis", headers={"Accept": AGGREGATED_ACCEPT}).headers["ETag"]
    assert after != before
    resources = {r["name"]: r for r in kubeapi.request("GET", "/apis/stable.example.com/v1").json()["resources"]}
    assert {"crontabs", "crontabs/status", "crontabs/scale"} <= set(resources)


def test_python_dynamic_client_finds_a_crd_kind(kubeapi, tmp_path):
    """The official client's DynamicClient resolves the CRD's kind to its resource through discovery."""
    from kubernetes import config, dynamic

    kubeapi.api.create(crontab_crd())
    api_client = config.new_client_from_config(config_file=str(kubeapi.kubeconfig))
    try:
        client = dynamic.DynamicClient(api_client, cache_file=str(tmp_path / "discovery.json"))
        crontabs = client.resources.get(api_version="stable.example.com/v1", kind="CronTab")
        assert (crontabs.name, crontabs.namespaced, crontabs.short_names) == ("crontabs", True, ["ct"])
        deployments = client.resources.get(api_version="apps/v1", kind="Deployment")
        assert deployments.name == "deployments"
    finally:
        api_client.close()


# -- the builders, without a server ---------------------------------------------------------------

@pytest.mark.parametrize("accept, wanted", [
    (AGGREGATED_ACCEPT, "v2"),
    ("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", "v2beta1"),
    ("application/json", None),
    ("", None),
    ("application/json,application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", None),
    ("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList,application/json", None),
], ids=["kubectl", "v2beta1", "json", "none", "json-first", "unknown-version"])
def test_negotiate(accept, wanted):
    """The aggregated version is the first acceptable entry of the Accept header, if any."""
    assert discovery.negotiate(accept) == wanted


@pytest.mark.parametrize("versions, expected", [
    (["v1", "v2"], ["v2", "v1"]),
    (["v1beta1", "v1", "v1alpha1"], ["v1", "v1beta1", "v1alpha1"]),
    (["v2beta1", "v1beta2", "v10", "foo"], ["v10", "v2beta1", "v1beta2", "foo"]),
], ids=["ga", "stages", "mixed"])
def test_version_priority(versions, expected):
    """Versions sort as Kubernetes prefers them: GA, then beta, then alpha, higher first; others last."""
    assert sorted(versions, key=catalog_module.version_sort_key) == expected


def test_catalog_verbs_by_kind():
    """Metrics kinds are read-only, review kinds create-only, stored kinds have every verb."""
    catalog = catalog_module.build_catalog(builtin_registry(), [])
    assert catalog.find("metrics.k8s.io", "v1beta1", "NodeMetrics").verbs == ("get", "list")
    assert catalog.find("authorization.k8s.io", "v1", "SubjectAccessReview").verbs == ("create",)
    assert catalog.find("", "v1", "ConfigMap").verbs == catalog_module.CRUD_VERBS
    assert [s.name for s in catalog.find("", "v1", "ConfigMap").subresources] == []
    assert [s.name for s in catalog.find("", "v1", "ServiceAccount").subresources] == ["token"]
    assert catalog.groups[0] == ("", ("v1",))
