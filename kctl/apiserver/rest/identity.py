"""Who a REST client is, as the API server will authenticate it: for `API.user` of kctl.apiserver.rest.client.

A client certificate's subject CN (kube-apiserver's x509 authenticator takes the user from it),
else a bearer token's `sub` claim when it is a JWT (a ServiceAccount token), else
`system:anonymous`. Read on this side without a round trip; the `cryptography` library is
imported only when a certificate must be read.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from kctl.apiserver.rest.kubeconfig import Connection

ANONYMOUS = "system:anonymous"


def user_of(connection: Connection) -> str:
    """The user name the server will see for this connection's credentials."""
    pem = connection.cert_data
    if pem is None and connection.cert_file:
        try:
            pem = Path(connection.cert_file).read_bytes()
        except OSError:
            pem = None
    if pem:
        name = _common_name(pem)
        if name:
            return name
    if connection.token:
        subject = _jwt_subject(connection.token)
        if subject:
            return subject
    return ANONYMOUS


def _common_name(pem: bytes) -> str:
    try:
        from cryptography import x509
        from cryptography.x509.oid import NameOID

        cert = x509.load_pem_x509_certificate(pem)
        names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    except (ValueError, ImportError):
        return ""
    return str(names[0].value) if names else ""


def _jwt_subject(token: str) -> str:
    parts = token.split(".")
    if len(parts) != 3:
        return ""
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (ValueError, TypeError):
        return ""
    subject = claims.get("sub") if isinstance(claims, dict) else None
    return subject if isinstance(subject, str) else ""


__all__ = ["ANONYMOUS", "user_of"]
