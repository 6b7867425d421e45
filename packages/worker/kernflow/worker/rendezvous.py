"""The rendezvous of one step on one worker: local hand-offs, and pulls from other tasks.

A key names its producer first (``send_device;incarnation;recv_device;tensor_name;frame:iter``, see
`kernflow.core.runtime.rendezvous.create_key`). A `WorkerRendezvous` wraps core's
`LocalRendezvous` (TF's remote rendezvous wraps its local one the same way) and adds the remote half:
`send` always stores in the local one, where a value another task needs stays until that task pulls
it with RecvTensor. `recv_async` of a key
whose producer is on this task waits locally; otherwise it pulls the tensor from the producer's task
on a background thread, so no executor thread ever waits for the network. A pull goes through the
transport the worker chose for that task (`kernflow.client.transports.PeerTransports`: "shm" on the
same host, else "grpc", or a plugin's); a failed pull makes the worker choose again for the next.
`abort` wakes every local waiter and every pull in flight with the error at once, and cancels the
pulls' calls (they are registered on the step's `CancellationManager`).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time

from kernflow.core.framework import errors
from kernflow.core.runtime.rendezvous import LocalRendezvous, call_quietly
from kernflow.core.runtime.resource_mgr import is_state_buffer
from kernflow.core.runtime import transport as _transport
from kernflow.core.runtime.transport import DEFAULT_TRANSPORT

__all__ = ["WorkerRendezvous", "parse_key", "device_type_of", "PULL_GRACE_S"]

# Seconds a pull may outlive its step's deadline (see `WorkerRendezvous._pull`).
PULL_GRACE_S = 1.0


def parse_key(key: str) -> list[str]:
    """Splits a rendezvous key into its five fields.

    Raises:
        InvalidArgumentError: if `key` does not have the five ``;``-separated fields.
    """
    parts = key.split(";")
    if len(parts) != 5 or not parts[0] or not parts[2]:
        raise errors.InvalidArgumentError(None, None, f"Invalid rendezvous key {key!r}: expected "
                                          f"send_device;incarnation;recv_device;tensor;frame:iter")
    return parts


def device_type_of(device_name: str) -> str:
    """Returns "CPU" for ".../device:CPU:0" (the type as the _Send/_Recv kernels read it)."""
    last = device_name.rsplit("/", 1)[-1]
    fields = last.split(":")
    return fields[1] if len(fields) >= 3 else (fields[0] if fields else "")


class WorkerRendezvous:
    """Where the _Send/_Recv kernels of one step on one worker meet.

    Args:
        step_id: the step.
        owner: the `Worker`; it provides ``is_local_device(name)``, ``device_by_name(name)``,
            ``pull_client(task_name)``, ``task_of(device_name)``, ``receiver_of(key)``, ``pull_pool`` (an executor with
            ``submit``), ``transports`` (a `PeerTransports`) and ``recv_timeout_s``.

    Attributes:
        active_runs: RunGraph calls of this step in progress.
        claimed: True once a RunGraph of the step got this rendezvous (before that, only RecvTensor
            calls waiting for the step's values use it: see `kernflow.worker.step_table`).
        recv_calls: RecvTensor calls of the step using this rendezvous now.
        last_used: `time.monotonic()` of the last use (idle rendezvous are swept by the worker).
        deadline: monotonic deadline of the step (from RunGraph's timeout), or None.
        trace_context: the OpenTelemetry context of the step's "Worker.RunGraph" span here (the
            parent of each pull's "RecvTensor" span), or None when not traced.
    """

    def __init__(self, step_id: int, owner):
        self.step_id = step_id
        self._owner = owner
        # Values sent on this task wait in the local rendezvous, for a local Recv or a RecvTensor.
        self._local = LocalRendezvous()
        self._lock = threading.Lock()           # guards the remote half below
        self._pulls: dict[int, object] = {}     # pull id -> callback, while the pull is in flight
        self._queued: dict[str, list] = {}      # producer task -> [(pull id, key, send device)] not yet taken
        # Prefetched keys (`prefetch`): _PENDING while in flight, then (value, is_dead, error) until
        # received; a callback when recv_async came first.
        self._prefetch: dict[str, object] = {}
        self._pull_ids = itertools.count()
        self._error: Exception | None = None
        self.active_runs = 0
        self.runs_done = 0
        self.claimed = False
        self.recv_calls = 0
        self.last_used = time.monotonic()
        self.deadline: float | None = None
        self.trace_context = None
        # Blocking kernels of the step (queue ops) register here; `abort` cancels them.
        self.cancellation = self._local.cancellation

    # ------------------------------------------------------------------ the kernels' interface
    def send(self, key: str, value, is_dead: bool = False) -> None:
        """Delivers `value` for `key` to a local waiter, or keeps it until someone receives it
        (`LocalRendezvous.send`).

        A value bound for another task that is a live variable buffer is copied, so an update by a
        later step cannot change what the peer receives (`codec.snapshot`: straight into the byte
        chunks RecvTensor sends, so the pull copies nothing more).

        Raises:
            The abort error if the step was aborted; InternalError if `key` was already sent.
        """
        fields = key.split(";")
        if len(fields) == 5 and not self._owner.is_local_device(fields[2]) and is_state_buffer(value):
            from kernflow.client import codec
            value = codec.snapshot(value)
        self.last_used = time.monotonic()
        self._local.send(key, value, is_dead)

    def recv_async(self, key: str, callback) -> None:
        """Calls ``callback(value, is_dead, error)`` once the tensor of `key` is here.

        Keys produced on this task wait locally; others are pulled from the producer's task on a
        pull thread. The callback runs exactly once, also when the step is aborted.
        """
        try:
            send_device = parse_key(key)[0]
            local = self._owner.is_local_device(send_device)
        except Exception as e:  # noqa: BLE001 - a bad key fails this receive, not the thread
            callback(None, False, e if isinstance(e, errors.OpError) else
                     errors.InvalidArgumentError(None, None, f"bad rendezvous key {key!r}: {e}"))
            return
        if local:
            self.recv_local(key, callback)
            return
        with self._lock:
            got = self._prefetch.get(key)
            if got is _PENDING:
                self._prefetch[key] = callback    # delivered when the prefetch lands
                return
            if got is not None:
                del self._prefetch[key]
        if got is not None:
            callback(*got)
        else:
            self._start_pull(key, send_device, callback)

    def prefetch(self, items) -> None:
        """Starts pulling (key, send device) pairs now, before any Recv asks for them (a step's root
        Recvs from other tasks): queued together, the keys of one producer go in one call."""
        tasks: set = set()
        for key, send_device in items:
            with self._lock:
                if self._error is not None or key in self._prefetch:
                    continue
                self._prefetch[key] = _PENDING
            self._start_pull(key, send_device, lambda v, d, e, key=key: self._landed(key, v, d, e), tasks)
        for task in tasks:
            self._submit_queued(task)

    def _landed(self, key: str, value, is_dead, err) -> None:
        with self._lock:
            waiting = self._prefetch.get(key)
            if callable(waiting):
                del self._prefetch[key]
            else:
                self._prefetch[key] = (value, is_dead, err)
                return
        waiting(value, is_dead, err)

    def abort(self, error: Exception) -> None:
        """Fails every pending and future receive (local or remote) with `error`; the first wins."""
        with self._lock:
            if self._error is not None:
                return
            self._error = error
            pulls, self._pulls = self._pulls, {}
            self._queued.clear()
            waiting = [cb for cb in self._prefetch.values() if callable(cb)]
            self._prefetch.clear()
        self._local.abort(error)     # (cancels the step's blocking kernels, wakes local receivers)
        for cb in pulls.values():
            call_quietly(cb, None, False, error)
        for cb in waiting:
            call_quietly(cb, None, False, error)

    @property
    def error(self) -> Exception | None:
        """The abort error, or None while the step is healthy."""
        return self._error

    def holds_nothing(self) -> bool:
        """True when no value waits to be received, no receive waits for a value and no pull is in
        flight (and the step was not aborted): nothing more can happen here without a new RunGraph."""
        with self._lock:
            return self._error is None and self._empty()

    def is_empty(self) -> bool:
        """True when no value waits to be received, no receive waits for a value and no pull is in
        flight, aborted or not."""
        with self._lock:
            return self._empty()

    def _empty(self) -> bool:
        return not self._pulls and not self._prefetch and self._local.is_empty()

    # ------------------------------------------------------------------ local receives
    def recv_local(self, key: str, callback) -> None:
        """Registers `callback` for a key sent on this task (RecvTensor uses this directly)."""
        self.last_used = time.monotonic()
        self._local.recv_async(key, callback)

    def cancel_local(self, key: str, callback) -> bool:
        """Withdraws a callback registered with `recv_local` (`LocalRendezvous.cancel_recv`)."""
        return self._local.cancel_recv(key, callback)

    # ------------------------------------------------------------------ remote receives
    def _start_pull(self, key: str, send_device: str, callback, hold: set | None = None) -> None:
        """Queues a pull; the keys queued for one producer task until a pull thread takes them go
        in one RecvTensor call (`_pull_queued`): the Recvs a partition starts together (a step's
        weights from one ps, and the control edges back from its updates) cost one call, not one
        each."""
        try:
            task = self._owner.task_of(send_device)
        except Exception as e:  # noqa: BLE001 - delivered to the waiting _Recv as a TF error
            callback(None, False, _as_op_error(e, f"receiving {key!r}"))
            return
        with self._lock:
            err = self._error
            if err is None:
                pid = next(self._pull_ids)
                self._pulls[pid] = callback
                self.last_used = time.monotonic()
                queued = self._queued.get(task)
                first = queued is None
                if first:
                    queued = self._queued[task] = []
                queued.append((pid, key, send_device))
        if err is not None:
            callback(None, False, err)
            return
        if not first:
            return
        if hold is not None:    # the caller queues more keys first, then calls `_submit_queued`
            hold.add(task)
            return
        self._submit_queued(task)

    def _submit_queued(self, task: str) -> None:
        try:
            self._owner.pull_pool.submit(self._pull_queued, task)
        except Exception as e:  # noqa: BLE001 - e.g. the pool was shut down with the worker
            with self._lock:
                items = self._queued.pop(task, [])
            for p, k, _ in items:
                self._finish_pull(p, None, False, errors.UnavailableError(
                    None, None, f"cannot receive {k!r}: worker is shutting down ({e})"))

    def _pull_queued(self, task: str) -> None:
        with self._lock:
            items = self._queued.pop(task, [])
        if len(items) == 1:
            self._pull(*items[0])
        elif items:
            self._pull_many(task, items)

    def _pull_many(self, task: str, items) -> None:
        """Pulls several keys from `task` in one in-band call (the "grpc" transport's `recv_many`),
        each value delivered as it arrives, whatever transport single pulls from `task` use: per
        key, a call costs more than a same-host transport saves on the small tensors a step's
        Recvs usually carry. Without `recv_many`, one pull each, concurrently."""
        peer, done = None, set()
        try:
            peer = self._owner.pull_client(task)
            timeout = self._pull_timeout()
            many = getattr(_transport.get(DEFAULT_TRANSPORT), "recv_many", None)
            if many is None:
                for item in items[1:]:
                    self._owner.pull_pool.submit(self._pull, *item)
                self._pull(*items[0])
                return
            with self._pull_span(f"{len(items)} keys"):
                for i, value, is_dead in many(peer, self.step_id, [k for _, k, _ in items], timeout,
                                              self.cancellation):
                    if not is_dead:
                        value = self._to_receiver(items[i][1], value)
                    done.add(i)
                    self._finish_pull(items[i][0], value, is_dead, None)
        except Exception as e:  # noqa: BLE001 - delivered to every waiting _Recv as a TF error
            if peer is not None and self._error is None:
                self._owner.transports.forget(task, peer)   # chosen again for the next pull
            err = _as_op_error(e, f"receiving {len(items) - len(done)} tensors from {task}")
            for i, (pid, _, _) in enumerate(items):
                if i not in done:
                    self._finish_pull(pid, None, False, err)

    def _pull_timeout(self) -> float:
        if self.deadline is not None:
            # A little beyond the step's deadline, so that the step's own timeout (which says so)
            # is reported rather than the pull's.
            return self.deadline - time.monotonic() + PULL_GRACE_S
        return self._owner.recv_timeout_s

    @contextlib.contextmanager
    def _pull_span(self, what: str):
        """A "RecvTensor" client span of this step's trace, current on this pull thread so the call
        carries it to the peer; yields None when the step is not traced."""
        if self.trace_context is None:
            yield None
            return
        from opentelemetry import trace
        with trace.get_tracer("kernflow.worker").start_as_current_span(
                "RecvTensor", context=self.trace_context, kind=trace.SpanKind.CLIENT) as span:
            span.set_attribute("kernflow.step_id", self.step_id)
            span.set_attribute("kernflow.rendezvous_key", what)
            yield span

    def _to_receiver(self, key: str, value):
        """`value` in the receiving device's memory when both ends are of one kind (the _Recv kernel
        expects that; it converts itself otherwise)."""
        dev = self._owner.receiver_of(key)
        return value if dev is None else dev.to_device(value)

    def _pull(self, pid: int, key: str, send_device: str) -> None:
        if self.trace_context is None:
            value, is_dead, err = self._fetch(key, send_device)
        else:
            with self._pull_span(key) as span:
                value, is_dead, err = self._fetch(key, send_device)
                if err is not None:
                    from opentelemetry import trace
                    span.set_status(trace.Status(trace.StatusCode.ERROR, f"{type(err).__name__}: {err}"))
        self._finish_pull(pid, value, is_dead, err)

    def _fetch(self, key: str, send_device: str):
        """Pulls `key` from its producer's task; returns (value, is_dead, OpError or None)."""
        task, peer = "?", None
        try:
            task = self._owner.task_of(send_device)
            peer = self._owner.pull_client(task)
            timeout = self._pull_timeout()
            transport = self._owner.transports.get(task, peer, timeout)
            if self.trace_context is not None:
                from opentelemetry import trace
                trace.get_current_span().set_attribute("kernflow.transport", transport.name)
            value, is_dead = transport.recv(peer, self.step_id, key, timeout, self.cancellation)
            if not is_dead:
                value = self._to_receiver(key, value)
        except Exception as e:  # noqa: BLE001 - delivered to the waiting _Recv as a TF error
            if peer is not None and self._error is None:
                self._owner.transports.forget(task, peer)   # chosen again for the next pull
            return None, False, _as_op_error(e, f"receiving {key!r} from {task}")
        return value, is_dead, None

    def _finish_pull(self, pid, value, is_dead, err) -> None:
        with self._lock:
            cb = self._pulls.pop(pid, None)
        if cb is not None:  # None: the step was aborted meanwhile and the callback already ran
            cb(value, is_dead, err)


_PENDING = object()


def _as_op_error(e: Exception, what: str) -> errors.OpError:
    if isinstance(e, errors.OpError):
        return e
    return errors.InternalError(None, None, f"{what}: {type(e).__name__}: {e}")
