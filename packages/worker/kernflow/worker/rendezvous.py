"""The rendezvous of one step on one worker: local hand-offs, pushes to and from other tasks.

A key names its producer first (``send_device;incarnation;recv_device;tensor_name;frame:iter``, see
`kernflow.core.runtime.rendezvous.create_key`). A `WorkerRendezvous` wraps core's
`LocalRendezvous` (TF's remote rendezvous wraps its local one the same way) and adds the remote half.

**Values cross tasks by push** (protocol version 2). A `send` whose receiver is on another task
sends the value to that task at once, unasked (`PushTensors`: one message, one-way over the
same-host channel), where it lands in the step's local rendezvous; the receiving `_Recv` only waits
there. A value larger than `push_max_bytes()` (a string tensor of several chunks, or any value when
``KERNFLOW_PUSH_MAX_BYTES=0``) is *announced* instead: it stays in the producer's local rendezvous,
and the receiver, told of it, pulls it with RecvTensor on a pull thread, through the transport it
chose for that task (`kernflow.client.transports.PeerTransports`: "shm" on the same host, else "grpc",
or a plugin's); a failed pull makes the worker choose again for the next. Either way the receiver
waits for one message from the producer, so the two ends never need to agree on anything per key,
and a pull of a step's small values (a request, then its answers) costs one message instead of
three. A push that cannot be sent fails the producing step (UnavailableError); a push for a step
that already ended here is dropped (`StepTable.get`).

`abort` wakes every local waiter and every pull in flight with the error at once, and cancels the
pulls' calls (they are registered on the step's `CancellationManager`).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time

from kernflow.client import codec
from kernflow.client.protobuf import worker_pb2
from kernflow.client.protocol import CLIENT_DEVICE
from kernflow.core.framework import errors
from kernflow.core.runtime.rendezvous import LocalRendezvous, call_quietly
from kernflow.core.runtime.resource_mgr import is_state_buffer
from kernflow.core.runtime import transport as _transport
from kernflow.core.runtime.env import EnvVar
from kernflow.core.runtime.transport import DEFAULT_TRANSPORT

__all__ = ["WorkerRendezvous", "parse_key", "device_type_of", "on_host", "push_max_bytes", "PULL_GRACE_S",
           "PUSH_MAX_BYTES_ENV", "DEFAULT_PUSH_MAX_BYTES"]

# Seconds a pull may outlive its step's deadline (see `WorkerRendezvous._pull`).
PULL_GRACE_S = 1.0
# Values up to this many bytes are pushed to the receiving task; larger ones are announced and
# pulled (through the receiver's transport: shared memory on one host). A pushed value is encoded
# and sent by the thread of its _Send, which a large value would hold up; and a pull copies a
# large tensor fewer times than the frames of one message.
PUSH_MAX_BYTES_ENV = "KERNFLOW_PUSH_MAX_BYTES"
DEFAULT_PUSH_MAX_BYTES = 256 << 10
_PUSH_MAX_VAR = EnvVar(PUSH_MAX_BYTES_ENV)
_push_max_cache: list = [None, DEFAULT_PUSH_MAX_BYTES]   # [setting read, its value]


def push_max_bytes() -> int:
    """The largest value pushed to another task (``KERNFLOW_PUSH_MAX_BYTES``, default 256 KiB; 0:
    every value is announced and pulled, as before protocol version 2 moved small ones by push)."""
    raw = _PUSH_MAX_VAR.get()
    if raw is _push_max_cache[0]:
        return _push_max_cache[1]
    try:
        n = max(0, int(raw)) if raw.strip() else DEFAULT_PUSH_MAX_BYTES
    except ValueError:
        n = DEFAULT_PUSH_MAX_BYTES
    _push_max_cache[:] = [raw, n]
    return n


def on_host(end, value, is_dead):
    """`value` in host memory: a value the sender left in its device's memory (its receiver is of
    the same device type) is copied out; others are already on the host."""
    send_dev, recv_type = end
    if not is_dead and send_dev.device_type != "CPU" and recv_type == send_dev.device_type:
        return send_dev.to_host(value)
    return value


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
        self._pull_ids = itertools.count()
        self._pending_pushes: list = []          # pushes over gRPC not yet answered (`wait_pushes`)
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
        """Delivers `value` for `key`: to a local waiter (or kept until one comes), or, when its
        receiver is on another task, pushed there (`_push`).

        Raises:
            The abort error if the step was aborted; InternalError if `key` was already sent;
            UnavailableError if the value could not be pushed to its receiver's task.
        """
        self.last_used = time.monotonic()
        fields = key.split(";")
        if len(fields) != 5 or self._owner.is_local_device(fields[2]):
            self._local.send(key, value, is_dead)
        elif fields[2] == CLIENT_DEVICE:   # a fetch its master (or client) pulls
            self.keep_for_pull(key, value, is_dead)
        else:
            self._push(key, fields, value, is_dead)

    def recv_async(self, key: str, callback) -> None:
        """Calls ``callback(value, is_dead, error)`` once the tensor of `key` is here.

        Every key waits locally: a value from another task arrives by push (`deliver_pushed`), or
        is pulled once its producer announced it (`pull_announced`). The callback runs exactly
        once, also when the step is aborted.
        """
        self.recv_local(key, callback)

    # ------------------------------------------------------------------ pushes
    def _push(self, key: str, fields: list, value, is_dead: bool) -> None:
        """Sends `value` to the task of its receiver (a small one itself, a larger one announced)."""
        owner = self._owner
        if self._error is not None:
            raise self._error
        task = owner.task_of(fields[2])
        peer = owner.pull_client(task)
        deliver = getattr(peer, "deliver_pushed", None)
        if deliver is not None:   # a worker of this process: the value itself, no encoding
            if not is_dead and is_state_buffer(value):
                value = value.copy()   # (a later update of the variable must not change it)
            deliver(self.step_id, key, value, is_dead)
            return
        chunk = None
        if is_dead:
            chunk = _DEAD_CHUNK
        else:
            limit = push_max_bytes()
            if limit and getattr(value, "nbytes", limit + 1) <= limit:   # (a large value stays put)
                host = on_host((owner.device_by_name(fields[0]), device_type_of(fields[2])), value, False)
                chunks = list(codec.encode_recv_chunks(host, False, string_list=True))
                if len(chunks) == 1 and len(chunks[0]) <= limit + 1024:
                    chunk = chunks[0]
        if chunk is None:   # announced: kept here until the receiver pulls it
            self.keep_for_pull(key, value)
            pushed = worker_pb2.PushedTensor(rendezvous_key=key, pull=True)
        else:
            pushed = worker_pb2.PushedTensor(rendezvous_key=key, value=chunk)
        batch = _batch.items if _batch.rdv is self else None
        if batch is not None:   # sent with the segment's other pushes to `task` (`end_pushes`)
            got = batch.get(task)
            if got is None:
                batch[task] = (peer, [pushed])
            else:
                got[1].append(pushed)
            return
        self._send_pushes(task, peer, [pushed])

    def _send_pushes(self, task: str, peer, tensors: list) -> None:
        request = worker_pb2.PushTensorsRequest(step_id=self.step_id, tensors=tensors)
        try:
            if self.trace_context is None:   # (the hot path: no span, no key list)
                call = peer.push_tensors(request, on_error=self._push_failed)
            else:
                with self._call_span("PushTensors", ",".join(t.rendezvous_key for t in tensors)):
                    call = peer.push_tensors(request, on_error=self._push_failed)
        except Exception as e:  # noqa: BLE001 - the step fails, naming the _Send
            if self._error is None:
                self._owner.transports.forget(task, peer)
            raise _as_op_error(e, f"pushing {len(tensors)} tensors to {task}") from None
        if call is not None:   # (over gRPC: the step ends here once the peer took them)
            with self._lock:
                self._pending_pushes.append(call)

    def wait_pushes(self, timeout: float | None) -> None:
        """Returns once every push of this step still in flight (over gRPC) was taken by its peer,
        so a step does not end here while a value it pushed may yet fail to arrive (its receiver
        would wait for it with nobody left to tell it).

        Raises:
            The first failed push's error (the step fails here); DeadlineExceededError after
            `timeout` seconds.
        """
        with self._lock:
            calls, self._pending_pushes = self._pending_pushes, []
        for call in calls:
            call.wait(timeout)

    def begin_pushes(self):
        """Until `end_pushes`, this thread's pushes of this step to other tasks are held, to go in
        one message per task (the executor brackets each straight-line segment with them: a
        segment's kernels run without waiting, so holding its pushes delays them by the segment's
        own time at most). Returns what `end_pushes` restores (brackets may nest: a worker of this
        process can run a receiver's segments on this thread)."""
        prev = (_batch.rdv, _batch.items)
        _batch.rdv, _batch.items = self, {}
        return prev

    def end_pushes(self, prev, send: bool = True) -> None:
        """Sends the pushes held since `begin_pushes` (one PushTensors per receiving task), or,
        without `send` (the segment failed: its receivers are told of the failure instead), drops
        them.

        Raises:
            OpError: a push could not be sent (the step fails, as an unbatched push's _Send does).
        """
        items = _batch.items
        _batch.rdv, _batch.items = prev
        if not send:
            return
        err = None
        for task, (peer, tensors) in items.items():
            try:
                self._send_pushes(task, peer, tensors)
            except errors.OpError as e:
                err = err or e
        if err is not None:
            raise err

    def keep_for_pull(self, key: str, value, is_dead: bool = False) -> None:
        """Keeps the value of `key` here until its receiver's task pulls it with RecvTensor (what
        an announced value does; a live variable buffer is copied, so an update by a later step
        cannot change what the peer receives: `codec.snapshot`, straight into the byte chunks
        RecvTensor sends).

        Raises:
            The abort error if the step was aborted; InternalError if `key` was already sent.
        """
        if not is_dead and is_state_buffer(value):
            value = codec.snapshot(value)
        self.last_used = time.monotonic()
        self._local.send(key, value, is_dead)

    def _push_failed(self, err: Exception) -> None:
        """A push sent without waiting (over gRPC) failed: the step fails here too."""
        self.abort(_as_op_error(err, "pushing a tensor"))

    def deliver_pushed(self, key: str, value, is_dead: bool) -> None:
        """A value another task pushed for `key` (`Worker.push_tensors`): given to the waiting
        _Recv, or kept until it asks (in the receiving device's memory when both ends are of one
        kind).

        Raises:
            The abort error if the step was aborted; InternalError if `key` was already delivered.
        """
        self.last_used = time.monotonic()
        if not is_dead:
            value = self._to_receiver(key, value)
        self._local.send(key, value, is_dead)

    def pull_announced(self, items) -> None:
        """Another task announced its values of (key, send device) `items`: pulls them (on a pull
        thread; the keys of one producer in one call), then delivers each as a pushed one; a failed
        pull aborts the step with its error."""
        tasks: set = set()
        for key, send_device in items:
            def landed(value, is_dead, err, key=key):
                if err is not None:
                    self.abort(err)
                    return
                try:
                    self._local.send(key, value, is_dead)
                except errors.OpError:
                    pass   # the step was aborted meanwhile: its receivers already woke with the error
            self._start_pull(key, send_device, landed, tasks)
        for task in tasks:
            self._submit_queued(task)

    def abort(self, error: Exception) -> None:
        """Fails every pending and future receive (local or remote) with `error`; the first wins."""
        with self._lock:
            if self._error is not None:
                return
            self._error = error
            pulls, self._pulls = self._pulls, {}
            self._queued.clear()
        self._local.abort(error)     # (cancels the step's blocking kernels, wakes local receivers)
        for cb in pulls.values():
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
        return not self._pulls and self._local.is_empty()

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
        in one RecvTensor call (`_pull_queued`): values announced together cost one call, not one
        each. With `hold`, the producer's task is added to it instead of submitted (the caller
        queues more keys, then calls `_submit_queued`)."""
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
        if first:
            if hold is not None:
                hold.add(task)
            else:
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
            with self._call_span("RecvTensor", f"{len(items)} keys"):
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
    def _call_span(self, name: str, what: str):
        """A client span `name` ("RecvTensor", "PushTensors") of this step's trace, current on this
        thread so the call carries it to the peer; yields None when the step is not traced."""
        if self.trace_context is None:
            yield None
            return
        from opentelemetry import trace
        with trace.get_tracer("kernflow.worker").start_as_current_span(
                name, context=self.trace_context, kind=trace.SpanKind.CLIENT) as span:
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
            with self._call_span("RecvTensor", key) as span:
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


# This thread's held pushes (`WorkerRendezvous.begin_pushes`): the rendezvous holding them and
# {task: (peer, [PushedTensor])}.
class _Held(threading.local):
    rdv = None      # (class attributes: every thread starts with none held)
    items = None


_batch = _Held()


# A dead tensor's RecvTensorResponse (is_dead = true), serialized.
_DEAD_CHUNK = b"\x20\x01"


def _as_op_error(e: Exception, what: str) -> errors.OpError:
    if isinstance(e, errors.OpError):
        return e
    return errors.InternalError(None, None, f"{what}: {type(e).__name__}: {e}")
