"""Gathering and partitioning: GatherV2, DynamicPartition, DynamicStitch, ParallelDynamicStitch,
and the composites boolean_mask and sequence_mask.

Re-exported by `kernflow.core.ops.array_ops`; kernels in kernflow.kernels.cpu.array.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops.array_ops_common import index_arg, partial_scalar

__all__ = ["gather", "dynamic_partition", "dynamic_stitch", "parallel_dynamic_stitch",
           "boolean_mask", "sequence_mask"]


# ----------------------------------------------------------------------------- GatherV2
def _gather_shape(op):
    p, ind = op.inputs[0].shape, op.inputs[1].shape
    op.inputs[2].shape.with_rank(0)
    if p.rank == 0:
        raise ValueError("Shape must be at least rank 1 but is rank 0")
    bd = op.get_attr("batch_dims")
    if p.rank is None or ind.rank is None:
        return [_ts.TensorShape(None)]
    if bd < 0:
        bd += ind.rank
    if not 0 <= bd <= ind.rank:
        raise ValueError(f"batch_dims ({op.get_attr('batch_dims')}) must be in [{-ind.rank}, "
                         f"{ind.rank}]")
    axis = partial_scalar(op.inputs[2])
    if axis is None:
        return [_ts.TensorShape([None] * (p.rank - 1 + ind.rank - bd))]
    if not -p.rank <= axis < p.rank:
        raise ValueError(f"Expected axis in the range [{-p.rank}, {p.rank}), but got {axis}")
    a = axis + p.rank if axis < 0 else axis
    if bd > a:
        raise ValueError(f"batch_dims ({bd}) must be less than or equal to axis ({a})")
    pd = list(p.dim_values)
    for i in range(bd):
        x, y = pd[i], ind.dim_values[i]
        if x is not None and y is not None and x != y:
            raise ValueError(f"params.shape[{i}] ({x}) must match indices.shape[{i}] ({y}) for "
                             f"batch_dims {bd}")
        pd[i] = x if x is not None else y
    return [_ts.TensorShape(pd[:a] + list(ind.dim_values[bd:]) + pd[a + 1:])]


register_op("GatherV2", inputs=["params: Tparams", "indices: Tindices", "axis: Taxis"],
            outputs=["output: Tparams"],
            attrs=["batch_dims: int = 0", "Tparams: type", "Tindices: {int32, int64}",
                   "Taxis: {int32, int64}"],
            shape_fn=_gather_shape,
            doc="Gathers slices of `params` along `axis` at `indices` (which must be in range).")


def gather(params, indices, validate_indices=None, name=None, axis=None, batch_dims=0):
    """Gathers slices of `params` along `axis` (TF1 `tf.gather`).

    Output shape: params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis + 1:].

    Args:
        params: the tensor to gather from.
        indices: int32/int64 indices in [0, params.shape[axis]); others fail at run time.
        validate_indices: ignored (indices are always validated).
        axis: the dimension to gather along (default `batch_dims`, i.e. 0).
        batch_dims: leading dimensions shared by params and indices.
    """
    del validate_indices
    if axis is None:
        axis = batch_dims
    return apply_op("GatherV2", [params, index_arg(indices), axis], {"batch_dims": batch_dims},
                    name=name).outputs[0]


# ----------------------------------------------------------------------------- DynamicPartition
def _dynamic_partition_shape(op):
    d, p = op.inputs[0].shape, op.inputs[1].shape
    n = op.get_attr("num_partitions")
    if p.rank is None or d.rank is None:
        return [_ts.TensorShape(None)] * n
    if d.rank < p.rank or not _ts.TensorShape(d.dim_values[:p.rank]).is_compatible_with(p):
        raise ValueError(f"data.shape {d} must start with partitions.shape {p}")
    return [_ts.TensorShape([None] + list(d.dim_values[p.rank:]))] * n


register_op("DynamicPartition", inputs=["data: T", "partitions: int32"],
            outputs=["outputs: num_partitions * T"],
            attrs=["num_partitions: int >= 1", "T: type"], shape_fn=_dynamic_partition_shape,
            doc="Splits `data` into num_partitions tensors: outputs[i] holds the slices whose "
                "partition index is i, in order.")


def dynamic_partition(data, partitions, num_partitions, name=None):
    """Partitions `data` into `num_partitions` tensors by the int32 `partitions` indices.

    Returns:
        A list of `num_partitions` tensors.
    """
    return list(apply_op("DynamicPartition", [data, partitions],
                         {"num_partitions": num_partitions}, name=name).outputs)


# ----------------------------------------------------------------------------- DynamicStitch
def _stitch_shape(op):
    n = op.get_attr("N")
    indices, data = op.inputs[:n], op.inputs[n:]
    extra = None
    max_index = -1
    all_const = True
    for i, (ix, d) in enumerate(zip(indices, data)):
        v = tensor_util.constant_value(ix)
        if v is None:
            all_const = False
        elif np.size(v):
            max_index = max(max_index, int(np.max(v)))
        if ix.shape.rank is None or d.shape.rank is None:
            continue
        r = ix.shape.rank
        if d.shape.rank < r or not _ts.TensorShape(d.shape.dim_values[:r]).is_compatible_with(ix.shape):
            raise ValueError(f"data[{i}].shape = {d.shape} does not start with indices[{i}].shape = "
                             f"{ix.shape}")
        rest = _ts.TensorShape(d.shape.dim_values[r:])
        if extra is not None and not extra.is_compatible_with(rest):
            raise ValueError(f"Inconsistent slice shapes in DynamicStitch: {extra} vs. {rest}")
        extra = rest if extra is None else extra.merge_with(rest)
    if extra is None:
        return [_ts.TensorShape(None)]
    return [_ts.TensorShape([max_index + 1 if all_const else None]).concatenate(extra)]


for _name, _doc in (("DynamicStitch", "Interleaves the values of `data` into one tensor: "
                     "merged[indices[m][i]] = data[m][i] (later indices win)."),
                    ("ParallelDynamicStitch", "Like DynamicStitch; with duplicate indices any one "
                     "of the values may win.")):
    register_op(_name, inputs=["indices: N * int32", "data: N * T"], outputs=["merged: T"],
                attrs=["N: int >= 1", "T: type"], shape_fn=_stitch_shape, doc=_doc)


def dynamic_stitch(indices, data, name=None):
    """Interleaves `data` into one tensor: merged[indices[m][i], ...] = data[m][i, ...].

    The output's first dimension is max(indices) + 1; later occurrences of an index win.
    """
    return apply_op("DynamicStitch", [list(indices), list(data)], name=name).outputs[0]


def parallel_dynamic_stitch(indices, data, name=None):
    """Like `dynamic_stitch`; which of duplicate indices wins is unspecified."""
    return apply_op("ParallelDynamicStitch", [list(indices), list(data)], name=name).outputs[0]


# ----------------------------------------------------------------------------- composites
def boolean_mask(tensor, mask, name="boolean_mask", axis=None):
    """Keeps the entries of `tensor` where `mask` is True (TF1 `tf.boolean_mask`).

    `mask`'s shape must match tensor.shape[axis:axis + mask.ndim]; those dimensions are flattened
    into one of the selected entries' count.

    Raises:
        ValueError: if mask's rank is unknown or 0, or its shape does not fit `tensor`'s.
    """
    from kernflow.core.ops import array_ops as a
    with _ops.name_scope(name, values=[tensor, mask]):
        tensor = _ops.convert_to_tensor(tensor, name="tensor")
        mask = _ops.convert_to_tensor(mask, name="mask")
        shape_mask = mask.shape
        nm = shape_mask.rank
        if nm is None:
            raise ValueError("Number of mask dimensions must be specified, even if some dimensions "
                             "are None. E.g. shape=[None] is ok, but shape=None is not.")
        if nm == 0:
            raise ValueError("mask cannot be scalar.")
        axis = 0 if axis is None else axis
        st = tensor.shape
        if st.rank is not None:
            if axis < 0:
                axis += st.rank
            if axis + nm > st.rank:
                raise ValueError(f"mask of rank {nm} does not fit tensor of shape {st} at axis {axis}")
            _ts.TensorShape(st.dim_values[axis:axis + nm]).assert_is_compatible_with(shape_mask)
        elif axis < 0:
            raise ValueError("A negative axis needs a tensor of known rank")
        if st.rank is not None and all(d is not None for d in st.dim_values[axis:axis + nm]):
            lead = int(np.prod(st.dim_values[axis:axis + nm], dtype=np.int64))
        else:
            lead = -1
        if st.is_fully_defined():
            new_shape = list(st.dim_values[:axis]) + [lead] + list(st.dim_values[axis + nm:])
        else:
            full = a.shape(tensor)
            parts = []
            if axis:
                parts.append(a.strided_slice(full, [0], [axis]))
            parts.append(a.constant([lead], _dtypes.int32))
            parts.append(a.strided_slice(full, [axis + nm], [0], end_mask=1))
            new_shape = a.concat(parts, 0)
        flat = a.reshape(tensor, new_shape)
        if st.rank is not None:
            nd = list(st.dim_values[:axis]) + [None if lead < 0 else lead] + list(st.dim_values[axis + nm:])
            flat.set_shape(nd)
        m = a.reshape(mask, [-1])
        where = apply_op("Where", [m]).outputs[0]
        idx = a.squeeze(where, axis=[1])
        return a.gather(flat, idx, axis=axis)


def sequence_mask(lengths, maxlen=None, dtype=_dtypes.bool, name=None):
    """Returns mask[..., j] = j < lengths[...] (shape lengths.shape + [maxlen]).

    Args:
        lengths: integer tensor of lengths.
        maxlen: the mask's last dimension (default: max(lengths)).
        dtype: the mask's type (default bool).
    """
    from kernflow.core.ops import array_ops as a
    with _ops.name_scope(name, "SequenceMask", [lengths, maxlen]):
        lengths = _ops.convert_to_tensor(lengths)
        if maxlen is None:
            r = lengths.shape.rank
            axes = list(range(r)) if r is not None else a.range(a.rank(lengths))
            maxlen = apply_op("Max", [lengths, axes]).outputs[0]
            maxlen = apply_op("Maximum", [_ops.convert_to_tensor(0, lengths.dtype), maxlen]).outputs[0]
        else:
            maxlen = _ops.convert_to_tensor(maxlen)
            maxlen.shape.assert_has_rank(0)
        row = a.range(0, maxlen, 1, dtype=maxlen.dtype)
        lens = a.expand_dims(lengths, -1)
        if lens.dtype.base_dtype != row.dtype.base_dtype:
            lens = apply_op("Cast", [lens], {"DstT": row.dtype.base_dtype}).outputs[0]
        result = apply_op("Less", [row, lens]).outputs[0]
        if lengths.shape.rank is not None:
            result.set_shape(lengths.shape.concatenate([partial_scalar(maxlen)]))
        if _dtypes.as_dtype(dtype).base_dtype == _dtypes.bool:
            return result
        return apply_op("Cast", [result], {"DstT": _dtypes.as_dtype(dtype)}).outputs[0]
