"""`kernflow.worker.task_server` and the "grpc" server kernflow-worker registers for kf.train.Server."""

import importlib.util

import pytest

import kernflow.core as kf
from kernflow.core.plugins import registries
from kernflow.core.plugins.registry import ServerRegistry
from kernflow.core.train.server_lib import ClusterSpec
from kernflow.worker import plugin
from kernflow.worker.task_server import GrpcTaskServer


def test_worker_plugin_registers_the_grpc_server():
    assert registries().servers.get("grpc") is plugin.grpc_server


def test_no_grpc_server_without_the_master_package(monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "kernflow.master" else find_spec(name, *a))
    reg = ServerRegistry()
    plugin.kernflow_register_servers(reg)
    assert reg.names() == []


def test_task_server_binds_a_free_port_and_serves_master_and_worker():
    server = GrpcTaskServer(ClusterSpec({"local": ["localhost:0"]}), "local", 0)
    try:
        server.start()
        server.start()
        address = server.target[len("grpc://"):]
        assert server.target.startswith("grpc://localhost:") and not address.endswith(":0")
        assert server.cluster_spec.task_address("local", 0) == address
        g = kf.Graph()
        with g.as_default():
            out = kf.constant(2.0) * 21.0
        with kf.Session(server.target, graph=g) as sess:
            assert sess.run(out) == 42.0
            assert [d.name for d in sess.list_devices()] == ["/job:local/replica:0/task:0/device:CPU:0"]
    finally:
        server.stop()


def test_a_session_in_the_server_process_calls_its_master_in_process():
    """TF's LocalMaster: `kf.Session(server.target)` in the server's own process skips gRPC."""
    from kernflow.client import local_master
    from kernflow.client.master_client import GrpcMasterClient
    from kernflow.master.local import LocalMasterClient
    server = GrpcTaskServer(ClusterSpec({"local": ["localhost:0"]}), "local", 0)
    server.start()
    port = server.target.rsplit(":", 1)[1]
    try:
        g = kf.Graph()
        with g.as_default():
            x = kf.placeholder(kf.float32, [None])
            out = x * 2.0
            bad = kf.reshape(x, [3])
        for target in (server.target, f"grpc://127.0.0.1:{port}"):   # any loopback spelling
            with kf.Session(target, graph=g) as sess:
                assert isinstance(sess._impl._master, LocalMasterClient)
                assert list(sess.run(out, {x: [1.0, 2.0]})) == [2.0, 4.0]
                # Errors are the TF classes a remote master gives, naming the op.
                with pytest.raises(kf.errors.InvalidArgumentError, match="Reshape"):
                    sess.run(bad, {x: [1.0, 2.0]})
    finally:
        server.stop()
    assert local_master.lookup(f"localhost:{port}") is None
    # Once the server stopped, a new session of that target goes over gRPC (and finds no one).
    with kf.Session(f"grpc://localhost:{port}", graph=g) as sess:
        assert isinstance(sess._impl._master, GrpcMasterClient)
        with pytest.raises(kf.errors.UnavailableError):
            sess.run(out, {x: [1.0, 2.0]}, options=kf.RunOptions(timeout_in_ms=3000))
