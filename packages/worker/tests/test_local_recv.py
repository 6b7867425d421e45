"""RecvTensor over the same-host channel: answered from the thread that sends the value
(`Worker.recv_tensor_push`), with the same values, errors, deadlines and cleanup as over gRPC."""

import threading
import time

import numpy as np
import pytest

from kernflow.client import codec, local_channel, local_server
from kernflow.client.protobuf import worker_pb2
from kernflow.client.worker_client import GrpcWorkerClient
from kernflow.core.framework import errors
from kernflow.core.runtime.rendezvous import create_key
from kernflow.worker.server import WorkerServer

T0 = "/job:worker/replica:0/task:0"
CPU0 = T0 + "/device:CPU:0"
OTHER = "/job:worker/replica:0/task:1/device:CPU:0"
R = worker_pb2.RecvTensorResponse


@pytest.fixture
def worker():
    s = WorkerServer("worker", 0)
    c = GrpcWorkerClient(s.address, T0)
    c.get_status()
    assert local_channel.channel_for(s.address) is not None, "no same-host channel to the worker"
    yield s, c
    local_channel.forget(s.address)
    s.stop(0)


def _key(s, name):
    return create_key(CPU0, s.worker.devices[0].incarnation, OTHER, name)


def _values(call, n):
    """(index, value) of a several-key stream, as a worker's batched pull reads it."""
    from kernflow.client.grpc_transport import split_values
    out = {}
    for i, items in split_values((codec.split_content(b, R) for b in call), n):
        out[i] = codec.assemble_recv_chunks(items)[0]
    return out


def _waiting(s, step_id):
    rdv = s.worker._steps.get(step_id)
    return 0 if rdv is None else sum(len(v) for v in rdv._local._waiters.values())


def test_values_sent_before_and_after_the_call_arrive_marked_and_whole(worker, monkeypatch):
    s, c = worker
    monkeypatch.setattr("kernflow.worker.recv_tensor._tracing", lambda: False)   # (traced calls use the generator)
    monkeypatch.setattr(type(s.worker), "_recv_many", lambda *a: pytest.fail("served by a waiting thread"))
    big = np.arange(600_000, dtype=np.float32)                 # 2.4 MB: three chunks
    keys = [_key(s, "a:0"), _key(s, "b:0"), _key(s, "c:0")]
    rdv = s.worker._step(31)
    rdv.keep_for_pull(keys[0], np.float64(2.5))                          # before the call
    call = c.recv_tensor_raw(worker_pb2.RecvTensorRequest(step_id=31, rendezvous_key=keys[0],
                                                          more_rendezvous_keys=keys[1:]), timeout=10)
    threading.Timer(0.1, lambda: rdv.keep_for_pull(keys[2], np.array([b"x", b"yz"], dtype=object))).start()
    threading.Timer(0.2, lambda: rdv.keep_for_pull(keys[1], big)).start()
    got = _values(call, 3)
    assert got[0] == 2.5
    np.testing.assert_array_equal(got[1], big)
    assert got[2].tolist() == [b"x", b"yz"]
    assert _waiting(s, 31) == 0


@pytest.mark.parametrize("pushed", [True, False])
def test_a_missing_value_ends_the_call_at_its_deadline_and_leaves_no_waiter(worker, monkeypatch, pushed):
    """The worker's bound (`recv_timeout_s`, or the call's own deadline when it has one) ends the
    wait, pushed or not (traced calls are served by a waiting thread)."""
    s, c = worker
    monkeypatch.setattr("kernflow.worker.recv_tensor._tracing", lambda: not pushed)
    s.worker.recv_timeout_s = 0.3
    key = _key(s, "never:0")
    t = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError, match="was not produced within 0.3 s"):
        list(c.recv_tensor_raw(worker_pb2.RecvTensorRequest(step_id=32, rendezvous_key=key)))
    assert 0.25 < time.monotonic() - t < 3.0
    _wait_until_dropped(s, 32)
    s.worker.recv_timeout_s = 30
    t = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError):   # (the worker's or the caller's: they race)
        list(c.recv_tensor_raw(worker_pb2.RecvTensorRequest(step_id=32, rendezvous_key=key), timeout=0.4))
    assert time.monotonic() - t < 3.0
    _wait_until_dropped(s, 32)
    assert 0.25 < time.monotonic() - t < 3.0


def _wait_until_dropped(s, step_id):
    """The handler withdraws its waiter, then drops the unclaimed step (an unclaimed step goes with
    its waiter), possibly just after the caller saw the error: wait up to 5 s for both."""
    deadline = time.monotonic() + 5
    while (_waiting(s, step_id) or step_id in s.worker._steps) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _waiting(s, step_id) == 0 and step_id not in s.worker._steps


def test_a_caller_that_cancels_withdraws_its_waiters(worker):
    s, c = worker
    key = _key(s, "later:0")
    rdv = s.worker._step(33)
    call = c.recv_tensor_raw(worker_pb2.RecvTensorRequest(step_id=33, rendezvous_key=key), timeout=10)
    deadline = time.monotonic() + 5
    while _waiting(s, 33) == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _waiting(s, 33) == 1
    call.cancel()
    deadline = time.monotonic() + 5
    while _waiting(s, 33) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _waiting(s, 33) == 0
    rdv.keep_for_pull(key, np.ones(3))                                   # kept for a later receiver
    again = list(c.recv_tensor_raw(worker_pb2.RecvTensorRequest(step_id=33, rendezvous_key=key), timeout=10))
    np.testing.assert_array_equal(codec.assemble_recv_chunks(codec.split_content(b, R) for b in again)[0],
                                  np.ones(3))


def test_an_aborted_step_and_bad_keys_are_errors(worker):
    s, c = worker
    key = _key(s, "x:0")
    rdv = s.worker._step(34)
    threading.Timer(0.1, lambda: rdv.abort(errors.AbortedError(None, None, "step 34 was aborted"))).start()
    with pytest.raises(errors.AbortedError, match="step 34 was aborted"):
        list(c.recv_tensor_raw(worker_pb2.RecvTensorRequest(step_id=34, rendezvous_key=key), timeout=10))
    with pytest.raises(errors.InvalidArgumentError, match="not on this task"):
        list(c.recv_tensor_raw(worker_pb2.RecvTensorRequest(
            step_id=35, rendezvous_key=create_key(OTHER, 1, CPU0, "y:0")), timeout=10))
    with pytest.raises(errors.InvalidArgumentError, match="repeated"):
        list(c.recv_tensor_raw(worker_pb2.RecvTensorRequest(step_id=35, rendezvous_key=key,
                                                            more_rendezvous_keys=[key]), timeout=10))
    assert s.worker.get_status(worker_pb2.GetStatusRequest()).job == "worker"   # still serving


def test_timers_run_due_callbacks_and_skip_cancelled_ones():
    timers = local_server.Timers("test-timers")
    try:
        ran = []
        now = time.monotonic()
        timers.call_at(now + 0.2, lambda: ran.append("b"))
        timers.call_at(now + 0.05, lambda: ran.append("a"))
        dropped = timers.call_at(now + 0.1, lambda: ran.append("never"))
        dropped.cancel()
        handles = [timers.call_at(now + 60, lambda: ran.append("late")) for _ in range(3000)]
        for h in handles:
            h.cancel()                                  # (compacted once they outnumber the live ones)
        time.sleep(0.4)
        assert ran == ["a", "b"]
        assert len(timers._heap) < 1000
    finally:
        timers.close()
