"""The asyncio side of kernflow's etcd discovery: one event-loop thread, connections with timeouts.

aetcd (the etcd client) is asynchronous. `EtcdLoop` runs one asyncio loop on a daemon thread per
process, shared by every registration and watch; `EtcdConnection` wraps a lazily created aetcd
client whose every operation has a timeout and fails as an `UnavailableError` naming etcd's address.
`kernflow.client.discovery` builds the public API on these.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import logging
import threading
import weakref

from kernflow.core.framework import errors

__all__ = ["EtcdLoop", "EtcdConnection", "cancel_task", "blocking", "once", "live", "CHANNEL_OPTIONS"]

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


def _split_endpoint(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.rpartition(":")
    return host.strip("[]"), int(port)


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


class EtcdConnection:
    """A lazily created aetcd client; every operation has a timeout and raises UnavailableError.

    Used only on the loop thread. After a failure the client is dropped and made anew on next use.
    """

    def __init__(self, endpoint: str, timeout_s: float):
        self.endpoint = endpoint
        self.timeout_s = float(timeout_s)
        self._client = None

    def _make(self):
        import aetcd  # noqa: PLC0415 - only processes that use etcd import it
        host, port = _split_endpoint(self.endpoint)
        return aetcd.Client(host=host, port=port, timeout=self.timeout_s, options=dict(CHANNEL_OPTIONS))

    async def op(self, what: str, fn, timeout_s: float | None = None):
        """Awaits ``fn(client)`` with a timeout.

        Raises:
            UnavailableError: naming etcd's address and `what`, for any failure or timeout.
        """
        if self._client is None:
            self._client = self._make()
        t = self.timeout_s if timeout_s is None else timeout_s
        try:
            return await asyncio.wait_for(fn(self._client), t)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - every failure means etcd is not usable now
            await self.reset()
            if isinstance(e, (asyncio.TimeoutError, TimeoutError)):
                msg = f"no answer within {t:g} s"
            else:
                msg = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            raise errors.UnavailableError(None, None, f"etcd at {self.endpoint} is unavailable: {what} "
                                          f"failed: {msg}") from None

    async def reset(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                await asyncio.wait_for(client.close(), 2.0)
            except Exception as e:  # noqa: BLE001 - a broken client is dropped either way
                _log.debug("closing the etcd client of %s: %s", self.endpoint, e)


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


async def once(endpoint: str, what: str, fn, timeout_s: float):
    """``fn(client)`` on a connection of its own, closed afterwards (a one-shot read)."""
    conn = EtcdConnection(endpoint, timeout_s)
    try:
        return await conn.op(what, fn)
    finally:
        await conn.reset()
