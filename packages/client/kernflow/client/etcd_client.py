"""The asyncio side of kernflow's etcd discovery: one event-loop thread, connections with timeouts.

aetcd (the etcd client) is asynchronous. `EtcdLoop` runs one asyncio loop on a daemon thread per
process, shared by every registration and watch; `EtcdConnection` wraps a lazily created aetcd
client whose every operation has a timeout and fails with a one-line error naming etcd's address
(`UnavailableError` when etcd cannot be reached or does not answer).
`kernflow.client.discovery` builds the public API on these.

**Authentication and TLS.** An endpoint written ``https://HOST:PORT`` (an ``etcds://`` target)
is dialled with TLS; a bare ``HOST:PORT`` (an ``etcd://`` target) without. `EtcdCredentials`
says who the client is, by default from the environment (`EtcdCredentials.from_env`):

* ``KERNFLOW_ETCD_USER`` and ``KERNFLOW_ETCD_PASSWORD_FILE``: an etcd user and a file holding its
  password (mode 0600 or stricter, else `PermissionDeniedError`, as for the token file). The
  client authenticates when it connects and again when etcd has expired its token.
* ``KERNFLOW_TLS_CA``: the CA that signed etcd's certificate (default: the system's roots);
  ``KERNFLOW_TLS_CERT`` and ``KERNFLOW_TLS_KEY``: the certificate presented to an etcd started with
  ``--client-cert-auth``. These are the files kernflow's gRPC side uses (`kernflow.client.security`),
  and ``KERNFLOW_TLS_SERVER_NAME``, when set, is the name checked in etcd's certificate too.

Wrong credentials fail at once, never by waiting: a wrong password, a request without a user and
a TLS handshake that fails (untrusted server, missing or refused client certificate) raise
`UnauthenticatedError` naming the variables to set, a user without the right to a key
`PermissionDeniedError`.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import dataclasses
import logging
import os
import re
import stat
import threading
import weakref

from kernflow.core.framework import errors

__all__ = ["EtcdLoop", "EtcdConnection", "EtcdCredentials", "cancel_task", "blocking", "once", "live",
           "CHANNEL_OPTIONS", "split_endpoint", "is_tls_endpoint", "read_secret_file", "ENV_USER",
           "ENV_PASSWORD_FILE", "ENV_TLS_CA", "ENV_TLS_CERT", "ENV_TLS_KEY", "ENV_TLS_SERVER_NAME"]

ENV_USER = "KERNFLOW_ETCD_USER"
ENV_PASSWORD_FILE = "KERNFLOW_ETCD_PASSWORD_FILE"
ENV_TLS_CA = "KERNFLOW_TLS_CA"
ENV_TLS_CERT = "KERNFLOW_TLS_CERT"
ENV_TLS_KEY = "KERNFLOW_TLS_KEY"
ENV_TLS_SERVER_NAME = "KERNFLOW_TLS_SERVER_NAME"
TLS_PREFIX = "https://"

_log = logging.getLogger("kernflow.client.discovery")

# The etcd client's gRPC channel reconnects quickly after etcd restarts (the default backoff grows
# to two minutes) and notices a dead connection in a watch. Each client has its own subchannels:
# a new client after a failure connects afresh instead of inheriting a shared subchannel's backoff
# (which fails calls with the old "connection refused" for a while after etcd is back).
CHANNEL_OPTIONS = {
    "grpc.use_local_subchannel_pool": 1,
    "grpc.initial_reconnect_backoff_ms": 200,
    "grpc.min_reconnect_backoff_ms": 200,
    "grpc.max_reconnect_backoff_ms": 1000,
    "grpc.keepalive_time_ms": 10_000,
    "grpc.keepalive_timeout_ms": 5_000,
    "grpc.keepalive_permit_without_calls": 1,
    "grpc.enable_retries": 0,
}


def is_tls_endpoint(endpoint: str) -> bool:
    """True for an endpoint dialled with TLS (``https://HOST:PORT``)."""
    return endpoint.startswith(TLS_PREFIX)


def split_endpoint(endpoint: str) -> tuple[str, int, bool]:
    """``"[https://]host:port"`` -> (host, port, tls)."""
    tls = is_tls_endpoint(endpoint)
    host, _, port = endpoint[len(TLS_PREFIX) if tls else 0:].rpartition(":")
    return host.strip("[]"), int(port), tls


def read_secret_file(path: str, what: str) -> str:
    """The stripped contents of a secret file that only its owner may read.

    Args:
        path: the file.
        what: what names it in errors (the environment variable or option).

    Raises:
        NotFoundError: the file cannot be read.
        PermissionDeniedError: group or others may read or write it (``chmod 600`` fixes that).
        InvalidArgumentError: it is empty.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        raise errors.NotFoundError(None, None, f"{what}={path!r} cannot be read: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        mode = stat.S_IMODE(os.fstat(f.fileno()).st_mode)
        if mode & 0o077:
            raise errors.PermissionDeniedError(
                None, None, f"{what}={path!r} has mode {mode:04o}: group or others may read the password; "
                f"chmod 600 {path}")
        text = f.read().decode("utf-8", "replace").strip()
    if not text:
        raise errors.InvalidArgumentError(None, None, f"{what}={path!r} is empty (expected a password)")
    return text


def _read_pem(path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise errors.NotFoundError(None, None, f"{what}={path!r} cannot be read: {e.strerror}") from None


@dataclasses.dataclass(frozen=True)
class EtcdCredentials:
    """Who an etcd client is: an etcd user and password, and the TLS files.

    Attributes:
        user: the etcd user name, or None for no authentication.
        password: its password.
        ca_file: the PEM CA bundle that signed etcd's certificate (None: the system's roots).
        cert_file, key_file: the client certificate and key (for ``--client-cert-auth``), or None.
        server_name: the name expected in etcd's certificate instead of the dialled host, or None.
    """
    user: str | None = None
    password: str | None = dataclasses.field(default=None, repr=False)
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str | None = None

    def __post_init__(self):
        if (self.user is None) != (self.password is None):
            raise errors.InvalidArgumentError(None, None, "etcd credentials need both a user and a "
                                              f"password (got user {self.user!r} and "
                                              f"{'a' if self.password else 'no'} password)")
        if (self.cert_file is None) != (self.key_file is None):
            raise errors.InvalidArgumentError(None, None, "a TLS client certificate needs both "
                                              f"{ENV_TLS_CERT} and {ENV_TLS_KEY} (got cert "
                                              f"{self.cert_file!r}, key {self.key_file!r})")

    @classmethod
    def from_env(cls, environ=None) -> EtcdCredentials:
        """The credentials the environment names (see the module docstring); none when unset.

        Raises:
            InvalidArgumentError: only one of a pair (user and password file, cert and key) is set.
            NotFoundError, PermissionDeniedError: the password file is unreadable or not private.
        """
        env = os.environ if environ is None else environ
        user, pw_file = env.get(ENV_USER) or None, env.get(ENV_PASSWORD_FILE) or None
        if (user is None) != (pw_file is None):
            raise errors.InvalidArgumentError(None, None, f"{ENV_USER} and {ENV_PASSWORD_FILE} go together "
                                              f"(got {ENV_USER}={user!r}, {ENV_PASSWORD_FILE}={pw_file!r})")
        password = read_secret_file(pw_file, ENV_PASSWORD_FILE) if pw_file else None
        return cls(user, password, env.get(ENV_TLS_CA) or None, env.get(ENV_TLS_CERT) or None,
                   env.get(ENV_TLS_KEY) or None, env.get(ENV_TLS_SERVER_NAME) or None)

    @classmethod
    def from_files(cls, user: str | None = None, password_file: str | None = None, ca_file=None,
                   cert_file=None, key_file=None) -> EtcdCredentials:
        """Like `from_env`, from explicit paths."""
        password = read_secret_file(password_file, "password file") if password_file else None
        return cls(user, password, ca_file, cert_file, key_file)

    def channel_credentials(self):
        """The `grpc.ChannelCredentials` of a TLS connection (CA, and the client certificate)."""
        import grpc  # noqa: PLC0415
        ca = _read_pem(self.ca_file, ENV_TLS_CA) if self.ca_file else None
        if self.cert_file is None:
            return grpc.ssl_channel_credentials(ca)
        return grpc.ssl_channel_credentials(ca, _read_pem(self.key_file, ENV_TLS_KEY),
                                            _read_pem(self.cert_file, ENV_TLS_CERT))

    def ssl_context(self):
        """An `ssl.SSLContext` for etcd's HTTPS endpoints (``/health``) with the same files."""
        import ssl  # noqa: PLC0415
        ctx = ssl.create_default_context(cafile=self.ca_file)
        if self.cert_file is not None:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx


def _client_class():
    """An aetcd `Client` that can dial with TLS (aetcd 1.0 itself only makes insecure channels)."""
    import aetcd  # noqa: PLC0415 - only processes that use etcd import it
    import grpc  # noqa: PLC0415
    from aetcd import rpc  # noqa: PLC0415

    class Client(aetcd.Client):
        def __init__(self, *, channel_credentials=None, **kw):
            super().__init__(**kw)
            self._channel_credentials = channel_credentials

        async def connect(self) -> None:
            # aetcd's connect with the channel made here; an etcd without authentication enabled
            # answers Authenticate with FAILED_PRECONDITION, and is then used without a token.
            if self._connected.is_set():
                return
            if self._is_connecting:
                await asyncio.wait_for(self._connected.wait(), self._connect_wait_timeout)
                return
            try:
                self._is_connecting = True
                target, options = f"{self._host}:{self._port}", list(self._options.items())
                if self._channel_credentials is None:
                    self.channel = grpc.aio.insecure_channel(target, options=options)
                else:
                    self.channel = grpc.aio.secure_channel(target, self._channel_credentials,
                                                           options=options)
                if self._username is not None:
                    request = rpc.AuthenticateRequest(name=self._username, password=self._password)
                    try:
                        reply = await rpc.AuthStub(self.channel).Authenticate(request, timeout=self._timeout)
                        self.metadata = (("token", reply.token),)
                    except grpc.aio.AioRpcError as e:
                        if e.code() != grpc.StatusCode.FAILED_PRECONDITION:
                            raise
                        _log.debug("etcd at %s: %s; going on without a token", target, e.details())
                self.kvstub = rpc.KVStub(self.channel)
                self.clusterstub = rpc.ClusterStub(self.channel)
                self.leasestub = rpc.LeaseStub(self.channel)
                self.maintenancestub = rpc.MaintenanceStub(self.channel)
                self._watcher = aetcd.watcher.Watcher(rpc.WatchStub(self.channel), timeout=self._timeout,
                                                      metadata=self.metadata)
                self._connected.set()
            finally:
                self._is_connecting = False

    return Client


class EtcdLoop:
    """One asyncio loop on a daemon thread per process, shared by every etcd client here."""

    _lock = threading.Lock()
    _instance: EtcdLoop | None = None

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="kernflow-etcd", daemon=True)
        self.thread.start()

    def _run(self):
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @classmethod
    def get(cls) -> EtcdLoop:
        with cls._lock:
            if cls._instance is None:
                cls._instance = EtcdLoop()
            return cls._instance

    def submit(self, coro) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def start_task(self, coro) -> asyncio.Task:
        """Starts `coro` as a task on the loop and returns the task (to cancel and await there)."""
        async def spawn():
            return asyncio.get_running_loop().create_task(coro)
        return self.call(spawn(), 5.0)

    def call(self, coro, timeout_s: float):
        """Runs `coro` on the loop and waits at most `timeout_s` (+1 s) for its result."""
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("a blocking etcd call was made on the etcd event-loop thread")
        fut = self.submit(coro)
        try:
            return fut.result(timeout_s + 1.0)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError(f"no answer within {timeout_s:g} s") from None


# Registrations and watches that are running: stopped at interpreter exit (see below).
live: weakref.WeakSet = weakref.WeakSet()


@atexit.register
def _stop_everything() -> None:
    """At exit: revoke live registrations and stop watches, so keys do not linger for a TTL."""
    for obj in list(live):
        try:
            obj.stop()
        except Exception as e:  # noqa: BLE001 - best effort at exit
            _log.debug("stopping %r at exit failed: %s", obj, e)


# etcd's answers (rpctypes) that say who the client is, not whether etcd is up.
_BAD_LOGIN = "invalid user ID or password"
_NO_USER = "user name is empty"
_DENIED = "permission denied"
_EXPIRED_TOKEN = "invalid auth token"


class EtcdConnection:
    """A lazily created aetcd client; every operation has a timeout and a clear error.

    Used only on the loop thread. After a failure the client is dropped and made anew on next use.

    Args:
        endpoint: ``host:port``, or ``https://host:port`` for TLS.
        timeout_s: the timeout of each operation.
        credentials: an `EtcdCredentials`; None reads them from the environment now.
    """

    def __init__(self, endpoint: str, timeout_s: float, credentials: EtcdCredentials | None = None):
        self.endpoint = endpoint
        self.timeout_s = float(timeout_s)
        self.credentials = EtcdCredentials.from_env() if credentials is None else credentials
        self._client = None

    def _make(self):
        host, port, tls = split_endpoint(self.endpoint)
        creds = self.credentials
        options = dict(CHANNEL_OPTIONS)
        if tls and creds.server_name:
            options["grpc.ssl_target_name_override"] = creds.server_name
        return _client_class()(host=host, port=port, username=creds.user, password=creds.password,
                               timeout=self.timeout_s, options=options,
                               channel_credentials=creds.channel_credentials() if tls else None)

    async def op(self, what: str, fn, timeout_s: float | None = None):
        """Awaits ``fn(client)`` with a timeout.

        An expired authentication token is renewed once, transparently.

        Raises:
            UnauthenticatedError: etcd refused the user and password, or wants a user and got none.
            PermissionDeniedError: the user may not do `what`.
            UnavailableError: naming etcd's address and `what`, for any other failure or timeout.
        """
        t = self.timeout_s if timeout_s is None else timeout_s
        for attempt in (0, 1):
            if self._client is None:
                self._client = self._make()
            try:
                return await asyncio.wait_for(fn(self._client), t)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - every failure means etcd is not usable now
                await self.reset()
                if attempt == 0 and _EXPIRED_TOKEN in str(e) and self.credentials.user is not None:
                    continue
                raise self._error(what, e, t) from None

    def _error(self, what: str, e: Exception, t: float) -> errors.OpError:
        """The kernflow error for aetcd's or grpc's exception `e` (one line, naming etcd)."""
        text = getattr(e, "details", None)
        text = text() if callable(text) else str(e)
        user = self.credentials.user
        where = f"etcd at {self.endpoint}"
        if _BAD_LOGIN in text:
            return errors.UnauthenticatedError(None, None, f"{where} refused user {user!r}: wrong user name "
                                               f"or password ({what}; see {ENV_USER}, {ENV_PASSWORD_FILE})")
        if _NO_USER in text or _EXPIRED_TOKEN in text or (_DENIED in text and user is None):
            return errors.UnauthenticatedError(None, None, f"{where} requires authentication: {what} was "
                                               f"refused ({text}); set {ENV_USER} and {ENV_PASSWORD_FILE}")
        if _DENIED in text:
            return errors.PermissionDeniedError(None, None, f"{where}: user {user!r} may not do {what} "
                                                f"({text})")
        if "handshake failed" in text.lower():
            return errors.UnauthenticatedError(None, None, f"{where}: the TLS handshake failed "
                                               f"({_tls_reason(text)}) at {what}: {self._tls_hint(text)}")
        if isinstance(e, (asyncio.TimeoutError, TimeoutError)):
            msg = f"no answer within {t:g} s"
        else:
            msg = f"{type(e).__name__}: {text}" if text else type(e).__name__
        hint, low = "", text.lower()
        if not is_tls_endpoint(self.endpoint) and "socket closed" in low:
            hint = " (if etcd serves TLS, dial https://HOST:PORT or use an etcds:// target)"
        elif is_tls_endpoint(self.endpoint) and "handshake read failed" in low:
            hint = " (if etcd does not serve TLS, dial HOST:PORT or use an etcd:// target)"
        return errors.UnavailableError(None, None, f"{where} is unavailable: {what} failed: {msg}{hint}")

    def _tls_hint(self, text: str) -> str:
        if "CERTIFICATE_VERIFY_FAILED" in text:
            ca = self.credentials.ca_file
            return (f"etcd's certificate is not signed by {ENV_TLS_CA}={ca!r}" if ca else
                    f"etcd's certificate is not signed by a system CA (set {ENV_TLS_CA})")
        if "BAD_CERTIFICATE" in text or "CERTIFICATE_REQUIRED" in text or "HANDSHAKE_FAILURE" in text:
            cert = self.credentials.cert_file
            return (f"etcd refused the client certificate {ENV_TLS_CERT}={cert!r}" if cert else
                    f"etcd requires a client certificate (set {ENV_TLS_CERT} and {ENV_TLS_KEY})")
        if "WRONG_VERSION_NUMBER" in text:
            return "etcd does not serve TLS at this address (dial HOST:PORT or use an etcd:// target)"
        return f"check {ENV_TLS_CA}, {ENV_TLS_CERT} and {ENV_TLS_KEY}"

    async def reset(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                await asyncio.wait_for(client.close(), 2.0)
            except Exception as e:  # noqa: BLE001 - a broken client is dropped either way
                _log.debug("closing the etcd client of %s: %s", self.endpoint, e)


def _tls_reason(text: str) -> str:
    """``CERTIFICATE_VERIFY_FAILED: ...`` out of grpc's long handshake message."""
    text = re.sub(r":\s*OK$", "", text.strip())
    m = re.search(r"OPENSSL_internal:([A-Z0-9_]+)(?::\s*([^:]+))?$", text)
    return (m.group(1) + (f": {m.group(2).strip()}" if m.group(2) else "")) if m else text


async def cancel_task(task: asyncio.Task | None) -> None:
    """Cancels a task of the loop and waits (briefly) until it has finished."""
    if task is None or task.done():
        return
    task.cancel()
    await asyncio.wait({task}, timeout=2.0)


def blocking(endpoint: str, what: str, coro, timeout_s: float):
    """Runs `coro` on the loop from another thread; no answer in time is an `UnavailableError`."""
    try:
        return EtcdLoop.get().call(coro, timeout_s)
    except TimeoutError as e:
        raise errors.UnavailableError(None, None, f"etcd at {endpoint} is unavailable: {what} failed: "
                                      f"{e}") from None


async def once(endpoint: str, what: str, fn, timeout_s: float,
               credentials: EtcdCredentials | None = None):
    """``fn(client)`` on a connection of its own, closed afterwards (a one-shot read)."""
    conn = EtcdConnection(endpoint, timeout_s, credentials)
    try:
        return await conn.op(what, fn)
    finally:
        await conn.reset()
