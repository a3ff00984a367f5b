"""ServiceAccount tokens (kctl.apiserver.tokens): TokenRequest through the API, JWT verification, bound objects."""

from __future__ import annotations

import base64
import json
import time

import pytest

from kctl.apiserver import keyfiles, tokens
from kctl.machinery.errors import Conflict, Invalid, NotFound


def _sa(api, name="default", ns="default"):
    return api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": ns}})


def _pod(api, name="p", ns="default", sa="default"):
    return api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
                       "spec": {"serviceAccountName": sa, "containers": [{"name": "c", "image": "busybox"}]}})


def _claims(token: str) -> dict:
    body = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


def _folder(api):
    return keyfiles.pki_dir(api.local_path)


def test_create_token_returns_token_request_with_kubernetes_claims(api):
    """A TokenRequest gets a signed token whose claims are those of Kubernetes' bound tokens."""
    sa = _sa(api)
    result = api.create_token("default", "default", {"spec": {}})
    assert result["kind"] == "TokenRequest" and result["apiVersion"] == "authentication.k8s.io/v1"
    assert result["spec"]["audiences"] == [tokens.ISSUER] and result["spec"]["expirationSeconds"] == 3600
    claims = _claims(result["status"]["token"])
    assert claims["iss"] == tokens.ISSUER and claims["sub"] == "system:serviceaccount:default:default"
    assert claims["aud"] == [tokens.ISSUER] and claims["exp"] - claims["iat"] == 3600 and claims["nbf"]
    assert claims["kubernetes.io"] == {"namespace": "default",
                                       "serviceaccount": {"name": "default", "uid": sa["metadata"]["uid"]}}
    assert result["status"]["expirationTimestamp"].endswith("Z")


def test_token_verifies_and_names_the_service_account_user(api):
    """authenticate_token accepts a fresh token: user, groups and uid of its ServiceAccount."""
    sa = _sa(api, "robot", "default")
    token = api.create_token("default", "robot", {})["status"]["token"]
    user = tokens.authenticate_token(api, token, _folder(api))
    assert user.username == "system:serviceaccount:default:robot"
    assert user.groups == ("system:serviceaccounts", "system:serviceaccounts:default")
    assert user.uid == sa["metadata"]["uid"]


@pytest.mark.parametrize("mutate, why", [
    (lambda t: t[:-4] + ("AAAA" if not t.endswith("AAAA") else "BBBB"), "invalid signature"),
    (lambda t: t.split(".")[0] + "." + base64.urlsafe_b64encode(json.dumps(
        {**_claims(t), "sub": "system:serviceaccount:kube-system:admin"}).encode()).rstrip(b"=").decode()
        + "." + t.split(".")[2], "invalid signature"),
    (lambda t: base64.urlsafe_b64encode(b'{"alg":"none"}').rstrip(b"=").decode() + "." + t.split(".")[1] + ".",
     "unsupported signing algorithm"),
    (lambda t: "not-a-jwt", "not a JWT"),
], ids=["signature", "claims", "alg-none", "garbage"])
def test_tampered_tokens_are_refused(api, mutate, why):
    """A token whose signature, claims or header were changed is refused."""
    _sa(api)
    token = api.create_token("default", "default", {})["status"]["token"]
    with pytest.raises(tokens.InvalidToken, match=why):
        tokens.authenticate_token(api, mutate(token), _folder(api))


def test_expired_token_is_refused(api):
    """A token past exp (beyond the leeway) is refused."""
    _sa(api)
    token = api.create_token("default", "default", {"spec": {"expirationSeconds": 600}})["status"]["token"]
    with pytest.raises(tokens.InvalidToken, match="expired"):
        tokens.authenticate_token(api, token, _folder(api), now=time.time() + 600 + tokens.LEEWAY_SECONDS + 5)


def test_other_audience_is_refused(api):
    """A token made for another audience does not authenticate to the API."""
    _sa(api)
    token = api.create_token("default", "default", {"spec": {"audiences": ["vault"]}})["status"]["token"]
    with pytest.raises(tokens.InvalidToken, match="audience"):
        tokens.authenticate_token(api, token, _folder(api))
    assert tokens.authenticate_token(api, token, _folder(api), audiences=("vault",)).name == "default"


def test_token_of_deleted_or_recreated_service_account_is_refused(api):
    """Deleting the ServiceAccount (or making it again: another uid) invalidates its tokens."""
    _sa(api)
    token = api.create_token("default", "default", {})["status"]["token"]
    api.delete(api.resource("serviceaccounts"), "default", namespace="default")
    with pytest.raises(tokens.InvalidToken, match="deleted"):
        tokens.authenticate_token(api, token, _folder(api))
    _sa(api)
    with pytest.raises(tokens.InvalidToken, match="does not match"):
        tokens.authenticate_token(api, token, _folder(api))


def test_pod_bound_token_names_the_pod_and_dies_with_it(api):
    """A token bound to a pod carries its name and uid, and is refused once the pod is gone."""
    _sa(api)
    pod = _pod(api)
    result = api.create_token("default", "default", {"spec": {"boundObjectRef": {
        "kind": "Pod", "apiVersion": "v1", "name": "p", "uid": pod["metadata"]["uid"]}, "expirationSeconds": 3607}})
    token = result["status"]["token"]
    assert _claims(token)["kubernetes.io"]["pod"] == {"name": "p", "uid": pod["metadata"]["uid"]}
    user = tokens.authenticate_token(api, token, _folder(api))
    assert user.extra[tokens.EXTRA_POD_NAME] == ("p",)
    api.delete(api.resource("pods"), "p", namespace="default", grace_period=0)
    assert api.find(api.resource("pods"), "p", namespace="default") is None  # unscheduled: gone at once
    with pytest.raises(tokens.InvalidToken, match="deleted"):
        tokens.authenticate_token(api, token, _folder(api))


@pytest.mark.parametrize("spec, error, match", [
    ({"expirationSeconds": 100}, Invalid, "may not specify a duration less than 10 minutes"),
    ({"boundObjectRef": {"kind": "ConfigMap", "name": "x"}}, Invalid, 'Unsupported value: "ConfigMap"'),
    ({"boundObjectRef": {"kind": "Pod", "name": "missing"}}, NotFound, 'pods "missing" not found'),
    ({"boundObjectRef": {"kind": "Pod", "name": "p", "uid": "other"}}, Conflict, "does not match the UID"),
    ({"boundObjectRef": {"kind": "Pod", "name": "q"}}, Conflict, "different serviceaccount name"),
], ids=["short", "kind", "missing-pod", "uid", "other-sa"])
def test_invalid_token_requests_are_refused(api, spec, error, match):
    """TokenRequests Kubernetes refuses are refused with its messages."""
    _sa(api)
    _sa(api, "other")
    _pod(api)
    _pod(api, "q", sa="other")
    with pytest.raises(error, match=match):
        api.create_token("default", "default", {"spec": spec})


def test_missing_service_account_is_not_found(api):
    """A token for a ServiceAccount that does not exist: NotFound."""
    with pytest.raises(NotFound, match='serviceaccounts "nobody" not found'):
        api.create_token("default", "nobody", {})


def test_signing_key_files_are_private_and_shared(api):
    """sa.key/sa.pub are 0600 in a 0700 folder; a second API of the store signs with the same key."""
    _sa(api)
    api.create_token("default", "default", {})
    folder = _folder(api)
    assert folder.stat().st_mode & 0o777 == 0o700
    for name in (tokens.SA_KEY, tokens.SA_PUB):
        assert (folder / name).stat().st_mode & 0o777 == 0o600
    assert tokens.signing_key(folder).key_id == tokens.key_id(tokens.public_key(folder))
