"""Fetched values without copies (issue 18.4): RunStep's response built from the tasks' RunGraph
responses (`fetch_responses`), the servicers that send them, and the message limit on the way back."""

from __future__ import annotations

import concurrent.futures

import grpc
import numpy as np
import pytest

import kernflow.core as kf
from kernflow.client import channels
from kernflow.client import codec
from kernflow.client import limits
from kernflow.client import tensor_requests as tr
from kernflow.client.master_client import GrpcMasterClient
from kernflow.client.protobuf import master_pb2, master_pb2_grpc, worker_pb2, worker_pb2_grpc
from kernflow.client.worker_client import GrpcWorkerClient
from kernflow.core.framework import errors
from kernflow.master.fetch_responses import run_step_response
from kernflow.master.master import Master
from kernflow.master.servicer import MasterServicer, add_to_server
from kernflow.worker.server import WorkerServer
from kernflow.worker.servicer import WorkerServicer

T0 = "/job:worker/replica:0/task:0"
T1 = "/job:worker/replica:0/task:1"
BIG = 1 << 20                       # float32 elements: 4 MiB
WORDS = np.array([b"w" * (tr.INLINE_BYTES + 5), b"", b"xyz"], dtype=object)


def _graph():
    g = kf.Graph()
    with g.as_default():
        n = kf.placeholder(kf.int32, [], name="n")
        s = kf.placeholder(kf.string, [None], name="s")
        with kf.device("/job:worker/task:1"):
            v = kf.Variable(np.arange(BIG, dtype=np.float32), name="v")
            big = kf.fill(kf.reshape(n, [1]), 1.5)          # (its size is not known statically)
            words = kf.identity(s)
            bump = v.assign_add(np.ones(BIG, np.float32))
        small = n + 1                                        # on task 0
    return g, n, s, v, big, words, small, bump


def _check(values, n):
    assert values[0].shape == (n,) and (values[0] == 1.5).all()
    assert values[1].tolist() == WORDS.tolist()
    assert int(values[2]) == n + 1


def test_run_step_answers_large_values_from_the_tasks_buffers(make_cluster):
    c = make_cluster()
    g, n, s, v, big, words, small, bump = _graph()
    sess = c.session(g)
    sess.run(targets=[v.initializer])
    sess.sync()
    req = tr.SplitMessage(master_pb2.RunStepRequest(session_handle=sess.handle,
                                                    fetch=[big.name, words.name, small.name, v.value().name]),
                          ("feed",))
    req.add(n.name, np.int32(BIG))
    req.add(s.name, WORDS)
    resp = c.master.run_step(req)
    assert isinstance(resp, tr.SplitMessage) and [nt.name for nt in resp.tensor] == list(req.fetch)
    assert resp.entries[2] is None          # (a small value: inside the message, as before)
    # Task 1 decoded its feed once, then let go of the forwarded buffers.
    forwarded = c.spies[T1].requests["run_graph"][-1]
    assert isinstance(forwarded, tr.SplitMessage) and forwarded.entries is None
    sess.run(targets=[bump])                # the variable changes after the step: its value does not
    values = tr.decode(resp, "tensor")
    _check(values, BIG)
    np.testing.assert_array_equal(values[3], np.arange(BIG, dtype=np.float32))
    again = tr.decode(master_pb2.RunStepResponse.FromString(resp.SerializeToString()), "tensor")
    assert [a.tolist() for a in again] == [a.tolist() for a in values]


def test_a_task_that_returns_another_number_of_values_is_an_internal_error():
    resp = worker_pb2.RunGraphResponse()
    resp.recv.add(name="a:0").tensor.CopyFrom(codec.tensor_to_proto(np.float32(1)))
    with pytest.raises(errors.InternalError, match=f"Task {T1} returned 1 tensors for 2 fetches"):
        run_step_response(["a:0", "b:0"], {T1: [0, 1]}, {T1: resp})
    with pytest.raises(errors.InternalError, match="No task of the step returned fetch b:0"):
        run_step_response(["a:0", "b:0"], {T1: [0]}, {T1: resp})
    got = run_step_response(["x:0"], {T1: [0]}, {T1: resp})
    assert type(got) is master_pb2.RunStepResponse and got.tensor[0].name == "x:0"   # renamed


def test_relayed_chunks_are_forwarded_as_they_came(make_cluster):
    c = make_cluster()
    g, n, s, v, big, words, small, bump = _graph()
    sess = c.session(g)
    sess.sync()
    req = master_pb2.RunStepRequest(session_handle=sess.handle, fetch=[small.name, big.name, words.name])
    req.feed.add(name=n.name).tensor.CopyFrom(codec.tensor_to_proto(np.int32(3 << 18)))
    req.feed.add(name=s.name).tensor.CopyFrom(codec.tensor_to_proto(WORDS))
    parsed = list(c.master.run_step_stream(req))
    raw = list(c.master.run_step_stream(req, raw=True))
    assert all(type(b) is bytes for b in raw)
    assert [master_pb2.RunStepStreamResponse.FromString(b) for b in raw] == parsed
    assert sum(m.fetch_index == 1 for m in parsed) == 3     # 3 MiB in 1 MiB chunks, tagged with fetch 1


# ---------------------------------------------------------------------------- over gRPC
@pytest.fixture(params=["grpc", "same-host", "generated"])
def served(request, monkeypatch):
    """Two WorkerServers and a master served in this process; yields (master address, mode).

    "grpc": the master reaches the workers over gRPC; "same-host": over the same-host channel;
    "generated": over gRPC, both servicers registered with the generated functions (protobuf
    messages only)."""
    mode = request.param
    monkeypatch.setenv("KERNFLOW_LOCAL_CHANNEL", "1" if mode == "same-host" else "0")
    clients, workers = {}, []
    for i in range(2):
        if mode == "generated":
            w = _GeneratedWorkerServer(i, clients)
        else:
            w = WorkerServer("worker", i, port=0, resolver=lambda t: clients[t])
        workers.append(w)
        task = f"/job:worker/replica:0/task:{i}"
        clients[task] = GrpcWorkerClient(w.address, task)
    master = Master(lambda t: clients[t], tasks=list(clients))
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(16), options=channels.SERVER_OPTIONS)
    servicer = MasterServicer(master)
    if mode == "generated":
        master_pb2_grpc.add_MasterServiceServicer_to_server(servicer, server)
    else:
        add_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", mode
    if mode == "same-host":   # (the master really reached its tasks so)
        from kernflow.client import local_channel
        assert all(local_channel.channel_for(w.address) is not None for w in workers)
    server.stop(0)
    master.close()
    for w in workers:
        w.stop(0)
    channels.close_all()


class _GeneratedWorkerServer:
    def __init__(self, i, clients):
        from kernflow.worker.worker import Worker
        self.worker = Worker("worker", i, resolver=lambda t: clients[t])
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(16), options=channels.SERVER_OPTIONS)
        worker_pb2_grpc.add_WorkerServiceServicer_to_server(WorkerServicer(self.worker), self.server)
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def stop(self, grace):
        self.server.stop(grace)
        self.worker.close()


def test_large_fetches_come_back_through_every_path(served):
    address, mode = served
    g, n, s, v, big, words, small, bump = _graph()
    with kf.Session(f"grpc://{address}", graph=g) as sess:
        _check(sess.run([big, words, small], {n: BIG, s: WORDS}), BIG)        # RunStep
        _check(sess.run([big, words, small], {n: BIG, s: WORDS}), BIG)        # now known large: pulled
    client = GrpcMasterClient(address)
    created = client.create_session(master_pb2.CreateSessionRequest(graph_def=g.as_graph_def()))
    req = tr.SplitMessage(master_pb2.RunStepRequest(session_handle=created.session_handle,
                                                    fetch=[big.name, words.name, small.name]), ("feed",))
    req.add(n.name, np.int32(BIG))
    req.add(s.name, WORDS)
    resp = client.run_step(req)
    assert isinstance(resp, tr.SplitMessage)
    assert isinstance(resp.contents[0], memoryview) and type(resp.contents[0].obj) is bytes   # not copied
    _check(tr.decode(resp, "tensor"), BIG)
    chunks = list(client.run_step_stream(req))                                # relayed (RunStepStream)
    values = [codec.assemble_recv_chunks([c for c in chunks if c[0].fetch_index == i and not c[0].done])[0]
              for i in range(3)]
    _check(values, BIG)
    client.close_session(master_pb2.CloseSessionRequest(session_handle=created.session_handle))


def test_fetches_over_the_message_limit_are_refused_naming_them(served, monkeypatch):
    address, mode = served
    g, n, s, v, big, words, small, bump = _graph()
    with g.as_default():
        with kf.device("/job:worker/task:0"):
            other = kf.fill(kf.reshape(n, [1]), 2.5)
    with kf.Session(f"grpc://{address}", graph=g) as sess:
        sess.run(small, {n: 1})
        monkeypatch.setenv(limits.ENV, "1MiB")
        with pytest.raises(errors.ResourceExhaustedError) as e:               # one value over it
            sess.run(big, {n: 512 << 10})
        msg = e.value.message
        assert f"RunGraph on {T1}: a fetched value: tensor '{big.name}' is 2.0 MiB (2097" in msg
        assert "over the message limit of 1.0 MiB" in msg and "raise KERNFLOW_MAX_MESSAGE_BYTES" in msg
        with pytest.raises(errors.ResourceExhaustedError) as e:               # each fits, not both
            sess.run([big, other], {n: 3 << 16})
        msg = e.value.message
        assert msg.startswith("RunStep on the master: the response is 1.5 MiB")
        assert "fetch less per step" in msg
        assert f"'{big.name}' (a float32 tensor of shape [196608], 768.0 KiB" in msg
        monkeypatch.delenv(limits.ENV)
        assert int(sess.run(small, {n: 1})) == 2                              # the session still works
