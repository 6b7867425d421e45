"""`kf.FIFOQueue`: ops, static shapes, blocking both ways, close semantics and errors."""

import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors


def test_python_api_names_shapes_and_ops():
    g = kf.Graph()
    with g.as_default():
        q = kf.FIFOQueue(10, [kf.float32, kf.int32], shapes=[[2], []], name="q")
        assert isinstance(q, kf.QueueBase)
        assert q.name == "q" and q.queue_ref.op.type == "FIFOQueueV2"
        assert q.queue_ref.dtype == kf.resource
        assert q.dtypes == [kf.float32, kf.int32]
        assert [s.as_list() for s in q.shapes] == [[2], []]
        assert q.names is None
        x, y = q.dequeue()
        assert x.shape.as_list() == [2] and y.shape.as_list() == []
        xs, ys = q.dequeue_many(4)
        assert xs.shape.as_list() == [4, 2] and ys.shape.as_list() == [4]
        ux, uy = q.dequeue_up_to(4)
        assert ux.shape.as_list() == [None, 2] and uy.shape.as_list() == [None]
        assert q.size().dtype == kf.int32 and q.is_closed().dtype == kf.bool
        enq = q.enqueue([[1.0, 2.0], 3])
        assert enq.type == "QueueEnqueueV2" and enq.name == "q_enqueue"
        assert q.close().get_attr("cancel_pending_enqueues") is False
        assert q.close(cancel_pending_enqueues=True).get_attr("cancel_pending_enqueues") is True
        op = g.get_operation_by_name("q")
        assert op.get_attr("capacity") == 10 and op.get_attr("shared_name") == ""
        # Every op of the queue is colocated with it.
        for o in (enq, x.op, xs.op, q.size().op):
            assert o.colocation_groups() == [b"loc:@q"] or o.colocation_groups() == ["loc:@q"]
        # One component: dequeue gives a tensor, not a list.
        q1 = kf.FIFOQueue(3, kf.float32, shapes=[[]])
        assert isinstance(q1.dequeue(), kf.Tensor)


def test_static_shape_errors_at_graph_construction():
    with kf.Graph().as_default():
        q = kf.FIFOQueue(10, [kf.float32], shapes=[[2]])
        with pytest.raises(ValueError, match="incompatible"):
            q.enqueue([[1.0, 2.0, 3.0]])
        with pytest.raises(ValueError, match="incompatible"):
            q.enqueue_many([[[1.0, 2.0, 3.0]]])
        with pytest.raises(ValueError, match="fully defined"):
            kf.FIFOQueue(10, [kf.float32], shapes=[[None]])
        with pytest.raises(ValueError, match="same length"):
            kf.FIFOQueue(10, [kf.float32, kf.int32], shapes=[[2]])
        with pytest.raises(ValueError, match="capacity"):
            kf.FIFOQueue(0, [kf.float32])


def test_enqueue_dequeue_in_order():
    with kf.Graph().as_default():
        q = kf.FIFOQueue(10, kf.float32, shapes=[[]])
        x = kf.placeholder(kf.float32, [])
        enq = q.enqueue(x)
        deq = q.dequeue()
        size = q.size()
        with kf.Session() as sess:
            for v in (1.0, 2.0, 3.0):
                sess.run(enq, {x: v})
            assert sess.run(size) == 3
            assert [float(sess.run(deq)) for _ in range(3)] == [1.0, 2.0, 3.0]
            assert sess.run(size) == 0


def test_enqueue_many_dequeue_many_and_up_to():
    with kf.Graph().as_default():
        q = kf.FIFOQueue(10, [kf.int32, kf.float32], shapes=[[], [2]])
        a = kf.placeholder(kf.int32, [None])
        b = kf.placeholder(kf.float32, [None, 2])
        enq = q.enqueue_many([a, b])
        ia, fb = q.dequeue_many(3)
        ua, ub = q.dequeue_up_to(4)
        one = q.dequeue()
        with kf.Session() as sess:
            sess.run(enq, {a: np.arange(5), b: np.arange(10).reshape(5, 2)})
            va, vb = sess.run([ia, fb])
            np.testing.assert_array_equal(va, [0, 1, 2])
            np.testing.assert_array_equal(vb, [[0, 1], [2, 3], [4, 5]])
            va, vb = sess.run(one)
            assert va == 3 and vb.tolist() == [6.0, 7.0]
            sess.run(enq, {a: [5, 6, 7], b: np.zeros((3, 2))})
            va, vb = sess.run([ua, ub])  # not closed: waits for 4, spanning two enqueue_many batches
            np.testing.assert_array_equal(va, [4, 5, 6, 7])
            assert vb.shape == (4, 2)
            # An empty enqueue_many and a dequeue_many(0) complete at once.
            sess.run(enq, {a: np.zeros(0, np.int32), b: np.zeros((0, 2))})
            za, zb = sess.run(q.dequeue_many(0))
            assert za.shape == (0,) and zb.shape == (0, 2)


def test_dequeue_blocks_until_another_thread_enqueues(in_thread):
    with kf.Graph().as_default():
        q = kf.FIFOQueue(10, kf.float32, shapes=[[]])
        deq = q.dequeue()
        enq = q.enqueue(42.0)
        with kf.Session() as sess:
            t, box = in_thread(lambda: sess.run(deq))
            time.sleep(0.2)
            assert t.is_alive() and not box
            sess.run(enq)
            t.join(5)
            assert box == [("ok", 42.0)]


def test_enqueue_blocks_while_full_until_a_dequeue(in_thread):
    with kf.Graph().as_default():
        q = kf.FIFOQueue(2, kf.int32, shapes=[[]])
        x = kf.placeholder(kf.int32, [])
        enq = q.enqueue(x)
        deq = q.dequeue()
        size = q.size()
        with kf.Session() as sess:
            sess.run(enq, {x: 1})
            sess.run(enq, {x: 2})
            t, box = in_thread(lambda: sess.run(enq, {x: 3}))
            time.sleep(0.2)
            assert t.is_alive() and not box and sess.run(size) == 2
            assert sess.run(deq) == 1
            t.join(5)
            assert box == [("ok", None)]
            assert [sess.run(deq) for _ in range(2)] == [2, 3]


def test_enqueue_many_larger_than_capacity_enters_as_room_appears(in_thread):
    with kf.Graph().as_default():
        q = kf.FIFOQueue(3, kf.int32, shapes=[[]])
        enq = q.enqueue_many([list(range(8))])
        deq2 = q.dequeue_many(2)
        with kf.Session() as sess:
            t, box = in_thread(lambda: sess.run(enq))
            got = []
            for _ in range(4):
                got.extend(sess.run(deq2).tolist())
            t.join(5)
            assert box == [("ok", None)] and got == list(range(8))


def test_dequeue_many_larger_than_capacity(in_thread):
    with kf.Graph().as_default():
        q = kf.FIFOQueue(2, kf.int32, shapes=[[]])
        x = kf.placeholder(kf.int32, [])
        enq = q.enqueue(x)
        deq = q.dequeue_many(5)
        with kf.Session() as sess:
            t, box = in_thread(lambda: sess.run(deq))
            for i in range(5):
                sess.run(enq, {x: i})
            t.join(5)
            assert box[0][0] == "ok" and box[0][1].tolist() == [0, 1, 2, 3, 4]


def test_close_semantics():
    with kf.Graph().as_default():
        q = kf.FIFOQueue(10, kf.float32, shapes=[[]], name="fifo_queue")
        enq = q.enqueue_many([[1.0, 2.0, 3.0, 4.0]])
        deq = q.dequeue()
        deq5 = q.dequeue_many(5)
        up_to5 = q.dequeue_up_to(5)
        close = q.close()
        is_closed = q.is_closed()
        size = q.size()
        with kf.Session() as sess:
            sess.run(enq)
            assert not sess.run(is_closed)
            sess.run(close)
            assert sess.run(is_closed)
            with pytest.raises(errors.CancelledError, match="FIFOQueue '.*fifo_queue' is closed"):
                sess.run(enq)
            with pytest.raises(errors.CancelledError, match="already closed"):
                sess.run(close)
            sess.run(q.close(cancel_pending_enqueues=True))  # closing and cancelling again is fine
            assert sess.run(deq) == 1.0
            # dequeue_many fails, naming the numbers, and leaves the elements in the queue.
            with pytest.raises(errors.OutOfRangeError,
                               match=r"FIFOQueue '_\d+_fifo_queue' is closed and has insufficient "
                                     r"elements \(requested 5, current size 3\)") as ei:
                sess.run(deq5)
            assert "fifo_queue_DequeueMany" in str(ei.value)
            assert sess.run(size) == 3
            np.testing.assert_array_equal(sess.run(up_to5), [2.0, 3.0, 4.0])
            with pytest.raises(errors.OutOfRangeError, match="requested 5, current size 0"):
                sess.run(up_to5)
            with pytest.raises(errors.OutOfRangeError, match="requested 1, current size 0"):
                sess.run(deq)


def test_close_wakes_pending_dequeues(in_thread):
    with kf.Graph().as_default():
        q = kf.FIFOQueue(10, kf.float32, shapes=[[]])
        enq = q.enqueue_many([[1.0, 2.0]])
        deq3 = q.dequeue_many(3)
        up_to3 = q.dequeue_up_to(3)
        close = q.close()
        with kf.Session() as sess:
            sess.run(enq)
            t1, box1 = in_thread(lambda: sess.run(deq3))
            time.sleep(0.2)
            t2, box2 = in_thread(lambda: sess.run(up_to3))
            time.sleep(0.2)
            assert not box1 and not box2
            sess.run(close)
            t1.join(5)
            t2.join(5)
            # The dequeue_many ahead in line fails and gives its two elements back; the
            # dequeue_up_to behind it returns them.
            assert box1[0][0] == "err" and isinstance(box1[0][1], errors.OutOfRangeError)
            assert box2[0][0] == "ok" and box2[0][1].tolist() == [1.0, 2.0]


def test_close_waits_behind_pending_enqueues_which_still_complete(in_thread):
    with kf.Graph().as_default():
        q = kf.FIFOQueue(1, kf.int32, shapes=[[]])
        enq = q.enqueue_many([[1, 2]])
        deq = q.dequeue()
        close = q.close()
        with kf.Session() as sess:
            te, boxe = in_thread(lambda: sess.run(enq))
            time.sleep(0.2)
            tc, boxc = in_thread(lambda: sess.run(close))
            time.sleep(0.2)
            assert not boxe and not boxc  # the close waits behind the blocked enqueue
            assert sess.run(deq) == 1
            te.join(5)
            tc.join(5)
            assert boxe == [("ok", None)] and boxc == [("ok", None)]
            assert sess.run(deq) == 2
            with pytest.raises(errors.OutOfRangeError):
                sess.run(deq)


def test_close_cancel_pending_enqueues(in_thread):
    with kf.Graph().as_default():
        q = kf.FIFOQueue(1, kf.int32, shapes=[[]])
        x = kf.placeholder(kf.int32, [])
        enq = q.enqueue(x)
        deq = q.dequeue()
        cancel = q.close(cancel_pending_enqueues=True)
        with kf.Session() as sess:
            sess.run(enq, {x: 1})
            t, box = in_thread(lambda: sess.run(enq, {x: 2}))
            time.sleep(0.2)
            assert not box
            sess.run(cancel)
            t.join(5)
            assert box[0][0] == "err" and isinstance(box[0][1], errors.CancelledError)
            assert "cancelled" in str(box[0][1])
            assert sess.run(deq) == 1  # what was already in stays
            with pytest.raises(errors.OutOfRangeError):
                sess.run(deq)


def test_runtime_shape_and_dtype_errors_name_the_op():
    with kf.Graph().as_default():
        q = kf.FIFOQueue(10, [kf.float32], shapes=[[2]], name="sq")
        x = kf.placeholder(kf.float32, None)
        enq = q.enqueue(x, name="my_enqueue")
        enq_many = q.enqueue_many(x, name="my_enqueue_many")
        with kf.Session() as sess:
            with pytest.raises(errors.InvalidArgumentError,
                               match=r"(?s)Expected \[2\], got \[3\].*my_enqueue"):
                sess.run(enq, {x: np.zeros(3, np.float32)})
            with pytest.raises(errors.InvalidArgumentError,
                               match=r"(?s)Expected \[4,2\], got \[4,3\].*my_enqueue_many"):
                sess.run(enq_many, {x: np.zeros((4, 3), np.float32)})
            with pytest.raises(errors.InvalidArgumentError, match="batch dimension"):
                sess.run(enq_many, {x: np.float32(1.0)})
        # Ops built by hand with the wrong component types fail at run time, naming both.
        from kernflow.core.framework.op_def_library import apply_op
        bad = apply_op("QueueEnqueueV2", [q.queue_ref, [kf.constant([1, 2])]], name="bad_enqueue")
        bad_deq = apply_op("QueueDequeueV2", [q.queue_ref], {"component_types": [kf.int64]},
                           name="bad_dequeue").outputs[0]
        with kf.Session() as sess:
            with pytest.raises(errors.InvalidArgumentError,
                               match=r"(?s)\[int32\].*holds \[float32\].*bad_enqueue"):
                sess.run(bad)
            with pytest.raises(errors.InvalidArgumentError, match=r"(?s)\[int64\].*bad_dequeue"):
                sess.run(bad_deq)


def test_dequeue_many_needs_shapes():
    with kf.Graph().as_default():
        q = kf.FIFOQueue(10, kf.float32)
        enq = q.enqueue_many([[1.0, 2.0]])
        deq2 = q.dequeue_many(2)
        deq = q.dequeue()
        assert deq2.shape.rank is None
        with kf.Session() as sess:
            sess.run(enq)
            with pytest.raises(errors.InvalidArgumentError, match="require the components to have "
                                                                   "specified shapes"):
                sess.run(deq2)
            assert sess.run(deq) == 1.0
            # Without shapes, elements may have any shape.
            sess.run(q.enqueue([[1.0, 2.0, 3.0]]))
            assert sess.run(deq) == 2.0
            assert sess.run(deq).tolist() == [1.0, 2.0, 3.0]


def test_names_give_dicts():
    with kf.Graph().as_default():
        q = kf.FIFOQueue(5, [kf.int32, kf.float32], shapes=[[], [2]], names=["label", "x"])
        assert q.names == ["label", "x"]
        enq = q.enqueue({"x": [1.0, 2.0], "label": 7})
        out = q.dequeue()
        assert set(out) == {"label", "x"} and out["x"].shape.as_list() == [2]
        with pytest.raises(ValueError, match="dictionary"):
            q.enqueue([7, [1.0, 2.0]])
        with pytest.raises(ValueError, match="do not match"):
            q.enqueue({"label": 7})
        many = q.dequeue_many(1)
        assert many["label"].shape.as_list() == [1]
        with kf.Session() as sess:
            sess.run(enq)
            v = sess.run(out)
            assert v["label"] == 7 and v["x"].tolist() == [1.0, 2.0]


def test_enqueued_values_are_copied():
    with kf.Graph().as_default():
        q = kf.FIFOQueue(5, kf.float32, shapes=[[3]])
        x = kf.placeholder(kf.float32, [3])
        enq = q.enqueue(x)
        deq = q.dequeue()
        with kf.Session() as sess:
            arr = np.ones(3, np.float32)
            sess.run(enq, {x: arr})
            arr[:] = 5.0
            assert sess.run(deq).tolist() == [1.0, 1.0, 1.0]


def test_string_and_bool_components():
    with kf.Graph().as_default():
        q = kf.FIFOQueue(5, [kf.string, kf.bool], shapes=[[], []])
        enq = q.enqueue_many([["a", "bc"], [True, False]])
        s, b = q.dequeue_many(2)
        with kf.Session() as sess:
            sess.run(enq)
            vs, vb = sess.run([s, b])
            assert list(vs) == [b"a", b"bc"] and vb.tolist() == [True, False]


def test_queue_ops_have_no_gradient():
    with kf.Graph().as_default():
        q = kf.FIFOQueue(5, kf.float32, shapes=[[]])
        x = kf.constant(1.0)
        with kf.control_dependencies([q.enqueue(x)]):
            y = q.dequeue() * 2.0
        assert kf.gradients(y, [x]) == [None]


def test_reset_destroys_the_queue_and_wakes_waiters():
    with kf.Graph().as_default():
        q = kf.FIFOQueue(5, kf.float32, shapes=[[]])
        enq = q.enqueue(1.0)
        size = q.size()
        with kf.Session() as sess:
            sess.run(enq)
            assert sess.run(size) == 1
            sess._impl.reset()
            assert sess.run(size) == 0  # a fresh queue after the container reset
