"""Authentication for the HTTPS API: who a request is from, as kube-apiserver's authenticators decide it.

kctl.kubeapi.app calls `Authenticator.authenticate` (on its worker pool) for every request with the
TLS peer certificate and the Authorization header; None means unauthenticated (401 `Unauthorized`).
As kube-apiserver's union authenticator, a client certificate is tried first (kctl.kubeapi.authn.x509:
CN = user, O = groups, verified against the cluster CA), then a bearer token
(kctl.kubeapi.authn.tokens: a ServiceAccount JWT). Every authenticated user is also in the group
`system:authenticated`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kctl.apiserver.contract import API
    from kctl.kubeapi.pki import PKI

#: the group every authenticated user is in
AUTHENTICATED_GROUP = "system:authenticated"


@dataclass(frozen=True)
class UserInfo:
    """An authenticated user (Kubernetes' user.Info): name, groups, uid and extra values."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)


def _with_authenticated(user: UserInfo) -> UserInfo:
    """user with the group system:authenticated added (once)."""
    if AUTHENTICATED_GROUP in user.groups:
        return user
    return UserInfo(name=user.name, groups=(*user.groups, AUTHENTICATED_GROUP), uid=user.uid, extra=user.extra)


class Authenticator:
    """A client certificate signed by the cluster CA, else a ServiceAccount bearer token (see the module)."""

    def __init__(self, *, pki: PKI, api: API) -> None:
        from kctl.kubeapi.authn.tokens import TokenAuthenticator
        from kctl.kubeapi.authn.x509 import CertificateAuthenticator

        self.pki, self.api = pki, api
        self.certificates = CertificateAuthenticator(pki)
        self.tokens = TokenAuthenticator(api=api, folder=pki.folder)

    def authenticate(self, *, peercert: dict | None, der_cert: bytes | None,
                     authorization: str | None) -> UserInfo | None:
        """The request's user, or None when it has no credentials this API accepts."""
        user = None
        if der_cert or peercert:
            user = self.certificates.authenticate(peercert=peercert, der_cert=der_cert)
        if user is None and authorization:
            user = self.tokens.authenticate_header(authorization)
        return _with_authenticated(user) if user is not None else None


__all__ = ["AUTHENTICATED_GROUP", "Authenticator", "UserInfo"]
