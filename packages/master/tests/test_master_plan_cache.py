"""A master session keeps at most `plan_cache_size` step plans; evicted ones leave the workers."""

from __future__ import annotations

import threading
import time

import pytest

import kernflow.core as kf
from kernflow.core.runtime.plan_cache import DEFAULT_PLAN_CACHE_SIZE

T0 = "/job:worker/replica:0/task:0"
T1 = "/job:worker/replica:0/task:1"


def _wait_for(cond, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.01)
    return cond()


def _session_of(c, s):
    return c.master._sessions[s.handle]


@pytest.mark.slow
def test_500_signatures_keep_at_most_the_bound(make_cluster):
    c = make_cluster(plan_cache_size=16)
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [2], name="x")
        with kf.device("/job:worker/task:1"):
            hs = [x * float(i) for i in range(64)]
        ys = [h + 1.0 for h in hs]
    s = c.session(g)
    workers = [c.spies[t].inner for t in (T0, T1)]
    n = 0
    for i in range(len(ys)):
        for j in range(i + 1, len(ys)):
            if n == 500:
                break
            a, b = s.run([ys[i], ys[j]], {x: [1, 2]})
            assert a[1] == 2 * i + 1 and b[1] == 2 * j + 1
            n += 1
    assert n == 500 and c.spies[T1].calls["register_graph"] == 500
    assert len(_session_of(c, s).plans) == 16
    # Evicted plans were deregistered on both tasks (in the background).
    assert _wait_for(lambda: all(len(w._graphs) == 16 for w in workers)), [len(w._graphs) for w in workers]


def test_the_least_recently_used_plan_goes_first(make_cluster):
    c = make_cluster(plan_cache_size=3)
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [2], name="x")
        with kf.device("/job:worker/task:1"):
            ys = [x * float(i) for i in range(6)]
    s = c.session(g)
    regs = lambda: c.spies[T1].calls["register_graph"]   # noqa: E731
    for y in ys[1:]:
        s.run(ys[0], {x: [1, 1]})   # the hot signature, used between every new one
        s.run(y, {x: [1, 1]})
    assert regs() == 6
    s.run(ys[0], {x: [1, 1]})       # still cached: nothing registered
    assert regs() == 6
    s.run(ys[1], {x: [1, 1]})       # evicted long ago: registered again
    assert regs() == 7


def test_an_evicted_plan_in_use_is_deregistered_after_its_step(make_cluster):
    c = make_cluster(plan_cache_size=1)
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [], name="x")
        with kf.device("/job:worker/task:1"):
            q = kf.FIFOQueue(4, [kf.float32], shapes=[[]])
            deq = q.dequeue() + 0.0
            enq = q.enqueue([x * 3.0])
            other = x + 1.0
    s = c.session(g)
    got = []
    th = threading.Thread(target=lambda: got.append(s.run(deq)))
    th.start()   # blocks in the dequeue on task 1
    assert _wait_for(lambda: c.spies[T1].calls["run_graph"] == 1)
    deq_handles = {(t, c.spies[t].requests["run_graph"][0].graph_handle) for t in (T0, T1)
                   if c.spies[t].requests["run_graph"]}
    deregistered = lambda: {(t, r.graph_handle) for t in (T0, T1)   # noqa: E731
                            for r in c.spies[t].requests["deregister_graph"]}
    assert s.run(other, {x: 1.0}) == 2.0   # a new signature evicts the dequeue's plan, in use
    time.sleep(0.2)
    assert th.is_alive() and not deregistered() & deq_handles   # still registered under its step
    s.run(targets=[enq], feed_dict={x: 2.0})   # evicts `other`'s plan (idle) and feeds the dequeue
    th.join(5)
    assert got == [6.0]
    assert _wait_for(lambda: deregistered() >= deq_handles)   # gone once its step returned
    assert len(_session_of(c, s).plans) == 1


def test_the_default_bound_and_its_environment_variable(make_cluster, monkeypatch):
    from kernflow.master.master import Master
    c = make_cluster()
    assert c.master.plan_cache_size == DEFAULT_PLAN_CACHE_SIZE == 1024
    monkeypatch.setenv("KERNFLOW_PLAN_CACHE_SIZE", "7")
    assert Master({T0: c.spies[T0]}).plan_cache_size == 7
    assert Master({T0: c.spies[T0]}, plan_cache_size=3).plan_cache_size == 3
    monkeypatch.setenv("KERNFLOW_PLAN_CACHE_SIZE", "0")
    with pytest.raises(ValueError, match="KERNFLOW_PLAN_CACHE_SIZE"):
        Master({T0: c.spies[T0]})
