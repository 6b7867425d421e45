"""The in-process Worker: cross-task steps, shared state, streaming, aborts and bad requests."""

from __future__ import annotations

import concurrent.futures
import itertools
import threading
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.client import codec
from kernflow.client.protobuf import worker_pb2
from kernflow.core.framework import errors
from kernflow.core.protobuf import graph_pb2
from kernflow.core.runtime.rendezvous import create_key
from kernflow.worker.worker import Worker

T0 = "/job:worker/replica:0/task:0"
T1 = "/job:worker/replica:0/task:1"
CPU0 = T0 + "/device:CPU:0"
CPU1 = T1 + "/device:CPU:0"
_step_ids = itertools.count(1000)


@pytest.fixture
def cluster():
    """Two workers (tasks 0 and 1) whose resolvers point at each other."""
    workers = {}
    w0 = Worker("worker", 0, resolver=workers.get, recv_timeout_s=10)
    w1 = Worker("worker", 1, resolver=workers.get, recv_timeout_s=10)
    workers.update({T0: w0, T1: w1})
    yield w0, w1
    w0.close()
    w1.close()


def _register(workers, parts, session="s"):
    return {w.task_name: w.register_graph(worker_pb2.RegisterGraphRequest(
        session_handle=session, graph_def=parts[w.task_name])).graph_handle for w in workers}


def _run_step(workers, handles, feeds=(), recv_key=(), timeout_ms=10_000, session="s", step_id=None):
    """Runs one step on every worker at once (feeds go to task 0); returns task 0's response."""
    step_id = next(_step_ids) if step_id is None else step_id
    reqs = {}
    for w in workers:
        r = worker_pb2.RunGraphRequest(session_handle=session, graph_handle=handles[w.task_name],
                                       step_id=step_id, timeout_in_ms=timeout_ms)
        if w.task_name == T0:
            for i, v in enumerate(feeds):
                r.send.add(name=f"feed{i}").tensor.CopyFrom(codec.tensor_to_proto(v))
            r.recv_key.extend(recv_key)
        reqs[w.task_name] = r
    with concurrent.futures.ThreadPoolExecutor(len(workers)) as ex:
        futs = {w.task_name: ex.submit(w.run_graph, reqs[w.task_name]) for w in workers}
        try:
            return futs[T0].result(30)
        finally:
            for w in workers:
                futs[w.task_name].exception(30)
                w.cleanup_graph(worker_pb2.CleanupGraphRequest(step_id=step_id))


def _values(resp):
    return [codec.proto_to_tensor(nt.tensor) for nt in resp.recv]


def test_get_status(cluster):
    w0, w1 = cluster
    st = w1.get_status(worker_pb2.GetStatusRequest())
    assert (st.job, st.task) == ("worker", 1)
    assert [d.name for d in st.device_attributes] == [CPU1]
    assert st.device_attributes[0].device_type == "CPU"
    assert st.device_attributes[0].incarnation == w1.devices[0].incarnation


def test_cross_task_round_trip(cluster, split):
    """x (fed on task 0) -> y = 3x on task 1 -> z = y + c on task 0, with c from task 1 too."""
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [3], name="x")
        with kf.device(T1):
            y = x * 3.0
            c = kf.constant(np.array([10, 20, 30], np.float32), name="c")
        with kf.device(T0):
            z = y + c
    parts = split(g, cluster, feeds=["x:0"], fetches=[z.name, y.name])
    ops1 = [n.op for n in parts[T1].node]
    assert "_Recv" in ops1 and "_Send" in ops1
    handles = _register(cluster, parts)
    for k in range(3):
        feed = np.array([1, 2, 3], np.float32) * (k + 1)
        resp = _run_step(cluster, handles, feeds=[feed], recv_key=["z:0", "y:0"])
        assert [nt.name for nt in resp.recv] == ["z:0", "y:0"]
        zv, yv = _values(resp)
        np.testing.assert_allclose(yv, feed * 3)
        np.testing.assert_allclose(zv, feed * 3 + [10, 20, 30])


def test_variable_on_task1_persists_across_steps_and_sessions(cluster, split):
    g = kf.Graph()
    with g.as_default():
        with kf.device(T1):
            v = kf.Variable(np.zeros(2, np.float32), name="v")
        with kf.device(T0):
            x = kf.placeholder(kf.float32, [2], name="x")
            dx = x * 2.0
        upd = v.assign_add(dx)           # colocated with v, on task 1
    init = _register(cluster, split(g, cluster, targets=[v.initializer.name]))
    _run_step(cluster, init)
    parts = split(g, cluster, feeds=["x:0"], fetches=[upd.name])
    assert "AssignAdd" in [n.op for n in parts[T1].node]   # the update runs where v lives
    step = _register(cluster, parts)
    for k in range(1, 4):
        out, = _values(_run_step(cluster, step, feeds=[np.array([1, 10], np.float32)]))
        np.testing.assert_allclose(out, [2 * k, 20 * k])
    # A new session sees the same variable (state lives in the worker's devices).
    read = _register(cluster, split(g, cluster, fetches=[v.value().name]), session="other")
    out, = _values(_run_step(cluster, read, session="other"))
    np.testing.assert_allclose(out, [6, 60])
    # CleanupAll clears it: reading now fails with the uninitialized-value error.
    cluster[1].cleanup_all(worker_pb2.CleanupAllRequest())
    with pytest.raises(errors.FailedPreconditionError, match="uninitialized"):
        _run_step(cluster, read, session="other")


def test_recv_tensor_streams_64mib_in_chunks(cluster):
    w0, w1 = cluster
    arr = np.arange(16 << 20, dtype=np.float32)   # 64 MiB
    key = create_key(CPU1, w1.devices[0].incarnation, CPU0, "big:0")
    w1._step(7).keep_for_pull(key, arr)
    chunks = list(w1.recv_tensor(worker_pb2.RecvTensorRequest(step_id=7, rendezvous_key=key)))
    assert len(chunks) == (64 << 20) // codec.CHUNK_BYTES
    assert all(len(c.content) <= codec.CHUNK_BYTES for c in chunks)
    out, dead = codec.assemble_recv_chunks(chunks)
    assert not dead
    np.testing.assert_array_equal(out, arr)
    # The same tensor pulled by task 0's rendezvous (the path a _Recv takes).
    key2 = create_key(CPU1, w1.devices[0].incarnation, CPU0, "big2:0")
    w1._step(8).keep_for_pull(key2, arr)
    got = []
    done = threading.Event()
    w0._step(8).recv_async(key2, lambda v, d, e: (got.append((v, d, e)), done.set()))
    w0._step(8).pull_announced([(key2, CPU1)])   # (what w1's announcement of a large value does)
    assert done.wait(20)
    assert got[0][2] is None
    np.testing.assert_array_equal(got[0][0], arr)


def test_abort_wakes_recv_tensor_and_run_graph(cluster, split, wait_on_task1_graph):
    w0, w1 = cluster
    g, b = wait_on_task1_graph()
    parts = split(g, cluster, fetches=[b.name])
    handles = _register(cluster, parts)
    step_id = next(_step_ids)
    # Task 1's partition never runs, so task 0's Recv waits (pulling through task 1's RecvTensor).
    req = worker_pb2.RunGraphRequest(session_handle="s", graph_handle=handles[T0], step_id=step_id)
    outcome = {}

    def run():
        t = time.monotonic()
        try:
            w0.run_graph(req)
        except Exception as e:  # noqa: BLE001 - checked below
            outcome["run"] = (e, time.monotonic() - t)

    key = create_key(CPU1, w1.devices[0].incarnation, CPU0, "never:0")

    def recv():
        try:
            list(w1.recv_tensor(worker_pb2.RecvTensorRequest(step_id=step_id, rendezvous_key=key)))
        except Exception as e:  # noqa: BLE001 - checked below
            outcome["recv"] = (e, time.monotonic())

    threads = [threading.Thread(target=run), threading.Thread(target=recv)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    t_abort = time.monotonic()
    for w in cluster:
        w.abort_step(worker_pb2.AbortStepRequest(step_id=step_id, code=errors.ABORTED,
                                                 message="the master gave up"))
    for t in threads:
        t.join(1.0)
        assert not t.is_alive()
    assert time.monotonic() - t_abort < 1.0
    assert isinstance(outcome["run"][0], errors.AbortedError), outcome
    assert isinstance(outcome["recv"][0], errors.AbortedError), outcome
    assert "the master gave up" in str(outcome["recv"][0])
    # Later calls for the aborted step fail at once.
    with pytest.raises(errors.AbortedError):
        w0.run_graph(req)


def test_abort_on_one_worker_alone_wakes_its_run_graph(cluster, split, wait_on_task1_graph):
    """The pull to task 1 is still in flight, but task 0's step ends at once."""
    w0, w1 = cluster
    g, b = wait_on_task1_graph()
    handles = _register(cluster, split(g, cluster, fetches=[b.name]))
    step_id = next(_step_ids)
    req = worker_pb2.RunGraphRequest(session_handle="s", graph_handle=handles[T0], step_id=step_id)
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        fut = ex.submit(w0.run_graph, req)
        time.sleep(0.2)
        t = time.monotonic()
        w0.abort_step(worker_pb2.AbortStepRequest(step_id=step_id, code=errors.CANCELLED, message="stop"))
        with pytest.raises(errors.CancelledError, match="stop"):
            fut.result(1.0)
        assert time.monotonic() - t < 1.0
    w1.abort_step(worker_pb2.AbortStepRequest(step_id=step_id, code=errors.CANCELLED, message="stop"))


def test_caller_going_away_aborts_a_running_step(cluster, split, wait_on_task1_graph):
    """What the servicer's ``context.add_callback`` does when the RunGraph RPC ends early."""
    w0, w1 = cluster
    g, b = wait_on_task1_graph()
    handles = _register(cluster, split(g, cluster, fetches=[b.name]))
    step_id = next(_step_ids)
    req = worker_pb2.RunGraphRequest(session_handle="s", graph_handle=handles[T0], step_id=step_id)
    callbacks = []
    with concurrent.futures.ThreadPoolExecutor(1) as ex:
        fut = ex.submit(w0.run_graph, req, on_cancel=callbacks.append)
        time.sleep(0.2)
        assert len(callbacks) == 1 and not fut.done()   # blocked in the Recv from task 1
        callbacks[0]()
        with pytest.raises(errors.CancelledError, match="caller went away"):
            fut.result(1.0)
    callbacks[0]()   # the RPC's end after the step ended changes nothing
    w1.abort_step(worker_pb2.AbortStepRequest(step_id=step_id, code=errors.CANCELLED, message="stop"))


def test_inline_step_keeps_no_state_and_honours_an_earlier_abort(cluster, split):
    """A self-contained synchronous graph runs without a step rendezvous or cancel callback."""
    w0, _ = cluster
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [2], name="x")
        with kf.device(T0):
            y = x * 3.0
    handles = _register([w0], split(g, [w0], feeds=[x.name], fetches=[y.name]))
    callbacks = []

    def run(step_id):
        req = worker_pb2.RunGraphRequest(session_handle="s", graph_handle=handles[T0], step_id=step_id)
        req.send.add(name=x.name).tensor.CopyFrom(codec.tensor_to_proto(np.array([1, 2], np.float32)))
        req.recv_key.append(y.name)
        return w0.run_graph(req, on_cancel=callbacks.append)

    step_id = next(_step_ids)
    np.testing.assert_array_equal(_values(run(step_id))[0], [3, 6])
    assert callbacks == [] and step_id not in w0._steps
    step_id = next(_step_ids)
    w0.abort_step(worker_pb2.AbortStepRequest(step_id=step_id, code=errors.CANCELLED, message="closed"))
    with pytest.raises(errors.CancelledError, match="closed"):
        run(step_id)


def test_run_graph_times_out_when_the_producer_never_sends(cluster, split, wait_on_task1_graph):
    w0, w1 = cluster
    g, b = wait_on_task1_graph()
    handles = _register(cluster, split(g, cluster, fetches=[b.name]))
    req = worker_pb2.RunGraphRequest(session_handle="s", graph_handle=handles[T0],
                                     step_id=next(_step_ids), timeout_in_ms=300)
    t = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError, match="timed out"):
        w0.run_graph(req)
    assert time.monotonic() - t < 2.0


def test_recv_tensor_deadline_and_cleaned_up_step(cluster):
    w0, w1 = cluster
    key = create_key(CPU1, 1, CPU0, "never:0")
    t = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError):
        list(w1.recv_tensor(worker_pb2.RecvTensorRequest(step_id=5, rendezvous_key=key), timeout=0.2))
    assert time.monotonic() - t < 1.5
    w1.cleanup_graph(worker_pb2.CleanupGraphRequest(step_id=5))
    with pytest.raises(errors.AbortedError, match="cleaned up"):
        list(w1.recv_tensor(worker_pb2.RecvTensorRequest(step_id=5, rendezvous_key=key)))
    # A value sent before the RecvTensor arrives is delivered at once.
    w1._step(6).keep_for_pull(key, np.float32(4.0))
    out, _ = codec.assemble_recv_chunks(w1.recv_tensor(worker_pb2.RecvTensorRequest(step_id=6, rendezvous_key=key)))
    assert out == 4.0


def test_kernel_error_on_task1_fails_both_partitions(cluster, split):
    g = kf.Graph()
    with g.as_default():
        with kf.device(T1):
            v = kf.Variable(1.0, name="uninit")
            a = v.value() + 1.0
        with kf.device(T0):
            b = a * 2.0
    handles = _register(cluster, split(g, cluster, fetches=[b.name]))
    # Task 1 fails; the master (here: the test) aborts task 0's step, which is waiting for `a`.
    step_id = next(_step_ids)
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        f0 = ex.submit(cluster[0].run_graph, worker_pb2.RunGraphRequest(
            session_handle="s", graph_handle=handles[T0], step_id=step_id, timeout_in_ms=5000))
        f1 = ex.submit(cluster[1].run_graph, worker_pb2.RunGraphRequest(
            session_handle="s", graph_handle=handles[T1], step_id=step_id, timeout_in_ms=5000))
        with pytest.raises(errors.FailedPreconditionError, match="uninit"):
            f1.result(5)
        err = f1.exception()
        cluster[0].abort_step(worker_pb2.AbortStepRequest(step_id=step_id, code=err.error_code,
                                                          message=err.message))
        with pytest.raises(errors.FailedPreconditionError):
            f0.result(2)


def _graph_def(*nodes):
    gd = graph_pb2.GraphDef()
    for name, op, device, attrs in nodes:
        nd = gd.node.add(name=name, op=op, device=device)
        for k, v in attrs.items():
            nd.attr[k].CopyFrom(v)
    return gd


def test_malformed_requests(cluster):
    w0, w1 = cluster
    # An unknown graph handle is AbortedError, as in TF (the task may have restarted).
    with pytest.raises(errors.AbortedError, match="not registered.*possibly this task just restarted"):
        w0.run_graph(worker_pb2.RunGraphRequest(graph_handle="nope", step_id=1))
    with pytest.raises(errors.AbortedError):
        w0.deregister_graph(worker_pb2.DeregisterGraphRequest(graph_handle="nope"))
    bad_op = _graph_def(("n", "NoSuchOp", CPU0, {}))
    with pytest.raises(errors.InvalidArgumentError, match="NoSuchOp"):
        w0.register_graph(worker_pb2.RegisterGraphRequest(session_handle="s", graph_def=bad_op))
    other_task = _graph_def(("n", "NoOp", CPU1, {}))
    with pytest.raises(errors.InvalidArgumentError, match="not a device of"):
        w0.register_graph(worker_pb2.RegisterGraphRequest(session_handle="s", graph_def=other_task))
    bad_device = _graph_def(("n", "NoOp", "/job:worker/task:0/device:GPU:99:x", {}))
    with pytest.raises(errors.InvalidArgumentError):
        w0.register_graph(worker_pb2.RegisterGraphRequest(session_handle="s", graph_def=bad_device))
    gd = _graph_def(("n", "NoOp", CPU0, {}))
    gd.node[0].input.append("missing:0")
    with pytest.raises(errors.InvalidArgumentError, match="unknown input"):
        w0.register_graph(worker_pb2.RegisterGraphRequest(session_handle="s", graph_def=gd))
    with pytest.raises(errors.InvalidArgumentError, match="rendezvous key"):
        list(w0.recv_tensor(worker_pb2.RecvTensorRequest(step_id=1, rendezvous_key="garbage")))
    remote_key = create_key(CPU1, 1, CPU0, "t:0")
    with pytest.raises(errors.InvalidArgumentError, match="not on this task"):
        list(w0.recv_tensor(worker_pb2.RecvTensorRequest(step_id=1, rendezvous_key=remote_key)))
    # Wrong number and dtype of feeds for a registered graph.
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [], name="x")
        y = x + 1.0
    from kernflow.core.runtime.prune import prune
    gd = prune(g.as_graph_def(), ["x:0"], [y.name], [], client_device=CPU0)
    for nd in gd.node:
        nd.device = CPU0
    h = w0.register_graph(worker_pb2.RegisterGraphRequest(session_handle="s", graph_def=gd)).graph_handle
    with pytest.raises(errors.InvalidArgumentError, match="takes 1 feeds"):
        w0.run_graph(worker_pb2.RunGraphRequest(session_handle="s", graph_handle=h, step_id=2))
    req = worker_pb2.RunGraphRequest(session_handle="s", graph_handle=h, step_id=3)
    req.send.add(name="x:0").tensor.CopyFrom(codec.tensor_to_proto(np.int64(1)))
    with pytest.raises(errors.InvalidArgumentError, match="dtype"):
        w0.run_graph(req)
    with pytest.raises(errors.AbortedError):
        w0.run_graph(worker_pb2.RunGraphRequest(session_handle="other", graph_handle=h, step_id=4))
    # The worker still works after all that.
    req = worker_pb2.RunGraphRequest(session_handle="s", graph_handle=h, step_id=5)
    req.send.add(name="x:0").tensor.CopyFrom(codec.tensor_to_proto(np.float32(2)))
    assert _values(w0.run_graph(req)) == [3.0]
    w0.deregister_graph(worker_pb2.DeregisterGraphRequest(session_handle="s", graph_handle=h))
    with pytest.raises(errors.AbortedError):
        w0.run_graph(req)


def test_collect_stats(cluster, split):
    g = kf.Graph()
    with g.as_default():
        with kf.device(T0):
            y = kf.constant(2.0) * 3.0
    handles = _register(cluster, split(g, cluster, fetches=[y.name]))
    req = worker_pb2.RunGraphRequest(session_handle="s", graph_handle=handles[T0], step_id=next(_step_ids),
                                     collect_stats=True)
    resp = cluster[0].run_graph(req)
    assert _values(resp) == [6.0]
    assert resp.step_stats.dev_stats and resp.step_stats.dev_stats[0].device == CPU0


def test_closed_worker_rejects_and_wakes(cluster):
    w0, w1 = cluster
    key = create_key(CPU1, 1, CPU0, "x:0")
    box = []
    th = threading.Thread(target=lambda: box.append(pytest.raises(
        errors.UnavailableError, lambda: list(w1.recv_tensor(
            worker_pb2.RecvTensorRequest(step_id=9, rendezvous_key=key))))))
    th.start()
    time.sleep(0.2)
    w1.close()
    th.join(1.0)
    assert not th.is_alive() and box
    with pytest.raises(errors.UnavailableError):
        w1.run_graph(worker_pb2.RunGraphRequest(graph_handle="x", step_id=1))


def test_one_recv_tensor_call_streams_several_keys_as_each_is_sent(cluster):
    """`more_rendezvous_keys`: each value leaves as soon as it is sent (the consumer gets the first
    while the second is not produced yet: a step's weights, then the control edge back from the
    update they feed), numeric, string and dead values alike; the stream splits by key_number."""
    from kernflow.client.grpc_transport import GrpcTransport
    w0, w1 = cluster
    inc = w1.devices[0].incarnation
    keys = [create_key(CPU1, inc, CPU0, f"t{i}:0") for i in range(4)]
    step = 21
    rdv = w1._step(step)
    big = np.arange(3 << 18, dtype=np.float32)           # 3 MiB: several chunks
    rdv.keep_for_pull(keys[2], big)
    got, first_seen = [], threading.Event()

    def consume():
        for i, value, dead in GrpcTransport().recv_many(w1, step, keys, timeout=10):
            got.append((i, value, dead))
            first_seen.set()
    t = threading.Thread(target=consume)
    t.start()
    assert first_seen.wait(10), "the value already sent was not delivered before the others"
    assert [g[0] for g in got] == [2]
    rdv.keep_for_pull(keys[0], np.array([b"a", b"bc"], dtype=object))
    rdv.keep_for_pull(keys[3], None, is_dead=True)
    rdv.keep_for_pull(keys[1], np.float64(2.5))
    t.join(10)
    assert not t.is_alive()
    by_key = {i: (v, d) for i, v, d in got}
    np.testing.assert_array_equal(by_key[2][0], big)
    assert by_key[0][0].tolist() == [b"a", b"bc"] and by_key[1][0] == 2.5
    assert by_key[3] == (None, True)
    # The consumer's rendezvous pulls the values one producer announced together in one such call.
    step2 = 22
    r1 = w1._step(step2)
    r0 = w0._step(step2)
    calls = []
    raw = w1.recv_tensor_raw
    w1.recv_tensor_raw = lambda req, *a, **kw: (calls.append(len(req.more_rendezvous_keys) + 1),
                                                raw(req, *a, **kw))[1]
    r0.pull_announced([(k, CPU1) for k in keys])
    for i, k in enumerate(keys):
        r1.keep_for_pull(k, np.full(2, i, np.float32))
    vals = []
    for k in keys:
        done = threading.Event()
        r0.recv_async(k, lambda v, d, e, done=done: (vals.append((v, e)), done.set()))
        assert done.wait(10)
    assert [v.tolist() for v, e in vals] == [[i, i] for i in range(4)] and all(e is None for _, e in vals)
    assert calls == [4]


def test_several_keys_time_out_and_name_the_missing_one(cluster):
    from kernflow.client.grpc_transport import GrpcTransport
    w0, w1 = cluster
    keys = [create_key(CPU1, w1.devices[0].incarnation, CPU0, f"u{i}:0") for i in range(2)]
    w1._step(23).keep_for_pull(keys[0], np.ones(1, np.float32))
    seen = []
    with pytest.raises(errors.DeadlineExceededError, match="u1:0"):
        for i, value, dead in GrpcTransport().recv_many(w1, 23, keys, timeout=0.3):
            seen.append(i)
    assert seen == [0]
