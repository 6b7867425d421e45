"""The TF1 input producers, limit_epochs, match_filenames_once and the maybe_*batch* family
(kernflow/core/ops/input_producers.py), with the count_up_to and matching_files ops they use."""

import contextlib
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.ops import input_producers as ip


@pytest.fixture(autouse=True)
def _graph():
    with kf.Graph().as_default() as g:
        yield g


@contextlib.contextmanager
def _running():
    """A session with initialized variables and started queue runners."""
    with kf.Session() as sess:
        sess.run([kf.global_variables_initializer(), kf.local_variables_initializer()])
        coord = kf.train.Coordinator()
        threads = kf.train.start_queue_runners(sess, coord)
        try:
            yield sess
        finally:
            coord.request_stop()
            coord.join(threads)


def _drain(sess, t):
    out = []
    with pytest.raises(kf.errors.OutOfRangeError):
        while True:
            out.append(sess.run(t))
    return out


def test_names_are_exported():
    for n in ip.TRAIN_NAMES:
        assert callable(getattr(ip, n))
    assert ip.__all__ == ["count_up_to", "matching_files"]
    assert kf.count_up_to is ip.count_up_to and kf.matching_files is ip.matching_files


def test_string_input_producer_in_order_for_num_epochs():
    q = ip.string_input_producer(["a", "b", "c"], num_epochs=2, shuffle=False)
    assert q.name == "input_producer"
    assert [v.op.name for v in kf.local_variables()] == ["input_producer/limit_epochs/epochs"]
    assert kf.global_variables() == []
    runners = kf.get_collection(kf.GraphKeys.QUEUE_RUNNERS)
    assert len(runners) == 1 and runners[0].queue is q
    assert q.queue_ref.op.get_attr("capacity") == 32
    name = q.dequeue()
    assert name.dtype == kf.string and name.shape == []
    with _running() as sess:
        assert _drain(sess, name) == [b"a", b"b", b"c"] * 2


def test_string_input_producer_shuffles_each_epoch():
    files = [f"f{i}".encode() for i in range(20)]
    q = ip.string_input_producer(files, num_epochs=3, seed=7, capacity=5)
    assert q.queue_ref.op.get_attr("capacity") == 5
    with _running() as sess:
        got = _drain(sess, q.dequeue())
    epochs = [got[i * 20:(i + 1) * 20] for i in range(3)]
    assert len(got) == 60 and all(sorted(e) == sorted(files) for e in epochs)
    assert any(e != files for e in epochs)


def test_string_input_producer_empty():
    with pytest.raises(ValueError, match="requires a non-null input tensor"):
        ip.string_input_producer([])
    ip.string_input_producer(kf.constant([], dtype=kf.string))
    with kf.Session() as sess:
        sess.run(kf.local_variables_initializer())
        coord = kf.train.Coordinator()
        threads = kf.train.start_queue_runners(sess, coord)
        with pytest.raises(kf.errors.InvalidArgumentError, match="requires a non-null input tensor"):
            coord.join(threads, stop_grace_period_secs=5)


def test_range_input_producer():
    q = ip.range_input_producer(5, num_epochs=1, shuffle=False, name="rip")
    assert q.name == "rip"
    x = q.dequeue()
    assert x.dtype == kf.int32
    with _running() as sess:
        assert _drain(sess, x) == [0, 1, 2, 3, 4]


def test_range_input_producer_shuffled_permutations():
    q = ip.range_input_producer(10, num_epochs=2, seed=3)
    with _running() as sess:
        got = _drain(sess, q.dequeue())
    assert sorted(got[:10]) == list(range(10)) and sorted(got[10:]) == list(range(10))


def test_slice_input_producer_keeps_rows_together():
    a = np.arange(6, dtype=np.int32)
    b = np.arange(12, dtype=np.float32).reshape(6, 2)
    x, y = ip.slice_input_producer([a, b], num_epochs=1, seed=1)
    assert x.shape == [] and y.shape == [2]
    with _running() as sess:
        got = _drain(sess, [x, y])
    assert sorted(int(r[0]) for r in got) == list(range(6))
    for xi, yi in got:
        np.testing.assert_array_equal(yi, b[xi])
    with pytest.raises(ValueError, match="at least one tensor"):
        ip.slice_input_producer([])


def test_input_producer_rows_and_element_shape():
    q = ip.input_producer(np.arange(6, dtype=np.float32).reshape(3, 2), num_epochs=1, shuffle=False)
    row = q.dequeue()
    assert row.shape == [2]
    with pytest.raises(ValueError, match="fully defined shape"):
        ip.input_producer(kf.placeholder(kf.float32, [None, None]))
    p = ip.input_producer(kf.placeholder_with_default(np.ones((2, 3), np.float32), [None, None]),
                          element_shape=[3], shuffle=False)
    assert p.dequeue().shape == [3]
    with _running() as sess:
        np.testing.assert_array_equal(_drain(sess, row), [[0, 1], [2, 3], [4, 5]])


def test_limit_epochs():
    t = kf.constant([1, 2])
    assert ip.limit_epochs(t) is t
    with pytest.raises(ValueError, match="num_epochs must be > 0 not 0"):
        ip.limit_epochs(t, 0)
    e = ip.limit_epochs(t, 2)
    assert e.op.name == "limit_epochs"
    (epochs,) = kf.local_variables()
    assert epochs.op.name == "limit_epochs/epochs" and epochs.dtype.base_dtype == kf.int64
    with kf.Session() as sess:
        sess.run(kf.local_variables_initializer())
        np.testing.assert_array_equal(sess.run(e), [1, 2])
        np.testing.assert_array_equal(sess.run(e), [1, 2])
        with pytest.raises(kf.errors.OutOfRangeError, match="Reached limit of 2"):
            sess.run(e)
        assert sess.run(epochs) == 2


def test_count_up_to():
    v = kf.Variable(3, dtype=kf.int32)
    c = kf.count_up_to(v, 5)
    assert c.dtype == kf.int32 and c.shape == []
    with kf.Session() as sess:
        sess.run(v.initializer)
        assert [sess.run(c), sess.run(c)] == [3, 4]
        with pytest.raises(kf.errors.OutOfRangeError, match="Reached limit of 5"):
            sess.run(c)
        assert sess.run(v) == 5


def test_match_filenames_once_and_matching_files(tmp_path):
    for n in ("b.txt", "a.txt", "c.csv"):
        (tmp_path / n).write_text(n)
    m = ip.match_filenames_once(str(tmp_path / "*.txt"))
    assert m.op.name == "matching_filenames"
    assert kf.local_variables() == [m] and not kf.trainable_variables()
    both = kf.matching_files([str(tmp_path / "*.csv"), str(tmp_path / "a*")])
    none = kf.matching_files(str(tmp_path / "*.zip"))
    with kf.Session() as sess:
        sess.run(kf.local_variables_initializer())
        (tmp_path / "d.txt").write_text("later")  # matched once, at initialization
        want = [str(tmp_path / n).encode() for n in ("a.txt", "b.txt")]
        assert list(sess.run(m)) == want
        assert list(sess.run(both)) == [str(tmp_path / n).encode() for n in ("a.txt", "c.csv")]
        out = sess.run(none)
        assert out.shape == (0,) and out.dtype == object


def test_string_input_producer_over_matched_files(tmp_path):
    for n in ("x1", "x2"):
        (tmp_path / n).write_text(n)
    q = ip.string_input_producer(ip.match_filenames_once(str(tmp_path / "x*")), num_epochs=1, shuffle=False)
    with _running() as sess:
        assert _drain(sess, q.dequeue()) == [str(tmp_path / n).encode() for n in ("x1", "x2")]


# ---------------------------------------------------------------------------- maybe_*batch*
def _evens_source():
    (x,) = ip.slice_input_producer([np.arange(10, dtype=np.int64)], num_epochs=1, shuffle=False)
    return x, kf.equal(kf.math.floormod(x, 2), 0)


def test_maybe_batch_scalar_keep_input():
    x, keep = _evens_source()
    b = ip.maybe_batch([x], keep, batch_size=3, allow_smaller_final_batch=True)
    assert b.op.name.startswith("batch") and b.shape.as_list() == [None]
    with _running() as sess:
        got = _drain(sess, b)
    np.testing.assert_array_equal(np.concatenate(got), [0, 2, 4, 6, 8])
    assert [len(g) for g in got] == [3, 2]


def test_maybe_batch_vector_keep_input_with_enqueue_many():
    vals = kf.constant(np.arange(6, dtype=np.float32))
    keep = kf.constant([True, False, True, True, False, True])
    out = ip.maybe_batch({"v": vals}, keep, batch_size=4, enqueue_many=True)
    assert set(out) == {"v"} and out["v"].shape == [4]
    with _running() as sess:
        np.testing.assert_array_equal(sess.run(out["v"]), [0, 2, 3, 5])


def test_maybe_batch_static_keep_input():
    # A constant keep_input is decided while building (TF's smart_cond): all or nothing is enqueued.
    with kf.Graph().as_default():
        ip.maybe_batch([kf.constant(1.0)], False, 2, name="dropped")
        (qr,) = kf.get_collection(kf.GraphKeys.QUEUE_RUNNERS)
        assert [op.type for op in qr.enqueue_ops] == ["NoOp"]
    x, _ = _evens_source()
    kept = ip.maybe_batch([x], kf.constant(True), 4, allow_smaller_final_batch=True, name="kept")
    assert kept.op.name.startswith("kept")
    assert kf.get_collection(kf.GraphKeys.QUEUE_RUNNERS)[-1].enqueue_ops[0].type == "QueueEnqueueV2"
    with _running() as sess:
        np.testing.assert_array_equal(np.concatenate(_drain(sess, kept)), np.arange(10))


def test_maybe_batch_keep_input_checks():
    x = kf.constant(1.0)
    with pytest.raises(ValueError, match="cannot be a vector when `enqueue_many=False`"):
        ip.maybe_batch([x], kf.constant([True]), 4)
    with pytest.raises(ValueError, match="must be 0 or 1 dimensions"):
        ip.maybe_batch([kf.constant([1.0])], kf.constant([[True]]), 4, enqueue_many=True)
    with pytest.raises(ValueError, match="must be known at graph construction"):
        ip.maybe_batch([x], kf.placeholder(kf.bool), 4)


def _two_lists():
    """Two finite lists of one enqueue_many each (0..7 and 10..17), and keep_input = v < 3."""
    v = kf.constant(np.arange(8, dtype=np.int32))
    return [[ip.limit_epochs(v, 1)], [ip.limit_epochs(v + 10, 1)]], kf.less(v, 3)


def test_maybe_batch_join():
    lists, keep = _two_lists()
    b = ip.maybe_batch_join(lists, keep, batch_size=4, enqueue_many=True, allow_smaller_final_batch=True,
                               name="mbj")
    assert b.op.name.startswith("mbj")
    assert len(kf.get_collection(kf.GraphKeys.QUEUE_RUNNERS)) == 1
    with _running() as sess:
        got = np.concatenate(_drain(sess, b))
    assert sorted(got.tolist()) == [0, 1, 2, 10, 11, 12]


def test_maybe_shuffle_batch_and_join():
    x, keep = _evens_source()
    b = ip.maybe_shuffle_batch([x], 5, capacity=10, min_after_dequeue=0, keep_input=keep, seed=4)
    assert b.shape == [5] and b.op.name.startswith("shuffle_batch")
    with _running() as sess:
        assert sorted(sess.run(b).tolist()) == [0, 2, 4, 6, 8]
    with kf.Graph().as_default():
        lists, keep = _two_lists()
        j = ip.maybe_shuffle_batch_join(lists, 6, capacity=20, min_after_dequeue=0, keep_input=keep,
                                           enqueue_many=True, seed=1)
        assert j.op.name.startswith("shuffle_batch_join")
        with _running() as sess:
            assert sorted(sess.run(j).tolist()) == [0, 1, 2, 10, 11, 12]


def test_string_input_producer_summarizes_how_full_its_queue_is():
    q = kf.train.string_input_producer(["a", "b", "c"], shuffle=False, capacity=4, name="files")
    (summary,) = kf.get_collection(kf.GraphKeys.SUMMARIES)
    assert summary.op.name == "files/fraction_of_4_full"
    with _running() as sess:
        q.dequeue()   # (the runner keeps the queue topped up to its capacity)
        value, deadline = 0.0, time.monotonic() + 10
        while value != 1.0 and time.monotonic() < deadline:   # the runner thread fills it meanwhile
            value = kf.summary.Summary.FromString(sess.run(summary)).value[0].simple_value
            time.sleep(0.001)
        assert value == 1.0
