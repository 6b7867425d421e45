"""kf.CriticalSection: exclusive execution across concurrent steps, its graph-time checks, and the
release of its mutex on success, failure, deadline, session close and pruned ConsumeMutexLock."""

import threading
import time
import types

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.runtime.execution import StepContext

# Every step of these tests that is not meant to block gets this deadline, so nothing hangs.
_CONFIG = kf.ConfigProto(operation_timeout_in_ms=20000)


def _counter():
    """(variable, fn): the TF docs' counter; fn returns the value before its increment.

    kf.Variable is TF1's reference variable: its reads alias the buffer AssignAdd updates in place
    (as TF's RefVariable does; the docs' example uses a ResourceVariable, whose read is a copy).
    ``+ 0`` takes the snapshot the example means.
    """
    v = kf.Variable(0)

    def count():
        value = v.read_value() + 0
        with kf.control_dependencies([value]):
            with kf.control_dependencies([v.assign_add(1)]):
                return kf.identity(value)
    return v, count


def _mutex(sess, cs):
    return sess._impl.devices[0].resource_mgr.lookup("", cs.name)


def _wait_until(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def _blocked_holder(cs):
    """(fn that holds `cs` until `release` runs, release op): fn dequeues from an empty queue."""
    q = kf.FIFOQueue(1, kf.int32, shapes=[[]])
    return cs.execute(q.dequeue), q.enqueue(7)


def test_concurrent_runs_of_the_counter_see_every_value_once():
    with kf.Graph().as_default():
        v, count = _counter()
        n = kf.CriticalSection().execute(count)
        with kf.Session(config=_CONFIG) as sess:
            sess.run(v.initializer)
            seen, failures = [], []

            def worker():
                try:
                    for _ in range(50):
                        seen.append(int(sess.run(n)))
                except Exception as e:  # noqa: BLE001 - reported below
                    failures.append(e)
            threads = [threading.Thread(target=worker, daemon=True) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            assert not any(t.is_alive() for t in threads) and not failures, failures
            assert sorted(seen) == list(range(400))
            assert sess.run(v) == 400


def test_two_executions_in_one_step_run_one_after_the_other():
    with kf.Graph().as_default():
        v, count = _counter()
        cs = kf.CriticalSection()
        f1, f2 = cs.execute(count), cs.execute(count)
        after = cs.execute(lambda: f1 * 10 + 1)   # reads another execution's result: no deadlock
        with kf.Session(config=_CONFIG) as sess:
            sess.run(v.initializer)
            a, b, c = sess.run([f1, f2, after])
            assert sorted([int(a), int(b)]) == [0, 1] and int(c) == int(a) * 10 + 1
            assert sess.run(v) == 2


def test_nested_structures_come_back_in_their_shape():
    with kf.Graph().as_default():
        v = kf.Variable(5)
        cs = kf.CriticalSection(name="nest")

        def fn():
            x = v.read_value() + 0
            with kf.control_dependencies([x]):
                inc = v.assign_add(1).op
            return {"pair": (x, x * 2), "list": [kf.constant("s")], "op": inc, "none": None}
        out = cs.execute(fn)
        assert isinstance(out["op"], kf.Operation) and out["none"] is None
        assert cs.name == "nest"
        with kf.Session(config=_CONFIG) as sess:
            sess.run(v.initializer)
            got = sess.run({"pair": out["pair"], "list": out["list"]})
            assert got["pair"] == (5, 10) and got["list"] == [b"s"]
            assert sess.run(v) == 6   # fetching some of fn's results runs all of them
            sess.run(out["op"])
            assert sess.run(v) == 7


def test_executing_the_same_section_inside_fn_is_a_value_error():
    with kf.Graph().as_default():
        cs = kf.CriticalSection()
        with pytest.raises(ValueError, match="Attempting to lock a CriticalSection in which we are "
                                             "already running"):
            cs.execute(lambda: cs.execute(lambda: kf.constant(1)))
        with pytest.raises(ValueError, match="already running"):   # fn takes the mutex itself
            from kernflow.core.ops.critical_section_ops import mutex_lock
            cs.execute(lambda: mutex_lock(cs._handle))
        other = kf.CriticalSection()   # another section nests fine
        assert cs.execute(lambda: other.execute(lambda: kf.constant(1))).dtype == kf.int32


def test_two_sections_on_one_variable_are_a_value_error_unless_shared_access():
    with kf.Graph().as_default():
        v, count = _counter()
        cs1, cs2 = kf.CriticalSection(), kf.CriticalSection()
        cs1.execute(count)
        cs1.execute(count)   # the same section again is fine
        with pytest.raises(ValueError, match="exclusive_resource_access=False"):
            cs2.execute(count)
        with pytest.raises(ValueError, match="exclusive"):   # the first asked for exclusivity
            cs2.execute(count, exclusive_resource_access=False)
    with kf.Graph().as_default():
        v, count = _counter()
        cs1, cs2 = kf.CriticalSection(), kf.CriticalSection()
        a = cs1.execute(count, exclusive_resource_access=False)
        b = cs2.execute(count, exclusive_resource_access=False)
        w = kf.Variable(0)
        cs2.execute(lambda: w.assign_add(1))   # an unrelated variable
        with kf.Session(config=_CONFIG) as sess:
            sess.run(v.initializer)
            assert sorted(int(x) for x in sess.run([a, b])) in ([0, 1], [0, 0], [1, 1])


def test_an_error_inside_fn_releases_the_lock():
    with kf.Graph().as_default():
        x = kf.placeholder(kf.float32, [])
        cs = kf.CriticalSection()
        checked = cs.execute(lambda: kf.debugging.check_numerics(x * 2, "bad value"))
        with kf.Session(config=kf.ConfigProto(operation_timeout_in_ms=5000)) as sess:
            with pytest.raises(errors.InvalidArgumentError, match="bad value"):
                sess.run(checked, {x: np.nan})
            assert _mutex(sess, cs).holder is None
            assert sess.run(checked, {x: 1.5}) == 3.0   # not DeadlineExceeded: the lock is free


def test_a_run_waiting_for_the_lock_ends_at_operation_timeout_in_ms(in_thread):
    with kf.Graph().as_default():
        cs = kf.CriticalSection()
        held, release = _blocked_holder(cs)
        other = cs.execute(lambda: kf.constant(3))
        with kf.Session(config=kf.ConfigProto(operation_timeout_in_ms=300)) as sess:
            t, box = in_thread(lambda: sess.run(held, options=kf.RunOptions(timeout_in_ms=20000)))
            _wait_until(lambda: _mutex(sess, cs).holder is not None)
            started = time.monotonic()
            with pytest.raises(errors.DeadlineExceededError):
                sess.run(other)
            assert time.monotonic() - started < 5
            assert t.is_alive() and _mutex(sess, cs).holder is not None  # still the holder's
            sess.run(release)
            t.join(10)
            assert box and box[0] == ("ok", 7), box
            assert sess.run(other) == 3


def test_closing_the_session_wakes_a_waiting_run_with_cancelled(in_thread):
    with kf.Graph().as_default():
        cs = kf.CriticalSection()
        other = cs.execute(lambda: kf.constant(3))
        sess = kf.Session(config=_CONFIG)
        sess.run(cs._handle.op)   # creates the mutex
        mutex = _mutex(sess, cs)
        # Held outside any step of this session: closing cannot release it before the waiter is
        # cancelled (a holder step cancelled first would hand the lock over).
        held = []
        mutex.lock(StepContext(0, None), held.append)
        assert held and mutex.holder == held[0].serial
        waiter, box = in_thread(lambda: sess.run(other))
        _wait_until(lambda: len(mutex._lines[0]) == 1)
        closed_at = time.monotonic()
        sess.close()
        waiter.join(10)
        assert box and box[0][0] == "err" and isinstance(box[0][1], errors.CancelledError), box
        assert box[0][2] - closed_at < 5 and not mutex._lines[0]


def test_a_step_that_prunes_the_release_frees_the_lock_when_its_value_is_dropped():
    with kf.Graph().as_default():
        v = kf.Variable(1)
        cs = kf.CriticalSection()
        inner = []

        def fn():
            inner.append(v.read_value() + 0)
            return kf.identity(inner[0])
        out = cs.execute(fn)
        with kf.Session(config=kf.ConfigProto(operation_timeout_in_ms=5000)) as sess:
            sess.run(v.initializer)
            assert sess.run(inner[0]) == 1   # takes the lock; ConsumeMutexLock is not in the step
            _wait_until(lambda: _mutex(sess, cs).holder is None)
            assert sess.run(out) == 1


def test_shared_name_and_critical_section_def_name_one_mutex():
    with kf.Graph().as_default():
        v, count = _counter()
        cs = kf.CriticalSection(name="counter_section", shared_name="counter")
        same = kf.CriticalSection(
            critical_section_def=types.SimpleNamespace(critical_section_name="counter_section"))
        assert same._handle is cs._handle
        with pytest.raises(ValueError, match="mutually exclusive"):
            kf.CriticalSection(critical_section_def=same, shared_name="x")
        a, b = cs.execute(count), same.execute(count)   # one section: no resource conflict
        with kf.Session(config=_CONFIG) as sess:
            sess.run(v.initializer)
            assert sorted(int(x) for x in sess.run([a, b])) == [0, 1]
            assert sess._impl.devices[0].resource_mgr.lookup("", "counter") is not None
