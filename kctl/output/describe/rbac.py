"""kubectl describe's layouts for RBAC: Role and ClusterRole (their rules as a PolicyRule table), RoleBinding and
ClusterRoleBinding (the role referred to and the subjects); and the rule table helpers kubectl shares with
`kubectl auth can-i --list` (kctl.cli.auth uses them too).

A rule table is kubectl's: every rule broken down to one group and resource (and resource name) or one URL
(`breakdown_rule`), rules of the same group/resource/name merged (`compact_rules`), sorted as Go sorts
PolicyRule.String(), printed as `Resources  Non-Resource URLs  Resource Names  Verbs` with Go's `[a b]` lists.
Entries of the kind -> describer table in kctl.output.describe.
"""

from __future__ import annotations

from kctl.output.describe.context import Context
from kctl.output.describe.sections import write_annotations, write_labels
from kctl.output.describe.writer import PrefixWriter

__all__ = ["breakdown_rule", "compact_rules", "describe_binding", "describe_role", "go_list", "resource_group",
           "rule_rows"]


def breakdown_rule(rule: dict) -> list[dict]:
    """kubectl's BreakdownRule: one rule per group and resource (and resource name), one per URL; sorted verbs."""
    verbs = sorted(v for v in rule.get("verbs") or [] if isinstance(v, str))
    out: list[dict] = []
    for group in rule.get("apiGroups") or []:
        for resource in rule.get("resources") or []:
            for name in rule.get("resourceNames") or [None]:
                one = {"verbs": list(verbs), "apiGroups": [group], "resources": [resource]}
                if name is not None:
                    one["resourceNames"] = [name]
                out.append(one)
    out.extend({"verbs": list(verbs), "nonResourceURLs": [url]} for url in rule.get("nonResourceURLs") or [])
    return out


def compact_rules(rules: list[dict]) -> list[dict]:
    """kubectl's CompactRules: rules for the same group, resource and name have their verbs merged."""
    simple: dict[tuple, dict] = {}
    out: list[dict] = []
    for rule in rules:
        if rule.get("nonResourceURLs") or len(rule.get("resourceNames") or []) > 1 \
                or len(rule.get("apiGroups") or []) != 1 or len(rule.get("resources") or []) != 1:
            out.append(rule)
            continue
        key = (rule["apiGroups"][0], rule["resources"][0], tuple(rule.get("resourceNames") or ()))
        if key in simple:
            verbs = simple[key]["verbs"]
            verbs.extend(v for v in rule["verbs"] if v not in verbs)
        else:
            simple[key] = {**rule, "verbs": list(rule["verbs"])}
    return out + list(simple.values())


def go_list(values: list[str]) -> str:
    """Go's %v of a []string: [a b]."""
    return "[" + " ".join(str(v) for v in values) + "]"


def _rule_string(rule: dict) -> str:
    """The key kubectl sorts rules by: Go's PolicyRule.String()."""
    fields = ("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs")
    names = ("Verbs", "APIGroups", "Resources", "ResourceNames", "NonResourceURLs")
    return "&PolicyRule{" + "".join(f"{n}:{go_list(rule.get(f) or [])}," for f, n in zip(fields, names)) + "}"


def resource_group(resources: list[str], groups: list[str]) -> str:
    """kubectl's CombineResourceGroup: `pods`, `deployments.apps`, `deployments.apps/scale`."""
    if not resources:
        return ""
    resource, slash, sub = resources[0].partition("/")
    out = f"{resource}.{groups[0]}" if groups and groups[0] else resource
    return f"{out}/{sub}" if slash else out


def rule_rows(rules: list[dict]) -> list[list[str]]:
    """The rows of kubectl's rule table (no header): broken down, merged, sorted."""
    compact = compact_rules([r for rule in rules if isinstance(rule, dict) for r in breakdown_rule(rule)])
    compact.sort(key=_rule_string)
    return [[resource_group(r.get("resources") or [], r.get("apiGroups") or []),
             go_list(r.get("nonResourceURLs") or []), go_list(r.get("resourceNames") or []),
             go_list(r.get("verbs") or [])] for r in compact]


def describe_role(w: PrefixWriter, role: dict, ctx: Context) -> None:
    """kubectl's RoleDescriber and ClusterRoleDescriber: name, labels, annotations, the PolicyRule table."""
    meta = role.get("metadata") or {}
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    write_labels(w, "Labels", meta.get("labels"))
    write_annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, "PolicyRule:\n")
    w.write(1, "Resources\tNon-Resource URLs\tResource Names\tVerbs\n")
    w.write(1, "---------\t-----------------\t--------------\t-----\n")
    for row in rule_rows(role.get("rules") or []):
        w.write(1, "\t".join(row) + "\n")


def describe_binding(w: PrefixWriter, binding: dict, ctx: Context) -> None:
    """kubectl's RoleBindingDescriber and ClusterRoleBindingDescriber: the role, then the subjects."""
    meta = binding.get("metadata") or {}
    ref = binding.get("roleRef") or {}
    w.write(0, f"Name:\t{meta.get('name', '')}\n")
    write_labels(w, "Labels", meta.get("labels"))
    write_annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, "Role:\n")
    w.write(1, f"Kind:\t{ref.get('kind', '')}\n")
    w.write(1, f"Name:\t{ref.get('name', '')}\n")
    w.write(0, "Subjects:\n")
    w.write(1, "Kind\tName\tNamespace\n")
    w.write(1, "----\t----\t---------\n")
    for subject in binding.get("subjects") or []:
        if isinstance(subject, dict):
            w.write(1, f"{subject.get('kind', '')}\t{subject.get('name', '')}\t{subject.get('namespace', '')}\n")
