"""The cluster's PKI: a CA, the HTTPS API's serving certificate, client certificates, kubeconfigs.

`kctl daemon --listen` (kctl.daemon.server, through kctl.kubeapi.serving) calls
`PKI.for_store(store).ensure(sans=...)` at start and serves with `server_ssl_context()`;
`kctl config kubeconfig` (kctl.cli.config) prints `kubeconfig(...)`; the root-CA publisher
(kctl.controllers.rootcacert) reads `ca.crt` for the `kube-root-ca.crt` ConfigMaps.

Files, in `<store>.pki/` (folder 0700, every file 0600, each written atomically, every check
and write under the folder's flock so daemons sharing a store never clobber each other):

| file | what |
|---|---|
| ca.crt, ca.key | the cluster CA (EC P-256, 10 years, CN `kctl-ca`) |
| apiserver.crt, apiserver.key | the serving certificate (1 year; SANs: see `wanted_sans`) |
| admin.crt, admin.key | the admin client certificate (CN `kctl-admin`, O `system:masters`, 1 year) |
| sa.key, sa.pub | the ServiceAccount token signing key pair (kctl.apiserver.tokens) |

`ensure` makes what is missing, and makes again a serving or admin certificate that expires within
30 days, was not signed by this CA, or does not match its key; the serving certificate also when
the wanted SANs changed. A client identifies itself as kube-apiserver's x509 authenticator reads a
certificate: CN = user, each O = a group (kctl.kubeapi.authn.x509). Keys are never logged.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from kctl.apiserver import keyfiles, tokens
from kctl.store.privatefiles import write_private

if TYPE_CHECKING:
    from cryptography import x509

#: the CA's common name, the admin's identity
CA_NAME = "kctl-ca"
ADMIN_USER = "kctl-admin"
ADMIN_GROUPS = ("system:masters",)
#: lifetimes (days) and when a certificate is made again before it expires
CA_DAYS = 3650
CERT_DAYS = 365
RENEW_BEFORE = dt.timedelta(days=30)
#: a certificate is valid from a little before it is made (clocks of clients differ)
BACKDATE = dt.timedelta(minutes=5)
#: the first address of the default Service range (the `kubernetes` Service's ClusterIP)
DEFAULT_SERVICE_IP = "10.96.0.1"
DEFAULT_CLUSTER_DOMAIN = "cluster.local"
DEFAULT_SERVER_URL = "https://127.0.0.1:6443"


class PKIError(Exception):
    """The PKI folder cannot be used as it is (one line naming the file; never key material)."""


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _host_addresses() -> list[str]:
    """This host's name's addresses and the address of its default route (no traffic is sent)."""
    found: list[str] = []
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None):
            found.append(str(info[4][0]).split("%")[0])
    except OSError:
        pass
    for family, probe in ((socket.AF_INET, "10.255.255.255"), (socket.AF_INET6, "fd00::1")):
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.connect((probe, 9))
                found.append(str(s.getsockname()[0]))
        except OSError:
            pass
    return found


def wanted_sans(extra: Iterable[str] = (), *, service_ip: str = DEFAULT_SERVICE_IP,
                cluster_domain: str = DEFAULT_CLUSTER_DOMAIN) -> list[str]:
    """The serving certificate's names: loopback, this host's name and addresses, the `kubernetes` Service's
    names and ClusterIP, and extra (--tls-san, the listen address); sorted, each once."""
    names = ["localhost", "127.0.0.1", "::1", socket.gethostname(), *_host_addresses(),
             "kubernetes", "kubernetes.default", "kubernetes.default.svc", f"kubernetes.default.svc.{cluster_domain}",
             service_ip, *extra]
    out: set[str] = set()
    for name in names:
        name = str(name).strip().strip("[]")
        if not name or name in ("0.0.0.0", "::"):
            continue
        try:
            out.add(str(ipaddress.ip_address(name)))
        except ValueError:
            out.add(name.lower())
    return sorted(out)


@dataclass(frozen=True)
class _Pair:
    """A certificate's and its key's files."""

    crt: Path
    key: Path


class PKI:
    """The PKI folder of one store (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.ca = _Pair(self.folder / "ca.crt", self.folder / "ca.key")
        self.apiserver = _Pair(self.folder / "apiserver.crt", self.folder / "apiserver.key")
        self.admin = _Pair(self.folder / "admin.crt", self.folder / "admin.key")
        self.sa_key = self.folder / tokens.SA_KEY
        self.sa_pub = self.folder / tokens.SA_PUB

    @classmethod
    def for_store(cls, store_path: Path | str | None) -> PKI:
        """The PKI beside the store at store_path (None: the default store's), `<store>.pki/`."""
        if store_path is None:
            from kctl.store.open import local_path

            store_path = local_path(None)
        return cls(keyfiles.pki_dir(store_path))

    # -- making what is missing ----------------------------------------------------------

    def ensure(self, *, sans: list[str] | None, service_ip: str = DEFAULT_SERVICE_IP,
               cluster_domain: str = DEFAULT_CLUSTER_DOMAIN) -> None:
        """Make the CA, serving and admin certificates and the signing key where missing or due (see above).

        sans None (a client: `kctl config kubeconfig`): the serving certificate is left as a daemon made it."""
        wanted = wanted_sans(sans or (), service_ip=service_ip, cluster_domain=cluster_domain)
        with keyfiles.locked(self.folder):
            ca_cert, ca_key = self._ensure_ca()
            if sans is None:
                pass
            elif self._due(self.apiserver, ca_cert) or _sans_of(_load_cert(self.apiserver.crt)) != set(wanted):
                self._write_pair(self.apiserver, *_make_cert(ca_cert, ca_key, common_name="kube-apiserver",
                                                             organizations=(), days=CERT_DAYS, server_names=wanted))
            if self._due(self.admin, ca_cert):
                self._write_pair(self.admin, *_make_cert(ca_cert, ca_key, common_name=ADMIN_USER,
                                                         organizations=ADMIN_GROUPS, days=CERT_DAYS))
        tokens.ensure_signing_key(self.folder)

    def _ensure_ca(self) -> tuple[x509.Certificate, Any]:
        """The CA (made when neither file exists; a half CA is an error: certificates signed by it exist)."""
        have_crt, have_key = self.ca.crt.exists(), self.ca.key.exists()
        if have_crt and have_key:
            return self._load_ca()
        if have_crt or have_key:
            missing = self.ca.key if have_crt else self.ca.crt
            raise PKIError(f"{missing} is missing but {self.ca.crt if have_key else self.ca.key} exists: restore it, "
                           f"or remove {self.folder} to make a new CA (every kubeconfig must then be made again)")
        cert, key = _make_ca()
        self._write_pair(self.ca, cert, key)
        return cert, key

    def _load_ca(self) -> tuple[x509.Certificate, Any]:
        try:
            return _load_cert(self.ca.crt), _load_key(self.ca.key)
        except (OSError, ValueError) as exc:
            raise PKIError(f"{self.folder}: ca.crt or ca.key cannot be read: {type(exc).__name__}") from None

    def _due(self, pair: _Pair, ca_cert: x509.Certificate) -> bool:
        """pair must be made (again): missing, unreadable, expiring soon, not by this CA, or not of its key."""
        try:
            cert, key = _load_cert(pair.crt), _load_key(pair.key)
        except (OSError, ValueError):
            return True
        if cert.not_valid_after_utc - RENEW_BEFORE < _now() or not _signed_by(cert, ca_cert):
            return True
        return _public_der(cert.public_key()) != _public_der(key.public_key())

    def _write_pair(self, pair: _Pair, cert: x509.Certificate, key: Any) -> None:
        """The key first, then the certificate (each atomic; a pair left half-written is remade by `_due`)."""
        write_private(pair.key, _key_pem(key))
        write_private(pair.crt, _cert_pem(cert))

    # -- using it ----------------------------------------------------------------------------

    def ca_pem(self) -> bytes:
        """The CA certificate (PEM)."""
        return self.ca.crt.read_bytes()

    def server_ssl_context(self) -> ssl.SSLContext:
        """TLS for the HTTPS API: the serving certificate; client certificates optional, verified against ca.crt."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        with keyfiles.locked(self.folder):  # a pair being remade by another daemon is never read half-way
            ctx.load_cert_chain(str(self.apiserver.crt), str(self.apiserver.key))
            ctx.load_verify_locations(cafile=str(self.ca.crt))
        ctx.verify_mode = ssl.CERT_OPTIONAL
        ctx.set_alpn_protocols(["http/1.1"])
        return ctx

    def client_ssl_context(self, *, cert_file: Path | None = None, key_file: Path | None = None) -> ssl.SSLContext:
        """TLS for a client of the HTTPS API: trusts ca.crt; presents cert_file/key_file when given."""
        ctx = ssl.create_default_context(cafile=str(self.ca.crt))
        if cert_file is not None:
            ctx.load_cert_chain(str(cert_file), str(key_file) if key_file else None)
        return ctx

    def issue_client_cert(self, user: str, groups: Iterable[str] = (), *, days: int = CERT_DAYS,
                          not_before: dt.datetime | None = None) -> tuple[bytes, bytes]:
        """A client certificate for user (CN) in groups (O), signed by the CA: (cert PEM, key PEM)."""
        if not user:
            raise PKIError("a client certificate needs a user name")
        ca_cert, ca_key = self._load_ca()
        cert, key = _make_cert(ca_cert, ca_key, common_name=user, organizations=tuple(groups), days=days,
                               not_before=not_before)
        return _cert_pem(cert), _key_pem(key)

    def kubeconfig(self, *, server_url: str = DEFAULT_SERVER_URL, user: str = ADMIN_USER,
                   groups: Iterable[str] = ADMIN_GROUPS, context_name: str = "kctl", days: int = CERT_DAYS) -> str:
        """A kubeconfig (kubectl's format, data embedded) for user in groups at server_url, with a new
        certificate (the admin's own, admin.crt, when user and groups are the admin's and days the default)."""
        groups = tuple(groups)
        if user == ADMIN_USER and groups == ADMIN_GROUPS and days == CERT_DAYS and self.admin.crt.exists():
            cert_pem, key_pem = self.admin.crt.read_bytes(), self.admin.key.read_bytes()
        else:
            cert_pem, key_pem = self.issue_client_cert(user, groups, days=days)
        return render_kubeconfig(server_url=server_url, ca_pem=self.ca_pem(), user=user, cert_pem=cert_pem,
                                 key_pem=key_pem, context_name=context_name)


def render_kubeconfig(*, server_url: str, ca_pem: bytes, user: str, cert_pem: bytes | None = None,
                      key_pem: bytes | None = None, token: str | None = None, context_name: str = "kctl") -> str:
    """kubectl's kubeconfig (apiVersion v1, kind Config) with one cluster, user and context, data embedded."""
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode("ascii")

    q = json.dumps  # a JSON string is a YAML double-quoted scalar: names with ':' stay names
    lines = ["apiVersion: v1", "kind: Config", "clusters:", "- cluster:",
             f"    certificate-authority-data: {b64(ca_pem)}", f"    server: {q(server_url)}",
             f"  name: {q(context_name)}", "contexts:", "- context:", f"    cluster: {q(context_name)}",
             f"    user: {q(user)}", f"  name: {q(context_name)}", f"current-context: {q(context_name)}",
             "preferences: {}", "users:", f"- name: {q(user)}", "  user:"]
    if cert_pem is not None and key_pem is not None:
        lines += [f"    client-certificate-data: {b64(cert_pem)}", f"    client-key-data: {b64(key_pem)}"]
    if token is not None:
        lines.append(f"    token: {q(token)}")
    return "\n".join(lines) + "\n"


# -- certificates (cryptography) ------------------------------------------------------------

def _load_cert(path: Path) -> x509.Certificate:
    from cryptography import x509

    return x509.load_pem_x509_certificate(path.read_bytes())


def _load_key(path: Path) -> Any:
    from cryptography.hazmat.primitives import serialization

    return serialization.load_pem_private_key(path.read_bytes(), password=None)


def _cert_pem(cert: x509.Certificate) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def _public_der(public_key: Any) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def _signed_by(cert: x509.Certificate, ca_cert: x509.Certificate) -> bool:
    """cert's issuer is ca_cert and ca_cert's key made its signature."""
    try:
        cert.verify_directly_issued_by(ca_cert)
        return True
    except Exception:  # InvalidSignature, another issuer, another key type
        return False


def _sans_of(cert: x509.Certificate) -> set[str]:
    from cryptography import x509

    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {*(n.lower() for n in ext.get_values_for_type(x509.DNSName)),
            *(str(a) for a in ext.get_values_for_type(x509.IPAddress))}


def _make_ca() -> tuple[x509.Certificate, Any]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME)])
    now = _now()
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - BACKDATE)
            .not_valid_after(now + dt.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=True,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return cert, key


def _make_cert(ca_cert: x509.Certificate, ca_key: Any, *, common_name: str, organizations: tuple[str, ...],
               days: int, server_names: list[str] | None = None,
               not_before: dt.datetime | None = None) -> tuple[x509.Certificate, Any]:
    """A leaf certificate signed by the CA: a server's (server_names: its SANs) or a client's."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    start = not_before or (_now() - BACKDATE)
    subject = x509.Name([*(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations),
                         x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server_names is not None else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(start + BACKDATE + dt.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=True,
                                            data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                            crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),
                              critical=False))
    if server_names is not None:
        alt: list[x509.GeneralName] = []
        for name in server_names:
            try:
                alt.append(x509.IPAddress(ipaddress.ip_address(name)))
            except ValueError:
                alt.append(x509.DNSName(name))
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


__all__ = ["ADMIN_GROUPS", "ADMIN_USER", "CA_NAME", "DEFAULT_SERVER_URL", "DEFAULT_SERVICE_IP", "PKI", "PKIError",
           "render_kubeconfig", "wanted_sans"]
