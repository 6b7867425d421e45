"""`kf.train.batch`, `batch_join`, `shuffle_batch` and `shuffle_batch_join`."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors


def _counter_source(n, name="src"):
    """A closed queue holding 0..n-1 and its dequeue: an input that ends with OutOfRange."""
    src = kf.FIFOQueue(n, kf.int32, shapes=[[]], name=name)
    return src, [src.enqueue_many([np.arange(n, dtype=np.int32)]), src.close()], src.dequeue()


def _drain(sess, fetch):
    """Starts the queue runners, runs `fetch` until OutOfRange, stops and joins the runners."""
    coord = kf.train.Coordinator()
    threads = kf.train.start_queue_runners(sess, coord)
    out = []
    try:
        while True:
            out.append(sess.run(fetch))
    except errors.OutOfRangeError:
        pass
    coord.request_stop()
    coord.join(threads)
    return out


def test_batch_with_smaller_final_batch():
    with kf.Graph().as_default():
        _, fill, x = _counter_source(10)
        sq = x * x
        b, bsq = kf.train.batch([x, sq], batch_size=4, num_threads=2, capacity=8,
                                allow_smaller_final_batch=True)
        assert b.shape.as_list() == [None] and b.op.type == "QueueDequeueUpToV2"
        assert len(kf.get_collection(kf.GraphKeys.QUEUE_RUNNERS)) == 1
        with kf.Session() as sess:
            sess.run(fill)
            batches = _drain(sess, [b, bsq])
        assert [len(v[0]) for v in batches] == [4, 4, 2]
        vals = np.concatenate([v[0] for v in batches])
        assert sorted(vals.tolist()) == list(range(10))
        np.testing.assert_array_equal(np.concatenate([v[1] for v in batches]), vals * vals)


def test_batch_enqueue_many_dict_and_static_shapes():
    with kf.Graph().as_default():
        _, fill, i = _counter_source(6)
        rows = kf.reshape(kf.cast(kf.stack([i, i]), kf.float32), [1, 2])
        out = kf.train.batch({"rows": rows, "ids": kf.reshape(i, [1])}, batch_size=3,
                             enqueue_many=True)
        assert set(out) == {"rows", "ids"}
        assert out["rows"].shape.as_list() == [3, 2] and out["ids"].shape.as_list() == [3]
        with kf.Session() as sess:
            sess.run(fill)
            got = _drain(sess, out)
        assert [g["ids"].tolist() for g in got] == [[0, 1, 2], [3, 4, 5]]
        assert got[1]["rows"].tolist() == [[3, 3], [4, 4], [5, 5]]


def test_batch_dynamic_pad():
    with kf.Graph().as_default():
        _, fill, i = _counter_source(3)
        seq = kf.range(i + 1)  # lengths 1, 2, 3
        (padded,) = [kf.train.batch([seq], batch_size=3, dynamic_pad=True)]
        assert padded.shape.as_list() == [3, None]
        with kf.Session() as sess:
            sess.run(fill)
            threads = kf.train.start_queue_runners(sess)
            assert sess.run(padded).tolist() == [[0, 0, 0], [0, 1, 0], [0, 1, 2]]
            for t in threads:
                t.join(5)


def test_batch_needs_known_shapes():
    with kf.Graph().as_default():
        p = kf.placeholder(kf.float32, None)
        with pytest.raises(ValueError, match="rank"):
            kf.train.batch([p], 2)
        q = kf.placeholder(kf.float32, [None])
        with pytest.raises(ValueError, match="fully defined"):
            kf.train.batch([q], 2)


def test_batch_join_and_shuffle_batch_join_use_every_list():
    with kf.Graph().as_default():
        _, fill_a, a = _counter_source(5, "a")
        _, fill_b, b = _counter_source(5, "b")
        joined = kf.train.batch_join([[a], [b + 100]], batch_size=2, allow_smaller_final_batch=True)
        runners = kf.get_collection(kf.GraphKeys.QUEUE_RUNNERS)
        assert len(runners) == 1 and len(runners[0].enqueue_ops) == 2
        with kf.Session() as sess:
            sess.run(fill_a + fill_b)
            vals = np.concatenate(_drain(sess, joined))
        assert sorted(vals.tolist()) == list(range(5)) + list(range(100, 105))
    with kf.Graph().as_default():
        _, fill_a, a = _counter_source(5, "a")
        _, fill_b, b = _counter_source(5, "b")
        shuffled = kf.train.shuffle_batch_join([[a], [b + 100]], batch_size=5, capacity=20,
                                               min_after_dequeue=2, seed=1,
                                               allow_smaller_final_batch=True)
        with kf.Session() as sess:
            sess.run(fill_a + fill_b)
            vals = np.concatenate(_drain(sess, shuffled))
        assert sorted(vals.tolist()) == list(range(5)) + list(range(100, 105))


def test_shuffle_batch_mixes_and_respects_min_after_dequeue():
    with kf.Graph().as_default():
        _, fill, x = _counter_source(100)
        b = kf.train.shuffle_batch([x], batch_size=10, capacity=60, min_after_dequeue=40,
                                   num_threads=2, seed=4)
        assert b.shape.as_list() == [10] and b.op.type == "QueueDequeueManyV2"
        with kf.Session() as sess:
            sess.run(fill)
            batches = _drain(sess, b)
        vals = np.concatenate(batches)
        assert sorted(vals.tolist()) == list(range(100))
        assert vals.tolist() != list(range(100))
        # The first batch was drawn from a pool of at least 50 elements.
        assert max(batches[0]) >= 10


def _scalar_values(sess, summaries):
    out = {}
    for serialized in sess.run(summaries):
        for v in kf.summary.Summary.FromString(serialized).value:
            out[v.tag] = v.simple_value
    return out


def test_batchers_add_queue_fill_summaries_as_tf1():
    with kf.Graph().as_default():
        src = kf.FIFOQueue(50, kf.int32, shapes=[[]])
        kf.train.batch([src.dequeue()], batch_size=4, capacity=8, name="b")
        kf.train.shuffle_batch([src.dequeue()], batch_size=4, capacity=20, min_after_dequeue=5,
                               name="sb")
        summaries = kf.get_collection(kf.GraphKeys.SUMMARIES)
        assert [s.op.name for s in summaries] == ["b/fraction_of_8_full",
                                                  "sb/fraction_over_5_of_15_full"]
        with kf.Session() as sess:
            sess.run(src.enqueue_many([np.arange(50, dtype=np.int32)]))
            before = _scalar_values(sess, summaries)
            assert before == {"b/fraction_of_8_full": 0.0, "sb/fraction_over_5_of_15_full": 0.0}
            # Fill the batch queue with 6 of 8 and the shuffle queue with 11 (6 above 5 of 15).
            b_enq, sb_enq = [qr.enqueue_ops[0] for qr in kf.get_collection(kf.GraphKeys.QUEUE_RUNNERS)]
            for _ in range(6):
                sess.run(b_enq)
            for _ in range(11):
                sess.run(sb_enq)
            after = _scalar_values(sess, summaries)
            assert after == {"b/fraction_of_8_full": pytest.approx(0.75),
                             "sb/fraction_over_5_of_15_full": pytest.approx(6 / 15)}
