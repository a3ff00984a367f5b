"""Client certificate authentication: the certificate's CN is the user, each O a group (kube-apiserver's x509).

kctl.kubeapi.authn.Authenticator calls `CertificateAuthenticator.authenticate` with the peer certificate
of the TLS connection. The TLS layer (kctl.kubeapi.pki.PKI.server_ssl_context) already refuses a
certificate not signed by the cluster CA or out of its validity period; the DER form is checked again
here (signed by ca.crt, valid now, usable for client authentication) so that nothing depends on how the
connection was set up. A certificate without a CN names nobody (None).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from typing import TYPE_CHECKING, Any

from kctl.kubeapi.authn import UserInfo

if TYPE_CHECKING:
    from kctl.kubeapi.pki import PKI

log = logging.getLogger("kctl.kubeapi.authn")


class CertificateAuthenticator:
    """Users from client certificates signed by the PKI's CA."""

    def __init__(self, pki: PKI) -> None:
        self.pki = pki
        self._lock = threading.Lock()
        self._ca: tuple[int, Any] | None = None  # (ca.crt's mtime, the certificate)

    def _ca_cert(self) -> Any:
        from cryptography import x509

        mtime = self.pki.ca.crt.stat().st_mtime_ns
        with self._lock:
            if self._ca is None or self._ca[0] != mtime:
                self._ca = (mtime, x509.load_pem_x509_certificate(self.pki.ca.crt.read_bytes()))
            return self._ca[1]

    def authenticate(self, *, peercert: dict | None, der_cert: bytes | None) -> UserInfo | None:
        """The user of a verified client certificate, or None."""
        if der_cert:
            return self._from_der(der_cert)
        if peercert:
            return _from_peercert(peercert)
        return None

    def _from_der(self, der: bytes) -> UserInfo | None:
        from cryptography import x509
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        try:
            cert = x509.load_der_x509_certificate(der)
            cert.verify_directly_issued_by(self._ca_cert())
        except Exception as exc:  # noqa: BLE001 - any failure to verify is "not this CA's"
            log.info("client certificate refused: %s", type(exc).__name__)
            return None
        now = dt.datetime.now(dt.timezone.utc)
        if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
            log.info("client certificate refused: expired or not yet valid")
            return None
        try:
            usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
            if ExtendedKeyUsageOID.CLIENT_AUTH not in usages and ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE \
                    not in usages:
                return None
        except x509.ExtensionNotFound:
            pass
        names = [str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
        groups = tuple(str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
        return UserInfo(name=names[0], groups=groups) if names and names[0] else None


def _from_peercert(peercert: dict) -> UserInfo | None:
    """The user of ssl's getpeercert() dict (a certificate the TLS layer verified)."""
    name, groups = "", []
    for rdn in peercert.get("subject") or ():
        for key, value in rdn:
            if key == "commonName" and not name:
                name = value
            elif key == "organizationName":
                groups.append(value)
    return UserInfo(name=name, groups=tuple(groups)) if name else None


__all__ = ["CertificateAuthenticator"]
