"""The segmented straight line (`runtime/segmented.py`): what the bit-for-bit comparison with the
reference (`test_executors.py`) does not show: its segments, errors and aborts, traced steps."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.runtime import segmented

TWO_CPUS = kf.ConfigProto(device_count={"CPU": 2})


def _plans(sess, fetches, feeds):
    key = (tuple(t.name for t in feeds), tuple(t.name for t in fetches), ())
    return {p.device.name.split("device:")[-1]: p for p in sess._impl._step(key).plans}


def test_a_partition_with_recvs_runs_as_segments_one_per_set_of_recvs():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [3], name="x")
        with kf.device("/cpu:1"):
            a = x * 2.0
            b = x + 1.0
        with kf.device("/cpu:0"):
            c = kf.tanh(x)          # needs no Recv
            d = a * c               # needs a
            e = d + b               # needs a and b
    with kf.Session(graph=g, config=TWO_CPUS) as sess:
        value = np.array([0.5, -1.0, 2.0], np.float32)
        got = sess.run([d, e], {x: value})
        np.testing.assert_allclose(got[0], value * 2 * np.tanh(value), rtol=1e-6)
        np.testing.assert_allclose(got[1], got[0] + value + 1, rtol=1e-6)
        plan = _plans(sess, [d, e], [x])["CPU:0"]
        assert plan.segments is not None and not plan.inline
        # Keys {}, {a}, {a, b}: d waits for a's Recv and for c (segment {}); e for d's segment
        # and b's Recv.
        assert len(plan.segments.functions) == 3
        assert plan.segments.init_pending == [0, 2, 2]


def test_a_failing_kernel_in_a_segment_fails_the_step_naming_its_node():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [2], name="x")
        with kf.device("/cpu:1"):
            a = x * 2.0
        with kf.device("/cpu:0"):
            checked = kf.debugging.check_numerics(a, "not finite", name="checked")
    with kf.Session(graph=g, config=TWO_CPUS) as sess:
        assert sess.run(checked, {x: [1.0, 2.0]}).tolist() == [2.0, 4.0]
        with pytest.raises(errors.InvalidArgumentError, match="checked"):
            sess.run(checked, {x: [1.0, np.nan]})
        assert sess.run(checked, {x: [3.0, 2.0]}).tolist() == [6.0, 4.0]   # the session still works


def test_an_aborted_step_stops_a_segment_between_kernels():
    started = threading.Event()
    ran_after = []

    def slow(v):
        started.set()
        time.sleep(0.6)
        return v

    def after(v):
        ran_after.append(True)
        return v

    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [2], name="x")
        with kf.device("/cpu:1"):
            a = x * 2.0
        with kf.device("/cpu:0"):
            b = kf.py_func(slow, [a], kf.float32)
            c = kf.py_func(after, [b], kf.float32)
    with kf.Session(graph=g, config=TWO_CPUS) as sess:
        assert _plans(sess, [c], [x])["CPU:0"].segments is not None
        options = kf.RunOptions(timeout_in_ms=200)
        t0 = time.monotonic()
        with pytest.raises(errors.DeadlineExceededError):
            sess.run(c, {x: [1.0, 2.0]}, options=options)
        assert started.is_set() and time.monotonic() - t0 < 2.0
        time.sleep(0.8)   # the slow kernel has returned: the segment must have stopped there
        assert ran_after == []


def test_a_traced_step_records_every_node_of_a_segmented_partition():
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [2], name="x")
        with kf.device("/cpu:1"):
            a = kf.multiply(x, 2.0, name="a")
        with kf.device("/cpu:0"):
            b = kf.tanh(a, name="b")
    with kf.Session(graph=g, config=TWO_CPUS) as sess:
        meta = kf.RunMetadata()
        sess.run(b, {x: [1.0, 2.0]}, options=kf.RunOptions(trace_level=kf.RunOptions.FULL_TRACE),
                 run_metadata=meta)
        names = {ns.node_name for ds in meta.step_stats.dev_stats if ds.device.endswith("CPU:0")
                 for ns in ds.node_stats}
        assert "b" in names


def test_can_segment_refuses_plans_with_other_asynchronous_kernels():
    g = kf.Graph()
    with g.as_default():
        q = kf.FIFOQueue(2, kf.float32, shapes=[[]])
        x = kf.placeholder(kf.float32, [], name="x")
        enq = q.enqueue([x])
        deq = q.dequeue()
    with kf.Session(graph=g) as sess:
        sess.run(enq, {x: 1.0})
        assert sess.run(deq) == 1.0
        plan = _plans(sess, [deq], [])["CPU:0"]
        assert not segmented.can_segment(plan) and plan.segments is None
