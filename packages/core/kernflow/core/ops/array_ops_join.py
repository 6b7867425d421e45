"""Array ops that join, split, tile, pad and reverse: ConcatV2, Pack, Unpack, Split, SplitV, Tile,
Pad, PadV2, MirrorPad, ReverseV2 and OneHot.

Re-exported by `kernflow.core.ops.array_ops`; kernels in kernflow.kernels.cpu.array.
"""

from __future__ import annotations

import numbers

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops.array_ops_common import (index_arg, is_tensorlike, normalize_axis, partial_scalar,
                                                partial_value)

__all__ = ["concat", "stack", "unstack", "split", "tile", "pad", "reverse", "reverse_v2", "one_hot"]

_INDEX = "{int32, int64} = int32"


def _merge_dim(a, b, i, sa, sb):
    if a is not None and b is not None and a != b:
        raise ValueError(f"Dimension {i} in both shapes must be equal, but are {a} and {b}. "
                         f"Shapes are {sa} and {sb}.")
    return a if a is not None else b


# ----------------------------------------------------------------------------- ConcatV2
def _concat_shape(op):
    values, axis_t = op.inputs[:-1], op.inputs[-1]
    axis_t.shape.with_rank(0)
    known = [v.shape for v in values if v.shape.rank is not None]
    if not known:
        return [_ts.TensorShape(None)]
    r = known[0].rank
    for s in known:
        if s.rank != r:
            raise ValueError(f"Shape must be rank {r} but is rank {s.rank}")
    if r == 0:
        raise ValueError("Can't concatenate scalars (use tf.stack instead)")
    axis = partial_scalar(axis_t)
    if axis is None:
        return [_ts.TensorShape([None] * r)]
    if not -r <= axis < r:
        raise ValueError(f"ConcatOp : Expected concatenating dimensions in the range [{-r}, {r}), "
                         f"but got {axis}")
    a = axis + r if axis < 0 else axis
    out = [None] * r
    total = 0
    first = known[0]
    for s in known:
        for i, d in enumerate(s.dim_values):
            if i != a:
                out[i] = _merge_dim(out[i], d, i, first, s)
    for v in values:
        d = v.shape.dim_values[a] if v.shape.rank is not None else None
        total = None if total is None or d is None else total + d
    out[a] = total
    return [_ts.TensorShape(out)]


register_op("ConcatV2", inputs=["values: N * T", "axis: Tidx"], outputs=["output: T"],
            attrs=["N: int >= 2", "T: type", "Tidx: " + _INDEX], shape_fn=_concat_shape,
            doc="Concatenates the N tensors along dimension `axis`.")


def concat(values, axis, name="concat"):
    """Concatenates a list of tensors along `axis` (a single tensor is returned via Identity).

    Raises:
        ValueError: statically, if ranks or the non-concatenated dims differ.
    """
    if not isinstance(values, (list, tuple)):
        values = [values]
    if len(values) == 1:
        with _ops.name_scope(name) as scope:
            a = _ops.convert_to_tensor(axis, name="concat_dim", dtype=_dtypes.int32)
            a.shape.assert_has_rank(0)
            return apply_op("Identity", [values[0]], name=scope).outputs[0]
    return apply_op("ConcatV2", [list(values), axis], name=name).outputs[0]


# ----------------------------------------------------------------------------- Pack / Unpack
def _pack_shape(op):
    merged = _ts.TensorShape(None)
    for t in op.inputs:
        s = t.shape
        if merged.rank is not None and s.rank is not None and merged.rank != s.rank:
            raise ValueError(f"Shapes must be equal rank, but are {merged.rank} and {s.rank}")
        if merged.rank is not None and s.rank is not None:
            merged = _ts.TensorShape([_merge_dim(a, b, i, merged, s)
                                      for i, (a, b) in enumerate(zip(merged.dim_values, s.dim_values))])
        elif s.rank is not None:
            merged = s
    if merged.rank is None:
        return [_ts.TensorShape(None)]
    r = merged.rank + 1
    axis = op.get_attr("axis")
    if not -r <= axis < r:
        raise ValueError(f"Invalid axis: {axis}; must be in [{-r},{r})")
    dims = list(merged.dim_values)
    dims.insert(axis + r if axis < 0 else axis, len(op.inputs))
    return [_ts.TensorShape(dims)]


register_op("Pack", inputs=["values: N * T"], outputs=["output: T"],
            attrs=["N: int >= 1", "T: type", "axis: int = 0"], shape_fn=_pack_shape,
            doc="Stacks N tensors of one shape into a tensor one rank higher, along `axis`.")


def _unpack_shape(op):
    s = op.inputs[0].shape
    num, axis = op.get_attr("num"), op.get_attr("axis")
    if s.rank is None:
        return [_ts.TensorShape(None)] * num
    a = normalize_axis(axis, s.rank, "axis") if s.rank else None
    if a is None:
        raise ValueError("Can not unpack a scalar (rank 0)")
    d = s.dim_values[a]
    if d is not None and d != num:
        raise ValueError(f"Dimension must be {num} but is {d}")
    out = _ts.TensorShape(s.dim_values[:a] + s.dim_values[a + 1:])
    return [out] * num


register_op("Unpack", inputs=["value: T"], outputs=["output: num * T"],
            attrs=["num: int >= 0", "T: type", "axis: int = 0"], shape_fn=_unpack_shape,
            doc="Splits `value` along `axis` into `num` tensors one rank lower.")


def stack(values, axis=0, name="stack"):
    """Stacks a list of rank-R tensors into one rank-(R+1) tensor (TF1 `tf.stack`).

    Args:
        values: a list of tensors (or values) of one shape and dtype.
        axis: the new dimension's index in [-(R+1), R+1).

    Raises:
        ValueError: if `axis` is out of range or the shapes differ.
    """
    if axis == 0 and not _has_tensor(values):
        try:
            return _ops.convert_to_tensor(values, name=name)
        except (TypeError, ValueError):
            pass
    first = values[0]
    r = first.shape.rank if isinstance(first, _ops.Tensor) else (
        None if is_tensorlike(first) or _has_tensor(first) else np.ndim(first))
    if r is not None and not -(r + 1) <= axis < r + 1:
        raise ValueError(f"Argument `axis` = {axis} not in range [{-(r + 1)}, {r + 1})")
    return apply_op("Pack", [list(values)], {"axis": axis}, name=name).outputs[0]


def _has_tensor(v) -> bool:
    if isinstance(v, (list, tuple)):
        return any(_has_tensor(x) for x in v)
    return is_tensorlike(v)


def unstack(value, num=None, axis=0, name="unstack"):
    """Splits `value` along `axis` into a list of rank-(R-1) tensors.

    Raises:
        ValueError: if `num` is None and the size of `axis` is not known statically.
    """
    if num is None:
        value = _ops.convert_to_tensor(value)
        s = value.shape
        if s.rank is not None:
            if not -s.rank <= axis < s.rank:
                raise ValueError(f"Argument `axis` = {axis} not in range [{-s.rank}, {s.rank})")
            num = s.dim_values[axis]
        if num is None:
            raise ValueError(f"Cannot infer argument `num` from shape {s}")
    return list(apply_op("Unpack", [value], {"num": num, "axis": axis}, name=name).outputs)


# ----------------------------------------------------------------------------- Split / SplitV
def _split_shape(op):
    axis = partial_scalar(op.inputs[0])
    s = op.inputs[1].shape
    n = op.get_attr("num_split")
    if s.rank is None:
        return [_ts.TensorShape(None)] * n
    if axis is None:
        return [_ts.TensorShape([None] * s.rank)] * n
    a = normalize_axis(axis, s.rank, "split_dim")
    dims = list(s.dim_values)
    d = dims[a]
    if d is not None:
        if d % n:
            raise ValueError(f"Dimension size must be evenly divisible by {n} but is {d}")
        dims[a] = d // n
    return [_ts.TensorShape(dims)] * n


register_op("Split", inputs=["split_dim: int32", "value: T"], outputs=["output: num_split * T"],
            attrs=["num_split: int >= 1", "T: type"], shape_fn=_split_shape,
            doc="Splits `value` along `split_dim` into num_split equal pieces.")


def _split_v_shape(op):
    s = op.inputs[0].shape
    n = op.get_attr("num_split")
    sizes = partial_value(op.inputs[1])
    axis = partial_scalar(op.inputs[2])
    if sizes is not None and len(sizes) != n:
        raise ValueError(f"Length of size_splits should be equal to num_split, got {len(sizes)} "
                         f"and {n}")
    if s.rank is None:
        return [_ts.TensorShape(None)] * n
    if axis is None:
        return [_ts.TensorShape([None] * s.rank)] * n
    a = normalize_axis(axis, s.rank, "split_dim")
    if sizes is None:
        sizes = [None] * n
    d = s.dim_values[a]
    if sum(1 for x in sizes if x == -1) > 1:
        raise ValueError("size_splits can contain at most one -1 (the inferred size)")
    if all(x is not None for x in sizes) and d is not None:
        known = sum(x for x in sizes if x != -1)
        if -1 in sizes:
            if known > d:
                raise ValueError(f"Determined shape must either match input shape along split_dim "
                                 f"exactly if fully specified, or be less than the size of the input "
                                 f"along split_dim if not fully specified.  Got: {known}")
            sizes = [d - known if x == -1 else x for x in sizes]
        elif known != d:
            raise ValueError(f"Determined shape must either match input shape along split_dim exactly "
                             f"if fully specified, or be less than the size of the input along "
                             f"split_dim if not fully specified.  Got: {known}")
    out = []
    for x in sizes:
        dims = list(s.dim_values)
        dims[a] = None if x is None or x < 0 else x
        out.append(_ts.TensorShape(dims))
    return out


register_op("SplitV", inputs=["value: T", "size_splits: Tlen", "split_dim: int32"],
            outputs=["output: num_split * T"],
            attrs=["num_split: int >= 1", "T: type", "Tlen: {int8, int32, int64} = int64"],
            shape_fn=_split_v_shape,
            doc="Splits `value` along `split_dim` into pieces of the sizes in size_splits (one may be -1).")


def split(value, num_or_size_splits, axis=0, num=None, name="split"):
    """Splits `value` into sub-tensors along `axis`.

    Args:
        value: the tensor to split.
        num_or_size_splits: an int (that many equal pieces: op Split) or a 1-D list/tensor of sizes
            (op SplitV; one size may be -1).
        axis: the dimension to split.
        num: the number of pieces when it cannot be inferred from `num_or_size_splits`.

    Returns:
        A list of tensors.

    Raises:
        ValueError: if the number of pieces cannot be inferred.
    """
    if isinstance(num_or_size_splits, _ts.Dimension):
        num_or_size_splits = num_or_size_splits.value
    if isinstance(num_or_size_splits, numbers.Integral) and not isinstance(num_or_size_splits, bool):
        return list(apply_op("Split", [axis, value], {"num_split": int(num_or_size_splits)},
                             name=name).outputs)
    sizes = _ops.convert_to_tensor(index_arg(num_or_size_splits))
    if sizes.shape.rank == 0:
        raise ValueError("Rank-0 tensors are not supported as the num_or_size_splits argument to "
                         f"split. Argument provided: {num_or_size_splits}")
    if num is None:
        if sizes.shape.rank == 1 and sizes.shape.dim_values[0] is not None:
            num = sizes.shape.dim_values[0]
        else:
            raise ValueError(f"Cannot infer argument `num` from shape {sizes.shape}")
    return list(apply_op("SplitV", [value, sizes, axis], {"num_split": num}, name=name).outputs)


# ----------------------------------------------------------------------------- Tile
def _tile_shape(op):
    s = op.inputs[0].shape
    m_t = op.inputs[1]
    m_t.shape.with_rank(1)
    mult = partial_value(m_t)
    if mult is not None and s.rank is not None and len(mult) != s.rank:
        raise ValueError(f"Expected multiples argument to be a vector of length {s.rank} but got "
                         f"length {len(mult)}")
    if s.rank is None:
        return [_ts.TensorShape(None if mult is None else [None] * len(mult))]
    if mult is None:
        return [_ts.TensorShape([None] * s.rank)]
    return [_ts.TensorShape([None if d is None or m is None else d * m
                             for d, m in zip(s.dim_values, mult)])]


register_op("Tile", inputs=["input: T", "multiples: Tmultiples"], outputs=["output: T"],
            attrs=["T: type", "Tmultiples: " + _INDEX], shape_fn=_tile_shape,
            doc="Repeats `input` multiples[i] times along each dimension i.")


def tile(input, multiples, name=None):  # noqa: A002 - TF's argument name
    """Tiles `input`: output dim i is input dim i * multiples[i]."""
    return apply_op("Tile", [input, index_arg(multiples)], name=name).outputs[0]


# ----------------------------------------------------------------------------- Pad
def _pad_shape(op):
    s = op.inputs[0].shape
    p_t = op.inputs[1]
    ps = p_t.shape.with_rank(2)
    if ps.dim_values[1] is not None and ps.dim_values[1] != 2:
        raise ValueError(f"Dimension 1 of paddings must be 2, got {ps.dim_values[1]}")
    n = ps.dim_values[0]
    if s.rank is not None and n is not None and n != s.rank:
        raise ValueError(f"The first dimension of paddings must be the rank of inputs: {n} vs. "
                         f"{s.rank}")
    r = s.rank if s.rank is not None else n
    if len(op.inputs) > 2:
        op.inputs[2].shape.with_rank(0)
    if r is None:
        return [_ts.TensorShape(None)]
    pv = tensor_util.constant_value(p_t)
    if pv is None:
        return [_ts.TensorShape([None] * r)]
    pv = np.reshape(pv, (-1, 2))
    if np.any(pv < 0):
        raise ValueError(f"Paddings must be non-negative: {pv.tolist()}")
    if s.rank is None:
        return [_ts.TensorShape([None] * r)]
    return [_ts.TensorShape([None if d is None else d + int(pv[i, 0]) + int(pv[i, 1])
                             for i, d in enumerate(s.dim_values)])]


register_op("Pad", inputs=["input: T", "paddings: Tpaddings"], outputs=["output: T"],
            attrs=["T: type", "Tpaddings: " + _INDEX], shape_fn=_pad_shape,
            doc="Pads `input` with zeros: paddings[i] = [before, after] for dimension i.")
register_op("PadV2", inputs=["input: T", "paddings: Tpaddings", "constant_values: T"],
            outputs=["output: T"], attrs=["T: type", "Tpaddings: " + _INDEX], shape_fn=_pad_shape,
            doc="Pads `input` with the scalar `constant_values`.")
register_op("MirrorPad", inputs=["input: T", "paddings: Tpaddings"], outputs=["output: T"],
            attrs=["T: type", "Tpaddings: " + _INDEX, "mode: {'REFLECT', 'SYMMETRIC'}"],
            shape_fn=_pad_shape,
            doc="Pads `input` with mirrored values (REFLECT excludes the border, SYMMETRIC repeats it).")


def pad(tensor, paddings, mode="CONSTANT", name=None, constant_values=0):
    """Pads a tensor (TF1 `tf.pad`).

    Args:
        tensor: the tensor to pad.
        paddings: int [rank, 2] tensor: how many values before and after each dimension.
        mode: "CONSTANT", "REFLECT" or "SYMMETRIC" (case-insensitive).
        constant_values: the scalar fill for CONSTANT mode.

    Raises:
        ValueError: for an unknown mode.
    """
    m = mode.upper()
    if m == "CONSTANT":
        if not is_tensorlike(constant_values) and np.ndim(constant_values) == 0 and \
                constant_values == np.zeros_like(constant_values):
            return apply_op("Pad", [tensor, index_arg(paddings)], name=name).outputs[0]
        return apply_op("PadV2", [tensor, index_arg(paddings), constant_values], name=name).outputs[0]
    if m in ("REFLECT", "SYMMETRIC"):
        return apply_op("MirrorPad", [tensor, index_arg(paddings)], {"mode": m}, name=name).outputs[0]
    raise ValueError('Value of argument `mode` expected to be one of "CONSTANT", "REFLECT", or '
                     f'"SYMMETRIC". Received `mode` = {mode}')


# ----------------------------------------------------------------------------- ReverseV2
def _reverse_shape(op):
    s = op.inputs[0].shape
    op.inputs[1].shape.with_rank(1)
    axes = tensor_util.constant_value(op.inputs[1])
    if axes is not None and s.rank is not None:
        seen = set()
        for i, a in enumerate(np.reshape(axes, -1)):
            a = int(a)
            if not -s.rank <= a < s.rank:
                raise ValueError(f"'axis'[{i}] = {a} is out of valid range [{-s.rank}, {s.rank})")
            a = a + s.rank if a < 0 else a
            if a in seen:
                raise ValueError(f"axis {a} specified more than once.")
            seen.add(a)
    return [s]


register_op("ReverseV2", inputs=["tensor: T", "axis: Tidx"], outputs=["output: T"],
            attrs=["Tidx: " + _INDEX, "T: type"], shape_fn=_reverse_shape,
            doc="Reverses `tensor` along each dimension listed in `axis`.")


def reverse(tensor, axis, name=None):
    """Reverses `tensor` along the dimensions in the 1-D list `axis` (op ReverseV2)."""
    return apply_op("ReverseV2", [tensor, index_arg(axis)], name=name).outputs[0]


reverse_v2 = reverse


# ----------------------------------------------------------------------------- OneHot
def _one_hot_shape(op):
    s = op.inputs[0].shape
    axis = op.get_attr("axis")
    if axis < -1:
        raise ValueError(f"axis must be >= -1, got {axis}")
    op.inputs[1].shape.with_rank(0)
    for t in op.inputs[2:]:
        t.shape.with_rank(0)
    depth = partial_scalar(op.inputs[1])
    if depth is not None and depth < 0:
        raise ValueError(f"depth must be non-negative, got: {depth}")
    if s.rank is None:
        return [_ts.TensorShape(None)]
    if axis > s.rank:
        raise ValueError(f"axis must be in [-1, {s.rank}], got {axis}")
    dims = list(s.dim_values)
    dims.insert(s.rank if axis == -1 else axis, depth)
    return [_ts.TensorShape(dims)]


register_op("OneHot", inputs=["indices: TI", "depth: int32", "on_value: T", "off_value: T"],
            outputs=["output: T"],
            attrs=["axis: int = -1", "T: type", "TI: {uint8, int8, int32, int64} = int64"],
            shape_fn=_one_hot_shape,
            doc="One-hot encoding: on_value where the new `axis` index equals indices, else off_value.")


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    """Returns a one-hot tensor (TF1 `tf.one_hot`).

    Args:
        indices: integer tensor; out-of-range entries give all-off rows.
        depth: number of classes.
        on_value, off_value: scalars (default 1 and 0 of `dtype`).
        axis: where the new dimension goes (default -1, the end).
        dtype: output type (default: on/off values' type, else float32).

    Raises:
        TypeError: if on_value, off_value and dtype disagree.
    """
    with _ops.name_scope(name, "one_hot", [indices, depth, on_value, off_value]) as scope:
        on_t = _ops.convert_to_tensor(on_value, dtype=dtype, name="on_value") \
            if on_value is not None else None
        off_t = _ops.convert_to_tensor(off_value, dtype=dtype, name="off_value") \
            if off_value is not None else None
        on_dt = on_t.dtype.base_dtype if on_t is not None else None
        off_dt = off_t.dtype.base_dtype if off_t is not None else None
        if on_t is not None or off_t is not None:
            if dtype is not None:
                dtype = _dtypes.as_dtype(dtype).base_dtype
                for d, what in ((on_dt, "on_value"), (off_dt, "off_value")):
                    if d is not None and d != dtype:
                        raise TypeError(f"dtype {d.name} of {what} does not match dtype parameter "
                                        f"{dtype.name}")
            else:
                dtype = on_dt or off_dt
        else:
            dtype = _dtypes.as_dtype(dtype).base_dtype if dtype is not None else _dtypes.float32
        if on_dt is not None and off_dt is not None and on_dt != off_dt:
            raise TypeError(f"dtype {on_dt.name} of on_value does not match dtype {off_dt.name} of "
                            f"off_value")
        if on_t is None:
            on_t = _ops.convert_to_tensor(True if dtype == _dtypes.bool else 1, dtype=dtype,
                                          name="on_value")
        if off_t is None:
            off_t = _ops.convert_to_tensor(False if dtype == _dtypes.bool else 0, dtype=dtype,
                                           name="off_value")
        return apply_op("OneHot", [index_arg(indices), depth, on_t, off_t],
                        {"axis": -1 if axis is None else axis}, name=scope).outputs[0]


# ----------------------------------------------------------------------------- static values
def _cv(t):
    return tensor_util.constant_value(t)


@tensor_util.register_constant_value("ConcatV2")
def _concat_value(op):
    vals = [_cv(t) for t in op.inputs]
    if any(v is None for v in vals):
        return None
    try:
        return np.concatenate(vals[:-1], axis=int(vals[-1]))
    except ValueError:
        return None


@tensor_util.register_constant_value("Tile")
def _tile_value(op):
    v, m = _cv(op.inputs[0]), _cv(op.inputs[1])
    if v is None or m is None or np.size(m) != v.ndim or v.size * np.prod(m) > 10000:
        return None
    return np.tile(v, [int(x) for x in np.reshape(m, -1)])


@tensor_util.register_constant_value("ReverseV2")
def _reverse_value(op):
    v, a = _cv(op.inputs[0]), _cv(op.inputs[1])
    if v is None or a is None:
        return None
    return np.flip(v, tuple(int(x) for x in np.reshape(a, -1))) if v.ndim else v

