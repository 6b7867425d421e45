"""`kf.train.QueueRunner`, `add_queue_runner`, `start_queue_runners` and `kf.train.Coordinator`."""

import threading
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors


# ---------------------------------------------------------------------------- Coordinator
def test_coordinator_stop_flag_and_clean_stop():
    coord = kf.train.Coordinator()
    assert not coord.should_stop() and not coord.wait_for_stop(0.01)
    coord.request_stop(errors.OutOfRangeError(None, None, "end of input"))  # a clean stop
    assert coord.should_stop() and coord.wait_for_stop(0.01)
    coord.join([])  # nothing reported: no exception
    assert coord.joined
    coord.clear_stop()
    assert not coord.should_stop() and not coord.joined


def test_coordinator_join_reraises_the_first_reported_error():
    coord = kf.train.Coordinator()

    def worker(i):
        with coord.stop_on_exception():
            if i == 0:
                raise ValueError("first")
            while not coord.should_stop():
                time.sleep(0.01)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    with pytest.raises(ValueError, match="first"):
        coord.join(threads)
    assert not any(t.is_alive() for t in threads)
    with pytest.raises(RuntimeError, match="second"):
        # Once joined, a new error is raised at once rather than lost.
        coord.request_stop(RuntimeError("second"))
    coord.request_stop()  # a plain stop request is fine
    with pytest.raises(ValueError, match="first"):
        coord.raise_requested_exception()


def test_coordinator_custom_clean_stop_types_and_exc_info():
    coord = kf.train.Coordinator(clean_stop_exception_types=(KeyError,))
    coord.request_stop(KeyError("k"))
    coord.join([])
    coord.clear_stop()
    try:
        raise IndexError("boom")
    except IndexError:
        import sys
        coord.request_stop(sys.exc_info())
    with pytest.raises(IndexError, match="boom"):
        coord.join([])


def test_coordinator_join_waits_for_registered_threads_and_reports_stragglers():
    coord = kf.train.Coordinator()
    release = threading.Event()
    t = threading.Thread(target=release.wait, name="straggler", daemon=True)
    coord.register_thread(t)
    t.start()
    coord.request_stop()
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="straggler"):
        coord.join(stop_grace_period_secs=0.2)
    assert time.monotonic() - t0 < 2.0
    coord.clear_stop()
    coord.register_thread(t)
    coord.request_stop()
    coord.join(stop_grace_period_secs=0.05, ignore_live_threads=True)
    release.set()
    t.join()


def test_coordinator_join_returns_when_threads_finish_without_a_stop():
    coord = kf.train.Coordinator()
    threads = [threading.Thread(target=time.sleep, args=(0.05,)) for _ in range(2)]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    coord.join(threads)
    assert time.monotonic() - t0 < 1.0 and not coord.should_stop()


def test_looper_thread():
    coord = kf.train.Coordinator()
    calls = []
    looper = coord.loop(0.01, calls.append, args=(1,))
    time.sleep(0.2)
    coord.request_stop()
    coord.join([looper])
    assert 3 <= len(calls)


# ---------------------------------------------------------------------------- QueueRunner
def _source_and_target(n=20, capacity=4):
    """A closed source queue of n ints and a runner moving them into a small target queue."""
    src = kf.FIFOQueue(n, kf.int32, shapes=[[]], name="source")
    fill = src.enqueue_many([np.arange(n, dtype=np.int32)])
    close_src = src.close()
    dst = kf.FIFOQueue(capacity, kf.int32, shapes=[[]], name="target")
    move = dst.enqueue(src.dequeue())
    return fill, close_src, dst, move


def test_queue_runner_threads_stop_on_out_of_range_and_close_the_queue():
    with kf.Graph().as_default():
        fill, close_src, dst, move = _source_and_target()
        qr = kf.train.QueueRunner(dst, [move] * 3)
        assert qr.queue is dst and qr.enqueue_ops == [move] * 3 and qr.name == "target"
        assert qr.queue_closed_exception_types == (errors.OutOfRangeError,)
        kf.train.add_queue_runner(qr)
        assert kf.get_collection(kf.GraphKeys.QUEUE_RUNNERS) == [qr]
        deq = dst.dequeue()
        with kf.Session() as sess:
            sess.run([fill, close_src])
            coord = kf.train.Coordinator()
            threads = kf.train.start_queue_runners(sess, coord)
            assert len(threads) == 4 and all(t.daemon for t in threads)
            assert qr.create_threads(sess, coord) == []  # already running for this session
            got = []
            with pytest.raises(errors.OutOfRangeError):
                while True:
                    got.append(int(sess.run(deq)))
            assert sorted(got) == list(range(20))
            coord.request_stop()
            coord.join(threads)
            assert qr.exceptions_raised == []


def test_queue_runner_reports_errors_through_the_coordinator():
    with kf.Graph().as_default():
        src = kf.FIFOQueue(5, kf.float32)  # no shapes: anything goes in
        fill = src.enqueue([[1.0, 2.0, 3.0]])
        dst = kf.FIFOQueue(5, kf.float32, shapes=[[2]])
        qr = kf.train.QueueRunner(dst, [dst.enqueue(src.dequeue())])  # fails: [3] is not [2]
        with kf.Session() as sess:
            sess.run(fill)
            coord = kf.train.Coordinator()
            threads = qr.create_threads(sess, coord=coord, start=True)
            with pytest.raises(errors.InvalidArgumentError, match=r"Expected \[2\], got \[3\]"):
                coord.join(threads, stop_grace_period_secs=5)
            assert qr.exceptions_raised == []


def test_queue_runner_without_coordinator_records_exceptions():
    with kf.Graph().as_default():
        src = kf.FIFOQueue(5, kf.float32)
        fill = src.enqueue([[1.0, 2.0, 3.0]])
        dst = kf.FIFOQueue(5, kf.float32, shapes=[[2]])
        qr = kf.train.QueueRunner(dst, [dst.enqueue(src.dequeue())])
        with kf.Session() as sess:
            sess.run(fill)
            threads = qr.create_threads(sess)
            assert len(threads) == 1 and not threads[0].daemon
            threads[0].run = _swallow(threads[0].run)
            threads[0].start()
            threads[0].join(5)
            assert len(qr.exceptions_raised) == 1
            assert isinstance(qr.exceptions_raised[0], errors.InvalidArgumentError)


def _swallow(fn):
    def run():
        try:
            fn()
        except Exception:  # noqa: BLE001 - the runner re-raises in its thread; keep pytest quiet
            pass
    return run


def test_coordinator_stop_cancels_enqueues_blocked_on_a_full_queue():
    with kf.Graph().as_default():
        q = kf.FIFOQueue(2, kf.float32, shapes=[[]])
        qr = kf.train.QueueRunner(q, [q.enqueue(1.0)] * 2)
        closed = q.is_closed()
        with kf.Session() as sess:
            coord = kf.train.Coordinator()
            threads = qr.create_threads(sess, coord=coord, daemon=True, start=True)
            time.sleep(0.3)  # the queue is full, both enqueue threads are blocked
            t0 = time.monotonic()
            coord.request_stop()
            coord.join(threads, stop_grace_period_secs=5)  # Cancelled is not reported
            assert time.monotonic() - t0 < 2.0
            assert sess.run(closed)


def test_an_error_after_the_stop_is_logged_not_raised_in_the_thread(caplog):
    # An op the stop does not cancel (here a dequeue from another queue) fails only once the
    # session closes, after join(): nothing can take the error any more, so it is logged.
    with kf.Graph().as_default():
        src = kf.FIFOQueue(1, kf.float32, shapes=[[]])
        dst = kf.FIFOQueue(1, kf.float32, shapes=[[]])
        qr = kf.train.QueueRunner(dst, [dst.enqueue(src.dequeue())])
        sess = kf.Session()
        coord = kf.train.Coordinator()
        threads = qr.create_threads(sess, coord=coord, daemon=True, start=True)
        raised = []
        old_hook, threading.excepthook = threading.excepthook, raised.append
        try:
            with caplog.at_level("INFO", logger="kernflow.core.train.queue_runner"):
                coord.request_stop()
                coord.join(threads, stop_grace_period_secs=0.2, ignore_live_threads=True)
                assert threads[0].is_alive()               # still blocked in the dequeue
                sess.close()                               # cancels it
                threads[0].join(5)
        finally:
            threading.excepthook = old_hook
        assert not threads[0].is_alive() and raised == []
        assert any("ended after the coordinator stopped" in r.getMessage() for r in caplog.records)


def test_start_queue_runners_uses_the_default_session():
    with kf.Graph().as_default():
        fill, close_src, dst, move = _source_and_target(n=6, capacity=10)
        kf.train.add_queue_runner(kf.train.QueueRunner(dst, [move]))
        size = dst.size()
        with pytest.raises(ValueError, match="No default session"):
            kf.train.start_queue_runners()
        with kf.Session() as sess:
            sess.run([fill, close_src])
            threads = kf.train.start_queue_runners()
            for t in threads:
                t.join(5)
            assert sess.run([size, dst.is_closed()]) == [6, True]


def test_queue_runner_argument_errors():
    with kf.Graph().as_default():
        q = kf.FIFOQueue(2, kf.float32)
        with pytest.raises(ValueError):
            kf.train.QueueRunner(q, [])
        with pytest.raises(TypeError):
            kf.train.QueueRunner(q, [q.enqueue(1.0)], queue_closed_exception_types=(ValueError,))
