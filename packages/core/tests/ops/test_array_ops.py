"""Python-level behaviour of the array op wrappers: names, static shapes, errors, indexing."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import tensor_util
from kernflow.core.ops.array_ops_common import strided_slice_plan


@pytest.fixture(autouse=True)
def graph():
    g = kf.Graph()
    with g.as_default():
        yield g


def ph(shape, dtype=kf.float32, name=None):
    return kf.placeholder(dtype, shape, name=name)


def run(fetches, feed=None):
    with kf.Session() as s:
        return s.run(fetches, feed)


# ----------------------------------------------------------------------------- names
def test_default_op_names():
    x = ph([2, 3])
    assert kf.reshape(x, [-1]).op.name == "Reshape"
    assert kf.transpose(x).op.name == "transpose"
    assert kf.concat([x, x], 0).op.name == "concat"
    assert kf.stack([x, x]).op.name == "stack"
    assert kf.unstack(x)[0].op.name == "unstack"
    assert kf.split(x, 3, 1)[0].op.name == "split"
    assert kf.slice(x, [0, 0], [1, 1]).op.name == "Slice"
    assert x[0].op.name == "strided_slice"
    assert x[1].op.name == "strided_slice_1"
    assert kf.strided_slice(x, [0], [1]).op.name == "StridedSlice"
    assert kf.gather(x, [0]).op.name == "GatherV2"
    assert kf.tile(x, [1, 2]).op.name == "Tile"
    assert kf.pad(x, [[0, 1], [0, 0]]).op.name == "Pad"
    assert kf.pad(x, [[0, 1], [0, 0]], constant_values=2).op.type == "PadV2"
    assert kf.pad(x, [[0, 1], [0, 0]], mode="reflect").op.type == "MirrorPad"
    assert kf.one_hot([1], 3).op.name == "one_hot"
    assert kf.range(3).op.name == "range"
    assert kf.reverse(x, [0]).op.name == "ReverseV2"
    assert kf.expand_dims(x, 0).op.name == "ExpandDims"
    assert kf.squeeze(x).op.name == "Squeeze"
    assert kf.fill([2], 1.0).op.name == "Fill"
    assert kf.broadcast_to(x, [2, 2, 3]).op.name == "BroadcastTo"
    assert kf.stop_gradient(x).op.name == "StopGradient"
    assert kf.zeros([2]).op.name == "zeros"
    assert kf.ones([2]).op.name == "ones"
    assert kf.zeros_like(x).op.name == "zeros_like"
    assert kf.ones_like(x).op.name == "ones_like"
    assert kf.reshape(x, [-1], name="flat").op.name == "flat"


def test_shape_size_rank_fold_to_constants_when_known():
    x = ph([2, 3])
    s = kf.shape(x)
    assert s.op.type == "Const" and s.op.name == "Shape" and s.dtype == kf.int32
    assert kf.size(x).op.type == "Const"
    assert kf.rank(x).op.type == "Const"
    y = ph([None, 3])
    assert kf.shape(y).op.type == "Shape"
    assert kf.shape(y, out_type=kf.int64).dtype == kf.int64
    assert kf.size(y).op.type == "Size"
    assert kf.rank(ph(None)).op.type == "Rank"
    assert kf.rank(ph(None)).dtype == kf.int32


# ----------------------------------------------------------------------------- zeros / ones / fill
def test_zeros_ones_const_or_fill():
    z = kf.zeros([2, 3], kf.int32)
    assert z.op.type == "Const" and z.dtype == kf.int32 and z.shape == [2, 3]
    o = kf.ones((2,), kf.bool)
    assert o.op.type == "Const"
    n = kf.placeholder(kf.int32, [2])
    f = kf.zeros(n)
    assert f.op.type == "Fill" and f.shape.rank == 2
    big = kf.ones(kf.TensorShape([100, 100]))
    assert big.op.type == "Fill" and big.shape == [100, 100]
    np.testing.assert_array_equal(run(f, {n: [1, 2]}), np.zeros((1, 2), np.float32))
    assert run(o).dtype == bool


def test_zeros_like_dtype_and_optimize():
    x = ph([None, 2])
    z = kf.zeros_like(x)
    assert z.op.type == "ZerosLike" and z.shape.as_list() == [None, 2]
    zi = kf.zeros_like(x, dtype=kf.int64)
    assert zi.dtype == kf.int64
    o = kf.ones_like(x, dtype=kf.int32)
    assert o.dtype == kf.int32 and o.shape.as_list() == [None, 2]
    r = run([z, zi, o], {x: np.ones((3, 2))})
    assert r[1].dtype == np.int64 and r[1].shape == (3, 2)
    np.testing.assert_array_equal(r[2], np.ones((3, 2), np.int32))
    assert kf.zeros_like(ph([2, 2])).op.type == "Const"
    assert kf.zeros_like(ph([2, 2]), optimize=False).op.type == "ZerosLike"


def test_fill_static_shape_and_errors():
    assert kf.fill([2, 3], 0.5).shape == [2, 3]
    d = kf.placeholder(kf.int32, [2])
    assert kf.fill(d, 1).shape.as_list() == [None, None]
    with pytest.raises(ValueError, match="rank 0"):
        kf.fill([2], [1.0, 2.0])
    f = kf.fill(d, 1)
    with pytest.raises(kf.errors.InvalidArgumentError, match="Fill"):
        run(f, {d: [2, -1]})


# ----------------------------------------------------------------------------- reshape
def test_reshape_static_inference():
    x = ph([2, 3])
    assert kf.reshape(x, [-1, 2]).shape == [3, 2]
    assert kf.reshape(x, [3, -1]).shape == [3, 2]
    assert kf.reshape(ph([None, 6]), [-1, 2, 3]).shape.as_list() == [None, 2, 3]
    assert kf.reshape(ph(None), [2, -1]).shape.as_list() == [2, None]
    with pytest.raises(ValueError, match="Cannot reshape a tensor with 6 elements to shape"):
        kf.reshape(x, [4])
    with pytest.raises(ValueError, match="Reshape"):
        kf.reshape(x, [4, -1])


def test_reshape_shape_from_other_tensor():
    y = ph([None, 4, 5])
    x = ph([None])
    r = kf.reshape(x, kf.shape(y))
    assert r.shape.as_list() == [None, 4, 5]
    r2 = kf.reshape(x, [kf.shape(y)[0], -1])
    assert r2.shape.rank == 2 and r2.op.inputs[1].op.type == "Pack"
    r3 = kf.reshape(ph([3, 20]), [kf.shape(y)[1], -1])
    assert r3.shape == [4, 15]
    r4 = kf.reshape(x, kf.concat([kf.shape(y)[1:], [-1]], 0))
    assert r4.shape.as_list() == [4, 5, None]
    out = run([r2, r4], {x: np.arange(40, dtype=np.float32), y: np.zeros((2, 4, 5))})
    assert out[0].shape == (2, 20) and out[1].shape == (4, 5, 2)


def test_reshape_runtime_error_message():
    x = ph(None)
    r = kf.reshape(x, [2, 2])
    with pytest.raises(kf.errors.InvalidArgumentError,
                       match="Input to reshape is a tensor with 6 values, but the requested shape has 4"):
        run(r, {x: np.zeros(6)})
    r2 = kf.reshape(x, [-1, 4])
    with pytest.raises(kf.errors.InvalidArgumentError, match="requires a multiple of 4"):
        run(r2, {x: np.zeros(6)})
    r3 = kf.reshape(x, [-1, -1])
    with pytest.raises(kf.errors.InvalidArgumentError, match="Only one input size may be -1"):
        run(r3, {x: np.zeros(6)})


# ----------------------------------------------------------------------------- dims
def test_expand_dims_and_squeeze():
    x = ph([2, None])
    assert kf.expand_dims(x, -1).shape.as_list() == [2, None, 1]
    assert kf.expand_dims(x, dim=0).shape.as_list() == [1, 2, None]
    with pytest.raises(ValueError, match="Tried to expand dim index 4"):
        kf.expand_dims(x, 4)
    with pytest.raises(ValueError, match="Must specify an axis"):
        kf.expand_dims(x)
    assert kf.squeeze(ph([1, 3, 1])).shape == [3]
    assert kf.squeeze(ph([1, None, 1])).shape.rank is None
    assert kf.squeeze(ph([1, None, 1]), axis=[0]).shape.as_list() == [None, 1]
    assert kf.squeeze(ph([1, 3, 1]), squeeze_dims=-1).shape == [1, 3]
    assert kf.squeeze(ph([2, 1]), 1).op.get_attr("squeeze_dims") == [1]
    with pytest.raises(ValueError, match="Can not squeeze dim\\[1\\], expected a dimension of 1, got 3"):
        kf.squeeze(ph([1, 3]), axis=[1])
    y = ph([None, None])
    s = kf.squeeze(y, axis=[1])
    with pytest.raises(kf.errors.InvalidArgumentError, match="Can not squeeze dim\\[1\\]"):
        run(s, {y: np.zeros((2, 3))})


def test_transpose_variants():
    x = ph([2, 3, 4])
    assert kf.transpose(x).shape == [4, 3, 2]
    assert kf.transpose(x, [1, 0, 2]).shape == [3, 2, 4]
    with pytest.raises(ValueError, match="Dimension must be 3 but is 2"):
        kf.transpose(x, [1, 0])
    u = ph(None)
    t = kf.transpose(u)
    assert t.shape.rank is None
    v = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(run(t, {u: v}), v.T)
    assert kf.matrix_transpose(x).shape == [2, 4, 3]
    c = kf.constant(np.array([[1 + 2j, 3j]], np.complex64))
    np.testing.assert_array_equal(run(kf.transpose(c, conjugate=True)), np.array([[1 - 2j], [-3j]]))


def test_broadcast_to_shape_and_error():
    assert kf.broadcast_to(ph([3]), [2, 3]).shape == [2, 3]
    assert kf.broadcast_to(ph([3]), kf.placeholder(kf.int32, [2])).shape.as_list() == [None, 3]
    with pytest.raises(ValueError, match="Incompatible shapes"):
        kf.broadcast_to(ph([3]), [2, 4])


# ----------------------------------------------------------------------------- concat / stack / split
def test_concat_shapes_and_errors():
    a, b = ph([2, None]), ph([None, 3])
    single = kf.concat([a], 0)
    assert single.op.type == "Identity" and single.op.name == "concat"
    assert kf.concat([a, b], 0).shape.as_list() == [None, 3]
    assert kf.concat([a, ph([2, 3])], 1).shape.as_list() == [2, None]
    assert kf.concat([ph([2, 1]), ph([2, 3])], -1).shape == [2, 4]
    with pytest.raises(ValueError, match="Dimension 0 in both shapes must be equal"):
        kf.concat([ph([2, 1]), ph([3, 1])], 1)
    with pytest.raises(ValueError, match="Shape must be rank 2 but is rank 1"):
        kf.concat([ph([2, 1]), ph([3])], 0)
    u, v = ph(None), ph(None)
    c = kf.concat([u, v], 1)
    with pytest.raises(kf.errors.InvalidArgumentError, match="ConcatOp"):
        run(c, {u: np.zeros((2, 2)), v: np.zeros((3, 2))})


def test_stack_unstack():
    x = ph([2, 3])
    assert kf.stack([x, x], axis=1).shape == [2, 2, 3]
    assert kf.stack([1, 2, 3]).op.type == "Const"
    with pytest.raises(ValueError, match="axis"):
        kf.stack([x, x], axis=3)
    with pytest.raises(ValueError, match="Dimension 0 in both shapes must be equal"):
        kf.stack([x, ph([3, 3])])
    parts = kf.unstack(x, axis=1)
    assert len(parts) == 3 and parts[0].shape == [2]
    with pytest.raises(ValueError, match="Cannot infer argument `num` from shape"):
        kf.unstack(ph([None, 3]))
    first, second = x  # Tensor.__iter__ uses __getitem__
    assert first.shape == [3]
    out = run([first, second], {x: np.arange(6).reshape(2, 3)})
    np.testing.assert_array_equal(out[1], [3, 4, 5])


def test_split_variants():
    x = ph([6, 4])
    parts = kf.split(x, 3)
    assert [p.shape for p in parts] == [kf.TensorShape([2, 4])] * 3
    assert parts[0].op.get_attr("num_split") == 3
    v = kf.split(x, [1, -1, 2], axis=0)
    assert [p.shape.as_list() for p in v] == [[1, 4], [3, 4], [2, 4]]
    assert v[0].op.type == "SplitV"
    with pytest.raises(ValueError, match="evenly divisible by 3 but is 4"):
        kf.split(x, 3, axis=1)
    with pytest.raises(ValueError, match="Cannot infer argument `num`"):
        kf.split(x, kf.placeholder(kf.int32, [None]))
    u = ph(None)
    s = kf.split(u, 2)
    with pytest.raises(kf.errors.InvalidArgumentError, match="evenly divide"):
        run(s, {u: np.zeros(5)})


# ----------------------------------------------------------------------------- slicing
def test_getitem_static_shapes():
    x = ph([4, None, 5])
    assert x[1].shape.as_list() == [None, 5]
    assert x[1:3].shape.as_list() == [2, None, 5]
    assert x[::-1, :, ::2].shape.as_list() == [4, None, 3]
    assert x[..., kf.newaxis].shape.as_list() == [4, None, 5, 1]
    assert x[None, ..., -1].shape.as_list() == [1, 4, None]
    assert x[:, 0, 1:].shape.as_list() == [4, 4]
    assert x[10:].shape.as_list() == [0, None, 5]
    i = kf.placeholder(kf.int32, [])
    assert x[i].shape.as_list() == [None, 5]
    assert x[i:].shape.as_list() == [None, None, 5]
    assert ph(None)[0].shape.rank is None
    with pytest.raises(ValueError, match="slice index 4 of dimension 0 out of bounds"):
        x[4]
    with pytest.raises(ValueError, match="Index out of range using input dim 3"):
        x[0, 0, 0, 0]
    with pytest.raises(TypeError, match="Only integers, slices"):
        x[1.5]
    with pytest.raises(TypeError, match="Only integers, slices"):
        x[kf.placeholder(kf.float32, [])]


def test_getitem_values_match_numpy():
    v = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    x = ph([3, 4, 5])
    i = kf.placeholder(kf.int32, [])
    specs = [np.s_[1], np.s_[-1, ::-2], np.s_[..., 1:4:2], np.s_[None, :, None, 2], np.s_[1:-1, ..., -3],
             np.s_[::-1, ::-1, ::-1], np.s_[:, 7:], np.s_[-10:10:3]]
    fetch = [x[s] for s in specs] + [x[i, i:], x[:, i]]
    out = run(fetch, {x: v, i: 2})
    for s, got, t in zip(specs, out, fetch):
        np.testing.assert_array_equal(got, v[s])
        assert t.shape.is_compatible_with(got.shape)
    np.testing.assert_array_equal(out[-2], v[2, 2:])
    np.testing.assert_array_equal(out[-1], v[:, 2])


def test_getitem_runtime_out_of_bounds():
    x = ph(None)
    i = kf.placeholder(kf.int32, [])
    y = x[i]
    with pytest.raises(kf.errors.InvalidArgumentError, match="slice index 7 of dimension 0 out of bounds"):
        run(y, {x: np.zeros(3), i: 7})


def test_strided_slice_masks_match_tf_semantics():
    v = np.arange(24).reshape(2, 3, 4)
    cases = [
        (dict(begin=[0, 1], end=[0, 3], strides=[1, 1], begin_mask=1, end_mask=1), v[:, 1:3]),
        (dict(begin=[1, 0], end=[2, 0], strides=[1, 1], shrink_axis_mask=1, ellipsis_mask=2), v[1, ...]),
        (dict(begin=[0, 0, -1], end=[0, 0, 0], strides=[1, 1, 1], new_axis_mask=1, ellipsis_mask=2,
              shrink_axis_mask=4), v[None, ..., -1]),
        (dict(begin=[-1], end=[0], strides=[-1], end_mask=1), v[::-1]),
        (dict(begin=[0, 2], end=[0, 0], strides=[1, -1], begin_mask=3, end_mask=3), v[:, ::-1]),
        (dict(begin=[0, 2], end=[0, 0], strides=[1, -1], begin_mask=1, end_mask=1), v[:, 2:0:-1]),
    ]
    fetch = [kf.strided_slice(kf.constant(v), **kw) for kw, _ in cases]
    for t, got, (_, want) in zip(fetch, run(fetch), cases):
        np.testing.assert_array_equal(got, want)
        assert t.shape == want.shape


def test_strided_slice_plan_errors():
    with pytest.raises(ValueError, match="strides\\[0\\] must be non-zero"):
        strided_slice_plan([3], [0], [1], [0])
    with pytest.raises(ValueError, match="Multiple ellipses"):
        strided_slice_plan([3], [0, 0], [0, 0], [1, 1], ellipsis_mask=3)
    with pytest.raises(ValueError, match="only stride 1 allowed"):
        strided_slice_plan([3], [0], [1], [-1], shrink_axis_mask=1)
    index, dims = strided_slice_plan([None, 4], [None, 1], [None, 3], [1, 1])
    assert dims == [None, 2] and index[1] == slice(1, 3, 1)


def test_slice_shapes_and_errors():
    x = ph([4, None])
    assert kf.slice(x, [1, 0], [-1, 2]).shape.as_list() == [3, 2]
    assert kf.slice(x, [1, 0], [2, -1]).shape.as_list() == [2, None]
    with pytest.raises(ValueError, match="Expected size\\[0\\] in \\[0, 3\\], but got 4"):
        kf.slice(x, [1, 0], [4, 1])
    u = ph(None)
    s = kf.slice(u, [1], [3])
    with pytest.raises(kf.errors.InvalidArgumentError, match="Expected size\\[0\\] in \\[0, 1\\], but got 3"):
        run(s, {u: np.zeros(2)})


# ----------------------------------------------------------------------------- gather & friends
def test_gather_shapes_and_out_of_range():
    p = ph([5, 3])
    assert kf.gather(p, [[0, 1]]).shape == [1, 2, 3]
    assert kf.gather(p, [0, 2], axis=1).shape == [5, 2]
    assert kf.gather(p, kf.placeholder(kf.int32, [None])).shape.as_list() == [None, 3]
    assert kf.gather(ph([2, 4, 3]), kf.placeholder(kf.int64, [2, 7]), batch_dims=1, axis=1).shape == [2, 7, 3]
    assert kf.gather(p, [0], axis=kf.placeholder(kf.int32, [])).shape.rank == 2
    with pytest.raises(ValueError, match="Expected axis in the range"):
        kf.gather(p, [0], axis=2)
    i = kf.placeholder(kf.int32, [None])
    g = kf.gather(p, i)
    with pytest.raises(kf.errors.InvalidArgumentError, match="indices\\[1\\] = 7 is not in \\[0, 5\\)"):
        run(g, {p: np.zeros((5, 3)), i: [0, 7]})


def test_dynamic_partition_and_stitch():
    d = kf.constant([10, 20, 30, 40])
    parts = kf.dynamic_partition(d, [1, 0, 1, 1], 2)
    assert len(parts) == 2 and parts[0].shape.as_list() == [None]
    stitched = kf.dynamic_stitch([[3, 0], [1, 2, 0]], [[1.0, 2.0], [3.0, 4.0, 5.0]])
    assert stitched.shape == [4]
    out = run(parts + [stitched])
    np.testing.assert_array_equal(out[0], [20])
    np.testing.assert_array_equal(out[1], [10, 30, 40])
    np.testing.assert_array_equal(out[2], [5.0, 3.0, 4.0, 1.0])
    p = kf.placeholder(kf.int32, [4])
    bad = kf.dynamic_partition(d, p, 2)
    with pytest.raises(kf.errors.InvalidArgumentError, match="partitions\\[2\\] = 5 is not in \\[0, 2\\)"):
        run(bad, {p: [0, 1, 5, 0]})


def test_boolean_mask():
    x = ph([None, 3])
    m = kf.placeholder(kf.bool, [None])
    y = kf.boolean_mask(x, m)
    assert y.shape.as_list() == [None, 3]
    z = kf.boolean_mask(kf.constant(np.arange(12).reshape(3, 4)), [[True, False, True, False]] * 3, axis=0)
    w = kf.boolean_mask(kf.constant(np.arange(12).reshape(3, 4)), [True, False, False, True], axis=1)
    idx = x[m]
    v = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = run([y, z, w, idx], {x: v, m: [False, True]})
    np.testing.assert_array_equal(out[0], v[[1]])
    np.testing.assert_array_equal(out[1], np.arange(12).reshape(3, 4)[:, [0, 2]].reshape(-1))
    np.testing.assert_array_equal(out[2], np.arange(12).reshape(3, 4)[:, [0, 3]])
    np.testing.assert_array_equal(out[3], v[[1]])
    with pytest.raises(ValueError, match="mask cannot be scalar"):
        kf.boolean_mask(x, True)
    with pytest.raises(ValueError, match="Number of mask dimensions must be specified"):
        kf.boolean_mask(x, kf.placeholder(kf.bool, None))


def test_sequence_mask():
    a = kf.sequence_mask([1, 3, 0], 4)
    b = kf.sequence_mask(kf.constant([[1], [2]]), dtype=kf.float32)
    assert a.shape == [3, 4] and a.dtype == kf.bool
    assert b.dtype == kf.float32 and b.shape.as_list()[:2] == [2, 1]
    ra, rb = run([a, b])
    np.testing.assert_array_equal(ra, np.arange(4) < np.array([1, 3, 0])[:, None])
    np.testing.assert_array_equal(rb, (np.arange(2) < np.array([[1], [2]])[..., None]).astype(np.float32))


# ----------------------------------------------------------------------------- misc ops
def test_tile_pad_reverse_one_hot_shapes():
    x = ph([2, None])
    assert kf.tile(x, [3, 2]).shape.as_list() == [6, None]
    with pytest.raises(ValueError, match="vector of length 2 but got length 1"):
        kf.tile(x, [3])
    assert kf.pad(x, [[1, 2], [0, 1]]).shape.as_list() == [5, None]
    with pytest.raises(ValueError, match="mode"):
        kf.pad(x, [[1, 2], [0, 1]], mode="WRAP")
    assert kf.reverse(x, []).shape.as_list() == [2, None]
    with pytest.raises(ValueError, match="specified more than once"):
        kf.reverse(x, [0, -2])
    assert kf.one_hot(kf.placeholder(kf.int32, [None, 2]), 5, axis=1).shape.as_list() == [None, 5, 2]
    assert kf.one_hot([1, 2], 3, on_value=1, off_value=0).dtype == kf.int32
    with pytest.raises(TypeError, match="does not match dtype"):
        kf.one_hot([1], 2, on_value=1.0, off_value=0)
    y = ph(None)
    mp = kf.pad(y, [[3, 3]], mode="REFLECT")
    with pytest.raises(kf.errors.InvalidArgumentError, match="paddings must be less than the dimension"):
        run(mp, {y: np.zeros(3)})


def test_range_dtype_inference_and_static_shape():
    assert kf.range(5).dtype == kf.int32 and kf.range(5).shape == [5]
    assert kf.range(0, 1, 0.25).dtype == kf.float32
    assert kf.range(0, 1, 0.25).shape == [4]
    assert kf.range(10, 0, -3).shape == [4]
    assert kf.range(3, dtype=kf.int64).dtype == kf.int64
    lim = kf.placeholder(kf.int64, [])
    r = kf.range(lim)
    assert r.dtype == kf.int64 and r.shape.as_list() == [None]
    assert kf.range(kf.constant(2.0, kf.float64), 4).dtype == kf.float64
    with pytest.raises(ValueError, match="Requires delta != 0"):
        kf.range(0, 5, 0)
    with pytest.raises(ValueError, match="Requires start <= limit when delta > 0"):
        kf.range(5, 1)
    out = run([r, kf.range(0, 1, 0.25)], {lim: 3})
    assert out[0].dtype == np.int64 and out[0].tolist() == [0, 1, 2]
    np.testing.assert_allclose(out[1], [0, 0.25, 0.5, 0.75])


def test_constant_value_through_array_ops():
    cv = tensor_util.constant_value
    np.testing.assert_array_equal(cv(kf.fill([2], 3)), [3, 3])
    np.testing.assert_array_equal(cv(kf.range(1, 7, 2)), [1, 3, 5])
    np.testing.assert_array_equal(cv(kf.concat([[1], [2, 3]], 0)), [1, 2, 3])
    np.testing.assert_array_equal(cv(kf.constant([4, 5, 6])[1:]), [5, 6])
    assert cv(kf.shape(ph([2, 7]))[1]) == 7
    np.testing.assert_array_equal(cv(kf.reshape([1, 2, 3, 4], [2, -1])), [[1, 2], [3, 4]])
    assert cv(kf.shape(ph([None, 3]))) is None


def test_autopacking_lists_with_tensors():
    n = kf.placeholder(kf.int32, [])
    t = kf.convert_to_tensor([n, 2])
    assert t.op.type == "Pack" and t.op.name == "packed" and t.dtype == kf.int32
    f = kf.fill([n, 3], 0.0)
    assert f.shape.as_list() == [None, 3]
    assert run(f, {n: 2}).shape == (2, 3)


def test_identity_n_and_shape_n():
    x, y = ph([2]), ph([3], kf.int32)
    a, b = kf.identity_n([x, y])
    assert a.shape == [2] and b.dtype == kf.int32
    z = ph([None, 2])
    s1, s2 = kf.shape_n([x, z])
    assert s2.shape == [2] and s1.op.type == "ShapeN"
    out = run([b, s2], {y: [1, 2, 3], z: np.zeros((4, 2)), x: [0, 0]})
    np.testing.assert_array_equal(out[0], [1, 2, 3])
    np.testing.assert_array_equal(out[1], [4, 2])


def test_gather_nd_scatter_nd_invert_permutation():
    p = ph([3, 4, 5])
    assert kf.gather_nd(p, [[0, 1], [2, 2]]).shape == [2, 5]
    assert kf.gather_nd(p, kf.placeholder(kf.int32, [None, 3])).shape.as_list() == [None]
    with pytest.raises(ValueError, match="indices.shape\\[-1\\] must be <= params.rank"):
        kf.gather_nd(p, [[0, 0, 0, 0]])
    s = kf.scatter_nd([[1], [1], [3]], [1.0, 2.0, 4.0], [5])
    assert s.shape == [5]
    i = kf.placeholder(kf.int32, [None, 2])
    with kf.device("/cpu:0"):   # on a GPU, as in TF, an index out of range gathers zeros instead
        g = kf.gather_nd(p, i)
    inv = kf.invert_permutation([2, 0, 1])
    out = run([s, inv])
    np.testing.assert_array_equal(out[0], [0, 3, 0, 4, 0])
    np.testing.assert_array_equal(out[1], [1, 2, 0])
    with pytest.raises(kf.errors.InvalidArgumentError, match="indices\\[1\\] = \\[3,0\\] does not index"):
        run(g, {p: np.zeros((3, 4, 5)), i: [[0, 0], [3, 0]]})
    x = kf.placeholder(kf.int32, [None])
    with pytest.raises(kf.errors.InvalidArgumentError, match="is not a permutation"):
        run(kf.invert_permutation(x), {x: [0, 0, 1]})


def test_broadcast_gradient_args_values_and_error():
    from kernflow.core.ops import array_ops
    a, b = kf.placeholder(kf.int32, [None]), kf.placeholder(kf.int32, [None])
    r0, r1 = array_ops.broadcast_gradient_args(a, b)
    out = run([r0, r1], {a: [2, 1, 3], b: [3]})
    assert out[0].tolist() == [1] and out[1].tolist() == [0, 1]
    with pytest.raises(kf.errors.InvalidArgumentError, match="Incompatible shapes: \\[2,3\\] vs. \\[4\\]"):
        run(r0, {a: [2, 3], b: [4]})
