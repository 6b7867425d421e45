"""`RecvTensorService`: how a `Worker` serves RecvTensor (one key, or several in one call).

A mixin of `kernflow.worker.worker.Worker`: it uses the worker's ``task_name``, ``recv_timeout_s``,
``is_local_device``, ``device_by_name``, ``_step``, ``_recv_left`` and ``_retire_if_done``. Every
call hands the step's rendezvous back (`_recv_left`) when its wait ends, however it ends: one made
by the call for a step whose RunGraph has not come yet is dropped then, unless another call waits
in it.
"""

from __future__ import annotations

import queue
import threading
import time

from opentelemetry import context as _otel_context
from opentelemetry import trace as _otel

from kernflow.client import channels
from kernflow.client import codec
from kernflow.client import transports as _transports
from kernflow.client.protobuf import worker_pb2
from kernflow.core.framework import errors
from kernflow.worker.rendezvous import device_type_of, on_host, parse_key

__all__ = ["RecvTensorService"]

_tracer = _otel.get_tracer("kernflow.worker")
_tracing = channels.tracing_active


class RecvTensorService:
    """The RecvTensor methods of a `Worker`."""

    def recv_tensor(self, req, timeout=None, on_cancel=None, trace_context=None):
        """Returns an iterator of the RecvTensorResponse chunks of the tensor a local _Send made.

        Waits until the _Send of `req.rendezvous_key` happened in step `req.step_id` (registering
        on the step's rendezvous, created here if this call comes before the step's RunGraph).

        Args:
            req: a `RecvTensorRequest`.
            timeout: how long to wait, in seconds (default `recv_timeout_s`).
            on_cancel: optional ``on_cancel(fn)`` that calls `fn` when the caller goes away (the
                servicer passes `context.add_callback`); the wait then ends with CancelledError.
            trace_context: the caller's OpenTelemetry context (the servicer passes the one from the
                call metadata); default: the context current when this is called.

        Raises (while iterating):
            InvalidArgumentError: a malformed key, or one whose producer is not on this task.
            DeadlineExceededError: nothing was sent in time. AbortedError (or the abort's error):
            the step was aborted or already cleaned up.
        """
        R = worker_pb2.RecvTensorResponse
        return (R.FromString(b) for b in self.recv_tensor_raw(req, timeout, on_cancel, trace_context))

    def recv_tensor_raw(self, req, timeout=None, on_cancel=None, trace_context=None):
        """`recv_tensor`, but yields each RecvTensorResponse serialized (what the gRPC servicer sends,
        and what in-process pullers split with `codec.split_content`): the payload is copied at most
        once on the way, and not at all for a variable's snapshot (`codec.encode_recv_chunks`)."""
        if not _tracing():
            return self._recv_tensor(req, timeout, on_cancel)
        if trace_context is None:
            trace_context = _otel_context.get_current()
        return self._traced_recv_tensor(req, timeout, on_cancel, trace_context)

    def _traced_recv_tensor(self, req, timeout, on_cancel, parent):
        # A span started explicitly (never made current): a generator must not keep a context
        # attached across its yields.
        span = _tracer.start_span("Worker.RecvTensor", context=parent, kind=_otel.SpanKind.SERVER)
        span.set_attribute("kernflow.task", self.task_name)
        span.set_attribute("kernflow.step_id", req.step_id)
        span.set_attribute("kernflow.rendezvous_key", req.rendezvous_key)
        try:
            n, via = 0, "grpc"
            for buf in self._recv_tensor(req, timeout, on_cancel):
                msg, content = codec.split_content(buf, worker_pb2.RecvTensorResponse)
                if msg.transport_payload:   # carried by the transport the caller chose
                    n, via = n + msg.total_bytes, req.transport
                else:
                    n += len(content)
                yield buf
            span.set_attribute("kernflow.bytes", n)
            span.set_attribute("kernflow.transport", via)
        except BaseException as e:
            span.record_exception(e)
            span.set_status(_otel.Status(_otel.StatusCode.ERROR, f"{type(e).__name__}: {e}"))
            raise
        finally:
            span.end()

    def _recv_tensor(self, req, timeout, on_cancel):
        if req.more_rendezvous_keys:
            yield from self._recv_many(req, timeout, on_cancel)
            return
        (end,) = self._key_ends([req.rendezvous_key])
        wait_s = self._wait_s(timeout)
        rdv = self._step(req.step_id, for_recv=True)
        try:
            value, is_dead, err = self._wait_one(rdv, req, wait_s, on_cancel)
        finally:
            self._recv_left(req.step_id, rdv)
        if err is not None:
            raise err
        self._retire_if_done(req.step_id, rdv)
        value = on_host(end, value, is_dead)
        if req.transport:   # the transport the caller chose answers, or declines (then in-band)
            answer = _transports.serve(req, value, is_dead, rdv.cancellation)
            if answer is not None:
                yield from answer
                return
        # (strings as chunks of their string-list encoding: no message holds a whole large string)
        yield from codec.encode_recv_chunks(value, is_dead, string_list=True)

    def _wait_one(self, rdv, req, wait_s: float, on_cancel):
        """Waits up to `wait_s` for the value of `req.rendezvous_key`; returns (value, is_dead, error)."""
        got = threading.Event()
        box = []

        def cb(value, is_dead, err):
            box.append((value, is_dead, err))
            got.set()

        key = req.rendezvous_key
        rdv.recv_local(key, cb)
        if on_cancel is not None:
            def cancel():
                if rdv.cancel_local(key, cb):
                    cb(None, False, errors.CancelledError(None, None, f"RecvTensor({key!r}) cancelled"))
            on_cancel(cancel)
        if not got.wait(wait_s):
            if rdv.cancel_local(key, cb):
                raise errors.DeadlineExceededError(
                    None, None, f"{self.task_name}: tensor {key!r} of step {req.step_id} was not "
                    f"produced within {wait_s:g} s")
            got.wait(5.0)   # taken by a send or abort at this instant: its callback is running
            if not box:
                raise errors.InternalError(None, None, f"RecvTensor({key!r}) lost its value")
        return box[0]

    def recv_tensor_push(self, req, emit, finish, on_cancel, call_at, timeout=None) -> bool:
        """RecvTensor answered from the threads that produce its values: no thread waits for them.

        For servers that may send from any thread (the same-host channel): each value's serialized
        responses, exactly as `recv_tensor_raw` yields them, go to ``emit(bytes)`` from the thread
        whose `_Send` delivered the value (or this one, when it is here already), then
        ``finish(error or None)`` is called once.

        Args:
            on_cancel: ``on_cancel(fn)`` calls `fn` when the caller goes away.
            call_at: ``call_at(monotonic time, fn) -> handle with cancel()``: runs `fn` at the
                call's deadline.
            timeout: the call's own deadline, in seconds from now; the wait is bounded by it, or
                by `recv_timeout_s` when it has none (as `recv_tensor_raw`'s).

        Returns:
            False, having done nothing, when the call needs `recv_tensor_raw` (a transport other than
            in-band, or tracing, which spans the generator).

        Raises:
            InvalidArgumentError: a malformed key, or one produced on another task (before anything
            was registered). The step's abort error, as RecvTensor's.
        """
        if req.transport or _tracing():
            return False
        keys = [req.rendezvous_key, *req.more_rendezvous_keys]
        ends = self._key_ends(keys)
        rdv = self._step(req.step_id, for_recv=True)
        call = _PushedRecv(self, req.step_id, rdv, keys, ends, emit, finish)
        call.start(on_cancel, call_at, self._wait_s(timeout))
        return True

    def _wait_s(self, timeout) -> float:
        """How long a RecvTensor waits: the call's own deadline, else `recv_timeout_s`."""
        return timeout if timeout is not None and timeout > 0 else self.recv_timeout_s

    def _key_ends(self, keys) -> list:
        """(sending device, receiving device type) of each key of a RecvTensor call.

        Raises:
            InvalidArgumentError: a key repeated, malformed, or produced on another task.
        """
        if len(set(keys)) != len(keys):
            raise errors.InvalidArgumentError(None, None, f"RecvTensor on {self.task_name}: a key is "
                                              f"repeated in {keys}")
        ends = []
        for key in keys:
            fields = parse_key(key)
            if not self.is_local_device(fields[0]):
                raise errors.InvalidArgumentError(None, None, f"RecvTensor on {self.task_name} for "
                                                  f"{key!r}: its sender is not on this task")
            ends.append((self.device_by_name(fields[0]), device_type_of(fields[2])))
        return ends

    def _recv_many(self, req, timeout, on_cancel):
        """RecvTensor of several keys of one step (`more_rendezvous_keys`): each value's messages as
        soon as it is sent here, its first message marked with `key_number` (1 + the key's index).
        In-band only. The wait for all of them is bounded by `timeout` (default `recv_timeout_s`)."""
        keys = [req.rendezvous_key, *req.more_rendezvous_keys]
        if req.transport:
            raise errors.InvalidArgumentError(None, None, f"RecvTensor on {self.task_name}: a call of "
                                              f"{len(keys)} keys takes no transport ({req.transport!r})")
        ends = self._key_ends(keys)
        wait_s = self._wait_s(timeout)
        rdv = self._step(req.step_id, for_recv=True)
        got: queue.SimpleQueue = queue.SimpleQueue()
        callbacks = [lambda value, is_dead, err, i=i: got.put((i, value, is_dead, err))
                     for i in range(len(keys))]
        pending = set(range(len(keys)))

        def withdraw(make_error) -> None:
            for i in list(pending):
                if rdv.cancel_local(keys[i], callbacks[i]):
                    callbacks[i](None, False, make_error(keys[i]))

        for key, cb in zip(keys, callbacks):
            rdv.recv_local(key, cb)
        if on_cancel is not None:
            on_cancel(lambda: withdraw(lambda k: errors.CancelledError(None, None, f"RecvTensor({k!r}) "
                                                                       f"cancelled")))
        deadline = time.monotonic() + wait_s
        timed_out = False
        try:
            while pending:
                try:
                    i, value, is_dead, err = got.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    if timed_out:
                        raise errors.InternalError(None, None, f"RecvTensor of {keys} lost a value") from None
                    timed_out = True
                    withdraw(lambda k: errors.DeadlineExceededError(
                        None, None, f"{self.task_name}: tensor {k!r} of step {req.step_id} was not "
                        f"produced within {wait_s:g} s"))
                    deadline = time.monotonic() + 5.0   # values taken by a send at this instant
                    continue
                pending.discard(i)
                if err is not None:
                    raise err
                value = on_host(ends[i], value, is_dead)
                marker = _key_number_field(i + 1)
                # (strings in string_val: the receiver counts each value's elements, `split_values`)
                for n, chunk in enumerate(codec.encode_recv_chunks(value, is_dead)):
                    yield chunk + marker if n == 0 else chunk
        finally:
            if pending:   # the call ended early (an error, or the caller went away)
                withdraw(lambda k: errors.CancelledError(None, None, f"RecvTensor({k!r}) ended"))
            self._recv_left(req.step_id, rdv)
        self._retire_if_done(req.step_id, rdv)


class _PushedRecv:
    """One `RecvTensorService.recv_tensor_push` call: its keys' callbacks, and the call's end.

    Invariant: `finish` runs once, after the last value was emitted or at the first error (a
    failed value, the deadline, the caller leaving, a failed emit); each value's messages are
    emitted together under `_lock`, never after the end.
    """

    def __init__(self, service, step_id, rdv, keys, ends, emit, finish):
        self._service, self._step_id, self._rdv = service, step_id, rdv
        self._keys, self._ends = keys, ends
        self._emit, self._finish = emit, finish
        self._many = len(keys) > 1
        self._lock = threading.Lock()
        self._left = set(range(len(keys)))
        self._ended = False
        self._timer = None
        self._callbacks = [lambda v, d, e, i=i: self._deliver(i, v, d, e) for i in range(len(keys))]

    def start(self, on_cancel, call_at, wait_s: float) -> None:
        self._timer = call_at(time.monotonic() + wait_s, lambda: self._end(errors.DeadlineExceededError(
            None, None, f"{self._service.task_name}: a tensor of step {self._step_id} was not produced "
            f"within {wait_s:g} s (keys {self._keys})")))
        on_cancel(lambda: self._end(errors.CancelledError(None, None, f"RecvTensor({self._keys}) cancelled")))
        for key, cb in zip(self._keys, self._callbacks):
            if self._ended:
                break
            self._rdv.recv_local(key, cb)   # (calls cb at once when the value is here)

    def _deliver(self, i: int, value, is_dead, err) -> None:
        if err is not None:
            self._end(err)
            return
        value = on_host(self._ends[i], value, is_dead)
        marker = _key_number_field(i + 1) if self._many else b""
        with self._lock:
            if self._ended:
                return
            self._left.discard(i)
            last = not self._left
            try:
                for n, chunk in enumerate(codec.encode_recv_chunks(value, is_dead,
                                                                   string_list=not self._many)):
                    self._emit(chunk + marker if n == 0 else chunk)
            except Exception as e:  # noqa: BLE001 - the connection broke: the call ends
                self._left.add(i)
                err = e
        if err is not None:
            self._end(err)
        elif last:
            self._end(None)

    def _end(self, err) -> None:
        with self._lock:
            if self._ended:
                return
            self._ended = True
            left = list(self._left)
        if self._timer is not None:
            self._timer.cancel()
        for i in left:   # withdrawn; one taken by a send at this instant finds the call ended
            self._rdv.cancel_local(self._keys[i], self._callbacks[i])
        self._service._recv_left(self._step_id, self._rdv)
        if err is None:
            self._service._retire_if_done(self._step_id, self._rdv)
        self._finish(err)


def _key_number_field(n: int) -> bytes:
    """RecvTensorResponse.key_number (field 8, varint) = n, serialized: appended to a message's
    bytes it sets the field (protobuf merges concatenated messages)."""
    out = bytearray(b"\x40")
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)
