"""`kf.train.ClusterSpec` and `kf.train.Server`."""

from __future__ import annotations

import importlib
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.testing.processes import have_distributed
from kernflow.core.framework import errors
from kernflow.core.train import server_lib

ClusterSpec = getattr(kf.train, "ClusterSpec", server_lib.ClusterSpec)
Server = getattr(kf.train, "Server", server_lib.Server)



needs_dist = pytest.mark.skipif(not have_distributed(), reason="kernflow-client/master/worker not installed")


# ---------------------------------------------------------------------------- ClusterSpec
def test_cluster_spec_from_lists_and_dicts():
    spec = ClusterSpec({"worker": ["w0:2222", "w1:2222"], "ps": {3: "p3:2222", 1: "p1:2222"}})
    assert spec.jobs == ["ps", "worker"]
    assert spec.num_tasks("worker") == 2 and spec.num_tasks("ps") == 2
    assert spec.task_indices("ps") == [1, 3]
    assert spec.task_address("worker", 1) == "w1:2222"
    assert spec.task_address("ps", 3) == "p3:2222"
    assert spec.job_tasks("ps") == [None, "p1:2222", None, "p3:2222"]
    assert spec.as_dict() == {"worker": ["w0:2222", "w1:2222"], "ps": {1: "p1:2222", 3: "p3:2222"}}
    cluster_def = spec.as_cluster_def()
    assert [(j.name, dict(j.tasks)) for j in cluster_def.job] == [
        ("ps", {1: "p1:2222", 3: "p3:2222"}), ("worker", {0: "w0:2222", 1: "w1:2222"})]
    assert ClusterSpec(spec.as_cluster_def()) == spec
    assert ClusterSpec(spec) == spec and spec == spec.as_dict()
    assert spec != ClusterSpec({"worker": ["w0:2222"]})
    assert bool(spec) and not ClusterSpec({})
    assert spec.task_names()[0] == "/job:ps/replica:0/task:1"
    assert "w1:2222" in repr(spec)
    assert ClusterSpec({"w": {"0": "a:1"}}).as_dict() == {"w": ["a:1"]}


def test_cluster_spec_errors():
    spec = ClusterSpec({"worker": ["w0:1"]})
    with pytest.raises(ValueError, match="No such job"):
        spec.num_tasks("ps")
    with pytest.raises(ValueError, match="index 4"):
        spec.task_address("worker", 4)
    with pytest.raises(TypeError):
        ClusterSpec(["w0:1"])
    with pytest.raises(TypeError):
        ClusterSpec({"worker": "w0:1"})
    with pytest.raises(ValueError, match="job name"):
        ClusterSpec({"bad job": ["a:1"]})
    with pytest.raises(ValueError, match="task index"):
        ClusterSpec({"w": {-1: "a:1"}})
    with pytest.raises(ValueError, match="address"):
        ClusterSpec({"w": [""]})


def test_server_argument_errors():
    spec = {"worker": ["localhost:1", "localhost:2"], "ps": ["localhost:3"]}
    with pytest.raises(ValueError, match="job_name"):
        Server(spec, start=False)
    with pytest.raises(ValueError, match="task_index"):
        Server(spec, job_name="worker", start=False)
    with pytest.raises(ValueError, match="protocol"):
        Server(spec, job_name="ps", protocol="rdma", start=False)
    with pytest.raises(ValueError, match="No such job"):
        Server(spec, job_name="chief", task_index=0, start=False)
    with pytest.raises(ValueError, match="host:port"):
        Server({"w": ["nohost"]}, start=False)


def test_server_without_the_distributed_packages(monkeypatch):
    from kernflow.core.plugins import manager
    pm = manager.KernflowPluginManager()  # an embedded-only install: core's own plugins, no others
    for name in manager.DEFAULT_PLUGINS:
        pm.register(importlib.import_module(name), name=name)
    monkeypatch.setattr(manager, "_registries", manager.Registries(pm))
    with pytest.raises(ImportError, match="no installed plugin serves 'grpc' .*install it with "
                                          "`pip install packages/client packages/master packages/worker`"):
        Server.create_local_server()
    with pytest.raises(ValueError, match="Unsupported protocol 'rdma'.*server protocols: none"):
        Server({"w": ["localhost:1"]}, protocol="rdma")
    with pytest.raises(ValueError, match="job_name"):  # arguments are checked before the lookup
        Server({"w": ["localhost:1"], "ps": ["localhost:2"]})


_EMBEDDED_ONLY = """
import sys
import kernflow.core as kf
with kf.Session() as sess:
    assert sess.run(kf.constant(2.0) * 21.0) == 42.0
try:
    kf.train.Server.create_local_server()
except ImportError as e:
    print("ImportError:", e)
print("service modules:", sorted(m for m in sys.modules if m.split(".")[:2] in
                                 (["kernflow", "client"], ["kernflow", "master"], ["kernflow", "worker"])))
"""


def test_core_runs_and_explains_server_without_service_plugins():
    env = dict(os.environ, KERNFLOW_DISABLE_PLUGINS="client,master,worker")
    r = subprocess.run([sys.executable, "-c", _EMBEDDED_ONLY], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "ImportError: kf.train.Server(protocol='grpc') needs kernflow's distributed runtime" in r.stdout
    assert "service modules: []" in r.stdout


# ---------------------------------------------------------------------------- servers
def _regression_graph():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [None, 2], name="x")
        y = kf.placeholder(kf.float32, [None, 1], name="y")
        w = kf.Variable(np.zeros((2, 1), np.float32), name="w")
        b = kf.Variable(0.0, name="b")
        loss = kf.reduce_mean(kf.square(kf.matmul(x, w) + b - y))
        train = kf.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = kf.global_variables_initializer()
    return g, x, y, w, loss, train, init


def _data():
    rs = np.random.RandomState(0)
    xv = rs.rand(16, 2).astype(np.float32)
    yv = (xv @ np.array([[2.0], [-1.0]], np.float32) + 0.5).astype(np.float32)
    return xv, yv


@needs_dist
def test_local_server_runs_a_training_step():
    server = Server.create_local_server()
    try:
        assert server.target.startswith("grpc://localhost:")
        g, x, y, w, loss, train, init = _regression_graph()
        xv, yv = _data()
        with kf.Session(server.target, graph=g) as sess:
            sess.run(init)
            first = sess.run(loss, {x: xv, y: yv})
            for _ in range(20):
                sess.run(train, {x: xv, y: yv})
            last = sess.run(loss, {x: xv, y: yv})
            devices = [d.name for d in sess.list_devices() if d.device_type == "CPU"]
        assert last < first
        assert devices == ["/job:localhost/replica:0/task:0/device:CPU:0"]
        # The same steps on the embedded runtime give the same numbers.
        g2, x2, y2, w2, loss2, train2, init2 = _regression_graph()
        with kf.Session(graph=g2) as sess:
            sess.run(init2)
            for _ in range(20):
                sess.run(train2, {x2: xv, y2: yv})
            assert sess.run(loss2, {x2: xv, y2: yv}).tobytes() == np.float32(last).tobytes()
    finally:
        server.stop()
    server.stop()  # idempotent


def _free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@needs_dist
def test_two_task_cluster_in_one_process():
    p0, p1 = _free_ports(2)
    cluster = ClusterSpec({"ps": [f"localhost:{p1}"], "worker": [f"localhost:{p0}"]})
    ps = Server(cluster, job_name="ps", task_index=0)
    worker = Server(cluster, job_name="worker", task_index=0)
    try:
        assert worker.target == f"grpc://localhost:{p0}"
        g = kf.Graph()
        with g.as_default():
            x = kf.placeholder(kf.float32, [None, 2], name="x")
            y = kf.placeholder(kf.float32, [None, 1], name="y")
            with kf.device("/job:ps/task:0"):
                w = kf.Variable(np.zeros((2, 1), np.float32), name="w")
                b = kf.Variable(0.0, name="b")
            loss = kf.reduce_mean(kf.square(kf.matmul(x, w) + b - y))
            train = kf.train.GradientDescentOptimizer(0.1).minimize(loss)
            init = kf.global_variables_initializer()
        xv, yv = _data()
        with kf.Session(worker.target, graph=g) as sess:
            sess.run(init)
            for _ in range(20):
                sess.run(train, {x: xv, y: yv})
            trained = sess.run(w)
            names = sorted(d.name for d in sess.list_devices() if d.device_type == "CPU")
        assert names == ["/job:ps/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:0/device:CPU:0"]
        # Another client, through the ps task's master, sees the variable the first one trained.
        with kf.Session(ps.target, graph=g) as sess:
            np.testing.assert_array_equal(sess.run(w), trained)
        # Same numbers as the embedded runtime.
        g2, x2, y2, w2, loss2, train2, init2 = _regression_graph()
        with kf.Session(graph=g2) as sess:
            sess.run(init2)
            for _ in range(20):
                sess.run(train2, {x2: xv, y2: yv})
            assert sess.run(w2).tobytes() == trained.tobytes()
        # The ps task goes away: steps that need it fail with UnavailableError, and say which task.
        # (The session is created, by its first step, while the ps is up: as in TF, CreateSession
        # waits for every task.)
        with kf.Session(worker.target, graph=g) as sess:
            sess.run(loss, {x: xv, y: yv})
            ps.stop()
            with pytest.raises(errors.UnavailableError, match="/job:ps"):
                sess.run(train, {x: xv, y: yv})
    finally:
        worker.stop()
        ps.stop()


@needs_dist
def test_server_def_dict_and_start_later():
    (port,) = _free_ports(1)
    server = Server({"cluster": {"local": [f"localhost:{port}"]}, "job_name": "local", "task_index": 0},
                    start=False)
    try:
        assert server.server_def.job_name == "local"
        assert server.cluster_spec.task_address("local", 0) == f"localhost:{port}"
        server.start()
        server.start()
        g = kf.Graph()
        with g.as_default():
            out = kf.constant(2.0) * 21.0
        with kf.Session(server.target, graph=g) as sess:
            assert sess.run(out) == 42.0
    finally:
        server.stop()
    with pytest.raises(RuntimeError):
        server.start()
