"""The supervisor that ``kernflow cluster up --restart on-failure|always`` leaves running.

It watches the processes the cluster's state file records (etcd, the master, every task) and starts
again, with the arguments it was first started with, any that dies: a task comes back on a new port,
registers in etcd under the same job and index, and the master finds it there on its next use (as
the paper's "the system restarts a failed task"; sessions then recover: a step that touched the old
task fails with Unavailable/Aborted and a monitored session recreates its session). etcd comes back
on its own ports and data directory, so the keys it had survive (and, for a secure cluster, its
users: it comes back with TLS and authentication as before). A restarted service gets the
environment it was first started with (the etcd user and TLS paths of a secure cluster).

Policies: ``on-failure`` restarts a process that exited with a non-zero status or a signal (a task
the supervisor did not start itself, it cannot ask for a status: gone counts as failed, since the
clean way down, ``kernflow cluster down``, stops the supervisor first); ``always`` restarts any.
A process that keeps dying is restarted with a back-off (0.5 s doubling to 30 s while it lives less
than `STABLE_S`). Each restart is logged in ``logs/supervisor.log`` and counted in the state file
(``restarts``), which ``kernflow cluster status`` shows.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time

__all__ = ["supervise", "POLICIES", "STABLE_S"]

POLICIES = ("no", "on-failure", "always")
POLL_S = 0.2
STABLE_S = 10.0          # a process alive this long resets its back-off
BACKOFF_S = (0.5, 30.0)  # first and longest wait before restarting a process that keeps dying

_log = logging.getLogger("kernflow.cluster.supervisor")


class _Watched:
    """One supervised process: its state-file record, its Popen when we started it, its back-off."""

    def __init__(self, rec: dict, proc: subprocess.Popen | None = None):
        self.rec = rec
        self.proc = proc
        self.started = time.monotonic()
        self.backoff = BACKOFF_S[0]
        self.next_try = 0.0

    def exit_status(self):
        """The exit status when we started it and it has exited (reaping it), else None."""
        return self.proc.poll() if self.proc is not None else None


def _restart_service(rec: dict) -> subprocess.Popen:
    from kernflow.client.cluster_cli import _spawn
    return _spawn(rec["argv"], rec["log"], rec.get("env"))


def _restart_etcd(rec: dict):
    """etcd again on its ports and data directory: the keys, users and roles are all there, so a
    secure etcd needs only its TLS files (authentication stays enabled)."""
    from kernflow.client.etcd_server import EtcdTLS, start_etcd
    tls = EtcdTLS(**rec["tls"]) if rec.get("tls") else None
    server = start_etcd(host=rec.get("host") or "127.0.0.1", advertise=rec.get("advertise"),
                        client_port=rec["client_port"], peer_port=rec["peer_port"],
                        data_dir=rec["data_dir"], log_path=rec.get("log"), new_session=True, tls=tls)
    return server.proc


def _due(w: _Watched, policy: str, now: float) -> bool:
    """True when `w` is gone and the policy and its back-off say to start it now."""
    from kernflow.client.etcd_server import pid_alive
    if pid_alive(int(w.rec["pid"]), w.rec.get("start_time")):
        return False
    status = w.exit_status()
    if policy == "on-failure" and status == 0:
        return False
    return now >= w.next_try


def _restart(w: _Watched, now: float) -> None:
    from kernflow.client.etcd_server import process_start_time
    old = w.rec["pid"]
    w.backoff = BACKOFF_S[0] if now - w.started >= STABLE_S else min(w.backoff * 2, BACKOFF_S[1])
    proc = _restart_etcd(w.rec) if w.rec.get("name") == "etcd" else _restart_service(w.rec)
    w.proc, w.started = proc, time.monotonic()
    w.next_try = w.started + w.backoff
    w.rec["pid"], w.rec["start_time"] = proc.pid, process_start_time(proc.pid)
    w.rec["restarts"] = int(w.rec.get("restarts", 0)) + 1
    _log.info("%s (pid %s) is gone: restarted as pid %s (restart %d)", w.rec["name"], old, proc.pid,
              w.rec["restarts"])


def supervise(state_dir: str, policy: str, stop: threading.Event | None = None) -> int:
    """Watches the cluster recorded in `state_dir` until SIGTERM/SIGINT (or `stop`); returns 0."""
    from kernflow.client import cluster_cli
    if policy not in POLICIES or policy == "no":
        raise ValueError(f"restart policy must be one of {POLICIES[1:]}, got {policy!r}")
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    path = cluster_cli._state_path(state_dir)
    state = cluster_cli.read_state(state_dir)
    if state is None:
        _log.error("no cluster state at %s: nothing to supervise", path)
        return 1
    recs = list(cluster_cli._services(state))
    if state.get("etcd", {}).get("pid"):
        recs.append(state["etcd"])
    watched = [_Watched(r) for r in recs]
    _log.info("supervising %d process(es) of cluster %s (restart %s)", len(watched),
              state.get("cluster"), policy)
    while not stop.is_set():
        now = time.monotonic()
        changed = False
        for w in watched:
            if stop.is_set():
                break
            if _due(w, policy, now):
                try:
                    _restart(w, now)
                except Exception as e:  # noqa: BLE001 - try again after the back-off
                    w.next_try = time.monotonic() + w.backoff
                    _log.warning("could not restart %s: %s", w.rec["name"], e)
                changed = True
        if changed:
            cluster_cli._write_state(path, state)
        stop.wait(POLL_S)
    for w in watched:   # children we started are the session's business now: no zombies on exit
        if w.proc is not None:
            w.proc.poll()
    _log.info("supervisor stopping (cluster %s)", state.get("cluster"))
    return 0


def main(state_dir: str, policy: str) -> int:
    """Entry point of the supervisor process: logs to ``logs/supervisor.log`` in `state_dir`."""
    logs = os.path.join(os.path.abspath(state_dir), "logs")
    os.makedirs(logs, exist_ok=True)
    logging.basicConfig(filename=os.path.join(logs, "supervisor.log"), level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s")
    return supervise(state_dir, policy)
