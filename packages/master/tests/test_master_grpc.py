"""The master over gRPC: MasterServer, real worker servers, dead workers, the `kernflow master` CLI."""

from __future__ import annotations

import collections
import contextlib
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.client.master_client import GrpcMasterClient
from kernflow.client.protobuf import master_pb2
from kernflow.client.worker_client import GrpcWorkerClient
from kernflow.core.framework import errors
from kernflow.master.master import Master
from kernflow.master.plugin import build_master, load_cluster_spec
from kernflow.master.server import MasterServer
from kernflow.worker.server import WorkerServer

T1 = "/job:worker/replica:0/task:1"


@pytest.fixture
def grpc_cluster():
    """Two worker servers on free ports and a MasterServer over them (all in this process)."""
    clients = {}

    def resolve(task):
        return clients[task]
    workers = [WorkerServer("worker", i, port=0, resolver=resolve) for i in range(2)]
    for i, w in enumerate(workers):
        name = f"/job:worker/replica:0/task:{i}"
        clients[name] = GrpcWorkerClient(w.address, name)
    master = Master(resolve, tasks=list(clients), health_check_interval_s=0.5, rpc_timeout_s=2.0)
    server = MasterServer(master, port=0)
    yield server, workers
    server.stop(0)
    master.close()
    for w in workers:
        w.stop(0)


def _model(device=None):
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [None, 3], name="x")
        with kf.device(device) if device else contextlib.nullcontext():
            w = kf.Variable(np.arange(6, dtype=np.float32).reshape(3, 2) / 10, name="w")
            y = kf.matmul(x, w)
        loss = kf.reduce_mean(kf.square(y - 1.0))
        train = kf.train.GradientDescentOptimizer(0.05).minimize(loss)
        init = kf.global_variables_initializer()
    return g, x, w, loss, train, init


def _train(target, device, xv, steps=5):
    g, x, w, loss, train, init = _model(device)
    with kf.Session(target, graph=g) as sess:
        sess.run(init)
        losses = [sess.run([loss, train], {x: xv})[0] for _ in range(steps)]
        return losses, sess.run(w)


def test_training_over_grpc_matches_embedded(grpc_cluster):
    server, _ = grpc_cluster
    xv = np.random.RandomState(1).rand(8, 3).astype(np.float32)
    want_losses, want_w = _train("", None, xv)
    got_losses, got_w = _train(server.target, "/job:worker/task:1", xv)
    assert np.asarray(got_losses).tobytes() == np.asarray(want_losses).tobytes()
    assert got_w.tobytes() == want_w.tobytes()
    assert got_losses[-1] < got_losses[0]


def test_master_server_survives_bad_requests(grpc_cluster):
    server, _ = grpc_cluster
    client = GrpcMasterClient(server.address)
    with pytest.raises(errors.AbortedError, match="not found"):
        client.run_step(master_pb2.RunStepRequest(session_handle="nope", fetch=["x:0"]))
    bad = master_pb2.CreateSessionRequest()
    bad.graph_def.node.add(name="x", op="NoSuchOp")
    with pytest.raises(errors.NotFoundError, match="NoSuchOp"):
        client.create_session(bad)
    with pytest.raises(errors.AbortedError):
        client.close_session(master_pb2.CloseSessionRequest(session_handle="nope"))
    resp = client.list_devices(master_pb2.ListDevicesRequest())
    assert len(resp.local_device) == 1 and len(resp.remote_device) == 1
    g = kf.Graph()
    with g.as_default():
        out = kf.constant(3.0) * 2.0
    with kf.Session(server.target, graph=g) as sess:
        assert sess.run(out) == 6.0


def test_a_dead_worker_fails_the_step_with_unavailable(grpc_cluster):
    server, workers = grpc_cluster
    g, x, w, loss, train, init = _model("/job:worker/task:1")
    xv = np.ones((4, 3), np.float32)
    with kf.Session(server.target, graph=g) as sess:
        sess.run(init)
        sess.run(train, {x: xv})
        workers[1].stop(0)
        t = time.time()
        with pytest.raises(errors.UnavailableError) as e:
            sess.run(train, {x: xv})
        assert time.time() - t < 10
        assert T1 in str(e.value)
        # Its devices stay known (placements survive); the step that needs it fails naming it.
        with pytest.raises(errors.UnavailableError, match="task:1.*(unavailable|unreachable)"):
            sess.run(train, {x: xv})
        # The task restarts on its old port: the session places and registers again.
        port = workers[1].port
        workers[1] = WorkerServer("worker", 1, port=port, resolver=workers[0].worker.resolver)
        deadline = time.time() + 15
        while True:  # the channel reconnects after its backoff (at most 5 s)
            try:
                sess.run(init)
                break
            # (Aborted: the first step that reaches the new task may still use the handles
            # registered on the old one, as in TF; the master registers again on the next step.)
            except (errors.UnavailableError, errors.AbortedError):
                if time.time() > deadline:
                    raise
                time.sleep(0.2)
        sess.run(train, {x: xv})


def test_reset_over_grpc_clears_variables(grpc_cluster):
    server, _ = grpc_cluster
    g, x, w, loss, train, init = _model("/job:worker/task:1")
    with kf.Session(server.target, graph=g) as sess:
        sess.run(init)
        kf.Session.reset(server.target)
        with pytest.raises(errors.FailedPreconditionError):
            sess.run(w)


def test_cluster_spec_parsing_and_resolver():
    spec = load_cluster_spec('{"worker": ["127.0.0.1:1", "127.0.0.1:2"], "ps": {"3": "127.0.0.1:9"}}')
    assert spec.task_names() == ["/job:ps/replica:0/task:3", "/job:worker/replica:0/task:0",
                                 "/job:worker/replica:0/task:1"]
    master = build_master(spec)
    assert master.tasks == spec.task_names()
    client = master._worker("/job:ps/replica:0/task:3")
    assert client.address == "127.0.0.1:9"
    with pytest.raises(ValueError):
        load_cluster_spec("{not json")


def test_kernflow_master_command(tmp_path):
    w0 = WorkerServer("worker", 0, port=0)
    spec = tmp_path / "cluster.json"
    spec.write_text(json.dumps({"worker": [w0.address]}))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "kernflow.core.cli", "master", "--port", "0",
                             "--cluster-spec", f"@{spec}"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert "kernflow master serving grpc://" in line, (line, proc.stderr.read() if proc.poll() else "")
        target = line.split()[3]
        g = kf.Graph()
        with g.as_default():
            out = kf.constant(np.arange(3, dtype=np.float32)) + 1.0
        with kf.Session(target, graph=g) as sess:
            np.testing.assert_array_equal(sess.run(out), [1, 2, 3])
        assert w0.worker is not None
    finally:
        proc.terminate()
        try:
            assert proc.wait(20) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
            w0.stop(0)


def test_workers_of_another_protocol_version_are_refused_over_grpc(grpc_cluster, monkeypatch):
    """Worker servers of another release (their version constant patched): the client's first step
    fails at once with FailedPreconditionError naming a task and both versions, across both hops."""
    from kernflow.client.protocol import PROTOCOL_VERSION
    from kernflow.worker import worker as worker_mod
    server, _ = grpc_cluster
    monkeypatch.setattr(worker_mod, "PROTOCOL_VERSION", PROTOCOL_VERSION + 1)
    g = kf.Graph()
    with g.as_default():
        one = kf.constant(1.0) + 1.0
    t0 = time.monotonic()
    with kf.Session(server.target, graph=g) as sess:
        with pytest.raises(errors.FailedPreconditionError) as e:
            sess.run(one)
    assert time.monotonic() - t0 < 5
    msg = str(e.value)
    assert "Task /job:worker/replica:0/task:" in msg
    assert f"version {PROTOCOL_VERSION + 1}, this process speaks version {PROTOCOL_VERSION}" in msg


def test_small_steps_go_over_run_graph_stream(grpc_cluster, monkeypatch):
    """Self-contained synchronous steps on a remote task use RunGraphStream; steps that may block
    (a queue) are refused by the worker once and use RunGraph from then on; steps spanning tasks
    (Send/Recv) use RunGraph."""
    monkeypatch.setenv("KERNFLOW_LOCAL_CHANNEL", "0")   # (a same-host worker is called over its socket)
    server, _ = grpc_cluster
    # (Traced steps use unary calls; another test may have installed a tracer provider.)
    monkeypatch.setattr("kernflow.master.master._tracing", lambda: False)
    calls = collections.Counter()
    for name in ("run_graph", "run_graph_streamed"):
        real = getattr(GrpcWorkerClient, name)

        def spy(self, req, timeout=None, _real=real, _name=name):
            calls[_name, self.task_name[-1]] += 1
            return _real(self, req, timeout=timeout)
        monkeypatch.setattr(GrpcWorkerClient, name, spy)
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [2], name="x")
        with kf.device("/job:worker/task:1"):
            y = x * 2.0
            q = kf.FIFOQueue(10, [kf.float32], shapes=[[2]])
            enq = q.enqueue([y])
            deq = q.dequeue()
        with kf.device("/job:worker/task:0"):
            z = deq + 1.0
    with kf.Session(server.target, graph=g) as sess:
        for i in range(3):
            np.testing.assert_array_equal(sess.run(y, {x: [i, 1]}), [2 * i, 2])
        assert calls == {("run_graph_streamed", "1"): 3}
        calls.clear()
        sess.run(enq, {x: [1, 2]})
        sess.run(enq, {x: [3, 4]})
        assert calls == {("run_graph_streamed", "1"): 1, ("run_graph", "1"): 2}
        calls.clear()
        np.testing.assert_array_equal(sess.run(z), [3, 5])
        assert calls == {("run_graph", "0"): 1, ("run_graph", "1"): 1}
