"""Idle master sessions are closed (`session_gc`), their graphs deregistered from the workers."""

from __future__ import annotations

import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.client.protobuf import master_pb2
from kernflow.core.framework import errors
from kernflow.core.protobuf import config_pb2
from kernflow.master.master import Master
from kernflow.master.session_gc import DEFAULT_SESSION_GC_SECONDS

T0 = "/job:worker/replica:0/task:0"
T1 = "/job:worker/replica:0/task:1"


def _cross_task_graph():
    """y = (x * 2 on task 1) + 1 on task 0: a step registers a graph on both tasks."""
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [2], name="x")
        with kf.device("/job:worker/task:1"):
            h = x * 2.0
        y = h + 1.0
    return g, x, y


def _wait_for(cond, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.01)
    return cond()


def test_an_idle_session_is_closed_and_its_worker_state_released(make_cluster):
    c = make_cluster(session_gc_seconds=0.3)
    g, x, y = _cross_task_graph()
    s = c.session(g)
    np.testing.assert_array_equal(s.run(y, {x: [1, 2]}), [3, 5])
    workers = [c.spies[t].inner for t in (T0, T1)]
    assert all(w._graphs and s.handle in w._sessions for w in workers)
    # The collecting thread closes it a little after 0.3 s without a call.
    assert _wait_for(lambda: s.handle not in c.master._sessions)
    assert _wait_for(lambda: not any(w._graphs for w in workers))
    assert all(s.handle not in w._sessions for w in workers)   # compiled kernels went too
    with pytest.raises(errors.AbortedError, match=r"not found: the master closed it after 0.3 s without a call"):
        s.run(y, {x: [1, 2]})
    s.close()   # closing it afterwards succeeds


def test_a_session_in_use_is_not_collected(make_cluster):
    c = make_cluster(session_gc_seconds=0.3)
    g, x, y = _cross_task_graph()
    with g.as_default(), kf.device("/job:worker/task:1"):
        q = kf.FIFOQueue(4, [kf.float32], shapes=[[]])
        deq = q.dequeue()
    s = c.session(g)
    for _ in range(8):   # a call every 0.1 s keeps it
        s.run(y, {x: [1, 2]})
        time.sleep(0.1)
    assert s.handle in c.master._sessions
    # A step that runs longer than the timeout keeps it too (its dequeue times out after 0.8 s).
    with pytest.raises(errors.DeadlineExceededError):
        s.run(deq, options=config_pb2.RunOptions(timeout_in_ms=800))
    np.testing.assert_array_equal(s.run(y, {x: [0, 1]}), [1, 3])


def test_collection_is_on_by_default_and_configurable(make_cluster, monkeypatch):
    c = make_cluster()
    assert c.master.session_gc_seconds == DEFAULT_SESSION_GC_SECONDS == 24 * 3600
    g, x, y = _cross_task_graph()
    s = c.session(g)
    s.run(y, {x: [1, 2]})
    assert c.master.collect_idle_sessions() == []
    later = time.monotonic() + DEFAULT_SESSION_GC_SECONDS + 1
    assert c.master.collect_idle_sessions(now=later) == [s.handle]
    with pytest.raises(errors.AbortedError, match="session_gc_seconds"):
        s.run(y, {x: [1, 2]})
    monkeypatch.setenv("KERNFLOW_SESSION_GC_SECONDS", "0")   # off
    off = Master({T0: c.spies[T0]})
    assert off.session_gc_seconds == 0
    monkeypatch.setenv("KERNFLOW_SESSION_GC_SECONDS", "90")
    assert Master({T0: c.spies[T0]}).session_gc_seconds == 90.0
    assert Master({T0: c.spies[T0]}, session_gc_seconds=5).session_gc_seconds == 5.0
    monkeypatch.setenv("KERNFLOW_SESSION_GC_SECONDS", "soon")
    with pytest.raises(ValueError, match="KERNFLOW_SESSION_GC_SECONDS"):
        Master({T0: c.spies[T0]})


def test_collection_off_keeps_idle_sessions(make_cluster):
    c = make_cluster(session_gc_seconds=0)
    g, x, y = _cross_task_graph()
    s = c.session(g)
    assert c.master.collect_idle_sessions(now=time.monotonic() + 10 ** 9) == []
    np.testing.assert_array_equal(s.run(y, {x: [1, 2]}), [3, 5])


def test_a_session_closed_by_its_client_is_not_reported_as_collected(make_cluster):
    c = make_cluster(session_gc_seconds=60)
    g, x, y = _cross_task_graph()
    s = c.session(g)
    s.close()
    with pytest.raises(errors.AbortedError, match="Possibly, this master has restarted"):
        s.run(y, {x: [1, 2]})
    with pytest.raises(errors.AbortedError, match="not found"):
        c.master.close_session(master_pb2.CloseSessionRequest(session_handle=s.handle))


def test_close_stops_the_collector(make_cluster):
    c = make_cluster(session_gc_seconds=0.2)
    g, x, y = _cross_task_graph()
    c.session(g)
    thread = c.master._gc.thread
    assert thread.is_alive()
    c.master.close()
    thread.join(1.0)
    assert not thread.is_alive()

