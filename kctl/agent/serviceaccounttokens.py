"""The node agent's ServiceAccount tokens: bound tokens for projected `serviceAccountToken` volume sources.

As the kubelet's token manager (pkg/kubelet/token): kctl.agent.volumes asks `TokenManager.token(pod,
audience=..., expiration_seconds=...)` while it computes a projected volume's files on each sync of a
pod; the manager asks the API (`create_token`: a TokenRequest bound to the pod, by name and uid) and
keeps the token until 80% of its life has passed, then asks again. A new token changes the volume's
content hash, so kctl.agent.volumesetup writes the new file into the running pod (the periodic pod
re-sync comes well within the token's remaining 20%). Tokens of pods gone are dropped as they expire.
A failed request is a VolumeError (the kubelet's FailedMount), retried on the next sync.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Callable

from kctl.agent.volumes import VolumeError
from kctl.machinery.errors import APIError

if TYPE_CHECKING:
    from kctl.apiserver.contract import API

#: a token is asked for again once this share of its life has passed (the kubelet's requiresRefresh)
REFRESH_FRACTION = 0.8


class TokenManager:
    """Cached, refreshed pod-bound tokens from one API (see the module docstring)."""

    def __init__(self, api: API, *, now: Callable[[], float] = time.time) -> None:
        self.api, self.now = api, now
        self._lock = threading.Lock()
        #: (namespace, service account, pod uid, audience, seconds) -> (token, refresh at, expires at)
        self._tokens: dict[tuple[str, str, str, str, int], tuple[str, float, float]] = {}

    def token(self, pod: dict, *, audience: str = "", expiration_seconds: int = 3600) -> str:
        """A token of the pod's ServiceAccount bound to the pod; VolumeError if the API refuses one."""
        meta = pod.get("metadata") or {}
        namespace, name, uid = meta.get("namespace") or "default", meta.get("name", ""), meta.get("uid", "")
        account = (pod.get("spec") or {}).get("serviceAccountName") or "default"
        key = (namespace, account, uid, audience, int(expiration_seconds))
        now = self.now()
        with self._lock:
            hit = self._tokens.get(key)
            if hit is not None and now < hit[1]:
                return hit[0]
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                   "spec": {"audiences": [audience] if audience else [], "expirationSeconds": int(expiration_seconds),
                            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid}}}
        try:
            result = self.api.create_token(namespace, account, request)
        except APIError as exc:
            raise VolumeError(f"failed to fetch token: {exc.message}") from None
        token = str((result.get("status") or {}).get("token") or "")
        if not token:
            raise VolumeError("failed to fetch token: the API answered without one")
        with self._lock:
            self._tokens[key] = (token, now + REFRESH_FRACTION * expiration_seconds, now + expiration_seconds)
            for other, (_, _, expires) in list(self._tokens.items()):
                if expires <= now:
                    del self._tokens[other]
        return token


__all__ = ["REFRESH_FRACTION", "TokenManager"]
