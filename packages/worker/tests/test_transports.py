"""Pulls between two WorkerServers of this process through the transport each worker chose for the
other (`kernflow.client.transports.PeerTransports`): shm for large tensors, in-band for the rest,
gRPC when forced or when the peer reports another host, and a new negotiation after a failed pull.
Multi-process clusters (a killed producer, separate hosts) are in tests/test_transports.py."""

from __future__ import annotations

import itertools
import os
import threading

import numpy as np
import pytest

from kernflow.client import shm_transport
from kernflow.client import transports
from kernflow.client.worker_client import GrpcWorkerClient
from kernflow.core.framework import errors
from kernflow.core.runtime import transport as core_transport
from kernflow.core.runtime.rendezvous import create_key
from kernflow.worker.server import WorkerServer

pytestmark = pytest.mark.skipif(not shm_transport._available(), reason="no writable /dev/shm")

T0 = "/job:worker/replica:0/task:0"
T1 = "/job:worker/replica:0/task:1"
CPU0 = T0 + "/device:CPU:0"
CPU1 = T1 + "/device:CPU:0"
_step_ids = itertools.count(7000)


@pytest.fixture
def servers(monkeypatch):
    """Two WorkerServers on 127.0.0.1 that pull from each other through GrpcWorkerClients."""
    monkeypatch.delenv(core_transport.TRANSPORT_ENV, raising=False)
    monkeypatch.delenv(core_transport.HOST_ID_ENV, raising=False)
    clients = {}
    s0 = WorkerServer("worker", 0, resolver=lambda t: clients[t])
    s1 = WorkerServer("worker", 1, resolver=lambda t: clients[t])
    clients[T0] = GrpcWorkerClient(s0.address, T0)
    clients[T1] = GrpcWorkerClient(s1.address, T1)
    yield (s0, s1), clients
    s0.stop(0)
    s1.stop(0)


def _pull(producer, consumer, value, name="t:0"):
    """Sends `value` on `producer`'s side of a new step, receives it on `consumer`'s; returns
    (value, error) as the consumer's _Recv would get them."""
    step = next(_step_ids)
    src, dst = producer.devices[0], consumer.devices[0]
    key = create_key(src.name, src.incarnation, dst.name, name)
    producer._step(step).keep_for_pull(key, value)
    got, done = [], threading.Event()
    consumer._step(step).recv_async(key, lambda v, dead, err: (got.append((v, err)), done.set()))
    consumer._step(step).pull_announced([(key, src.name)])   # (what the producer's announcement does)
    assert done.wait(30), "the pull did not finish"
    return got[0]


def _served(client) -> int:
    return client.get_status().recv_tensor_bytes_served


def test_large_tensors_go_through_shm_small_ones_in_band(servers):
    (s0, s1), clients = servers
    big = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32)     # 4 MiB
    small = np.arange(1000, dtype=np.int64)
    before = _served(clients[T1])
    for value in (big, small):
        got, err = _pull(s1.worker, s0.worker, value)
        assert err is None
        np.testing.assert_array_equal(got, value)
    served = _served(clients[T1]) - before
    assert small.nbytes < served < small.nbytes + 1024      # big's bytes never went over gRPC
    assert s0.worker.transports.get(T1, clients[T1]).name == "shm"
    got, err = _pull(s0.worker, s1.worker, big)              # and the other way
    assert err is None and np.array_equal(got, big)


def test_kernflow_transport_grpc_forces_in_band(servers, monkeypatch):
    (s0, s1), clients = servers
    monkeypatch.setenv(core_transport.TRANSPORT_ENV, "grpc")
    big = np.random.default_rng(1).standard_normal(1 << 20).astype(np.float32)
    before = _served(clients[T1])
    got, err = _pull(s1.worker, s0.worker, big)
    assert err is None and np.array_equal(got, big)
    assert _served(clients[T1]) - before >= big.nbytes


def test_a_peer_on_another_host_is_never_reached_through_shm(servers, monkeypatch):
    (s0, s1), clients = servers
    real = transports.fill_status

    def task1_elsewhere(resp, request):
        real(resp, request)
        if resp.task == 1:
            resp.host_id = "another-host"
    monkeypatch.setattr(transports, "fill_status", task1_elsewhere)
    big = np.ones(1 << 20, np.float32)
    before = _served(clients[T1])
    got, err = _pull(s1.worker, s0.worker, big)
    assert err is None and np.array_equal(got, big)
    assert _served(clients[T1]) - before >= big.nbytes
    assert s0.worker.transports.get(T1, clients[T1]).name == "grpc"
    assert s1.worker.transports.get(T0, clients[T0]).name == "shm"   # task 0 is on this host


def test_a_failed_pull_is_reported_and_the_transport_negotiated_again(servers, monkeypatch):
    (s0, s1), clients = servers
    big = np.ones(1 << 20, np.float32)
    assert _pull(s1.worker, s0.worker, big)[1] is None
    asked = []
    real_status = s1.worker.get_status
    monkeypatch.setattr(s1.worker, "get_status", lambda req=None, timeout=None: (asked.append(1),
                                                                                  real_status(req))[1])

    def gone(meta, progress, what):
        os.unlink(os.path.join(shm_transport.SHM_DIR, meta.segment))
        raise errors.UnavailableError(None, None, f"segment {meta.segment} is gone")
    real_take = shm_transport._take
    monkeypatch.setattr(shm_transport, "_take", gone)
    value, err = _pull(s1.worker, s0.worker, big)
    assert value is None and isinstance(err, errors.UnavailableError) and "is gone" in err.message
    assert asked == []                                        # (the choice was cached)
    monkeypatch.setattr(shm_transport, "_take", real_take)
    assert _pull(s1.worker, s0.worker, big)[1] is None        # negotiated again, shm again
    assert asked == [1] and s0.worker.transports.get(T1, clients[T1]).name == "shm"


def test_an_in_process_peer_is_reached_in_band_without_negotiation(monkeypatch):
    from kernflow.worker.worker import Worker
    monkeypatch.delenv(core_transport.TRANSPORT_ENV, raising=False)
    workers = {}
    w0 = workers[T0] = Worker("worker", 0, resolver=workers.get)
    w1 = workers[T1] = Worker("worker", 1, resolver=workers.get)
    try:
        got, err = _pull(w1, w0, np.ones(1 << 20, np.float32))
        assert err is None and got.sum() == 1 << 20
        assert w0.transports.get(T1, w1).name == "grpc"
    finally:
        w0.close()
        w1.close()


def test_get_status_advertises_the_host_and_the_transports(servers):
    (s0, s1), clients = servers
    st = clients[T1].get_status()
    assert st.host_id == core_transport.host_id()
    assert [o.name for o in st.transports] == ["shm", "grpc"]


@pytest.mark.parametrize("end", ["AbortStep", "CleanupGraph", "shutdown"])
def test_a_segment_being_served_is_removed_when_its_step_or_worker_ends(servers, end):
    from kernflow.client.protobuf import worker_pb2
    (s0, s1), clients = servers
    step = next(_step_ids)
    src, dst = s1.worker.devices[0], s0.worker.devices[0]
    key = create_key(src.name, src.incarnation, dst.name, "t:0")
    s1.worker._step(step).keep_for_pull(key, np.ones(1 << 20, np.float32))
    name = "kernflow-shm-" + "ef" * 16
    req = worker_pb2.RecvTensorRequest(step_id=step, rendezvous_key=key, transport="shm",
                                       transport_request=worker_pb2.ShmRecvRequest(segment=name)
                                       .SerializeToString())
    answer = s1.worker.recv_tensor_raw(req, timeout=5)
    first = worker_pb2.RecvTensorResponse.FromString(next(answer))   # the consumer stalls here
    assert first.total_bytes == 4 << 20 and os.path.exists(os.path.join(shm_transport.SHM_DIR, name))
    if end == "AbortStep":
        s1.worker.abort_step(worker_pb2.AbortStepRequest(step_id=step))
    elif end == "CleanupGraph":
        s1.worker.cleanup_graph(worker_pb2.CleanupGraphRequest(step_id=step))
    else:
        s1.worker.close()
    assert not os.path.exists(os.path.join(shm_transport.SHM_DIR, name))
    assert name not in shm_transport.held_segments()
    with pytest.raises(errors.AbortedError if end != "shutdown" else errors.UnavailableError):
        list(answer)                                      # the rest of the answer fails
