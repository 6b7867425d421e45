"""W3C trace context travels in gRPC metadata from a client call into the servicer."""

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from kernflow.client import channels
from kernflow.client.protobuf import worker_pb2, worker_pb2_grpc
from kernflow.client.rpc_errors import rpc_method
from kernflow.client.worker_client import GrpcWorkerClient


class TracingWorker(worker_pb2_grpc.WorkerServiceServicer):
    def __init__(self):
        self.seen = []

    @rpc_method
    def GetStatus(self, request, context):
        with channels.attach_incoming_context(context):
            self.seen.append(trace.get_current_span().get_span_context())
        return worker_pb2.GetStatusResponse(job="worker")


def _provider():
    current = trace.get_tracer_provider()
    if not isinstance(current, TracerProvider):
        current = TracerProvider()
        trace.set_tracer_provider(current)
    return current


def test_trace_context_reaches_the_server(start_server):
    _provider()
    srv = start_server(worker_pb2_grpc.add_WorkerServiceServicer_to_server, TracingWorker())
    client = GrpcWorkerClient(srv.address, "/job:worker/replica:0/task:0")
    assert channels.outgoing_metadata() is None  # no current span: nothing to send
    with trace.get_tracer("test").start_as_current_span("client step") as span:
        md = dict(channels.outgoing_metadata())
        assert "traceparent" in md
        client.get_status()
    remote = srv.servicer.seen[0]
    assert remote.trace_id == span.get_span_context().trace_id
    assert remote.span_id == span.get_span_context().span_id and remote.is_remote
