"""A StatefulSet's stable DNS: its pods' hostname/subdomain reach EndpointSlices and the cluster zone."""

from __future__ import annotations

from lifecycle_harness import fake_kubelet, running, wait_for

from kctl.controllers.endpointslice import EndpointSliceController
from kctl.controllers.statefulset.controller import StatefulSetController
from kctl.dns.records import answer


class APIView:
    """The DNS ClusterView over the API (the daemon reads informer caches instead)."""

    def __init__(self, api) -> None:
        self.api = api

    def service(self, namespace: str, name: str) -> dict | None:
        items, _ = self.api.list(self.api.resource("services"), namespace=namespace)
        return next((s for s in items if s["metadata"]["name"] == name), None)

    def endpoint_slices(self, namespace: str, service: str) -> list[dict]:
        items, _ = self.api.list(self.api.resource("endpointslices.discovery.k8s.io"), namespace=namespace)
        return [s for s in items if (s["metadata"].get("labels") or {}).get("kubernetes.io/service-name") == service]


def test_pod_names_resolve_through_the_headless_service(api):
    """web-N.web.default.svc.cluster.local answers web-N's address once it is ready."""
    api.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
                "spec": {"clusterIP": "None", "selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}]}})
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web", "namespace": "default"},
           "spec": {"replicas": 2, "serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                                 "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox:1"}]}}}}
    view = APIView(api)
    with fake_kubelet(api, ["n1"]), running(api, [StatefulSetController(), EndpointSliceController()]):
        api.create(sts)

        def resolved() -> dict[str, list]:
            out = {}
            for name in ("web-0", "web-1"):
                records = answer(f"{name}.web.default.svc.cluster.local.", "A", view).records
                out[name] = [r.data for r in records]
            return out if all(out.values()) else {}

        addresses = wait_for(resolved, what="both pods resolve")
        pods, _ = api.list(api.resource("pods"), namespace="default")
        by_name = {p["metadata"]["name"]: p["status"]["podIP"] for p in pods}
        assert addresses == {"web-0": [by_name["web-0"]], "web-1": [by_name["web-1"]]}
        slices = view.endpoint_slices("default", "web")
        assert sorted(e["hostname"] for s in slices for e in s["endpoints"]) == ["web-0", "web-1"]
