"""`kf.train.replica_device_setter`: variables round robin on ps tasks, the rest on the worker."""

from __future__ import annotations

import socket

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.testing.processes import have_distributed
from kernflow.core.protobuf import graph_pb2
from kernflow.core.train import device_setter


def _devices(g):
    return {op.name: op.device for op in g.get_operations()}


def test_exported():
    assert kf.train.replica_device_setter is device_setter.replica_device_setter


def test_variables_round_robin_on_ps_and_the_rest_on_the_worker():
    g = kf.Graph()
    with g.as_default(), kf.device(kf.train.replica_device_setter(ps_tasks=2,
                                                                  worker_device="/job:worker/task:1")):
        a = kf.Variable(1.0, name="a")
        b = kf.Variable(2.0, name="b")
        c = kf.Variable(3.0, name="c")
        s = kf.add(a, b, name="s")
        train = kf.train.MomentumOptimizer(0.1, 0.9).minimize(s * c)
    d = _devices(g)
    assert d["a"] == "/job:ps/task:0"
    assert d["b"] == "/job:ps/task:1"
    assert d["c"] == "/job:ps/task:0"
    # Initializers and snapshots follow their variable (colocation), so do slots and updates.
    assert d["a/Assign"] == d["a/read"] == "/job:ps/task:0"
    assert d["b/read"] == "/job:ps/task:1"
    assert d["b/Momentum"] == "/job:ps/task:1"          # a slot does not advance the round robin
    assert d["Momentum/update_c/ApplyMomentum"] == "/job:ps/task:0"
    # Computation runs on the worker.
    assert d["s"] == "/job:worker/task:1"
    assert d["a/initial_value"] == "/job:worker/task:1"
    assert train.device == "/job:worker/task:1"
    assert all(op.device.startswith(("/job:ps", "/job:worker/task:1")) for op in g.get_operations())


def test_cluster_gives_the_number_of_ps_tasks():
    cluster = kf.train.ClusterSpec({"ps": ["h:1", "h:2", "h:3"], "worker": ["h:4"]})
    for spec in (cluster, cluster.as_dict()):
        g = kf.Graph()
        with g.as_default(), kf.device(kf.train.replica_device_setter(cluster=spec)):
            vs = [kf.Variable(float(i), name=f"v{i}") for i in range(4)]
            y = kf.identity(vs[0], name="y")
        assert [v.op.device for v in vs] == ["/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:2",
                                             "/job:ps/task:0"]
        assert y.op.device == "/job:worker"
    # ps_tasks is ignored when a cluster is given; a cluster without a ps job needs no setter.
    assert kf.train.replica_device_setter(ps_tasks=5, cluster={"worker": ["h:1"]}) is None
    assert kf.train.replica_device_setter() is None
    g = kf.Graph()
    with g.as_default(), kf.device(kf.train.replica_device_setter()):  # kf.device(None): no placement
        v = kf.Variable(1.0, name="v")
    assert v.op.device == ""


def test_ps_job_taken_from_ps_device():
    cluster = {"params": ["h:1", "h:2"], "trainer": ["h:3"]}
    fn = kf.train.replica_device_setter(cluster=cluster, ps_device="/job:params",
                                        worker_device="/job:trainer/task:0/device:CPU:0")
    g = kf.Graph()
    with g.as_default(), kf.device(fn):
        v0, v1 = kf.Variable(1.0, name="v0"), kf.Variable(1.0, name="v1")
        y = kf.add(v0, v1, name="y")
    assert (v0.op.device, v1.op.device) == ("/job:params/task:0", "/job:params/task:1")
    assert y.op.device == "/job:trainer/task:0/device:CPU:0"
    assert "ps_tasks=2" in repr(fn)


def test_inner_device_scopes_win():
    g = kf.Graph()
    with g.as_default(), kf.device(kf.train.replica_device_setter(ps_tasks=2,
                                                                  worker_device="/job:worker/task:0")):
        with kf.device("/job:ps/task:1"):
            pinned = kf.Variable(1.0, name="pinned")
        with kf.device("/job:worker/task:3/device:CPU:0"):
            y = kf.identity(pinned, name="y")
        with kf.device("/device:CPU:0"):
            z = kf.identity(pinned, name="z")
    assert pinned.op.device == "/job:ps/task:1"
    assert y.op.device == "/job:worker/task:3/device:CPU:0"
    assert z.op.device == "/job:worker/task:0/device:CPU:0"


def test_device_function_itself():
    """Called directly, the policy keeps the fields an op already requests (TF's contract)."""
    fn = kf.train.replica_device_setter(ps_tasks=3, worker_device="/job:worker/task:2")
    var = graph_pb2.NodeDef(name="v", op="VariableV2")
    other = graph_pb2.NodeDef(name="m", op="MatMul")
    assert fn(var) == "/job:ps/task:0"
    assert fn(var) == "/job:ps/task:1"
    assert fn(other) == "/job:worker/task:2"
    assert fn(graph_pb2.NodeDef(name="m", op="MatMul", device="/device:CPU:0")) == \
        "/job:worker/task:2/device:CPU:0"
    # A variable requested on another job keeps its job and does not use a ps task.
    assert fn(graph_pb2.NodeDef(name="v", op="VariableV2", device="/job:local/task:7")) == \
        "/job:local/task:7"
    assert fn(var) == "/job:ps/task:2"
    # A requested task on the ps job wins over the strategy's.
    assert fn(graph_pb2.NodeDef(name="v", op="VariableV2", device="/job:ps/task:2")) == "/job:ps/task:2"
    assert fn(var) == "/job:ps/task:1"
    assert fn(var) == "/job:ps/task:2"


def test_custom_ps_ops_and_strategy():
    seen = []

    def strategy(op):
        seen.append(op.name)
        return 1
    fn = kf.train.replica_device_setter(ps_tasks=2, ps_ops=["VariableV2", "Const"],
                                        ps_strategy=strategy)
    g = kf.Graph()
    with g.as_default(), kf.device(fn):
        c = kf.constant(1.0, name="c")
        v = kf.Variable(c, name="v")
        y = kf.identity(v, name="y")
    assert c.op.device == "/job:ps/task:1" and v.op.device == "/job:ps/task:1"
    assert y.op.device == "/job:worker"
    assert seen == ["c", "v"]


def test_argument_errors():
    with pytest.raises(ValueError, match="merge_devices"):
        kf.train.replica_device_setter(ps_tasks=1, merge_devices=False)
    with pytest.raises(TypeError, match="cluster"):
        kf.train.replica_device_setter(cluster=["h:1"])
    with pytest.raises(TypeError, match="ps_strategy"):
        kf.train.replica_device_setter(ps_tasks=1, ps_strategy=3)


def test_empty_ps_device_places_variables_on_the_worker():
    fn = kf.train.replica_device_setter(ps_tasks=2, ps_device="", worker_device="/job:worker/task:1")
    g = kf.Graph()
    with g.as_default(), kf.device(fn):
        v = kf.Variable(1.0, name="v")
    assert v.op.device == "/job:worker/task:1"


# ---------------------------------------------------------------------------- on a cluster

def _free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _model(setter):
    g = kf.Graph()
    with g.as_default(), kf.device(setter):
        x = kf.placeholder(kf.float32, [None, 3], name="x")
        w = kf.Variable(np.arange(6, dtype=np.float32).reshape(3, 2) / 10, name="w")
        b = kf.Variable(np.zeros(2, np.float32), name="b")
        loss = kf.reduce_mean(kf.square(kf.matmul(x, w) + b - 1.0))
        train = kf.train.MomentumOptimizer(0.05, 0.9).minimize(loss)
        init = kf.global_variables_initializer()
    return g, x, w, b, loss, train, init


@pytest.mark.skipif(not have_distributed(), reason="kernflow-master/worker not installed")
def test_training_with_the_setter_on_an_in_process_cluster_matches_embedded():
    ports = _free_ports(3)
    cluster = kf.train.ClusterSpec({"ps": [f"localhost:{ports[0]}", f"localhost:{ports[1]}"],
                                    "worker": [f"localhost:{ports[2]}"]})
    servers = [kf.train.Server(cluster, "ps", 0), kf.train.Server(cluster, "ps", 1),
               kf.train.Server(cluster, "worker", 0)]
    try:
        xv = np.random.RandomState(0).rand(8, 3).astype(np.float32)
        g, x, w, b, loss, train, init = _model(kf.train.replica_device_setter(
            cluster=cluster, worker_device="/job:worker/task:0"))
        assert (w.op.device, b.op.device) == ("/job:ps/task:0", "/job:ps/task:1")
        with kf.Session(servers[2].target, graph=g) as sess:
            sess.run(init)
            got = [sess.run([loss, train], {x: xv})[0] for _ in range(5)]
            got_w = sess.run(w)
        g2, x2, w2, _, loss2, train2, init2 = _model(None)
        with kf.Session(graph=g2) as sess:
            sess.run(init2)
            want = [sess.run([loss2, train2], {x2: xv})[0] for _ in range(5)]
            want_w = sess.run(w2)
        assert np.asarray(got).tobytes() == np.asarray(want).tobytes()
        assert got_w.tobytes() == want_w.tobytes()
        # The variables live on the ps tasks: a session through a ps task's master reads them.
        with kf.Session(servers[1].target, graph=g) as sess:
            np.testing.assert_array_equal(sess.run(w), got_w)
    finally:
        for s in servers:
            s.stop()


@pytest.mark.skipif(not have_distributed(), reason="kernflow-master/worker not installed")
def test_ref_consumers_built_under_the_setter_follow_their_variable(tmp_path):
    """TF1 programs build `Saver` and `report_uninitialized_variables` inside the setter's scope.

    Their Assign / IsVariableInitialized ops get the worker device from the setter but read a
    variable on a ps task by reference; TF's placer then ignores the requested device and puts the
    op with its variable.
    """
    ports = _free_ports(2)
    cluster = kf.train.ClusterSpec({"ps": [f"localhost:{ports[0]}"], "worker": [f"localhost:{ports[1]}"]})
    servers = [kf.train.Server(cluster, "ps", 0), kf.train.Server(cluster, "worker", 0)]
    try:
        g = kf.Graph()
        with g.as_default(), kf.device(kf.train.replica_device_setter(cluster=cluster)):
            v = kf.Variable([1.0, 2.0], name="v")
            uninitialized = kf.report_uninitialized_variables()
            saver = kf.train.Saver()
        with kf.Session(servers[1].target, graph=g) as sess:
            assert list(sess.run(uninitialized)) == [b"v"]
            sess.run(v.initializer)
            assert len(sess.run(uninitialized)) == 0
            path = saver.save(sess, str(tmp_path / "model"))
            sess.run(v.assign([5.0, 6.0]))
            saver.restore(sess, path)
            np.testing.assert_array_equal(sess.run(v), [1.0, 2.0])
    finally:
        for s in servers:
            s.stop()
