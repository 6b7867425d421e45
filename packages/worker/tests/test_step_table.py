"""The worker's per-step state stays bounded whatever step ids AbortStep and RecvTensor name."""

from __future__ import annotations

import gc
import random
import threading
import time
import tracemalloc

import numpy as np
import pytest

from kernflow.client import codec
from kernflow.client.protobuf import worker_pb2
from kernflow.core.framework import errors
from kernflow.core.runtime.rendezvous import create_key
from kernflow.worker.worker import Worker

T1 = "/job:worker/replica:0/task:1"


@pytest.fixture
def worker():
    w = Worker("worker", 0, recv_timeout_s=10)
    yield w
    w.close()


def _key(w, name="x:0"):
    """A rendezvous key whose producer is `w` (what a peer's RecvTensor names)."""
    return create_key(w.devices[0].name, w.devices[0].incarnation, T1 + "/device:CPU:0", name)


def _recv(w, step_id, key, timeout=None):
    req = worker_pb2.RecvTensorRequest(step_id=step_id, rendezvous_key=key)
    return codec.assemble_recv_chunks(w.recv_tensor(req, timeout=timeout))


def _random_calls(w, rng, n, key):
    for _ in range(n):
        w.abort_step(worker_pb2.AbortStepRequest(step_id=rng.getrandbits(63), code=errors.ABORTED,
                                                 message="gone"))
        with pytest.raises(errors.DeadlineExceededError):
            _recv(w, rng.getrandbits(63), key, timeout=1e-6)


def test_random_step_ids_leave_bounded_state(worker, monkeypatch):
    """AbortStep and RecvTensor of ever new step ids: the retained memory stops growing at the
    tombstone cap (before the fix: ~2.7 KB per pair of calls, swept only after 600 s)."""
    # (Untraced: a tracer provider an earlier test installed would keep every call's span.)
    monkeypatch.setattr("kernflow.worker.recv_tensor._tracing", lambda: False)
    worker._table.max_tombstones = 500
    rng = random.Random(0)
    key = _key(worker)
    _random_calls(worker, rng, 100, key)   # warm-up (lazily built caches)
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        _random_calls(worker, rng, 1000, key)
        gc.collect()
        first = tracemalloc.get_traced_memory()[0] - base
        _random_calls(worker, rng, 2000, key)
        gc.collect()
        second = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    t = worker._table
    assert not worker._steps and not t.unclaimed    # no rendezvous left behind
    assert len(t.aborted) == 500                    # tombstones capped
    assert first < 1_000_000 and second - first < 100_000, (first, second)


def test_an_early_recv_tensor_gets_its_value_and_a_timed_out_one_leaves_nothing(worker):
    """A RecvTensor that comes before its step's RunGraph is legitimate: it waits, and gets the
    value once the step sends it; one that times out takes its rendezvous with it."""
    key = _key(worker)
    got = []
    th = threading.Thread(target=lambda: got.append(_recv(worker, 11, key, timeout=5)))
    th.start()
    deadline = time.monotonic() + 2
    while 11 not in worker._table.unclaimed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert 11 in worker._table.unclaimed
    worker._step(11).keep_for_pull(key, np.float32(2.5))   # what the step's _Send does once RunGraph runs
    th.join(5)
    assert got and got[0][0] == 2.5
    assert 11 not in worker._table.unclaimed
    with pytest.raises(errors.DeadlineExceededError):
        _recv(worker, 12, key, timeout=0.05)
    assert 12 not in worker._steps and not worker._table.unclaimed


def test_abort_of_an_unknown_step_is_a_tombstone_that_fails_its_later_calls(split, wait_on_task1_graph):
    workers = {}
    w0 = Worker("worker", 0, resolver=workers.get, recv_timeout_s=10)
    w1 = Worker("worker", 1, resolver=workers.get, recv_timeout_s=10)
    workers.update({w0.task_name: w0, w1.task_name: w1})
    try:
        g, b = wait_on_task1_graph()
        part = split(g, [w0, w1], fetches=[b.name])[w0.task_name]   # waits in a Recv from task 1
        handle = w0.register_graph(worker_pb2.RegisterGraphRequest(session_handle="s", graph_def=part)).graph_handle
        w0.abort_step(worker_pb2.AbortStepRequest(step_id=21, code=errors.CANCELLED, message="stop it"))
        assert 21 not in w0._steps and 21 in w0._table.aborted
        t = time.monotonic()
        with pytest.raises(errors.CancelledError, match="stop it"):
            w0.run_graph(worker_pb2.RunGraphRequest(session_handle="s", graph_handle=handle, step_id=21,
                                                    timeout_in_ms=5000))
        with pytest.raises(errors.CancelledError, match="stop it"):
            _recv(w0, 21, _key(w0))
        assert time.monotonic() - t < 1.0 and 21 not in w0._steps
    finally:
        w0.close()
        w1.close()


def test_abort_messages_are_remembered_cut_short(worker):
    # A long abort message is remembered cut short.
    worker.abort_step(worker_pb2.AbortStepRequest(step_id=22, message="m" * 100_000))
    assert len(worker._table.aborted[22][1]) <= 1000


def test_an_aborted_early_recv_leaves_a_tombstone_not_a_rendezvous(worker):
    key = _key(worker)
    box = []

    def recv():
        try:
            _recv(worker, 31, key, timeout=5)
        except errors.OpError as e:
            box.append(e)

    th = threading.Thread(target=recv)
    th.start()
    deadline = time.monotonic() + 2
    while 31 not in worker._steps and time.monotonic() < deadline:
        time.sleep(0.01)
    worker.abort_step(worker_pb2.AbortStepRequest(step_id=31, code=errors.ABORTED, message="gave up"))
    th.join(2)
    assert box and isinstance(box[0], errors.AbortedError) and "gave up" in str(box[0])
    assert 31 not in worker._steps and 31 in worker._table.aborted
    with pytest.raises(errors.AbortedError, match="gave up"):
        _recv(worker, 31, key)


def test_too_many_steps_waiting_for_their_run_graph_evict_the_oldest(worker):
    worker._table.max_unclaimed = 3
    key = _key(worker)
    outcome = {}

    def recv(step_id):
        t = time.monotonic()
        try:
            _recv(worker, step_id, key, timeout=5)
        except errors.OpError as e:
            outcome[step_id] = (e, time.monotonic() - t)

    threads = []
    for sid in (41, 42, 43, 44):
        threads.append(threading.Thread(target=recv, args=(sid,)))
        threads[-1].start()
        deadline = time.monotonic() + 2
        while sid not in worker._steps and time.monotonic() < deadline:
            time.sleep(0.01)
    threads[0].join(2)
    err, waited = outcome[41]
    assert isinstance(err, errors.AbortedError) and "more than 3 steps" in str(err) and waited < 2
    assert list(worker._table.unclaimed) == [42, 43, 44]
    worker.close()
    for th in threads:
        th.join(2)
        assert not th.is_alive()
