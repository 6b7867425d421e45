"""The rendezvous of one step on one worker: local hand-offs, and pulls from other tasks.

A key names its producer first (``send_device;incarnation;recv_device;tensor_name;frame:iter``, see
`kernflow.core.runtime.rendezvous.create_key`). `WorkerRendezvous.send` always stores locally: a
value another task needs stays here until that task pulls it with RecvTensor. `recv_async` of a key
whose producer is on this task waits locally; otherwise it pulls the tensor from the producer's task
on a background thread, so no executor thread ever waits for the network. A pull goes through the
transport the worker chose for that task (`kernflow.client.transports.PeerTransports`: "shm" on the
same host, else "grpc", or a plugin's); a failed pull makes the worker choose again for the next.
`abort` wakes every local waiter and every pull in flight with the error at once, and cancels the
pulls' calls (they are registered on the step's `CancellationManager`).
"""

from __future__ import annotations

import itertools
import threading
import time

from kernflow.core.framework import errors
from kernflow.core.runtime.cancellation import CancellationManager
from kernflow.core.runtime.resource_mgr import is_state_buffer

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
            ``pull_client(task_name)``, ``task_of(device_name)``, ``pull_pool`` (an executor with
            ``submit``), ``transports`` (a `PeerTransports`) and ``recv_timeout_s``.

    Attributes:
        states: the `DataflowState`s of this step currently running here (for `AbortStep`).
        active_runs: RunGraph calls of this step in progress.
        last_used: `time.monotonic()` of the last use (idle rendezvous are swept by the worker).
        deadline: monotonic deadline of the step (from RunGraph's timeout), or None.
        trace_context: the OpenTelemetry context of the step's "Worker.RunGraph" span here (the
            parent of each pull's "RecvTensor" span), or None when not traced.
    """

    def __init__(self, step_id: int, owner):
        self.step_id = step_id
        self._owner = owner
        self._lock = threading.Lock()
        self._values: dict[str, tuple] = {}     # key -> (value, is_dead)
        self._waiters: dict[str, list] = {}     # key -> [callback(value, is_dead, error)]
        self._pulls: dict[int, object] = {}     # pull id -> callback, while the pull is in flight
        self._pull_ids = itertools.count()
        self._error: Exception | None = None
        self.states: list = []
        self.active_runs = 0
        self.runs_done = 0
        self.last_used = time.monotonic()
        self.deadline: float | None = None
        self.trace_context = None
        # Blocking kernels of the step (queue ops) register here; `abort` cancels them.
        self.cancellation = CancellationManager()

    # ------------------------------------------------------------------ the kernels' interface
    def send(self, key: str, value, is_dead: bool = False) -> None:
        """Delivers `value` for `key` to a local waiter, or stores it until someone receives it.

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
        with self._lock:
            if self._error is not None:
                raise self._error
            self.last_used = time.monotonic()
            waiters = self._waiters.get(key)
            if not waiters:
                if key in self._values:
                    raise errors.InternalError(None, None, f"Send of an already sent tensor: {key}")
                self._values[key] = (value, is_dead)
                return
            cb = waiters.pop(0)
            if not waiters:
                del self._waiters[key]
        cb(value, is_dead, None)

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
        else:
            self._start_pull(key, send_device, callback)

    def abort(self, error: Exception) -> None:
        """Fails every pending and future receive (local or remote) with `error`; the first wins."""
        with self._lock:
            if self._error is not None:
                return
            self._error = error
            waiters, self._waiters = self._waiters, {}
            pulls, self._pulls = self._pulls, {}
            self._values.clear()
            states = list(self.states)
        self.cancellation.cancel(error)
        for cbs in waiters.values():
            for cb in cbs:
                _call_quietly(cb, None, False, error)
        for cb in pulls.values():
            _call_quietly(cb, None, False, error)
        for st in states:
            st.abort(error)

    @property
    def error(self) -> Exception | None:
        """The abort error, or None while the step is healthy."""
        return self._error

    def holds_nothing(self) -> bool:
        """True when no value waits to be received, no receive waits for a value and no pull is in
        flight (and the step was not aborted): nothing more can happen here without a new RunGraph."""
        with self._lock:
            return self._error is None and not self._values and not self._waiters and not self._pulls

    # ------------------------------------------------------------------ local receives
    def recv_local(self, key: str, callback) -> None:
        """Registers `callback` for a key sent on this task (RecvTensor uses this directly)."""
        with self._lock:
            err = self._error
            item = self._values.pop(key, None) if err is None else None
            if err is None and item is None:
                self._waiters.setdefault(key, []).append(callback)
                self.last_used = time.monotonic()
                return
        if err is not None:
            callback(None, False, err)
        else:
            callback(item[0], item[1], None)

    def cancel_local(self, key: str, callback) -> bool:
        """Withdraws a callback registered with `recv_local`.

        Returns:
            True if it was still waiting (it will never be called); False if it was already taken
            by a send or an abort (it has been or is about to be called).
        """
        with self._lock:
            cbs = self._waiters.get(key)
            if not cbs:
                return False
            for i, cb in enumerate(cbs):
                if cb is callback:
                    del cbs[i]
                    if not cbs:
                        del self._waiters[key]
                    return True
        return False

    def add_states(self, states) -> None:
        """Tracks running `DataflowState`s; aborts them at once if the step already failed."""
        with self._lock:
            err = self._error
            if err is None:
                self.states.extend(states)
        if err is not None:
            for st in states:
                st.abort(err)

    def remove_states(self, states) -> None:
        with self._lock:
            ids = {id(s) for s in states}
            self.states = [s for s in self.states if id(s) not in ids]

    # ------------------------------------------------------------------ remote receives
    def _start_pull(self, key: str, send_device: str, callback) -> None:
        with self._lock:
            err = self._error
            if err is None:
                pid = next(self._pull_ids)
                self._pulls[pid] = callback
                self.last_used = time.monotonic()
        if err is not None:
            callback(None, False, err)
            return
        try:
            self._owner.pull_pool.submit(self._pull, pid, key, send_device)
        except Exception as e:  # noqa: BLE001 - e.g. the pool was shut down with the worker
            self._finish_pull(pid, None, False, errors.UnavailableError(
                None, None, f"cannot receive {key!r}: worker is shutting down ({e})"))

    def _pull(self, pid: int, key: str, send_device: str) -> None:
        parent = self.trace_context
        if parent is None:
            value, is_dead, err = self._fetch(key, send_device)
        else:
            from opentelemetry import trace
            tracer = trace.get_tracer("kernflow.worker")
            # Current on this pull thread, so the RecvTensor call carries it to the peer.
            with tracer.start_as_current_span("RecvTensor", context=parent,
                                              kind=trace.SpanKind.CLIENT) as span:
                span.set_attribute("kernflow.step_id", self.step_id)
                span.set_attribute("kernflow.rendezvous_key", key)
                value, is_dead, err = self._fetch(key, send_device)
                if err is not None:
                    span.set_status(trace.Status(trace.StatusCode.ERROR, f"{type(err).__name__}: {err}"))
        self._finish_pull(pid, value, is_dead, err)

    def _fetch(self, key: str, send_device: str):
        """Pulls `key` from its producer's task; returns (value, is_dead, OpError or None)."""
        task, peer = "?", None
        try:
            task = self._owner.task_of(send_device)
            peer = self._owner.pull_client(task)
            if self.deadline is not None:
                # A little beyond the step's deadline, so that the step's own timeout (which says
                # so) is reported rather than the pull's.
                timeout = self.deadline - time.monotonic() + PULL_GRACE_S
            else:
                timeout = self._owner.recv_timeout_s
            transport = self._owner.transports.get(task, peer, timeout)
            if self.trace_context is not None:
                from opentelemetry import trace
                trace.get_current_span().set_attribute("kernflow.transport", transport.name)
            value, is_dead = transport.recv(peer, self.step_id, key, timeout, self.cancellation)
            fields = key.split(";")
            if not is_dead and device_type_of(fields[0]) == device_type_of(fields[2]):
                # The _Recv kernel expects the value in its device's memory when both ends are of
                # one kind (it converts itself otherwise).
                value = self._owner.device_by_name(fields[2]).to_device(value)
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


def _as_op_error(e: Exception, what: str) -> errors.OpError:
    if isinstance(e, errors.OpError):
        return e
    return errors.InternalError(None, None, f"{what}: {type(e).__name__}: {e}")


def _call_quietly(cb, *args) -> None:
    try:
        cb(*args)
    except Exception:  # noqa: BLE001 - one failing waiter must not stop the others being woken
        import logging
        logging.getLogger(__name__).exception("rendezvous callback failed during abort")
