"""`WorkerServicer`: the gRPC face of a `Worker` (one line per RPC, errors become statuses).

Every exception a method raises ends that RPC with the matching status code (`rpc_errors.rpc_method`:
a TF error keeps its code and message, a malformed request is INVALID_ARGUMENT) and the server keeps
serving. RunGraph and RecvTensor bound their waits by the RPC's own deadline, and a RunGraph whose
caller goes away (cancelled, or past its deadline) aborts its step here.

The caller's W3C trace context (gRPC metadata) is the parent of the worker's spans: RunGraph's and
RegisterGraph's is made current while the worker runs them, RecvTensor's is handed to the worker's
generator explicitly (a generator must not hold a context attached across its yields).

RecvTensor's responses leave as the bytes the worker serialized itself (`codec.encode_recv_chunks`:
the payload copied once, or not at all for a variable's snapshot), so the servicer must be
registered with `add_to_server`, which sets no response serializer for that method. RunGraph's
response holding a large value is a `tensor_requests.SplitMessage` (the value's bytes stay in the
array): registered by `add_to_server`, it is serialized by joining its pieces, the value's one copy
(the same-host channel calls its ``SerializeToString``); registered with the generated
``add_WorkerServiceServicer_to_server``, it is made a protobuf message first. A response over the
message limit is refused here, naming the value (`limits.check_response`), before gRPC would
refuse it with no name.
"""

from __future__ import annotations

import logging
import threading
import time

from kernflow.client import channels
from kernflow.client import limits
from kernflow.client import tensor_requests
from kernflow.client.protobuf import worker_pb2
from kernflow.client.protobuf import worker_pb2_grpc
from kernflow.client.rpc_errors import rpc_method, status_for_exception

__all__ = ["WorkerServicer", "add_to_server", "serve_locally"]

_log = logging.getLogger(__name__)

# Methods whose handlers yield their responses already serialized (see `channels.add_servicer`).
RAW_RESPONSES = ("RecvTensor",)
# ... and those that gRPC's registration (`add_to_server`) also gets serialized (`_GrpcFace`).
GRPC_RAW_RESPONSES = RAW_RESPONSES + ("RunGraph", "RunGraphStream")


def add_to_server(servicer, server) -> None:
    """Registers `servicer` (a `WorkerServicer`) on a `grpc.Server`, RecvTensor's responses raw and
    RunGraph's serialized from the values' memory."""
    servicer.raw_responses = True
    channels.add_servicer(server, worker_pb2.DESCRIPTOR.services_by_name["WorkerService"],
                          _GrpcFace(servicer), raw_responses=GRPC_RAW_RESPONSES, split_requests=True)


class _GrpcFace:
    """A `WorkerServicer` as gRPC serves it: RunGraph's and RunGraphStream's responses serialized
    here (`tensor_requests.serialize`: a SplitMessage's pieces joined, the values' one copy)."""

    def __init__(self, servicer):
        self._servicer = servicer

    def __getattr__(self, name):
        return getattr(self._servicer, name)

    def RunGraph(self, request, context):
        return tensor_requests.serialize(self._servicer.RunGraph(request, context))

    def RunGraphStream(self, request_iterator, context):
        for resp in self._servicer.RunGraphStream(request_iterator, context):
            yield tensor_requests.serialize(resp)


def serve_locally(servicer, name: str = "worker", also=()):
    """Also serves `servicer` on this host's same-host channel (`kernflow.client.local_channel`),
    which its GetStatus then offers; call after `add_to_server`.

    Args:
        also: more services on the same channel, as ``(service descriptor, servicer, messages
            module, raw_responses)`` (the master of a task server: a client on this host then calls
            RunStep without gRPC). Method names must differ from the worker service's.

    Returns:
        The started `LocalChannelServer` (stop it with the gRPC server), or None where the channel
        is turned off or no socket can be made (then callers use gRPC; logged).
    """
    from kernflow.client import local_channel, local_server
    if not local_channel.enabled():
        return None
    handlers = local_server.servicer_handlers(servicer, worker_pb2.DESCRIPTOR.services_by_name["WorkerService"],
                                               worker_pb2, RAW_RESPONSES if servicer.raw_responses else (),
                                               split_requests=True)
    for service, other, messages, raw in also:
        more = local_server.servicer_handlers(other, service, messages, raw, split_requests=True)
        if more.keys() & handlers.keys():
            raise ValueError(f"{service.full_name} repeats methods of the worker service: "
                             f"{sorted(more.keys() & handlers.keys())}")
        handlers.update(more)
    try:
        server = local_server.LocalChannelServer(handlers, name)
    except OSError as e:
        _log.warning("no same-host channel for %s (callers on this host use gRPC): %s", name, e)
        return None
    servicer.local_offer = server.offer
    return server


def _remaining(context):
    """Seconds left before the RPC's deadline, or None when it has none."""
    t = context.time_remaining()
    return None if t is None or t > 1e8 else max(t, 0.001)


class RunGraphStats:
    """What GetStatus reports of the RunGraph calls a server finished: counts and the last failure."""

    MAX_ERROR_CHARS = 1000

    def __init__(self):
        self._lock = threading.Lock()
        self.runs = 0
        self.failed = 0
        self.last_error = ""
        self.last_error_time_ms = 0
        self.start_time_ms = int(time.time() * 1000)

    def finished(self, error: BaseException | None = None) -> None:
        """Counts one RunGraph, failed with `error` when that is not None."""
        with self._lock:
            self.runs += 1
            if error is not None:
                self.failed += 1
                self.last_error = f"{type(error).__name__}: {error}"[:self.MAX_ERROR_CHARS]
                self.last_error_time_ms = int(time.time() * 1000)

    def fill(self, resp: worker_pb2.GetStatusResponse) -> None:
        """Writes the counts and the last failure into a GetStatusResponse."""
        with self._lock:
            resp.graph_runs, resp.graph_runs_failed = self.runs, self.failed
            resp.last_error, resp.last_error_time_ms = self.last_error, self.last_error_time_ms
        resp.start_time_ms = self.start_time_ms


class WorkerServicer(worker_pb2_grpc.WorkerServiceServicer):
    """Serves one `Worker` (or any object with its methods) over gRPC."""

    def __init__(self, worker, budget=None):
        self._worker = worker
        # RunGraph and RecvTensor, which may block, take a slot (`channels.CallBudget`), so the
        # other calls always find a thread of the server's pool.
        self.budget = budget if budget is not None else channels.CallBudget(128)
        # Set by `add_to_server`: RecvTensor yields serialized messages. (Registered with the
        # generated add_WorkerServiceServicer_to_server, it yields messages.)
        self.raw_responses = False
        # What RecvTensor served (GetStatus reports it): serialized response bytes and calls.
        self._count_lock = threading.Lock()
        self.recv_tensor_bytes_served = 0
        self.recv_tensor_calls_served = 0
        self.run_stats = RunGraphStats()   # RunGraph calls served (GetStatus reports them)
        self.local_offer = None            # set by `serve_locally`: offered in GetStatus

    @rpc_method
    def GetStatus(self, request, context):
        resp = self._worker.get_status(request)
        resp.recv_tensor_bytes_served = self.recv_tensor_bytes_served
        resp.recv_tensor_calls_served = self.recv_tensor_calls_served
        self.run_stats.fill(resp)
        if self.local_offer is not None:
            resp.local_channel.CopyFrom(self.local_offer)
        return resp

    @rpc_method
    def RegisterGraph(self, request, context):
        with channels.attach_incoming_context(context):
            return self._worker.register_graph(request)

    @rpc_method
    def DeregisterGraph(self, request, context):
        return self._worker.deregister_graph(request)

    @rpc_method
    def RunGraph(self, request, context):
        # The worker registers a callback that aborts the step if the caller goes away while it
        # runs (not for a small inline step, which cannot block).
        with self.budget.slot("RunGraph"), channels.attach_incoming_context(context):
            try:
                resp = self._worker.run_graph(request, timeout=_remaining(context),
                                              on_cancel=context.add_callback)
                resp = self._sendable(resp)
            except Exception as e:
                self.run_stats.finished(e)
                raise
        self.run_stats.finished()
        return resp

    def _sendable(self, resp):
        """`resp` checked against the message limit; a protobuf message unless `add_to_server`
        registered this servicer (which serializes a SplitMessage itself)."""
        if type(resp) is not tensor_requests.SplitMessage:   # (a small step's: nothing to check)
            return resp
        limits.check_response(resp, f"RunGraph on {getattr(self._worker, 'task_name', 'this worker')}")
        return resp if self.raw_responses else tensor_requests.whole(resp)

    @rpc_method
    def RunGraphStream(self, request_iterator, context):
        # One response per request, in order; a step's error goes into its response and the
        # stream stays open for the next step. A refusal (`not_inline`: nothing ran) is no run.
        for request in request_iterator:
            try:
                resp = self._sendable(self._worker.run_graph_inline(request))
            except Exception as e:  # noqa: BLE001 - reported in the response
                self.run_stats.finished(e)
                status, details = status_for_exception(e)
                yield worker_pb2.RunGraphResponse(status_code=status.value[0],
                                                  status_error_message=details)
                continue
            if not resp.not_inline:
                self.run_stats.finished()
            yield resp

    @rpc_method
    def RecvTensor(self, request, context):
        yield from self.budget.held("RecvTensor", lambda: self._recv_tensor(request, context))

    def _recv_tensor(self, request, context):
        parent = channels.incoming_context(context)
        kw = {} if parent is None else {"trace_context": parent}
        chunks = self._worker.recv_tensor_raw(request, timeout=_remaining(context),
                                              on_cancel=context.add_callback, **kw)
        with self._count_lock:
            self.recv_tensor_calls_served += 1
        R = worker_pb2.RecvTensorResponse
        for b in chunks:
            with self._count_lock:
                self.recv_tensor_bytes_served += len(b)
            yield b if self.raw_responses else R.FromString(b)

    def RecvTensorPush(self, request, context, emit, finish, call_at) -> bool:
        """RecvTensor for the same-host channel, answered from the threads that produce the values
        (`Worker.recv_tensor_push`); False when the call needs the generator form (`RecvTensor`)."""
        def counted(data):
            with self._count_lock:
                self.recv_tensor_bytes_served += len(data)
            emit(data)

        started = self._worker.recv_tensor_push(request, counted, finish, context.add_callback, call_at,
                                                _remaining(context))
        if started:
            with self._count_lock:
                self.recv_tensor_calls_served += 1
        return started

    @rpc_method
    def PushTensors(self, request, context):
        with channels.attach_incoming_context(context):
            return self._worker.push_tensors(request)

    @rpc_method
    def CleanupGraph(self, request, context):
        return self._worker.cleanup_graph(request)

    @rpc_method
    def AbortStep(self, request, context):
        return self._worker.abort_step(request)

    @rpc_method
    def CleanupAll(self, request, context):
        return self._worker.cleanup_all(request)
