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


def test_a_client_process_on_the_host_calls_run_step_over_the_same_host_channel(monkeypatch):
    """A session whose master is a task server of another process on this host (here: the lookup
    of in-process masters turned off) sends RunStep over the task's Unix socket, with the results
    and error classes of gRPC."""
    from kernflow.client import local_channel, local_master
    from kernflow.client.master_client import GrpcMasterClient
    monkeypatch.setattr(local_master, "lookup", lambda address: None)
    server = GrpcTaskServer(ClusterSpec({"local": ["localhost:0"]}), "local", 0)
    server.start()
    address = server.target[len("grpc://"):]
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [None])
        out = x * 2.0
        bad = kf.reshape(x, [3])
        dequeue = kf.FIFOQueue(1, kf.float32).dequeue()

    def run_all():
        got = []
        with kf.Session(server.target, graph=g) as sess:
            assert isinstance(sess._impl._master, GrpcMasterClient)
            got.append(list(sess.run(out, {x: [1.0, 2.0]})))
            for fetch, options in ((bad, None), (dequeue, kf.RunOptions(timeout_in_ms=200))):
                with pytest.raises(kf.errors.OpError) as e:
                    sess.run(fetch, {x: [1.0, 2.0]}, options=options)
                got.append((type(e.value), "Reshape" in str(e.value) or "Timed out" in str(e.value)))
            return got, local_channel._by_address.get(address)

    try:
        over_socket, channel = run_all()
        assert isinstance(channel, local_channel.LocalChannel)
        local_channel.forget()
        monkeypatch.setenv(local_channel.LOCAL_CHANNEL_ENV, "0")
        over_grpc, channel = run_all()
        assert channel is None
        assert over_socket == over_grpc == [[2.0, 4.0], (kf.errors.InvalidArgumentError, True),
                                            (kf.errors.DeadlineExceededError, True)]
    finally:
        local_channel.forget()
        server.stop()
