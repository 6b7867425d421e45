"""Workers behind gRPC: cross-task steps through WorkerServers, errors as statuses, the CLI."""

from __future__ import annotations

import concurrent.futures
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.client import codec
from kernflow.client.protobuf import worker_pb2
from kernflow.client.worker_client import GrpcWorkerClient
from kernflow.core.framework import errors
from kernflow.core.runtime.rendezvous import create_key
from kernflow.worker.server import WorkerServer, static_resolver

T0 = "/job:worker/replica:0/task:0"
T1 = "/job:worker/replica:0/task:1"
CPU0 = T0 + "/device:CPU:0"
CPU1 = T1 + "/device:CPU:0"
_step_ids = itertools.count(5000)


@pytest.fixture
def servers():
    """Two WorkerServers on 127.0.0.1 that pull from each other through GrpcWorkerClients."""
    clients = {}
    s0 = WorkerServer("worker", 0, resolver=lambda t: clients[t])
    s1 = WorkerServer("worker", 1, resolver=lambda t: clients[t])
    clients[T0] = GrpcWorkerClient(s0.address, T0)
    clients[T1] = GrpcWorkerClient(s1.address, T1)
    yield (s0, s1), clients
    s0.stop(0)
    s1.stop(0)


def _step(clients, handles, feeds=(), timeout_ms=10_000):
    step_id = next(_step_ids)
    reqs = {}
    for t, h in handles.items():
        r = worker_pb2.RunGraphRequest(session_handle="s", graph_handle=h, step_id=step_id,
                                       timeout_in_ms=timeout_ms)
        if t == T0:
            for i, v in enumerate(feeds):
                r.send.add(name=f"f{i}").tensor.CopyFrom(codec.tensor_to_proto(v))
        reqs[t] = r
    with concurrent.futures.ThreadPoolExecutor(len(handles)) as ex:
        futs = {t: ex.submit(clients[t].run_graph, reqs[t]) for t in handles}
        try:
            return futs[T0].result(30)
        finally:
            for t in handles:
                futs[t].exception(30)
                clients[t].cleanup_graph(worker_pb2.CleanupGraphRequest(step_id=step_id))


def test_cross_task_computation_over_grpc(servers, split):
    (s0, s1), clients = servers
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [4], name="x")
        with kf.device(T1):
            v = kf.Variable(np.ones(4, np.float32), name="v")
            y = x * 3.0 + v.value()
        with kf.device(T0):
            z = kf.reduce_sum(y * y)
        upd = v.assign_add(y)
    parts = split(g, [s0.worker, s1.worker], targets=[v.initializer.name])
    init = {t: clients[t].register_graph(worker_pb2.RegisterGraphRequest(
        session_handle="s", graph_def=p)).graph_handle for t, p in parts.items()}
    _step(clients, init)
    parts = split(g, [s0.worker, s1.worker], feeds=["x:0"], fetches=[z.name, upd.name])
    handles = {t: clients[t].register_graph(worker_pb2.RegisterGraphRequest(
        session_handle="s", graph_def=p)).graph_handle for t, p in parts.items()}
    vv = np.ones(4, np.float32)
    for k in range(3):
        feed = np.arange(4, dtype=np.float32) + k
        zv, uv = [codec.proto_to_tensor(nt.tensor) for nt in _step(clients, handles, [feed]).recv]
        yv = feed * 3 + vv
        vv = vv + yv
        np.testing.assert_allclose(zv, np.sum(yv * yv), rtol=1e-6)
        np.testing.assert_allclose(uv, vv)


def test_large_tensor_streams_over_grpc(servers):
    (s0, s1), clients = servers
    arr = np.random.default_rng(0).standard_normal(16 << 20).astype(np.float32)  # 64 MiB
    key = create_key(CPU1, s1.worker.devices[0].incarnation, CPU0, "big:0")
    s1.worker._step(11).keep_for_pull(key, arr)
    chunks = list(clients[T1].recv_tensor(worker_pb2.RecvTensorRequest(step_id=11, rendezvous_key=key),
                                          timeout=30))
    assert len(chunks) == (64 << 20) // codec.CHUNK_BYTES
    out, _ = codec.assemble_recv_chunks(chunks)
    np.testing.assert_array_equal(out, arr)
    # And pulled by task 0's rendezvous through task 0's resolver (a _Recv's path).
    key2 = create_key(CPU1, s1.worker.devices[0].incarnation, CPU0, "big2:0")
    s1.worker._step(12).keep_for_pull(key2, arr)
    got, done = [], threading.Event()
    s0.worker._step(12).recv_async(key2, lambda v, d, e: (got.append((v, e)), done.set()))
    s0.worker._step(12).pull_announced([(key2, CPU1)])   # (what task 1's announcement does)
    assert done.wait(30) and got[0][1] is None
    np.testing.assert_array_equal(got[0][0], arr)


def test_errors_become_statuses_and_the_server_keeps_serving(servers):
    (s0, s1), clients = servers
    c = clients[T0]
    with pytest.raises(errors.AbortedError, match="not registered"):
        c.run_graph(worker_pb2.RunGraphRequest(graph_handle="nope", step_id=1), timeout=5)
    gd = worker_pb2.RegisterGraphRequest(session_handle="s")
    gd.graph_def.node.add(name="n", op="NoSuchOp", device=CPU0)
    with pytest.raises(errors.InvalidArgumentError, match="NoSuchOp"):
        c.register_graph(gd)
    with pytest.raises(errors.InvalidArgumentError, match="rendezvous key"):
        list(c.recv_tensor(worker_pb2.RecvTensorRequest(step_id=1, rendezvous_key="bad"), timeout=5))
    with pytest.raises(errors.DeadlineExceededError):
        key = create_key(CPU0, 1, CPU1, "never:0")
        list(c.recv_tensor(worker_pb2.RecvTensorRequest(step_id=2, rendezvous_key=key), timeout=0.3))
    st = c.get_status()
    assert st.task == 0 and st.device_attributes[0].name == CPU0


def test_abort_step_over_grpc_wakes_run_graph(servers, split, wait_on_task1_graph):
    (s0, s1), clients = servers
    g, b = wait_on_task1_graph()
    parts = split(g, [s0.worker, s1.worker], fetches=[b.name])
    h0 = clients[T0].register_graph(worker_pb2.RegisterGraphRequest(
        session_handle="s", graph_def=parts[T0])).graph_handle
    step_id = next(_step_ids)
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        fut = ex.submit(clients[T0].run_graph, worker_pb2.RunGraphRequest(
            session_handle="s", graph_handle=h0, step_id=step_id))
        time.sleep(0.3)
        t = time.monotonic()
        for c in clients.values():
            c.abort_step(worker_pb2.AbortStepRequest(step_id=step_id, code=errors.ABORTED, message="halt"))
        with pytest.raises(errors.AbortedError, match="halt"):
            fut.result(2)
        assert time.monotonic() - t < 1.0
    # A RunGraph whose producer never runs times out with DeadlineExceededError.
    with pytest.raises(errors.DeadlineExceededError):
        clients[T0].run_graph(worker_pb2.RunGraphRequest(session_handle="s", graph_handle=h0,
                                                         step_id=next(_step_ids), timeout_in_ms=300))


def test_static_resolver():
    r = static_resolver({"worker": ["127.0.0.1:1", "127.0.0.1:2"], "ps": {"0": "127.0.0.1:3"}})
    assert r(T1).address == "127.0.0.1:2"
    assert r("/job:ps/replica:0/task:0").address == "127.0.0.1:3"
    assert r(T1) is r(T1)
    with pytest.raises(errors.UnavailableError):
        r("/job:worker/replica:0/task:7")


def test_cli_serves_until_sigterm():
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    spec = json.dumps({"worker": ["127.0.0.1:0"]})
    proc = subprocess.Popen([sys.executable, "-m", "kernflow.core.cli", "worker", "--job", "worker",
                             "--task", "0", "--port", "0", "--cluster-spec", spec],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert "listening on 127.0.0.1:" in line, (line, proc.stderr.read() if proc.poll() is not None else "")
        address = line.strip().rsplit(" ", 1)[-1]
        st = GrpcWorkerClient(address, T0).get_status(timeout=10)
        assert st.job == "worker" and st.task == 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        assert "stopped" in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------------------- RunGraphStream
def _inline_graph(server, client):
    """y = x * 3 + v on one task (self-contained, synchronous): registered, v initialized."""
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [2], name="x")
        xb = kf.placeholder(kf.float32, None, name="xb")
        with kf.device(T0):
            v = kf.Variable(np.zeros(2, np.float32), name="v")
            y = x * 3.0 + v.value()
            r = kf.reshape(xb, [3])   # fails for a [2] feed at run time
    from kernflow.core.runtime.placer import PlacementOptions, place
    from kernflow.core.runtime.prune import prune
    from kernflow.core.plugins import registries

    def register(feeds, fetches, targets=()):
        dev = server.worker.devices[0].name
        gd = place(g.as_graph_def(add_shapes=True), server.worker.devices, registries().kernels,
                   PlacementOptions(client_device=dev))
        gd = prune(gd, feeds, fetches, list(targets), client_device=dev)
        return client.register_graph(worker_pb2.RegisterGraphRequest(session_handle="s", graph_def=gd)).graph_handle
    handles = {"init": register([], [], [v.initializer.name]), "y": register([x.name], [y.name]),
               "bad": register([xb.name], [r.name])}
    client.run_graph(worker_pb2.RunGraphRequest(session_handle="s", graph_handle=handles["init"],
                                                step_id=next(_step_ids)))

    def req(name, value=(1.0, 2.0), key=None):
        q = worker_pb2.RunGraphRequest(session_handle="s", graph_handle=handles[name], step_id=next(_step_ids))
        q.send.add(name=x.name if name == "y" else xb.name).tensor.CopyFrom(
            codec.tensor_to_proto(np.array(value, np.float32)))
        q.recv_key.append(key or (y.name if name == "y" else r.name))
        return q
    return req


@pytest.fixture
def grpc_only(monkeypatch):
    """Workers on this host are called over gRPC (RunGraphStream is the cross-host path)."""
    monkeypatch.setenv("KERNFLOW_LOCAL_CHANNEL", "0")


def test_run_graph_streamed_reuses_one_stream_and_reports_step_errors_in_band(servers, grpc_only):
    from kernflow.client import graph_stream
    (s0, _), clients = servers
    graph_stream.close(s0.address)   # (no streams left from an earlier server on this port)
    req = _inline_graph(s0, clients[T0])
    c = clients[T0]
    for i in range(5):
        resp = c.run_graph_streamed(req("y", (i, 1)))
        np.testing.assert_array_equal(codec.proto_to_tensor(resp.recv[0].tensor), [3 * i, 3])
    pool = graph_stream._pools[s0.address]
    assert len(pool.idle) == 1            # one step at a time: one stream, kept open
    with pytest.raises(errors.InvalidArgumentError, match="Reshape"):
        c.run_graph_streamed(req("bad"))
    assert len(pool.idle) == 1            # a step's error does not end the stream
    resp = c.run_graph_streamed(req("y"))
    np.testing.assert_array_equal(codec.proto_to_tensor(resp.recv[0].tensor), [3, 6])
    # Concurrent steps open more streams; all come back to the pool.
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        outs = list(ex.map(lambda i: c.run_graph_streamed(req("y", (i, i))), range(40)))
    assert [codec.proto_to_tensor(o.recv[0].tensor)[0] for o in outs] == [3.0 * i for i in range(40)]
    assert 1 <= len(pool.idle) <= 4


def test_idle_streams_are_closed(servers, monkeypatch, grpc_only):
    """An idle stream holds a server thread on the worker: streams idle for IDLE_CLOSE_S are closed."""
    from kernflow.client import graph_stream
    (s0, _), clients = servers
    graph_stream.close(s0.address)
    monkeypatch.setattr(graph_stream, "IDLE_CLOSE_S", 0.3)
    req = _inline_graph(s0, clients[T0])
    clients[T0].run_graph_streamed(req("y"))
    pool = graph_stream._pools[s0.address]
    (st,) = pool.idle
    deadline = time.monotonic() + 5
    while pool.idle:
        assert time.monotonic() < deadline, "an idle stream stayed open"
        time.sleep(0.05)
    assert st.broken
    # The next step opens a new stream.
    resp = clients[T0].run_graph_streamed(req("y", (2, 2)))
    np.testing.assert_array_equal(codec.proto_to_tensor(resp.recv[0].tensor), [6, 6])
    assert len(pool.idle) == 1 and pool.idle[0] is not st


def test_run_graph_streamed_refuses_graphs_that_do_not_run_inline(servers, split, wait_on_task1_graph, grpc_only):
    from kernflow.client.graph_stream import NotInline
    (s0, s1), clients = servers
    g, b = wait_on_task1_graph()
    parts = split(g, [s0.worker, s1.worker], fetches=[b.name])
    h = clients[T0].register_graph(worker_pb2.RegisterGraphRequest(session_handle="s",
                                                                   graph_def=parts[T0])).graph_handle
    with pytest.raises(NotInline):   # it would wait for task 1: refused before running
        clients[T0].run_graph_streamed(worker_pb2.RunGraphRequest(session_handle="s", graph_handle=h,
                                                                  step_id=next(_step_ids)))


def test_a_refusal_is_the_not_inline_field_and_nothing_runs(servers):
    """On the wire: a graph that may block (a queue) gets a response with `not_inline` set and no
    status or values, nothing runs and no run is counted; it then runs over unary RunGraph, while an
    inline graph runs on the same stream."""
    from kernflow.client import channels
    from kernflow.client.protobuf import worker_pb2_grpc
    from kernflow.core.plugins import registries
    from kernflow.core.runtime.placer import PlacementOptions, place
    from kernflow.core.runtime.prune import prune
    (s0, _), clients = servers
    c = clients[T0]
    g = kf.Graph()
    with g.as_default(), kf.device(T0):
        x = kf.placeholder(kf.float32, [2], name="x")
        q = kf.FIFOQueue(10, [kf.float32], shapes=[[2]])
        enq = q.enqueue([x * 2.0])
        size = q.size()
    dev = s0.worker.devices[0].name
    placed = place(g.as_graph_def(add_shapes=True), s0.worker.devices, registries().kernels,
                   PlacementOptions(client_device=dev))

    def register(feeds, fetches, targets=()):
        gd = prune(placed, feeds, fetches, list(targets), client_device=dev)
        return c.register_graph(worker_pb2.RegisterGraphRequest(session_handle="s", graph_def=gd)).graph_handle

    def req(handle, feed=None, key=None):
        r = worker_pb2.RunGraphRequest(session_handle="s", graph_handle=handle, step_id=next(_step_ids))
        if feed is not None:
            r.send.add(name=x.name).tensor.CopyFrom(codec.tensor_to_proto(np.array(feed, np.float32)))
        if key is not None:
            r.recv_key.append(key)
        return r
    h_enq, h_size = register([x.name], [], [enq.name]), register([], [size.name])
    inline = _inline_graph(s0, c)
    runs = c.get_status().graph_runs
    stub = channels.get_stub(s0.address, worker_pb2_grpc.WorkerServiceStub)
    refused, ran = list(stub.RunGraphStream(iter([req(h_enq, (1, 2)), inline("y", (1, 1))]), timeout=30))
    assert refused.not_inline and refused.status_code == 0 and not refused.status_error_message
    assert not refused.recv
    assert not ran.not_inline and ran.status_code == 0
    np.testing.assert_array_equal(codec.proto_to_tensor(ran.recv[0].tensor), [3, 3])
    assert c.get_status().graph_runs == runs + 1                     # the refusal is no run

    def size_of():
        return codec.proto_to_tensor(c.run_graph(req(h_size, key=size.name), timeout=30).recv[0].tensor)
    assert size_of() == 0                                            # nothing was enqueued
    c.run_graph(req(h_enq, (1, 2)), timeout=30)                      # unary runs it
    assert size_of() == 1


def test_get_status_reports_the_protocol_version(servers):
    from kernflow.client.protocol import PROTOCOL_VERSION
    (s0, _), clients = servers
    assert PROTOCOL_VERSION >= 1
    assert clients[T0].get_status().protocol_version == PROTOCOL_VERSION
    assert s0.worker.get_status().protocol_version == PROTOCOL_VERSION


def test_run_graph_streamed_deadline_and_dead_worker(servers, monkeypatch, grpc_only):
    from kernflow.client import graph_stream
    (s0, _), clients = servers
    req = _inline_graph(s0, clients[T0])
    c = clients[T0]
    c.run_graph_streamed(req("y"))
    real = s0.worker.run_graph_inline

    def slow(r):
        time.sleep(1.5)
        return real(r)
    monkeypatch.setattr(s0.worker, "run_graph_inline", slow)
    t = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError, match="did not finish within 0.3 s"):
        c.run_graph_streamed(req("y"), timeout=0.3)
    assert time.monotonic() - t < 1.2
    monkeypatch.setattr(s0.worker, "run_graph_inline", real)
    np.testing.assert_array_equal(codec.proto_to_tensor(c.run_graph_streamed(req("y")).recv[0].tensor), [3, 6])
    s0.stop(0)
    t = time.monotonic()
    with pytest.raises((errors.UnavailableError, errors.CancelledError, errors.AbortedError)):
        c.run_graph_streamed(req("y"), timeout=10)
    assert time.monotonic() - t < 5
    graph_stream.close(s0.address)


@pytest.mark.parametrize("registration", ["add_to_server", "generated"])
def test_recv_tensor_serves_with_either_registration(registration):
    """`add_to_server` sends RecvTensor's chunks as the worker serialized them; a servicer registered
    with the generated function yields messages instead, and both arrive the same."""
    import concurrent.futures

    import grpc

    from kernflow.client import channels
    from kernflow.client.protobuf import worker_pb2_grpc
    from kernflow.worker.servicer import WorkerServicer, add_to_server
    from kernflow.worker.worker import Worker
    worker = Worker("worker", 1)
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(4), options=list(channels.SERVER_OPTIONS))
    servicer = WorkerServicer(worker)
    if registration == "add_to_server":
        add_to_server(servicer, server)
    else:
        worker_pb2_grpc.add_WorkerServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        client = GrpcWorkerClient(f"127.0.0.1:{port}", T1)
        arr = np.arange(3 << 18, dtype=np.float32)
        key = create_key(CPU1, worker.devices[0].incarnation, CPU0, "v:0")
        worker._step(5).keep_for_pull(key, arr)
        out, _ = codec.assemble_recv_chunks(client.recv_tensor(
            worker_pb2.RecvTensorRequest(step_id=5, rendezvous_key=key), timeout=10))
        np.testing.assert_array_equal(out, arr)
        assert client.get_status().task == 1     # the other methods are registered too
    finally:
        server.stop(0)
        worker.close()
