"""`kctl auth can-i` and `kctl auth whoami`: what RBAC lets a user do, and who kctl acts as.

As kubectl's `auth` commands, answered here with the HTTPS API's own authorizer (kctl.kubeapi.authz)
over the roles and bindings the API holds: `can-i VERB RESOURCE[/NAME]` prints `yes` (exit 0) or `no`
(exit 1), `can-i --list` prints the rules that apply (kubectl's table), `whoami` prints the user.
kctl's local access (the SQLite store, or SSH to the control host) is not authorized: root on the host is
admin, so without `--as` the answer is `yes` and the user is in `system:masters`. `--as USER` and
`--as-group G` evaluate RBAC for that user, with the groups kube-apiserver's impersonation gives it.
Against an HTTPS API (`--kubeconfig`, `--server https://`) the server answers for the kubeconfig's user, as
kubectl's do: SelfSubjectAccessReview, SelfSubjectRulesReview, SelfSubjectReview; with `--as`, a
SubjectAccessReview (the caller needs `create subjectaccessreviews`), and `--list --as` evaluates the roles
and bindings listed through the API here.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from kctl.cli import connect

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.kubeapi.authn import UserInfo

#: this module's commands; kctl.cli.root mounts them (root.COMMANDS)
app = typer.Typer()

auth_app = typer.Typer(
    name="auth",
    help="Inspect authorization: can-i (may a user do something), whoami (who kctl acts as).",
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(auth_app)

#: kubectl's list of verbs it knows (others get a warning, as kubectl gives)
KNOWN_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "use", "bind",
               "impersonate", "*", "approve", "sign", "escalate", "attest")
#: who local access acts as: root on the host is admin
LOCAL_GROUPS = ("system:masters", "system:authenticated")

AsOpt = Annotated[Optional[str], typer.Option("--as", help="Answer for this user (impersonation).")]
AsGroupOpt = Annotated[list[str], typer.Option("--as-group", help="Answer for this group (repeat for more).")]


def _fail(message: str, *, code: int = 1) -> typer.Exit:
    from kctl.cli.wait import fail

    return fail(message, code=code)


def _user(api: API, as_user: Optional[str], as_groups: list[str]) -> UserInfo:
    """The user to answer for: --as/--as-group as impersonated, else the local user (an admin)."""
    from kctl.kubeapi.authn import UserInfo
    from kctl.kubeapi.authz import impersonated_user

    if as_groups and not as_user:
        raise _fail(f"requesting uid, groups or user-extra for {api.user or 'root'} without impersonating a user")
    if as_user:
        return impersonated_user(as_user, as_groups)
    return UserInfo(name=api.user or "root", groups=LOCAL_GROUPS)


@auth_app.command("can-i")
def can_i(
    verb: Annotated[Optional[str], typer.Argument(help="The verb: get, list, watch, create, update, patch, "
                                                        "delete, deletecollection, ...")] = None,
    target: Annotated[Optional[str], typer.Argument(help="TYPE, TYPE/NAME, or a non-resource URL (/logs).")] = None,
    namespace: Annotated[Optional[str], typer.Option("--namespace", "-n", help="Namespace (default: default).")] = None,
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A", help="In any namespace.")] = False,
    subresource: Annotated[Optional[str], typer.Option(help="A subresource, such as pod/log.")] = None,
    list_: Annotated[bool, typer.Option("--list", help="List every action allowed in the namespace.")] = False,
    no_headers: Annotated[bool, typer.Option("--no-headers", help="With --list: no header line.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing; the exit status answers.")] = False,
    as_user: AsOpt = None,
    as_group: AsGroupOpt = [],
) -> None:
    """Check whether an action is allowed: prints yes (exit 0) or no (exit 1)."""
    from kctl.kubeapi.authz import Attributes, Authorizer
    from kctl.machinery.errors import APIError

    api = connect.api()
    server = _https_transport(api)
    user = _user(api, as_user, as_group)
    ns = "" if all_namespaces else (namespace or "default")
    try:
        if list_:
            if verb or target:
                raise _fail("list option must be specified with no arguments")
            if server is not None and not as_user:
                review = _server_rules(server, ns or "default")
            else:
                review = Authorizer(api, cached=False).rules_for(user, ns or "default")
            _print_rules(review, no_headers=no_headers)
            return
        if not verb or not target:
            raise _fail("you must specify two arguments: verb resource or verb resource/resourceName.")
        if verb not in KNOWN_VERBS:
            print(f"Warning: verb '{verb}' is not a known verb", file=sys.stderr)
        if target.startswith("/"):
            attrs = Attributes(user=user, verb=verb, path=target, resource_request=False)
        else:
            kind, _, slash_name = target.partition("/")
            group, resource = _resource(api, kind)
            attrs = Attributes(user=user, verb=verb, namespace=ns, api_group=group, resource=resource,
                               subresource=subresource or "", name=slash_name)
        if server is not None:
            allowed, reason = _server_access(server, attrs, impersonating=bool(as_user))
        else:
            allowed, reason = Authorizer(api, cached=False).authorize(attrs)
    except APIError as exc:
        raise _fail(connect.error_line(exc)) from None
    if quiet:
        raise typer.Exit(0 if allowed else 1)
    if allowed:
        print("yes")
        return
    print("no" + (f" - {reason}" if reason else ""))
    raise typer.Exit(1)


# -- asking an HTTPS API server --------------------------------------------------------------------

def _https_transport(api: API) -> Any:
    """The HTTPS transport of an API reached over HTTPS (kctl.apiserver.rest), else None (local or SSH)."""
    if not connect.current().https:
        return None
    return getattr(api, "transport", None)


def _server_access(transport: Any, attrs: Any, *, impersonating: bool) -> tuple[bool, str]:
    """Ask the server: a SelfSubjectAccessReview for its user, or a SubjectAccessReview for --as's."""
    if attrs.resource_request:
        spec: dict = {"resourceAttributes": {"namespace": attrs.namespace, "verb": attrs.verb,
                                             "group": attrs.api_group, "resource": attrs.resource,
                                             "subresource": attrs.subresource, "name": attrs.name}}
    else:
        spec = {"nonResourceAttributes": {"path": attrs.path, "verb": attrs.verb}}
    kind = "SelfSubjectAccessReview"
    if impersonating:
        kind = "SubjectAccessReview"
        spec.update(user=attrs.user.name, groups=list(attrs.user.groups))
    answer = transport.call("POST", f"/apis/authorization.k8s.io/v1/{kind.lower()}s",
                            body={"apiVersion": "authorization.k8s.io/v1", "kind": kind, "spec": spec})
    status = (answer or {}).get("status") or {}
    reason = " - ".join(r for r in (status.get("reason"), status.get("evaluationError")) if r)
    return bool(status.get("allowed")), reason


def _server_rules(transport: Any, namespace: str) -> Any:
    """Ask the server for its user's rules (SelfSubjectRulesReview)."""
    from kctl.kubeapi.authz import RulesReview

    answer = transport.call("POST", "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                            body={"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                                  "spec": {"namespace": namespace}})
    status = (answer or {}).get("status") or {}
    errors = (status["evaluationError"],) if status.get("incomplete") and status.get("evaluationError") else ()
    return RulesReview(tuple(status.get("resourceRules") or ()), tuple(status.get("nonResourceRules") or ()),
                       errors)


def _server_user(transport: Any) -> UserInfo:
    """Ask the server who its user is (SelfSubjectReview)."""
    from kctl.kubeapi.authn import UserInfo

    answer = transport.call("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                            body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    info = ((answer or {}).get("status") or {}).get("userInfo") or {}
    return UserInfo(name=info.get("username", ""), groups=tuple(info.get("groups") or ()), uid=info.get("uid", ""),
                    extra={k: tuple(v) for k, v in (info.get("extra") or {}).items()})


def _resource(api: API, kind: str) -> tuple[str, str]:
    """(group, resource) of kubectl's TYPE; an unknown one is asked about as written, with kubectl's warning."""
    from kctl.machinery.errors import APIError

    try:
        rt = api.resource(kind)
    except APIError:
        print(f"Warning: the server doesn't have a resource type '{kind}'", file=sys.stderr)
        resource, _, group = kind.partition(".")
        return group, resource
    return rt.group, rt.plural


def _print_rules(review, *, no_headers: bool) -> None:
    """kubectl's `auth can-i --list` table: the rules broken down per group/resource, merged, sorted."""
    from kctl.output.describe.rbac import rule_rows
    from kctl.output.printers import align_columns

    if review.errors:
        from kctl.kubeapi.authz.rbac import aggregate

        print(f"Warning: the list may be incomplete: {aggregate(list(review.errors))}", file=sys.stderr)
    rows = [] if no_headers else [["Resources", "Non-Resource URLs", "Resource Names", "Verbs"]]
    rows.extend(rule_rows([*review.resource_rules, *review.non_resource_rules]))
    align_columns(rows, sys.stdout)


@auth_app.command("whoami")
def whoami(
    output: Annotated[Optional[str], typer.Option("--output", "-o",
                                                  help="json or yaml: the SelfSubjectReview.")] = None,
    as_user: AsOpt = None,
    as_group: AsGroupOpt = [],
) -> None:
    """Print who kctl acts as (the user and groups RBAC sees)."""
    from kctl.kubeapi.authz.reviews import user_info
    from kctl.output.describe.rbac import go_list
    from kctl.output.printers import align_columns

    api = connect.api()
    server = _https_transport(api)
    if server is not None and not as_user:
        from kctl.machinery.errors import APIError

        try:
            user = _server_user(server)
        except APIError as exc:
            raise _fail(connect.error_line(exc)) from None
    else:
        user = _user(api, as_user, as_group)
    review = {"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
              "metadata": {"creationTimestamp": None}, "status": {"userInfo": user_info(user)}}
    if output in ("json", "yaml"):
        import json

        if output == "json":
            print(json.dumps(review, indent=4))
        else:
            import yaml

            print(yaml.safe_dump(review, sort_keys=True, default_flow_style=False), end="")
        return
    if output:
        raise _fail(f'unable to match a printer suitable for the output format "{output}", allowed formats are: '
                    "json,yaml")
    rows = [["ATTRIBUTE", "VALUE"], ["Username", user.name]]
    if user.uid:
        rows.append(["UID", user.uid])
    if user.groups:
        rows.append(["Groups", go_list(list(user.groups))])
    for key, values in sorted((user.extra or {}).items()):
        rows.append([f"Extra: {key}", go_list(list(values))])
    align_columns(rows, sys.stdout)


__all__ = ["app"]
