"""Service discovery through etcd: registrations under a lease, a watched table of workers, resolvers.

Keys of a cluster NAME (values are JSON objects)::

    /kernflow/NAME/master            {"address": "host:port", "target": "grpc://host:port", "pid": ...}
    /kernflow/NAME/workers/JOB/TASK  {"address": "host:port", "task": "/job:JOB/replica:0/task:TASK",
                                      "devices": [device names], "pid": ...}

* A `Registration` puts its key under a lease of `ttl_s` seconds and refreshes the lease every
  ``ttl_s / 3``. If the lease is lost (etcd restarted without its data, or stayed unreachable for a
  whole TTL) it registers again with a new lease, retrying with backoff while etcd is down. `stop`
  revokes the lease, which deletes the key at once; a process that dies without stopping leaves
  the key to expire one TTL after its last refresh.
* A `WorkerTable` lists ``/kernflow/NAME/workers/`` and watches it from the listed revision + 1 (no
  gap between the two). When the watch fails (etcd went away), it lists and watches again, with
  backoff; meanwhile it keeps serving the last table, so running steps are not disturbed by an
  etcd outage. (After an etcd restart that lost its data, a task is unknown until it has
  registered again, within about ``ttl_s / 3`` plus a second.)
* `EtcdResolver` turns a task name into a `GrpcWorkerClient` on every use, creating a new client
  when the task's address changed (a restarted task on a new port is found again).
* `lookup_master` reads ``/kernflow/NAME/master``: ``kf.Session("etcd://HOST:PORT/NAME")`` uses it.

A cluster's name defaults to `DEFAULT_CLUSTER` (``local``, the name ``kernflow cluster up`` uses)
everywhere. ``etcd://HOST:PORT`` without a name still finds a master registered under the earlier
default, `LEGACY_DEFAULT_CLUSTER` (``default``), when none is registered under ``local``.

An etcd that serves TLS is named ``https://HOST:PORT`` (endpoints) or ``etcds://HOST:PORT/NAME``
(targets); the user, password and TLS files come from the environment (``KERNFLOW_ETCD_USER``,
``KERNFLOW_ETCD_PASSWORD_FILE``, ``KERNFLOW_TLS_CA/CERT/KEY``: see `kernflow.client.etcd_client`)
or an explicit `EtcdCredentials`. etcd refusing them is an `UnauthenticatedError` (or
`PermissionDeniedError`) at once: a registration or a watch does not retry with credentials that
cannot change.

The etcd client (aetcd) is asynchronous: every object here runs its coroutines on one background
event-loop thread per process (`kernflow.client.etcd_client`). Every etcd operation has a timeout
(`DEFAULT_TIMEOUT_S` unless given), and failures surface as `UnavailableError` naming etcd's
address; nothing waits forever on an etcd that is down.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time

from kernflow.core.framework import device_spec
from kernflow.core.framework import errors
from kernflow.client.etcd_client import (EtcdConnection, EtcdCredentials, EtcdLoop, blocking, cancel_task,
                                         is_tls_endpoint, live, once)

__all__ = ["DEFAULT_TTL_S", "DEFAULT_TIMEOUT_S", "DEFAULT_CLUSTER", "LEGACY_DEFAULT_CLUSTER",
           "parse_endpoint", "parse_etcd_target", "format_etcd_target", "EtcdCredentials",
           "master_key", "workers_prefix", "worker_key", "task_from_key", "canonical_task",
           "Registration", "WorkerTable", "EtcdResolver", "lookup_master", "resolve_master_target",
           "list_cluster", "advertised_address", "worker_registration", "master_registration"]

_log = logging.getLogger(__name__)

DEFAULT_TTL_S = 10
DEFAULT_TIMEOUT_S = 5.0
DEFAULT_CLUSTER = "local"
# The default cluster name before it became `DEFAULT_CLUSTER`; a target without a name falls back to it.
LEGACY_DEFAULT_CLUSTER = "default"
DEFAULT_PORT = 2379
KEY_ROOT = "/kernflow"
ETCD_SCHEME = "etcd://"
ETCDS_SCHEME = "etcds://"     # etcd over TLS
_MAX_BACKOFF_S = 1.0
# etcd refused who we are: credentials do not change by retrying, so these end a registration or watch.
_REFUSED = (errors.UnauthenticatedError, errors.PermissionDeniedError)


# ---------------------------------------------------------------------------- names and keys
def parse_endpoint(text: str) -> str:
    """Normalizes an etcd endpoint ("host:port", "host", "http://host:port") to "host:port".

    An endpoint with TLS (``https://host:port``, or ``etcds://host:port``) becomes
    ``https://host:port``.

    Raises:
        InvalidArgumentError: for an empty host or a port that is not a number.
    """
    s = str(text).strip()
    tls = ""
    for scheme in ("http://", "https://", ETCDS_SCHEME):
        if s.startswith(scheme):
            s = s[len(scheme):]
            tls = "https://" if scheme != "http://" else ""
    s = s.rstrip("/")
    if s.startswith("[") and "]" in s:
        host, _, rest = s[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
        host = f"[{host}]"
    elif s.count(":") == 1:
        host, port = s.split(":")
    else:
        host, port = s, ""
    if not host or (port and not port.isdigit()):
        raise errors.InvalidArgumentError(None, None, f"bad etcd address {text!r} (expected HOST:PORT, "
                                          "e.g. 127.0.0.1:2379)")
    return f"{tls}{host}:{int(port) if port else DEFAULT_PORT}"


def _check_name(what: str, name: str) -> str:
    name = str(name)
    if not name or "/" in name or any(c.isspace() for c in name):
        raise errors.InvalidArgumentError(None, None, f"bad {what} name {name!r}: it must be non-empty "
                                          "without '/' or spaces")
    return name


def _target_rest(target: str) -> str | None:
    for scheme in (ETCD_SCHEME, ETCDS_SCHEME):
        if target.startswith(scheme):
            return target[len(scheme):]
    return None


def parse_etcd_target(target: str) -> tuple[str, str]:
    """Splits ``etcd://HOST:PORT/CLUSTER`` into ("HOST:PORT", "CLUSTER").

    ``etcds://HOST:PORT/CLUSTER`` (etcd with TLS) gives ("https://HOST:PORT", "CLUSTER"). The
    cluster defaults to `DEFAULT_CLUSTER` when the target has no path.

    Raises:
        InvalidArgumentError: if the target is not of that form.
    """
    rest = _target_rest(target)
    if rest is None:
        raise errors.InvalidArgumentError(None, None, f"not an etcd target: {target!r} (expected "
                                          "'etcd://host:port/cluster' or 'etcds://host:port/cluster')")
    endpoint, _, cluster = rest.partition("/")
    cluster = cluster.strip("/") or DEFAULT_CLUSTER
    if not endpoint:
        raise errors.InvalidArgumentError(None, None, f"etcd target {target!r} needs a host and a port, "
                                          "e.g. 'etcd://127.0.0.1:2379/mycluster'")
    endpoint = parse_endpoint(endpoint)
    if target.startswith(ETCDS_SCHEME) and not is_tls_endpoint(endpoint):
        endpoint = "https://" + endpoint
    return endpoint, _check_name("cluster", cluster)


def format_etcd_target(endpoint: str, cluster: str) -> str:
    """The session target of `cluster` in etcd at `endpoint`: ``etcd://`` or, with TLS, ``etcds://``."""
    endpoint = parse_endpoint(endpoint)
    if is_tls_endpoint(endpoint):
        return f"{ETCDS_SCHEME}{endpoint[len('https://'):]}/{_check_name('cluster', cluster)}"
    return f"{ETCD_SCHEME}{endpoint}/{_check_name('cluster', cluster)}"


def master_key(cluster: str) -> str:
    """The key a cluster's master registers: ``/kernflow/CLUSTER/master``."""
    return f"{KEY_ROOT}/{_check_name('cluster', cluster)}/master"


def workers_prefix(cluster: str) -> str:
    """The prefix of a cluster's worker keys: ``/kernflow/CLUSTER/workers/``."""
    return f"{KEY_ROOT}/{_check_name('cluster', cluster)}/workers/"


def worker_key(cluster: str, job: str, task: int) -> str:
    """The key task ``/job:JOB/task:TASK`` registers: ``/kernflow/CLUSTER/workers/JOB/TASK``."""
    return f"{workers_prefix(cluster)}{_check_name('job', job)}/{int(task)}"


def canonical_task(name: str) -> str:
    """``/job:J/replica:R/task:T`` for a task or device name (the replica defaults to 0).

    Raises:
        InvalidArgumentError: when the name lacks a job or a task.
    """
    try:
        spec = device_spec.DeviceSpec.from_string(name)
    except ValueError as e:
        raise errors.InvalidArgumentError(None, None, f"bad task name {name!r}: {e}") from None
    if spec.job is None or spec.task is None:
        raise errors.InvalidArgumentError(None, None, f"{name!r} does not name a task (expected "
                                          "'/job:NAME/task:INDEX')")
    return f"/job:{spec.job}/replica:{spec.replica or 0}/task:{spec.task}"


def task_from_key(cluster: str, key) -> str | None:
    """The task name a worker key stands for, or None for a key of another shape."""
    if isinstance(key, bytes):
        key = key.decode("utf-8", "replace")
    prefix = workers_prefix(cluster)
    if not key.startswith(prefix):
        return None
    parts = key[len(prefix):].split("/")
    if len(parts) != 2 or not parts[0] or not parts[1].isdigit():
        return None
    return f"/job:{parts[0]}/replica:0/task:{int(parts[1])}"


def advertised_address(host: str, port: int, advertise: str | None = None) -> str:
    """The "host:port" other processes should dial for a server bound to `host`.

    `advertise` (a host name or IP) wins; a wildcard bind address becomes this machine's host name.
    """
    if advertise:
        host = advertise
    elif host in ("", "0.0.0.0", "::", "[::]"):
        import socket  # noqa: PLC0415
        host = socket.gethostname()
    host = host.strip("[]")
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _decode(value) -> dict | None:
    try:
        out = json.loads(value.decode("utf-8") if isinstance(value, bytes) else value)
    except (UnicodeDecodeError, ValueError):
        return None
    return out if isinstance(out, dict) and isinstance(out.get("address"), str) else None


# ---------------------------------------------------------------------------- one-shot reads
def _read_master(endpoint: str, cluster: str, timeout_s: float, credentials=None):
    """The KeyValue of ``/kernflow/CLUSTER/master``, or None when it is absent."""
    key = master_key(cluster)
    what = f"Get {key}"
    return blocking(endpoint, what, once(endpoint, what, lambda c: c.get(key.encode()), timeout_s,
                                         credentials), timeout_s)


def lookup_master(endpoint: str, cluster: str, timeout_s: float = DEFAULT_TIMEOUT_S,
                  fallback_cluster: str | None = None,
                  credentials: EtcdCredentials | None = None) -> dict:
    """Reads the master's registration (``/kernflow/CLUSTER/master``).

    Args:
        endpoint: etcd's "host:port".
        cluster: the cluster name.
        timeout_s: the timeout of each etcd read.
        fallback_cluster: a cluster whose master to read when `cluster` has none registered.
        credentials: who to be in etcd (default: `EtcdCredentials.from_env`).

    Returns:
        Its JSON value: at least "address" ("host:port").

    Raises:
        UnavailableError: etcd does not answer within `timeout_s`, or no master is registered.
        UnauthenticatedError, PermissionDeniedError: etcd refused the credentials.
    """
    endpoint = parse_endpoint(endpoint)
    key = master_key(cluster)
    kv = _read_master(endpoint, cluster, timeout_s, credentials)
    if kv is None and fallback_cluster is not None:
        kv = _read_master(endpoint, fallback_cluster, timeout_s, credentials)
        if kv is not None:
            cluster, key = fallback_cluster, master_key(fallback_cluster)
    if kv is None:
        also = f" nor of cluster {fallback_cluster!r}" if fallback_cluster is not None else ""
        raise errors.UnavailableError(None, None, f"no master of cluster {cluster!r}{also} is registered "
                                      f"in etcd at {endpoint} (key {key} is absent)")
    value = _decode(kv.value)
    if value is None:
        raise errors.UnavailableError(None, None, f"the master registration {key} in etcd at {endpoint} "
                                      f"is malformed: {kv.value[:200]!r}")
    return value


def resolve_master_target(target: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    """``etcd://HOST:PORT/CLUSTER`` -> the registered master's ``grpc://host:port``.

    Without a cluster name the target means `DEFAULT_CLUSTER`, else `LEGACY_DEFAULT_CLUSTER` when
    only that one has a master.
    """
    endpoint, cluster = parse_etcd_target(target)
    named = bool(_target_rest(target).partition("/")[2].strip("/"))
    fallback = None if named else LEGACY_DEFAULT_CLUSTER
    return "grpc://" + lookup_master(endpoint, cluster, timeout_s, fallback)["address"]


def list_cluster(endpoint: str, cluster: str, timeout_s: float = DEFAULT_TIMEOUT_S,
                 credentials: EtcdCredentials | None = None) -> dict:
    """Reads a cluster's registrations once.

    Args:
        credentials: who to be in etcd (default: `EtcdCredentials.from_env`).

    Returns:
        ``{"master": value or None, "workers": {task name: value}}``.

    Raises:
        UnavailableError: etcd does not answer within `timeout_s`.
        UnauthenticatedError, PermissionDeniedError: etcd refused the credentials.
    """
    endpoint = parse_endpoint(endpoint)
    prefix = f"{KEY_ROOT}/{_check_name('cluster', cluster)}/"
    what = f"Range {prefix}*"
    got = blocking(endpoint, what, once(endpoint, what, lambda c: c.get_prefix(prefix.encode()), timeout_s,
                                        credentials), timeout_s)
    out = {"master": None, "workers": {}}
    for kv in got:
        key = kv.key.decode("utf-8", "replace")
        value = _decode(kv.value)
        if value is None:
            continue
        if key == master_key(cluster):
            out["master"] = value
        else:
            task = task_from_key(cluster, key)
            if task is not None:
                out["workers"][task] = value
    return out


# ---------------------------------------------------------------------------- registration
class Registration:
    """Keeps `key` = JSON `value` in etcd under a lease, re-registering whenever the lease is lost.

    Args:
        endpoint: etcd's "host:port".
        key: the key (see `master_key`, `worker_key`).
        value: a JSON-serializable dict, normally with "address".
        ttl_s: the lease's time to live (etcd grants at least 2 s); the key disappears this long
            after the holder stops refreshing it.
        timeout_s: the timeout of each etcd operation.
        credentials: who to be in etcd (default: `EtcdCredentials.from_env`).
    """

    def __init__(self, endpoint: str, key: str, value: dict, ttl_s: int = DEFAULT_TTL_S,
                 timeout_s: float = DEFAULT_TIMEOUT_S, credentials: EtcdCredentials | None = None):
        self.endpoint = parse_endpoint(endpoint)
        self.key = key
        self.value = dict(value)
        self.ttl_s = max(int(ttl_s), 1)
        self.timeout_s = float(timeout_s)
        self.registrations = 0            # successful (re-)registrations so far
        self.lease_id: int | None = None
        self.last_error: errors.OpError | None = None
        self._registered = threading.Event()
        self._settled = threading.Event()  # registered once, or refused for good
        self._conn = EtcdConnection(self.endpoint, self.timeout_s, credentials)
        self._pending_lease: int | None = None
        self._task: asyncio.Task | None = None
        self._stopped = False

    def __repr__(self):
        return f"<Registration {self.key} in etcd at {self.endpoint}>"

    @property
    def registered(self) -> bool:
        """True while the key is known to be in etcd under a live lease."""
        return self._registered.is_set()

    def start(self, wait_s: float | None = None) -> Registration:
        """Starts registering in the background and waits for the first registration.

        Args:
            wait_s: how long to wait (default: `timeout_s`); 0 returns at once.

        Raises:
            UnavailableError: etcd did not accept the registration in time (the registration is
                stopped then).
            UnauthenticatedError, PermissionDeniedError: etcd refused the credentials.
        """
        if self._task is not None:
            return self
        self._task = EtcdLoop.get().start_task(self._maintain())
        live.add(self)
        wait_s = self.timeout_s if wait_s is None else wait_s
        if wait_s > 0 and not (self._settled.wait(wait_s) and self.registered):
            err = self.last_error
            self.stop(revoke=False)
            if isinstance(err, _REFUSED):
                raise type(err)(None, None, f"could not register {self.key}: {err.message}")
            raise errors.UnavailableError(None, None, f"could not register {self.key} in etcd at "
                                          f"{self.endpoint} within {wait_s:g} s"
                                          + (f": {err.message}" if err is not None else ""))
        return self

    def wait(self, timeout_s: float | None = None) -> bool:
        """Blocks until registered (True) or `timeout_s` passes (False)."""
        return self._registered.wait(timeout_s)

    async def _register(self) -> None:
        value = json.dumps(self.value, sort_keys=True).encode()
        lease = await self._conn.op("LeaseGrant", lambda c: c.lease(self.ttl_s))
        self._pending_lease = lease.id  # revoked by stop() even if the put's answer never arrives
        put = await self._conn.op(f"Put {self.key}",
                                  lambda c: c.put(self.key.encode(), value, lease=lease.id, prev_kv=True))
        prev = _decode(put.prev_kv.value) if put.prev_kv is not None else None
        if prev is not None and self.lease_id is None and prev.get("pid") != self.value.get("pid"):
            _log.warning("%s: replaced the registration of pid %s at %s (an earlier instance of this "
                         "task, or a duplicate?)", self.key, prev.get("pid"), prev["address"])
        old, self.lease_id, self._pending_lease = self.lease_id, lease.id, None
        self.registrations += 1
        self._registered.set()
        self._settled.set()
        if old is not None and old != lease.id:  # a lease that outlived an etcd restart: drop it
            try:
                await self._conn.op("LeaseRevoke", lambda c: c.revoke_lease(old), timeout_s=1.0)
            except errors.UnavailableError:
                pass
        if self.registrations > 1:
            _log.warning("registered %s in etcd at %s again (lease %x)", self.key, self.endpoint, lease.id)

    async def _maintain(self) -> None:
        try:
            await self._keep_registered()
        except _REFUSED as e:
            self.last_error = e
            self._registered.clear()
            _log.error("registration %s stopped: %s", self.key, e.message)
        finally:
            self._settled.set()

    async def _keep_registered(self) -> None:
        interval = max(self.ttl_s / 3.0, 0.3)
        backoff = 0.1
        while True:
            try:
                await self._register()
            except errors.UnavailableError as e:
                self.last_error = e
                self._registered.clear()
                _log.info("%s", e.message)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_S, interval)
                continue
            backoff = 0.1
            last_ok = time.monotonic()
            ok = True
            while True:
                await asyncio.sleep(interval if ok else min(backoff, interval))
                try:
                    reply = await self._conn.op("LeaseKeepAlive",
                                                lambda c: c.refresh_lease(self.lease_id))
                except errors.UnavailableError as e:
                    self.last_error = e
                    ok = False
                    backoff = min(backoff * 2, _MAX_BACKOFF_S)
                    if time.monotonic() - last_ok > self.ttl_s:
                        self._registered.clear()
                        _log.warning("registration %s: no lease refresh for %.1f s (%s); registering "
                                     "again", self.key, time.monotonic() - last_ok, e.message)
                        break
                    continue
                if reply is None or reply.TTL <= 0:
                    self._registered.clear()
                    _log.warning("registration %s: lease %x is gone (etcd at %s restarted or expired "
                                 "it); registering again", self.key, self.lease_id, self.endpoint)
                    break
                last_ok, ok, backoff = time.monotonic(), True, 0.1

    async def _shutdown(self, revoke: bool) -> None:
        await cancel_task(self._task)
        for lease in (self._pending_lease, self.lease_id) if revoke else ():
            if lease is None:
                continue
            try:
                await self._conn.op("LeaseRevoke", lambda c, lease=lease: c.revoke_lease(lease))
            except errors.UnavailableError as e:
                if "lease not found" in e.message:  # expired, or etcd lost it: the key is gone too
                    continue
                _log.warning("could not remove %s from etcd (it expires in %d s): %s", self.key,
                             self.ttl_s, e.message)
        await self._conn.reset()

    def stop(self, revoke: bool = True) -> None:
        """Stops refreshing; with `revoke`, revokes the lease (the key disappears at once).

        Without `revoke` the key expires one TTL after the last refresh (what a crash does).
        Bounded by `timeout_s`; an unreachable etcd is logged, not raised.
        """
        if self._stopped:
            return
        self._stopped = True
        live.discard(self)
        self._registered.clear()
        if self._task is None:
            return
        try:
            EtcdLoop.get().call(self._shutdown(revoke), self.timeout_s + 2.0)
        except (TimeoutError, RuntimeError) as e:
            _log.warning("stopping the registration %s: %s", self.key, e)


# ---------------------------------------------------------------------------- the worker table
class WorkerTable:
    """The registered workers of a cluster, kept current by an etcd watch.

    While etcd is unreachable the table keeps its last contents; once etcd answers again it is
    listed anew, so it mirrors etcd exactly.

    Args:
        endpoint: etcd's "host:port".
        cluster: the cluster name.
        timeout_s: the timeout of each etcd operation.
        credentials: who to be in etcd (default: `EtcdCredentials.from_env`).
    """

    def __init__(self, endpoint: str, cluster: str, timeout_s: float = DEFAULT_TIMEOUT_S,
                 credentials: EtcdCredentials | None = None):
        self.endpoint = parse_endpoint(endpoint)
        self.cluster = _check_name("cluster", cluster)
        self.prefix = workers_prefix(cluster)
        self.timeout_s = float(timeout_s)
        self.listings = 0               # successful list+watch rounds (1 + re-lists after failures)
        self.last_error: errors.OpError | None = None
        self._entries: dict[str, dict] = {}
        self._known: set[str] = set()
        self._cond = threading.Condition()
        self._listeners: list = []
        self._watching = threading.Event()
        self._settled = threading.Event()  # watching once, or refused for good
        self._conn = EtcdConnection(self.endpoint, self.timeout_s, credentials)
        self._task: asyncio.Task | None = None
        self._stopped = False

    def __repr__(self):
        return f"<WorkerTable {self.prefix} in etcd at {self.endpoint}>"

    # -- reading
    def entries(self) -> dict[str, dict]:
        """``{task name: registered value}`` of the tasks registered now (a copy)."""
        with self._cond:
            return {t: dict(v) for t, v in self._entries.items()}

    def tasks(self) -> list[str]:
        """The registered task names, sorted."""
        with self._cond:
            return sorted(self._entries, key=_task_key)

    def known_tasks(self) -> list[str]:
        """Every task name ever seen registered (a task that went away may come back), sorted."""
        with self._cond:
            return sorted(self._known, key=_task_key)

    def address(self, task: str) -> str | None:
        """The registered "host:port" of `task` (any spelling of the task name), or None."""
        with self._cond:
            entry = self._entries.get(canonical_task(task))
        return None if entry is None else entry["address"]

    @property
    def watching(self) -> bool:
        """True while the watch on etcd is established (False during an etcd outage)."""
        return self._watching.is_set()

    def add_listener(self, fn) -> None:
        """Calls ``fn(table)`` after every change (on the etcd thread: keep it short)."""
        self._listeners.append(fn)

    def wait_until(self, predicate, timeout_s: float) -> bool:
        """Waits until ``predicate(entries)`` is true; returns whether it became true in time."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not predicate(self._entries):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.5))
            return True

    def resolver(self, client_timeout_s: float | None = None) -> EtcdResolver:
        """A ``resolver(task_name) -> GrpcWorkerClient`` backed by this table."""
        return EtcdResolver(self, client_timeout_s)

    # -- updating
    def _changed(self) -> None:
        with self._cond:
            self._cond.notify_all()
        for fn in list(self._listeners):
            try:
                fn(self)
            except Exception:  # noqa: BLE001 - a listener's bug must not stop the watch
                _log.exception("worker table listener %r failed", fn)

    def _replace(self, kvs) -> None:
        table = {}
        for kv in kvs:
            task, value = task_from_key(self.cluster, kv.key), _decode(kv.value)
            if task is not None and value is not None:
                table[task] = value
        with self._cond:
            self._entries = table
            self._known.update(table)
        self._changed()

    def _apply(self, ev) -> None:
        task = task_from_key(self.cluster, ev.kv.key)
        if task is None:
            return
        with self._cond:
            if ev.kind == "DELETE":
                self._entries.pop(task, None)
            else:
                value = _decode(ev.kv.value)
                if value is None:
                    _log.warning("ignoring malformed registration %s: %r", ev.kv.key, ev.kv.value[:200])
                    return
                self._entries[task] = value
                self._known.add(task)
        self._changed()

    async def _run(self) -> None:
        backoff = 0.1
        prefix = self.prefix.encode()
        while True:
            watch = None
            try:
                got = await self._conn.op(f"Range {self.prefix}*", lambda c: c.get_prefix(prefix))
                self._replace(got)
                rev = got.header.revision
                watch = await self._conn.op(f"Watch {self.prefix}*",
                                            lambda c: c.watch_prefix(prefix, start_revision=rev + 1))
                self.listings += 1
                self._watching.set()
                self._settled.set()
                with self._cond:
                    self._cond.notify_all()
                backoff = 0.1
                async for ev in watch:
                    self._apply(ev)
                raise errors.UnavailableError(None, None, f"the watch on etcd at {self.endpoint} ended")
            except asyncio.CancelledError:
                raise
            except _REFUSED as e:
                self._watching.clear()
                self.last_error = e
                self._settled.set()
                _log.error("worker table %s stopped: %s", self.prefix, e.message)
                return
            except Exception as e:  # noqa: BLE001 - list and watch again after any failure
                self._watching.clear()
                self.last_error = e if isinstance(e, errors.OpError) else errors.UnavailableError(
                    None, None, f"watch on etcd at {self.endpoint} failed: {type(e).__name__}: {e}")
                _log.info("worker table %s: %s; listing again in %.1f s", self.prefix,
                          self.last_error.message, backoff)
                await self._conn.reset()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_S)
            finally:
                if watch is not None:
                    try:
                        await asyncio.wait_for(watch.cancel(), 1.0)
                    except Exception:  # noqa: BLE001 - the stream may be gone already
                        pass

    def start(self, wait_s: float | None = None) -> WorkerTable:
        """Lists and starts watching; waits (default `timeout_s`) for the first listing.

        Raises:
            UnavailableError: etcd did not answer in time (the table is stopped then).
            UnauthenticatedError, PermissionDeniedError: etcd refused the credentials.
        """
        if self._task is not None:
            return self
        self._task = EtcdLoop.get().start_task(self._run())
        live.add(self)
        wait_s = self.timeout_s if wait_s is None else wait_s
        if wait_s > 0 and not (self._settled.wait(wait_s) and self.watching):
            err = self.last_error
            self.stop()
            if isinstance(err, _REFUSED):
                raise type(err)(None, None, f"could not watch {self.prefix}: {err.message}")
            raise errors.UnavailableError(None, None, f"could not watch {self.prefix} in etcd at "
                                          f"{self.endpoint} within {wait_s:g} s"
                                          + (f": {err.message}" if err is not None else ""))
        return self

    async def _shutdown(self) -> None:
        await cancel_task(self._task)
        await self._conn.reset()

    def stop(self) -> None:
        """Stops watching (the table keeps its last contents)."""
        if self._stopped:
            return
        self._stopped = True
        live.discard(self)
        self._watching.clear()
        if self._task is None:
            return
        try:
            EtcdLoop.get().call(self._shutdown(), self.timeout_s)
        except (TimeoutError, RuntimeError) as e:
            _log.warning("stopping the worker table %s: %s", self.prefix, e)


def _task_key(task: str):
    spec = device_spec.DeviceSpec.from_string(task)
    return (spec.job or "", spec.replica or 0, spec.task or 0)


class EtcdResolver:
    """``resolver(task_name) -> GrpcWorkerClient``, looked up in a `WorkerTable` on every call.

    A task whose registered address changed (it restarted elsewhere) gets a new client, and the
    channel to the old address is closed once no registered task uses it.

    Raises (from a call):
        UnavailableError: the task is not registered (now).
        InvalidArgumentError: the name does not name a task.
    """

    def __init__(self, table: WorkerTable, client_timeout_s: float | None = None):
        self.table = table
        self.client_timeout_s = client_timeout_s
        self._clients: dict[str, object] = {}
        self._lock = threading.Lock()

    def __call__(self, task_name: str):
        task = canonical_task(task_name)
        address = self.table.address(task)
        client = self._clients.get(task)
        if client is not None and client.address == address:
            return client
        if address is None:
            known = ", ".join(self.table.tasks()) or "none"
            raise errors.UnavailableError(None, None, f"Task {task} is not registered in etcd at "
                                          f"{self.table.endpoint} (cluster {self.table.cluster!r}; "
                                          f"registered: {known})")
        from kernflow.client import channels  # noqa: PLC0415
        from kernflow.client.worker_client import GrpcWorkerClient  # noqa: PLC0415
        with self._lock:
            client = self._clients.get(task)
            if client is not None and client.address == address:
                return client
            kw = {} if self.client_timeout_s is None else {"default_timeout_s": self.client_timeout_s}
            old = client
            client = self._clients[task] = GrpcWorkerClient(address, task, **kw)
        if old is not None:
            _log.info("task %s moved from %s to %s", task, old.address, address)
            in_use = {v["address"] for v in self.table.entries().values()}
            if old.address not in in_use:
                channels.evict(old.address)
        return client


def worker_registration(endpoint: str, cluster: str, job: str, task: int, address: str,
                        devices=(), ttl_s: int = DEFAULT_TTL_S,
                        timeout_s: float = DEFAULT_TIMEOUT_S) -> Registration:
    """A (not yet started) `Registration` of task ``/job:JOB/task:TASK`` at `address`."""
    value = {"address": address, "pid": os.getpid(), "task": f"/job:{job}/replica:0/task:{int(task)}",
             "devices": list(devices)}
    return Registration(endpoint, worker_key(cluster, job, task), value, ttl_s, timeout_s)


def master_registration(endpoint: str, cluster: str, address: str, ttl_s: int = DEFAULT_TTL_S,
                        timeout_s: float = DEFAULT_TIMEOUT_S) -> Registration:
    """A (not yet started) `Registration` of a cluster's master serving at `address`."""
    value = {"address": address, "pid": os.getpid(), "target": f"grpc://{address}"}
    return Registration(endpoint, master_key(cluster), value, ttl_s, timeout_s)
