"""Large fetches over gRPC, all in this process: `kf.Session(target)` -> RunStepPull, the client
pulling from the worker with RecvTensor (or, with ``KERNFLOW_DIRECT_FETCH=0``, RunStepStream, the
master pulling and relaying)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import kernflow.core as kf
from kernflow.client import fetch_stream
from kernflow.client.protobuf import master_pb2
from kernflow.client.worker_client import GrpcWorkerClient
from kernflow.core.framework import errors
from kernflow.master.master import Master
from kernflow.master.server import MasterServer
from kernflow.worker.server import WorkerServer

T0 = "/job:worker/replica:0/task:0"


class CountingMaster(Master):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.unary = self.streamed = self.pulled = 0

    def run_step(self, request, **kw):
        self.unary += 1
        return super().run_step(request, **kw)

    def run_step_stream(self, request, trace_context=None, **kw):
        self.streamed += 1
        return super().run_step_stream(request, trace_context, **kw)

    def run_step_pull(self, requests, trace_context=None, **kw):
        self.streamed += 1
        self.pulled += 1
        return super().run_step_pull(requests, trace_context, **kw)


@pytest.fixture(params=["pull", "relay"])
def direct(request, monkeypatch):
    """Runs a test with the client pulling fetches itself ("pull") and with the master relaying."""
    fetch_stream.forget_reachability()
    monkeypatch.setenv(fetch_stream.ENV_VAR, "1" if request.param == "pull" else "0")
    return request.param == "pull"


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


def test_large_fetches_stream_and_small_ones_do_not(cluster, direct):
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
        assert master.pulled == (4 if direct else 0)


def test_a_failing_streamed_step_keeps_its_error_class(cluster, direct):
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


def test_a_streamed_step_is_one_trace(cluster, direct):
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
    assert master.streamed == 1 and master.pulled == direct
    spans = {s.name: s for s in _exporter.get_finished_spans()}
    root, step = spans["Session.run"], spans["Master.RunStep"]
    assert step.parent.span_id == root.context.span_id and step.attributes["kernflow.streamed"]
    assert spans["RunGraph"].parent.span_id == step.context.span_id
    assert spans["Worker.RunGraph"].parent.span_id == spans["RunGraph"].context.span_id
    pull, served = spans["RecvTensor"], spans["Worker.RecvTensor"]
    puller = root if direct else step    # the client's pull, or the master's
    assert pull.parent.span_id == puller.context.span_id and served.parent.span_id == pull.context.span_id
    assert pull.attributes["kernflow.bytes"] >= 2 << 20 and served.attributes["kernflow.bytes"] == 2 << 20
    assert len({s.context.trace_id for s in spans.values()}) == 1


# ---------------------------------------------------------------------------- RunStepPull specifics
class RecordingRequests(CountingMaster):
    """Also records the client's messages after the step (relay requests)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.client_messages = []

    def run_step_pull(self, requests, trace_context=None, **kw):
        def recorded():
            for msg in requests:
                self.client_messages.append(msg)
                yield msg
        return super().run_step_pull(recorded(), trace_context, **kw)


@pytest.fixture
def recording_cluster():
    clients = {}
    workers = [WorkerServer("worker", i, port=0, resolver=lambda t: clients[t]) for i in range(2)]
    for i, w in enumerate(workers):
        name = f"/job:worker/replica:0/task:{i}"
        clients[name] = GrpcWorkerClient(w.address, name)
    master = RecordingRequests(lambda t: clients[t], tasks=list(clients), local_task=T0)
    server = MasterServer(master, port=0)
    fetch_stream.forget_reachability()
    yield server, master, workers
    fetch_stream.forget_reachability()
    server.stop(0)
    master.close()
    for w in workers:
        w.stop(0)


def _two_big_fetches():
    g = kf.Graph()
    with g.as_default():
        with kf.device("/job:worker/task:1"):
            v = kf.Variable(np.arange(1 << 19, dtype=np.float32), name="v")     # 2 MiB
        with kf.device("/job:worker/task:0"):
            w = kf.ones([1 << 19]) * 3.0
    return g, v, w


def _run_two_big_fetches(server, g, v, w, steps):
    with kf.Session(server.target, graph=g) as sess:
        sess.run(v.initializer)
        for _ in range(steps):
            a, b = sess.run([v, w])
            np.testing.assert_array_equal(a, np.arange(1 << 19, dtype=np.float32))
            np.testing.assert_array_equal(b, np.full(1 << 19, 3.0, np.float32))


def test_pulled_steps_leave_no_state_on_the_workers(recording_cluster):
    server, master, workers = recording_cluster
    g, v, w = _two_big_fetches()
    _run_two_big_fetches(server, g, v, w, 3)
    assert master.pulled == 3
    assert [m.WhichOneof("kind") for m in master.client_messages] == ["step"] * 3   # no relays
    deadline = time.monotonic() + 10
    while any(wk.worker._steps for wk in workers):   # CleanupGraph runs in the background
        assert time.monotonic() < deadline, "step state left on a worker"
        time.sleep(0.01)


def test_a_task_the_client_cannot_reach_is_relayed_by_the_master(recording_cluster, monkeypatch):
    server, master, workers = recording_cluster
    probes = []

    def unreachable(location, device, incarnation, master_address):
        probes.append(location.task)
        return False, "firewalled (test)"
    monkeypatch.setattr(fetch_stream, "_probe", unreachable)
    g, v, w = _two_big_fetches()
    _run_two_big_fetches(server, g, v, w, 2)
    assert master.pulled == 2
    relays = [m.relay for m in master.client_messages if m.WhichOneof("kind") == "relay"]
    assert relays == [0, 1, 0, 1]
    assert sorted(probes) == sorted(set(probes)) and len(probes) == 2   # once per task: remembered


def _location(worker, key_device=None, incarnation=None, task=None):
    st = worker.worker.get_status()
    dev = st.device_attributes[0]
    inc = format(incarnation if incarnation is not None else dev.incarnation, "x")
    key = f"{key_device or dev.name};{inc};" \
          f"/job:client/device:CPU:0;t:0;0:0"
    return master_pb2.FetchLocation(task=task or worker.worker.task_name, address=worker.address,
                                    step_id=1, rendezvous_key=key)


def test_the_client_pulls_only_from_the_task_the_location_names(recording_cluster):
    _, _, workers = recording_cluster
    w0, w1 = workers
    fetch_stream.check_reachable(_location(w1), w1.address)      # the right task: no error
    with pytest.raises(fetch_stream.Unreachable, match="is /job:worker/replica:0/task:1, not"):
        fetch_stream.check_reachable(_location(w1, task=w0.worker.task_name), w1.address)
    with pytest.raises(fetch_stream.Unreachable, match="incarnation"):   # a restarted task
        fetch_stream.check_reachable(_location(w1, incarnation=12345), w1.address)
    # A loopback address is the master's own machine: not tried from a client that is elsewhere.
    with pytest.raises(fetch_stream.Unreachable, match="loopback"):
        fetch_stream.check_reachable(_location(w1), "10.20.30.40:2222")
    dead = _location(w1)
    dead.address = "127.0.0.1:1"
    with pytest.raises(fetch_stream.Unreachable, match="GetStatus failed"):
        fetch_stream.check_reachable(dead, w1.address)


def test_a_remembered_check_is_not_repeated(recording_cluster, monkeypatch):
    _, _, workers = recording_cluster
    calls = []
    real = fetch_stream._probe

    def counting(*a):
        calls.append(a[0].address)
        return real(*a)
    monkeypatch.setattr(fetch_stream, "_probe", counting)
    loc = _location(workers[1])
    for _ in range(3):
        fetch_stream.check_reachable(loc, workers[1].address)
    bad = _location(workers[1], incarnation=7)
    for _ in range(2):
        with pytest.raises(fetch_stream.Unreachable):
            fetch_stream.check_reachable(bad, workers[1].address)
    assert len(calls) == 2
    # An expired failed check is made again in the background; meanwhile the answer stays "relay".
    monkeypatch.setattr(fetch_stream, "UNREACHABLE_TTL_S", 0.0)
    monkeypatch.setattr(fetch_stream, "PROBE_TIMEOUT_S", 0.2)
    fetch_stream.forget_reachability()
    with pytest.raises(fetch_stream.Unreachable):
        fetch_stream.check_reachable(bad, workers[1].address)          # the first check: on the path
    assert len(calls) == 3
    time.sleep(0.01)
    with pytest.raises(fetch_stream.Unreachable):
        fetch_stream.check_reachable(bad, workers[1].address)          # expired: re-checked aside
    deadline = time.monotonic() + 5
    while len(calls) < 4:
        assert time.monotonic() < deadline, "the expired check was not repeated"
        time.sleep(0.01)
