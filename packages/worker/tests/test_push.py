"""Values cross tasks by push (protocol version 2, `kernflow.worker.rendezvous`): small values
travel in one PushTensors message, large ones are announced and pulled; pushes that come before
the step's RunGraph, for an aborted step, or from a failed producer; the same results over the
same-host channel, over gRPC, and with every value pulled (``KERNFLOW_PUSH_MAX_BYTES=0``)."""

from __future__ import annotations

import concurrent.futures
import itertools
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.client import codec, local_channel, tensor_requests
from kernflow.client.protobuf import worker_pb2
from kernflow.client.worker_client import GrpcWorkerClient
from kernflow.core.framework import errors
from kernflow.core.runtime.rendezvous import create_key
from kernflow.worker import rendezvous as worker_rendezvous
from kernflow.worker.server import WorkerServer

T0 = "/job:worker/replica:0/task:0"
T1 = "/job:worker/replica:0/task:1"
CPU0 = T0 + "/device:CPU:0"
CPU1 = T1 + "/device:CPU:0"
_step_ids = itertools.count(9000)


@pytest.fixture(params=["same-host", "grpc"])
def servers(request, monkeypatch):
    """Two WorkerServers whose pushes go over the same-host channel, or over gRPC."""
    if request.param == "grpc":
        monkeypatch.setenv(local_channel.LOCAL_CHANNEL_ENV, "0")
    clients = {}
    s0 = WorkerServer("worker", 0, resolver=lambda t: clients[t])
    s1 = WorkerServer("worker", 1, resolver=lambda t: clients[t])
    clients[T0] = GrpcWorkerClient(s0.address, T0)
    clients[T1] = GrpcWorkerClient(s1.address, T1)
    yield (s0, s1), clients
    for c in clients.values():
        local_channel.forget(c.address)
    s0.stop(0)
    s1.stop(0)


def _graph(n):
    """x (fed on task 0) -> y = 3x + v on task 1 -> z = y * y on task 0, and v += y on task 1."""
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [n], name="x")
        with kf.device(T1):
            v = kf.Variable(np.ones(n, np.float32), name="v")
            y = x * 3.0 + v.value()
        with kf.device(T0):
            z = y * y
        upd = v.assign_add(y)
    return g, v, z, upd


def _register(clients, parts):
    return {t: clients[t].register_graph(worker_pb2.RegisterGraphRequest(
        session_handle="s", graph_def=p)).graph_handle for t, p in parts.items()}


def _requests(handles, step_id, feeds=(), timeout_ms=10_000):
    reqs = {}
    for t, h in handles.items():
        r = worker_pb2.RunGraphRequest(session_handle="s", graph_handle=h, step_id=step_id,
                                       timeout_in_ms=timeout_ms)
        if t == T0:
            for i, v in enumerate(feeds):
                r.send.add(name=f"f{i}").tensor.CopyFrom(codec.tensor_to_proto(v))
        reqs[t] = r
    return reqs


def _step(clients, handles, feeds=(), timeout_ms=10_000):
    """Runs one step on both tasks at once (no master: the workers alone); returns task 0's values."""
    reqs = _requests(handles, next(_step_ids), feeds, timeout_ms)
    with concurrent.futures.ThreadPoolExecutor(len(handles)) as ex:
        futs = {t: ex.submit(clients[t].run_graph, reqs[t]) for t in handles}
        for t in handles:
            futs[t].exception(30)
        return tensor_requests.decode(futs[T0].result(0), "recv")


def _served(client):
    return client.get_status().recv_tensor_calls_served


def _train(servers, split, n, steps=3):
    (s0, s1), clients = servers
    g, v, z, upd = _graph(n)
    _step(clients, _register(clients, split(g, [s0.worker, s1.worker], targets=[v.initializer.name])))
    handles = _register(clients, split(g, [s0.worker, s1.worker], feeds=["x:0"], fetches=[z.name, upd.name]))
    vv = np.ones(n, np.float32)
    for k in range(steps):
        feed = np.arange(n, dtype=np.float32) + k
        zv, uv = _step(clients, handles, [feed])
        yv = feed * 3 + vv
        vv = vv + yv
        np.testing.assert_array_equal(zv, yv * yv)
        np.testing.assert_array_equal(uv, vv)
    # Nothing is left on either task once the steps ended (no CleanupGraph was sent).
    deadline = time.monotonic() + 5
    while (s0.worker._steps or s1.worker._steps) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not s0.worker._steps and not s1.worker._steps


def test_small_values_are_pushed_without_recv_tensor(servers, split):
    (s0, s1), clients = servers
    before = _served(clients[T0]) + _served(clients[T1])
    _train(servers, split, 4)
    assert _served(clients[T0]) + _served(clients[T1]) == before   # no pull at all


def test_large_values_are_announced_and_pulled(servers, split):
    (s0, s1), clients = servers
    n = worker_rendezvous.DEFAULT_PUSH_MAX_BYTES // 4 + 1      # one float32 over the limit
    s0_before, s1_before = _served(clients[T0]), _served(clients[T1])
    _train(servers, split, n, steps=2)
    # Per step: x pulled from task 0; y and the updated v from task 1 (task 0's fetches), in one
    # call when task 0 queued both announcements before a pull thread took the first.
    assert _served(clients[T0]) - s0_before == 2
    assert 2 <= _served(clients[T1]) - s1_before <= 4


def test_with_pushes_off_every_value_is_pulled_and_the_results_are_the_same(servers, split, monkeypatch):
    (s0, s1), clients = servers
    monkeypatch.setenv(worker_rendezvous.PUSH_MAX_BYTES_ENV, "0")
    s0_before, s1_before = _served(clients[T0]), _served(clients[T1])
    _train(servers, split, 4, steps=2)
    assert _served(clients[T0]) - s0_before == 2
    assert 2 <= _served(clients[T1]) - s1_before <= 4


def test_a_push_before_the_run_graph_waits_for_it_and_one_for_an_aborted_step_is_dropped(servers):
    (s0, s1), clients = servers
    key = create_key(CPU0, s0.worker.devices[0].incarnation, CPU1, "early:0")
    chunk, = codec.encode_recv_chunks(np.float32(2.5))
    push = worker_pb2.PushTensorsRequest(step_id=41, tensors=[worker_pb2.PushedTensor(
        rendezvous_key=key, value=chunk)])
    clients[T1].push_tensors(push)                     # (the synchronous form: the call's answer)
    rdv = s1.worker._steps[41]
    assert not rdv.claimed and 41 in s1.worker._table.unclaimed   # held for the RunGraph to come
    got = []
    rdv.recv_async(key, lambda v, d, e: got.append((v, d, e)))
    assert got == [(np.float32(2.5), False, None)]
    # An aborted step leaves a tombstone: a later push for it holds nothing.
    clients[T1].abort_step(worker_pb2.AbortStepRequest(step_id=42, message="stop"))
    clients[T1].push_tensors(worker_pb2.PushTensorsRequest(step_id=42, tensors=[worker_pb2.PushedTensor(
        rendezvous_key=key, value=chunk)]))
    assert 42 not in s1.worker._steps


def test_a_bad_push_is_refused_and_the_server_keeps_serving(servers):
    (s0, s1), clients = servers
    mine = create_key(CPU1, s1.worker.devices[0].incarnation, CPU0, "t:0")   # its receiver is task 0
    with pytest.raises(errors.InvalidArgumentError, match="its receiver is not on this task"):
        clients[T1].push_tensors(worker_pb2.PushTensorsRequest(step_id=43, tensors=[
            worker_pb2.PushedTensor(rendezvous_key=mine, value=b"")]))
    key = create_key(CPU0, s0.worker.devices[0].incarnation, CPU1, "t:0")
    with pytest.raises(errors.InvalidArgumentError, match="bad value"):
        clients[T1].push_tensors(worker_pb2.PushTensorsRequest(step_id=43, tensors=[
            worker_pb2.PushedTensor(rendezvous_key=key, value=b"\x08\x01\x28\x40")]))  # 64 bytes, none sent
    assert 43 not in s1.worker._steps
    assert clients[T1].get_status().task == 1


def test_a_failed_producer_fails_its_receivers_step_with_its_error(servers, split):
    """Task 1 fails (an uninitialized variable): task 0, waiting for its value, fails at once with
    the same error, told by task 1 (no master here to abort the step)."""
    (s0, s1), clients = servers
    g, v, z, upd = _graph(4)
    handles = _register(clients, split(g, [s0.worker, s1.worker], feeds=["x:0"], fetches=[z.name]))
    t = time.monotonic()
    with pytest.raises(errors.FailedPreconditionError, match="uninitialized"):
        _step(clients, handles, [np.ones(4, np.float32)], timeout_ms=20_000)
    assert time.monotonic() - t < 10   # not the step's 20 s deadline


def test_a_push_that_fails_over_grpc_fails_the_producing_step(monkeypatch, split):
    """Over gRPC a push runs in the background; its failure still fails the step that made it
    (here the receiving task refuses it as if its connection broke)."""
    monkeypatch.setenv(local_channel.LOCAL_CHANNEL_ENV, "0")
    clients = {}
    s0 = WorkerServer("worker", 0, resolver=lambda t: clients[t])
    s1 = WorkerServer("worker", 1, resolver=lambda t: clients[t])
    try:
        clients[T0] = GrpcWorkerClient(s0.address, T0)
        clients[T1] = GrpcWorkerClient(s1.address, T1)

        take = s0.worker.push_tensors

        def refuse(req, timeout=None):   # task 0 refuses the values task 1 pushes (not its abort)
            if req.abort_code:
                return take(req, timeout)
            raise errors.UnavailableError(None, None, "connection reset (test)")
        monkeypatch.setattr(s0.worker, "push_tensors", refuse)
        g, v, z, upd = _graph(4)
        _step(clients, _register(clients, split(g, [s0.worker, s1.worker], targets=[v.initializer.name])))
        handles = _register(clients, split(g, [s0.worker, s1.worker], feeds=["x:0"], fetches=[z.name]))
        reqs = _requests(handles, next(_step_ids), [np.ones(4, np.float32)], timeout_ms=20_000)
        t = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(2) as ex:
            futs = {task: ex.submit(clients[task].run_graph, reqs[task]) for task in handles}
            with pytest.raises(errors.UnavailableError, match="connection reset"):
                futs[T1].result(30)
            # Task 0 waits for y, which never came: task 1 told it of its failure.
            with pytest.raises(errors.UnavailableError, match="connection reset"):
                futs[T0].result(30)
        assert time.monotonic() - t < 10   # neither waited for the 20 s deadline
    finally:
        s0.stop(0)
        s1.stop(0)
