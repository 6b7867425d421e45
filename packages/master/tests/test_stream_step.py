"""Direct feed/fetch routes (feeds and fetches placed before partitioning, `task_routes`) and
streamed steps (`Master.run_step_stream`), in process."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.client import codec
from kernflow.client import tensor_requests
from kernflow.client.protobuf import master_pb2, worker_pb2
from kernflow.core.framework import errors
from kernflow.core.protobuf import config_pb2
from kernflow.master.task_routes import CLIENT_DEVICE

T0 = "/job:worker/replica:0/task:0"
T1 = "/job:worker/replica:0/task:1"


def _request(sess, fetches, feed_dict=None, targets=(), options=None):
    sess.sync()
    req = master_pb2.RunStepRequest(session_handle=sess.handle, fetch=[t.name for t in fetches],
                                    target=[t.name for t in targets])
    for t, v in (feed_dict or {}).items():
        value = np.asarray(v, dtype=t.dtype.as_numpy_dtype)
        codec.tensor_to_proto(value, out=req.feed.add(name=t.name).tensor)
    if options is not None:
        req.options.CopyFrom(options)
    return req


def _streamed(master, req):
    """Runs a RunStepStream in process; returns (values, done message, messages)."""
    msgs = list(master.run_step_stream(req))
    assert msgs[-1].done and not any(m.done for m in msgs[:-1])
    values = []
    for i in range(len(req.fetch)):
        chunks = [m for m in msgs[:-1] if m.fetch_index == i]
        value, is_dead = codec.assemble_recv_chunks(chunks)
        assert not is_dead
        values.append(value)
    indices = [m.fetch_index for m in msgs[:-1]]
    assert indices == sorted(indices)   # the chunks of each fetch are consecutive, fetches in order
    return values, msgs[-1], msgs


def _stream_partitions(master, req):
    r = master_pb2.RunStepRequest()
    r.CopyFrom(req)
    r.options.output_partition_graphs = True
    return list(master.run_step_stream(r))[-1].metadata.partition_graphs


def _partitions(sess, fetches, feed_dict=None):
    resp = sess.run_raw(fetches, feed_dict, options=config_pb2.RunOptions(output_partition_graphs=True))
    return [{nd.name: nd for nd in pg.node} for pg in resp.metadata.partition_graphs]


def test_a_step_on_another_task_runs_only_there(make_cluster):
    c = make_cluster(local_task=T0)
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [2], name="x")
        with kf.device("/job:worker/task:1"):
            y = x * 2.0 + 1.0
    s = c.session(g)
    np.testing.assert_array_equal(s.run(y, {x: [1.0, 2.0]}), [3.0, 5.0])
    np.testing.assert_array_equal(s.run(y, {x: [0.0, -1.0]}), [1.0, -1.0])
    # The feed goes straight to task 1 and the value comes back in its RunGraph response: task 0
    # (the client task) has nothing to do, and nobody sends a RecvTensor or a CleanupGraph.
    assert c.spies[T0].calls["run_graph"] == 0 and c.spies[T1].calls["run_graph"] == 2
    assert c.spies[T0].calls["recv_tensor"] == 0 and c.spies[T1].calls["recv_tensor"] == 0
    assert c.spies[T1].calls["cleanup_graph"] == 0
    (part,) = _partitions(s, [y], {x: [1.0, 2.0]})
    assert sorted(nd.op for nd in part.values() if nd.op.startswith("_")) == ["_Arg", "_Retval"]
    assert not c.spies[T1].inner._steps   # the worker dropped the finished steps' state itself


def test_a_shared_feed_enters_each_task_and_a_shared_fetch_returns_from_its_producer(make_cluster):
    c = make_cluster(local_task=T0)
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [2], name="x")
        with kf.device("/job:worker/task:1"):
            y = x + 1.0
        z = x * y            # x is used on task 0 as well, y is fetched and used on task 0
    s = c.session(g)
    got_y, got_z = s.run([y, z], {x: [1.0, 2.0]})
    np.testing.assert_array_equal(got_y, [2.0, 3.0])
    np.testing.assert_array_equal(got_z, [2.0, 6.0])
    parts = _partitions(s, [y, z], {x: [1.0, 2.0]})
    by_task = {task: sorted(nd.op for p in parts for nd in p.values()
                            if nd.op.startswith("_") and nd.device.startswith(task)) for task in (T0, T1)}
    # x enters both tasks; y returns from task 1 and is sent to task 0 (used there); z returns from 0.
    assert by_task == {T0: ["_Arg", "_Recv", "_Retval"], T1: ["_Arg", "_Retval", "_Send"]}
    assert c.spies[T0].calls["recv_tensor"] == 0   # nobody pulls the feed from task 0


def test_a_feed_used_on_two_tasks_goes_to_both(make_cluster):
    c = make_cluster({"worker": 3}, local_task=T0)
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [], name="x")
        with kf.device("/job:worker/task:1"):
            a = x + 1.0
        with kf.device("/job:worker/task:2"):
            b = x * 3.0
    s = c.session(g)
    assert s.run([a, b], {x: 2.0}) == [3.0, 6.0]
    assert c.spies[T0].calls["run_graph"] == 0


def test_a_feed_used_on_two_devices_of_a_task_enters_it_once(make_cluster):
    from kernflow.core.protobuf import config_pb2 as cp
    from kernflow.worker.worker import Worker
    c = make_cluster(local_task=T0)
    spy = c.spies[T1]
    spy.inner.close()
    spy.inner = Worker("worker", 1, config=cp.ConfigProto(device_count={"CPU": 2}), resolver=c.resolve)
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [], name="x")
        with kf.device("/job:worker/task:1/device:CPU:0"):
            a = x + 1.0
        with kf.device("/job:worker/task:1/device:CPU:1"):
            b = x * 3.0
    s = c.session(g)
    assert s.run([a, b], {x: 2.0}) == [3.0, 6.0]
    assert c.spies[T0].calls["run_graph"] == 0
    (send,) = spy.requests["run_graph"][0].send    # one value, handed to both devices' partitions
    assert send.name == "x:0"


def test_streamed_step_pulls_each_fetch_from_its_task(make_cluster):
    c = make_cluster(local_task=T0)
    big = np.arange(3 << 20, dtype=np.float32)      # 12 MiB: several chunks
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [], name="x")
        with kf.device("/job:worker/task:1"):
            v = kf.Variable(big, name="v")
            w = v * x
        small = x + 1.0                               # produced on task 0 (the client task)
        words = kf.constant(np.array([b"a", b"bc"], dtype=object))
    s = c.session(g)
    s.run(targets=[v.initializer])
    req = _request(s, [v.value(), small, w, words], {x: 2.0})
    values, done, msgs = _streamed(c.master, req)
    np.testing.assert_array_equal(values[0], big)
    assert values[1] == 3.0
    np.testing.assert_array_equal(values[2], big * 2.0)
    assert values[3].tolist() == [b"a", b"bc"]
    assert values[0].flags.writeable and not done.HasField("metadata")
    assert sum(m.fetch_index == 0 for m in msgs[:-1]) == (12 << 20) // codec.CHUNK_BYTES
    # The master pulled v and w from task 1, small and words from task 0; x went straight to both
    # tasks (used on both), so no task pulled it from another.
    assert c.spies[T1].calls["recv_tensor"] == 2 and c.spies[T0].calls["recv_tensor"] == 2
    sends = {nd.attr["index"].i: nd.device for pg in _stream_partitions(c.master, req) for nd in pg.node
             if nd.op == "_Send" and nd.attr["recv_device"].s.decode() == CLIENT_DEVICE}
    assert {i: d.startswith(T1) for i, d in sends.items()} == {0: True, 1: False, 2: True, 3: False}
    # A pulled variable value is a snapshot: updating the variable does not change it.
    s.run(targets=[v.assign(big * 0)])
    np.testing.assert_array_equal(values[0], big)
    # The same fetches through RunStep give the same values.
    resp = c.master.run_step(req)
    np.testing.assert_array_equal(tensor_requests.decode(resp, "tensor")[2], big * 0)


def test_streamed_step_with_metadata_targets_and_no_fetches(make_cluster):
    c = make_cluster()
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [], name="x")
        with kf.device("/job:worker/task:1"):
            v = kf.Variable(0.0, name="v")
            inc = v.assign_add(x)
    s = c.session(g)
    s.run(targets=[v.initializer])
    values, done, _ = _streamed(c.master, _request(s, [], {x: 5.0}, targets=[inc.op]))
    assert values == [] and not done.HasField("metadata")
    opts = config_pb2.RunOptions(trace_level=config_pb2.RunOptions.FULL_TRACE, output_partition_graphs=True)
    values, done, _ = _streamed(c.master, _request(s, [v.value()], options=opts))
    assert values[0] == 5.0
    assert len(done.metadata.step_stats.dev_stats) >= 1 and len(done.metadata.partition_graphs) >= 1
    # v's value is pulled from task 1's _Send (to the master, placed before partitioning): task 0
    # has no part in the step.
    assert [pg.node[0].device.startswith(T1) for pg in done.metadata.partition_graphs] == [True]
    assert c.spies[T1].calls["recv_tensor"] == 1 and c.spies[T0].calls["run_graph"] == 0


def test_a_failing_step_ends_the_stream_with_the_root_error(make_cluster):
    c = make_cluster(local_task=T0)
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [None], name="x")
        with kf.device("/job:worker/task:1"):
            bad = kf.reshape(x, [2, 2], name="bad_reshape")
        out = bad + 1.0
    s = c.session(g)
    with pytest.raises(errors.InvalidArgumentError, match="bad_reshape"):
        list(c.master.run_step_stream(_request(s, [out], {x: [1.0, 2.0, 3.0]})))
    got, _, _ = _streamed(c.master, _request(s, [out], {x: [1.0, 2.0, 3.0, 4.0]}))
    np.testing.assert_array_equal(got[0], [[2.0, 3.0], [4.0, 5.0]])


def test_a_failing_pull_fails_the_step(make_cluster):
    c = make_cluster(local_task=T0)
    g = kf.Graph()
    with g.as_default():
        with kf.device("/job:worker/task:1"):
            y = kf.constant(np.ones(10, np.float32)) * 2.0
    s = c.session(g)

    def lose(request):
        raise errors.DataLossError(None, None, "connection reset while streaming")
    c.spies[T1].hooks["recv_tensor"] = lose
    with pytest.raises(errors.DataLossError, match="connection reset"):
        list(c.master.run_step_stream(_request(s, [y])))
    del c.spies[T1].hooks["recv_tensor"]
    got, _, _ = _streamed(c.master, _request(s, [y]))
    np.testing.assert_array_equal(got[0], np.full(10, 2.0, np.float32))


def test_a_client_leaving_midway_cancels_the_step(make_cluster):
    c = make_cluster(local_task=T0)
    g = kf.Graph()
    with g.as_default():
        with kf.device("/job:worker/task:1"):
            a = kf.constant(np.ones(3 << 20, np.float32)) + 1.0
        b = kf.constant(1.0) * 2.0            # on task 0, whose RunGraph we hold back
    s = c.session(g)
    release = threading.Event()
    c.spies[T0].hooks["run_graph"] = lambda req: release.wait(10)
    try:
        stream = c.master.run_step_stream(_request(s, [a, b]))
        first = next(stream)
        assert first.fetch_index == 0 and first.total_bytes == 12 << 20
        stream.close()                        # what gRPC does when the caller goes away
        deadline = time.monotonic() + 10
        while not (c.spies[T0].calls["abort_step"] and c.spies[T1].calls["abort_step"]):
            assert time.monotonic() < deadline, "the step was not aborted"
            time.sleep(0.01)
        assert c.spies[T0].requests["abort_step"][0].code == errors.CANCELLED
    finally:
        release.set()


def test_stream_pulls_through_the_grpc_worker_client_raw(monkeypatch):
    """`_start_pull` prefers a client's raw RecvTensor (bytes forwarded without parsing twice)."""
    from kernflow.master import stream_step
    calls = []

    class Raw:
        def recv_tensor_raw(self, req, timeout=None):
            calls.append(("raw", timeout))
            return iter([m.SerializeToString() for m in codec.iter_recv_chunks(np.arange(3.0))])

    class Parsed:
        def recv_tensor(self, req, timeout=None):
            calls.append(("parsed", timeout))
            return codec.iter_recv_chunks(np.arange(3.0))

    req = worker_pb2.RecvTensorRequest(step_id=1, rendezvous_key="k")
    assert isinstance(next(stream_step._start_pull(Raw(), req, 5.0)), bytes)
    assert isinstance(next(iter(stream_step._start_pull(Parsed(), req, 6.0))), worker_pb2.RecvTensorResponse)
    assert calls == [("raw", 5.0), ("parsed", 6.0)]


# ---------------------------------------------------------------------------- RunStepPull
class _Requests:
    """A RunStepPull's request stream, fed by the test: the step first, then `relay`/`close`."""

    def __init__(self, step):
        self._q = __import__("queue").SimpleQueue()
        self._q.put(master_pb2.RunStepPullRequest(step=step))

    def __iter__(self):
        while True:
            item = self._q.get(timeout=10)
            if item is None:
                return
            yield item

    def relay(self, i):
        self._q.put(master_pb2.RunStepPullRequest(relay=i))

    def close(self):
        self._q.put(None)


def _pull_cluster(make_cluster):
    """Task 1 looks remote to the master (it has an address), so its fetches are located."""
    c = make_cluster(local_task=T0)
    c.spies[T1].address = "127.0.0.1:1"
    g = kf.Graph()
    with g.as_default():
        with kf.device("/job:worker/task:1"):
            a = kf.constant(np.arange(3 << 18, dtype=np.float32)) + 1.0    # 3 MiB: several chunks
        b = kf.constant([1.0, 2.0]) * 2.0
    return c, c.session(g), a, b


def _wait_for(cond, what):
    deadline = time.monotonic() + 10
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_pull_step_locates_remote_fetches_and_frees_the_step_when_the_client_closes(make_cluster):
    c, s, a, b = _pull_cluster(make_cluster)
    requests = _Requests(_request(s, [a, b]))
    stream = c.master.run_step_pull(requests)
    first = next(stream)
    loc = first.location
    assert first.HasField("location") and first.fetch_index == 0 and not first.content
    assert (loc.task, loc.address) == (T1, "127.0.0.1:1") and loc.rendezvous_key.startswith(T1)
    chunks = []
    msg = next(stream)
    while not msg.done:
        assert msg.fetch_index == 1 and not msg.HasField("location")
        chunks.append(msg)
        msg = next(stream)
    np.testing.assert_array_equal(codec.assemble_recv_chunks(chunks)[0], [2.0, 4.0])
    # The client pulls fetch 0 from task 1 itself; the step's state waits for it there.
    pulled, _ = codec.assemble_recv_chunks(c.spies[T1].inner.recv_tensor(
        worker_pb2.RecvTensorRequest(step_id=loc.step_id, rendezvous_key=loc.rendezvous_key)))
    np.testing.assert_array_equal(pulled, np.arange(3 << 18, dtype=np.float32) + 1.0)
    time.sleep(0.05)
    assert c.spies[T1].calls["cleanup_graph"] == 0
    requests.close()
    assert list(stream) == []
    _wait_for(lambda: c.spies[T1].calls["cleanup_graph"] == 1, "no CleanupGraph after the client closed")
    assert c.spies[T1].requests["cleanup_graph"][0].step_id == loc.step_id
    assert c.spies[T1].calls["abort_step"] == 0


def test_pull_step_relays_a_located_fetch_on_request(make_cluster):
    c, s, a, b = _pull_cluster(make_cluster)
    requests = _Requests(_request(s, [a, b]))
    msgs = []
    for msg in c.master.run_step_pull(requests):
        msgs.append(msg)
        if msg.done:
            requests.relay(0)
            requests.close()
    done_at = [m.done for m in msgs].index(True)
    relayed = msgs[done_at + 1:]
    assert relayed and all(m.fetch_index == 0 for m in relayed)
    got, _ = codec.assemble_recv_chunks(relayed)
    np.testing.assert_array_equal(got, np.arange(3 << 18, dtype=np.float32) + 1.0)
    assert len(relayed) == (3 << 20) // codec.CHUNK_BYTES


def test_pull_step_rejects_bad_requests_and_still_frees_the_step(make_cluster):
    c, s, a, b = _pull_cluster(make_cluster)
    with pytest.raises(errors.InvalidArgumentError, match="first message must be the step"):
        c.master.run_step_pull(iter([master_pb2.RunStepPullRequest(relay=0)]))
    with pytest.raises(errors.InvalidArgumentError, match="first message must be the step"):
        c.master.run_step_pull(iter([]))
    for bad in (1, 5, 0):   # 1 was streamed, 5 does not exist; 0 twice
        requests = _Requests(_request(s, [a, b]))
        stream = c.master.run_step_pull(requests)
        calls = c.spies[T1].calls["cleanup_graph"]
        if bad == 0:
            requests.relay(0)
        requests.relay(bad)
        with pytest.raises(errors.InvalidArgumentError, match="relay of a located fetch"):
            list(stream)
        _wait_for(lambda: c.spies[T1].calls["cleanup_graph"] == calls + 1, "the step was not freed")


def test_pull_step_whose_client_leaves_after_done_is_freed(make_cluster):
    c, s, a, b = _pull_cluster(make_cluster)
    stream = c.master.run_step_pull(_Requests(_request(s, [a, b])))
    while not next(stream).done:
        pass
    stream.close()     # what gRPC does when the caller goes away
    _wait_for(lambda: c.spies[T1].calls["cleanup_graph"] == 1, "the step was not freed")
    assert c.spies[T1].calls["abort_step"] == 0
