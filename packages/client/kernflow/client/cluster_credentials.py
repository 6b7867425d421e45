"""The credentials `kernflow cluster up` generates for a secure cluster: a CA, certificates, secrets.

::

    creds = generate(os.path.join(state_dir, "credentials"), ["node7", "10.0.0.7"])
    creds.server_cert, creds.client_cert, creds.token_file, creds.etcd_password_file("root")

Everything goes into one directory of mode 0700, each file of mode 0600, written with ``O_EXCL``
so nothing is read back that someone else prepared:

* ``ca.crt`` / ``ca.key``: a self-signed CA (ECDSA P-256) that exists for this cluster only. Its
  key signs the two certificates below and is used for nothing else.
* ``server.crt`` / ``server.key``: the certificate etcd, the master and the tasks serve with. Its
  subject alternative names are the host names and addresses given, plus ``localhost``,
  ``127.0.0.1`` and ``::1``; it is valid for server and client authentication, since the master
  and the tasks also call each other (and etcd) with it.
* ``client.crt`` / ``client.key``: the certificate a client presents (client authentication only).
* ``token``: the cluster token every master and worker method checks (32 random bytes, base64url).
* ``etcd-root.password``, ``etcd-kernflow.password``, ``etcd-client.password``: the passwords of
  etcd's users: ``root`` (administration), ``kernflow`` (the master and the tasks: read and write
  under ``/kernflow/``) and ``kernflow-client`` (clients: read only).

Neither certificate's common name is the name of an etcd user: etcd with ``--client-cert-auth``
would otherwise take the certificate as that user's login, and the passwords would not matter.
Requires the ``cryptography`` package (``pip install 'kernflow-client[cluster]'``).
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
import os
import secrets
import socket

from kernflow.core.framework import errors

__all__ = ["ClusterCredentials", "generate", "load", "host_names", "ETCD_USERS"]

# etcd user -> (key prefix it may use, may write); root administers etcd and owns no prefix.
ETCD_USERS = {"root": (None, True), "kernflow": ("/kernflow/", True),
              "kernflow-client": ("/kernflow/", False)}
_VALID_DAYS = 365
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_FILES = ("ca.crt", "ca.key", "server.crt", "server.key", "client.crt", "client.key", "token",
          *(f"etcd-{user}.password" for user in ETCD_USERS))


def host_names(host: str, advertise: str | None = None) -> list[str]:
    """The names and addresses a server bound to `host` is reached by (its certificate's SANs).

    A wildcard bind (``0.0.0.0``, ``::``) stands for this machine: its host name, fully qualified
    name and their addresses. Loopback names are always included.
    """
    names = [n for n in (advertise, host) if n]
    if host.strip("[]") in ("", "0.0.0.0", "::"):
        names = [n for n in names if n.strip("[]") not in ("", "0.0.0.0", "::")]
        for name in {socket.gethostname(), socket.getfqdn()}:
            names.append(name)
            try:
                names += [info[4][0] for info in socket.getaddrinfo(name, None)]
            except OSError:
                pass
    out = []
    for n in [*names, *_LOOPBACK_NAMES]:
        n = n.strip("[]")
        if n and n not in out:
            out.append(n)
    return out


@dataclasses.dataclass(frozen=True)
class ClusterCredentials:
    """The paths of a generated credentials directory (see the module docstring)."""
    directory: str

    def path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    @property
    def ca_cert(self) -> str:
        return self.path("ca.crt")

    @property
    def server_cert(self) -> str:
        return self.path("server.crt")

    @property
    def server_key(self) -> str:
        return self.path("server.key")

    @property
    def client_cert(self) -> str:
        return self.path("client.crt")

    @property
    def client_key(self) -> str:
        return self.path("client.key")

    @property
    def token_file(self) -> str:
        return self.path("token")

    def etcd_password_file(self, user: str) -> str:
        if user not in ETCD_USERS:
            raise errors.InvalidArgumentError(None, None, f"no etcd user {user!r} (expected one of "
                                              f"{', '.join(ETCD_USERS)})")
        return self.path(f"etcd-{user}.password")

    def etcd_password(self, user: str) -> str:
        with open(self.etcd_password_file(user), encoding="utf-8") as f:
            return f.read().strip()

    def files(self) -> list[str]:
        """Every file of the directory."""
        return [self.path(name) for name in _FILES]


def _crypto():
    try:
        from cryptography import x509  # noqa: PLC0415 - optional dependency
        from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
        from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: PLC0415
    except ImportError:
        raise errors.FailedPreconditionError(
            None, None, "generating a secure cluster's certificates needs the 'cryptography' package: "
            "pip install 'kernflow-client[cluster]' (or run `kernflow cluster up --insecure`)") from None
    return x509, hashes, serialization, ec, ExtendedKeyUsageOID, NameOID


def _write_private(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _san(name: str, x509):
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _certificate(subject: str, key, issuer_name, issuer_key, *, ca: bool, sans=(), usages=()):
    x509, hashes, _, _, _, NameOID = _crypto()
    now = datetime.datetime.now(datetime.timezone.utc)
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kernflow"),
                      x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    b = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer_name or name)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5))
         .not_valid_after(now + datetime.timedelta(days=_VALID_DAYS))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
         .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False))
    if ca:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                          key_encipherment=False, data_encipherment=False,
                                          key_agreement=False, key_cert_sign=True, crl_sign=True,
                                          encipher_only=False, decipher_only=False), critical=True)
    else:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                          key_encipherment=True, data_encipherment=False,
                                          key_agreement=False, key_cert_sign=False, crl_sign=False,
                                          encipher_only=False, decipher_only=False), critical=True)
        b = b.add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
        b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                            critical=False)
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName([_san(n, x509) for n in sans]), critical=False)
    return b.sign(issuer_key or key, hashes.SHA256()), name


def _pem(cert, key) -> tuple[bytes, bytes]:
    _, _, serialization, _, _, _ = _crypto()
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def generate(directory: str, hosts) -> ClusterCredentials:
    """Generates a cluster's CA, certificates, token and etcd passwords into `directory`.

    Args:
        directory: created (mode 0700) if missing; must not already hold any of the files.
        hosts: the names and addresses the servers are reached by (see `host_names`); the server
            certificate names each of them.

    Returns:
        The `ClusterCredentials` of `directory`.

    Raises:
        FailedPreconditionError: the ``cryptography`` package is missing.
        AlreadyExistsError: a credentials file exists already (remove the directory first).
    """
    x509, _, _, ec, EKU, _ = _crypto()
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    creds = ClusterCredentials(os.path.abspath(directory))
    present = [p for p in creds.files() if os.path.lexists(p)]
    if present:
        raise errors.AlreadyExistsError(None, None, f"cluster credentials exist already: {present[0]} "
                                        f"(remove {directory} to generate new ones)")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert, ca_name = _certificate("kernflow cluster CA", ca_key, None, None, ca=True)
    server_key, client_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    server_cert, _ = _certificate("kernflow server", server_key, ca_name, ca_key, ca=False,
                                  sans=list(hosts), usages=[EKU.SERVER_AUTH, EKU.CLIENT_AUTH])
    client_cert, _ = _certificate("kernflow client", client_key, ca_name, ca_key, ca=False,
                                  usages=[EKU.CLIENT_AUTH])
    for stem, cert, key in (("ca", ca_cert, ca_key), ("server", server_cert, server_key),
                            ("client", client_cert, client_key)):
        cert_pem, key_pem = _pem(cert, key)
        _write_private(creds.path(f"{stem}.crt"), cert_pem)
        _write_private(creds.path(f"{stem}.key"), key_pem)
    _write_private(creds.token_file, secrets.token_urlsafe(32).encode() + b"\n")
    for user in ETCD_USERS:
        _write_private(creds.etcd_password_file(user), secrets.token_urlsafe(24).encode() + b"\n")
    return creds


def load(directory: str) -> ClusterCredentials:
    """The `ClusterCredentials` of an existing directory `generate` wrote.

    Raises:
        NotFoundError: a file is missing.
    """
    creds = ClusterCredentials(os.path.abspath(directory))
    missing = [p for p in creds.files() if not os.path.isfile(p)]
    if missing:
        raise errors.NotFoundError(None, None, f"cluster credentials incomplete: {missing[0]} is missing")
    return creds
