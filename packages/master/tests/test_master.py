"""The master with in-process workers: placement over tasks, caching, sharing, failures."""

from __future__ import annotations

import contextlib
import threading
import time
from unittest import mock

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.client import codec
from kernflow.client.protobuf import master_pb2, worker_pb2
from kernflow.core.framework import errors
from kernflow.core.protobuf import config_pb2
from kernflow.master import master as master_mod

T0 = "/job:worker/replica:0/task:0"
T1 = "/job:worker/replica:0/task:1"


def _device(spec):
    return kf.device(spec) if spec else contextlib.nullcontext()


def _model(task1=None):
    """A small deterministic graph; with `task1`, its middle runs on that task."""
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [None, 4], name="x")
        w = kf.constant(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), name="w")
        with _device(task1):
            h = kf.tanh(kf.matmul(x, w) + 0.25)
            s = kf.reduce_sum(h * h, axis=1)
        out = kf.sqrt(s + 1.0) * 3.0
    return g, x, h, out


def test_graph_over_two_tasks_matches_embedded_bit_for_bit(make_cluster):
    xv = np.random.RandomState(0).randn(5, 4).astype(np.float32)
    g, x, h, out = _model()
    with kf.Session(graph=g) as sess:
        want_h, want_out = sess.run([h, out], {x: xv})
    c = make_cluster()
    g2, x2, h2, out2 = _model("/job:worker/task:1")
    s = c.session(g2)
    opts = config_pb2.RunOptions(output_partition_graphs=True)
    resp = s.run_raw([h2, out2], {x2: xv}, options=opts)
    got_h, got_out = (codec.proto_to_tensor(t.tensor) for t in resp.tensor)
    assert got_h.tobytes() == want_h.tobytes() and got_out.tobytes() == want_out.tobytes()
    assert [t.name for t in resp.tensor] == [h2.name, out2.name]
    # Both tasks ran a partition, the MatMul on task 1 and the feeds/fetches on task 0.
    devices = {nd.name: nd.device for pg in resp.metadata.partition_graphs for nd in pg.node}
    assert devices["MatMul"].startswith(T1)
    assert devices["Sqrt"].startswith(T0)
    assert c.spies[T0].calls["run_graph"] == 1 and c.spies[T1].calls["run_graph"] == 1


def test_unconstrained_ops_stay_on_the_client_task(make_cluster):
    c = make_cluster({"worker": 3})
    g = kf.Graph()
    with g.as_default():
        a = kf.constant(2.0)
        b = kf.constant(3.0)
        out = a * b + a
    assert c.session(g).run(out) == 8.0
    assert c.spies[T0].calls["run_graph"] == 1
    assert c.spies[T1].calls["run_graph"] == 0
    assert c.spies["/job:worker/replica:0/task:2"].calls["run_graph"] == 0


def test_local_task_is_the_client_task(make_cluster):
    c = make_cluster({"worker": 2}, local_task="/job:worker/task:1")
    g = kf.Graph()
    with g.as_default():
        out = kf.constant(2.0) * 4.0
    assert c.session(g).run(out) == 8.0
    assert c.spies[T1].calls["run_graph"] == 1 and c.spies[T0].calls["run_graph"] == 0
    resp = c.master.list_devices(master_pb2.ListDevicesRequest())
    assert [d.name for d in resp.local_device] == [T1 + "/device:CPU:0"]
    assert [d.name for d in resp.remote_device] == [T0 + "/device:CPU:0"]


def test_a_standalone_master_runs_unconstrained_ops_on_worker_0_not_the_ps(make_cluster):
    """TF1's convention (issue 18): with no task of its own, the master puts ops that name no job on
    the chief, else /job:worker/task:0 - not on the alphabetically first task (a ps) - unless told
    otherwise (`default_task`, `kernflow master --default-task`)."""
    g = kf.Graph()
    with g.as_default():
        out = kf.matmul(kf.ones([2, 3]), kf.ones([3, 2]))
    ps0 = "/job:ps/replica:0/task:0"
    c = make_cluster({"ps": 1, "worker": 2})
    assert c.session(g).run(out).tolist() == [[3.0, 3.0], [3.0, 3.0]]
    assert c.spies[T0].calls["run_graph"] == 1 and c.spies[ps0].calls["run_graph"] == 0
    c = make_cluster({"ps": 1, "worker": 2}, default_task="/job:worker/task:1")
    c.session(g).run(out)
    assert c.spies[T1].calls["run_graph"] == 1 and c.spies[T0].calls["run_graph"] == 0
    c = make_cluster({"ps": 1, "chief": 1, "worker": 1})
    c.session(g).run(out)
    assert c.spies["/job:chief/replica:0/task:0"].calls["run_graph"] == 1
    assert c.spies[T0].calls["run_graph"] == 0


def test_variables_on_a_ps_task_are_shared_by_two_sessions(make_cluster):
    c = make_cluster({"ps": 1, "worker": 2}, local_task=T0)
    g = kf.Graph()
    with g.as_default():
        with kf.device("/job:ps/task:0"):
            v = kf.Variable(np.zeros(3, np.float32), name="v")
        with kf.device("/job:worker/task:1"):
            delta = kf.constant(np.array([1, 2, 3], np.float32)) * 2.0
        inc = kf.assign_add(v, delta)
        init = kf.global_variables_initializer()
    a, b = c.session(g), c.session(g)
    a.run(targets=[init])
    np.testing.assert_array_equal(a.run(inc), [2, 4, 6])
    np.testing.assert_array_equal(b.run(inc), [4, 8, 12])
    np.testing.assert_array_equal(a.run(v.value()), [4, 8, 12])
    ps = c.spies["/job:ps/replica:0/task:0"]
    assert ps.calls["run_graph"] >= 3
    # The variable lives in the ps task's device, not on the workers.
    ps_vars = [ps.inner.devices[0].resource_mgr.lookup(c, "v")
               for c in ps.inner.devices[0].resource_mgr.containers()]
    np.testing.assert_array_equal(ps_vars[0].read(), [4, 8, 12])
    for t in (T0, T1):
        assert not c.spies[t].inner.devices[0].resource_mgr.containers()


def test_a_cached_step_registers_once_per_task(make_cluster):
    c = make_cluster()
    g, x, h, out = _model("/job:worker/task:1")
    s = c.session(g)
    xv = np.ones((2, 4), np.float32)
    for _ in range(4):
        s.run(out, {x: xv})
    assert c.spies[T0].calls["register_graph"] == 1
    assert c.spies[T1].calls["register_graph"] == 1
    assert c.spies[T0].calls["run_graph"] == 4
    s.run(h, {x: xv})  # a new signature registers new graphs
    assert c.spies[T0].calls["register_graph"] == 2
    assert c.spies[T1].calls["register_graph"] == 2
    # Every task dropped each successful step's state itself, once its values were taken: the
    # master sends no CleanupGraph after a successful RunStep.
    deadline = time.time() + 5
    while time.time() < deadline and any(c.spies[t].inner._steps for t in (T0, T1)):
        time.sleep(0.01)
    assert not c.spies[T0].inner._steps and not c.spies[T1].inner._steps
    assert c.spies[T0].calls["cleanup_graph"] == 0 and c.spies[T1].calls["cleanup_graph"] == 0
    # Closing the session deregisters its graphs.
    s.close()
    assert c.spies[T0].calls["deregister_graph"] == 2 and c.spies[T1].calls["deregister_graph"] == 2
    with pytest.raises(errors.AbortedError, match="not found"):
        s.run(out, {x: xv})


def test_extending_the_graph_keeps_variables_in_place(make_cluster):
    c = make_cluster({"ps": 2, "worker": 1})
    g = kf.Graph()
    with g.as_default():
        with kf.device("/job:ps"):
            v = kf.Variable(1.0, name="v")
        init = kf.global_variables_initializer()
    s = c.session(g)
    s.run(targets=[init])
    with g.as_default():
        doubled = kf.assign(v, v * 2.0)
    assert s.run(doubled) == 2.0
    with g.as_default():
        more = kf.assign_add(v, 0.5)
    assert s.run(more) == 2.5
    assert s.version == 2


def test_a_failing_kernel_aborts_the_step_and_names_the_node(make_cluster):
    c = make_cluster()
    g = kf.Graph()
    with g.as_default():
        a = kf.placeholder(kf.float32, [None, None], name="a")
        b = kf.placeholder(kf.float32, [None, None], name="b")
        with kf.device("/job:worker/task:1"):
            bad = kf.matmul(a, b, name="bad_matmul")
        out = bad + 1.0
    s = c.session(g)
    with pytest.raises(errors.InvalidArgumentError) as e:
        s.run(out, {a: np.ones((2, 3)), b: np.ones((2, 3))})
    assert "bad_matmul" in str(e.value) and str(e.value).startswith(f"From {T1}:")
    # The first task to report aborted the step on the other (which one reports first varies:
    # task 0's Recv passes task 1's error on).
    assert c.spies[T0].calls["abort_step"] + c.spies[T1].calls["abort_step"] == 1
    # The session still works after a failed step.
    np.testing.assert_array_equal(s.run(out, {a: np.ones((2, 3)), b: np.ones((3, 1))}), np.full((2, 1), 4.0))


def test_an_unavailable_worker_fails_the_step_quickly(make_cluster):
    c = make_cluster()
    g, x, h, out = _model("/job:worker/task:1")
    s = c.session(g)
    xv = np.ones((2, 4), np.float32)
    s.run(out, {x: xv})  # registered and working

    def die(req):
        time.sleep(0.2)
        raise errors.UnavailableError(None, None, "connection reset by peer")
    c.spies[T1].hooks["run_graph"] = die
    t = time.time()
    with pytest.raises(errors.UnavailableError) as e:
        s.run(out, {x: xv})
    assert time.time() - t < 5
    assert T1 in str(e.value) and "connection reset" in str(e.value)
    assert c.spies[T0].calls["abort_step"] == 1 and c.spies[T1].calls["abort_step"] == 0
    # Task 0's RunGraph ended (aborted) rather than waiting for its Recv.
    assert c.spies[T0].calls["run_graph"] == 2


def test_a_hung_worker_is_found_by_the_health_check(make_cluster):
    c = make_cluster(health_check_interval_s=0.2, rpc_timeout_s=1.0, abort_grace_s=0.5)
    g, x, h, out = _model("/job:worker/task:1")
    s = c.session(g)
    xv = np.ones((2, 4), np.float32)
    s.run(out, {x: xv})
    release = threading.Event()
    c.spies[T1].hooks["run_graph"] = lambda req: release.wait(30)

    def unreachable(req):
        raise errors.UnavailableError(None, None, "failed to connect to all addresses")
    c.spies[T1].hooks["get_status"] = unreachable
    t = time.time()
    try:
        with pytest.raises(errors.UnavailableError) as e:
            s.run(out, {x: xv})
    finally:
        release.set()
    assert time.time() - t < 5
    assert T1 in str(e.value) and "health check" in str(e.value)


def test_a_step_timeout_is_a_deadline_exceeded_error(make_cluster):
    c = make_cluster(abort_grace_s=0.5)
    g, x, h, out = _model("/job:worker/task:1")
    s = c.session(g)
    xv = np.ones((2, 4), np.float32)
    release = threading.Event()
    c.spies[T1].hooks["run_graph"] = lambda req: release.wait(30)
    t = time.time()
    try:
        with pytest.raises(errors.DeadlineExceededError, match="300 ms"):
            s.run(out, {x: xv}, options=config_pb2.RunOptions(timeout_in_ms=300))
    finally:
        release.set()
    assert time.time() - t < 5
    # The hung task was aborted (task 0 may have timed out by itself: it got the deadline too).
    assert c.spies[T1].calls["abort_step"] == 1


def test_the_config_operation_timeout_applies(make_cluster):
    c = make_cluster(abort_grace_s=0.5)
    g, x, h, out = _model("/job:worker/task:1")
    s = c.session(g, config=config_pb2.ConfigProto(operation_timeout_in_ms=200))
    release = threading.Event()
    c.spies[T1].hooks["run_graph"] = lambda req: release.wait(30)
    try:
        with pytest.raises(errors.DeadlineExceededError):
            s.run(out, {x: np.ones((1, 4))})
    finally:
        release.set()


def test_a_restarted_worker_fails_one_step_then_recovers(make_cluster):
    c = make_cluster()
    g, x, h, out = _model("/job:worker/task:1")
    s = c.session(g)
    xv = np.ones((2, 4), np.float32)
    want = s.run(out, {x: xv})
    c.replace_worker(T1)
    with pytest.raises((errors.NotFoundError, errors.AbortedError)) as e:
        s.run(out, {x: xv})
    assert T1 in str(e.value)
    np.testing.assert_array_equal(s.run(out, {x: xv}), want)
    assert c.spies[T1].calls["register_graph"] == 1


def test_stale_extend_session_is_aborted(make_cluster):
    c = make_cluster()
    g = kf.Graph()
    with g.as_default():
        kf.constant(1.0, name="a")
    s = c.session(g)
    with g.as_default():
        kf.constant(2.0, name="b")
    s.sync()
    assert s.version == 1
    delta = master_pb2.ExtendSessionRequest(session_handle=s.handle, current_graph_version=0)
    delta.graph_def.node.add(name="c", op="NoOp")
    with pytest.raises(errors.AbortedError, match="graph version"):
        c.master.extend_session(delta)
    dup = master_pb2.ExtendSessionRequest(session_handle=s.handle, current_graph_version=1)
    dup.graph_def.node.add(name="a", op="NoOp")
    with pytest.raises(errors.InvalidArgumentError, match="already"):
        c.master.extend_session(dup)


def test_tracing_returns_step_stats_of_every_task(make_cluster):
    c = make_cluster()
    g, x, h, out = _model("/job:worker/task:1")
    s = c.session(g)
    resp = s.run_raw([out], {x: np.ones((2, 4), np.float32)},
                     options=config_pb2.RunOptions(trace_level=config_pb2.RunOptions.FULL_TRACE))
    devs = {ds.device for ds in resp.metadata.step_stats.dev_stats}
    assert T0 + "/device:CPU:0" in devs and T1 + "/device:CPU:0" in devs
    sess = next(iter(c.master._sessions.values()))
    assert sess.cost_model.measured("MatMul", "CPU") is not None


def test_reset_clears_variables_on_every_task(make_cluster):
    c = make_cluster()
    g = kf.Graph()
    with g.as_default():
        with kf.device("/job:worker/task:1"):
            v = kf.Variable(3.0, name="v")
        init = kf.global_variables_initializer()
    s = c.session(g)
    s.run(targets=[init])
    assert s.run(v.value()) == 3.0
    c.master.reset(master_pb2.ResetRequest())
    assert c.spies[T0].calls["cleanup_all"] == 1 and c.spies[T1].calls["cleanup_all"] == 1
    with pytest.raises(errors.FailedPreconditionError):
        s.run(v.value())


def test_device_filters_hide_other_tasks(make_cluster):
    c = make_cluster({"worker": 3})
    g = kf.Graph()
    with g.as_default():
        with kf.device("/job:worker/task:2"):
            a = kf.constant(1.0)
        out = a + 1.0
    cfg = config_pb2.ConfigProto(device_filters=["/job:worker/task:1", "/job:worker/task:2"])
    s = c.session(g, config=cfg)
    assert s.run(out) == 2.0
    assert c.spies[T0].calls["get_status"] == 0 and c.spies[T0].calls["run_graph"] == 0
    assert c.spies[T1].calls["run_graph"] == 1   # the client task: the first the filters admit
    hidden = c.session(g, config=config_pb2.ConfigProto(device_filters=["/job:worker/task:0"]))
    with pytest.raises(errors.InvalidArgumentError, match="task:2"):
        hidden.run(out)


def test_unknown_sessions_and_bad_graphs(make_cluster):
    c = make_cluster()
    with pytest.raises(errors.AbortedError):
        c.master.run_step(master_pb2.RunStepRequest(session_handle="nope", fetch=["a:0"]))
    bad = master_pb2.CreateSessionRequest()
    bad.graph_def.node.add(name="x", op="NoSuchOp")
    with pytest.raises(errors.NotFoundError, match="NoSuchOp"):
        c.master.create_session(bad)
    g = kf.Graph()
    with g.as_default():
        kf.constant(1.0, name="a")
    s = c.session(g)
    with pytest.raises(errors.NotFoundError, match="missing"):
        c.master.run_step(master_pb2.RunStepRequest(session_handle=s.handle, fetch=["missing:0"]))
    assert s.run_raw([], targets=[]).tensor == []


def test_concurrent_steps_of_one_session(make_cluster):
    c = make_cluster()
    g, x, h, out = _model("/job:worker/task:1")
    s = c.session(g)
    xs = [np.full((3, 4), i, np.float32) for i in range(8)]
    want = [s.run(out, {x: xv}) for xv in xs]
    got = [None] * len(xs)

    def run(i):
        for _ in range(5):
            got[i] = s.run(out, {x: xs[i]})
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_get_status_failure_of_another_task_is_not_fatal(make_cluster):
    c = make_cluster()

    def down(req):
        raise errors.UnavailableError(None, None, "down")
    g = kf.Graph()
    with g.as_default():
        out = kf.constant(2.0) + 1.0
    g2 = kf.Graph()
    with g2.as_default():
        with kf.device("/job:worker/task:1"):
            out2 = kf.constant(2.0) + 1.0
    s, s2 = c.session(g), c.session(g2)          # created while every task answers
    c.spies[T1].hooks["get_status"] = down
    assert s.run(out) == 3.0                     # a step that does not need task 1 runs
    with pytest.raises(errors.UnavailableError, match="unreachable") as e:
        s2.run(out2)
    assert T1 in str(e.value) and "down" in str(e.value)
    del c.spies[T1].hooks["get_status"]          # the task is back: the same session recovers
    assert s2.run(out2) == 3.0


def test_create_session_waits_for_tasks_that_are_not_up_yet(make_cluster, caplog):
    c = make_cluster()
    calls = []

    def down(req):
        calls.append(time.monotonic())
        if len(calls) < 4:
            raise errors.UnavailableError(None, None, "connection refused")
        del c.spies[T1].hooks["get_status"]   # the task is up: the spy calls the worker now
    c.spies[T1].hooks["get_status"] = down
    g = kf.Graph()
    with g.as_default(), kf.device("/job:worker/task:1"):
        out = kf.constant(2.0) + 1.0
    with mock.patch.object(master_mod, "WAIT_LOG_S", 0.0), caplog.at_level("INFO"):
        s = c.session(g)                           # returns once task 1 answers
    assert len(calls) == 4 and s.run(out) == 3.0
    assert f"CreateSession still waiting for response from worker: {T1}" in caplog.text


def test_create_session_wait_is_bounded_by_the_operation_timeout(make_cluster):
    c = make_cluster()

    def refused(req):
        raise errors.UnavailableError(None, None, "connection refused")
    c.spies[T1].hooks["get_status"] = refused
    g = kf.Graph()
    with g.as_default():
        out = kf.constant(2.0) + 1.0
    t0 = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError, match=f"waiting for response from worker.*{T1}"):
        c.session(g, config=kf.ConfigProto(operation_timeout_in_ms=400))
    assert time.monotonic() - t0 < 3
    # device_filters: a session that needs only task 0 does not wait for task 1
    s = c.session(g, config=kf.ConfigProto(device_filters=["/job:worker/task:0"]))
    assert s.run(out) == 3.0


def _other_release(monkeypatch, spy):
    """Makes the spied worker advertise the next protocol version in GetStatus (only this one: the
    module's constant is shared by every worker of the process, and they answer concurrently)."""
    from kernflow.client.protocol import PROTOCOL_VERSION
    real = spy.inner.get_status

    def get_status(req=None, timeout=None):
        resp = real(req, timeout=timeout)
        resp.protocol_version = PROTOCOL_VERSION + 1
        return resp
    monkeypatch.setattr(spy.inner, "get_status", get_status)


def test_a_task_of_another_protocol_version_fails_create_session_at_once(make_cluster, monkeypatch):
    """CreateSession's wait for the tasks reads their GetStatus: a task speaking another protocol
    fails it at once (not after the operation timeout), naming the task and both versions."""
    from kernflow.client.protocol import PROTOCOL_VERSION
    c = make_cluster()
    _other_release(monkeypatch, c.spies[T1])
    g, _, _, _ = _model()
    t0 = time.monotonic()
    with pytest.raises(errors.FailedPreconditionError) as e:
        c.session(g, config=kf.ConfigProto(operation_timeout_in_ms=30_000))
    assert time.monotonic() - t0 < 3
    assert (f"Task {T1} speaks kernflow protocol version {PROTOCOL_VERSION + 1}, this process speaks "
            f"version {PROTOCOL_VERSION}") in str(e.value)
    # A session that needs only task 0 never asks task 1.
    s = c.session(g, config=kf.ConfigProto(device_filters=["/job:worker/task:0"]))
    s.close()


def test_a_task_restarted_in_another_protocol_version_fails_the_device_refresh(make_cluster, monkeypatch):
    from kernflow.client.protocol import PROTOCOL_VERSION
    c = make_cluster()
    g, x, _, out = _model(task1="/job:worker/task:1")
    s = c.session(g)
    _other_release(monkeypatch, c.spies[T1])
    with pytest.raises(errors.FailedPreconditionError,
                       match=f"Task {T1} speaks kernflow protocol version {PROTOCOL_VERSION + 1}"):
        s.run(out, {x: np.ones((1, 4))})
    monkeypatch.undo()   # the task speaks this version again: the session works
    assert s.run(out, {x: np.ones((1, 4))}).shape == (1,)


def test_list_devices_and_master_arguments(make_cluster):
    c = make_cluster({"ps": 1, "worker": 2})
    resp = c.master.list_devices(master_pb2.ListDevicesRequest())
    names = [d.name for d in list(resp.local_device) + list(resp.remote_device)]
    # (The client task, local: worker 0, not the ps that sorts first.)
    assert names == [T0 + "/device:CPU:0", "/job:ps/replica:0/task:0/device:CPU:0", T1 + "/device:CPU:0"]
    from kernflow.master.master import Master
    with pytest.raises(ValueError, match="tasks"):
        Master(lambda t: None)
    with pytest.raises(ValueError):
        Master({"/job:worker": object()})
    assert Master({"/job:w/task:10": 1, "/job:w/task:2": 2}).tasks == ["/job:w/replica:0/task:2",
                                                                       "/job:w/replica:0/task:10"]
    assert isinstance(worker_pb2.GetStatusRequest(), worker_pb2.GetStatusRequest)


def test_one_tensor_sent_to_the_same_device_of_two_tasks(make_cluster):
    # Core names a _Send after the receiving device's last component ("CPU:0"): both sends of `a`
    # below would share a name in task 2's graph without the master's renaming.
    c = make_cluster({"worker": 3})
    g = kf.Graph()
    with g.as_default():
        with kf.device("/job:worker/task:2"):
            a = kf.constant(np.array([1.0, 2.0], np.float32)) * 3.0
        with kf.device("/job:worker/task:1"):
            b = a + 1.0
        out = a * b
    np.testing.assert_array_equal(c.session(g).run(out), [12.0, 42.0])


def _feed_request(s, fetches, name, value):
    s.sync()
    req = master_pb2.RunStepRequest(session_handle=s.handle, fetch=[t.name for t in fetches])
    codec.tensor_to_proto(value, out=req.feed.add(name=name).tensor)
    return req


@pytest.mark.parametrize("stream", [False, True])
def test_a_feed_contradicting_the_placeholder_is_refused_by_the_master(make_cluster, stream):
    """The client library checks its feeds, but a RunStep may come from any client: the master
    checks them against the graph too (once the signature is known, on every step)."""
    c = make_cluster()
    g, x, h, out = _model("/job:worker/task:1")
    s = c.session(g)

    def run(value):
        req = _feed_request(s, [out], x.name, value)
        return list(c.master.run_step_stream(req)) if stream else c.master.run_step(req)

    run(np.ones((2, 4), np.float32))   # the signature's plan is cached from here on
    calls = c.spies[T1].calls["run_graph"]
    with pytest.raises(errors.InvalidArgumentError) as e:
        run(np.ones((2, 3), np.float32))
    assert e.value.message == ("Cannot feed value of shape (2, 3) for Tensor x:0 of Placeholder 'x', "
                               "which has shape (None, 4)")
    with pytest.raises(errors.InvalidArgumentError) as e:
        run(np.ones((2, 4), np.int32))
    assert e.value.message == ("Cannot feed value of dtype int32 for Tensor x:0 of Placeholder 'x', "
                               "which has dtype float32")
    assert c.spies[T1].calls["run_graph"] == calls   # refused before any worker ran
    run(np.ones((5, 4), np.float32))


def test_a_bad_feed_in_a_new_signature_is_refused_too(make_cluster):
    c = make_cluster()
    g, x, h, out = _model()
    s = c.session(g)
    with pytest.raises(errors.InvalidArgumentError, match=r"shape \(4,\) for Tensor x:0 of "
                                                          r"Placeholder 'x', which has shape \(None, 4\)"):
        c.master.run_step(_feed_request(s, [out], x.name, np.ones(4, np.float32)))


def test_register_graph_refuses_an_input_index_out_of_range(make_cluster):
    """A hand-built partition handed to a worker: InvalidArgumentError, not an IndexError."""
    c = make_cluster()
    g = kf.Graph()
    with g.as_default():
        kf.identity(kf.constant(1.0, name="k"), name="y")
    gd = g.as_graph_def()
    next(nd for nd in gd.node if nd.name == "y").input[0] = "k:5"
    with pytest.raises(errors.InvalidArgumentError) as e:
        c.spies[T0].inner.register_graph(worker_pb2.RegisterGraphRequest(graph_def=gd))
    assert e.value.message == ("Node 'y': Connecting to invalid output 5 of source node k which has "
                               "1 outputs.")
