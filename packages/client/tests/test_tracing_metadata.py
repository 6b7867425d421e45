"""W3C trace context in gRPC metadata: `channels.outgoing_metadata` / `incoming_context`.

Every kernflow client call carries the caller's span as a ``traceparent`` header; the servers read it
back so their spans join the caller's trace. Covers unary calls (GrpcSession -> RunStep, worker
management calls) and the server-streaming RecvTensor, and the no-SDK fast path.
"""

from __future__ import annotations

import numpy as np
import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import kernflow.core as kf
from kernflow.client import channels, codec, protocol
from kernflow.client.grpc_session import GrpcSession
from kernflow.client.protobuf import master_pb2, master_pb2_grpc, worker_pb2, worker_pb2_grpc
from kernflow.client.rpc_errors import rpc_method
from kernflow.client.worker_client import GrpcWorkerClient

_tracer = trace.get_tracer("test")


@pytest.fixture(scope="module", autouse=True)
def sdk_provider():
    current = trace.get_tracer_provider()
    if not isinstance(current, TracerProvider):
        current = TracerProvider()
        trace.set_tracer_provider(current)
    yield current


class _Ctx:
    """A stand-in ServicerContext with the given invocation metadata."""

    def __init__(self, md):
        self._md = md

    def invocation_metadata(self):
        return self._md


def _span_of(ctx):
    return trace.get_current_span(ctx).get_span_context()


def test_outgoing_metadata_carries_the_current_span():
    assert channels.outgoing_metadata() is None   # an SDK, but no span: nothing to send
    with _tracer.start_as_current_span("caller") as span:
        md = dict(channels.outgoing_metadata())
    sc = span.get_span_context()
    version, trace_id, span_id, flags = md["traceparent"].split("-")
    assert version == "00" and int(trace_id, 16) == sc.trace_id and int(span_id, 16) == sc.span_id
    assert int(flags, 16) & 1   # sampled


def test_incoming_context_round_trip():
    with _tracer.start_as_current_span("caller") as span:
        md = channels.outgoing_metadata()
    ctx = channels.incoming_context(_Ctx(md + (("x-other", "1"), ("bin-bin", b"\x00"))))
    remote = _span_of(ctx)
    assert remote.trace_id == span.get_span_context().trace_id
    assert remote.span_id == span.get_span_context().span_id and remote.is_remote
    with _tracer.start_as_current_span("child", context=ctx) as child:
        assert child.parent.span_id == span.get_span_context().span_id


def test_incoming_context_is_none_without_headers():
    assert channels.incoming_context(_Ctx(())) is None
    assert channels.incoming_context(_Ctx(None)) is None
    assert channels.incoming_context(_Ctx((("user-agent", "x"),))) is None


def test_attach_incoming_context_restores_the_previous_context():
    with _tracer.start_as_current_span("caller"):
        md = channels.outgoing_metadata()
    before = otel_context.get_current()
    with channels.attach_incoming_context(_Ctx(md)):
        assert trace.get_current_span().get_span_context().is_remote
    assert otel_context.get_current() == before
    with channels.attach_incoming_context(_Ctx(())):   # nothing to attach: a no-op
        assert otel_context.get_current() == before


def test_nothing_is_sent_or_read_without_an_sdk(monkeypatch):
    with _tracer.start_as_current_span("caller"):
        md = channels.outgoing_metadata()
        monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)   # as before any SDK was installed
        assert not channels.tracing_active()
        assert channels.outgoing_metadata() is None
    assert channels.incoming_context(_Ctx(md)) is None


class _RecordingMaster(master_pb2_grpc.MasterServiceServicer):
    """Records the caller's span context of every RPC (as a server does before starting spans)."""

    def __init__(self):
        self.seen: dict[str, list] = {}

    def _see(self, method, context):
        ctx = channels.incoming_context(context)
        self.seen.setdefault(method, []).append(None if ctx is None else _span_of(ctx))

    @rpc_method
    def CreateSession(self, request, context):
        self._see("CreateSession", context)
        return master_pb2.CreateSessionResponse(session_handle="h", graph_version=0,
                                                protocol_version=protocol.PROTOCOL_VERSION)

    @rpc_method
    def RunStep(self, request, context):
        self._see("RunStep", context)
        resp = master_pb2.RunStepResponse()
        for name in request.fetch:
            resp.tensor.add(name=name, tensor=codec.tensor_to_proto(np.float32(1.0)))
        return resp

    @rpc_method
    def CloseSession(self, request, context):
        self._see("CloseSession", context)
        return master_pb2.CloseSessionResponse()


def test_session_run_span_reaches_the_master(start_server):
    srv = start_server(master_pb2_grpc.add_MasterServiceServicer_to_server, _RecordingMaster())
    g = kf.Graph()
    with g.as_default():
        y = kf.constant(1.0, name="y")
    sess = GrpcSession(f"grpc://{srv.address}", g)
    with _tracer.start_as_current_span("Session.run") as span:
        assert sess.run((), [], (y.name,), ()) == [1.0]
    sess.close()   # outside any span: no trace context on the wire
    sc = span.get_span_context()
    want = [(sc.trace_id, sc.span_id)]
    assert [(s.trace_id, s.span_id) for s in srv.servicer.seen["CreateSession"]] == want
    assert [(s.trace_id, s.span_id) for s in srv.servicer.seen["RunStep"]] == want
    assert srv.servicer.seen["CloseSession"] == [None]


class _RecordingWorker(worker_pb2_grpc.WorkerServiceServicer):
    def __init__(self):
        self.seen: dict[str, list] = {}

    @rpc_method
    def RunGraph(self, request, context):
        self.seen.setdefault("RunGraph", []).append(_span_of(channels.incoming_context(context)))
        return worker_pb2.RunGraphResponse()

    @rpc_method
    def RecvTensor(self, request, context):
        ctx = channels.incoming_context(context)   # read before the first yield
        self.seen.setdefault("RecvTensor", []).append(_span_of(ctx))
        yield from codec.iter_recv_chunks(np.arange(10, dtype=np.float32), chunk_bytes=16)


def test_worker_calls_and_streams_carry_the_span(start_server):
    srv = start_server(worker_pb2_grpc.add_WorkerServiceServicer_to_server, _RecordingWorker())
    client = GrpcWorkerClient(srv.address, "/job:worker/replica:0/task:0")
    with _tracer.start_as_current_span("RunGraph") as run_span:
        client.run_graph(worker_pb2.RunGraphRequest(graph_handle="g", step_id=1), timeout=10)
    with _tracer.start_as_current_span("RecvTensor") as recv_span:
        stream = client.recv_tensor(worker_pb2.RecvTensorRequest(step_id=1, rendezvous_key="k"), timeout=10)
    value, is_dead = codec.assemble_recv_chunks(stream)   # consumed after the span ended: still its call
    np.testing.assert_array_equal(value, np.arange(10, dtype=np.float32))
    assert srv.servicer.seen["RunGraph"][0].span_id == run_span.get_span_context().span_id
    assert srv.servicer.seen["RecvTensor"][0].span_id == recv_span.get_span_context().span_id
    assert srv.servicer.seen["RecvTensor"][0].trace_id == recv_span.get_span_context().trace_id
