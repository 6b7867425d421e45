"""RandomShuffleQueue, PaddingFIFOQueue and PriorityQueue."""

import threading
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors


# ---------------------------------------------------------------------------- RandomShuffleQueue
def _shuffle_order(seed, graph_seed=None, n=20):
    g = kf.Graph()
    with g.as_default():
        if graph_seed is not None:
            kf.set_random_seed(graph_seed)
        q = kf.RandomShuffleQueue(50, 0, kf.int32, shapes=[[]], seed=seed)
        enq = q.enqueue_many([list(range(n))])
        deq = q.dequeue()
        with kf.Session() as sess:
            sess.run(enq)
            return [int(sess.run(deq)) for _ in range(n)]


def test_random_shuffle_queue_is_a_permutation_and_seeded_runs_repeat():
    a = _shuffle_order(seed=7)
    assert sorted(a) == list(range(20)) and a != list(range(20))
    assert _shuffle_order(seed=7) == a
    assert _shuffle_order(seed=8) != a
    assert _shuffle_order(seed=None, graph_seed=3) == _shuffle_order(seed=None, graph_seed=3)


def test_random_shuffle_queue_dequeue_many_is_seeded():
    def run():
        with kf.Graph().as_default():
            q = kf.RandomShuffleQueue(50, 0, [kf.int32, kf.float32], shapes=[[], [2]], seed=1)
            enq = q.enqueue_many([list(range(10)), np.arange(20, dtype=np.float32).reshape(10, 2)])
            a, b = q.dequeue_many(10)
            with kf.Session() as sess:
                sess.run(enq)
                return sess.run([a, b])
    a1, b1 = run()
    a2, b2 = run()
    np.testing.assert_array_equal(a1, a2)
    assert sorted(a1.tolist()) == list(range(10))
    np.testing.assert_array_equal(b1[:, 0], a1 * 2.0)  # the components of an element stay together


def test_random_shuffle_queue_min_after_dequeue():
    with kf.Graph().as_default():
        q = kf.RandomShuffleQueue(10, 3, kf.int32, shapes=[[]], seed=5)
        x = kf.placeholder(kf.int32, [None])
        enq = q.enqueue_many([x])
        deq = q.dequeue()
        deq_many = q.dequeue_many(2)
        size = q.size()
        close = q.close()
        with kf.Session() as sess:
            sess.run(enq, {x: [1, 2, 3]})
            box = []
            t = threading.Thread(target=lambda: box.append(int(sess.run(deq))), daemon=True)
            t.start()
            time.sleep(0.2)
            assert not box  # 3 elements, min_after_dequeue 3: waits
            sess.run(enq, {x: [4]})
            t.join(5)
            assert len(box) == 1 and sess.run(size) == 3
            # dequeue_many(2) needs size >= 2 + min_after_dequeue until the queue closes.
            t = threading.Thread(target=lambda: box.append(sess.run(deq_many)), daemon=True)
            t.start()
            time.sleep(0.2)
            assert len(box) == 1
            sess.run(enq, {x: [5, 6]})
            t.join(5)
            assert len(box) == 2 and box[1].shape == (2,) and sess.run(size) == 3
            # Closed: the rest drains regardless of min_after_dequeue.
            sess.run(close)
            rest = [int(sess.run(deq)) for _ in range(3)]
            assert sorted([box[0]] + box[1].tolist() + rest) == [1, 2, 3, 4, 5, 6]
            with pytest.raises(errors.OutOfRangeError, match="RandomShuffleQueue '.*' is closed"):
                sess.run(deq)


def test_random_shuffle_queue_shared_name_seed2_depends_on_graph_seed_and_name():
    seeds = []
    for _ in range(2):
        with kf.Graph().as_default():
            kf.set_random_seed(11)
            kf.constant(0)  # shifts the op count: seed2 must not depend on it
            q = kf.RandomShuffleQueue(5, 0, kf.int32, shared_name="shared_rsq")
            op = q.queue_ref.op
            seeds.append((op.get_attr("seed"), op.get_attr("seed2")))
            kf.constant(1)
    assert seeds[0] == seeds[1] and seeds[0] != (0, 0)


# ---------------------------------------------------------------------------- PaddingFIFOQueue
def test_padding_fifo_queue_pads_batches_to_the_largest_shape():
    with kf.Graph().as_default():
        q = kf.PaddingFIFOQueue(10, [kf.int32, kf.float32], shapes=[[None], [None, 2]])
        a = kf.placeholder(kf.int32, [None])
        b = kf.placeholder(kf.float32, [None, 2])
        enq = q.enqueue([a, b])
        xa, xb = q.dequeue_many(3)
        assert xa.shape.as_list() == [3, None] and xb.shape.as_list() == [3, None, 2]
        one = q.dequeue()
        b_any = kf.placeholder(kf.float32, None)
        enq_any = q.enqueue([a, b_any])
        with kf.Session() as sess:
            sess.run(enq, {a: [1], b: np.ones((1, 2))})
            sess.run(enq, {a: [1, 2, 3], b: np.ones((2, 2))})
            sess.run(enq, {a: [4, 5], b: np.ones((3, 2))})
            sess.run(enq, {a: [9, 9, 9, 9], b: np.ones((0, 2))})
            va, vb = sess.run([xa, xb])
            np.testing.assert_array_equal(va, [[1, 0, 0], [1, 2, 3], [4, 5, 0]])
            assert vb.shape == (3, 3, 2)
            np.testing.assert_array_equal(vb.sum(axis=(1, 2)), [2.0, 4.0, 6.0])
            va, vb = sess.run(one)  # a single dequeue keeps the element's own shape
            assert va.tolist() == [9, 9, 9, 9] and vb.shape == (0, 2)
            # A shape incompatible with the partial shape is an error naming both.
            with pytest.raises(errors.InvalidArgumentError, match=r"Expected \[\?,2\], got \[2,3\]"):
                sess.run(enq_any, {a: [1], b_any: np.ones((2, 3))})


def test_padding_fifo_queue_pads_strings_and_enqueue_many_batches():
    with kf.Graph().as_default():
        q = kf.PaddingFIFOQueue(10, [kf.string], shapes=[[None]])
        x = kf.placeholder(kf.string, [None, None])
        enq = q.enqueue_many([x])
        out = q.dequeue_many(3)
        with kf.Session() as sess:
            sess.run(enq, {x: np.array([[b"a"], [b"b"]], dtype=object)})
            sess.run(enq, {x: np.array([[b"c", b"d"]], dtype=object)})
            v = sess.run(out)
            assert v.tolist() == [[b"a", b""], [b"b", b""], [b"c", b"d"]]


def test_padding_fifo_queue_needs_shapes():
    with kf.Graph().as_default():
        with pytest.raises(ValueError, match="list of shapes"):
            kf.PaddingFIFOQueue(10, [kf.int32], None)
        with pytest.raises(ValueError, match="rank"):
            kf.PaddingFIFOQueue(10, [kf.int32], shapes=[kf.TensorShape(None)])


# ---------------------------------------------------------------------------- PriorityQueue
def test_priority_queue_pops_smallest_first():
    with kf.Graph().as_default():
        q = kf.PriorityQueue(10, [kf.string], shapes=[[]])
        assert q.dtypes == [kf.int64, kf.string]
        p = kf.placeholder(kf.int64, [None])
        v = kf.placeholder(kf.string, [None])
        enq = q.enqueue_many([p, v])
        enq_one = q.enqueue([kf.constant(3, kf.int64), "three"])
        prio, val = q.dequeue()
        assert prio.shape.as_list() == [] and val.shape.as_list() == []
        ps, vs = q.dequeue_many(3)
        with kf.Session() as sess:
            sess.run(enq, {p: [5, 1, 4], v: np.array([b"five", b"one", b"four"], dtype=object)})
            sess.run(enq_one)
            sess.run(enq, {p: [2, 1], v: np.array([b"two", b"one again"], dtype=object)})
            got = [tuple(sess.run([prio, val])) for _ in range(2)]
            assert got == [(1, b"one"), (1, b"one again")]
            vp, vv = sess.run([ps, vs])
            assert vp.tolist() == [2, 3, 4] and vv.tolist() == [b"two", b"three", b"four"]


def test_priority_queue_priority_must_be_a_scalar():
    with kf.Graph().as_default():
        q = kf.PriorityQueue(10, [kf.float32])
        p = kf.placeholder(kf.int64, None)
        enq = q.enqueue([p, 1.0])
        with kf.Session() as sess:
            with pytest.raises(errors.InvalidArgumentError, match="priority"):
                sess.run(enq, {p: [1, 2]})


# ---------------------------------------------------------------------------- sharing
def test_unshared_queues_are_private_to_each_session_and_shared_ones_are_not():
    with kf.Graph().as_default():
        q = kf.FIFOQueue(5, kf.int32, shapes=[[]])
        shared = kf.FIFOQueue(5, kf.int32, shapes=[[]], shared_name="common")
        enq, size = q.enqueue(1), q.size()
        with kf.Session() as s1, kf.Session() as s2:
            s1.run(enq)
            assert s1.run(size) == 1 and s2.run(size) == 0
        # Embedded sessions have their own devices: only a server shares state between sessions.
        assert shared.queue_ref.op.get_attr("shared_name") == "common"


def test_shared_queue_with_other_attrs_is_an_error():
    with kf.Graph().as_default():
        a = kf.FIFOQueue(5, kf.int32, shapes=[[]], shared_name="s")
        b = kf.FIFOQueue(6, kf.int32, shapes=[[]], shared_name="s")
        c = kf.FIFOQueue(5, kf.float32, shapes=[[]], shared_name="s")
        with kf.Session() as sess:
            sess.run(a.size())
            with pytest.raises(errors.InvalidArgumentError, match="capacity 5 but requested capacity was 6"):
                sess.run(b.size())
            with pytest.raises(errors.InvalidArgumentError, match="component types"):
                sess.run(c.size())


def test_padding_fifo_queue_ignores_empty_enqueue_many_batches():
    with kf.Graph().as_default():
        q = kf.PaddingFIFOQueue(10, [kf.int32], shapes=[[None]])
        x = kf.placeholder(kf.int32, [None, None])
        enq = q.enqueue_many([x])
        out = q.dequeue_many(2)
        with kf.Session() as sess:
            sess.run(enq, {x: np.zeros((0, 5), np.int32)})  # no elements: no effect on padding
            sess.run(enq, {x: [[1], [2]]})
            assert sess.run(out).tolist() == [[1], [2]]
