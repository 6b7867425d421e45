"""Contract cases of the array ops (kernflow.core.ops.array_ops and its array_ops_* modules)."""

import numpy as np

import kernflow.core as kf
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.ops import array_ops, array_ops_shape
from kernflow.core.testing.kernel_contract import OpCase

_r = np.random.RandomState(7)
_f32 = _r.randn(2, 3).astype(np.float32)
_f64 = _r.randn(2, 3).astype(np.float64)
_f64_3d = _r.randn(2, 3, 4)
_i32 = _r.randint(-5, 5, size=(2, 3)).astype(np.int32)
_i64 = _r.randint(-5, 5, size=(3, 2)).astype(np.int64)
_bool = _r.rand(2, 3) > 0.5
_c64 = (_r.randn(2, 3) + 1j * _r.randn(2, 3)).astype(np.complex64)
_empty = np.zeros((0, 3), np.float32)


def _shape_op(x, out_type=kf.int32):
    return array_ops_shape._shape_internal(x, optimize=False, out_type=out_type)


def _onehot_ref(indices, depth, on=1.0, off=0.0, axis=-1, dtype=np.float32):
    hot = np.asarray(indices)[..., None] == np.arange(depth)
    out = np.where(hot, on, off).astype(dtype)
    return out if axis == -1 else np.moveaxis(out, -1, axis)


def _stitch_ref(indices, data):
    n = max((int(np.max(i)) + 1 for i in indices if np.size(i)), default=0)
    rest = np.asarray(data[0]).shape[np.ndim(indices[0]):]
    out = np.zeros((n,) + rest, np.asarray(data[0]).dtype)
    for i, d in zip(indices, data):
        out[np.reshape(i, -1)] = np.reshape(d, (-1,) + rest)
    return out


def _gather_batch_ref(p, i):
    return np.stack([np.take(p[b], i[b], axis=0) for b in range(p.shape[0])])


_shape_cases = [
    OpCase("Shape", _shape_op, [_f64_3d], lambda x: np.array(x.shape, np.int32)),
    OpCase("Shape", lambda x: _shape_op(x, kf.int64), [_i32], lambda x: np.array(x.shape, np.int64),
           name="int64"),
    OpCase("Shape", lambda x: kf.shape(x), [_empty], lambda x: np.array(x.shape, np.int32),
           name="empty"),
    OpCase("Shape", _shape_op, [np.float32(3)], lambda x: np.zeros([0], np.int32), name="scalar"),
    OpCase("ShapeN", lambda x, y: kf.shape_n([x, y]), [_f32, _empty],
           lambda x, y: [np.array(x.shape, np.int32), np.array(y.shape, np.int32)]),
    OpCase("Size", lambda x: kf.size(x), [_f64_3d], lambda x: np.int32(x.size)),
    OpCase("Size", lambda x: kf.size(x, out_type=kf.int64), [_empty], lambda x: np.int64(0),
           name="empty"),
    OpCase("Rank", lambda x: kf.rank(x), [_f64_3d], lambda x: np.int32(3)),
    OpCase("Rank", lambda x: kf.rank(x), [np.float32(3)], lambda x: np.int32(0), name="scalar"),
    OpCase("Fill", lambda d, v: kf.fill(d, v), [np.array([2, 3], np.int32), np.float32(1.5)],
           lambda d, v: np.full(d, v, np.float32)),
    OpCase("Fill", lambda d, v: kf.fill(d, v), [np.array([3, 0], np.int64), np.int32(7)],
           lambda d, v: np.full(d, v, np.int32), name="int64_empty"),
    OpCase("Fill", lambda d, v: kf.fill(d, v), [np.array([2], np.int32), np.array(True)],
           lambda d, v: np.full(d, True), name="bool"),
    OpCase("Fill", lambda v: kf.zeros(kf.shape(v), kf.int64), [_f64], lambda v: np.zeros((2, 3), np.int64),
           name="zeros_of_shape"),
    OpCase("Fill", lambda d, v: kf.fill(d, v), [np.array([2], np.int32), np.float64(1.25)],
           lambda d, v: np.full(d, 1.25), grad=True, grad_inputs=[1], name="grad"),
    OpCase("ZerosLike", lambda x: kf.zeros_like(x, optimize=False), [_f64], np.zeros_like),
    OpCase("ZerosLike", lambda x: kf.zeros_like(x, optimize=False), [_i32], np.zeros_like, name="int32"),
    OpCase("ZerosLike", lambda x: kf.zeros_like(x, optimize=False), [_bool], np.zeros_like, name="bool"),
    OpCase("OnesLike", lambda x: kf.ones_like(x, optimize=False), [_f32], np.ones_like),
    OpCase("OnesLike", lambda x: kf.ones_like(x, optimize=False), [_i64], np.ones_like, name="int64"),
    OpCase("OnesLike", lambda x: kf.ones_like(x, optimize=False), [_bool], np.ones_like, name="bool"),
    OpCase("Reshape", lambda x: kf.reshape(x, [3, -1]), [_f64], lambda x: x.reshape(3, -1), grad=True),
    OpCase("Reshape", lambda x: kf.reshape(x, [-1]), [_i32], lambda x: x.reshape(-1), name="flat"),
    OpCase("Reshape", lambda x, s: kf.reshape(x, s), [_f32, np.array([3, 1, 2], np.int64)],
           lambda x, s: x.reshape(s), name="int64_shape_input"),
    OpCase("Reshape", lambda x: kf.reshape(x, [3, 0]), [_empty], lambda x: x.reshape(3, 0), name="empty"),
    OpCase("Reshape", lambda x: kf.reshape(x, [1, 1]), [np.float32(2)], lambda x: np.reshape(x, (1, 1)),
           name="scalar"),
    OpCase("Reshape", lambda x: kf.reshape(x, [2, -1]), [_bool], lambda x: x.reshape(2, -1), name="bool"),
    OpCase("Reshape", lambda x, y: kf.reshape(x, kf.shape(y)), [_f64, _f64.T],
           lambda x, y: x.reshape(y.shape), grad=True, name="shape_of_other"),
    OpCase("Reshape", lambda x: kf.reshape(x, [2, -1]), [_r.randn(4, 3, 1)],
           lambda x: x.reshape(2, -1), grad=True, name="grad_infer"),
    OpCase("ExpandDims", lambda x: kf.expand_dims(x, 0), [_f64], lambda x: x[None], grad=True),
    OpCase("ExpandDims", lambda x: kf.expand_dims(x, -1), [_i32], lambda x: x[..., None], name="neg"),
    OpCase("ExpandDims", lambda x, a: kf.expand_dims(x, a), [_f32, np.int64(1)],
           lambda x, a: np.expand_dims(x, 1), name="axis_input"),
    OpCase("ExpandDims", lambda x: kf.expand_dims(x, 0), [np.float32(5)], lambda x: np.reshape(x, (1,)),
           name="scalar"),
    OpCase("Squeeze", lambda x: kf.squeeze(x), [_r.randn(1, 3, 1, 2)], np.squeeze, grad=True),
    OpCase("Squeeze", lambda x: kf.squeeze(x, axis=[-1]), [_r.randn(1, 3, 1).astype(np.float32)],
           lambda x: np.squeeze(x, -1), name="neg_axis"),
    OpCase("Squeeze", lambda x: kf.squeeze(x, 0), [np.zeros((1, 0), np.int32)],
           lambda x: np.squeeze(x, 0), name="empty"),
    OpCase("Transpose", lambda x: kf.transpose(x), [_f64_3d], lambda x: x.T, grad=True),
    OpCase("Transpose", lambda x: kf.transpose(x, [0, 2, 1]), [_f64_3d],
           lambda x: x.transpose(0, 2, 1), grad=True, name="perm"),
    OpCase("Transpose", lambda x, p: kf.transpose(x, p), [_i32, np.array([1, 0], np.int64)],
           lambda x, p: x.T, name="perm_input"),
    OpCase("Transpose", lambda x: kf.transpose(x), [_empty], lambda x: x.T, name="empty"),
    OpCase("Transpose", lambda x: kf.matrix_transpose(x), [_f64_3d],
           lambda x: np.swapaxes(x, -1, -2), name="matrix_transpose"),
    OpCase("ConjugateTranspose", lambda x: kf.transpose(x, conjugate=True), [_c64],
           lambda x: np.conj(x.T)),
    OpCase("ConjugateTranspose",
           lambda x: apply_op("ConjugateTranspose", [x, [1, 2, 0]]).outputs[0], [_f64_3d],
           lambda x: x.transpose(1, 2, 0), grad=True, name="real"),
    OpCase("BroadcastTo", lambda x: kf.broadcast_to(x, [4, 2, 3]), [_f64],
           lambda x: np.broadcast_to(x, (4, 2, 3)), grad=True),
    OpCase("BroadcastTo", lambda x: kf.broadcast_to(x, [2, 3]), [np.array([[1], [2]], np.int32)],
           lambda x: np.broadcast_to(x, (2, 3)), name="int"),
    OpCase("BroadcastTo", lambda x: kf.broadcast_to(x, [2, 3, 4]), [_r.randn(3, 1)],
           lambda x: np.broadcast_to(x, (2, 3, 4)), grad=True, name="middle"),
    OpCase("BroadcastTo", lambda x, s: kf.broadcast_to(x, s), [_r.randn(1, 4), np.array([3, 1, 4], np.int64)],
           lambda x, s: np.broadcast_to(x, (3, 1, 4)), grad=True, name="shape_input"),
    OpCase("StopGradient", lambda x: kf.stop_gradient(x), [_f32], lambda x: x),
    OpCase("IdentityN", lambda x, y: kf.identity_n([x, y]), [_f32, _i64], lambda x, y: [x, y]),
    OpCase("IdentityN", lambda x, y: kf.identity_n([x, y]), [_f64, _f64_3d], lambda x, y: [x, y],
           grad=True, name="grad"),
    OpCase("Range", lambda: kf.range(5), [], lambda: np.arange(5, dtype=np.int32)),
    OpCase("Range", lambda s, l, d: kf.range(s, l, d), [np.int32(10), np.int32(1), np.int32(-3)],
           lambda s, l, d: np.arange(10, 1, -3, dtype=np.int32), name="neg_delta"),
    OpCase("Range", lambda s, l: kf.range(s, l, 0.5), [np.float32(1), np.float32(3.2)],
           lambda s, l: np.arange(1, 3.2, 0.5, dtype=np.float32), name="float"),
    OpCase("Range", lambda l: kf.range(l, dtype=kf.float64), [np.float64(2.5)],
           lambda l: np.arange(2.5), name="float64"),
    OpCase("Range", lambda l: kf.range(2, l), [np.int64(2)], lambda l: np.zeros([0], np.int64),
           name="empty_int64"),
]

_join_cases = [
    OpCase("ConcatV2", lambda x, y: kf.concat([x, y], 0), [_f64, _r.randn(1, 3)],
           lambda x, y: np.concatenate([x, y], 0), grad=True),
    OpCase("ConcatV2", lambda x, y, z: kf.concat([x, y, z], -1), [_i32, _i32, _i32[:, :1]],
           lambda x, y, z: np.concatenate([x, y, z], -1), name="neg_axis"),
    OpCase("ConcatV2", lambda x, y: kf.concat([x, y], 0), [_empty, _f32],
           lambda x, y: np.concatenate([x, y]), name="empty"),
    OpCase("ConcatV2", lambda x, y, a: kf.concat([x, y], a), [_bool, _bool, np.int64(1)],
           lambda x, y, a: np.concatenate([x, y], 1), name="axis_input"),
    OpCase("ConcatV2", lambda x, y, z, a: kf.concat([x, y, z], a),
           [_f64, _r.randn(2, 1), _r.randn(2, 2), np.int32(-1)],
           lambda x, y, z, a: np.concatenate([x, y, z], -1), grad=True, name="grad_axis_input"),
    OpCase("ConcatV2", lambda x, y: kf.concat([x, y], -2), [_f64_3d, _r.randn(2, 1, 4)],
           lambda x, y: np.concatenate([x, y], -2), grad=True, name="grad_neg_axis"),
    OpCase("Pack", lambda x, y: kf.stack([x, y]), [_f64, _f64 * 2], lambda x, y: np.stack([x, y]),
           grad=True),
    OpCase("Pack", lambda x, y: kf.stack([x, y], axis=-1), [_i32, _i32], lambda x, y: np.stack([x, y], -1),
           name="neg_axis"),
    OpCase("Pack", lambda x, y: kf.stack([x, y], axis=1), [_f64, _f64 - 1], lambda x, y: np.stack([x, y], 1),
           grad=True, name="grad_axis1"),
    OpCase("Pack", lambda x, y: kf.stack([x, y, x], axis=0), [np.float32(1), np.float32(2)],
           lambda x, y: np.array([x, y, x]), name="scalars"),
    OpCase("Pack", lambda x: kf.stack([x, 3.0]), [np.float32(1)], lambda x: np.array([1, 3], np.float32),
           name="mixed_python"),
    OpCase("Unpack", lambda x: kf.unstack(x, num=2), [_f64], lambda x: list(x), grad=True),
    OpCase("Unpack", lambda x: kf.unstack(x, num=3, axis=1), [_i32], lambda x: list(x.T),
           name="axis1"),
    OpCase("Unpack", lambda x: kf.unstack(x, num=4, axis=-1), [_f64_3d],
           lambda x: list(np.moveaxis(x, -1, 0)), grad=True, name="grad_neg_axis"),
    OpCase("Unpack", lambda x: kf.unstack(x, num=3, axis=-1), [np.arange(3, dtype=np.int64)],
           lambda x: list(x), name="vector"),
    OpCase("Split", lambda x: kf.split(x, 3, axis=1), [_f64], lambda x: np.split(x, 3, 1), grad=True),
    OpCase("Split", lambda x: kf.split(x, 2, axis=-2), [_i32], lambda x: np.split(x, 2, -2),
           name="neg_axis"),
    OpCase("SplitV", lambda x: kf.split(x, [1, -1], axis=1), [_f64], lambda x: np.split(x, [1], 1),
           grad=True),
    OpCase("SplitV", lambda x, s: kf.split(x, s, axis=0, num=3),
           [np.arange(6, dtype=np.int32), np.array([2, 0, 4], np.int64)],
           lambda x, s: np.split(x, [2, 2]), name="sizes_input"),
    OpCase("Tile", lambda x: kf.tile(x, [2, 3]), [_f64], lambda x: np.tile(x, (2, 3)), grad=True),
    OpCase("Tile", lambda x, m: kf.tile(x, m), [_i32, np.array([1, 0], np.int64)],
           lambda x, m: np.tile(x, (1, 0)), name="zero_multiple"),
    OpCase("Tile", lambda x, m: kf.tile(x, m), [_f64, np.array([3, 1], np.int32)],
           lambda x, m: np.tile(x, (3, 1)), grad=True, name="grad_multiples_input"),
    OpCase("Tile", lambda x: kf.tile(x, [1, 2, 1]), [_f64_3d], lambda x: np.tile(x, (1, 2, 1)),
           grad=True, name="grad_middle"),
    OpCase("Pad", lambda x: kf.pad(x, [[1, 0], [2, 1]]), [_f64], lambda x: np.pad(x, [[1, 0], [2, 1]]),
           grad=True),
    OpCase("Pad", lambda x, p: kf.pad(x, p), [_i32, np.array([[0, 1], [1, 0]], np.int64)],
           lambda x, p: np.pad(x, p), name="paddings_input"),
    OpCase("Pad", lambda x, p: kf.pad(x, p), [_f64_3d, np.array([[0, 1], [1, 0], [2, 2]], np.int64)],
           lambda x, p: np.pad(x, p), grad=True, name="grad_paddings_input"),
    OpCase("PadV2", lambda x: kf.pad(x, [[1, 1], [0, 2]], constant_values=-1.5), [_f64],
           lambda x: np.pad(x, [[1, 1], [0, 2]], constant_values=-1.5), grad=True),
    OpCase("PadV2", lambda x, c: kf.pad(x, [[1, 0], [0, 0]], constant_values=c), [_i32, np.int32(9)],
           lambda x, c: np.pad(x, [[1, 0], [0, 0]], constant_values=9), name="value_input"),
    OpCase("MirrorPad", lambda x: kf.pad(x, [[1, 1], [2, 2]], "REFLECT"), [_f64],
           lambda x: np.pad(x, [[1, 1], [2, 2]], "reflect"), grad=True),
    OpCase("MirrorPad", lambda x: kf.pad(x, [[2, 1], [3, 0]], "symmetric"), [_f64],
           lambda x: np.pad(x, [[2, 1], [3, 0]], "symmetric"), grad=True, name="symmetric"),
    OpCase("ReverseV2", lambda x: kf.reverse(x, [1]), [_f64], lambda x: x[:, ::-1], grad=True),
    OpCase("ReverseV2", lambda x: kf.reverse_v2(x, [0, -1]), [_i32], lambda x: x[::-1, ::-1],
           name="two_axes"),
    OpCase("ReverseV2", lambda x: kf.reverse(x, []), [_bool], lambda x: x, name="none"),
    OpCase("ReverseV2", lambda x: kf.reverse(x, [0, -1]), [_f64_3d], lambda x: x[::-1, :, ::-1],
           grad=True, name="grad_two_axes"),
    OpCase("OneHot", lambda i: kf.one_hot(i, 4), [np.array([0, 3, 5, -1], np.int32)],
           lambda i: _onehot_ref(i, 4)),
    OpCase("OneHot", lambda i: kf.one_hot(i, 3, axis=0, on_value=5, off_value=-1),
           [np.array([[0, 2], [1, 1]], np.int64)],
           lambda i: _onehot_ref(i, 3, 5, -1, axis=0, dtype=np.int32), name="axis0_int"),
    OpCase("OneHot", lambda i, d: kf.one_hot(i, d, dtype=kf.float64, axis=1),
           [np.array([[0, 2], [1, 1]], np.int32), np.int32(3)],
           lambda i, d: _onehot_ref(i, 3, axis=1, dtype=np.float64), name="depth_input"),
    OpCase("OneHot", lambda i: kf.one_hot(i, 2, on_value=True, off_value=False),
           [np.array([1, 0], np.uint8)], lambda i: _onehot_ref(i, 2, True, False, dtype=bool),
           name="bool"),
]

_slice_cases = [
    OpCase("Slice", lambda x: kf.slice(x, [1, 0], [1, -1]), [_f64], lambda x: x[1:2, 0:], grad=True),
    OpCase("Slice", lambda x, b, s: kf.slice(x, b, s),
           [_f64_3d, np.array([0, 1, 1], np.int64), np.array([2, -1, 2], np.int64)],
           lambda x, b, s: x[0:2, 1:, 1:3], grad=True, name="inputs"),
    OpCase("Slice", lambda x: kf.slice(x, [0, 1], [0, 2]), [_i32], lambda x: x[0:0, 1:3], name="empty"),
    OpCase("StridedSlice", lambda x: x[1:, ::-1], [_f64], lambda x: x[1:, ::-1], grad=True),
    OpCase("StridedSlice", lambda x: x[..., 1], [_f64_3d], lambda x: x[..., 1], grad=True,
           name="ellipsis_shrink"),
    OpCase("StridedSlice", lambda x: x[kf.newaxis, -1, ..., ::-2], [_f64_3d],
           lambda x: x[None, -1, ..., ::-2], grad=True, name="newaxis"),
    OpCase("StridedSlice", lambda x: x[0, 1], [_i32], lambda x: x[0, 1], name="scalar"),
    OpCase("StridedSlice", lambda x: x[:, None, 1:-1], [_i32], lambda x: x[:, None, 1:-1],
           name="mid"),
    OpCase("StridedSlice", lambda x: x[5:], [_f32], lambda x: x[5:], name="empty"),
    OpCase("StridedSlice", lambda x: x[-100:100, -2::-2], [_f64_3d], lambda x: x[-100:100, -2::-2],
           grad=True, name="clamped"),
    OpCase("StridedSlice", lambda x, i: x[i, ..., i:], [_f64_3d, np.int32(1)],
           lambda x, i: x[1, ..., 1:], grad=True, name="tensor_index"),
    OpCase("StridedSlice", lambda x, i: x[:, i], [_bool, np.int64(-1)], lambda x, i: x[:, -1],
           name="int64_index"),
    OpCase("StridedSlice",
           lambda x: kf.strided_slice(x, [0, 0, 0], [2, 3, 4], [1, 2, 1], begin_mask=4, end_mask=1,
                                      shrink_axis_mask=4),
           [_f64_3d], lambda x: x[:, 0:3:2, 0], grad=True, name="masks"),
    OpCase("StridedSlice", lambda x: x[::-1], [np.arange(5, dtype=np.int64)], lambda x: x[::-1],
           name="reverse_vector"),
    OpCase("StridedSlice", lambda x: x[...], [np.float32(4)], lambda x: x, name="scalar_ellipsis"),
    OpCase("GatherV2", lambda p, i: kf.gather(p, i), [_f64, np.array([1, 0, 1], np.int32)],
           lambda p, i: p[i], grad=True),
    OpCase("GatherV2", lambda p, i: kf.gather(p, i, axis=1), [_f64_3d, np.array([[2, 0], [1, 1]], np.int64)],
           lambda p, i: np.take(p, i, axis=1), grad=True, name="axis1_2d"),
    OpCase("GatherV2", lambda p, i, a: kf.gather(p, i, axis=a),
           [_i32, np.array([0, 2], np.int32), np.int32(-1)], lambda p, i, a: p[:, i], name="axis_input"),
    OpCase("GatherV2", lambda p, i, a: kf.gather(p, i, axis=a),
           [_f64_3d, np.array([3, 0, 3], np.int64), np.int64(-1)], lambda p, i, a: p[..., i],
           grad=True, name="grad_axis_input"),
    OpCase("GatherV2", lambda p, i: kf.gather(p, i), [_f64_3d, np.array([[1, 1], [0, 1]], np.int32)],
           lambda p, i: p[i], grad=True, name="grad_2d_indices"),
    OpCase("GatherV2", lambda p, i: kf.gather(p, i, axis=2, batch_dims=1),
           [_f64_3d, np.array([[0, 3, 3], [1, 2, 0]], np.int32)],
           lambda p, i: np.stack([p[b][:, i[b]] for b in range(2)]), grad=True,
           name="grad_batch_dims_axis2"),
    OpCase("GatherV2", lambda p, i: kf.gather(p, i, batch_dims=1),
           [_f64_3d, np.array([[0, 2], [1, 1]], np.int32)], _gather_batch_ref, grad=True,
           name="batch_dims"),
    OpCase("GatherV2", lambda p, i: kf.gather(p, i), [_f32, np.zeros([0], np.int32)],
           lambda p, i: p[i], name="empty"),
    OpCase("GatherV2", lambda p, i: kf.gather(p, i), [np.array([3, 4, 5], np.int64), np.int32(2)],
           lambda p, i: p[2], name="scalar_index"),
    OpCase("GatherV2", lambda p, i: kf.gather(p, i), [_f64, np.int32(1)], lambda p, i: p[1],
           grad=True, name="grad_scalar_index"),
    OpCase("DynamicPartition", lambda d, p: kf.dynamic_partition(d, p, 3),
           [np.arange(5, dtype=np.float64) * 1.5, np.array([0, 2, 0, 1, 2], np.int32)],
           lambda d, p: [d[p == i] for i in range(3)], grad=True),
    OpCase("DynamicPartition", lambda d, p: kf.dynamic_partition(d, p, 2),
           [_i32, np.array([[1, 0, 1], [0, 0, 1]], np.int32)],
           lambda d, p: [d[p == i] for i in range(2)], name="2d"),
    OpCase("DynamicPartition", lambda d, p: kf.dynamic_partition(d, p, 3),
           [_f64_3d, np.array([[1, 0, 1], [0, 0, 1]], np.int32)],
           lambda d, p: [d[p == i] for i in range(3)], grad=True, name="grad_2d_empty_partition"),
    OpCase("DynamicPartition", lambda d, p: kf.dynamic_partition(d, p, 2),
           [_f32, np.array([1, 1], np.int32)], lambda d, p: [d[:0], d], name="empty_partition"),
    OpCase("DynamicStitch", lambda i0, i1, d0, d1: kf.dynamic_stitch([i0, i1], [d0, d1]),
           [np.array([0, 5], np.int32), np.array([[1, 2], [3, 4]], np.int32),
            _r.randn(2, 2), _r.randn(2, 2, 2)],
           lambda i0, i1, d0, d1: _stitch_ref([i0, i1], [d0, d1]), grad=True),
    OpCase("DynamicStitch", lambda i0, i1, d0, d1: kf.dynamic_stitch([i0, i1], [d0, d1]),
           [np.array([0, 1, 2], np.int32), np.array([1], np.int32),
            np.array([10, 20, 30], np.int32), np.array([99], np.int32)],
           lambda i0, i1, d0, d1: np.array([10, 99, 30], np.int32), name="later_wins"),
    OpCase("ParallelDynamicStitch",
           lambda i0, i1, d0, d1: kf.parallel_dynamic_stitch([i0, i1], [d0, d1]),
           [np.array([2, 0], np.int32), np.array([1], np.int32), np.array([1., 2.], np.float32),
            np.array([3.], np.float32)],
           lambda i0, i1, d0, d1: np.array([2., 3., 1.], np.float32)),
    OpCase("ParallelDynamicStitch",
           lambda i0, i1, d0, d1: kf.parallel_dynamic_stitch([i0, i1], [d0, d1]),
           [np.array([[2], [0]], np.int32), np.array([1, 3], np.int32), _r.randn(2, 1, 3),
            _r.randn(2, 3)],
           lambda i0, i1, d0, d1: _stitch_ref([i0, i1], [d0, d1]), grad=True, name="grad"),
]

def _mirror_pad_grad_ref(mode, shape, paddings):
    def ref(g):
        ids = np.pad(np.arange(int(np.prod(shape))).reshape(shape), paddings, mode)
        n = int(np.prod(shape))
        return np.bincount(ids.ravel(), weights=g.ravel(), minlength=n).reshape(shape).astype(g.dtype)
    return ref


def _scatter_nd_ref(indices, updates, shape):
    out = np.zeros(shape, updates.dtype)
    np.add.at(out, tuple(np.moveaxis(indices, -1, 0)), updates)
    return out


def _ssg_ref(dy):
    out = np.zeros((3, 4, 5), dy.dtype)
    out[1:, None, ..., ::-2] = dy
    return out


_extra_cases = [
    OpCase("GatherNd", lambda p, i: kf.gather_nd(p, i), [_f64_3d, np.array([[1, 2], [0, 0]], np.int32)],
           lambda p, i: p[tuple(i.T)], grad=True),
    OpCase("GatherNd", lambda p, i: kf.gather_nd(p, i), [_i32, np.array([[[1, 2]], [[0, 0]]], np.int64)],
           lambda p, i: p[i[..., 0], i[..., 1]], name="scalars"),
    OpCase("GatherNd", lambda p, i: kf.gather_nd(p, i), [_f32, np.zeros((2, 0), np.int32)],
           lambda p, i: np.stack([p, p]), name="empty_index"),
    OpCase("GatherNd", lambda p, i: kf.gather_nd(p, i), [_f64_3d, np.array([[1], [0], [1]], np.int64)],
           lambda p, i: p[i[:, 0]], grad=True, name="grad_rows"),
    OpCase("GatherNd", lambda p, i: kf.gather_nd(p, i),
           [_f64_3d, np.array([[[1, 2, 3]], [[0, 0, 1]]], np.int32)],
           lambda p, i: p[i[..., 0], i[..., 1], i[..., 2]], grad=True, name="grad_elements"),
    OpCase("ScatterNd", lambda i, u: kf.scatter_nd(i, u, [4, 3]),
           [np.array([[1], [3], [1]], np.int32), _r.randn(3, 3)],
           lambda i, u: _scatter_nd_ref(i, u, (4, 3)), grad=True),
    OpCase("ScatterNd", lambda i, u, s: kf.scatter_nd(i, u, s),
           [np.array([[0, 1], [2, 2]], np.int64), np.array([5, 7], np.int32), np.array([3, 3], np.int64)],
           lambda i, u, s: _scatter_nd_ref(i, u, (3, 3)), name="elements"),
    OpCase("InvertPermutation", lambda x: kf.invert_permutation(x), [np.array([2, 0, 3, 1], np.int32)],
           np.argsort),
    OpCase("InvertPermutation", lambda x: kf.invert_permutation(x), [np.zeros([0], np.int64)],
           lambda x: x, name="empty"),
    OpCase("Unique", lambda x: list(kf.unique(x)), [np.array([4, 1, 4, 2, 1], np.int64)],
           lambda x: [np.array([4, 1, 2], np.int64), np.array([0, 1, 0, 2, 1], np.int32)]),
    OpCase("UniqueWithCounts", lambda x: list(kf.unique_with_counts(x, out_idx=kf.int64)),
           [np.array([0.5, 0.5, -2.0], np.float32)],
           lambda x: [np.array([0.5, -2.0], np.float32), np.array([0, 0, 1], np.int64),
                      np.array([2, 1], np.int64)]),
    OpCase("BroadcastGradientArgs", lambda a, b: list(array_ops.broadcast_gradient_args(a, b)),
           [np.array([2, 1, 3], np.int32), np.array([4, 1], np.int32)],
           lambda a, b: [np.array([1], np.int32), np.array([0, 2], np.int32)]),
    OpCase("BroadcastGradientArgs", lambda a, b: list(array_ops.broadcast_gradient_args(a, b)),
           [np.array([5], np.int64), np.zeros([0], np.int64)],
           lambda a, b: [np.zeros([0], np.int64), np.array([0], np.int64)], name="scalar"),
    OpCase("ConcatOffset", lambda a, b, c: array_ops.concat_offset(1, [a, b, c]),
           [np.array([2, 3, 5], np.int32), np.array([2, 1, 5], np.int32), np.array([2, 4, 5], np.int32)],
           lambda a, b, c: [np.array([0, 0, 0], np.int32), np.array([0, 3, 0], np.int32),
                            np.array([0, 4, 0], np.int32)]),
    OpCase("StridedSliceGrad",
           lambda dy: array_ops.strided_slice_grad([3, 4, 5], [1, 0, 0, -1], [0, 0, 0, 0], [1, 1, 1, -2],
                                                   dy, end_mask=9, new_axis_mask=2, ellipsis_mask=4),
           [_r.randn(2, 1, 4, 3)], _ssg_ref, grad=True),
    OpCase("MirrorPadGrad", lambda g: array_ops.mirror_pad_grad(g, [[1, 1], [2, 2]], "REFLECT"),
           [_r.randn(4, 7)], _mirror_pad_grad_ref("reflect", (2, 3), [[1, 1], [2, 2]]), grad=True),
    OpCase("MirrorPadGrad", lambda g: array_ops.mirror_pad_grad(g, [[2, 0], [1, 3]], "SYMMETRIC"),
           [_r.randn(4, 7).astype(np.float32)], _mirror_pad_grad_ref("symmetric", (2, 3), [[2, 0], [1, 3]]),
           name="symmetric"),
]

CASES = _shape_cases + _join_cases + _slice_cases + _extra_cases
