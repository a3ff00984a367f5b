"""kctl.sync.kustomize: each supported kustomization field, hashes as kustomize's, errors that point.

Expected generator names were produced by `kubectl kustomize` (kustomize v5.5.0) on the same
input; test_same_as_kubectl_kustomize compares a whole build when kubectl is installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from kctl.manifests.yamlio import load_documents
from kctl.sync.kustomize import build, content_hash
from kctl.sync.render import RenderError, render

DEPLOY = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {tier: fe}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      serviceAccountName: sa
      imagePullSecrets: [{name: pull}]
      containers:
      - name: c
        image: nginx:1.0
        env:
        - {name: A, valueFrom: {configMapKeyRef: {name: cfg, key: a}}}
        - {name: S, valueFrom: {secretKeyRef: {name: sec, key: s}}}
        envFrom: [{configMapRef: {name: cfg}}, {secretRef: {name: sec}}]
      - name: side
        image: busybox
      initContainers: [{name: init, image: "registry.local:5000/tools:1@sha256:aaa"}]
      volumes:
      - {name: v, configMap: {name: cfg}}
      - {name: w, secret: {secretName: sec}}
      - {name: p, projected: {sources: [{configMap: {name: cfg}}, {secret: {name: sec}}]}}
      - {name: d, persistentVolumeClaim: {claimName: data}}
      - {name: e, configMap: {name: external}}
"""
SERVICE = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {selector: {app: web}, ports: [{port: 80}]}\n"
CRONJOB = """\
apiVersion: batch/v1
kind: CronJob
metadata: {name: job}
spec:
  schedule: "* * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: c, image: busybox, envFrom: [{configMapRef: {name: cfg}}]}]
"""


def write(root, files: dict[str, str | bytes]):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return root


def objects(root, path: str = ".") -> dict[str, dict]:
    """`Kind/name` -> object, for what the kustomization at root/path builds."""
    return {f"{i.obj['kind']}/{i.obj['metadata']['name']}": i.obj for i in render(root, path)}


def error_of(root, path: str = ".") -> RenderError:
    with pytest.raises(RenderError) as info:
        render(root, path)
    assert "\n" not in str(info.value)
    return info.value


def pod_spec(deploy: dict) -> dict:
    return deploy["spec"]["template"]["spec"]


def test_resources_files_and_nested_kustomizations(tmp_path):
    """Files and folders with kustomizations (recursively); each object keeps its file and line."""
    write(tmp_path, {
        "base/kustomization.yaml": "resources:\n- svc.yaml\n- nested\n",
        "base/svc.yaml": "# a comment\n" + SERVICE,
        "base/nested/kustomization.yml": "resources: [deploy.yaml]\n",
        "base/nested/deploy.yaml": "---\n" + DEPLOY,
        "overlay/kustomization.yaml": "resources: [../base, extra.yaml]\n",
        "overlay/extra.yaml": "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa}\n",
    })
    items = render(tmp_path, "overlay")
    assert [(i.obj["kind"], i.where()) for i in items] == [
        ("Service", "base/svc.yaml:2"), ("Deployment", "base/nested/deploy.yaml:2"),
        ("ServiceAccount", "overlay/extra.yaml:1")]
    assert [i.obj["kind"] for i in build(tmp_path / "base", tmp_path)] == ["Service", "Deployment"]


def test_namespace_on_namespaced_objects_only(tmp_path):
    """namespace: set (or replaced) on namespaced kinds; cluster-scoped kinds, kctl hooks and kinds
    of Cluster-scoped CRDs in the build untouched; a Namespace object takes the name."""
    write(tmp_path, {
        "kustomization.yaml": "namespace: prod\nresources: [all.yaml]\n",
        "all.yaml": """\
apiVersion: v1
kind: Namespace
metadata: {name: placeholder}
---
apiVersion: v1
kind: Node
metadata: {name: n1}
---
apiVersion: kctl.io/v1alpha1
kind: ValidatingAdmissionHook
metadata: {name: hook}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.x.io}
spec: {group: x.io, scope: Cluster, names: {kind: Widget, plural: widgets}}
---
apiVersion: x.io/v1
kind: Widget
metadata: {name: w}
---
apiVersion: y.io/v1
kind: Gadget
metadata: {name: g}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: dev}
"""})
    built = objects(tmp_path)
    namespaces = {key: obj["metadata"].get("namespace") for key, obj in built.items()}
    assert namespaces == {"Namespace/prod": None, "Node/n1": None, "ValidatingAdmissionHook/hook": None,
                          "CustomResourceDefinition/widgets.x.io": None, "Widget/w": None,
                          "Gadget/g": "prod", "ConfigMap/c": "prod"}


def test_name_prefix_and_suffix(tmp_path):
    """namePrefix/nameSuffix rename every object but Namespaces and CRDs, and references follow."""
    write(tmp_path, {
        "kustomization.yaml": "namePrefix: pre-\nnameSuffix: -suf\nresources: [a.yaml]\n",
        "a.yaml": DEPLOY + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\n---\n"
                  "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns}\n---\n"
                  "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa}\n"})
    built = objects(tmp_path)
    assert sorted(built) == ["ConfigMap/pre-cfg-suf", "Deployment/pre-web-suf", "Namespace/ns",
                             "ServiceAccount/pre-sa-suf"]
    spec = pod_spec(built["Deployment/pre-web-suf"])
    assert spec["serviceAccountName"] == "pre-sa-suf"
    assert spec["volumes"][0]["configMap"]["name"] == "pre-cfg-suf"
    assert spec["volumes"][4]["configMap"]["name"] == "external"  # not in the build: unchanged
    assert spec["imagePullSecrets"] == [{"name": "pull"}]


def test_common_labels_reach_selectors_and_templates(tmp_path):
    """commonLabels: metadata, Service/Deployment selectors and pod templates, CronJob templates."""
    write(tmp_path, {"kustomization.yaml": "commonLabels: {team: a}\nresources: [r.yaml]\n",
                     "r.yaml": "---\n".join([DEPLOY, SERVICE, CRONJOB])})
    built = objects(tmp_path)
    deploy, service, cron = built["Deployment/web"], built["Service/web"], built["CronJob/job"]
    assert deploy["metadata"]["labels"] == {"tier": "fe", "team": "a"}
    assert deploy["spec"]["selector"]["matchLabels"] == {"app": "web", "team": "a"}
    assert deploy["spec"]["template"]["metadata"]["labels"] == {"app": "web", "team": "a"}
    assert service["spec"]["selector"] == {"app": "web", "team": "a"}
    assert cron["spec"]["jobTemplate"]["metadata"]["labels"] == {"team": "a"}
    assert cron["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"] == {"team": "a"}
    assert "selector" not in cron["spec"]["jobTemplate"]["spec"]  # not created for Jobs


@pytest.mark.parametrize("options, selector, template", [
    ("", False, False),
    ("includeTemplates: true", False, True),
    ("includeSelectors: true", True, True),
], ids=["metadata-only", "templates", "selectors"])
def test_labels_new_form(tmp_path, options, selector, template):
    """labels: pairs on metadata; includeTemplates adds pod templates, includeSelectors selectors too."""
    entry = "labels:\n- pairs: {env: prod}\n" + (f"  {options}\n" if options else "")
    write(tmp_path, {"kustomization.yaml": entry + "resources: [r.yaml]\n", "r.yaml": DEPLOY + "---\n" + SERVICE})
    built = objects(tmp_path)
    deploy, service = built["Deployment/web"], built["Service/web"]
    assert deploy["metadata"]["labels"]["env"] == "prod" and service["metadata"]["labels"] == {"env": "prod"}
    assert ("env" in deploy["spec"]["selector"]["matchLabels"]) is selector
    assert ("env" in service["spec"]["selector"]) is selector
    assert ("env" in deploy["spec"]["template"]["metadata"]["labels"]) is template


def test_common_annotations(tmp_path):
    """commonAnnotations: metadata of all, and pod templates of workloads."""
    write(tmp_path, {"kustomization.yaml": "commonAnnotations: {owner: ops}\nresources: [r.yaml]\n",
                     "r.yaml": DEPLOY + "---\n" + SERVICE})
    built = objects(tmp_path)
    assert built["Service/web"]["metadata"]["annotations"] == {"owner": "ops"}
    assert built["Deployment/web"]["spec"]["template"]["metadata"]["annotations"] == {"owner": "ops"}
    assert "annotations" not in built["Service/web"]["spec"]


@pytest.mark.parametrize("rule, image, expected", [
    ("{name: nginx, newTag: '2'}", "nginx:1.0", "nginx:2"),
    ("{name: nginx, newName: my/nginx}", "nginx:1.0", "my/nginx:1.0"),
    ("{name: nginx, digest: 'sha256:bbb'}", "nginx:1.0", "nginx@sha256:bbb"),
    ("{name: nginx, newTag: '3'}", "nginx@sha256:aaa", "nginx:3"),
    ("{name: 'registry.local:5000/tools', newName: tools}", "registry.local:5000/tools:1@sha256:aaa",
     "tools:1@sha256:aaa"),
    ("{name: nginx, newTag: '2'}", "nginx-other:1", "nginx-other:1"),
], ids=["tag", "name", "digest", "tag-drops-digest", "registry-port", "other-image"])
def test_images(tmp_path, rule, image, expected):
    """images: name/tag/digest of containers and initContainers of pods, templates and CronJobs."""
    pod = f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers: [{{name: c, image: '{image}'}}]\n"
    write(tmp_path, {"kustomization.yaml": f"images:\n- {rule}\nresources: [r.yaml]\n",
                     "r.yaml": pod + "---\n" + CRONJOB.replace("image: busybox", f"image: '{image}'")})
    built = objects(tmp_path)
    assert built["Pod/p"]["spec"]["containers"][0]["image"] == expected
    cron_pod = built["CronJob/job"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert cron_pod["containers"][0]["image"] == expected


def test_images_on_init_containers_and_several_rules(tmp_path):
    """Rules apply in turn, to init containers too; images no rule names stay."""
    write(tmp_path, {"kustomization.yaml": "resources: [d.yaml]\nimages:\n- {name: busybox, newTag: '1.36'}\n"
                     "- {name: 'registry.local:5000/tools', newName: tools, newTag: '2'}\n",
                     "d.yaml": DEPLOY})
    spec = pod_spec(objects(tmp_path)["Deployment/web"])
    assert [c["image"] for c in spec["containers"] + spec["initContainers"]] == [
        "nginx:1.0", "busybox:1.36", "tools:2"]


def test_generator_hashes_match_kustomize(tmp_path):
    """configMapGenerator/secretGenerator names carry kustomize's own content hash."""
    write(tmp_path, {
        "kustomization.yaml": """\
namePrefix: p-
nameSuffix: -s
configMapGenerator:
- name: app
  literals: [a=b]
- name: c1
  files: [f.txt, k2=f.txt, bin.dat]
  options: {labels: {x: "y"}}
secretGenerator:
- name: s
  literals: [x=y]
- name: s1
  files: [f.txt]
  type: kubernetes.io/tls
generatorOptions:
  labels: {g: h}
  immutable: true
""",
        "f.txt": "hello <&>\n",
        "bin.dat": b"\xff\xfe"})
    built = objects(tmp_path)
    assert sorted(built) == ["ConfigMap/p-app-s-4h2mbtbbt6", "ConfigMap/p-c1-s-f84tbfh946",
                             "Secret/p-s-s-t86b282gdf", "Secret/p-s1-s-9k8hhf44td"]
    c1 = built["ConfigMap/p-c1-s-f84tbfh946"]
    assert c1["data"] == {"f.txt": "hello <&>\n", "k2": "hello <&>\n"}
    assert c1["binaryData"] == {"bin.dat": "//4="}
    assert c1["metadata"]["labels"] == {"x": "y", "g": "h"} and c1["immutable"] is True
    assert built["Secret/p-s1-s-9k8hhf44td"]["data"] == {"f.txt": "aGVsbG8gPCY+Cg=="}
    assert built["Secret/p-s1-s-9k8hhf44td"]["type"] == "kubernetes.io/tls"


def test_content_hash_follows_data_not_name_or_labels():
    """The hash changes with data (and Secret type), not with the name or labels."""
    base = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}}
    renamed = {**base, "metadata": {"name": "b", "labels": {"x": "y"}}}
    assert content_hash(base) == content_hash(renamed)
    assert content_hash(base) != content_hash({**base, "data": {"k": "w"}})
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "dg=="}}
    assert content_hash(secret) != content_hash({**secret, "type": "Opaque"})
    assert len(content_hash(base)) == 10 and not set(content_hash(base)) & set("013ae")


def test_generated_names_rewritten_in_references(tmp_path):
    """envFrom, env valueFrom, volumes (also projected) and pod templates of Deployments and
    CronJobs refer to the hashed names; references to other names are left alone."""
    write(tmp_path, {
        "kustomization.yaml": "resources: [r.yaml]\nconfigMapGenerator:\n- {name: cfg, literals: [a=1]}\n"
                              "secretGenerator:\n- {name: sec, literals: [s=2]}\n",
        "r.yaml": DEPLOY + "---\n" + CRONJOB})
    built = objects(tmp_path)
    cfg = next(k.split("/")[1] for k in built if k.startswith("ConfigMap/"))
    sec = next(k.split("/")[1] for k in built if k.startswith("Secret/"))
    assert cfg.startswith("cfg-") and sec.startswith("sec-")
    spec = pod_spec(built["Deployment/web"])
    container = spec["containers"][0]
    assert [e["valueFrom"] for e in container["env"]] == [
        {"configMapKeyRef": {"name": cfg, "key": "a"}}, {"secretKeyRef": {"name": sec, "key": "s"}}]
    assert container["envFrom"] == [{"configMapRef": {"name": cfg}}, {"secretRef": {"name": sec}}]
    assert spec["volumes"][:3] == [
        {"name": "v", "configMap": {"name": cfg}}, {"name": "w", "secret": {"secretName": sec}},
        {"name": "p", "projected": {"sources": [{"configMap": {"name": cfg}}, {"secret": {"name": sec}}]}}]
    assert spec["volumes"][4]["configMap"]["name"] == "external"
    cron_spec = built["CronJob/job"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert cron_spec["containers"][0]["envFrom"] == [{"configMapRef": {"name": cfg}}]


@pytest.mark.parametrize("where", ["generatorOptions:\n  disableNameSuffixHash: true\n",
                                   "  options: {disableNameSuffixHash: true}\n"], ids=["global", "local"])
def test_disable_name_suffix_hash(tmp_path, where):
    """disableNameSuffixHash, in generatorOptions or the entry's options, keeps the plain name."""
    text = "configMapGenerator:\n- name: plain\n  literals: [a=b]\n"
    text = text + where if where.startswith(" ") else where + text
    write(tmp_path, {"kustomization.yaml": text})
    assert list(objects(tmp_path)) == ["ConfigMap/plain"]


def test_env_files_and_literal_quotes(tmp_path):
    """envs: KEY=VALUE lines (comments, blank lines, CRLF, BOM); literals lose one pair of quotes."""
    write(tmp_path, {
        "kustomization.yaml": "configMapGenerator:\n- name: c\n  envs: [a.env]\n"
                              "  literals: ['q=\"quoted value\"', \"r='x'\", k=v=w]\n"
                              "  options: {disableNameSuffixHash: true}\n",
        "a.env": "\ufeff# comment\nX=1\r\n\n Y = 2 \nZ=\"kept\"\n"})
    assert objects(tmp_path)["ConfigMap/c"]["data"] == {
        "X": "1", "Y ": " 2 ", "Z": '"kept"', "q": "quoted value", "r": "x", "k": "v=w"}


@pytest.mark.parametrize("generator, message", [
    ("- {name: c, envs: [a.env]}", "'NOVALUE' has no value"),
    ("- {name: c, literals: [novalue]}", "is not KEY=VALUE"),
    ("- {name: c, literals: [a=1, a=2]}", "key 'a' is given twice"),
    ("- {name: c, files: [../outside.txt]}", "leads outside"),
    ("- {name: c, files: [missing.txt]}", "no such file"),
    ("- {literals: [a=1]}", "name: is required"),
    ("- {name: c, behavior: merge, literals: [a=1]}", "no ConfigMap c to merge with"),
    ("- {name: c, behavior: sideways}", "must be create, merge or replace"),
    ("- {name: c, colour: red}", "configMapGenerator[0].colour: unknown field"),
], ids=["env-without-value", "literal", "duplicate-key", "outside", "missing", "no-name", "merge-nothing",
        "behavior", "unknown"])
def test_generator_errors(tmp_path, generator, message):
    """A bad generator entry: RenderError at the generator field's line, saying what is wrong."""
    write(tmp_path, {"k/kustomization.yaml": f"# first\nconfigMapGenerator:\n{generator}\n",
                     "k/a.env": "A=1\nNOVALUE\n", "outside.txt": "x"})
    error = error_of(tmp_path, "k")
    assert (error.file, error.line) == ("k/kustomization.yaml", 2)
    assert message in error.message


@pytest.mark.parametrize("behavior, data", [("merge", {"a": "1", "b": "3", "c": "4"}),
                                            ("replace", {"b": "3", "c": "4"})])
def test_generator_merge_and_replace_a_base(tmp_path, behavior, data):
    """behavior merge/replace changes the base's generated ConfigMap; the hash follows the result."""
    write(tmp_path, {
        "base/kustomization.yaml": "configMapGenerator:\n- {name: cfg, literals: [a=1, b=2]}\nresources: [d.yaml]\n",
        "base/d.yaml": DEPLOY,
        "app/kustomization.yaml": f"resources: [../base]\nconfigMapGenerator:\n"
                                  f"- {{name: cfg, behavior: {behavior}, literals: [b=3, c=4]}}\n"})
    built = objects(tmp_path, "app")
    [key] = [k for k in built if k.startswith("ConfigMap/")]
    assert built[key]["data"] == data
    assert key == f"ConfigMap/cfg-{content_hash(built[key])}"
    assert pod_spec(built["Deployment/web"])["volumes"][0]["configMap"]["name"] == key.split("/")[1]


def test_patches_strategic_merge_file_and_inline(tmp_path):
    """patchesStrategicMerge: merged by the kind's schema (containers by name); `$patch: delete`."""
    write(tmp_path, {
        "kustomization.yaml": """\
resources: [r.yaml]
patchesStrategicMerge:
- patch.yaml
- |-
  apiVersion: v1
  kind: Service
  metadata: {name: web}
  $patch: delete
""",
        "r.yaml": DEPLOY + "---\n" + SERVICE,
        "patch.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n"
                      "    spec:\n      containers:\n      - {name: side, args: [sleep]}\n"})
    built = objects(tmp_path)
    assert list(built) == ["Deployment/web"]
    containers = pod_spec(built["Deployment/web"])["containers"]
    assert [(c["name"], c["image"], c.get("args")) for c in containers] == [
        ("c", "nginx:1.0", None), ("side", "busybox", ["sleep"])]


def test_patches_with_targets_and_json_patch(tmp_path):
    """patches: a JSON patch to a target by name regex; a strategic merge to all that match a label
    selector (the patch's own name does not rename them); a strategic merge by the object it names."""
    write(tmp_path, {
        "kustomization.yaml": """\
resources: [r.yaml]
patches:
- target: {kind: Deployment, name: "w.b"}
  patch: |-
    - {op: replace, path: /spec/replicas, value: 3}
- target: {labelSelector: "tier=fe"}
  path: annotate.yaml
- patch: '{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"type": "NodePort"}}'
""",
        "r.yaml": DEPLOY + "---\n" + SERVICE,
        "annotate.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: ignored, annotations: {hit: 'y'}}\n"})
    built = objects(tmp_path)
    assert built["Deployment/web"]["spec"]["replicas"] == 3
    assert built["Deployment/web"]["metadata"]["annotations"] == {"hit": "y"}
    assert "annotations" not in built["Service/web"]["metadata"]
    assert built["Service/web"]["spec"]["type"] == "NodePort"


def test_patches_json6902_and_replicas(tmp_path):
    """patchesJson6902 by group/version/kind/name; replicas after it (kustomize's order)."""
    write(tmp_path, {
        "kustomization.yaml": """\
resources: [r.yaml]
patchesJson6902:
- target: {group: apps, version: v1, kind: Deployment, name: web}
  path: ops.yaml
replicas:
- {name: web, count: 5}
""",
        "r.yaml": DEPLOY,
        "ops.yaml": "- {op: add, path: /metadata/annotations, value: {patched: 'true'}}\n"
                    "- {op: replace, path: /spec/replicas, value: 2}\n"})
    deploy = objects(tmp_path)["Deployment/web"]
    assert deploy["metadata"]["annotations"] == {"patched": "true"}
    assert deploy["spec"]["replicas"] == 5


@pytest.mark.parametrize("text, line, message", [
    ("resources: [r.yaml]\nreplacements: []\n", 2, "replacements: not supported by kctl's kustomize"),
    ("resources: [r.yaml]\nnamePrefx: a-\n", 2, "namePrefx: unknown field"),
    ("resources: [r.yaml]\ncommonLabels: {version: 1}\n", 2, "commonLabels.version: must be a string (quote it)"),
    ("resources: r.yaml\n", 1, "resources: must be a list"),
    ("kind: Component\n", 1, "components are not supported"),
    ("resources:\n- https://github.com/x/y//base?ref=v1\n", 1, "remote resource"),
    ("resources:\n- github.com/x/y/base\n", 1, "remote resource"),
    ("resources: [../outside.yaml]\n", 1, "leads outside"),
    ("resources: [nope.yaml]\n", 1, "no such file"),
    ("resources: [plain]\n", 1, "folder 'plain' has no kustomization file"),
    ("resources: [r.yaml, r.yaml]\n", 1, "resources[1]: Deployment web is already declared at k/r.yaml:1"),
    ("resources: [loop]\n", 1, "includes itself"),
    ("resources: [r.yaml]\nreplicas: [{name: nothing, count: 2}]\n", 2, "no Deployment"),
    ("resources: [r.yaml]\npatches:\n- {patch: '[]'}\n", 2, "a JSON patch needs a target"),
    ("resources: [r.yaml]\npatches:\n- patch: '{kind: Deployment, metadata: {name: nope}}'\n", 2,
     "no resource matches the patch's Deployment nope"),
    ("resources: [r.yaml]\npatches:\n- target: {kind: Deployment}\n"
     "  patch: '[{op: replace, path: /metadata/name, value: x}]'\n", 2, "the patch renames Deployment web"),
    ("resources: [r.yaml]\npatches:\n- target: {kind: Deployment}\n"
     "  patch: '[{op: remove, path: /spec/nothing}]'\n", 2, "Deployment web: patch is invalid"),
    ("resources: [r.yaml]\nimages: [{newTag: '2'}]\n", 2, "images[0].name: is required"),
    ("resources: [r.yaml]\npatches:\n-\n", 2, "patches[0]: must be a mapping"),
    ("resources: [r.yaml]\npatchesStrategicMerge: [3]\n", 2, "patchesStrategicMerge[0]: must be a string"),
], ids=["unsupported", "unknown", "label-type", "resources-type", "component", "remote-url", "remote-short",
        "outside", "missing", "no-kustomization", "duplicate", "cycle", "replicas", "json-no-target",
        "no-match", "rename", "bad-op", "image-name", "empty-entry", "patch-type"])
def test_errors_name_file_line_and_field(tmp_path, text, line, message):
    """Every refusal is one line: the kustomization file, the field's line, the field and why."""
    write(tmp_path, {"k/kustomization.yaml": text, "k/r.yaml": DEPLOY, "outside.yaml": SERVICE,
                     "k/plain/x.yaml": SERVICE, "k/loop/kustomization.yaml": "resources: [../loop]\n"})
    error = error_of(tmp_path, "k")
    assert error.file in ("k/kustomization.yaml", "k/loop/kustomization.yaml")
    assert error.line == line and message in error.message, str(error)


def test_bad_resource_file_points_at_that_file(tmp_path):
    """A resource file that does not parse is reported at its own file and line."""
    write(tmp_path, {"kustomization.yaml": "resources: [bad.yaml]\n", "bad.yaml": SERVICE + "---\nkind: [\n"})
    error = error_of(tmp_path)
    assert error.file == "bad.yaml" and error.line is not None


def test_two_kustomization_files_are_an_error(tmp_path):
    """kustomization.yaml beside kustomization.yml: refused, as kustomize refuses it."""
    write(tmp_path, {"kustomization.yaml": "resources: []\n", "kustomization.yml": "resources: []\n"})
    assert "more than one kustomization file" in error_of(tmp_path).message


KUBECTL = shutil.which("kubectl")


def _kubectl_kustomize(path) -> list[dict] | None:
    try:
        done = subprocess.run([KUBECTL, "kustomize", str(path)], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return [obj for _, _, obj in load_documents(done.stdout, source="kubectl")]


@pytest.mark.skipif(KUBECTL is None, reason="kubectl (with its built-in kustomize) is not installed")
def test_same_as_kubectl_kustomize(tmp_path):
    """An overlay using most fields builds to exactly what `kubectl kustomize` builds."""
    write(tmp_path, {
        "base/kustomization.yaml": "resources: [r.yaml]\nnamePrefix: b-\ncommonLabels: {app.kubernetes.io/name: web}\n"
                                   "configMapGenerator:\n- {name: cfg, literals: [a=1]}\n"
                                   "secretGenerator:\n- {name: sec, envs: [s.env]}\n",
        "base/s.env": "s=secret\n",
        "base/r.yaml": "---\n".join([DEPLOY, SERVICE, CRONJOB,
                                     "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa}\n",
                                     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: unused}\n"]),
        "overlay/kustomization.yaml": """\
resources: [../base]
nameSuffix: -ov
namespace: prod
labels:
- pairs: {env: prod}
  includeSelectors: true
commonAnnotations: {owner: ops}
patchesStrategicMerge:
- |-
  apiVersion: v1
  kind: ConfigMap
  metadata: {name: unused}
  $patch: delete
patches:
- target: {kind: Deployment, name: "b-.*"}
  patch: |-
    - {op: add, path: /spec/template/spec/containers/1/args, value: [sleep, "1"]}
- target: {labelSelector: "tier=fe"}
  patch: |
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: x, annotations: {selected: "true"}}
replicas: [{name: b-web, count: 5}]
images:
- {name: busybox, newTag: "1.36"}
configMapGenerator:
- {name: cfg, behavior: merge, literals: [b=2]}
"""})
    expected = _kubectl_kustomize(tmp_path / "overlay")
    if expected is None:
        pytest.skip("`kubectl kustomize` does not run here")

    def key(obj):
        return obj["kind"], obj["metadata"]["name"]

    mine = sorted((item.obj for item in render(tmp_path, "overlay")), key=key)
    assert json.dumps(mine, sort_keys=True, indent=1) == json.dumps(sorted(expected, key=key), sort_keys=True,
                                                                     indent=1)
