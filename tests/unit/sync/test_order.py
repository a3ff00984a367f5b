"""kctl.sync.order: dependency order for applying, its reverse for pruning, stable within a kind."""

from __future__ import annotations

import pytest

from kctl.sync.order import KIND_ORDER, apply_order, kind_rank, prune_order
from kctl.sync.render import Rendered


def item(api_version: str, kind: str, name: str = "x") -> Rendered:
    return Rendered({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}, "f.yaml", 1)


@pytest.mark.parametrize("first, then", [
    (("v1", "Namespace"), ("apiextensions.k8s.io/v1", "CustomResourceDefinition")),
    (("apiextensions.k8s.io/v1", "CustomResourceDefinition"), ("kctl.io/v1alpha1", "MutatingAdmissionHook")),
    (("kctl.io/v1alpha1", "ValidatingAdmissionHook"), ("v1", "ServiceAccount")),
    (("rbac.authorization.k8s.io/v1", "RoleBinding"), ("v1", "ConfigMap")),
    (("v1", "ConfigMap"), ("v1", "Secret")),
    (("v1", "Secret"), ("v1", "PersistentVolumeClaim")),
    (("v1", "PersistentVolumeClaim"), ("v1", "Service")),
    (("v1", "Service"), ("v1", "Endpoints")),
    (("v1", "Endpoints"), ("apps/v1", "DaemonSet")),
    (("apps/v1", "DaemonSet"), ("apps/v1", "Deployment")),
    (("apps/v1", "Deployment"), ("apps/v1", "ReplicaSet")),
    (("apps/v1", "StatefulSet"), ("batch/v1", "Job")),
    (("batch/v1", "Job"), ("batch/v1", "CronJob")),
    (("batch/v1", "CronJob"), ("v1", "Pod")),
    (("v1", "Pod"), ("example.com/v1", "Widget")),
    (("v1", "Pod"), ("coordination.k8s.io/v1", "Lease")),
    (("v1", "Pod"), ("example.com/v1", "ConfigMap")),  # a custom kind named like a built-in
], ids=lambda pair: pair[1])
def test_apply_order_pairs(first, then):
    """`first` is applied before `then` whatever order they were rendered in."""
    assert kind_rank(*first) < kind_rank(*then)
    ordered = apply_order([item(*then), item(*first)])
    assert [(i.obj["apiVersion"], i.obj["kind"]) for i in ordered] == [first, then]


def test_apply_order_is_stable_and_new():
    """Objects of one rank keep their rendered order; the input list is not changed."""
    items = [item("example.com/v1", "Widget", "w1"), item("apps/v1", "Deployment", "d1"),
             item("v1", "ConfigMap", "c1"), item("example.com/v1", "Gadget", "g1"),
             item("apps/v1", "Deployment", "d2"), item("v1", "ConfigMap", "c2"), item("v1", "Namespace", "n")]
    before = list(items)
    ordered = apply_order(items)
    assert [i.obj["metadata"]["name"] for i in ordered] == ["n", "c1", "c2", "d1", "d2", "w1", "g1"]
    assert items == before


def test_prune_order_is_the_reverse():
    """Deletion goes workloads first, Namespaces last; unknown kinds before everything."""
    refs = [{"apiVersion": "v1", "kind": "Namespace", "namespace": "", "name": "n"},
            {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "n", "name": "c"},
            {"apiVersion": "example.com/v1", "kind": "Widget", "namespace": "n", "name": "w"},
            {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "n", "name": "d1"},
            {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "n", "name": "d2"},
            {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "namespace": "",
             "name": "widgets.example.com"}]
    assert [r["name"] for r in prune_order(refs)] == ["w", "d1", "d2", "c", "widgets.example.com", "n"]


def test_every_listed_kind_has_its_own_rank():
    """KIND_ORDER names no kind twice."""
    assert len({kind_rank(f"{g}/v1" if g else "v1", k) for g, k in KIND_ORDER}) == len(KIND_ORDER)
