"""kf.Session("grpc://...") end to end against a fake master that runs the graph in process."""

import collections
import socket
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.client import grpc_session, master_client
from kernflow.client.grpc_session import GrpcSession, parse_target


def _target(srv):
    return f"grpc://{srv.address}"


def _methods(master):
    return [m for m, _ in master.servicer.requests]


def test_plugin_registers_grpc_scheme():
    from kernflow.core.plugins import registries
    factory = registries().session_factories.get("grpc")
    assert factory is grpc_session.grpc_session_factory and factory.reset is grpc_session.reset


def test_parse_target():
    assert parse_target("grpc://localhost:2222") == "localhost:2222"
    assert parse_target("grpc://127.0.0.1:5/") == "127.0.0.1:5"
    assert parse_target("grpc://[::1]:2222") == "[::1]:2222"
    for bad in ("grpc://host", "grpc://:80", "grpc://host:port", "etcd://h:1"):
        with pytest.raises(errors.InvalidArgumentError):
            parse_target(bad)


def test_fetch_structures_and_feeds(fake_master):
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [None, 2], name="x")
        s = kf.placeholder(kf.string, [], name="s")
        y = kf.add(x, 1.0, name="y")
        z = kf.reduce_sum(y, name="z")
        c = kf.constant([1, 2, 3], dtype=kf.int64, name="c")
        noop = kf.no_op(name="noop")
        ident = kf.identity(s)
    Point = collections.namedtuple("Point", "a b")
    with kf.Session(_target(fake_master), graph=g) as sess:
        feed = {x: np.array([[1, 2], [3, 4]], np.float32), s: b"hello"}
        out = sess.run({"y": y, "pair": (z, c), "pt": Point(noop, [c, ident])}, feed)
        np.testing.assert_array_equal(out["y"], [[2, 3], [4, 5]])
        assert out["pair"][0] == 14.0 and isinstance(out["pair"][0], np.float32)
        assert out["pair"][1].dtype == np.int64 and out["pair"][1].tolist() == [1, 2, 3]
        assert isinstance(out["pt"], Point) and out["pt"].a is None
        assert out["pt"].b[1] == b"hello"
        assert sess.run(z, {"x:0": np.ones((3, 2), np.float32)}) == 12.0
        f = sess.make_callable([y, z], feed_list=[x])
        yv, zv = f(np.zeros((1, 2), np.float32))
        assert yv.tolist() == [[1.0, 1.0]] and zv == 2.0
    run = [r for m, r in fake_master.servicer.requests if m == "RunStep"][0]
    assert sorted(nt.name for nt in run.feed) == ["s:0", "x:0"]
    assert run.feed[0].tensor.tensor_content or run.feed[0].tensor.string_val
    assert set(run.target) == {"noop"}


def test_variables_and_targets(fake_master):
    g = kf.Graph()
    with g.as_default():
        v = kf.Variable(np.zeros(3, np.float32), name="v")
        inc = kf.assign_add(v, [1.0, 2.0, 3.0])
        init = kf.global_variables_initializer()
    with kf.Session(_target(fake_master), graph=g) as sess:
        sess.run(init)
        sess.run(inc)
        sess.run(inc)
        np.testing.assert_array_equal(sess.run(v), [2.0, 4.0, 6.0])


def test_extend_sends_only_the_delta(fake_master):
    g = kf.Graph()
    with g.as_default():
        a = kf.constant(2.0, name="a")
        b = kf.multiply(a, 3.0, name="b")
    sess = kf.Session(_target(fake_master), graph=g)
    assert _methods(fake_master) == []  # the session is created with the first step
    assert sess.run(b) == 6.0
    create = fake_master.servicer.requests[0][1]
    assert fake_master.servicer.requests[0][0] == "CreateSession"
    first_nodes = {n.name for n in create.graph_def.node}
    assert {"a", "b"} <= first_nodes
    assert create.target == _target(fake_master)
    assert sess.run(b) == 6.0
    assert _methods(fake_master) == ["CreateSession", "RunStep", "RunStep"]  # nothing new: no Extend
    with g.as_default():
        c = kf.add(b, 1.0, name="c")
        d = kf.negative(c, name="d")
    assert sess.run(d) == -7.0
    method, ext = fake_master.servicer.requests[3]
    assert method == "ExtendSession"
    delta = {n.name for n in ext.graph_def.node}
    assert {"c", "d"} <= delta and not delta & first_nodes
    assert ext.current_graph_version == 1  # what CreateSession returned
    assert ext.session_handle == sess._impl.handle
    with g.as_default():
        e = kf.add(d, 10.0, name="e")
    assert sess.run(e) == 3.0
    ext2 = fake_master.servicer.requests[5][1]
    assert ext2.current_graph_version == 2  # the version the master returned last time
    assert {n.name for n in ext2.graph_def.node} & (first_nodes | delta) == set()
    sess.close()
    assert _methods(fake_master)[-1] == "CloseSession"
    assert fake_master.servicer.sessions == {}


def test_errors_propagate_as_tf_classes(fake_master):
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, None, name="x")
        r = kf.reshape(x, [2, 2], name="r")
        v = kf.Variable(1.0, name="v")
        read = kf.identity(v)
    with kf.Session(_target(fake_master), graph=g) as sess:
        with pytest.raises(errors.InvalidArgumentError) as info:
            sess.run(r, {x: np.zeros(3, np.float32)})
        assert fake_master.address in str(info.value) and "RunStep" in str(info.value)
        with pytest.raises(errors.FailedPreconditionError):
            sess.run(read)
        assert sess.run(r, {x: np.arange(4, dtype=np.float32)}).shape == (2, 2)  # still usable
        with pytest.raises(TypeError):  # checked on the client, before any RPC
            sess.run(r, {x: "not a number"})


def test_run_options_timeout_is_the_deadline(fake_master):
    g = kf.Graph()
    with g.as_default():
        kf.no_op(name="block")
    with kf.Session(_target(fake_master), graph=g) as sess:
        t0 = time.monotonic()
        with pytest.raises(errors.DeadlineExceededError):
            sess.run("block", options=kf.RunOptions(timeout_in_ms=200))
        elapsed = time.monotonic() - t0
        assert 0.2 + master_client.RUN_GRACE_S * 0.9 < elapsed < master_client.RUN_GRACE_S + 4
        run = [r for m, r in fake_master.servicer.requests if m == "RunStep"][-1]
        assert run.options.timeout_in_ms == 200


def test_config_operation_timeout_is_the_default_deadline(fake_master):
    g = kf.Graph()
    with g.as_default():
        kf.no_op(name="block")
        one = kf.constant(1)
    cfg = kf.ConfigProto(operation_timeout_in_ms=150)
    with kf.Session(_target(fake_master), graph=g, config=cfg) as sess:
        assert sess.run(one) == 1
        with pytest.raises(errors.DeadlineExceededError):
            sess.run("block")
    create = fake_master.servicer.requests[0][1]
    assert create.config.operation_timeout_in_ms == 150
    runs = [r for m, r in fake_master.servicer.requests if m == "RunStep"]
    assert all(r.options.timeout_in_ms == 150 for r in runs)


def test_run_metadata_comes_back(fake_master):
    g = kf.Graph()
    with g.as_default():
        y = kf.add(kf.constant(1.0), 2.0)
    with kf.Session(_target(fake_master), graph=g) as sess:
        meta = kf.RunMetadata()
        sess.run(y, options=kf.RunOptions(trace_level=kf.RunOptions.FULL_TRACE), run_metadata=meta)
        assert meta.step_stats.dev_stats and meta.step_stats.dev_stats[0].node_stats


def test_list_devices_and_reset(fake_master):
    with kf.Session(_target(fake_master), graph=kf.Graph()) as sess:
        devs = sess.list_devices()
    assert [d.name for d in devs] == ["/job:master/replica:0/task:0/device:CPU:0",
                                      "/job:worker/replica:0/task:0/device:CPU:0"]
    assert devs[1].memory_limit_bytes == 2 << 30 and devs[1].incarnation == 42
    kf.Session.reset(_target(fake_master), ["c1", "c2"])
    method, req = fake_master.servicer.requests[-1]
    assert method == "Reset" and list(req.container) == ["c1", "c2"]


def test_unreachable_master(fake_master):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    g = kf.Graph()
    with g.as_default():
        one = kf.constant(1)
    sess = kf.Session(f"grpc://127.0.0.1:{port}", graph=g)
    with pytest.raises(errors.UnavailableError, match=f"master at 127.0.0.1:{port} is unavailable"):
        sess.run(one)
    sess.close()


def test_close_ignores_a_dead_master(fake_master):
    g = kf.Graph()
    with g.as_default():
        one = kf.constant(1)
    sess = kf.Session(_target(fake_master), graph=g)
    assert sess.run(one) == 1
    fake_master.stop()
    sess.close()  # UNAVAILABLE on close is not an error
    with pytest.raises(RuntimeError, match="closed Session"):
        sess.run(one)


def test_master_errors_on_close_other_than_unavailable_are_raised(fake_master):
    g = kf.Graph()
    with g.as_default():
        one = kf.constant(1)
    impl = GrpcSession(_target(fake_master), g, None)
    assert impl.run((), [], ("Const:0",), ()) == [np.array(1, np.int32)]
    fake_master.servicer.sessions.clear()  # the master forgot the session
    with pytest.raises(errors.NotFoundError):
        impl.close()


def test_a_master_of_another_protocol_version_is_refused(fake_master):
    """The master's CreateSessionResponse carries its protocol version: another one fails the first
    step with an error naming the master and both versions."""
    from kernflow.client import protocol
    g = kf.Graph()
    with g.as_default():
        one = kf.constant(1)
    mine = protocol.PROTOCOL_VERSION
    fake_master.servicer.protocol_version = mine + 1
    sess = GrpcSession(_target(fake_master), g, None)
    with pytest.raises(errors.FailedPreconditionError) as info:
        sess.run((), [], (one.name,), ())
    msg = str(info.value)
    assert f"master at {fake_master.address} speaks kernflow protocol version {mine + 1}," in msg
    assert f"this process speaks version {mine}:" in msg
    assert _methods(fake_master) == ["CreateSession"]   # no step ran
