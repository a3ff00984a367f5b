"""OpenAPI of the HTTPS API (kctl.kubeapi.discovery.openapi, kctl.kubeapi.discovery.openapischemas): kubectl
explain, client-side apply's strategic merge patch, edit, and the documents themselves."""

from __future__ import annotations

import gzip
import json
import shlex
import sys

import pytest
from kubeapi_crds import crontab, crontab_crd

from kctl.kubeapi.discovery import openapischemas as oas

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: localhost/busybox
        env: [ENV]
"""


def _deployment(*env: str) -> str:
    return DEPLOYMENT.replace("ENV", ", ".join(f"{{name: {name}, value: v}}" for name in env))


def _namespace(kubeapi, name: str = "default") -> None:
    if kubeapi.api.find(kubeapi.api.resource("namespaces"), name) is None:
        kubeapi.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def _ok(result):
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("field, lines", [
    ("deployment.spec.replicas", ["GROUP:      apps", "KIND:       Deployment", "FIELD: replicas <integer>"]),
    ("pods.spec.containers.ports", ["KIND:       Pod", "FIELD: ports <[]ContainerPort>"]),
    ("svc.spec.ports.targetPort", ["KIND:       Service", "FIELD: targetPort <IntOrString>"]),
    ("pods.spec.containers.resources.limits", ["FIELD: limits <map[string]Quantity>"]),
    ("deployment.spec.strategy", ["FIELD: strategy <DeploymentStrategy>",
                                  "  rollingUpdate\t<RollingUpdateDeployment>"]),
], ids=["replicas", "ports", "int-or-string", "quantity", "object"])
def test_kubectl_explain_builtin_fields(kubeapi, field, lines):
    """`kubectl explain` finds the field in /openapi/v3 and prints its type as against Kubernetes."""
    out = _ok(kubeapi.kubectl("explain", field))
    for line in lines:
        assert line in out.splitlines()


def test_kubectl_explain_prints_descriptions(kubeapi):
    """The field's description comes from kctl's schemas."""
    out = _ok(kubeapi.kubectl("explain", "deployment.spec.replicas"))
    assert "Number of desired pods." in " ".join(out.split())


def test_kubectl_explain_crd_field(kubeapi):
    """A CRD's fields are explained from its openAPIV3Schema, as soon as it is created."""
    kubeapi.api.create(crontab_crd())
    out = _ok(kubeapi.kubectl("explain", "crontabs.spec.cronSpec"))
    assert "GROUP:      stable.example.com" in out.splitlines()
    assert "FIELD: cronSpec <string>" in out.splitlines()
    assert "The schedule, in cron format." in out
    top = _ok(kubeapi.kubectl("explain", "ct"))
    assert "CronTab runs an image on a schedule." in top
    assert "  metadata\t<ObjectMeta>" in top.splitlines()


def test_client_side_apply_uses_strategic_merge_patch_from_openapi(kubeapi, tmp_path):
    """A second `kubectl apply` sends a strategic merge patch built from the v3 patch metadata: an env entry
    another writer added survives (merged by name), validation is left to the server (fieldValidation=Strict)."""
    _namespace(kubeapi)
    manifest = tmp_path / "web.yaml"
    manifest.write_text(_deployment("A", "B"))
    _ok(kubeapi.kubectl("apply", "-f", str(manifest)))
    rt = kubeapi.api.resource("deployments")
    live = kubeapi.api.get(rt, "web", namespace="default")
    live["spec"]["template"]["spec"]["containers"][0]["env"].append({"name": "D", "value": "other-writer"})
    kubeapi.api.update(live)
    manifest.write_text(_deployment("A", "B", "C"))
    result = kubeapi.kubectl("apply", "-f", str(manifest), "-v=8")
    _ok(result)
    assert "Content-Type: application/strategic-merge-patch+json" in result.stderr
    assert "fieldValidation=Strict" in result.stderr
    assert "error calculating patch from openapi" not in result.stderr
    assert "/openapi/v2" not in result.stderr
    env = kubeapi.api.get(rt, "web", namespace="default")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert sorted(e["name"] for e in env) == ["A", "B", "C", "D"]


def test_client_side_apply_of_a_custom_kind_uses_merge_patch(kubeapi, tmp_path):
    """A custom kind's PATCH accepts no strategic merge patch, so kubectl sends a JSON merge patch (as Kubernetes)."""
    _namespace(kubeapi)
    kubeapi.api.create(crontab_crd())
    manifest = tmp_path / "ct.yaml"
    manifest.write_text(json.dumps(crontab("nightly")))
    _ok(kubeapi.kubectl("apply", "-f", str(manifest)))
    manifest.write_text(json.dumps(crontab("nightly", replicas=5)))
    result = kubeapi.kubectl("apply", "-f", str(manifest), "-v=8")
    _ok(result)
    assert "Content-Type: application/merge-patch+json" in result.stderr


EDITOR = """\
import sys
path = sys.argv[1]
text = open(path).read()
open(path, "w").write(text.replace("replicas: 2", "replicas: 3", 1))
"""


def test_kubectl_edit_with_a_scripted_editor(kubeapi, tmp_path):
    """`kubectl edit` fetches, lets the editor change the object, and patches it."""
    _namespace(kubeapi)
    manifest = tmp_path / "web.yaml"
    manifest.write_text(_deployment("A"))
    _ok(kubeapi.kubectl("apply", "-f", str(manifest)))
    script = tmp_path / "editor.py"
    script.write_text(EDITOR)
    editor = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"
    result = kubeapi.kubectl("edit", "deployment/web", env={"KUBE_EDITOR": editor, "EDITOR": editor})
    assert "deployment.apps/web edited" in _ok(result)
    assert kubeapi.api.get(kubeapi.api.resource("deployments"), "web", namespace="default")["spec"]["replicas"] == 3


# -- the documents ----------------------------------------------------------------------------------

def test_v3_root_lists_group_versions_with_hashes(kubeapi):
    """/openapi/v3 lists each group-version at /openapi/v3/<path>?hash=H; a CRD's appears once created,
    the others keep their hash."""
    root = kubeapi.request("GET", "/openapi/v3").json()["paths"]
    assert {"api/v1", "apis/apps/v1", "apis/kctl.io/v1alpha1"} <= set(root)
    assert root["apis/apps/v1"]["serverRelativeURL"].startswith("/openapi/v3/apis/apps/v1?hash=")
    kubeapi.api.create(crontab_crd())
    after = kubeapi.request("GET", "/openapi/v3").json()["paths"]
    assert "apis/stable.example.com/v1" in after
    assert after["api/v1"] == root["api/v1"]


def test_v3_document_by_hash_is_immutable_and_outdated_hash_redirects(kubeapi):
    """The current hash's document is `public, immutable`; another hash redirects (301) to the current one;
    If-None-Match with the ETag answers 304; gzip is used when accepted."""
    url = kubeapi.request("GET", "/openapi/v3").json()["paths"]["apis/apps/v1"]["serverRelativeURL"]
    reply = kubeapi.request("GET", url)
    assert reply.status == 200
    assert reply.headers["Cache-Control"] == "public, immutable"
    document = reply.json()
    assert document["openapi"].startswith("3.")
    stale = kubeapi.request("GET", "/openapi/v3/apis/apps/v1?hash=0123")
    assert stale.status == 301
    assert stale.headers["Location"] == url
    assert kubeapi.request("GET", url, headers={"If-None-Match": reply.headers["ETag"]}).status == 304
    packed = kubeapi.request("GET", url, headers={"Accept-Encoding": "gzip"})
    assert packed.headers["Content-Encoding"] == "gzip"
    assert json.loads(gzip.decompress(packed.body)) == document


def test_v3_patch_operation_names_kind_strategic_merge_and_field_validation(kubeapi):
    """The Deployment's PATCH operation carries its group-version-kind, accepts strategic merge patches and
    lists the fieldValidation query parameter (what kubectl checks before leaving validation to the server)."""
    url = kubeapi.request("GET", "/openapi/v3").json()["paths"]["apis/apps/v1"]["serverRelativeURL"]
    document = kubeapi.request("GET", url).json()
    patch = document["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "apps", "kind": "Deployment", "version": "v1"}
    assert "application/strategic-merge-patch+json" in patch["requestBody"]["content"]
    assert {"name": "fieldValidation", "in": "query"}.items() <= next(
        p for p in patch["parameters"] if p["name"] == "fieldValidation").items()
    schemas = document["components"]["schemas"]
    deployment = schemas["io.k8s.api.apps.v1.Deployment"]
    assert deployment["x-kubernetes-group-version-kind"] == [{"group": "apps", "kind": "Deployment", "version": "v1"}]
    pod_spec = schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert (pod_spec["x-kubernetes-patch-merge-key"], pod_spec["x-kubernetes-patch-strategy"]) == ("name", "merge")
    for name, schema in schemas.items():  # every reference resolves inside the document
        assert oas.references(schema) <= set(schemas), name


def test_v2_document_is_json_or_protobuf_and_other_types_not_acceptable(kubeapi):
    """/openapi/v2 is Swagger 2.0 JSON with #/definitions references, gnostic protobuf when asked (with a media type
    Go can parse), and 406 for anything else."""
    reply = kubeapi.request("GET", "/openapi/v2")
    assert reply.status == 200
    document = reply.json()
    assert document["swagger"] == "2.0"
    template = document["definitions"]["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["template"]
    assert template["$ref"] == "#/definitions/io.k8s.api.core.v1.PodTemplateSpec"
    proto = kubeapi.request("GET", "/openapi/v2",
                            headers={"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"})
    assert proto.status == 200
    assert proto.headers["Content-Type"] == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    assert proto.body.startswith(b"\x0a\x032.0")  # field 1 (swagger), length 3, "2.0"
    xml = kubeapi.request("GET", "/openapi/v2", headers={"Accept": "application/xml"})
    assert xml.status == 406
    assert xml.json()["reason"] == "NotAcceptable"


LIST = """\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: listed, namespace: default}
  data: {x: "1"}
EXTRA
"""


@pytest.mark.parametrize("extra, ok, message", [
    ("", True, "configmap/listed created"),
    ("  bogus: 1", False, 'unknown field "bogus" in io.k8s.api.core.v1.ConfigMap'),
    ("- {apiVersion: stable.example.com/v1, kind: CronTab, metadata: {name: listed, namespace: default}, "
     "spec: {cronSpec: '* * * * *', replicas: 1}}", True, "crontab.stable.example.com/listed created"),
], ids=["valid", "unknown-field", "custom-kind"])
def test_kubectl_validates_a_list_against_the_protobuf_v2_document(kubeapi, tmp_path, extra, ok, message):
    """A `kind: List` file is validated client-side from /openapi/v2 (protobuf): valid items are applied, an unknown
    field is refused by kubectl before anything is sent."""
    _namespace(kubeapi)
    kubeapi.api.create(crontab_crd())
    manifest = tmp_path / "list.yaml"
    manifest.write_text(LIST.replace("EXTRA", extra))
    result = kubeapi.kubectl("apply", "-f", str(manifest))
    assert (result.returncode == 0) == ok, result.stderr
    assert message in (result.stdout if ok else result.stderr)


def test_kubectl_explain_from_the_v2_document(kubeapi):
    """`kubectl explain --output plaintext-openapiv2` reads the protobuf v2 document."""
    out = _ok(kubeapi.kubectl("explain", "--output", "plaintext-openapiv2", "deployment.spec.replicas"))
    assert "FIELD:    replicas <integer>" in out.splitlines()
    assert "Number of desired pods." in " ".join(out.split())


# -- conversion, without a server -------------------------------------------------------------------

@pytest.mark.parametrize("node, v3, expected", [
    ({"type": ["integer", "null"], "format": "int32"}, True, {"type": "integer", "format": "int32"}),
    ({"type": ["object", "null"], "additionalProperties": False, "properties": {"a": {"type": ["string", "null"]}}},
     False, {"type": "object", "properties": {"a": {"type": "string"}}}),
    ({"$ref": "#/$defs/X", "description": "d"}, True, {"allOf": [{"$ref": "#/components/schemas/X"}],
                                                       "description": "d"}),
    ({"$ref": "#/$defs/X", "description": "d"}, False, {"$ref": "#/definitions/X", "description": "d"}),
    ({"$ref": "#/$defs/X"}, True, {"$ref": "#/components/schemas/X"}),
    ({"type": "object", "additionalProperties": {"$ref": "#/$defs/Q"}}, True,
     {"type": "object", "additionalProperties": {"$ref": "#/components/schemas/Q"}}),
    ({"type": ["string", "null"], "enum": ["A", None]}, True, {"type": "string", "enum": ["A"]}),
    ({"type": "array", "items": {"type": "string"}, "prefixItems": [{"pattern": "^/"}]}, True,
     {"type": "array", "items": {"type": "string"}}),
], ids=["nullable-type", "closed-object", "ref-v3", "ref-v2", "bare-ref", "map", "enum-null", "prefix-items"])
def test_convert(node, v3, expected):
    """kctl's JSON Schema dialect becomes Kubernetes' OpenAPI (v2 or v3)."""
    assert oas.convert(node, v3=v3) == expected


@pytest.mark.parametrize("group, version, kind, name", [
    ("", "v1", "Pod", "io.k8s.api.core.v1.Pod"),
    ("apps", "v1", "Deployment", "io.k8s.api.apps.v1.Deployment"),
    ("networking.k8s.io", "v1", "Ingress", "io.k8s.api.networking.v1.Ingress"),
    ("rbac.authorization.k8s.io", "v1", "Role", "io.k8s.api.rbac.v1.Role"),
    ("apiextensions.k8s.io", "v1", "CustomResourceDefinition",
     "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"),
    ("stable.example.com", "v1", "CronTab", "com.example.stable.v1.CronTab"),
    ("kctl.io", "v1alpha1", "GitSource", "io.kctl.v1alpha1.GitSource"),
], ids=["core", "apps", "networking", "rbac", "crd", "custom", "kctl"])
def test_definition_names_follow_kubernetes(group, version, kind, name):
    """A kind's definition is named as Kubernetes names it."""
    assert oas.definition_name(group, version, kind) == name


def test_builtin_definition_names_exist_in_the_shared_definitions():
    """Every built-in kind's spec type named after the kind's package exists (the package names are right)."""
    from kctl.machinery.resources import BUILTIN

    defs = oas.builtin_definitions(True)
    for rt in BUILTIN:
        if rt.group in ("kctl.io", "metrics.k8s.io"):
            continue
        spec = oas.kind_definition(rt, v3=True)["properties"].get("spec")
        if spec and "allOf" in spec:
            ref = spec["allOf"][0]["$ref"].rsplit("/", 1)[-1]
            assert ref.startswith(oas.package(rt.group) + "."), (rt.kind, ref)
            assert ref in defs


@pytest.mark.parametrize("schema, wire", [
    ({"type": "string"}, b"\xb2\x01\x08\x0a\x06string"),
    ({"$ref": "#/definitions/X"}, b"\x0a\x0f#/definitions/X"),
    ({"x-a": 1}, b"\xfa\x01\x0a\x0a\x03x-a\x12\x03\x12\x011"),
    ({"required": ["a", "b"]}, b"\x9a\x01\x01a\x9a\x01\x01b"),
    ({"additionalProperties": {"type": "string"}},
     b"\xaa\x01\x0d\x0a\x0b\xb2\x01\x08\x0a\x06string"),
    ({"description": "", "uniqueItems": False}, b""),
], ids=["type", "ref", "extension", "required", "map", "defaults-left-out"])
def test_protobuf_schema_wire_format(schema, wire):
    """Schema fields are written with gnostic's field numbers in protobuf's wire format; proto3 defaults are left
    out."""
    from kctl.kubeapi.discovery import openapiproto

    assert openapiproto._schema(schema) == wire
