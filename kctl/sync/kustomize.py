"""Build a kustomization (kustomization.yaml) into objects: the subset of kustomize kctl supports.

Called by kctl.sync.render for a folder holding a kustomization file. Written by hand:
no maintained Python kustomize exists, and no kustomize binary can be installed from the
package registries kctl may use (docs/kustomize.md says what was checked). It follows
kustomize v5 where it can, checked against `kubectl kustomize`:

- `resources` (and the old `bases`): files inside the kustomization's folder, and folders
  holding a kustomization anywhere in the checkout, built recursively; remote URLs refused;
- `configMapGenerator`, `secretGenerator` (literals, files, envs; behavior create, merge,
  replace; options) and `generatorOptions`; the name suffix is kustomize's own content hash
  (sha256 of a JSON summary, 10 characters), added once the top kustomization is built, and
  references from pod templates (volumes, env, envFrom, imagePullSecrets) follow renames;
- transformers in kustomize's order: `patchesStrategicMerge`, `patches`, `namespace`,
  `namePrefix`, `nameSuffix`, `commonLabels`/`labels`, `commonAnnotations`,
  `patchesJson6902`, `replicas`, `images`.

Strategic merge uses kctl.machinery.patch with the kind's schema; JSON patches use the jsonpatch
library through the same module. Any other field, or a value of the wrong type, is a
RenderError naming the kustomization file, the line of the field and the field.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from kctl.sync.render import (RenderError, Rendered, describe, inside, kustomization_file,
                              object_id, object_problem, read_objects, relative)

__all__ = ["build", "content_hash"]

_API_VERSIONS = ("kustomize.config.k8s.io/v1beta1", "kustomize.config.k8s.io/v1")
_SUPPORTED = ("apiVersion", "kind", "metadata", "resources", "bases", "namespace", "namePrefix",
              "nameSuffix", "commonLabels", "labels", "commonAnnotations", "images",
              "configMapGenerator", "secretGenerator", "generatorOptions", "patches",
              "patchesStrategicMerge", "patchesJson6902", "replicas")
_NOT_SUPPORTED = frozenset({
    "components", "crds", "configurations", "generators", "transformers", "validators",
    "helmCharts", "helmGlobals", "helmChartInflationGenerator", "replacements", "vars",
    "openapi", "buildMetadata", "sortOptions", "imageTags", "inventory"})
_REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|git@|git::|github\.com/|gitlab\.com/|bitbucket\.org/)"
                     r"|\?ref=|\?version=", re.I)

# Kinds kustomize treats as cluster-scoped that kctl has no type for (kctl's own come from its
# registry; CRDs with scope Cluster in the same build are added to these).
_OTHER_CLUSTER_KINDS = frozenset({
    ("rbac.authorization.k8s.io", "ClusterRole"), ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("", "PersistentVolume"), ("storage.k8s.io", "StorageClass"), ("storage.k8s.io", "CSIDriver"),
    ("scheduling.k8s.io", "PriorityClass"), ("networking.k8s.io", "IngressClass"),
    ("node.k8s.io", "RuntimeClass"), ("apiregistration.k8s.io", "APIService"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration")})
_NOT_RENAMED = frozenset({("", "Namespace"), ("apiextensions.k8s.io", "CustomResourceDefinition")})

# Where labels and annotations go besides metadata: (group or None for any, kind, path).
_TEMPLATE_METADATA = (
    ("", "ReplicationController", "spec/template/metadata"), (None, "Deployment", "spec/template/metadata"),
    (None, "ReplicaSet", "spec/template/metadata"), (None, "DaemonSet", "spec/template/metadata"),
    ("apps", "StatefulSet", "spec/template/metadata"), ("batch", "Job", "spec/template/metadata"),
    ("batch", "CronJob", "spec/jobTemplate/metadata"),
    ("batch", "CronJob", "spec/jobTemplate/spec/template/metadata"))
# Selectors commonLabels (and labels with includeSelectors) change: (group, kind, path, create).
_AFFINITY = ("spec/template/spec/affinity/podAffinity/preferredDuringSchedulingIgnoredDuringExecution/"
             "podAffinityTerm/labelSelector/matchLabels",
             "spec/template/spec/affinity/podAffinity/requiredDuringSchedulingIgnoredDuringExecution/"
             "labelSelector/matchLabels",
             "spec/template/spec/affinity/podAntiAffinity/preferredDuringSchedulingIgnoredDuringExecution/"
             "podAffinityTerm/labelSelector/matchLabels",
             "spec/template/spec/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution/"
             "labelSelector/matchLabels",
             "spec/template/spec/topologySpreadConstraints/labelSelector/matchLabels")
_SELECTORS = (
    ("", "Service", "spec/selector", True), ("", "ReplicationController", "spec/selector", True),
    (None, "Deployment", "spec/selector/matchLabels", True),
    (None, "ReplicaSet", "spec/selector/matchLabels", True),
    (None, "DaemonSet", "spec/selector/matchLabels", True),
    ("apps", "StatefulSet", "spec/selector/matchLabels", True),
    ("apps", "StatefulSet", "spec/volumeClaimTemplates/metadata/labels", True),
    ("batch", "Job", "spec/selector/matchLabels", False),
    ("batch", "CronJob", "spec/jobTemplate/spec/selector/matchLabels", False),
    ("policy", "PodDisruptionBudget", "spec/selector/matchLabels", False),
    ("networking.k8s.io", "NetworkPolicy", "spec/podSelector/matchLabels", False),
    ("networking.k8s.io", "NetworkPolicy", "spec/ingress/from/podSelector/matchLabels", False),
    ("networking.k8s.io", "NetworkPolicy", "spec/egress/to/podSelector/matchLabels", False),
    *(("apps", kind, path, False) for kind in ("Deployment", "StatefulSet") for path in _AFFINITY))
# Pod specs inside each workload kind, by path.
_POD_SPECS = {"Pod": ("spec",), "PodTemplate": ("template", "spec"),
              "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
              **{kind: ("spec", "template", "spec") for kind in (
                  "Deployment", "ReplicaSet", "DaemonSet", "StatefulSet", "Job", "ReplicationController")}}
_SCALED_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "ReplicationController")


def build(directory: Path, root: Path) -> list[Rendered]:
    """The objects the kustomization in `directory` declares (paths inside checkout `root`)."""
    builder = _Builder(Path(root).resolve())
    resources = builder.kustomization(Path(directory).resolve(), ())
    for resource in resources:
        if resource.hashed:
            metadata = resource.obj["metadata"]
            resource.names.append(metadata["name"])
            metadata["name"] = f"{metadata['name']}-{content_hash(resource.obj)}"
    _fix_references(resources)
    return [Rendered(r.obj, r.file, r.line) for r in resources]


def content_hash(obj: dict) -> str:
    """kustomize's name suffix for a generated ConfigMap or Secret (its hasher package).

    The sha256 of a JSON summary (kind, type, data; the name is left out, as kustomize's
    lookup of it never finds it) in Go's encoding (sorted keys, HTML characters escaped),
    its first 10 hex digits with 0, 1, 3, a, e replaced so that no word can form.
    """
    if obj["kind"] == "Secret":
        summary = {"kind": "Secret", "type": obj.get("type", ""), "name": "", "data": obj.get("data", "")}
        extra = "stringData"
    else:
        summary = {"kind": "ConfigMap", "name": "", "data": obj.get("data", "")}
        extra = "binaryData"
    if summary["data"] is None:
        summary["data"] = ""
    if isinstance(obj.get(extra), dict):
        summary[extra] = obj[extra]
    text = json.dumps(summary, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                          ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return digest[:10].translate(str.maketrans("013ae", "ghkmt"))


@dataclass
class _Resource:
    """An object being built: where it is declared, and the names it had before this one."""

    obj: dict
    file: str
    line: int
    names: list[str] = field(default_factory=list)
    hashed: bool = False  # a generated ConfigMap/Secret whose name gets content_hash at the end

    @property
    def group(self) -> str:
        return _group(self.obj["apiVersion"])

    @property
    def kind(self) -> str:
        return self.obj["kind"]

    @property
    def name(self) -> str:
        return self.obj["metadata"]["name"]

    @property
    def namespace(self) -> str:
        return self.obj["metadata"].get("namespace") or ""

    def known_as(self, name: str) -> bool:
        return name == self.name or name in self.names


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


class _Spec:
    """One kustomization file: its fields, and errors that point at its lines."""

    def __init__(self, root: Path, path: Path) -> None:
        from kctl.sync.render import read_documents

        self.root = root
        self.shown = relative(root, path)
        self.directory = path.parent
        documents = read_documents(root, path)
        if len(documents) > 1:
            raise RenderError(self.shown, documents[1][0], "a kustomization file holds one document")
        self.line = documents[0][0] if documents else 1
        self.fields: dict = documents[0][1] if documents else {}
        try:
            self._lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            self._lines = []

    def line_of(self, name: str) -> int:
        """The line of a top-level field (its first occurrence at column 0), else the document's."""
        top = re.split(r"[.\[]", name, maxsplit=1)[0]
        pattern = re.compile(rf"""^["']?{re.escape(top)}["']?\s*:""")
        for number, text in enumerate(self._lines, 1):
            if pattern.match(text):
                return number
        return self.line

    def error(self, name: str, message: str) -> RenderError:
        return RenderError(self.shown, self.line_of(name), f"{name}: {message}")

    # typed access: every value is checked before it is used
    def get(self, name: str, kind: type, default: Any = None) -> Any:
        return self.check(self.fields.get(name), name, kind, default)

    def check(self, value: Any, name: str, kind: type, default: Any = None) -> Any:
        if value is None:
            return default
        if kind is str and not isinstance(value, str):
            raise self.error(name, f"must be a string{' (quote it)' if _scalar(value) else ''}")
        if kind is bool and not isinstance(value, bool):
            raise self.error(name, "must be true or false")
        if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise self.error(name, "must be an integer")
        if kind is list and not isinstance(value, list):
            raise self.error(name, "must be a list")
        if kind is dict and not isinstance(value, dict):
            raise self.error(name, "must be a mapping")
        return value

    def strings(self, name: str, value: Any) -> list[str]:
        items = self.check(value, name, list, [])
        for i, item in enumerate(items):
            if not isinstance(item, str):
                raise self.error(f"{name}[{i}]", "must be a string")
        return list(items)

    def string_map(self, name: str, value: Any) -> dict[str, str]:
        mapping = self.check(value, name, dict, {})
        for key, item in mapping.items():
            if not isinstance(item, str):
                raise self.error(f"{name}.{key}", f"must be a string{' (quote it)' if _scalar(item) else ''}")
        return dict(mapping)

    def mappings(self, name: str, allowed: tuple[str, ...]) -> Iterator[tuple[str, dict]]:
        """(field path, mapping) for each entry of a list of mappings with only `allowed` keys."""
        for i, entry in enumerate(self.get(name, list, [])):
            path = f"{name}[{i}]"
            if not isinstance(entry, dict):
                raise self.error(path, "must be a mapping")
            self.known_keys(entry, path, allowed)
            yield path, entry

    def known_keys(self, mapping: dict, path: str, allowed: tuple[str, ...]) -> None:
        for key in mapping:
            if key not in allowed:
                raise self.error(f"{path}.{key}", "unknown field (kctl supports: " + ", ".join(allowed) + ")")

    def file(self, name: str, entry: str) -> Path:
        """A file named by the kustomization: inside its folder (kustomize's load restriction)."""
        try:
            path = inside(self.root, self.directory, entry, shown=self.shown, within=self.directory)
        except RenderError as error:
            raise self.error(name, error.message) from None
        if not path.is_file():
            raise self.error(name, f"no such file: {entry}")
        return path


def _scalar(value: Any) -> bool:
    return isinstance(value, (int, float, bool))


class _Builder:
    """Builds kustomizations within one checkout."""

    def __init__(self, root: Path) -> None:
        from kctl.machinery.resources import BUILTIN

        self.root = root
        self.cluster_kinds = set(_OTHER_CLUSTER_KINDS) | {(rt.group, rt.kind) for rt in BUILTIN
                                                           if not rt.namespaced}
        self.types = {(rt.api_version, rt.kind): rt for rt in BUILTIN}

    def kustomization(self, directory: Path, stack: tuple[Path, ...]) -> list[_Resource]:
        """The resources of one kustomization, its generators and transformers applied."""
        path = kustomization_file(directory, self.root)
        if path is None:
            raise RenderError(relative(self.root, directory), None, "no kustomization file "
                              "(kustomization.yaml, kustomization.yml or Kustomization) in this folder")
        spec = _Spec(self.root, path)
        self._check_header(spec)
        resources: list[_Resource] = []
        for name in ("resources", "bases"):
            for i, entry in enumerate(spec.strings(name, spec.fields.get(name))):
                for resource in self._resource(spec, f"{name}[{i}]", entry, (*stack, directory)):
                    _add(resources, resource, spec, f"{name}[{i}]")
        options = self._generator_options(spec, "generatorOptions", spec.fields.get("generatorOptions"))
        for name, kind in (("configMapGenerator", "ConfigMap"), ("secretGenerator", "Secret")):
            for path_, entry in spec.mappings(name, _GENERATOR_FIELDS[kind]):
                self._generate(spec, path_, entry, kind, options, resources)
        resources = self._transform(spec, resources)
        _fix_references(resources)
        return resources

    def _transform(self, spec: _Spec, resources: list[_Resource]) -> list[_Resource]:
        """The kustomization's transformers, in kustomize's order."""
        for i, entry in enumerate(spec.strings("patchesStrategicMerge", spec.fields.get("patchesStrategicMerge"))):
            name = f"patchesStrategicMerge[{i}]"
            inline = "\n" in entry or entry.lstrip().startswith(("{", "apiVersion:", "kind:"))
            for patch in self._patch_documents(spec, name, entry if inline else None, None if inline else entry):
                resources = self._strategic_by_id(spec, name, patch, resources)
        for name, entry in spec.mappings("patches", ("path", "patch", "target", "options")):
            resources = self._patch(spec, name, entry, resources)
        namespace = spec.get("namespace", str)
        if namespace:
            self._set_namespace(resources, namespace)
        prefix, suffix = spec.get("namePrefix", str, ""), spec.get("nameSuffix", str, "")
        if prefix or suffix:
            for resource in resources:
                if (resource.group, resource.kind) not in _NOT_RENAMED:
                    _rename(resource, prefix + resource.name + suffix)
        common = spec.string_map("commonLabels", spec.fields.get("commonLabels"))
        if common:
            _label(resources, common, selectors=True, templates=True)
        for name, entry in spec.mappings("labels", ("pairs", "includeSelectors", "includeTemplates")):
            pairs = spec.string_map(f"{name}.pairs", entry.get("pairs"))
            selectors = spec.check(entry.get("includeSelectors"), f"{name}.includeSelectors", bool, False)
            templates = spec.check(entry.get("includeTemplates"), f"{name}.includeTemplates", bool, False)
            _label(resources, pairs, selectors=selectors, templates=templates or selectors)
        _annotate(resources, spec.string_map("commonAnnotations", spec.fields.get("commonAnnotations")))
        for name, entry in spec.mappings("patchesJson6902", ("target", "path", "patch")):
            resources = self._json6902(spec, name, entry, resources)
        for name, entry in spec.mappings("replicas", ("name", "count")):
            self._replicas(spec, name, entry, resources)
        for name, entry in spec.mappings("images", ("name", "newName", "newTag", "digest")):
            rule = {key: spec.check(entry.get(key), f"{name}.{key}", str) for key in entry}
            if not rule.get("name"):
                raise spec.error(f"{name}.name", "is required")
            for resource in resources:
                _set_images(resource.obj, rule)
        return resources

    # -- the header and resources ----------------------------------------------------------

    def _check_header(self, spec: _Spec) -> None:
        for key in spec.fields:
            if key in _SUPPORTED:
                continue
            if key in _NOT_SUPPORTED:
                raise spec.error(key, "not supported by kctl's kustomize (see docs/kustomize.md)")
            raise spec.error(key, "unknown field (kctl supports: " + ", ".join(_SUPPORTED[3:]) + ")")
        api_version = spec.get("apiVersion", str)
        if api_version is not None and api_version not in _API_VERSIONS:
            raise spec.error("apiVersion", f"{api_version!r} is not a kustomization version "
                                           f"(use {_API_VERSIONS[0]})")
        kind = spec.get("kind", str)
        if kind == "Component":
            raise spec.error("kind", "components are not supported by kctl's kustomize")
        if kind not in (None, "Kustomization"):
            raise spec.error("kind", f"{kind!r}: expected Kustomization")

    def _resource(self, spec: _Spec, name: str, entry: str, stack: tuple[Path, ...]) -> list[_Resource]:
        """The resources one `resources` entry names: a file's objects or a built kustomization."""
        if _REMOTE.search(entry):
            raise spec.error(name, f"remote resource {entry!r} is not supported: "
                                   f"put it in the repository (or use a git source of its own)")
        try:
            path = inside(self.root, spec.directory, entry, shown=spec.shown)
        except RenderError as error:
            raise spec.error(name, error.message) from None
        if path.is_dir():
            if path in stack:
                raise spec.error(name, f"{entry!r} includes itself (a cycle of kustomizations)")
            if kustomization_file(path, self.root) is None:
                raise spec.error(name, f"folder {entry!r} has no kustomization file")
            return self.kustomization(path, stack)
        path = spec.file(name, entry)
        return [_Resource(item.obj, item.file, item.line) for item in read_objects(self.root, path)]

    # -- generators --------------------------------------------------------------------------

    def _generator_options(self, spec: _Spec, name: str, value: Any) -> dict:
        options = spec.check(value, name, dict, {})
        spec.known_keys(options, name, ("labels", "annotations", "disableNameSuffixHash", "immutable"))
        return {"labels": spec.string_map(f"{name}.labels", options.get("labels")),
                "annotations": spec.string_map(f"{name}.annotations", options.get("annotations")),
                "disableNameSuffixHash": spec.check(options.get("disableNameSuffixHash"),
                                                    f"{name}.disableNameSuffixHash", bool, False),
                "immutable": spec.check(options.get("immutable"), f"{name}.immutable", bool, False)}

    def _generate(self, spec: _Spec, name: str, entry: dict, kind: str, global_options: dict,
                  resources: list[_Resource]) -> None:
        """One configMapGenerator/secretGenerator entry: a new object, or merged into one."""
        generated = spec.check(entry.get("name"), f"{name}.name", str)
        if not generated:
            raise spec.error(f"{name}.name", "is required")
        behavior = spec.check(entry.get("behavior"), f"{name}.behavior", str, "create")
        if behavior not in ("create", "merge", "replace"):
            raise spec.error(f"{name}.behavior", f"{behavior!r}: must be create, merge or replace")
        local = self._generator_options(spec, f"{name}.options", entry.get("options"))
        options = {"labels": {**local["labels"], **global_options["labels"]},
                   "annotations": {**local["annotations"], **global_options["annotations"]},
                   "disableNameSuffixHash": local["disableNameSuffixHash"] or global_options["disableNameSuffixHash"],
                   "immutable": local["immutable"] or global_options["immutable"]}
        data = _generator_data(spec, name, entry)
        metadata: dict = {"name": generated}
        namespace = spec.check(entry.get("namespace"), f"{name}.namespace", str)
        if namespace:
            metadata["namespace"] = namespace
        if options["labels"]:
            metadata["labels"] = options["labels"]
        if options["annotations"]:
            metadata["annotations"] = options["annotations"]
        obj: dict = {"apiVersion": "v1", "kind": kind, "metadata": metadata}
        if kind == "Secret":
            obj["type"] = spec.check(entry.get("type"), f"{name}.type", str, "Opaque")
            obj["data"] = {key: base64.b64encode(value).decode() for key, value in sorted(data.items())}
        else:
            text, binary = {}, {}
            for key, value in sorted(data.items()):
                try:
                    text[key] = value.decode("utf-8")
                except UnicodeDecodeError:
                    binary[key] = base64.b64encode(value).decode()
            obj["data"] = text
            if binary:
                obj["binaryData"] = binary
        if options["immutable"]:
            obj["immutable"] = True
        hashed = not options["disableNameSuffixHash"]
        if behavior == "create":
            _add(resources, _Resource(obj, spec.shown, spec.line_of(name), hashed=hashed), spec, name)
            return
        matches = [r for r in resources if r.kind == kind and r.group == "" and r.known_as(generated)
                   and (not namespace or r.namespace == namespace)]
        if len(matches) != 1:
            raise spec.error(f"{name}.behavior", f"{behavior}: " + (
                f"no {kind} {generated} to {behavior} with" if not matches else
                f"{kind} {generated} is ambiguous (in several namespaces: set namespace)"))
        target = matches[0]
        old = target.obj
        if behavior == "merge":
            merged = copy.deepcopy(old)
            for key in ("data", "binaryData"):
                if key in obj:
                    merged[key] = {**(old.get(key) or {}), **obj[key]}
            for key in ("labels", "annotations"):
                if key in metadata:
                    merged["metadata"][key] = {**(old["metadata"].get(key) or {}), **metadata[key]}
            if obj.get("immutable"):
                merged["immutable"] = True
        else:
            merged = copy.deepcopy(obj)
            merged["metadata"]["name"] = old["metadata"]["name"]
            if "namespace" in old["metadata"]:
                merged["metadata"]["namespace"] = old["metadata"]["namespace"]
        target.obj = merged
        target.hashed = hashed

    # -- patches -------------------------------------------------------------------------------

    def _patch_documents(self, spec: _Spec, name: str, inline: str | None, path: str | None) -> list:
        """The documents of a patch given inline or by file; RenderError if it does not parse."""
        from kctl.manifests.errors import ManifestError
        from kctl.manifests.yamlio import decode_text, load_documents

        if inline is not None:
            text, shown = inline, spec.shown
        else:
            file = spec.file(name, spec.check(path, name, str))
            shown = relative(self.root, file)
            try:
                text = decode_text(file.read_bytes(), source=shown)
            except OSError as error:
                raise spec.error(name, (error.strerror or str(error)).lower()) from None
            except ManifestError as error:
                raise RenderError(shown, None, error.message) from None
        try:
            documents = [obj for _, _, obj in load_documents(text, source=shown)]
        except ManifestError as error:
            if inline is not None:
                raise spec.error(name, f"the patch does not parse: {error.message}") from None
            raise RenderError(shown, error.line, error.message) from None
        if not documents:
            raise spec.error(name, "the patch is empty")
        return documents

    def _patch(self, spec: _Spec, name: str, entry: dict, resources: list[_Resource]) -> list[_Resource]:
        """One `patches` entry: strategic merge or JSON 6902, by id or to every target match."""
        if ("path" in entry) == ("patch" in entry):
            raise spec.error(name, "give exactly one of path and patch")
        options = spec.check(entry.get("options"), f"{name}.options", dict, {})
        spec.known_keys(options, f"{name}.options", ("allowNameChange", "allowKindChange"))
        allow_name = spec.check(options.get("allowNameChange"), f"{name}.options.allowNameChange", bool, False)
        allow_kind = spec.check(options.get("allowKindChange"), f"{name}.options.allowKindChange", bool, False)
        inline = spec.check(entry.get("patch"), f"{name}.patch", str)
        documents = self._patch_documents(spec, name, inline, entry.get("path"))
        target = entry.get("target")
        select = self._selector(spec, f"{name}.target", target, exact_name=False) if target is not None else None
        if isinstance(documents[0], list):
            if len(documents) > 1:
                raise spec.error(name, "a JSON patch is one list of operations")
            if select is None:
                raise spec.error(name, "a JSON patch needs a target")
            return [self._json_patch(spec, name, r, documents[0], allow_name, allow_kind) if select(r) else r
                    for r in resources]
        for patch in documents:
            if not isinstance(patch, dict):
                raise spec.error(name, "a patch must be a mapping (strategic merge) or a list (JSON patch)")
            if select is None:
                resources = self._strategic_by_id(spec, name, patch, resources)
                continue
            kept = []
            for resource in resources:
                if select(resource):
                    resource = self._strategic(spec, name, resource, patch, keep_name=not allow_name)
                if resource is not None:
                    kept.append(resource)
            resources = kept
        return resources

    def _strategic_by_id(self, spec: _Spec, name: str, patch: Any, resources: list[_Resource]) -> list[_Resource]:
        """A strategic merge patch applied to the object it names (kind, name, namespace)."""
        if not isinstance(patch, dict):
            raise spec.error(name, "a strategic merge patch must be a mapping")
        metadata = patch.get("metadata") if isinstance(patch.get("metadata"), dict) else {}
        kind, wanted = patch.get("kind"), metadata.get("name")
        if not isinstance(kind, str) or not isinstance(wanted, str):
            raise spec.error(name, "the patch names no object (kind and metadata.name; or give a target)")
        group = _group(patch["apiVersion"]) if isinstance(patch.get("apiVersion"), str) else None
        namespace = metadata.get("namespace")
        matches = [r for r in resources if r.kind == kind and group in (None, r.group) and r.known_as(wanted)
                   and (not namespace or r.namespace == namespace)]
        shown = f"{kind} {namespace}/{wanted}" if namespace else f"{kind} {wanted}"
        if not matches:
            raise spec.error(name, f"no resource matches the patch's {shown}")
        if len(matches) > 1:
            raise spec.error(name, f"the patch's {shown} matches several resources (set its namespace)")
        result = []
        for resource in resources:
            if resource is matches[0]:
                resource = self._strategic(spec, name, resource, patch, keep_name=True)
            if resource is not None:
                result.append(resource)
        return result

    def _strategic(self, spec: _Spec, name: str, resource: _Resource, patch: dict, *,
                   keep_name: bool) -> _Resource | None:
        """`patch` merged into the resource (None when it says `$patch: delete`)."""
        from kctl.machinery.errors import APIError
        from kctl.machinery.patch import strategic_merge_patch
        from kctl.machinery.schemas import load

        if patch.get("$patch") == "delete":
            return None
        patch = copy.deepcopy(patch)
        patch["apiVersion"], patch["kind"] = resource.obj["apiVersion"], resource.kind
        metadata = patch.setdefault("metadata", {})
        if not isinstance(metadata, dict):
            raise spec.error(name, "the patch's metadata must be a mapping")
        if keep_name or not isinstance(metadata.get("name"), str):
            metadata["name"] = resource.name
        if resource.namespace:
            metadata["namespace"] = resource.namespace
        else:
            metadata.pop("namespace", None)
        rt = self.types.get((resource.obj["apiVersion"], resource.kind))
        try:
            merged = strategic_merge_patch(resource.obj, patch, load(rt) if rt is not None else None)
        except APIError as error:
            raise spec.error(name, f"{describe(resource.obj)}: {error.message}") from None
        return self._patched(spec, name, resource, merged, allow_name=not keep_name, allow_kind=False)

    def _json_patch(self, spec: _Spec, name: str, resource: _Resource, ops: list, allow_name: bool,
                    allow_kind: bool) -> _Resource:
        from kctl.machinery.errors import APIError
        from kctl.machinery.patch import json_patch

        try:
            patched = json_patch(resource.obj, copy.deepcopy(ops))  # no value shared between targets
        except APIError as error:
            raise spec.error(name, f"{describe(resource.obj)}: {error.message}") from None
        return self._patched(spec, name, resource, patched, allow_name=allow_name, allow_kind=allow_kind)

    def _patched(self, spec: _Spec, name: str, resource: _Resource, obj: dict, *, allow_name: bool,
                 allow_kind: bool) -> _Resource:
        problem = object_problem(obj)
        if problem:
            raise spec.error(name, f"{describe(resource.obj)} after the patch: {problem}")
        if (obj["apiVersion"], obj["kind"]) != (resource.obj["apiVersion"], resource.kind) and not allow_kind:
            raise spec.error(name, f"the patch changes the kind of {describe(resource.obj)} "
                                   f"(allow it with options.allowKindChange)")
        if obj["metadata"]["name"] != resource.name and not allow_name:
            raise spec.error(name, f"the patch renames {describe(resource.obj)} "
                                   f"(allow it with options.allowNameChange)")
        old_name = resource.name
        resource.obj = obj
        if obj["metadata"]["name"] != old_name:
            resource.names.append(old_name)
        return resource

    def _json6902(self, spec: _Spec, name: str, entry: dict, resources: list[_Resource]) -> list[_Resource]:
        """One `patchesJson6902` entry: a JSON patch of the one object its target names."""
        if "target" not in entry:
            raise spec.error(f"{name}.target", "is required")
        if ("path" in entry) == ("patch" in entry):
            raise spec.error(name, "give exactly one of path and patch")
        select = self._selector(spec, f"{name}.target", entry["target"], exact_name=True)
        documents = self._patch_documents(spec, name, spec.check(entry.get("patch"), f"{name}.patch", str),
                                          entry.get("path"))
        if len(documents) != 1 or not isinstance(documents[0], list):
            raise spec.error(name, "a JSON patch is one list of operations")
        matches = [r for r in resources if select(r)]
        if not matches:
            raise spec.error(f"{name}.target", "no resource matches it")
        return [self._json_patch(spec, name, r, documents[0], False, False) if select(r) else r
                for r in resources]

    def _selector(self, spec: _Spec, name: str, target: Any, *, exact_name: bool) -> Callable[[_Resource], bool]:
        """A predicate from a patch target (group, version, kind, name, namespace, selectors)."""
        from kctl.machinery.errors import APIError
        from kctl.machinery.selectors import parse_label_selector

        spec.check(target, name, dict)
        spec.known_keys(target, name, ("group", "version", "kind", "name", "namespace", "labelSelector",
                                       "annotationSelector"))
        values = {key: spec.check(value, f"{name}.{key}", str) for key, value in target.items()}
        patterns = {}
        for key in ("name", "namespace"):
            if values.get(key) is not None and not exact_name:
                try:
                    patterns[key] = re.compile(values[key])
                except re.error as error:
                    raise spec.error(f"{name}.{key}", f"not a regular expression: {error}") from None
        selectors = {}
        for key, where in (("labelSelector", "labels"), ("annotationSelector", "annotations")):
            if values.get(key):
                try:
                    selectors[where] = parse_label_selector(values[key])
                except APIError as error:
                    raise spec.error(f"{name}.{key}", error.message) from None

        def matches(resource: _Resource) -> bool:
            api_version = resource.obj["apiVersion"]
            version = api_version.rpartition("/")[2]
            if values.get("group") is not None and values["group"] != resource.group:
                return False
            if values.get("version") and values["version"] != version:
                return False
            if values.get("kind") and values["kind"] != resource.kind:
                return False
            for key, current in (("name", [resource.name, *resource.names]), ("namespace", [resource.namespace])):
                wanted = values.get(key)
                if wanted is None:
                    continue
                if key in patterns:
                    if not any(patterns[key].fullmatch(value) for value in current):
                        return False
                elif wanted not in current:
                    return False
            return all(selector.matches(resource.obj["metadata"].get(where) or {})
                       for where, selector in selectors.items())

        return matches

    # -- the other transformers ----------------------------------------------------------------

    def _set_namespace(self, resources: list[_Resource], namespace: str) -> None:
        """kustomize's namespace: on every namespaced object; a Namespace object takes its name."""
        cluster = set(self.cluster_kinds)
        for resource in resources:
            spec = resource.obj.get("spec")
            if (resource.group, resource.kind) == ("apiextensions.k8s.io", "CustomResourceDefinition") \
                    and isinstance(spec, dict) and spec.get("scope") == "Cluster":
                names = spec.get("names") if isinstance(spec.get("names"), dict) else {}
                if isinstance(spec.get("group"), str) and isinstance(names.get("kind"), str):
                    cluster.add((spec["group"], names["kind"]))
        for resource in resources:
            if (resource.group, resource.kind) == ("", "Namespace"):
                _rename(resource, namespace)
            elif (resource.group, resource.kind) not in cluster:
                resource.obj["metadata"]["namespace"] = namespace

    def _replicas(self, spec: _Spec, name: str, entry: dict, resources: list[_Resource]) -> None:
        wanted = spec.check(entry.get("name"), f"{name}.name", str)
        count = spec.check(entry.get("count"), f"{name}.count", int)
        if not wanted or count is None:
            raise spec.error(name, "needs name and count")
        found = False
        for resource in resources:
            if resource.kind in _SCALED_KINDS and resource.known_as(wanted):
                spec_ = resource.obj.setdefault("spec", {})
                if not isinstance(spec_, dict):
                    raise spec.error(name, f"{describe(resource.obj)}: spec is not a mapping")
                spec_["replicas"] = count
                found = True
        if not found:
            raise spec.error(f"{name}.name", f"no {', '.join(_SCALED_KINDS[:-1])} or "
                                             f"{_SCALED_KINDS[-1]} named {wanted}")


_GENERATOR_FIELDS = {
    "ConfigMap": ("name", "namespace", "behavior", "literals", "files", "envs", "env", "options"),
    "Secret": ("name", "namespace", "behavior", "literals", "files", "envs", "env", "options", "type")}


def _generator_data(spec: _Spec, name: str, entry: dict) -> dict[str, bytes]:
    """The keys and values a generator entry declares (literals, files, env files)."""
    data: dict[str, bytes] = {}

    def put(key: str, value: bytes, where: str) -> None:
        if not key:
            raise spec.error(where, "an empty key")
        if key in data:
            raise spec.error(where, f"key {key!r} is given twice")
        data[key] = value

    for i, literal in enumerate(spec.strings(f"{name}.literals", entry.get("literals"))):
        key, equals, value = literal.partition("=")
        if not equals:
            raise spec.error(f"{name}.literals[{i}]", f"{literal!r} is not KEY=VALUE")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        put(key, value.encode(), f"{name}.literals[{i}]")
    for i, source in enumerate(spec.strings(f"{name}.files", entry.get("files"))):
        where = f"{name}.files[{i}]"
        key, equals, path = source.partition("=")
        if not equals:
            key, path = Path(source).name, source
        put(key, _read_bytes(spec, where, spec.file(where, path)), where)
    env_files = spec.strings(f"{name}.envs", entry.get("envs"))
    single = spec.check(entry.get("env"), f"{name}.env", str)
    for i, source in enumerate(env_files + ([single] if single else [])):
        where = f"{name}.envs[{i}]" if i < len(env_files) else f"{name}.env"
        text = _read_bytes(spec, where, spec.file(where, source)).decode("utf-8", "replace")
        for number, line in enumerate(text.removeprefix("\ufeff").split("\n"), 1):
            line = line.removesuffix("\r").lstrip()
            if not line or line.startswith("#"):
                continue
            key, equals, value = line.partition("=")
            if not equals:
                raise spec.error(where, f"{source} line {number}: {key!r} has no value (KEY=VALUE; kctl "
                                        f"does not take values from its own environment)")
            put(key, value.encode(), where)
    return data


def _read_bytes(spec: _Spec, name: str, path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise spec.error(name, (error.strerror or str(error)).lower()) from None


def _add(resources: list[_Resource], new: _Resource, spec: _Spec, name: str) -> None:
    """Append `new`, refusing a second declaration of one object."""
    key = object_id(new.obj)
    for resource in resources:
        if object_id(resource.obj) == key:
            raise spec.error(name, f"{describe(new.obj)} is already declared at "
                                   f"{resource.file}:{resource.line}")
    resources.append(new)


def _rename(resource: _Resource, name: str) -> None:
    if name != resource.name:
        resource.names.append(resource.name)
        resource.obj["metadata"]["name"] = name


def _label(resources: list[_Resource], labels: dict[str, str], *, selectors: bool, templates: bool) -> None:
    if not labels:
        return
    for resource in resources:
        _merge_at(resource.obj, ("metadata", "labels"), labels, create=True)
        if templates:
            for group, kind, where in _TEMPLATE_METADATA:
                if resource.kind == kind and group in (None, resource.group):
                    _merge_at(resource.obj, (*where.split("/"), "labels"), labels, create=True)
        if selectors:
            for group, kind, where, create in _SELECTORS:
                if resource.kind == kind and group in (None, resource.group):
                    _merge_at(resource.obj, tuple(where.split("/")), labels, create=create)


def _annotate(resources: list[_Resource], annotations: dict[str, str]) -> None:
    if not annotations:
        return
    for resource in resources:
        _merge_at(resource.obj, ("metadata", "annotations"), annotations, create=True)
        for group, kind, where in _TEMPLATE_METADATA:
            if resource.kind == kind and group in (None, resource.group):
                _merge_at(resource.obj, (*where.split("/"), "annotations"), annotations, create=True)


def _merge_at(node: Any, path: tuple[str, ...], values: dict[str, str], *, create: bool) -> None:
    """Set `values` in the mapping at `path`; lists on the way are entered item by item, missing
    mappings made only when `create` (and never inside a list)."""
    if isinstance(node, list):
        for item in node:
            _merge_at(item, path, values, create=False)
        return
    if not isinstance(node, dict):
        return
    key, rest = path[0], path[1:]
    child = node.get(key)
    if child is None:
        if not create:
            return
        child = node[key] = {}
    if rest:
        _merge_at(child, rest, values, create=create)
    elif isinstance(child, dict):
        child.update(values)


def _set_images(node: Any, rule: dict[str, str]) -> None:
    """Apply one `images` rule to every container and init container in `node`."""
    if isinstance(node, list):
        for item in node:
            _set_images(item, rule)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in ("containers", "initContainers") and isinstance(value, list):
            for container in value:
                if isinstance(container, dict) and isinstance(container.get("image"), str):
                    container["image"] = _image(container["image"], rule)
        _set_images(value, rule)


def _image(image: str, rule: dict[str, str]) -> str:
    """name[:tag][@digest] after one `images` rule (kustomize: a digest drops the tag, a new
    tag drops the digest)."""
    name, _, digest = image.partition("@")
    tag = ""
    colon, slash = name.rfind(":"), name.rfind("/")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
    if name != rule["name"]:
        return image
    name = rule.get("newName") or name
    if rule.get("digest"):
        return f"{name}@{rule['digest']}"
    if rule.get("newTag"):
        return f"{name}:{rule['newTag']}"
    return name + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")


# -- references that follow renames ------------------------------------------------------------

def _references(obj: dict) -> Iterator[tuple[str, dict, str]]:
    """(referenced kind, mapping, key) for each name `obj` refers to another object by."""
    node: Any = obj
    for key in _POD_SPECS.get(obj.get("kind"), ()):
        node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict):
        yield from _pod_spec_references(node)
    if obj.get("kind") == "StatefulSet" and isinstance(obj.get("spec"), dict):
        yield "Service", obj["spec"], "serviceName"
    if obj.get("kind") == "ServiceAccount":
        for item in _dicts(obj.get("imagePullSecrets")):
            yield "Secret", item, "name"


def _pod_spec_references(spec: dict) -> Iterator[tuple[str, dict, str]]:
    yield "ServiceAccount", spec, "serviceAccountName"
    for item in _dicts(spec.get("imagePullSecrets")):
        yield "Secret", item, "name"
    for volume in _dicts(spec.get("volumes")):
        for kind, key, name in (("ConfigMap", "configMap", "name"), ("Secret", "secret", "secretName"),
                                ("PersistentVolumeClaim", "persistentVolumeClaim", "claimName")):
            if isinstance(volume.get(key), dict):
                yield kind, volume[key], name
        projected = volume.get("projected")
        if isinstance(projected, dict):
            for source in _dicts(projected.get("sources")):
                for kind, key in (("ConfigMap", "configMap"), ("Secret", "secret")):
                    if isinstance(source.get(key), dict):
                        yield kind, source[key], "name"
    for group in ("containers", "initContainers"):
        for container in _dicts(spec.get(group)):
            for env in _dicts(container.get("env")):
                value_from = env.get("valueFrom")
                if isinstance(value_from, dict):
                    for kind, key in (("ConfigMap", "configMapKeyRef"), ("Secret", "secretKeyRef")):
                        if isinstance(value_from.get(key), dict):
                            yield kind, value_from[key], "name"
            for source in _dicts(container.get("envFrom")):
                for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
                    if isinstance(source.get(key), dict):
                        yield kind, source[key], "name"


def _dicts(value: Any) -> list[dict]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _fix_references(resources: list[_Resource]) -> None:
    """Point references at an earlier name of a renamed object (core kinds) to its name now."""
    renamed: dict[tuple[str, str], list[_Resource]] = {}
    current = set()
    for resource in resources:
        if resource.group == "":
            current.add((resource.kind, resource.namespace, resource.name))
            for old in resource.names:
                renamed.setdefault((resource.kind, old), []).append(resource)
    if not renamed:
        return
    for referrer in resources:
        namespace = referrer.namespace
        for kind, holder, key in _references(referrer.obj):
            value = holder.get(key)
            if not isinstance(value, str) or (kind, namespace, value) in current:
                continue
            candidates = renamed.get((kind, value), [])
            same = [c for c in candidates if c.namespace == namespace] or (
                candidates if len(candidates) == 1 else [])
            if len(same) > 1:
                raise RenderError(referrer.file, referrer.line,
                                  f"{describe(referrer.obj)} refers to {kind} {value}, which several "
                                  f"renamed objects were called")
            if same:
                holder[key] = same[0].name
