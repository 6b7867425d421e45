"""Array ops about shapes: Shape/Size/Rank, Fill and the zeros/ones family, Reshape, ExpandDims,
Squeeze, Transpose, BroadcastTo, StopGradient, IdentityN and Range.

Re-exported by `kernflow.core.ops.array_ops`; kernels in kernflow.kernels.cpu.array.
"""

from __future__ import annotations

import builtins

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops import common_shapes
from kernflow.core.ops.array_ops_common import index_arg, partial_shape

__all__ = ["shape", "shape_n", "size", "rank", "fill", "zeros", "ones", "zeros_like", "ones_like",
           "reshape", "expand_dims", "squeeze", "transpose", "matrix_transpose", "broadcast_to",
           "stop_gradient", "identity_n", "range"]

_brange = builtins.range
_INDEX = "{int32, int64} = int32"


def _constant(value, dtype=None, name="Const", shape=None):
    from kernflow.core.ops import array_ops
    return array_ops.constant(value, dtype=dtype, shape=shape, name=name)


# ----------------------------------------------------------------------------- Shape, Size, Rank
def _shape_shape(op):
    r = op.inputs[0].shape.rank
    return [_ts.TensorShape([r])]


register_op("Shape", inputs=["input: T"], outputs=["output: out_type"],
            attrs=["T: type", "out_type: " + _INDEX], shape_fn=_shape_shape,
            doc="Returns the shape of `input` as a 1-D integer tensor.")
register_op("ShapeN", inputs=["input: N * T"], outputs=["output: N * out_type"],
            attrs=["N: int >= 1", "T: type", "out_type: " + _INDEX],
            shape_fn=lambda op: [_ts.TensorShape([t.shape.rank]) for t in op.inputs],
            doc="Returns the shapes of the N input tensors.")
register_op("Size", inputs=["input: T"], outputs=["output: out_type"],
            attrs=["T: type", "out_type: " + _INDEX], shape_fn=common_shapes.scalar,
            doc="Returns the number of elements of `input`.")
register_op("Rank", inputs=["input: T"], outputs=["output: int32"], attrs=["T: type"],
            shape_fn=common_shapes.scalar, doc="Returns the number of dimensions of `input`.")


def _shape_internal(input, name=None, optimize=True, out_type=_dtypes.int32):  # noqa: A002
    with _ops.name_scope(name, "Shape", [input]) as scope:
        t = _ops.convert_to_tensor(input)
        if optimize and t.shape.is_fully_defined():
            return _constant(t.shape.as_list(), out_type, name=scope)
        return apply_op("Shape", [t], {"out_type": out_type}, name=scope).outputs[0]


def shape(input, name=None, out_type=_dtypes.int32):  # noqa: A002 - TF's argument name
    """Returns the shape of `input` as a 1-D tensor (a constant when it is fully known statically).

    Args:
        input: a tensor or value.
        name: op name (default "Shape").
        out_type: int32 (default) or int64.
    """
    return _shape_internal(input, name, optimize=True, out_type=out_type)


def shape_n(input, out_type=_dtypes.int32, name=None):  # noqa: A002
    """Returns the shapes of the tensors in list `input` (one ShapeN op)."""
    ts = [_ops.convert_to_tensor(x) for x in input]
    return list(apply_op("ShapeN", [ts], {"out_type": out_type}, name=name).outputs)


def size(input, name=None, out_type=_dtypes.int32):  # noqa: A002
    """Returns the number of elements of `input` (a scalar of `out_type`)."""
    with _ops.name_scope(name, "Size", [input]) as scope:
        t = _ops.convert_to_tensor(input)
        if t.shape.is_fully_defined():
            return _constant(t.shape.num_elements(), out_type, name=scope)
        return apply_op("Size", [t], {"out_type": out_type}, name=scope).outputs[0]


def rank(input, name=None):  # noqa: A002
    """Returns the rank of `input` (an int32 scalar; a constant when the rank is known)."""
    with _ops.name_scope(name, "Rank", [input]) as scope:
        t = _ops.convert_to_tensor(input)
        if t.shape.rank is not None:
            return _constant(t.shape.rank, _dtypes.int32, name=scope)
        return apply_op("Rank", [t], name=scope).outputs[0]


# ----------------------------------------------------------------------------- Fill, zeros, ones
def _fill_shape(op):
    op.inputs[0].shape.with_rank(1)
    op.inputs[1].shape.with_rank(0)
    s = partial_shape(op.inputs[0])
    v = tensor_util.constant_value(op.inputs[0])
    if v is not None and np.any(np.asarray(v) < 0):
        raise ValueError(f"Fill dimensions must be >= 0, got {np.asarray(v).tolist()}")
    return [s]


register_op("Fill", inputs=["dims: index_type", "value: T"], outputs=["output: T"],
            attrs=["T: type", "index_type: " + _INDEX], shape_fn=_fill_shape,
            doc="Creates a tensor of shape `dims` filled with the scalar `value`.")
register_op("ZerosLike", inputs=["x: T"], outputs=["y: T"], attrs=["T: type"],
            shape_fn=common_shapes.unchanged, doc="Returns a tensor of zeros shaped and typed like x.")
register_op("OnesLike", inputs=["x: T"], outputs=["y: T"],
            attrs=["T: {half, float, double, int8, int16, int32, int64, uint8, uint16, uint32, "
                   "uint64, complex64, complex128, bool}"],
            shape_fn=common_shapes.unchanged, doc="Returns a tensor of ones shaped and typed like x.")


def fill(dims, value, name=None):
    """Creates a tensor of shape `dims` filled with scalar `value`.

    Args:
        dims: 1-D int32/int64 tensor (or list) of non-negative dims.
        value: a scalar; its dtype is the output's.
    """
    return apply_op("Fill", [index_arg(dims), value], name=name).outputs[0]


def _zero_of(dtype):
    if dtype == _dtypes.bool:
        return False
    if dtype == _dtypes.string:
        return b""
    return 0


def _one_of(dtype):
    return True if dtype == _dtypes.bool else 1


def _filled(shape_, dtype, value, scope):
    if not isinstance(shape_, _ops.Tensor) and not _contains_tensor(shape_):
        if isinstance(shape_, (int, np.integer)):
            shape_ = [shape_]
        dims = _ts.as_shape(shape_)
        dims.assert_is_fully_defined()
        if dims.num_elements() < 1000:
            return _constant(value, dtype, shape=dims.as_list(), name=scope)
        shape_ = _constant(dims.as_list(), name="shape_as_tensor")
    else:
        shape_ = _ops.convert_to_tensor(shape_)
    if shape_.shape.rank == 0:
        shape_ = reshape(shape_, [-1])
    return fill(shape_, _constant(value, dtype), name=scope)


def _contains_tensor(v) -> bool:
    if isinstance(v, (list, tuple)):
        return any(_contains_tensor(x) for x in v)
    return isinstance(v, _ops.Tensor) or hasattr(v, "_as_graph_element")


def zeros(shape, dtype=_dtypes.float32, name=None):  # noqa: A002
    """Creates a tensor of zeros (TF1 `tf.zeros`).

    Args:
        shape: a list/tuple/TensorShape (gives a Const) or a 1-D int tensor (gives a Fill).
        dtype: element type (default float32).
        name: op name (default "zeros").
    """
    dtype = _dtypes.as_dtype(dtype).base_dtype
    with _ops.name_scope(name, "zeros", [shape] if isinstance(shape, _ops.Tensor) else []) as scope:
        return _filled(shape, dtype, _zero_of(dtype), scope)


def ones(shape, dtype=_dtypes.float32, name=None):
    """Creates a tensor of ones (TF1 `tf.ones`); see `zeros` for the arguments."""
    dtype = _dtypes.as_dtype(dtype).base_dtype
    with _ops.name_scope(name, "ones", [shape] if isinstance(shape, _ops.Tensor) else []) as scope:
        return _filled(shape, dtype, _one_of(dtype), scope)


def zeros_like(tensor, dtype=None, name=None, optimize=True):
    """Returns zeros with the shape of `tensor` (TF1 `tf.zeros_like`).

    Args:
        tensor: a tensor or value.
        dtype: output type (default: `tensor`'s).
        name: op name (default "zeros_like").
        optimize: if True and the shape is fully known, emit a constant.
    """
    with _ops.name_scope(name, "zeros_like", [tensor]) as scope:
        t = _ops.convert_to_tensor(tensor, name="tensor")
        dt = _dtypes.as_dtype(dtype).base_dtype if dtype is not None else t.dtype.base_dtype
        if optimize and t.shape.is_fully_defined():
            return zeros(t.shape, dtype=dt, name=scope)
        if dt != t.dtype.base_dtype:
            return zeros(_shape_internal(t, optimize=optimize), dtype=dt, name=scope)
        return apply_op("ZerosLike", [t], name=scope).outputs[0]


def ones_like(tensor, dtype=None, name=None, optimize=True):
    """Returns ones with the shape of `tensor` (TF1 `tf.ones_like`); arguments as `zeros_like`."""
    with _ops.name_scope(name, "ones_like", [tensor]) as scope:
        t = _ops.convert_to_tensor(tensor, name="tensor")
        dt = _dtypes.as_dtype(dtype).base_dtype if dtype is not None else t.dtype.base_dtype
        if optimize and t.shape.is_fully_defined():
            return ones(t.shape, dtype=dt, name=scope)
        if dt != t.dtype.base_dtype:
            out = ones(_shape_internal(t, optimize=optimize), dtype=dt, name=scope)
            out.set_shape(t.shape)
            return out
        return apply_op("OnesLike", [t], name=scope).outputs[0]


# ----------------------------------------------------------------------------- Reshape
def _reshape_shape(op):
    in_shape = op.inputs[0].shape
    op.inputs[1].shape.with_rank(1)
    out = partial_shape(op.inputs[1])
    if in_shape.rank is None or out.rank is None:
        return [out]
    dims = list(out.dim_values)
    out_unknown = [i for i, d in enumerate(dims) if d is None]
    in_unknown = [i for i, d in enumerate(in_shape.dim_values) if d is None]
    if len(out_unknown) > 1 or len(in_unknown) > 1:
        return [out]
    known_out = int(np.prod([d for d in dims if d is not None], dtype=np.int64))
    known_in = int(np.prod([d for d in in_shape.dim_values if d is not None], dtype=np.int64))
    shape_str = "[" + ",".join("-1" if d is None else str(d) for d in dims) + "]"
    if not in_unknown and not out_unknown:
        if known_in != known_out:
            raise ValueError(f"Cannot reshape a tensor with {known_in} elements to shape "
                             f"{shape_str} ({known_out} elements)")
    elif not in_unknown and known_out > 0:
        missing = known_in // known_out
        if missing * known_out != known_in:
            raise ValueError(f"Cannot reshape a tensor with {known_in} elements to shape "
                             f"{shape_str} (the number of elements is not a multiple of {known_out})")
        dims[out_unknown[0]] = missing
    elif in_unknown and not out_unknown and known_in != 0:
        if known_out % known_in != 0:
            raise ValueError(f"Cannot reshape a tensor with a multiple of {known_in} elements to "
                             f"shape {shape_str} ({known_out} elements)")
    elif in_unknown and out_unknown and known_in == known_out:
        dims[out_unknown[0]] = None  # same unknown dim as the input's
    return [_ts.TensorShape(dims)]


register_op("Reshape", inputs=["tensor: T", "shape: Tshape"], outputs=["output: T"],
            attrs=["T: type", "Tshape: " + _INDEX], shape_fn=_reshape_shape,
            doc="Reshapes `tensor` to `shape`; one entry of `shape` may be -1 (inferred).")


def reshape(tensor, shape, name=None):  # noqa: A002
    """Reshapes `tensor` to `shape` (one dim may be -1, inferred from the element count).

    Raises:
        ValueError: statically, when the element counts cannot match.
    """
    return apply_op("Reshape", [tensor, index_arg(shape)], name=name).outputs[0]


# ----------------------------------------------------------------------------- ExpandDims, Squeeze
def _expand_dims_shape(op):
    s = op.inputs[0].shape
    axis = tensor_util.constant_value(op.inputs[1])
    if s.rank is None:
        return [_ts.TensorShape(None)]
    if axis is None:
        return [_ts.TensorShape([None] * (s.rank + 1))]
    if np.size(axis) != 1:
        raise ValueError(f"'dim' input must be a tensor with a single value, got {np.asarray(axis).tolist()}")
    a = int(np.reshape(axis, -1)[0])
    if not -s.rank - 1 <= a <= s.rank:
        raise ValueError(f"Tried to expand dim index {a} for tensor with {s.rank} dimensions.")
    a = a + s.rank + 1 if a < 0 else a
    dims = list(s.dim_values)
    dims.insert(a, 1)
    return [_ts.TensorShape(dims)]


register_op("ExpandDims", inputs=["input: T", "dim: Tdim"], outputs=["output: T"],
            attrs=["T: type", "Tdim: " + _INDEX], shape_fn=_expand_dims_shape,
            doc="Inserts a dimension of size 1 at index `dim` (negative counts from the end).")


def expand_dims(input, axis=None, name=None, dim=None):  # noqa: A002
    """Inserts a dimension of 1 at `axis` (TF1 signature: `dim` is the deprecated alias).

    Raises:
        ValueError: if both or neither of `axis` and `dim` are given.
    """
    if axis is not None and dim is not None:
        raise ValueError("Cannot specify both 'axis' and 'dim'")
    if axis is None:
        axis = dim
    if axis is None:
        raise ValueError("Must specify an axis argument to tf.expand_dims()")
    return apply_op("ExpandDims", [input, axis], name=name).outputs[0]


def _squeeze_shape(op):
    s = op.inputs[0].shape
    sq = op.get_attr("squeeze_dims")
    if s.rank is None:
        return [_ts.TensorShape(None)]
    wanted = set()
    for d in sq:
        if not -s.rank <= d < s.rank:
            raise ValueError(f"Tried to squeeze dim index {d} for tensor with {s.rank} dimensions.")
        wanted.add(d + s.rank if d < 0 else d)
    out = []
    for i, d in enumerate(s.dim_values):
        if wanted:
            if i in wanted:
                if d is not None and d != 1:
                    raise ValueError(f"Can not squeeze dim[{i}], expected a dimension of 1, got {d}")
                continue
        elif d is None:
            return [_ts.TensorShape(None)]
        elif d == 1:
            continue
        out.append(d)
    return [_ts.TensorShape(out)]


register_op("Squeeze", inputs=["input: T"], outputs=["output: T"],
            attrs=["T: type", "squeeze_dims: list(int) = []"], shape_fn=_squeeze_shape,
            doc="Removes dimensions of size 1 (all of them, or those listed in `squeeze_dims`).")


def squeeze(input, axis=None, name=None, squeeze_dims=None):  # noqa: A002
    """Removes size-1 dimensions (those in `axis` if given; `squeeze_dims` is the old alias)."""
    if axis is not None and squeeze_dims is not None:
        raise ValueError("Cannot specify both 'axis' and 'squeeze_dims'")
    if axis is None:
        axis = squeeze_dims
    if axis is None:
        axis = []
    elif np.isscalar(axis):
        axis = [axis]
    return apply_op("Squeeze", [input], {"squeeze_dims": [int(a) for a in axis]}, name=name).outputs[0]


# ----------------------------------------------------------------------------- Transpose
def _transpose_shape(op):
    s = op.inputs[0].shape
    perm_t = op.inputs[1]
    perm_t.shape.with_rank(1)
    perm = tensor_util.constant_value(perm_t)
    n = perm_t.shape.dim_values[0] if perm_t.shape.rank == 1 else None
    if s.rank is not None and n is not None and n != s.rank:
        raise ValueError(f"Dimension must be {s.rank} but is {n}")
    r = s.rank if s.rank is not None else n
    if r is None:
        return [_ts.TensorShape(None)]
    if perm is None:
        return [_ts.TensorShape([None] * r)]
    perm = [int(p) for p in np.reshape(perm, -1)]
    norm = [p + r if p < 0 else p for p in perm]
    if sorted(norm) != list(_brange(r)):
        raise ValueError(f"perm {perm} is not a permutation of [0, {r})")
    if s.rank is None:
        return [_ts.TensorShape([None] * r)]
    return [_ts.TensorShape([s.dim_values[p] for p in norm])]


register_op("Transpose", inputs=["x: T", "perm: Tperm"], outputs=["y: T"],
            attrs=["T: type", "Tperm: " + _INDEX], shape_fn=_transpose_shape,
            doc="Permutes the dimensions of x: output dim i is input dim perm[i].")
register_op("ConjugateTranspose", inputs=["x: T", "perm: Tperm"], outputs=["y: T"],
            attrs=["T: type", "Tperm: " + _INDEX], shape_fn=_transpose_shape,
            doc="Transposes x by perm and takes the complex conjugate.")


def transpose(a, perm=None, name="transpose", conjugate=False):
    """Permutes the dimensions of `a` by `perm` (None reverses them).

    Args:
        a: a tensor.
        perm: permutation of `a`'s dimensions.
        conjugate: for complex `a`, also conjugate (ConjugateTranspose).
    """
    with _ops.name_scope(name, "transpose", [a]) as scope:
        a = _ops.convert_to_tensor(a, name="a")
        op_type = "ConjugateTranspose" if conjugate and a.dtype.is_complex else "Transpose"
        if perm is None:
            r = a.shape.rank
            if r is None:
                n = apply_op("Rank", [a]).outputs[0]
                fwd = apply_op("Range", [0, n, 1]).outputs[0]
                perm = apply_op("ReverseV2", [fwd, [0]]).outputs[0]
            else:
                perm = np.arange(r - 1, -1, -1, dtype=np.int32)
        return apply_op(op_type, [a, index_arg(perm)], name=scope).outputs[0]


def matrix_transpose(a, name="matrix_transpose", conjugate=False):
    """Transposes the last two dimensions of `a` (rank >= 2).

    Raises:
        ValueError: if `a`'s rank is known and below 2.
    """
    with _ops.name_scope(name, "matrix_transpose", [a]):
        a = _ops.convert_to_tensor(a, name="a")
        r = a.shape.rank
        if r is not None:
            if r < 2:
                raise ValueError(f"Argument `a` should be a (batch) matrix with rank >= 2.  "
                                 f"Received `a` = {a} with shape: {a.shape}")
            perm = list(_brange(r - 2)) + [r - 1, r - 2]
        else:
            n = apply_op("Rank", [a]).outputs[0]
            lead = apply_op("Range", [0, n - 2, 1]).outputs[0]
            perm = apply_op("ConcatV2", [[lead, apply_op("Pack", [[n - 1, n - 2]]).outputs[0]], 0]
                            ).outputs[0]
        return transpose(a, perm=perm, conjugate=conjugate)


# ----------------------------------------------------------------------------- BroadcastTo etc.
def _broadcast_to_shape(op):
    s = op.inputs[0].shape
    target = partial_shape(op.inputs[1])
    if target.rank is None or s.rank is None:
        return [target]
    if s.rank > target.rank:
        raise ValueError(f"Rank of input ({s.rank}) must be no greater than rank of output shape "
                         f"({target.rank}).")
    dims = list(target.dim_values)
    off = target.rank - s.rank
    for i, d in enumerate(s.dim_values):
        t = dims[off + i]
        if d is None or d == 1:
            continue
        if t is None:
            dims[off + i] = d
        elif t != d:
            raise ValueError(f"Incompatible shapes: {s} vs. {target}")
    return [_ts.TensorShape(dims)]


register_op("BroadcastTo", inputs=["input: T", "shape: Tidx"], outputs=["output: T"],
            attrs=["T: type", "Tidx: " + _INDEX], shape_fn=_broadcast_to_shape,
            doc="Broadcasts `input` to `shape` with numpy broadcasting rules.")
register_op("StopGradient", inputs=["input: T"], outputs=["output: T"], attrs=["T: type"],
            shape_fn=common_shapes.unchanged,
            doc="Returns its input; gradients do not flow through it.")
register_op("IdentityN", inputs=["input: T"], outputs=["output: T"], attrs=["T: list(type)"],
            shape_fn=lambda op: [t.shape for t in op.inputs],
            doc="Returns each of its inputs unchanged.")


def broadcast_to(input, shape, name=None):  # noqa: A002
    """Broadcasts `input` to `shape` (numpy rules)."""
    return apply_op("BroadcastTo", [input, index_arg(shape)], name=name).outputs[0]


def stop_gradient(input, name=None):  # noqa: A002
    """Returns `input`; gradients are not propagated through the result."""
    return apply_op("StopGradient", [input], name=name).outputs[0]


def identity_n(input, name=None):  # noqa: A002
    """Returns a list of tensors with the same values as the tensors in `input`."""
    ts = [_ops.convert_to_tensor(x) for x in input]
    if not ts:
        raise ValueError("identity_n needs at least one input")
    return list(apply_op("IdentityN", [ts], name=name).outputs)


# ----------------------------------------------------------------------------- Range
def range_size(start, limit, delta, np_dtype) -> int:
    """The length of Range(start, limit, delta) computed in `np_dtype`, or ValueError (TF's text)."""
    if delta == 0:
        raise ValueError(f"Requires delta != 0: {delta}")
    if delta > 0 and start > limit:
        raise ValueError(f"Requires start <= limit when delta > 0: {start}/{limit}")
    if delta < 0 and start < limit:
        raise ValueError(f"Requires start >= limit when delta < 0: {start}/{limit}")
    if np.dtype(np_dtype).kind in "iu":
        s, lim, d = int(start), int(limit), int(delta)
        return (abs(lim - s) + abs(d) - 1) // abs(d)
    s, lim, d = (np_dtype(x) for x in (start, limit, delta))
    return int(np.ceil(np.abs((lim - s) / d)))


def _range_shape(op):
    for t in op.inputs:
        t.shape.with_rank(0)
    vals = [tensor_util.constant_value(t) for t in op.inputs]
    if any(v is None for v in vals):
        return [_ts.TensorShape([None])]
    return [_ts.TensorShape([range_size(*vals, op.outputs[0].dtype.as_numpy_dtype)])]


register_op("Range", inputs=["start: Tidx", "limit: Tidx", "delta: Tidx"], outputs=["output: Tidx"],
            attrs=["Tidx: {float, double, int32, int64} = int32"], shape_fn=_range_shape,
            doc="The sequence start, start + delta, ... up to but excluding limit.")

_RANGE_ORDER = [_dtypes.int32, _dtypes.int64, _dtypes.float32, _dtypes.float64]


def range(start, limit=None, delta=1, dtype=None, name="range"):  # noqa: A001 - TF's name
    """Creates a 1-D sequence like Python's range (TF1 `tf.range`).

    Args:
        start: first value (or the limit when `limit` is None).
        limit: exclusive end.
        delta: step (non-zero).
        dtype: output type; inferred otherwise (all ints -> int32, any float -> float32).
    """
    if limit is None:
        start, limit = 0, start
    with _ops.name_scope(name, "Range", [start, limit, delta]) as scope:
        args = {"start": start, "limit": limit, "delta": delta}
        if dtype is not None:
            want = _dtypes.as_dtype(dtype).base_dtype
        else:
            found = []
            for v in args.values():
                d = v.dtype.base_dtype if isinstance(v, _ops.Tensor) else \
                    _dtypes.as_dtype(tensor_util.to_numpy(v).dtype)
                if d not in _RANGE_ORDER:
                    raise TypeError(f"Range does not support {d.name} arguments")
                found.append(d)
            want = max(found, key=_RANGE_ORDER.index)
        conv = []
        for k, v in args.items():
            if isinstance(v, _ops.Tensor):
                if v.dtype.base_dtype != want:
                    v = apply_op("Cast", [v], {"DstT": want}, name=k).outputs[0]
            else:
                v = _constant(v, want, name=k)
            conv.append(v)
        return apply_op("Range", conv, name=scope).outputs[0]


# ----------------------------------------------------------------------------- static values
def _cv(t):
    return tensor_util.constant_value(t)


@tensor_util.register_constant_value("Fill")
def _fill_value(op):
    d, v = _cv(op.inputs[0]), _cv(op.inputs[1])
    if d is None or v is None or np.size(d) > 8 or np.any(np.asarray(d) < 0):
        return None
    return np.full([int(x) for x in d], v, dtype=op.outputs[0].dtype.as_numpy_dtype)


def _like_value(fill_value):
    def fn(op):
        s = op.inputs[0].shape
        if not s.is_fully_defined() or s.num_elements() > 1000:
            return None
        return np.full(s.as_list(), fill_value, dtype=op.outputs[0].dtype.as_numpy_dtype)
    return fn


tensor_util.register_constant_value("ZerosLike")(_like_value(0))
tensor_util.register_constant_value("OnesLike")(_like_value(1))


@tensor_util.register_constant_value("Reshape")
def _reshape_value(op):
    v, s = _cv(op.inputs[0]), _cv(op.inputs[1])
    if v is None or s is None:
        return None
    try:
        return np.reshape(v, [int(x) for x in np.reshape(s, -1)])
    except ValueError:
        return None


@tensor_util.register_constant_value("ExpandDims")
def _expand_dims_value(op):
    v, a = _cv(op.inputs[0]), _cv(op.inputs[1])
    if v is None or a is None or np.size(a) != 1:
        return None
    a = int(np.reshape(a, -1)[0])
    return np.expand_dims(v, a) if -v.ndim - 1 <= a <= v.ndim else None


@tensor_util.register_constant_value("Squeeze")
def _squeeze_value(op):
    v = _cv(op.inputs[0])
    if v is None:
        return None
    try:
        return np.squeeze(v, axis=tuple(op.get_attr("squeeze_dims")) or None)
    except ValueError:
        return None


@tensor_util.register_constant_value("Transpose")
def _transpose_value(op):
    v, p = _cv(op.inputs[0]), _cv(op.inputs[1])
    if v is None or p is None or np.size(p) != v.ndim:
        return None
    return np.transpose(v, [int(x) for x in np.reshape(p, -1)])


@tensor_util.register_constant_value("BroadcastTo")
def _broadcast_to_value(op):
    v, s = _cv(op.inputs[0]), _cv(op.inputs[1])
    if v is None or s is None:
        return None
    try:
        return np.broadcast_to(v, [int(x) for x in np.reshape(s, -1)]).copy()
    except ValueError:
        return None


@tensor_util.register_constant_value("Range")
def _range_value(op):
    vals = [_cv(t) for t in op.inputs]
    if any(v is None for v in vals):
        return None
    npdt = op.outputs[0].dtype.as_numpy_dtype
    try:
        n = range_size(*vals, npdt)
    except ValueError:
        return None
    if n > 10000:
        return None
    return (np.asarray(vals[0], npdt) + np.arange(n, dtype=npdt) * np.asarray(vals[2], npdt)).astype(npdt)
