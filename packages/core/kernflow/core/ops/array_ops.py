"""Array ops: constants, placeholders, identity, shapes, reshaping, slicing, gathering.

OpDefs and wrappers; CPU kernels are in kernflow.kernels.cpu.array, gradients in
kernflow.core.grads.array_grad.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op
from kernflow.core.ops import common_shapes

__all__ = ["constant", "placeholder", "placeholder_with_default", "identity"]  # + the submodules' below

register_op("Const", outputs=["output: dtype"], attrs=["value: tensor", "dtype: type"],
            shape_fn=lambda op: [op.get_attr("value").shape],
            doc="A constant tensor: the `value` attr.")
register_op("Placeholder", outputs=["output: dtype"], attrs=["dtype: type", "shape: shape = unknown"],
            shape_fn=lambda op: [op.get_attr("shape")],
            doc="A value that must be fed when the graph runs; running it unfed is an error.")
register_op("PlaceholderWithDefault", inputs=["input: dtype"], outputs=["output: dtype"],
            attrs=["dtype: type", "shape: shape"], shape_fn=lambda op: [op.get_attr("shape")],
            doc="Passes `input` through unless a value is fed.")
register_op("Identity", inputs=["input: T"], outputs=["output: T"], attrs=["T: type"],
            shape_fn=common_shapes.unchanged, doc="Returns its input unchanged.")
register_op("Snapshot", inputs=["input: T"], outputs=["output: T"], attrs=["T: type"],
            shape_fn=common_shapes.unchanged,
            doc="A copy of its input (the arithmetic simplification's `x + 0`).")
# Executor-level ops: feeds, fetches and cross-device transfers.
register_op("_Arg", outputs=["output: T"], attrs=["T: type", "index: int >= 0"],
            shape_fn=common_shapes.unknown, doc="A feed: the value at `index` of the step's call frame.")
register_op("_Retval", inputs=["input: T"], attrs=["T: type", "index: int >= 0"],
            shape_fn=lambda op: [], doc="A fetch: stores `input` at `index` of the step's call frame.")
register_op("_Send", inputs=["tensor: T"],
            attrs=["T: type", "tensor_name: string", "send_device: string",
                   "send_device_incarnation: int", "recv_device: string",
                   "client_terminated: bool = false"],
            shape_fn=lambda op: [], stateful=True,
            doc="Sends `tensor` to recv_device through the step's rendezvous.")
register_op("_Recv", outputs=["tensor: T"],
            attrs=["T: type", "tensor_name: string", "send_device: string",
                   "send_device_incarnation: int", "recv_device: string",
                   "client_terminated: bool = false"],
            shape_fn=common_shapes.unknown, stateful=True,
            doc="Receives a tensor sent by the matching _Send (asynchronous: holds no thread).")


def _const_conversion(value, dtype=None, name=None, as_ref=False):
    if isinstance(value, (list, tuple)) and _contains_tensor(value):
        return _autopack(value, dtype, name or "packed")
    return constant(value, dtype=dtype, name=name)


def _contains_tensor(value) -> bool:
    if isinstance(value, (list, tuple)):
        return any(_contains_tensor(v) for v in value)
    return isinstance(value, _ops.Tensor) or hasattr(value, "_as_graph_element")


def _first_tensor_dtype(value):
    if isinstance(value, (list, tuple)):
        for v in value:
            d = _first_tensor_dtype(v)
            if d is not None:
                return d
        return None
    if isinstance(value, _ops.Tensor) or hasattr(value, "_as_graph_element"):
        return _ops.convert_to_tensor(value).dtype.base_dtype
    return None


def _autopack(value, dtype, name):
    """Packs a (nested) list mixing Tensors and Python values into one tensor (Pack ops)."""
    dt = _dtypes.as_dtype(dtype).base_dtype if dtype is not None else _first_tensor_dtype(value)
    with _ops.name_scope(name) as scope:
        elems = []
        for i, v in enumerate(value):
            if isinstance(v, (list, tuple)) and _contains_tensor(v):
                elems.append(_autopack(v, dt, str(i)))
            elif isinstance(v, _ops.Tensor) or hasattr(v, "_as_graph_element"):
                elems.append(_ops.convert_to_tensor(v, dtype=dt))
            else:
                elems.append(constant(v, dtype=dt, name=str(i)) if dt is not None else v)
        return apply_op("Pack", [elems], {"axis": 0}, name=scope).outputs[0]


def constant(value, dtype=None, shape=None, name="Const", verify_shape=False):
    """Creates a constant tensor (TF1 `tf.constant`).

    Args:
        value: a Python value or numpy array; a scalar is broadcast to `shape` if given.
        dtype: element type (inferred from `value` when None: floats -> float32, ints -> int32).
        shape: optional shape; `value` is reshaped or broadcast to it.
        verify_shape: if True, `value`'s shape must equal `shape`.

    Raises:
        TypeError: if `value` does not fit `dtype`.
    """
    arr = tensor_util.to_numpy(value, dtype)
    if shape is not None:
        shape = [int(d) for d in _ts.as_shape(shape).as_list()]
        if verify_shape and list(arr.shape) != shape:
            raise TypeError(f"Expected Tensor's shape: {tuple(shape)}, got {arr.shape}.")
        if arr.size == int(np.prod(shape, dtype=np.int64)):
            arr = arr.reshape(shape)
        elif arr.size == 1:
            arr = np.broadcast_to(arr.reshape(()), shape).copy()
        else:
            raise TypeError(f"Eager execution of tf.constant with unsupported shape. Tensor "
                            f"{value!r} (converted from {value!r}) has {arr.size} elements, but got "
                            f"`shape` {tuple(shape)} with {int(np.prod(shape))} elements).")
    dt = _dtypes.as_dtype(dtype).base_dtype if dtype is not None else _dtypes.as_dtype(arr.dtype)
    g = _ops.get_default_graph()
    return g.create_op("Const", [], [dt], name=name, attrs={"value": arr, "dtype": dt}).outputs[0]


_ops.register_tensor_conversion_function((np.ndarray, np.generic, list, tuple, int, float, bool,
                                          complex, str, bytes), _const_conversion)


def placeholder(dtype, shape=None, name=None):
    """A tensor whose value must be fed (TF1 `tf.placeholder`).

    Running an op that needs it without a feed raises InvalidArgumentError naming it.
    """
    dt = _dtypes.as_dtype(dtype)
    return apply_op("Placeholder", [], {"dtype": dt, "shape": _ts.as_shape(shape)}, name=name).outputs[0]


def placeholder_with_default(input, shape, name=None):  # noqa: A002 - TF's argument name
    """A tensor that is `input` unless fed; a fed value must match `shape`."""
    t = _ops.convert_to_tensor(input)
    return apply_op("PlaceholderWithDefault", [t], {"dtype": t.dtype, "shape": _ts.as_shape(shape)},
                    name=name).outputs[0]


def identity(input, name=None):  # noqa: A002 - TF's argument name
    """Returns a tensor with the same value as `input`."""
    if hasattr(input, "_as_graph_element") and not isinstance(input, _ops.Tensor):
        input = input.value() if hasattr(input, "value") else input._as_graph_element()
    return apply_op("Identity", [input], name=name).outputs[0]


# The rest of the family lives in array_ops_*.py (each under ~800 lines); their public names are
# part of this module.
from kernflow.core.ops import array_ops_shape as _shape_mod  # noqa: E402
from kernflow.core.ops import array_ops_join as _join_mod  # noqa: E402
from kernflow.core.ops import array_ops_slice as _slice_mod  # noqa: E402
from kernflow.core.ops import array_ops_gather as _gather_mod  # noqa: E402
from kernflow.core.ops import array_ops_extra as _extra_mod  # noqa: E402

for _m in (_shape_mod, _join_mod, _slice_mod, _gather_mod, _extra_mod):
    for _n in _m.__all__:
        globals()[_n] = getattr(_m, _n)
    __all__ += _m.__all__
del _m, _n

# Internal helpers (not kf.* names) that gradient code reaches through array_ops, as in TF.
from kernflow.core.ops.array_ops_extra import (broadcast_gradient_args, concat_offset,  # noqa: E402,F401
                                               mirror_pad_grad, strided_slice_grad)
from kernflow.core.ops.array_ops_shape import _shape_internal as shape_internal  # noqa: E402,F401
