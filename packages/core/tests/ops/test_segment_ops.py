"""Python-level behaviour of the segment op wrappers: names, static shapes, runtime errors."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors

_SORTED = ["segment_sum", "segment_mean", "segment_max", "segment_min", "segment_prod"]
_UNSORTED = ["unsorted_segment_sum", "unsorted_segment_max", "unsorted_segment_min",
             "unsorted_segment_prod"]


def _op_type(fn_name):
    return "".join(w.capitalize() for w in fn_name.split("_"))


@pytest.mark.parametrize("fn", _SORTED)
def test_sorted_names_and_types(fn):
    with kf.Graph().as_default():
        d = kf.placeholder(kf.float32, [4, 3])
        ids = kf.placeholder(kf.int64, [4])
        out = getattr(kf, fn)(d, ids)
        named = getattr(kf, fn)(d, ids, name="seg")
    assert out.op.type == _op_type(fn) and out.op.name == _op_type(fn)
    assert named.op.name == "seg"
    assert out.dtype == kf.float32
    assert out.op.get_attr("Tindices") == kf.int64


@pytest.mark.parametrize("fn", _UNSORTED)
def test_unsorted_names_and_types(fn):
    with kf.Graph().as_default():
        d = kf.placeholder(kf.int32, [4, 3])
        out = getattr(kf, fn)(d, [0, 1, 1, 0], 2)
    assert out.op.type == _op_type(fn) and out.op.name == _op_type(fn)
    assert out.dtype == kf.int32
    assert out.op.get_attr("Tnumsegments") == kf.int32
    assert out.shape.as_list() == [2, 3]


def test_sorted_static_shapes():
    with kf.Graph().as_default():
        d = kf.placeholder(kf.float32, [None, 3, 2])
        assert kf.segment_sum(d, kf.placeholder(kf.int32, [None])).shape.as_list() == [None, 3, 2]
        assert kf.segment_max(d, [0, 0, 3]).shape.as_list() == [4, 3, 2]
        assert kf.segment_mean(d, np.array([], np.int32)).shape.as_list() == [0, 3, 2]
        # Constant ids that would fail at run time leave the dim unknown.
        assert kf.segment_sum(d, [1, 0]).shape.as_list() == [None, 3, 2]
        assert kf.segment_prod(kf.placeholder(kf.float32), [0, 1]).shape.rank is None


def test_sorted_static_shape_errors():
    with kf.Graph().as_default():
        with pytest.raises(ValueError, match="same size as dimension 0"):
            kf.segment_sum(kf.placeholder(kf.float32, [4, 2]), kf.placeholder(kf.int32, [3]))
        with pytest.raises(ValueError, match="rank 1"):
            kf.segment_sum(kf.placeholder(kf.float32, [4, 2]), kf.placeholder(kf.int32, [4, 1]))
        with pytest.raises(ValueError, match="rank at least 1"):
            kf.segment_sum(kf.placeholder(kf.float32, []), kf.placeholder(kf.int32, [None]))


def test_unsorted_static_shapes():
    with kf.Graph().as_default():
        d = kf.placeholder(kf.float32, [2, 3, 4])
        assert kf.unsorted_segment_sum(d, kf.placeholder(kf.int32, [2, 3]), 5).shape.as_list() == [5, 4]
        assert kf.unsorted_segment_max(d, kf.placeholder(kf.int32, [2]), 5).shape.as_list() == [5, 3, 4]
        n = kf.placeholder(kf.int64, [])
        out = kf.unsorted_segment_min(d, kf.placeholder(kf.int32, [None]), n)
        assert out.shape.as_list() == [None, 3, 4] and out.op.get_attr("Tnumsegments") == kf.int64
        assert kf.unsorted_segment_prod(d, kf.placeholder(kf.int32), 3).shape.rank is None


def test_unsorted_static_shape_errors():
    with kf.Graph().as_default():
        d = kf.placeholder(kf.float32, [2, 3])
        with pytest.raises(ValueError, match="prefix"):
            kf.unsorted_segment_sum(d, kf.placeholder(kf.int32, [3]), 4)
        with pytest.raises(ValueError, match="prefix"):
            kf.unsorted_segment_sum(d, kf.placeholder(kf.int32, [2, 3, 1]), 4)
        with pytest.raises(ValueError, match="scalar"):
            kf.unsorted_segment_sum(d, kf.placeholder(kf.int32, [2]), [4])
        with pytest.raises(ValueError, match="non-negative"):
            kf.unsorted_segment_sum(d, kf.placeholder(kf.int32, [2]), -1)


def test_bad_dtypes():
    with kf.Graph().as_default():
        with pytest.raises(TypeError):
            kf.segment_sum([1.0, 2.0], kf.constant([0.0, 1.0]))
        with pytest.raises(TypeError):
            kf.segment_max(kf.constant([1j, 2j]), [0, 1])
        with pytest.raises(TypeError):
            kf.unsorted_segment_min(kf.constant([1j]), [0], 1)


def test_values_and_fills():
    data = np.array([[1, 2], [3, 4], [5, 6], [7, 8]], np.float32)
    with kf.Graph().as_default() as g:
        outs = [kf.segment_sum(data, [0, 0, 2, 2]), kf.segment_prod(data, [1, 1, 1, 3]),
                kf.segment_max(-data, [1, 1, 2, 2]), kf.unsorted_segment_max(data, [3, -1, 3, 0], 5),
                kf.unsorted_segment_min(data, [0, 0, 0, 0], 2),
                kf.unsorted_segment_prod(data, [1, 1, -1, 1], 3)]
    with kf.Session(graph=g) as sess:
        s, p, mx, umax, umin, uprod = sess.run(outs)
    np.testing.assert_array_equal(s, [[4, 6], [0, 0], [12, 14]])
    np.testing.assert_array_equal(p, [[1, 1], [15, 48], [1, 1], [7, 8]])
    np.testing.assert_array_equal(mx, [[0, 0], [-1, -2], [-5, -6]])
    low = np.finfo(np.float32).min
    np.testing.assert_array_equal(umax, [[7, 8], [low, low], [low, low], [5, 6], [low, low]])
    np.testing.assert_array_equal(umin[1], [np.finfo(np.float32).max] * 2)
    np.testing.assert_array_equal(uprod, [[1, 1], [21, 64], [1, 1]])


def test_integer_mean_truncates_toward_zero():
    with kf.Graph().as_default() as g:
        m = kf.segment_mean(np.array([-3, 0, 7, 0, 5], np.int32), [0, 0, 1, 1, 2])
    with kf.Session(graph=g) as sess:
        v = sess.run(m)
    assert v.dtype == np.int32
    np.testing.assert_array_equal(v, [-1, 3, 5])


def _fed(fn, data, ids, *extra):
    with kf.Graph().as_default() as g:
        d = kf.placeholder(kf.as_dtype(np.asarray(data).dtype))
        i = kf.placeholder(kf.as_dtype(np.asarray(ids).dtype))
        out = fn(d, i, *extra, name="seg")
    with kf.Session(graph=g) as sess:
        return sess.run(out, {d: data, i: ids})


@pytest.mark.parametrize("fn", _SORTED)
def test_sorted_runtime_errors(fn):
    f = getattr(kf, fn)
    data = np.ones((4, 2), np.float32)
    with pytest.raises(errors.InvalidArgumentError, match=r"seg.*segment ids are not increasing"):
        _fed(f, data, np.array([0, 2, 1, 3], np.int32))
    with pytest.raises(errors.InvalidArgumentError, match=r"seg.*same size as dimension 0"):
        _fed(f, data, np.array([0, 1, 1], np.int32))
    with pytest.raises(errors.InvalidArgumentError, match=r"seg.*should be a vector"):
        _fed(f, data, np.zeros((4, 1), np.int32))
    with pytest.raises(errors.InvalidArgumentError, match=r"seg.*Segment id -1 out of range"):
        _fed(f, data, np.array([-1, 0, 0, 1], np.int64))


@pytest.mark.parametrize("fn", _UNSORTED)
def test_unsorted_runtime_errors(fn):
    f = getattr(kf, fn)
    data = np.ones((2, 3), np.float64)
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"seg.*segment_ids\[1,2\] = 4 is out of range \[0, 4\)"):
        _fed(f, data, np.array([[0, 1, 2], [3, 0, 4]], np.int32), 4)
    with pytest.raises(errors.InvalidArgumentError, match=r"seg.*does not start with"):
        _fed(f, data, np.array([0, 1, 2], np.int32), 4)


def test_negative_unsorted_ids_are_dropped():
    out = _fed(kf.unsorted_segment_sum, np.array([1.0, 2.0, 4.0]), np.array([-1, 1, -5]), 2)
    np.testing.assert_array_equal(out, [0.0, 2.0])


def test_large_inputs_are_vectorized():
    rng = np.random.RandomState(0)
    data = rng.rand(200_000, 8).astype(np.float32)
    ids = np.sort(rng.randint(0, 5000, 200_000)).astype(np.int32)
    with kf.Graph().as_default() as g:
        s = kf.segment_sum(data, ids)
        perm = rng.permutation(len(ids))
        u = kf.unsorted_segment_sum(data[perm], ids[perm], 5000)
    with kf.Session(graph=g) as sess:
        vs, vu = sess.run([s, u])
    ref = np.zeros((ids[-1] + 1, 8))
    np.add.at(ref, ids, data.astype(np.float64))
    np.testing.assert_allclose(vs, ref, rtol=1e-4)
    np.testing.assert_allclose(vu[: ids[-1] + 1], ref, rtol=1e-4)
