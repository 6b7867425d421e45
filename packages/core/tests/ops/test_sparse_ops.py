"""SparseTensor, sparse_placeholder feeding/fetching and the sparse ops' errors (values and
gradients are in the contract cases, kernflow/core/testing/op_cases/sparse.py)."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors

IND = np.array([[0, 1], [2, 3]], np.int64)
VAL = np.array([1.0, 2.0], np.float32)
SHAPE = np.array([3, 4], np.int64)


def test_sparse_tensor_properties_and_fetch():
    with kf.Graph().as_default() as g:
        sp = kf.SparseTensor(IND, VAL, SHAPE)
        assert sp.dtype == kf.float32 and sp.graph is g
        assert sp.shape.as_list() == [3, 4] and sp.get_shape().as_list() == [3, 4]
        assert sp.indices.dtype == kf.int64 and sp.dense_shape.dtype == kf.int64
        with kf.Session() as sess:
            v = sess.run(sp)
            nested = sess.run({"a": [sp, sp.values]})
            with sess.as_default():
                ev = sp.eval()
    assert isinstance(v, kf.SparseTensorValue)
    np.testing.assert_array_equal(v.indices, IND)
    np.testing.assert_array_equal(ev.values, VAL)
    assert isinstance(nested["a"][0], kf.SparseTensorValue)
    np.testing.assert_array_equal(nested["a"][1], VAL)


def test_sparse_placeholder_feed_value_tuple_and_callable():
    with kf.Graph().as_default():
        sp = kf.sparse_placeholder(kf.float32)
        d = kf.sparse.to_dense(sp)
        expected = np.zeros((3, 4), np.float32)
        expected[0, 1], expected[2, 3] = 1, 2
        with kf.Session() as sess:
            np.testing.assert_array_equal(sess.run(d, {sp: kf.SparseTensorValue(IND, VAL, SHAPE)}),
                                          expected)
            np.testing.assert_array_equal(sess.run(d, {sp: (IND, VAL, SHAPE)}), expected)
            out = sess.run(sp, {sp: (IND, VAL, SHAPE)})
            assert isinstance(out, kf.SparseTensorValue)
            fn = sess.make_callable([d, sp], feed_list=[sp])
            dense, val = fn((IND, VAL, SHAPE))
            np.testing.assert_array_equal(dense, expected)
            np.testing.assert_array_equal(val.dense_shape, SHAPE)
            with pytest.raises(TypeError, match="SparseTensorValue"):
                sess.run(d, {sp: VAL})


def test_sparse_placeholder_with_static_shape():
    with kf.Graph().as_default():
        sp = kf.sparse_placeholder(kf.float64, shape=[3, 4])
        assert sp.shape.as_list() == [3, 4]
        assert kf.sparse.to_dense(sp).shape.as_list() == [3, 4]


def test_convert_to_tensor_or_sparse_tensor():
    with kf.Graph().as_default():
        sp = kf.convert_to_tensor_or_sparse_tensor(kf.SparseTensorValue(IND, VAL, SHAPE))
        assert isinstance(sp, kf.SparseTensor)
        assert isinstance(kf.convert_to_tensor_or_sparse_tensor([1.0]), kf.Tensor)
        with pytest.raises(RuntimeError):
            kf.convert_to_tensor_or_sparse_tensor(sp, dtype=kf.int32)


def _run(t, feed=None):
    with kf.Session() as sess:
        return sess.run(t, feed)


@pytest.mark.parametrize("ind, match", [
    ([[2, 3], [0, 1]], r"SparseToDense.*indices\[1\] = \[0,1\] is out of order"),
    ([[0, 1], [0, 1]], r"indices\[1\] = \[0,1\] is repeated"),
    ([[0, 1], [3, 0]], r"indices\[1\] = \[3,0\] is out of bounds: need 0 <= index < \[3,4\]"),
])
def test_to_dense_index_errors(ind, match):
    with kf.Graph().as_default():
        i = kf.placeholder(kf.int64)
        d = kf.sparse.to_dense(kf.SparseTensor(i, VAL, SHAPE))
        with pytest.raises(errors.InvalidArgumentError, match=match):
            _run(d, {i: np.array(ind, np.int64)})


def test_to_dense_unvalidated_order_is_accepted():
    with kf.Graph().as_default():
        d = kf.sparse.to_dense(kf.SparseTensor([[2, 3], [0, 1]], VAL, SHAPE), validate_indices=False)
        assert _run(d)[2, 3] == 1.0


def test_reorder_then_sparse_add():
    with kf.Graph().as_default():
        a = kf.sparse.reorder(kf.SparseTensor([[2, 3], [0, 1]], VAL, SHAPE))
        s = kf.sparse.add(a, kf.SparseTensor([[0, 1]], [-2.0], SHAPE), threshold=0.5)
        v = _run(s)
    np.testing.assert_array_equal(v.indices, [[2, 3]])
    np.testing.assert_array_equal(v.values, [1.0])


def test_sparse_add_shape_mismatch_and_two_dense():
    with kf.Graph().as_default():
        s = kf.sparse.add(kf.SparseTensor(IND, VAL, SHAPE), kf.SparseTensor(IND, VAL, [3, 5]))
        with pytest.raises(errors.InvalidArgumentError, match="SparseAdd.*a_shape = \\[3, 4\\]"):
            _run(s.values)
        with pytest.raises(TypeError):
            kf.sparse.add([1.0], [2.0])


def test_reshape_errors_and_values():
    with kf.Graph().as_default():
        sp = kf.SparseTensor(IND, VAL, SHAPE)
        with pytest.raises(ValueError, match="12 elements"):
            kf.sparse.reshape(sp, [5, 2])
        shp = kf.placeholder(kf.int64, [2])
        r = kf.sparse.reshape(sp, shp)
        v = _run(r, {shp: [6, 2]})
        np.testing.assert_array_equal(v.indices, [[0, 1], [5, 1]])
        with pytest.raises(errors.InvalidArgumentError, match="SparseReshape"):
            _run(r, {shp: [5, 2]})


def test_matmul_errors():
    with kf.Graph().as_default():
        with pytest.raises(ValueError, match="inner dimension"):
            kf.sparse.sparse_dense_matmul(kf.SparseTensor(IND, VAL, SHAPE), np.ones((3, 2), np.float32))
        b = kf.placeholder(kf.float32)
        p = kf.sparse_tensor_dense_matmul(kf.SparseTensor(IND, VAL, SHAPE), b)
        with pytest.raises(errors.InvalidArgumentError, match="SparseTensorDenseMatMul.*inner"):
            _run(p, {b: np.ones((3, 2), np.float32)})
        assert kf.sparse.tensor_dense_matmul is kf.sparse.matmul


def test_retain_and_fill_empty_rows():
    with kf.Graph().as_default():
        sp = kf.SparseTensor(IND, VAL, SHAPE)
        kept = _run(kf.sparse.retain(sp, [False, True]))
        filled, empty = _run(kf.sparse.fill_empty_rows(sp, -1.0))
    np.testing.assert_array_equal(kept.indices, [[2, 3]])
    np.testing.assert_array_equal(filled.indices, [[0, 1], [1, 0], [2, 3]])
    np.testing.assert_array_equal(filled.values, [1, -1, 2])
    np.testing.assert_array_equal(empty, [False, True, False])


def test_sparse_segment_errors():
    with kf.Graph().as_default():
        d = np.ones((3, 2), np.float32)
        with pytest.raises(errors.InvalidArgumentError, match=r"SparseSegmentSum.*Index 5 out of range"):
            _run(kf.sparse.segment_sum(d, [0, 5], [0, 1]))
        with pytest.raises(errors.InvalidArgumentError, match="not increasing"):
            _run(kf.sparse_segment_mean(d, [0, 1], [1, 0]))
        out = _run(kf.sparse_segment_sqrt_n(d, [0, 1, 2], [0, 0, 2], num_segments=4))
    np.testing.assert_allclose(out[:, 0], [2 / np.sqrt(2), 0, 1, 0])


def test_from_dense_roundtrip():
    with kf.Graph().as_default():
        x = np.array([[0, 3.0], [4.0, 0]], np.float32)
        v = _run(kf.sparse.from_dense(x))
        np.testing.assert_array_equal(v.indices, [[0, 1], [1, 0]])
        np.testing.assert_array_equal(_run(kf.sparse.to_dense(kf.sparse.from_dense(x))), x)
