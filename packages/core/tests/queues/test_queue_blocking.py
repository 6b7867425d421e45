"""Blocked queue ops hold no threads and wake on enqueue, step abort, timeouts and session close."""

import threading
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.testing.processes import have_distributed
from kernflow.core.framework import errors
from kernflow.core.framework.op_def_library import apply_op


def test_a_thousand_blocked_dequeues_hold_no_executor_threads(in_thread):
    config = kf.ConfigProto(inter_op_parallelism_threads=2)
    with kf.Graph().as_default():
        q = kf.FIFOQueue(2000, kf.int32, shapes=[[]])
        deqs = [q.dequeue() for _ in range(1000)]
        enq = q.enqueue_many([np.arange(1000, dtype=np.int32)])
        size = q.size()
        with kf.Session(config=config) as sess:
            sess.run(size)  # starts the session's threads, if any
            before = threading.active_count()
            t, box = in_thread(lambda: sess.run(deqs))
            time.sleep(1.0)
            assert t.is_alive() and not box
            # Only the thread calling run() waits; no executor thread is held per blocked op.
            assert threading.active_count() <= before + 1 + 2
            assert sess.run(size) == 0  # other steps still run
            sess.run(enq)
            t.join(20)
            assert box and box[0][0] == "ok", box
            assert sorted(int(v) for v in box[0][1]) == list(range(1000))
            assert sess.run(size) == 0


def test_closing_the_session_wakes_a_blocked_dequeue_with_cancelled(in_thread):
    with kf.Graph().as_default():
        q = kf.FIFOQueue(10, kf.float32, shapes=[[]])
        deq = q.dequeue()
        sess = kf.Session()
        t, box = in_thread(lambda: sess.run(deq))
        time.sleep(0.3)
        assert t.is_alive()
        closed_at = time.monotonic()
        sess.close()
        t.join(5)
        assert box and box[0][0] == "err", box
        assert isinstance(box[0][1], errors.CancelledError)
        assert box[0][2] - closed_at < 1.0


def test_run_timeout_on_a_blocked_dequeue_and_the_session_stays_usable():
    with kf.Graph().as_default():
        q = kf.FIFOQueue(10, kf.float32, shapes=[[]])
        deq = q.dequeue()
        deq3 = q.dequeue_many(3)
        enq = q.enqueue_many([[1.0, 2.0]])
        size = q.size()
        with kf.Session() as sess:
            t0 = time.monotonic()
            with pytest.raises(errors.DeadlineExceededError):
                sess.run(deq, options=kf.RunOptions(timeout_in_ms=200))
            assert time.monotonic() - t0 < 2.0
            sess.run(enq)
            # A timed-out dequeue_many gives back what it had taken, in order.
            with pytest.raises(errors.DeadlineExceededError):
                sess.run(deq3, options=kf.RunOptions(timeout_in_ms=200))
            assert sess.run(size) == 2
            assert [float(sess.run(deq)) for _ in range(2)] == [1.0, 2.0]


def test_run_timeout_on_a_blocked_enqueue():
    with kf.Graph().as_default():
        q = kf.FIFOQueue(1, kf.int32, shapes=[[]])
        x = kf.placeholder(kf.int32, [])
        enq = q.enqueue(x)
        deq = q.dequeue()
        with kf.Session() as sess:
            sess.run(enq, {x: 1})
            with pytest.raises(errors.DeadlineExceededError):
                sess.run(enq, {x: 2}, options=kf.RunOptions(timeout_in_ms=200))
            assert sess.run(deq) == 1
            sess.run(enq, {x: 3})
            assert sess.run(deq) == 3


def test_operation_timeout_in_config():
    with kf.Graph().as_default():
        q = kf.FIFOQueue(10, kf.float32, shapes=[[]])
        deq = q.dequeue()
        with kf.Session(config=kf.ConfigProto(operation_timeout_in_ms=200)) as sess:
            with pytest.raises(errors.DeadlineExceededError):
                sess.run(deq)


def test_timeout_ms_attr_is_honoured():
    with kf.Graph().as_default():
        q = kf.FIFOQueue(10, kf.float32, shapes=[[]])
        deq = apply_op("QueueDequeueV2", [q.queue_ref], {"component_types": [kf.float32],
                                                         "timeout_ms": 100}).outputs[0]
        enq = q.enqueue(5.0)
        with kf.Session() as sess:
            t0 = time.monotonic()
            with pytest.raises(errors.DeadlineExceededError, match="100 ms"):
                sess.run(deq)
            assert time.monotonic() - t0 < 2.0
            sess.run(enq)
            assert sess.run(deq) == 5.0


def test_a_failing_op_aborts_a_step_blocked_on_a_dequeue():
    with kf.Graph().as_default():
        q = kf.FIFOQueue(10, kf.float32, shapes=[[]])
        deq = q.dequeue()
        p = kf.placeholder(kf.float32, [])
        bad = kf.identity(p)
        size = q.size()
        enq = q.enqueue(1.0)
        with kf.Session() as sess:
            box = []
            t = threading.Thread(target=lambda: box.append(_catch(lambda: sess.run([deq, bad]))),
                                 daemon=True)
            t.start()
            t.join(5)
            assert box and isinstance(box[0], errors.InvalidArgumentError), box
            sess.run(enq)
            assert sess.run(size) == 1  # the aborted dequeue took nothing


def _catch(fn):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001
        return e


def test_many_threads_enqueue_and_dequeue_concurrently():
    with kf.Graph().as_default():
        q = kf.FIFOQueue(5, kf.int32, shapes=[[]])
        x = kf.placeholder(kf.int32, [None])
        enq = q.enqueue_many([x])
        deq = q.dequeue_many(4)
        with kf.Session() as sess:
            got, lock = [], threading.Lock()

            def producer(i):
                for j in range(10):
                    sess.run(enq, {x: np.arange(4) + 100 * i + 4 * j})

            def consumer():
                for _ in range(10):
                    v = sess.run(deq)
                    with lock:
                        got.extend(v.tolist())
            threads = [threading.Thread(target=producer, args=(i,)) for i in range(3)] + \
                      [threading.Thread(target=consumer) for _ in range(3)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            assert not any(t.is_alive() for t in threads)
            want = sorted(v for i in range(3) for j in range(10) for v in (np.arange(4) + 100 * i + 4 * j))
            assert sorted(got) == want



@pytest.mark.skipif(not have_distributed(), reason="kernflow-client/master/worker not installed")
def test_two_sessions_on_one_server_share_a_queue_by_shared_name(in_thread):
    server = kf.train.Server.create_local_server()
    try:
        g = kf.Graph()
        with g.as_default():
            q = kf.FIFOQueue(10, kf.float32, shapes=[[]], shared_name="shared_q")
            private = kf.FIFOQueue(10, kf.float32, shapes=[[]])
            x = kf.placeholder(kf.float32, [])
            enq = q.enqueue(x)
            deq = q.dequeue()
            size = q.size()
            p_enq, p_size = private.enqueue(1.0), private.size()
        with kf.Session(server.target, graph=g) as s1, kf.Session(server.target, graph=g) as s2:
            s1.run(enq, {x: 1.0})
            assert s2.run(size) == 1
            assert s2.run(deq) == 1.0
            # A dequeue blocked in one session wakes on an enqueue from the other.
            t, box = in_thread(lambda: s1.run(deq))
            time.sleep(0.3)
            assert t.is_alive()
            s2.run(enq, {x: 7.0})
            t.join(10)
            assert box == [("ok", 7.0)]
            # Without a shared name, each session has its own queue.
            s1.run(p_enq)
            assert s1.run(p_size) == 1 and s2.run(p_size) == 0
    finally:
        server.stop()


@pytest.mark.skipif(not have_distributed(), reason="kernflow-client/master/worker not installed")
def test_closing_a_server_session_wakes_its_blocked_dequeue(in_thread):
    server = kf.train.Server.create_local_server()
    try:
        g = kf.Graph()
        with g.as_default():
            q = kf.FIFOQueue(10, kf.float32, shapes=[[]], shared_name="close_q")
            deq = q.dequeue()
            enq = q.enqueue(5.0)
            size = q.size()
        sess = kf.Session(server.target, graph=g)
        t, box = in_thread(lambda: sess.run(deq))
        time.sleep(0.5)
        assert t.is_alive()
        closed_at = time.monotonic()
        sess.close()
        t.join(10)
        assert box and box[0][0] == "err", box
        assert isinstance(box[0][1], errors.CancelledError), box
        assert box[0][2] - closed_at < 2.0
        # The cancelled dequeue took nothing: a later enqueue stays in the shared queue.
        with kf.Session(server.target, graph=g) as s2:
            s2.run(enq)
            assert s2.run(size) == 1
    finally:
        server.stop()
