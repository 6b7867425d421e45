"""N-d gathers/scatters, Unique, and the array ops that gradients are built from: GatherNd, ScatterNd,
InvertPermutation, BroadcastGradientArgs, ConcatOffset, StridedSliceGrad and MirrorPadGrad.

Re-exported by `kernflow.core.ops.array_ops`; kernels in kernflow.kernels.cpu.array.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops.array_ops_common import index_arg, partial_shape

__all__ = ["gather_nd", "scatter_nd", "invert_permutation", "unique", "unique_with_counts"]

_INDEX = "{int32, int64} = int32"


# ----------------------------------------------------------------------------- GatherNd / ScatterNd
def _gather_nd_shape(op):
    p, ind = op.inputs[0].shape, op.inputs[1].shape
    if ind.rank == 0:
        raise ValueError("indices must be at least a vector (rank >= 1)")
    if p.rank is None or ind.rank is None or ind.dim_values[-1] is None:
        return [_ts.TensorShape(None)]
    k = ind.dim_values[-1]
    if k > p.rank:
        raise ValueError(f"indices.shape[-1] must be <= params.rank, but saw indices shape: {ind} "
                         f"and params shape: {p}")
    return [_ts.TensorShape(list(ind.dim_values[:-1]) + list(p.dim_values[k:]))]


register_op("GatherNd", inputs=["params: Tparams", "indices: Tindices"], outputs=["output: Tparams"],
            attrs=["Tparams: type", "Tindices: {int32, int64}"], shape_fn=_gather_nd_shape,
            doc="Gathers slices of params at N-d indices: output[i...] = params[indices[i..., :]].")


def _scatter_nd_shape(op):
    ind, upd = op.inputs[0].shape, op.inputs[1].shape
    out = partial_shape(op.inputs[2])
    if out.rank is not None and ind.rank is not None and upd.rank is not None and \
            ind.dim_values[-1] is not None:
        k = ind.dim_values[-1]
        want = _ts.TensorShape(list(ind.dim_values[:-1]) + list(out.dim_values[k:]))
        if not want.is_compatible_with(upd):
            raise ValueError(f"updates has shape {upd}, expected {want} for indices of shape {ind} and "
                             f"output shape {out}")
    return [out]


register_op("ScatterNd", inputs=["indices: Tindices", "updates: T", "shape: Tindices"],
            outputs=["output: T"], attrs=["T: type", "Tindices: {int32, int64}"],
            shape_fn=_scatter_nd_shape,
            doc="Scatters updates into zeros of `shape` at N-d indices; duplicate indices add up.")


def gather_nd(params, indices, name=None, batch_dims=0):
    """Gathers slices of `params` at the N-d `indices` (last dim indexes params' leading dims).

    Raises:
        ValueError: for batch_dims other than 0 (not supported).
    """
    if batch_dims != 0:
        raise ValueError(f"gather_nd supports batch_dims=0 only, got {batch_dims}")
    return apply_op("GatherNd", [params, index_arg(indices)], name=name).outputs[0]


def scatter_nd(indices, updates, shape, name=None):
    """Returns zeros of `shape` with `updates` added at `indices` (duplicates accumulate)."""
    return apply_op("ScatterNd", [indices, updates, shape], name=name).outputs[0]


# ----------------------------------------------------------------------------- permutation
register_op("InvertPermutation", inputs=["x: T"], outputs=["y: T"], attrs=["T: " + _INDEX],
            shape_fn=lambda op: [op.inputs[0].shape.with_rank(1)],
            doc="Returns the inverse permutation: y[x[i]] = i.")


def invert_permutation(x, name=None):
    """Computes the inverse of permutation `x` (a 1-D int32/int64 tensor)."""
    return apply_op("InvertPermutation", [x], name=name).outputs[0]


# ----------------------------------------------------------------------------- unique
def _unique_shape(op):
    op.inputs[0].shape.with_rank(1)
    n = op.inputs[0].shape
    return [_ts.TensorShape([None]), n] + ([_ts.TensorShape([None])] if len(op.outputs) > 2 else [])


register_op("Unique", inputs=["x: T"], outputs=["y: T", "idx: out_idx"],
            attrs=["T: type", "out_idx: " + _INDEX], shape_fn=_unique_shape,
            doc="The distinct elements of 1-D x in order of first occurrence; x[i] = y[idx[i]].")
register_op("UniqueWithCounts", inputs=["x: T"], outputs=["y: T", "idx: out_idx", "count: out_idx"],
            attrs=["T: type", "out_idx: " + _INDEX], shape_fn=_unique_shape,
            doc="Unique, plus how often each element of y occurs in x.")

# Unique has no GPU kernel (host only, see kernel_contract.HOST_ONLY_OPS).
UNIQUE_OPS = ("Unique", "UniqueWithCounts")


def unique(x, out_idx=None, name=None):
    """The distinct elements of the 1-D tensor `x`, in order of first occurrence (TF1 `tf.unique`).

    Returns:
        (y, idx): `y` the distinct elements, `idx` (int32 or `out_idx`) with ``x[i] == y[idx[i]]``.
    """
    from kernflow.core.framework import dtypes
    attrs = {"out_idx": dtypes.as_dtype(out_idx or dtypes.int32)}
    return tuple(apply_op("Unique", [x], attrs, name=name).outputs)


def unique_with_counts(x, out_idx=None, name=None):
    """`unique` plus `count`, the number of times each element of `y` occurs in `x`."""
    from kernflow.core.framework import dtypes
    attrs = {"out_idx": dtypes.as_dtype(out_idx or dtypes.int32)}
    return tuple(apply_op("UniqueWithCounts", [x], attrs, name=name).outputs)


# ----------------------------------------------------------------------------- gradient helpers
def _bcast_args_shape(op):
    for t in op.inputs:
        t.shape.with_rank(1)
    return [_ts.TensorShape([None]), _ts.TensorShape([None])]


register_op("BroadcastGradientArgs", inputs=["s0: T", "s1: T"], outputs=["r0: T", "r1: T"],
            attrs=["T: " + _INDEX], shape_fn=_bcast_args_shape,
            doc="The reduction indices for the gradients of a broadcasting binary op whose inputs "
                "have shapes s0 and s1.")
register_op("ConcatOffset", inputs=["concat_dim: int32", "shape: N * int32"],
            outputs=["offset: N * int32"], attrs=["N: int >= 2"],
            shape_fn=lambda op: [t.shape for t in op.inputs[1:]],
            doc="The offset of each ConcatV2 input within the output (for the concat gradient).")


def _strided_slice_grad_shape(op):
    return [partial_shape(op.inputs[0])]


register_op("StridedSliceGrad",
            inputs=["shape: Index", "begin: Index", "end: Index", "strides: Index", "dy: T"],
            outputs=["output: T"],
            attrs=["T: type", "Index: {int32, int64}", "begin_mask: int = 0", "end_mask: int = 0",
                   "ellipsis_mask: int = 0", "new_axis_mask: int = 0", "shrink_axis_mask: int = 0"],
            shape_fn=_strided_slice_grad_shape,
            doc="The gradient of StridedSlice: dy placed in zeros of `shape` at the slice.")


def _mirror_pad_grad_shape(op):
    s = op.inputs[0].shape
    pv = tensor_util.constant_value(op.inputs[1])
    if s.rank is None:
        return [_ts.TensorShape(None)]
    if pv is None:
        return [_ts.TensorShape([None] * s.rank)]
    pv = np.reshape(pv, (-1, 2))
    return [_ts.TensorShape([None if d is None else d - int(pv[i, 0]) - int(pv[i, 1])
                             for i, d in enumerate(s.dim_values)])]


register_op("MirrorPadGrad", inputs=["input: T", "paddings: Tpaddings"], outputs=["output: T"],
            attrs=["T: type", "Tpaddings: " + _INDEX, "mode: {'REFLECT', 'SYMMETRIC'}"],
            shape_fn=_mirror_pad_grad_shape,
            doc="The gradient of MirrorPad: folds the padded borders back onto the input.")


def broadcast_gradient_args(s0, s1, name=None):
    """Returns (r0, r1): the axes to sum the gradients of a broadcast binary op's inputs over."""
    op = apply_op("BroadcastGradientArgs", [s0, s1], name=name)
    return op.outputs[0], op.outputs[1]


def concat_offset(axis, shape, name=None):
    """Returns the offsets of the inputs of shapes `shape` within their concat along `axis`."""
    return list(apply_op("ConcatOffset", [axis, list(shape)], name=name).outputs)


def strided_slice_grad(shape, begin, end, strides, dy, begin_mask=0, end_mask=0, ellipsis_mask=0,
                       new_axis_mask=0, shrink_axis_mask=0, name=None):
    """Returns zeros of `shape` with `dy` written where StridedSlice(begin, end, strides) read."""
    attrs = {"begin_mask": begin_mask, "end_mask": end_mask, "ellipsis_mask": ellipsis_mask,
             "new_axis_mask": new_axis_mask, "shrink_axis_mask": shrink_axis_mask}
    return apply_op("StridedSliceGrad", [shape, begin, end, strides, dy], attrs, name=name).outputs[0]


def mirror_pad_grad(input, paddings, mode, name=None):  # noqa: A002 - TF's argument name
    """The gradient of MirrorPad(mode) for an upstream gradient `input`."""
    return apply_op("MirrorPadGrad", [input, paddings], {"mode": mode.upper()}, name=name).outputs[0]


# ----------------------------------------------------------------------------- static values
def bcast_reduce_indices(s0, s1):
    """(r0, r1) for shapes s0 and s1 (lists of ints), or ValueError when they do not broadcast."""
    n = max(len(s0), len(s1))
    a = [1] * (n - len(s0)) + list(s0)
    b = [1] * (n - len(s1)) + list(s1)
    r0, r1 = [], []
    for i, (x, y) in enumerate(zip(a, b)):
        if x == y:
            if x == 1:
                r0.append(i)
                r1.append(i)
        elif x == 1:
            r0.append(i)
        elif y == 1:
            r1.append(i)
        else:
            raise ValueError(f"Incompatible shapes: [{','.join(map(str, s0))}] vs. "
                             f"[{','.join(map(str, s1))}]")
    return r0, r1


@tensor_util.register_constant_value("InvertPermutation")
def _invert_value(op):
    v = tensor_util.constant_value(op.inputs[0])
    if v is None or sorted(np.reshape(v, -1).tolist()) != list(range(np.size(v))):
        return None
    out = np.empty_like(v)
    out[v] = np.arange(v.size, dtype=v.dtype)
    return out
