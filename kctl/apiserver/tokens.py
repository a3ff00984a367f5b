"""ServiceAccount tokens: bound, expiring JWTs as Kubernetes' TokenRequest makes them, signed and verified here.

`create_token` is the API's `create_token` (kctl.apiserver.server.APIServer.create_token: the
`serviceaccounts/token` subresource, POST .../serviceaccounts/NAME/token over HTTPS, `kubectl create
token`, and the node agent's projected `serviceAccountToken` volumes). `authenticate_token` is what the
HTTPS API's bearer-token authenticator (kctl.kubeapi.authn.tokens) calls: signature, expiry, audience,
then the ServiceAccount (and the pod, Secret or Node the token is bound to) must still exist with the
uid the token names.

The JWT is written with `cryptography` alone (ES256: ECDSA P-256 with SHA-256, the signature as raw
r||s). Its claims are those of kube-apiserver's bound tokens (pkg/serviceaccount/claims.go): iss
`https://kubernetes.default.svc.cluster.local`, sub `system:serviceaccount:NS:NAME`, aud, iat, nbf, exp,
jti, and `kubernetes.io` {namespace, serviceaccount {name, uid}, pod|secret|node {name, uid}}; the
header's kid is the base64url SHA-256 of the public key's DER, as Kubernetes computes it. The signing
key pair is `sa.key`/`sa.pub` in the store's PKI folder (`<store>.pki/`, kctl.apiserver.keyfiles), made
on first use under the folder's flock, so every API server of one store signs with, and accepts, the
same key.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import hashlib
import json
import os
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kctl.apiserver import keyfiles
from kctl.store.privatefiles import write_private
from kctl.machinery.errors import APIError, Conflict, FieldError, Invalid, NotFound

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.apiserver.server import APIServer

#: the issuer of every token (kube-apiserver's --service-account-issuer default in kubeadm clusters)
ISSUER = "https://kubernetes.default.svc.cluster.local"
#: the audiences the API accepts, and a TokenRequest without audiences gets (--api-audiences: the issuer)
API_AUDIENCES: tuple[str, ...] = (ISSUER,)
#: a TokenRequest's default and shortest lifetime, and the longest (ValidateTokenRequest)
DEFAULT_EXPIRATION_SECONDS = 3600
MIN_EXPIRATION_SECONDS = 600
MAX_EXPIRATION_SECONDS = 1 << 32
#: clock skew allowed when checking exp and nbf (go-jose's DefaultLeeway)
LEEWAY_SECONDS = 60
#: the signing key pair's files in the PKI folder
SA_KEY, SA_PUB = "sa.key", "sa.pub"
#: the kinds a token may be bound to
BINDABLE_KINDS = ("Pod", "Secret", "Node")
SA_PREFIX = "system:serviceaccount:"
#: extra keys of a bound token's user (authentication.kubernetes.io/...)
EXTRA_POD_NAME = "authentication.kubernetes.io/pod-name"
EXTRA_POD_UID = "authentication.kubernetes.io/pod-uid"
EXTRA_NODE_NAME = "authentication.kubernetes.io/node-name"
EXTRA_NODE_UID = "authentication.kubernetes.io/node-uid"
EXTRA_CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"


class InvalidToken(Exception):
    """A bearer token this API does not accept; the message says why (for the log, never the token)."""


@dataclass(frozen=True)
class SigningKey:
    """The private key tokens are signed with, and its key id (the JWT header's kid)."""

    private_key: Any
    key_id: str


@dataclass(frozen=True)
class ServiceAccountUser:
    """Who a verified token names: the ServiceAccount user and what it is bound to."""

    namespace: str
    name: str
    uid: str
    groups: tuple[str, ...]
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def username(self) -> str:
        return f"{SA_PREFIX}{self.namespace}:{self.name}"


# -- base64url and key ids ---------------------------------------------------------------

def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    if not isinstance(text, str) or any(c in text for c in "=+/ \n"):
        raise InvalidToken("malformed token")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError as exc:
        raise InvalidToken("malformed token") from exc


def key_id(public_key: Any) -> str:
    """Kubernetes' keyIDFromPublicKey: base64url(SHA-256(the public key's PKIX DER)), unpadded."""
    from cryptography.hazmat.primitives import serialization

    der = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return _b64(hashlib.sha256(der).digest())


# -- the key pair ------------------------------------------------------------------------

def ensure_signing_key(folder: Path) -> None:
    """Make sa.key (0600) and sa.pub in folder unless both are there (under the folder's flock)."""
    if (folder / SA_KEY).exists() and (folder / SA_PUB).exists():
        return
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    with keyfiles.locked(folder):
        if (folder / SA_KEY).exists() and (folder / SA_PUB).exists():
            return
        if (folder / SA_KEY).exists():  # the public half was lost: derive it again
            key = _load_private(folder / SA_KEY)
        else:
            key = ec.generate_private_key(ec.SECP256R1())
            write_private(folder / SA_KEY, key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        write_private(folder / SA_PUB, key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))


def _load_private(path: Path) -> Any:
    from cryptography.hazmat.primitives import serialization

    return serialization.load_pem_private_key(path.read_bytes(), password=None)


_cache: dict[tuple[str, str], tuple[int, Any]] = {}
_cache_lock = threading.Lock()


def _cached(path: Path, kind: str, load) -> Any:
    """What load(path) gives, kept while the file's mtime is unchanged."""
    mtime = path.stat().st_mtime_ns
    key = (str(path), kind)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] == mtime:
            return hit[1]
    value = load(path)
    with _cache_lock:
        _cache[key] = (mtime, value)
    return value


def signing_key(folder: Path) -> SigningKey:
    """The key tokens are signed with (made first when the folder has none)."""
    ensure_signing_key(folder)

    def load(path: Path) -> SigningKey:
        private = _load_private(path)
        return SigningKey(private, key_id(private.public_key()))

    return _cached(folder / SA_KEY, "private", load)


def public_key(folder: Path) -> Any:
    """The key tokens are verified with (sa.pub); InvalidToken when the folder has none."""
    from cryptography.hazmat.primitives import serialization

    try:
        return _cached(folder / SA_PUB, "public", lambda p: serialization.load_pem_public_key(p.read_bytes()))
    except FileNotFoundError as exc:
        raise InvalidToken("no ServiceAccount signing key") from exc


# -- JWT ---------------------------------------------------------------------------------

def sign(claims: dict, key: SigningKey) -> str:
    """A compact JWS (ES256) of claims."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    header = {"alg": "ES256", "kid": key.key_id}
    signing_input = (_b64(json.dumps(header, separators=(",", ":")).encode()) + "."
                     + _b64(json.dumps(claims, separators=(",", ":")).encode()))
    r, s = decode_dss_signature(key.private_key.sign(signing_input.encode("ascii"), ec.ECDSA(hashes.SHA256())))
    return signing_input + "." + _b64(r.to_bytes(32, "big") + s.to_bytes(32, "big"))


def verify_signature(token: str, key: Any) -> dict:
    """The claims of a compact JWS whose ES256 signature key verifies; InvalidToken otherwise."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    parts = token.split(".") if isinstance(token, str) else []
    if len(parts) != 3:
        raise InvalidToken("not a JWT")
    try:
        header = json.loads(_unb64(parts[0]))
        claims = json.loads(_unb64(parts[1]))
    except ValueError as exc:
        raise InvalidToken("malformed token") from exc
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise InvalidToken("malformed token")
    if header.get("alg") != "ES256":
        raise InvalidToken(f"unsupported signing algorithm {str(header.get('alg'))[:20]!r}")
    signature = _unb64(parts[2])
    if len(signature) != 64:
        raise InvalidToken("invalid signature")
    der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
    try:
        key.verify(der, f"{parts[0]}.{parts[1]}".encode("ascii"), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature as exc:
        raise InvalidToken("invalid signature") from exc
    return claims


def service_account_claims(claims: dict, *, audiences: tuple[str, ...] = API_AUDIENCES,
                           now: float | None = None) -> ServiceAccountUser:
    """The ServiceAccount user of verified claims: issuer, audience, expiry and shape checked; InvalidToken."""
    now = time.time() if now is None else now
    if claims.get("iss") != ISSUER:
        raise InvalidToken("unknown issuer")
    aud = claims.get("aud")
    aud = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
    if not set(aud) & set(audiences):
        raise InvalidToken("token audiences are not accepted")
    exp, nbf = claims.get("exp"), claims.get("nbf", claims.get("iat"))
    if not isinstance(exp, (int, float)) or now > exp + LEEWAY_SECONDS:
        raise InvalidToken("token has expired")
    if isinstance(nbf, (int, float)) and now + LEEWAY_SECONDS < nbf:
        raise InvalidToken("token is not valid yet")
    private = claims.get("kubernetes.io")
    if not isinstance(private, dict):
        raise InvalidToken("not a ServiceAccount token")
    namespace = private.get("namespace")
    sa = private.get("serviceaccount") or {}
    if not isinstance(namespace, str) or not isinstance(sa, dict) or not namespace or not sa.get("name"):
        raise InvalidToken("not a ServiceAccount token")
    if claims.get("sub") != f"{SA_PREFIX}{namespace}:{sa['name']}":
        raise InvalidToken("subject does not match the ServiceAccount claim")
    extra: dict[str, tuple[str, ...]] = {}
    for kind, name_key, uid_key in (("pod", EXTRA_POD_NAME, EXTRA_POD_UID), ("node", EXTRA_NODE_NAME,
                                                                            EXTRA_NODE_UID)):
        ref = private.get(kind)
        if isinstance(ref, dict) and ref.get("name"):
            extra[name_key], extra[uid_key] = (str(ref["name"]),), (str(ref.get("uid") or ""),)
    if claims.get("jti"):
        extra[EXTRA_CREDENTIAL_ID] = (f"JTI={claims['jti']}",)
    return ServiceAccountUser(namespace=namespace, name=str(sa["name"]), uid=str(sa.get("uid") or ""),
                              groups=("system:serviceaccounts", f"system:serviceaccounts:{namespace}"), extra=extra)


def check_bound_objects(api: API, claims: dict) -> None:
    """The ServiceAccount, and the pod/Secret/Node the token is bound to, still exist with the token's uids.

    As kube-apiserver's validator (pkg/serviceaccount/claims.go: Validate): a deleted object, or one
    made again under the same name (another uid), makes the token invalid; so does a pod being deleted
    for longer than a minute past its deletion."""
    private = claims.get("kubernetes.io") or {}
    namespace = private.get("namespace") or ""
    checks = [("serviceaccounts", namespace, private.get("serviceaccount"))]
    for kind, resource in (("pod", "pods"), ("secret", "secrets"), ("node", "nodes")):
        if kind == "node" and private.get("pod") is not None:
            continue  # a pod-bound token names the pod's node for information only
        if private.get(kind) is not None:
            checks.append((resource, "" if kind == "node" else namespace, private.get(kind)))
    for resource, ns, ref in checks:
        if not isinstance(ref, dict) or not ref.get("name"):
            raise InvalidToken(f"malformed {resource} reference")
        try:
            obj = api.find(api.resource(resource), str(ref["name"]), namespace=ns or None)
        except APIError as exc:
            raise InvalidToken(f"{resource} lookup failed: {exc.reason}") from exc
        if obj is None:
            raise InvalidToken(f"{resource} {ref['name']} has been deleted")
        meta = obj.get("metadata") or {}
        if ref.get("uid") and meta.get("uid") != ref["uid"]:
            raise InvalidToken(f"{resource} {ref['name']} uid ({meta.get('uid')}) does not match claim")
        deleted = _epoch(meta.get("deletionTimestamp"))
        if resource == "pods" and deleted is not None and time.time() > deleted + LEEWAY_SECONDS:
            raise InvalidToken(f"pod {ref['name']} is being deleted")


def authenticate_token(api: API, token: str, folder: Path, *, audiences: tuple[str, ...] = API_AUDIENCES,
                       now: float | None = None) -> ServiceAccountUser:
    """The ServiceAccount user of a bearer token: signature, claims and bound objects checked; InvalidToken."""
    claims = verify_signature(token, public_key(folder))
    user = service_account_claims(claims, audiences=audiences, now=now)
    check_bound_objects(api, claims)
    return user


def _epoch(stamp: object) -> float | None:
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _rfc3339(epoch: float) -> str:
    return dt.datetime.fromtimestamp(int(epoch), dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- TokenRequest ------------------------------------------------------------------------

def _spec_errors(spec: dict) -> list[FieldError]:
    """ValidateTokenRequest: the lifetime's bounds, and what the bound object reference names."""
    errors: list[FieldError] = []
    seconds = spec.get("expirationSeconds")
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        errors.append(FieldError("spec.expirationSeconds", f"Invalid value: {seconds!r}: must be an integer"))
    elif seconds < MIN_EXPIRATION_SECONDS:
        errors.append(FieldError("spec.expirationSeconds",
                                 f"Invalid value: {seconds}: may not specify a duration less than 10 minutes"))
    elif seconds > MAX_EXPIRATION_SECONDS:
        errors.append(FieldError("spec.expirationSeconds",
                                 f"Invalid value: {seconds}: may not specify a duration larger than 2^32 seconds"))
    audiences = spec.get("audiences")
    if not isinstance(audiences, list) or not all(isinstance(a, str) and a for a in audiences):
        errors.append(FieldError("spec.audiences", "Invalid value: must be a list of non-empty strings"))
    ref = spec.get("boundObjectRef")
    if ref is not None:
        if not isinstance(ref, dict):
            errors.append(FieldError("spec.boundObjectRef", "Invalid value: must be an object"))
        else:
            if ref.get("kind") not in BINDABLE_KINDS:
                supported = ", ".join(f'"{k}"' for k in BINDABLE_KINDS)
                errors.append(FieldError("spec.boundObjectRef.kind",
                                         f'Unsupported value: "{ref.get("kind")}": supported values: {supported}'))
            if not ref.get("name") or not isinstance(ref.get("name"), str):
                errors.append(FieldError("spec.boundObjectRef.name", "Required value"))
    return errors


def create_token(server: APIServer, namespace: str | None, name: str, token_request: dict) -> dict:
    """The serviceaccounts/token subresource: the TokenRequest with status {token, expirationTimestamp}.

    As kube-apiserver's TokenREST.Create: the ServiceAccount must exist; a bound pod must exist, run
    as that ServiceAccount and match the given uid (Conflict otherwise); the token's claims name the
    ServiceAccount's and the bound object's uids. One audit event (verb create, subresource token)."""
    from kctl.apiserver import audit
    from kctl.apiserver.server import _Target

    ns = namespace or "default"
    target = _Target(server.resource("serviceaccounts"), ns, name, "token")
    received = audit.now()
    try:
        result = _token_request(server, ns, name, token_request)
    except APIError as exc:
        server._audit([server._failure_event("create", target, exc, received)])
        raise
    server._audit([server._ref_event("create", target, 201, received)])
    return result


def _token_request(api: APIServer, ns: str, name: str, token_request: dict) -> dict:
    if not isinstance(token_request, dict):
        token_request = {}
    spec = copy.deepcopy(token_request.get("spec")) if isinstance(token_request.get("spec"), dict) else {}
    if spec.get("audiences") in (None, []):
        spec["audiences"] = list(API_AUDIENCES)
    if spec.get("expirationSeconds") is None:
        spec["expirationSeconds"] = DEFAULT_EXPIRATION_SECONDS
    errors = _spec_errors(spec)
    if errors:
        raise Invalid(f'TokenRequest.authentication.k8s.io "{name}"', errors)
    account = api.get(api.resource("serviceaccounts"), name, namespace=ns)
    private: dict[str, Any] = {"namespace": ns,
                               "serviceaccount": {"name": name, "uid": account["metadata"].get("uid", "")}}
    ref = spec.get("boundObjectRef")
    if ref:
        bound = _bound_object(api, ns, name, ref)
        ref["uid"] = bound["metadata"].get("uid", "")
        ref.setdefault("apiVersion", "v1")
        private[ref["kind"].lower()] = {"name": ref["name"], "uid": ref["uid"]}
        if ref["kind"] == "Pod" and (bound.get("spec") or {}).get("nodeName"):
            node = api.find(api.resource("nodes"), bound["spec"]["nodeName"])
            if node is not None:  # as Kubernetes 1.30+: a pod-bound token also names the pod's node
                private["node"] = {"name": node["metadata"]["name"], "uid": node["metadata"].get("uid", "")}
    now = int(time.time())
    expires = now + int(spec["expirationSeconds"])
    claims = {"aud": list(spec["audiences"]), "exp": expires, "iat": now, "iss": ISSUER, "jti": str(uuid.uuid4()),
              "kubernetes.io": private, "nbf": now, "sub": f"{SA_PREFIX}{ns}:{name}"}
    token = sign(claims, signing_key(_folder_of(api)))
    meta: dict[str, Any] = {"name": name, "namespace": ns, "creationTimestamp": None}
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": meta, "spec": spec,
            "status": {"token": token, "expirationTimestamp": _rfc3339(expires)}}


def _bound_object(api: APIServer, ns: str, sa_name: str, ref: dict) -> dict:
    """The object a token is to be bound to; NotFound, or Conflict on a uid or ServiceAccount mismatch."""
    kind = ref["kind"]
    resource = {"Pod": "pods", "Secret": "secrets", "Node": "nodes"}[kind]
    obj = api.get(api.resource(resource), ref["name"], namespace=None if kind == "Node" else ns)
    uid = obj["metadata"].get("uid", "")
    if ref.get("uid") and ref["uid"] != uid:
        raise Conflict(f"the UID in the bound object reference ({ref['uid']}) does not match the UID in record "
                       f"({uid}). The object might have been deleted and then recreated")
    if kind == "Pod":
        running_as = (obj.get("spec") or {}).get("serviceAccountName") or "default"
        if running_as != sa_name:
            raise Conflict(f'cannot bind token for serviceaccount "{sa_name}" to pod running with different '
                           f'serviceaccount name.')
    return obj


def _folder_of(api: APIServer) -> Path:
    """The PKI folder of the API's store (`<store>.pki/`)."""
    path = api.local_path
    if not path:
        raise NotFound("serviceaccounts/token", "signing key")
    return keyfiles.pki_dir(os.fspath(path))


__all__ = ["API_AUDIENCES", "BINDABLE_KINDS", "DEFAULT_EXPIRATION_SECONDS", "ISSUER", "InvalidToken",
           "MIN_EXPIRATION_SECONDS", "SA_KEY", "SA_PUB", "ServiceAccountUser", "SigningKey", "authenticate_token",
           "check_bound_objects", "create_token", "ensure_signing_key", "key_id", "public_key",
           "service_account_claims", "sign", "signing_key", "verify_signature"]
