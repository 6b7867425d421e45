"""Bounded per-signature plan caches: `PlanCache` (the master's) and DirectSession's compiled steps."""

from __future__ import annotations

import gc
import itertools
import linecache
import math

import pytest

import kernflow.core as kf
from kernflow.core.runtime.plan_cache import DEFAULT_PLAN_CACHE_SIZE, PlanCache, plan_cache_size


class _Plan:
    def __init__(self, name, handles=True):
        self.name, self.users, self.evicted = name, 0, False
        self.handles = {"t": name} if handles else {}


def test_plan_cache_evicts_the_least_recently_used():
    cache = PlanCache(2)
    a, b, c = _Plan("a"), _Plan("b"), _Plan("c")
    assert cache.add("a", a) == [] and cache.add("b", b) == []
    for p in (a, b):
        cache.release(p)
    assert cache.get("a") is a   # a is now the most recently used
    cache.release(a)
    assert cache.add("c", c) == [b] and b.evicted
    assert cache.get("b") is None and len(cache) == 2


def test_an_evicted_plan_in_use_is_handed_back_by_its_last_release():
    cache = PlanCache(1)
    a, b = _Plan("a"), _Plan("b")
    cache.add("a", a)
    assert cache.get("a") is a and a.users == 2   # two steps use it
    assert cache.add("b", b) == []                # evicted, but in use: not handed back yet
    assert a.evicted and not cache.release(a)
    assert cache.release(a)                       # its last use ends: deregister it now
    assert not cache.release(b)                   # b is cached, not evicted
    # A plan with nothing registered is handed back at once, in use or not.
    c = _Plan("c", handles=False)
    cache.add("c", c)
    d = _Plan("d")
    assert cache.add("d", d) == [c]


def test_clear_hands_back_every_plan_once():
    cache = PlanCache(1)
    a, b = _Plan("a"), _Plan("b")
    cache.add("a", a)
    cache.add("b", b)   # a evicted while in use
    assert sorted(p.name for p in cache.clear()) == ["a", "b"]
    assert not cache.release(a) and len(cache) == 0   # not handed back a second time


def test_plan_cache_size(monkeypatch):
    monkeypatch.delenv("KERNFLOW_PLAN_CACHE_SIZE", raising=False)
    assert plan_cache_size() == DEFAULT_PLAN_CACHE_SIZE == 1024
    assert plan_cache_size(5) == 5
    monkeypatch.setenv("KERNFLOW_PLAN_CACHE_SIZE", "12")
    assert plan_cache_size() == 12
    for bad in ("0", "-3", "many"):
        monkeypatch.setenv("KERNFLOW_PLAN_CACHE_SIZE", bad)
        with pytest.raises(ValueError, match="KERNFLOW_PLAN_CACHE_SIZE"):
            plan_cache_size()


def test_direct_session_keeps_at_most_the_bound_of_2000_signatures(monkeypatch):
    monkeypatch.setenv("KERNFLOW_PLAN_CACHE_SIZE", "16")
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [2], name="x")
        ys = [kf.tanh(x * float(i)) for i in range(64)]
    with kf.Session(graph=g) as sess:
        impl = sess._impl
        gc.collect()
        sources = len(linecache.cache)
        for n, (i, j) in enumerate(itertools.combinations(range(64), 2)):
            if n == 2000:
                break
            a, b = sess.run([ys[i], ys[j]], {x: [0.0, 0.5]})
            assert a[1] == pytest.approx(math.tanh(0.5 * i)) and b[0] == 0.0
            assert len(impl._steps) <= 16
        assert len(impl._steps) == 16
        # The generated source of evicted steps' plans went with them.
        gc.collect()
        assert len(linecache.cache) - sources <= 16 * 2
        # A hot signature stays cached while 40 others come and go (least recently used first out).
        for i in range(40):
            sess.run(ys[0], {x: [1.0, 1.0]})
            sess.run([ys[i], ys[i + 1], ys[i + 2]], {x: [1.0, 1.0]})
        assert ((x.name,), (ys[0].name,), ()) in impl._steps and len(impl._steps) == 16
