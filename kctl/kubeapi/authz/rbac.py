"""RBAC as Kubernetes' RBACAuthorizer evaluates it: which rules apply to a user, and does one allow a request.

The Authorizer (kctl.kubeapi.authz) asks `RBAC.authorize(attrs)` for every request the HTTPS API serves;
SelfSubjectRulesReview (kctl.kubeapi.authz.reviews) and `kctl auth can-i --list` ask `RBAC.rules_for(user, ns)`.
The evaluation follows kube-apiserver (plugin/pkg/auth/authorizer/rbac and pkg/registry/rbac/validation):

- every ClusterRoleBinding whose subjects name the user, then (for a namespaced request) every RoleBinding
  of the request's namespace; a binding applies when one subject is the User by name, a Group the user is
  in, or the ServiceAccount whose username (`system:serviceaccount:NS:NAME`) the user has (a RoleBinding's
  ServiceAccount subject without a namespace means the binding's namespace);
- the binding's roleRef names a Role (of the binding's namespace) or a ClusterRole; a role that does not
  exist gives no rules and an evaluation error (reported in a denial's reason, as "RBAC: ..." );
- a rule allows a resource request when its verbs, apiGroups, resources (`*`, `pods`, `pods/log`,
  `*/scale`) and resourceNames (empty: any name; else the request must name one of them, so a list or a
  create without a name is not allowed by a rule with resourceNames) match; a non-resource request when its
  verbs and nonResourceURLs (exact, `*`, or a prefix ending in `*`) match.

The roles and bindings come from a `PolicySource`: `ListedPolicy` reads them through the API once (the CLI's
one-shot `kctl auth can-i`), `CachedPolicy` keeps them in four informers (kctl.client.informer) so a request
costs no store read and a change is seen as soon as its watch event arrives.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Protocol, Sequence

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.client.informer import Informer
    from kctl.kubeapi.authz import Attributes

RBAC_GROUP = "rbac.authorization.k8s.io"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
#: the four kinds RBAC reads, as the API names them
RESOURCES = ("clusterroles.rbac.authorization.k8s.io", "clusterrolebindings.rbac.authorization.k8s.io",
             "roles.rbac.authorization.k8s.io", "rolebindings.rbac.authorization.k8s.io")
#: how long the first request waits for the informers' first lists (seconds)
SYNC_TIMEOUT = 30.0


class User(Protocol):
    """Who is asking: what RBAC reads of kctl.kubeapi.authn.UserInfo."""

    @property
    def name(self) -> str: ...

    @property
    def groups(self) -> Sequence[str]: ...


# -- matching one rule ------------------------------------------------------------------------------

def _strings(rule: dict, key: str) -> list[str]:
    value = rule.get(key)
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def verb_matches(rule: dict, verb: str) -> bool:
    """The rule names the verb or `*`."""
    return any(v == "*" or v == verb for v in _strings(rule, "verbs"))


def api_group_matches(rule: dict, group: str) -> bool:
    """The rule names the API group or `*`."""
    return any(g == "*" or g == group for g in _strings(rule, "apiGroups"))


def resource_matches(rule: dict, combined: str, subresource: str) -> bool:
    """The rule names `*`, the resource (`pods`, `pods/log`), or `*/SUBRESOURCE` for a subresource request."""
    for resource in _strings(rule, "resources"):
        if resource == "*" or resource == combined:
            return True
        if subresource and resource == f"*/{subresource}":
            return True
    return False


def resource_name_matches(rule: dict, name: str) -> bool:
    """No resourceNames means any name; else the request names one of them."""
    names = _strings(rule, "resourceNames")
    return not names or name in names


def non_resource_url_matches(rule: dict, path: str) -> bool:
    """The rule names the path, `*`, or a prefix of it followed by `*`."""
    for url in _strings(rule, "nonResourceURLs"):
        if url == "*" or url == path:
            return True
        if url.endswith("*") and path.startswith(url.rstrip("*")):
            return True
    return False


def rule_allows(attrs: Attributes, rule: dict) -> bool:
    """Kubernetes' RuleAllows: does this PolicyRule allow the request."""
    if attrs.resource_request:
        combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
        return (verb_matches(rule, attrs.verb) and api_group_matches(rule, attrs.api_group)
                and resource_matches(rule, combined, attrs.subresource)
                and resource_name_matches(rule, attrs.name))
    return verb_matches(rule, attrs.verb) and non_resource_url_matches(rule, attrs.path)


# -- who a binding names ----------------------------------------------------------------------------

def service_account_username(namespace: str, name: str) -> str:
    """The username of a ServiceAccount's tokens."""
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def applies_to_user(user: User, subject: dict, namespace: str) -> bool:
    """Does one binding subject name this user (Kubernetes' appliesToUser)."""
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return user.name == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        sa_namespace = subject.get("namespace") or namespace
        return bool(sa_namespace) and isinstance(name, str) and user.name == service_account_username(
            sa_namespace, name)
    return False


def applies_to(user: User, subjects: object, namespace: str) -> dict | None:
    """The first subject of a binding that names the user, or None."""
    for subject in subjects if isinstance(subjects, list) else ():
        if isinstance(subject, dict) and applies_to_user(user, subject, namespace):
            return subject
    return None


def describe_subject(subject: dict, binding_namespace: str) -> str:
    """A subject as Kubernetes' reasons name it: `User "alice"`, `ServiceAccount "ci/build"`."""
    kind, name = subject.get("kind", ""), subject.get("name", "")
    if kind == "ServiceAccount":
        return f'{kind} "{name}/{subject.get("namespace") or binding_namespace}"'
    return f'{kind} "{name}"'


def describe_binding(binding: dict, subject: dict) -> str:
    """Which binding allowed a request, as kube-apiserver's "RBAC: allowed by ..." reason says."""
    meta, ref = binding.get("metadata") or {}, binding.get("roleRef") or {}
    namespace = meta.get("namespace") or ""
    if binding.get("kind") == "RoleBinding" or namespace:
        return (f'RoleBinding "{meta.get("name", "")}/{namespace}" of {ref.get("kind", "")} '
                f'"{ref.get("name", "")}" to {describe_subject(subject, namespace)}')
    return (f'ClusterRoleBinding "{meta.get("name", "")}" of {ref.get("kind", "")} "{ref.get("name", "")}" '
            f'to {describe_subject(subject, "")}')


# -- where roles and bindings come from -------------------------------------------------------------

class PolicySource(Protocol):
    """The Roles, ClusterRoles and their bindings RBAC evaluates (never modify what it hands out)."""

    def cluster_role_bindings(self) -> Iterable[dict]: ...

    def role_bindings(self, namespace: str) -> Iterable[dict]: ...

    def cluster_role(self, name: str) -> dict | None: ...

    def role(self, namespace: str, name: str) -> dict | None: ...


class ListedPolicy:
    """Roles and bindings read through the API when first asked, then kept (one evaluation, the CLI)."""

    def __init__(self, api: API) -> None:
        self.api = api
        self._lists: dict[str, list[dict]] = {}

    def _items(self, resource: str, namespace: str | None = None) -> list[dict]:
        key = f"{resource}/{namespace or ''}"
        if key not in self._lists:
            self._lists[key], _ = self.api.list(self.api.resource(resource), namespace=namespace)
        return self._lists[key]

    def cluster_role_bindings(self) -> Iterable[dict]:
        return self._items("clusterrolebindings.rbac.authorization.k8s.io")

    def role_bindings(self, namespace: str) -> Iterable[dict]:
        return self._items("rolebindings.rbac.authorization.k8s.io", namespace)

    def cluster_role(self, name: str) -> dict | None:
        return _named(self._items("clusterroles.rbac.authorization.k8s.io"), name)

    def role(self, namespace: str, name: str) -> dict | None:
        return _named(self._items("roles.rbac.authorization.k8s.io", namespace), name)


def _named(items: list[dict], name: str) -> dict | None:
    return next((o for o in items if (o.get("metadata") or {}).get("name") == name), None)


class CachedPolicy:
    """Roles and bindings kept by four informers (list + watch), started on first use; `stop()` ends them."""

    def __init__(self, api: API, *, sync_timeout: float = SYNC_TIMEOUT) -> None:
        self.api = api
        self.sync_timeout = sync_timeout
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._informers: dict[str, Informer] | None = None

    def _informer(self, resource: str) -> Informer:
        informers = self._informers
        if informers is None:
            informers = self._start()
        return informers[resource]

    def _start(self) -> dict[str, Informer]:
        from kctl.client.informer import Informer

        with self._lock:
            if self._informers is None:
                informers = {r: Informer(self.api, r) for r in RESOURCES}
                for informer in informers.values():
                    informer.start(self._stop)
                for informer in informers.values():
                    informer.wait_for_sync(self.sync_timeout)
                self._informers = informers
            return self._informers

    def start(self) -> None:
        """List and start watching now (else the first request does)."""
        self._start()

    def stop(self) -> None:
        """End the informers' watches."""
        self._stop.set()

    @property
    def synced(self) -> bool:
        return self._informers is not None and all(i.has_synced() for i in self._informers.values())

    def cluster_role_bindings(self) -> Iterable[dict]:
        return self._informer("clusterrolebindings.rbac.authorization.k8s.io").list()

    def role_bindings(self, namespace: str) -> Iterable[dict]:
        return self._informer("rolebindings.rbac.authorization.k8s.io").list(namespace)

    def cluster_role(self, name: str) -> dict | None:
        return self._informer("clusterroles.rbac.authorization.k8s.io").get("", name)

    def role(self, namespace: str, name: str) -> dict | None:
        return self._informer("roles.rbac.authorization.k8s.io").get(namespace, name)


# -- the evaluation ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rules:
    """What RulesFor found: every rule that applies to a user in a namespace, and what could not be read."""

    rules: tuple[dict, ...]
    errors: tuple[str, ...] = ()


class RBAC:
    """Kubernetes' RBACAuthorizer over a PolicySource."""

    def __init__(self, policy: PolicySource) -> None:
        self.policy = policy

    def _role_rules(self, ref: object, namespace: str) -> tuple[list[dict], str | None]:
        """The rules of a binding's roleRef, or an error (a missing role, an unknown kind)."""
        ref = ref if isinstance(ref, dict) else {}
        kind, name = ref.get("kind"), str(ref.get("name") or "")
        if kind == "ClusterRole":
            role = self.policy.cluster_role(name)
            if role is None:
                return [], f'clusterrole.{RBAC_GROUP} "{name}" not found'
        elif kind == "Role":
            role = self.policy.role(namespace, name)
            if role is None:
                return [], f'role.{RBAC_GROUP} "{name}" not found'
        else:
            return [], f'unsupported role reference kind: "{kind or ""}"'
        rules = role.get("rules")
        return [r for r in rules if isinstance(r, dict)] if isinstance(rules, list) else [], None

    def visit(self, user: User, namespace: str) -> Iterable[tuple[str, dict | None, str | None]]:
        """(source, rule, error) for every rule that applies to the user in the namespace, in Kubernetes'
        order: ClusterRoleBindings, then the namespace's RoleBindings; source describes the binding."""
        for binding in self.policy.cluster_role_bindings():
            subject = applies_to(user, binding.get("subjects"), "")
            if subject is None:
                continue
            rules, error = self._role_rules(binding.get("roleRef"), "")
            if error:
                yield "", None, error
            for rule in rules:
                yield describe_binding(binding, subject), rule, None
        if not namespace:
            return
        for binding in self.policy.role_bindings(namespace):
            subject = applies_to(user, binding.get("subjects"), namespace)
            if subject is None:
                continue
            rules, error = self._role_rules(binding.get("roleRef"), namespace)
            if error:
                yield "", None, error
            for rule in rules:
                yield describe_binding(binding, subject), rule, None

    def authorize(self, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, reason): "RBAC: allowed by ..." when a rule allows; else the errors met, if any."""
        errors: list[str] = []
        for source, rule, error in self.visit(attrs.user, attrs.namespace):
            if error:
                errors.append(error)
            elif rule is not None and rule_allows(attrs, rule):
                return True, f"RBAC: allowed by {source}"
        return False, f"RBAC: {aggregate(errors)}" if errors else ""

    def rules_for(self, user: User, namespace: str) -> Rules:
        """Every rule that applies to the user in the namespace (SelfSubjectRulesReview)."""
        rules: list[dict] = []
        errors: list[str] = []
        for _, rule, error in self.visit(user, namespace):
            if error:
                errors.append(error)
            elif rule is not None:
                rules.append(rule)
        return Rules(tuple(rules), tuple(errors))


def aggregate(errors: Sequence[str]) -> str:
    """Several errors as Kubernetes' utilerrors.NewAggregate prints them (one: itself; more: [a, b])."""
    return errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"


__all__ = ["CachedPolicy", "ListedPolicy", "PolicySource", "RBAC", "Rules", "User", "applies_to",
           "applies_to_user", "describe_binding", "rule_allows", "service_account_username"]
