"""Access reviews and RBAC objects posted in Kubernetes' protobuf encoding (kubectl's typed clients: auth can-i,
create role/rolebinding) decode to the objects JSON would give."""

from __future__ import annotations

import pytest

from kctl.kubeapi.authz.reviews import decode_body
from kctl.kubeapi.protobuf import decode
from kctl.machinery.errors import BadRequest

PROTOBUF = "application/vnd.kubernetes.protobuf"
#: what kubectl 1.32 posts for `kubectl auth can-i list pods -n a`
KUBECTL_CAN_I = (b'k8s\x00\n2\n\x17authorization.k8s.io/v1\x12\x17SelfSubjectAccessReview\x127\n\x10\n\x00\x12\x00'
                 b'\x1a\x00"\x00*\x002\x008\x00B\x00\x12\x19\n\x17\n\x01a\x12\x04list\x1a\x00"\x00*\x04pods2\x00:\x00'
                 b'\x1a\x08\x08\x00\x12\x00\x1a\x00 \x00\x1a\x00"\x00')


def _field(number: int, payload: bytes) -> bytes:
    return bytes([number << 3 | 2, len(payload)]) + payload


def _envelope(api_version: bytes, kind: bytes, message: bytes) -> bytes:
    return b"k8s\x00" + _field(1, _field(1, api_version) + _field(2, kind)) + _field(2, message)


def test_kubectls_self_subject_access_review():
    """The bytes kubectl sends decode to the review's resourceAttributes."""
    body = decode_body(KUBECTL_CAN_I, PROTOBUF)
    assert body["kind"] == "SelfSubjectAccessReview"
    assert body["spec"] == {"resourceAttributes": {"namespace": "a", "verb": "list", "resource": "pods"}}


def test_subject_access_review_fields():
    """user, groups, extra (a map of ExtraValue, a plain list in JSON) and uid; non-resource attributes."""
    extra = _field(1, b"scopes") + _field(2, _field(1, b"a") + _field(1, b"b"))
    spec = (_field(2, _field(1, b"/healthz") + _field(2, b"get")) + _field(3, b"alice") + _field(4, b"devs")
            + _field(4, b"ops") + _field(5, extra) + _field(6, b"u1"))
    body = _envelope(b"authorization.k8s.io/v1", b"SubjectAccessReview", _field(2, spec))
    assert decode_body(body, PROTOBUF)["spec"] == {"nonResourceAttributes": {"path": "/healthz", "verb": "get"},
                                                   "user": "alice", "groups": ["devs", "ops"],
                                                   "extra": {"scopes": ["a", "b"]}, "uid": "u1"}


def test_rules_review_namespace():
    """SelfSubjectRulesReview's spec holds only the namespace."""
    body = _envelope(b"authorization.k8s.io/v1", b"SelfSubjectRulesReview", _field(2, _field(1, b"team")))
    assert decode_body(body, PROTOBUF)["spec"] == {"namespace": "team"}


def test_role_binding_and_cluster_role():
    """RBAC kinds (kubectl create rolebinding/clusterrole): subjects, roleRef, rules, aggregationRule."""
    subject = _field(1, b"User") + _field(2, b"rbac.authorization.k8s.io") + _field(3, b"alice")
    ref = _field(1, b"rbac.authorization.k8s.io") + _field(2, b"ClusterRole") + _field(3, b"view")
    binding = decode(_envelope(b"rbac.authorization.k8s.io/v1", b"RoleBinding",
                               _field(1, _field(1, b"rb") + _field(3, b"a")) + _field(2, subject) + _field(3, ref)))
    assert binding["metadata"] == {"name": "rb", "namespace": "a"}
    assert binding["subjects"] == [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}
    rule = _field(1, b"get") + _field(2, b"") + _field(3, b"pods") + _field(4, b"web")
    selector = _field(1, _field(1, _field(1, b"x") + _field(2, b"y")))
    role = decode(_envelope(b"rbac.authorization.k8s.io/v1", b"ClusterRole",
                            _field(1, _field(1, b"r")) + _field(2, rule) + _field(3, selector)))
    assert role["rules"] == [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["web"]}]
    assert role["aggregationRule"] == {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}


@pytest.mark.parametrize("body", [b'not json', KUBECTL_CAN_I[:40], b"k8s\x00\x0f"],
                         ids=["no-magic", "truncated", "bad-wire-type"])
def test_bad_bodies_are_bad_requests(body):
    """A body that is not a complete protobuf review is one BadRequest line."""
    with pytest.raises(BadRequest):
        decode_body(body, PROTOBUF)
