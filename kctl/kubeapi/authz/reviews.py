"""The access reviews: create-only kinds that ask the authorizer a question and are never stored.

kctl.kubeapi.app dispatches a request for one of these resources (after authorizing the `create` itself)
to `handle(request, ctx, info, user)`:

- authorization.k8s.io/v1 SelfSubjectAccessReview (`kubectl auth can-i VERB RESOURCE`): may the requester
  do this? SubjectAccessReview: may `spec.user` with `spec.groups` do it? LocalSubjectAccessReview: the same
  in the request's namespace only. status: allowed, reason, evaluationError.
- authorization.k8s.io/v1 SelfSubjectRulesReview (`kubectl auth can-i --list`): every rule that applies to
  the requester in `spec.namespace` (status resourceRules, nonResourceRules, incomplete, evaluationError).
- authentication.k8s.io/v1 SelfSubjectReview (`kubectl auth whoami`): who the requester is (status.userInfo).

The answer is the posted object with its status filled in, code 201, as kube-apiserver answers. The
evaluation is `review(...)`, a plain function over an Authorizer (kctl.kubeapi.authz).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from kctl.machinery.errors import APIError, BadRequest, FieldError, Invalid

if TYPE_CHECKING:
    from aiohttp import web

    from kctl.kubeapi.authz import Authorizer
    from kctl.kubeapi.authz.rbac import User

AUTHORIZATION = "authorization.k8s.io"
AUTHENTICATION = "authentication.k8s.io"
#: resource -> (group, Kind) of every review this module answers
KINDS: dict[str, tuple[str, str]] = {
    "selfsubjectaccessreviews": (AUTHORIZATION, "SelfSubjectAccessReview"),
    "subjectaccessreviews": (AUTHORIZATION, "SubjectAccessReview"),
    "localsubjectaccessreviews": (AUTHORIZATION, "LocalSubjectAccessReview"),
    "selfsubjectrulesreviews": (AUTHORIZATION, "SelfSubjectRulesReview"),
    "selfsubjectreviews": (AUTHENTICATION, "SelfSubjectReview"),
}
_RESOURCE_FIELDS = ("namespace", "verb", "group", "version", "resource", "subresource", "name")


def _invalid(kind: str, group: str, causes: list[FieldError]) -> Invalid:
    return Invalid(f'{kind}.{group} ""', causes)


def _access_attributes(kind: str, spec: dict, user: User, *, namespace: str) -> Any:
    """The Attributes an access review's spec asks about (Invalid / BadRequest as Kubernetes validates it)."""
    from kctl.kubeapi.authz import Attributes

    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    causes: list[FieldError] = []
    if resource is not None and non_resource is not None:
        causes.append(FieldError("spec.nonResourceAttributes",
                                 "Invalid value: cannot be specified in combination with resourceAttributes"))
    if resource is None and non_resource is None:
        causes.append(FieldError("spec.resourceAttributes", "Invalid value: exactly one of nonResourceAttributes "
                                 "or resourceAttributes must be specified"))
    if kind == "LocalSubjectAccessReview" and non_resource is not None:
        causes.append(FieldError("spec.nonResourceAttributes", "Invalid value: disallowed on this kind of request"))
    if kind in ("SubjectAccessReview", "LocalSubjectAccessReview") and not spec.get("user") and not spec.get("groups"):
        causes.append(FieldError("spec.user", 'Invalid value: "": at least one of user or group must be specified'))
    for what, value in (("resourceAttributes", resource), ("nonResourceAttributes", non_resource)):
        if value is not None and not isinstance(value, dict):
            causes.append(FieldError(f"spec.{what}", "Invalid value: must be an object"))
    if causes:
        raise _invalid(kind, AUTHORIZATION, causes)
    if kind == "LocalSubjectAccessReview":
        if not namespace:
            raise BadRequest("no namespace on request")
        if resource is not None and (resource.get("namespace") or "") != namespace:
            raise BadRequest(f"spec.resourceAttributes.namespace must match namespace: {namespace}")
    if resource is not None:
        values = {f: str(resource.get(f) or "") for f in _RESOURCE_FIELDS}
        return Attributes(user=user, verb=values["verb"], namespace=values["namespace"], api_group=values["group"],
                          api_version=values["version"], resource=values["resource"],
                          subresource=values["subresource"], name=values["name"], resource_request=True)
    return Attributes(user=user, verb=str(non_resource.get("verb") or ""), path=str(non_resource.get("path") or ""),
                      resource_request=False)


def _subject_of(spec: dict) -> User:
    """The user a SubjectAccessReview asks about (exactly as given: no group is added)."""
    from kctl.kubeapi.authn import UserInfo

    groups = spec.get("groups")
    extra = spec.get("extra")
    return UserInfo(name=str(spec.get("user") or ""),
                    groups=tuple(str(g) for g in groups) if isinstance(groups, list) else (),
                    uid=str(spec.get("uid") or ""),
                    extra={str(k): tuple(str(x) for x in v) for k, v in extra.items() if isinstance(v, list)}
                    if isinstance(extra, dict) else {})


def user_info(user: User) -> dict:
    """A user as authentication.k8s.io's UserInfo (username, uid, groups, extra)."""
    info: dict = {"username": user.name}
    uid = getattr(user, "uid", "")
    if uid:
        info["uid"] = uid
    if user.groups:
        info["groups"] = list(user.groups)
    extra = getattr(user, "extra", None)
    if extra:
        info["extra"] = {k: list(v) for k, v in dict(extra).items()}
    return info


def review(resource: str, body: Any, *, user: User, authorizer: Authorizer, namespace: str = "") -> dict:
    """The answered review: `body` (the posted object) with its status filled in for `user`."""
    if resource not in KINDS:
        raise BadRequest(f'the server could not find the requested resource "{resource}"')
    group, kind = KINDS[resource]
    if not isinstance(body, dict):
        raise BadRequest(f"the body of a {kind} must be a JSON object")
    spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
    meta = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    out = {"kind": kind, "apiVersion": f"{group}/v1",
           "metadata": {**{k: v for k, v in meta.items() if v not in ("", None)}, "creationTimestamp": None}}
    if namespace:
        out["metadata"]["namespace"] = namespace
    if kind == "SelfSubjectReview":
        out["status"] = {"userInfo": user_info(user)}
        return out
    out["spec"] = spec
    if kind == "SelfSubjectRulesReview":
        ns = spec.get("namespace")
        if not ns or not isinstance(ns, str):
            raise BadRequest("no namespace on request")
        rules = authorizer.rules_for(user, ns)
        status: dict = {"resourceRules": [dict(r) for r in rules.resource_rules],
                        "nonResourceRules": [dict(r) for r in rules.non_resource_rules],
                        "incomplete": bool(rules.errors)}
        if rules.errors:
            from kctl.kubeapi.authz.rbac import aggregate

            status["evaluationError"] = aggregate(list(rules.errors))
        out["status"] = status
        return out
    subject = user if kind == "SelfSubjectAccessReview" else _subject_of(spec)
    attrs = _access_attributes(kind, spec, subject, namespace=namespace)
    allowed, reason = authorizer.authorize(attrs)
    status = {"allowed": allowed}
    if reason:
        status["reason"] = reason
    out["status"] = status
    return out


async def handle(request: web.Request, ctx: Any, info: Any, user: User) -> web.StreamResponse:
    """Answer one access review (see the module docstring); only create (POST) is served."""
    from kctl.kubeapi import status as kstatus
    from kctl.kubeapi.authz import Authorizer

    if request.method != "POST" or info.name or info.subresource:
        return kstatus.status_response(kstatus.failure(
            405, "the server does not allow this method on the requested resource"))
    try:
        body = decode_body(await request.read(), request.headers.get("Content-Type", ""))
        authorizer = ctx.authorizer if hasattr(ctx.authorizer, "rules_for") else Authorizer(ctx.api, cached=False)
        answer = await ctx.run(review, info.resource, body, user=user, authorizer=authorizer,
                               namespace=info.namespace)
    except APIError as exc:
        return kstatus.error_response(exc)
    return kstatus.json_response(answer, status=201)


def decode_body(raw: bytes, content_type: str) -> Any:
    """The posted object: JSON, protobuf (kubectl's typed clients) or YAML, as the client says; BadRequest if the
    body is not what it says."""
    if "protobuf" in content_type:
        from kctl.kubeapi.protobuf import decode

        obj = decode(raw)
        extra = (obj.get("spec") or {}).get("extra")
        if isinstance(extra, dict):  # protobuf's ExtraValue message is a plain list in JSON
            obj["spec"]["extra"] = {k: (v or {}).get("items") or [] for k, v in extra.items()}
        return obj
    try:
        if "yaml" in content_type:
            import yaml

            return yaml.safe_load(raw.decode())
        return json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"the body is not valid JSON: {type(exc).__name__}") from None
    except Exception as exc:  # yaml.YAMLError
        raise BadRequest(f"the body is not valid YAML: {type(exc).__name__}") from None


__all__ = ["KINDS", "decode_body", "handle", "review", "user_info"]
