"""RunStepStream and RunStepPull: steps whose large fetched values do not travel as one message.

Large fetches through RunStep cross the wire as whole TensorProtos, twice (worker -> master in the
RunGraph response, master -> client in the RunStep response), each a single message that gRPC and
protobuf copy several times. In a streamed step every fetch stays in the rendezvous of the task that
produced it (a `_Send` to `task_routes.CLIENT_DEVICE`, placed before partitioning: `Routes.pulls`);
while the tasks run, the master pulls each fetch with RecvTensor (`codec.CHUNK_BYTES` chunks) and
forwards every chunk to the client at once, so the two hops overlap and no side ever holds the value
as one message.

The step's RunGraph calls run as in `Master.run_step` (concurrently, on pool threads, with the same
deadlines, health checks and abort-on-failure); pulls happen on the calling thread, in fetch order.
A pull that fails aborts the step, and the step's own error (the root cause) wins over the pull's.
The stream's last message (``done``) comes after every task finished; metadata rides on it.

RunStepPull (a bidirectional call) takes the master out of the data path: instead of relaying a
fetch that waits on a task it reaches over gRPC, the master first sends its `FetchLocation` (task,
address, step id, rendezvous key), and the client pulls it from that worker with RecvTensor, one hop
instead of two (`kernflow.client.fetch_stream`). Fetches on a worker inside the master's process are
still streamed here. After ``done`` the call stays open: the client may ask the master to relay a
located fetch it could not reach (``relay``), and closes its side when it has every value; only
then does the master free the step's state on the tasks (or at once, if the call breaks).
"""

from __future__ import annotations

import contextvars
import queue

from opentelemetry import context as _otel_context
from opentelemetry import trace as _otel

from kernflow.core.framework import errors

from kernflow.client import channels
from kernflow.client import codec
from kernflow.client.protobuf import master_pb2, worker_pb2
from kernflow.master.step_errors import REFRESH_ERRORS

__all__ = ["run_step_stream", "run_step_pull"]

_tracer = _otel.get_tracer("kernflow.master")
_Response = master_pb2.RunStepStreamResponse


def run_step_stream(master, request, trace_context=None, on_cancel=None, raw: bool = False):
    """Returns an iterator of the `RunStepStreamResponse`s of one step (see `Master.run_step_stream`).

    Args:
        master: the `Master`.
        request: a `RunStepRequest`.
        trace_context: the caller's OpenTelemetry context (the parent of the "Master.RunStep" span);
            default: the context current when this is called.
        on_cancel: as `Master.run_step`'s.
        raw: yield the messages serialized: a relayed chunk is the task's RecvTensor message as it
            came, with its fetch's index appended (`_fetch_index_field`), not parsed and serialized again.
    """
    if not channels.tracing_active():
        return _stream(master, request, None, on_cancel=on_cancel, raw=raw)
    parent = trace_context if trace_context is not None else _otel_context.get_current()
    return _traced(master, request, parent, on_cancel=on_cancel, raw=raw)


def run_step_pull(master, requests, trace_context=None, on_cancel=None, raw: bool = False):
    """Returns an iterator of the `RunStepStreamResponse`s of a RunStepPull (see `Master.run_step_pull`).

    Args:
        master: the `Master`.
        requests: an iterator of `RunStepPullRequest`: the step, then relay requests; it ends when
            the client closes its side of the call.
        trace_context, raw: as for `run_step_stream`.

    Raises (while iterating):
        InvalidArgumentError: the first message is not a step, or a later one not a valid relay.
    """
    requests = iter(requests)
    first = next(requests, None)
    if first is None or first.WhichOneof("kind") != "step":
        raise errors.InvalidArgumentError(None, None, "RunStepPull: the first message must be the step "
                                          f"(RunStepPullRequest.step), got {first}")
    if not channels.tracing_active():
        return _stream(master, first.step, None, requests, on_cancel, raw)
    parent = trace_context if trace_context is not None else _otel_context.get_current()
    return _traced(master, first.step, parent, requests, on_cancel, raw)


def _traced(master, request, parent, requests=None, on_cancel=None, raw=False):
    # Started explicitly and attached only around calls that need it: a generator must not keep a
    # context attached across its yields.
    span = _tracer.start_span("Master.RunStep", context=parent, kind=_otel.SpanKind.SERVER)
    span.set_attribute("kernflow.session", request.session_handle)
    span.set_attribute("kernflow.fetch_count", len(request.fetch))
    span.set_attribute("kernflow.streamed", True)
    span.set_attribute("kernflow.client_pulls", requests is not None)
    try:
        yield from _stream(master, request, _otel.set_span_in_context(span, parent), requests, on_cancel, raw)
    except BaseException as e:
        span.record_exception(e)
        span.set_status(_otel.Status(_otel.StatusCode.ERROR, f"{type(e).__name__}: {e}"))
        raise
    finally:
        span.end()


def _stream(master, request, trace_ctx, requests=None, on_cancel=None, raw=False):
    """The step's messages (serialized when `raw`); `requests` (the rest of a RunStepPull call)
    means the client pulls."""
    s, plan, options = _in_context(trace_ctx, master._plan_for, request, True)
    step_id, reqs, timeout_ms = master._run_graph_requests(s, plan, request, options)
    outcome: queue.SimpleQueue = queue.SimpleQueue()
    # (A caller that leaves while this waits for the tasks: the step is aborted there.)
    ended = master.watch_caller(on_cancel, plan.tasks, step_id, "RunStepStream")

    def run():
        try:
            outcome.put((master._run_tasks(s, plan, step_id, reqs, timeout_ms), None))
        except BaseException as e:  # noqa: BLE001 - reported to the stream
            outcome.put((None, e))

    if plan.tasks:
        ctx = contextvars.copy_context()
        if trace_ctx is not None:
            ctx.run(_otel_context.attach, trace_ctx)
        master._pool.submit(lambda: ctx.run(run))
    else:
        outcome.put(({}, None))
    pull_timeout_s = timeout_ms / 1000.0 + 1.0 if timeout_ms else master.run_graph_timeout_s
    located = {}
    finished = False
    failed = True
    try:
        if requests is not None:
            located = _locations(master, plan, step_id, len(request.fetch))
        for i in sorted(located):   # first, so the client's pulls start while the tasks run
            yield _out(_Response(fetch_index=i, location=located[i]), raw)
        for i in range(len(request.fetch)):
            if i in located:
                continue
            try:
                yield from _relay(master, plan, request, i, step_id, pull_timeout_s, trace_ctx, raw)
            except Exception as e:  # noqa: BLE001 - the step's own error is the better explanation
                err = e if isinstance(e, errors.OpError) else errors.InternalError(
                    None, None, f"pulling fetch {request.fetch[i]!r} from {plan.routes.pulls[i][0]}: "
                    f"{type(e).__name__}: {e}")
                master._abort(plan.tasks, step_id, err.error_code,
                              f"Step {step_id} aborted: fetching {request.fetch[i]!r} failed: {err.message}")
                _, step_err = outcome.get()
                finished = True
                if step_err is not None and not isinstance(step_err, (errors.AbortedError,
                                                                      errors.CancelledError)):
                    raise step_err from None
                raise err from None
        results, step_err = outcome.get()
        finished = True
        ended.append(True)
        if step_err is not None:
            raise step_err
        done = master_pb2.RunStepStreamResponse(done=True)
        master._fill_metadata(s, plan, options, results, done.metadata)
        yield _out(done, raw)
        if requests is not None:   # until the client closes its side: relays of located fetches
            relayed = set()
            for msg in requests:
                i = msg.relay if msg.WhichOneof("kind") == "relay" else -1
                if i not in located or i in relayed:
                    raise errors.InvalidArgumentError(
                        None, None, f"RunStepPull: after the step, a client may only ask once each for the "
                        f"relay of a located fetch (located: {sorted(located)}); got {msg}")
                relayed.add(i)
                yield from _relay(master, plan, request, i, step_id, pull_timeout_s, trace_ctx, raw)
        failed = False
    except errors.OpError as e:
        if isinstance(e, REFRESH_ERRORS):
            s.refresh = True
        raise
    finally:
        if not finished:   # the client went away mid-stream: stop the step
            master._abort(plan.tasks, step_id, errors.CANCELLED, f"Step {step_id} cancelled: the "
                          "RunStepStream caller went away")
        master._cleanup(plan.tasks if failed else plan.rendezvous_tasks, step_id)


def _locations(master, plan, step_id: int, n: int) -> dict:
    """{fetch index: FetchLocation} of the fetches a client can pull itself: those waiting on a
    task the master reaches over gRPC (a worker in the master's own process is relayed)."""
    out = {}
    for i in range(n):
        task, key = plan.routes.pulls[i]
        address = getattr(master._worker(task), "address", None)
        if isinstance(address, str) and address:
            out[i] = master_pb2.FetchLocation(task=task, address=address, step_id=step_id, rendezvous_key=key)
    return out


def _relay(master, plan, request, i: int, step_id: int, timeout_s: float, trace_ctx, raw=False):
    """Pulls fetch `i` from its task and yields it as RunStepStreamResponse chunks (serialized when
    `raw`)."""
    task, key = plan.routes.pulls[i]
    stream = _pull(master, task, step_id, key, timeout_s, trace_ctx)
    tag = _fetch_index_field(i)
    for chunk in _read_ahead(master._pool, stream):
        # A RunStepStreamResponse shares RecvTensorResponse's fields 1-6: the worker's message is
        # one, tagged with the fetch (raw: by appending the field, which copies the chunk once;
        # else parsed as one, no copy into a wrapper message).
        data = chunk if type(chunk) is bytes else chunk.SerializeToString()
        if raw:
            yield data + tag if tag else data
            continue
        msg = _Response.FromString(data)
        msg.fetch_index = i
        yield msg


def _fetch_index_field(i: int) -> bytes:
    """RunStepStreamResponse.fetch_index (field 7, varint) = i, serialized (b"" for 0, its default):
    appended to a message's bytes, it sets the field (protobuf keeps a field's last value)."""
    return b"\x38" + codec._varint_bytes(i) if i else b""


def _out(msg, raw: bool):
    return msg.SerializeToString() if raw else msg


def _pull(master, task, step_id, key, timeout_s, trace_ctx):
    """The chunks of one fetch, pulled with RecvTensor (a "RecvTensor" span when traced).

    Chunks are RecvTensorResponse messages, or their serialized bytes from a gRPC worker client
    (``recv_tensor_raw``), which the master forwards without parsing the payload twice.
    """
    req = worker_pb2.RecvTensorRequest(step_id=step_id, rendezvous_key=key)
    if trace_ctx is None:
        return _start_pull(master._worker(task), req, timeout_s)
    return _traced_pull(master, task, req, timeout_s, trace_ctx)


def _start_pull(client, req, timeout_s):
    raw = getattr(client, "recv_tensor_raw", None)
    return raw(req, timeout=timeout_s) if raw is not None else client.recv_tensor(req, timeout=timeout_s)


def _traced_pull(master, task, req, timeout_s, parent):
    span = _tracer.start_span("RecvTensor", context=parent, kind=_otel.SpanKind.CLIENT)
    span.set_attribute("kernflow.task", task)
    span.set_attribute("kernflow.step_id", req.step_id)
    span.set_attribute("kernflow.rendezvous_key", req.rendezvous_key)
    try:
        token = _otel_context.attach(_otel.set_span_in_context(span, parent))
        try:   # the call (and its metadata) is made here, with the span current
            stream = iter(_start_pull(master._worker(task), req, timeout_s))
        finally:
            _otel_context.detach(token)
        n = 0
        for chunk in stream:
            n += len(chunk) if type(chunk) is bytes else len(chunk.content)
            yield chunk
        span.set_attribute("kernflow.bytes", n)
    except BaseException as e:
        span.record_exception(e)
        span.set_status(_otel.Status(_otel.StatusCode.ERROR, f"{type(e).__name__}: {e}"))
        raise
    finally:
        span.end()


_AHEAD = 8          # chunks pulled ahead of the one being forwarded (1 MiB each)
_END = object()


def _read_ahead(pool, stream):
    """Iterates `stream` on a pool thread, up to `_AHEAD` items ahead of the consumer.

    The pull from the worker then proceeds while the previous chunk is being written to the client
    (a gRPC write blocks its thread until the transport takes the message).
    """
    q: queue.Queue = queue.Queue(maxsize=_AHEAD)
    stop = []

    def reader():
        try:
            for item in stream:
                while not stop:
                    try:
                        q.put((item, None), timeout=0.5)
                        break
                    except queue.Full:
                        continue
                if stop:
                    return
            q.put((_END, None))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            q.put((_END, e))
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()   # a pull abandoned midway cancels its call

    pool.submit(reader)
    try:
        while True:
            item, err = q.get()
            if item is _END:
                if err is not None:
                    raise err
                return
            yield item
    finally:
        stop.append(True)
        while not q.empty():   # unblock a reader waiting to put
            q.get_nowait()


def _in_context(trace_ctx, fn, *args):
    if trace_ctx is None:
        return fn(*args)
    token = _otel_context.attach(trace_ctx)
    try:
        return fn(*args)
    finally:
        _otel_context.detach(token)
