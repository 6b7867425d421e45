"""Transport security of this process's gRPC servers and channels: TLS and the cluster token.

One `Security` per process, set with `configure` (the ``kernflow master`` / ``kernflow worker``
commands do it from ``--tls-cert``, ``--tls-key``, ``--tls-ca`` and ``--token-file``) or, when
nothing configured it, read from the environment on first use:

=============================  ==================================================================
``KERNFLOW_TLS_CERT``          this process's certificate chain (PEM file): its servers' identity,
                               and its client certificate for mutual TLS
``KERNFLOW_TLS_KEY``           the certificate's private key (PEM file, not encrypted)
``KERNFLOW_TLS_CA``            the CA certificate(s) trusted for peers (PEM file); a server given a
                               CA requires client certificates signed by it (mutual TLS)
``KERNFLOW_TLS_SERVER_NAME``   the name checked in every server's certificate instead of the
                               dialled host (certificates naming one cluster-wide name)
``KERNFLOW_TOKEN``             the cluster token itself
``KERNFLOW_TOKEN_FILE``        a file holding it (refused when group or others may read it)
=============================  ==================================================================

**The cluster is TLS or not as a whole.** With a certificate or a CA configured, every server binds
with TLS (`channels.bind`) and every channel is a TLS channel (`channels.get_channel`), whatever the
target's scheme; ``grpcs://host:port`` is a ``grpc://`` target that in addition refuses to run without
TLS configured.

**The token** travels as call metadata, ``authorization: Bearer <token>``, in what
`channels.outgoing_metadata` returns (every kernflow client call already sends it for trace context).
A server built while a token is configured checks it on every method of every service it registers
through `channels.add_servicer`, with `hmac.compare_digest`, and answers UNAUTHENTICATED ("missing or
wrong cluster token") before the servicer sees the request. Servers and channels take the security
current when they are built: `configure` closes this process's cached channels, so later calls use
the new settings, but a server already serving keeps its own.
"""

from __future__ import annotations

import dataclasses
import functools
import hmac
import os
import ssl
import stat
import threading

import grpc

from kernflow.core.framework import errors

__all__ = ["Security", "configure", "current", "load", "server_credentials", "channel_credentials",
           "channel_options", "auth_metadata", "require_tls", "read_token_file", "read_pem",
           "add_arguments", "configure_from_args", "token_matches",
           "TLS_CERT_ENV", "TLS_KEY_ENV", "TLS_CA_ENV", "TLS_SERVER_NAME_ENV", "TOKEN_ENV", "TOKEN_FILE_ENV",
           "AUTH_HEADER", "REJECTED"]

TLS_CERT_ENV = "KERNFLOW_TLS_CERT"
TLS_KEY_ENV = "KERNFLOW_TLS_KEY"
TLS_CA_ENV = "KERNFLOW_TLS_CA"
TLS_SERVER_NAME_ENV = "KERNFLOW_TLS_SERVER_NAME"
TOKEN_ENV = "KERNFLOW_TOKEN"
TOKEN_FILE_ENV = "KERNFLOW_TOKEN_FILE"

AUTH_HEADER = "authorization"
_BEARER = "Bearer "
# What a server answers a call without the right token (UNAUTHENTICATED). It names the settings
# that give a process the token and nothing about the token itself.
REJECTED = ("missing or wrong cluster token (give this process the cluster's token: KERNFLOW_TOKEN_FILE, "
            "KERNFLOW_TOKEN, or --token-file)")


@dataclasses.dataclass(frozen=True)
class Security:
    """The transport security of one process (immutable; see the module docstring).

    Args:
        tls_cert: PEM certificate chain of this process, or None.
        tls_key: PEM private key of `tls_cert` (both or neither).
        tls_ca: PEM certificates trusted for peers, or None (clients then trust the system's roots;
            servers do not ask for client certificates).
        token: the cluster token, or None (no token sent, none checked).
        server_name: the name expected in servers' certificates instead of the dialled host.

    Raises:
        InvalidArgumentError: a certificate without its key (or the reverse), a value that is not
            PEM, a token that is empty or not printable ASCII, a server name without TLS.
    """

    tls_cert: bytes | None = None
    tls_key: bytes | None = None
    tls_ca: bytes | None = None
    token: str | None = None
    server_name: str | None = None

    def __post_init__(self):
        if (self.tls_cert is None) != (self.tls_key is None):
            given, missing = ("tls_cert", "tls_key") if self.tls_key is None else ("tls_key", "tls_cert")
            raise errors.InvalidArgumentError(None, None, f"TLS: {given} is given without {missing} "
                                              f"(a certificate and its private key go together)")
        _check_pem("tls_cert", self.tls_cert, b"CERTIFICATE")
        _check_pem("tls_key", self.tls_key, b"PRIVATE KEY")
        _check_pem("tls_ca", self.tls_ca, b"CERTIFICATE")
        if self.token is not None:
            _check_token(self.token)
        if self.server_name is not None and not self.tls:
            raise errors.InvalidArgumentError(None, None, f"TLS server name {self.server_name!r} given "
                                              f"without TLS (no tls_cert or tls_ca)")

    @property
    def tls(self) -> bool:
        """Whether this process's servers and channels use TLS (a certificate or a CA is set)."""
        return self.tls_cert is not None or self.tls_ca is not None

    @functools.cached_property
    def metadata(self) -> tuple:
        """The call metadata carrying the token: ``(("authorization", "Bearer ..."),)``, or ()."""
        return () if self.token is None else ((AUTH_HEADER, _BEARER + self.token),)

    @functools.cached_property
    def expected_header(self) -> bytes | None:
        """What a server compares the ``authorization`` header with (None: no token checked)."""
        return None if self.token is None else (_BEARER + self.token).encode("ascii")

    def server_credentials(self) -> grpc.ServerCredentials | None:
        """The credentials of a TLS server port, or None (insecure).

        Raises:
            FailedPreconditionError: TLS is configured (a CA) but there is no certificate to serve.
        """
        if not self.tls:
            return None
        if self.tls_cert is None:
            raise errors.FailedPreconditionError(None, None, "TLS is configured (tls_ca) but this process "
                                                 "has no certificate to serve with: give --tls-cert and "
                                                 "--tls-key (KERNFLOW_TLS_CERT, KERNFLOW_TLS_KEY)")
        return grpc.ssl_server_credentials([(self.tls_key, self.tls_cert)], root_certificates=self.tls_ca,
                                           require_client_auth=self.tls_ca is not None)

    @functools.cached_property
    def _channel_credentials(self):
        if not self.tls:
            return None
        return grpc.ssl_channel_credentials(root_certificates=self.tls_ca, private_key=self.tls_key,
                                            certificate_chain=self.tls_cert)

    def channel_credentials(self) -> grpc.ChannelCredentials | None:
        """The credentials of a TLS channel (created once), or None (insecure)."""
        return self._channel_credentials

    def channel_options(self) -> tuple:
        """Extra channel options: the server-name override, when one is set."""
        return () if self.server_name is None else (("grpc.ssl_target_name_override", self.server_name),)

    def describe(self) -> str:
        """A few words for a server's start-up line: "TLS, mutual TLS, cluster token"..."""
        parts = []
        if self.tls:
            parts.append("mutual TLS" if self.tls_ca is not None and self.tls_cert is not None else "TLS")
        if self.token is not None:
            parts.append("cluster token")
        return ", ".join(parts) or "no TLS, no token"

    def __repr__(self):   # never the key or the token
        return (f"Security(tls={self.tls}, client_cert={self.tls_cert is not None}, "
                f"ca={self.tls_ca is not None}, token={'set' if self.token is not None else None}, "
                f"server_name={self.server_name!r})")


def _check_pem(what: str, data: bytes | None, kind: bytes) -> None:
    if data is not None and (b"-----BEGIN " not in data or kind not in data):
        raise errors.InvalidArgumentError(None, None, f"TLS: {what} is not a PEM {kind.decode().lower()} "
                                          f"(expected a '-----BEGIN ...{kind.decode()}-----' block)")


def _check_token(token: str) -> None:
    if not isinstance(token, str):
        raise errors.InvalidArgumentError(None, None, f"the cluster token must be a str, got "
                                          f"{type(token).__name__}")
    if not token:
        raise errors.InvalidArgumentError(None, None, "the cluster token is empty")
    bad = [c for c in token if not "!" <= c <= "~"]
    if bad:
        raise errors.InvalidArgumentError(None, None, f"the cluster token must be printable ASCII without "
                                          f"spaces (it travels in a gRPC header); it holds {bad[0]!r}")


# ---------------------------------------------------------------------------- reading the files
def _read(path, what: str, private: bool = False) -> bytes:
    """The bytes of the file at `path`; with `private`, refused when group or others may read it
    (checked on the open file, so it is the file read)."""
    path = os.path.expanduser(os.fspath(path))
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise errors.InvalidArgumentError(None, None, f"{what}: {path} is not a regular file")
            if private and st.st_mode & 0o077:
                raise errors.PermissionDeniedError(
                    None, None, f"{what}: permissions {stat.S_IMODE(st.st_mode):04o} for {path} are too "
                    f"open (group or others may read the cluster token): chmod 600 {path}")
            return f.read()
    except FileNotFoundError:
        raise errors.NotFoundError(None, None, f"{what}: no such file: {path}") from None
    except PermissionError:
        raise errors.PermissionDeniedError(None, None, f"{what}: permission denied reading {path}") from None
    except OSError as e:
        raise errors.InvalidArgumentError(None, None, f"{what}: cannot read {path}: "
                                          f"{e.strerror or e}") from None


def read_pem(value, what: str) -> bytes | None:
    """`value` as PEM bytes: bytes are kept, a path (str or PathLike) is read; None stays None.

    Raises:
        NotFoundError, PermissionDeniedError, InvalidArgumentError: the file cannot be read (the
            message names `what` and the path).
    """
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if not isinstance(value, (str, os.PathLike)):
        raise errors.InvalidArgumentError(None, None, f"{what} must be a path or PEM bytes, got "
                                          f"{type(value).__name__}")
    data = _read(value, what)
    if not data.strip():
        raise errors.InvalidArgumentError(None, None, f"{what}: {os.fspath(value)} is empty")
    return data


def read_token_file(path, what: str = "token file") -> str:
    """The token held in the file at `path` (surrounding whitespace removed).

    Like ssh with a private key, a file that group or others may read is refused.

    Raises:
        PermissionDeniedError: the file is readable by group or others, or cannot be read.
        NotFoundError: there is no such file.
        InvalidArgumentError: it is empty, or not a regular file, or not ASCII.
    """
    try:
        token = _read(path, what, private=True).decode("ascii").strip()
    except UnicodeDecodeError:
        raise errors.InvalidArgumentError(None, None, f"{what}: {os.fspath(path)} does not hold an "
                                          f"ASCII token") from None
    if not token:
        raise errors.InvalidArgumentError(None, None, f"{what}: {os.fspath(path)} is empty")
    return token


def _check_pair(cert_path: str, key_path: str, cert_what: str, key_what: str) -> None:
    """Checks with the ssl module that the key is the certificate's and is not encrypted."""
    def no_password():
        raise errors.InvalidArgumentError(None, None, f"{key_what}: {key_path} is encrypted; kernflow needs "
                                          f"an unencrypted key (protect it with file permissions)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        ctx.load_cert_chain(os.path.expanduser(cert_path), os.path.expanduser(key_path), password=no_password)
    except ssl.SSLError as e:
        raise errors.InvalidArgumentError(None, None, f"{cert_what} {cert_path} and {key_what} {key_path} "
                                          f"are not a certificate and its key: {e.reason or e}") from None


def _check_ca(data: bytes, what: str) -> None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        ctx.load_verify_locations(cadata=data.decode("ascii", "replace"))
    except ssl.SSLError as e:
        raise errors.InvalidArgumentError(None, None, f"{what}: not a PEM CA certificate: "
                                          f"{e.reason or e}") from None


# ---------------------------------------------------------------------------- this process's settings
def load(tls_cert=None, tls_key=None, tls_ca=None, token=None, token_file=None, server_name=None,
         environ=None, names=None) -> Security:
    """Builds a `Security` from the arguments, each missing one taken from the environment.

    Args:
        tls_cert, tls_key, tls_ca: PEM bytes, or paths of PEM files.
        token: the cluster token; token_file: a file holding it (not both).
        server_name: the name servers' certificates are checked for.
        environ: the environment to fall back on (default `os.environ`).
        names: how errors name each argument (e.g. ``{"tls_cert": "--tls-cert"}``).

    Raises:
        InvalidArgumentError, NotFoundError, PermissionDeniedError: a file cannot be read or is
            refused, or the settings contradict each other (one-line messages naming the setting).
    """
    env = os.environ if environ is None else environ
    names = dict(names or {})

    def pick(value, arg, var):
        if value is not None:
            return value, names.get(arg, arg)
        value = env.get(var) or None
        return value, var

    cert, cert_what = pick(tls_cert, "tls_cert", TLS_CERT_ENV)
    key, key_what = pick(tls_key, "tls_key", TLS_KEY_ENV)
    ca, ca_what = pick(tls_ca, "tls_ca", TLS_CA_ENV)
    name, _ = pick(server_name, "server_name", TLS_SERVER_NAME_ENV)
    token = _token(token, token_file, env, names.get("token_file", "token_file"))
    cert_pem, key_pem, ca_pem = read_pem(cert, cert_what), read_pem(key, key_what), read_pem(ca, ca_what)
    sec = Security(tls_cert=cert_pem, tls_key=key_pem, tls_ca=ca_pem, token=token, server_name=name)
    if isinstance(cert, (str, os.PathLike)) and isinstance(key, (str, os.PathLike)):
        _check_pair(os.fspath(cert), os.fspath(key), cert_what, key_what)
    if ca_pem is not None:
        _check_ca(ca_pem, ca_what)
    return sec


def _token(token, token_file, env, file_what: str) -> str | None:
    """The token given, or read from `token_file`, or from the environment (either variable)."""
    if token is not None and token_file is not None:
        raise errors.InvalidArgumentError(None, None, "give the cluster token or a token file, not both")
    if token is None and token_file is None:
        token, token_file = env.get(TOKEN_ENV) or None, env.get(TOKEN_FILE_ENV) or None
        if token is not None and token_file is not None:
            raise errors.InvalidArgumentError(None, None, f"both {TOKEN_ENV} and {TOKEN_FILE_ENV} are set: "
                                              f"unset one")
        file_what = TOKEN_FILE_ENV
    return read_token_file(token_file, file_what) if token_file is not None else token


_lock = threading.Lock()
_current: Security | None = None


def configure(tls_cert=None, tls_key=None, tls_ca=None, token=None, token_file=None,
              server_name=None, names=None) -> Security:
    """Sets this process's transport security (arguments as `load`; missing ones from the environment).

    Cached channels are closed (the next call opens one with the new settings) and same-host
    channels forgotten; servers already serving keep the settings they were built with.

    Returns:
        The new `Security`.

    Raises:
        As `load`; the previous settings are kept then.
    """
    global _current
    sec = load(tls_cert, tls_key, tls_ca, token, token_file, server_name, names=names)
    with _lock:
        changed, _current = _current != sec, sec
    if changed:
        from kernflow.client import channels, local_channel
        channels.close_all()
        local_channel.forget()
    return sec


def current() -> Security:
    """This process's `Security`: the configured one, else the environment's (read once)."""
    global _current
    sec = _current
    if sec is None:
        with _lock:
            if _current is None:
                _current = load()
            sec = _current
    return sec


def auth_metadata() -> tuple:
    """The call metadata carrying this process's token (``()`` without one); cheap, per call."""
    sec = _current
    return (sec if sec is not None else current()).metadata


def server_credentials() -> grpc.ServerCredentials | None:
    """`Security.server_credentials` of this process's settings."""
    return current().server_credentials()


def channel_credentials() -> grpc.ChannelCredentials | None:
    """`Security.channel_credentials` of this process's settings."""
    return current().channel_credentials()


def channel_options() -> tuple:
    """`Security.channel_options` of this process's settings."""
    return current().channel_options()


def token_matches(metadata, expected: bytes) -> bool:
    """Whether the first ``authorization`` entry of `metadata` is `expected` (constant-time compare)."""
    for key, value in metadata or ():
        if key == AUTH_HEADER:
            return value.__class__ is str and hmac.compare_digest(value.encode("utf-8", "replace"), expected)
    return False


def require_tls(target: str) -> None:
    """Refuses a ``grpcs://`` `target` when this process has no TLS configured.

    Raises:
        FailedPreconditionError: naming the target and the settings that turn TLS on.
    """
    if not current().tls:
        raise errors.FailedPreconditionError(
            None, None, f"session target {target!r} asks for TLS, but this process has none configured: "
            f"set {TLS_CA_ENV} (and {TLS_CERT_ENV}/{TLS_KEY_ENV} for mutual TLS), or call "
            f"kernflow.client.security.configure(tls_ca=...)")


# ---------------------------------------------------------------------------- command-line options
_FLAG_NAMES = {"tls_cert": "--tls-cert", "tls_key": "--tls-key", "tls_ca": "--tls-ca",
               "token_file": "--token-file"}


def add_arguments(parser) -> None:
    """Adds ``--tls-cert``, ``--tls-key``, ``--tls-ca`` and ``--token-file`` to an argparse parser."""
    group = parser.add_argument_group("transport security (default: the KERNFLOW_TLS_* and "
                                      "KERNFLOW_TOKEN[_FILE] environment variables)")
    group.add_argument("--tls-cert", default=None, metavar="PEM",
                       help="serve with TLS: this task's certificate chain (PEM); also its client "
                            "certificate towards the other tasks")
    group.add_argument("--tls-key", default=None, metavar="PEM", help="the private key of --tls-cert (PEM)")
    group.add_argument("--tls-ca", default=None, metavar="PEM",
                       help="CA certificate(s) the other tasks' certificates are checked against; "
                            "clients must then present a certificate it signed (mutual TLS)")
    group.add_argument("--token-file", default=None, metavar="FILE",
                       help="file holding the cluster token (mode 600): every call must carry it, and "
                            "this task sends it to the others")


def configure_from_args(args) -> Security:
    """`configure` from the options `add_arguments` added (missing ones from the environment).

    Raises:
        As `load`, naming the option (e.g. "--tls-cert: no such file: /x.pem").
    """
    return configure(tls_cert=getattr(args, "tls_cert", None), tls_key=getattr(args, "tls_key", None),
                     tls_ca=getattr(args, "tls_ca", None), token_file=getattr(args, "token_file", None),
                     names=_FLAG_NAMES)
