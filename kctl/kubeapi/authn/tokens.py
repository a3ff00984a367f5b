"""Bearer tokens: ServiceAccount JWTs authenticate requests; `POST .../serviceaccounts/NAME/token` makes them.

`TokenAuthenticator.authenticate_header` is the token half of kctl.kubeapi.authn.Authenticator: the
`Authorization: Bearer <JWT>` header is verified by kctl.apiserver.tokens (signature by the store's
sa.key, issuer, audience, expiry, and the ServiceAccount and bound pod still existing with the token's
uids). Like kube-apiserver's cached token authenticator, a verified token's user is kept for 10 seconds,
so a client's burst of requests costs one verification. A token is never logged, only why it was refused.

`handle_token_request` serves the `serviceaccounts/token` subresource (kctl.kubeapi.app dispatches it
after authorization: verb create on serviceaccounts/token): the body is a TokenRequest, the answer
the TokenRequest with status {token, expirationTimestamp} (201), as `kubectl create token` expects.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kctl.apiserver import tokens
from kctl.kubeapi.authn import UserInfo

if TYPE_CHECKING:
    from aiohttp import web

    from kctl.apiserver.contract import API

log = logging.getLogger("kctl.kubeapi.authn")

#: seconds a verified token's user is kept, and how many are kept
CACHE_TTL = 10.0
CACHE_SIZE = 4096


class TokenAuthenticator:
    """Users from ServiceAccount bearer tokens (see the module docstring)."""

    def __init__(self, *, api: API, folder: Path, audiences: tuple[str, ...] = tokens.API_AUDIENCES) -> None:
        self.api, self.folder, self.audiences = api, folder, audiences
        self._cache: OrderedDict[bytes, tuple[float, UserInfo]] = OrderedDict()
        self._lock = threading.Lock()

    def authenticate_header(self, authorization: str) -> UserInfo | None:
        """The user of an `Authorization: Bearer ...` header, or None."""
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self.authenticate_token(token.strip())

    def authenticate_token(self, token: str) -> UserInfo | None:
        """The user of a ServiceAccount JWT, or None when it is not (or no longer) valid."""
        key = hashlib.sha256(token.encode("utf-8", "replace")).digest()
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and hit[0] > now:
                return hit[1]
        try:
            sa = tokens.authenticate_token(self.api, token, self.folder, audiences=self.audiences)
        except tokens.InvalidToken as exc:
            log.info("bearer token refused: %s", exc)
            return None
        user = UserInfo(name=sa.username, groups=sa.groups, uid=sa.uid, extra=dict(sa.extra))
        with self._lock:
            self._cache[key] = (now + CACHE_TTL, user)
            self._cache.move_to_end(key)
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return user


def decode_token_request(raw: bytes) -> dict:
    """A TokenRequest sent as protobuf (k8s.io/api/authentication/v1 generated.proto) as JSON would give it:
    spec.audiences (1), spec.expirationSeconds (4), spec.boundObjectRef (3: kind, apiVersion, name, uid);
    BadRequest when it is not one."""
    from kctl.kubeapi.protobuf import decode  # (kctl.kubeapi.authz.protobuf moved there)

    obj = decode(raw)
    obj.pop("metadata", None)
    obj.setdefault("spec", {})
    return obj


async def handle_token_request(request: web.Request, ctx: Any, info: Any, user: Any) -> web.StreamResponse:
    """POST /api/v1/namespaces/NS/serviceaccounts/NAME/token: a TokenRequest answered with its token."""
    from kctl.kubeapi import status
    from kctl.machinery.errors import APIError, BadRequest

    if request.method != "POST":
        return status.status_response(status.failure(405, "the server does not allow this method on the requested "
                                                          "resource"))
    try:
        raw = await request.read()
        if "protobuf" in (request.content_type or ""):  # kubectl create token's typed client
            body = decode_token_request(raw)
        else:
            body = json.loads(raw) if raw.strip() else {}
        if not isinstance(body, dict):
            raise BadRequest("the body of a TokenRequest must be an object")
        kind, version = body.get("kind"), body.get("apiVersion")
        if kind not in (None, "TokenRequest") or version not in (None, "authentication.k8s.io/v1"):
            raise BadRequest(f"the body is a {version}/{kind}, not an authentication.k8s.io/v1 TokenRequest")
        result = await ctx.run(ctx.api.create_token, info.namespace, info.name, body)
    except ValueError:
        return status.status_response(status.failure(400, "the body of the request is not valid JSON"))
    except APIError as exc:
        return status.error_response(exc, name=info.name, kind="serviceaccounts")
    return status.json_response(result, status=201)


__all__ = ["CACHE_TTL", "TokenAuthenticator", "handle_token_request"]
