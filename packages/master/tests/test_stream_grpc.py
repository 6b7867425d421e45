"""Large fetches over gRPC: `kf.Session(target)` -> RunStepStream -> RecvTensor, all in this process."""

from __future__ import annotations

import numpy as np
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import kernflow.core as kf
from kernflow.client.worker_client import GrpcWorkerClient
from kernflow.core.framework import errors
from kernflow.master.master import Master
from kernflow.master.server import MasterServer
from kernflow.worker.server import WorkerServer

T0 = "/job:worker/replica:0/task:0"


class CountingMaster(Master):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.unary = self.streamed = 0

    def run_step(self, request):
        self.unary += 1
        return super().run_step(request)

    def run_step_stream(self, request, trace_context=None):
        self.streamed += 1
        return super().run_step_stream(request, trace_context)


@pytest.fixture
def cluster():
    """Two worker servers and a MasterServer over them (task 0 is the client task)."""
    clients = {}

    def resolve(task):
        return clients[task]
    workers = [WorkerServer("worker", i, port=0, resolver=resolve) for i in range(2)]
    for i, w in enumerate(workers):
        name = f"/job:worker/replica:0/task:{i}"
        clients[name] = GrpcWorkerClient(w.address, name)
    master = CountingMaster(resolve, tasks=list(clients), local_task=T0)
    server = MasterServer(master, port=0)
    yield server, master
    server.stop(0)
    master.close()
    for w in workers:
        w.stop(0)


def test_large_fetches_stream_and_small_ones_do_not(cluster):
    server, master = cluster
    big = np.random.RandomState(0).rand(1 << 20).astype(np.float32)      # 4 MiB
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [], name="x")
        with kf.device("/job:worker/task:1"):
            v = kf.Variable(big, name="v")
            scaled = v * x
        n = kf.placeholder(kf.int32, [], name="n")
        dynamic = kf.fill([n], 7.0)          # shape unknown until run
    with kf.Session(server.target, graph=g) as sess:
        sess.run(v.initializer)
        got = sess.run(v)
        np.testing.assert_array_equal(got, big)
        assert got.flags.writeable and master.streamed == 1
        a, b = sess.run([scaled, x], {x: 3.0})
        np.testing.assert_array_equal(a, big * 3.0)
        assert b == 3.0 and master.streamed == 2
        unary = master.unary
        assert sess.run(x, {x: 1.0}) == 1.0 and master.unary == unary + 1   # small: RunStep
        # Unknown static size: RunStep the first time, streamed once the size is known.
        assert sess.run(dynamic, {n: 1 << 19}).shape == (1 << 19,)
        assert master.streamed == 2
        np.testing.assert_array_equal(sess.run(dynamic, {n: 1 << 19}), np.full(1 << 19, 7.0, np.float32))
        assert master.streamed == 3
        # Metadata comes back on the stream's last message.
        meta = kf.RunMetadata()
        sess.run(v, options=kf.RunOptions(trace_level=kf.RunOptions.FULL_TRACE), run_metadata=meta)
        assert len(meta.step_stats.dev_stats) >= 1 and master.streamed == 4


def test_a_failing_streamed_step_keeps_its_error_class(cluster):
    server, master = cluster
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [None], name="x")
        with kf.device("/job:worker/task:1"):
            big = kf.tile(kf.reshape(x, [2, -1], name="bad_reshape"), [1, 1 << 19])
    with kf.Session(server.target, graph=g) as sess:
        with pytest.raises(errors.InvalidArgumentError, match="bad_reshape"):
            sess.run(big, {x: [1.0, 2.0, 3.0]})
        assert sess.run(big, {x: [1.0, 2.0]}).shape == (2, 1 << 19)


_exporter = InMemorySpanExporter()


def test_a_streamed_step_is_one_trace(cluster):
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(_exporter))
    server, master = cluster
    g = kf.Graph()
    with g.as_default():
        with kf.device("/job:worker/task:1"):
            y = kf.zeros([1 << 19]) + 1.0
    with kf.Session(server.target, graph=g) as sess:
        _exporter.clear()
        assert sess.run(y).sum() == 1 << 19
    assert master.streamed == 1
    spans = {s.name: s for s in _exporter.get_finished_spans()}
    root, step = spans["Session.run"], spans["Master.RunStep"]
    assert step.parent.span_id == root.context.span_id and step.attributes["kernflow.streamed"]
    assert spans["RunGraph"].parent.span_id == step.context.span_id
    assert spans["Worker.RunGraph"].parent.span_id == spans["RunGraph"].context.span_id
    pull, served = spans["RecvTensor"], spans["Worker.RecvTensor"]
    assert pull.parent.span_id == step.context.span_id and served.parent.span_id == pull.context.span_id
    assert pull.attributes["kernflow.bytes"] >= 2 << 20 and served.attributes["kernflow.bytes"] == 2 << 20
    assert len({s.context.trace_id for s in spans.values()}) == 1
