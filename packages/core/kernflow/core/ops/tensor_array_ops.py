"""TensorArray ops (TF1's V3 family) and `kf.TensorArray`, TF1's graph-mode TensorArray class.

A TensorArray is a per-step list of tensors of one dtype behind a ``resource`` handle. Every op that
changes it takes and returns a scalar float *flow*; threading the flow from op to op orders them
(a read made from a write's flow runs after that write), and while loops carry arrays as flows.
Each `TensorArray` method that writes returns a new `TensorArray` whose flow is the op's output.

Semantics (TF1's): an index may be written once (gradient arrays, made by `grad`, sum repeated
writes); reading an unwritten index gives zeros when the element shape is fully known, else fails;
with ``clear_after_read`` (the default) an index can be read only once; without ``dynamic_size``
indices must be below the size. Kernels (numpy) are in kernflow.kernels.cpu.tensor_array,
gradients in kernflow.core.grads.tensor_array_grad.

Example::

    ta = kf.TensorArray(kf.float32, size=3).unstack(x)   # x: [3, 2]
    y = ta.read(0) + ta.read(2)
    z = kf.TensorArray(kf.float32, size=2).write(0, a).write(1, b).stack()   # [2, ...]
"""

from __future__ import annotations

from kernflow.core.framework import device_spec as _device_spec
from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import errors
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op

__all__ = ["TensorArray"]

_SCALAR = _ts.TensorShape([])


def _scalar(t, what):
    try:
        t.shape.with_rank(0)
    except ValueError:
        raise ValueError(f"{what} must be a scalar, got shape {t.shape}") from None


def _vector(t, what):
    try:
        return t.shape.with_rank(1)
    except ValueError:
        raise ValueError(f"{what} must be a vector, got shape {t.shape}") from None


def _at_least_vector(t, what):
    try:
        t.shape.with_rank_at_least(1)
    except ValueError:
        raise ValueError(f"{what} must be at least a vector, got shape {t.shape}") from None


def _create_shape(op):
    _scalar(op.inputs[0], "size")
    return [_SCALAR, _SCALAR]


def _write_shape(op):
    _scalar(op.inputs[1], "index")
    _scalar(op.inputs[3], "flow_in")
    return [_SCALAR]


def _read_shape(op):
    _scalar(op.inputs[1], "index")
    _scalar(op.inputs[2], "flow_in")
    return [_ts.TensorShape(None)]


def _gather_shape(op):
    n = _vector(op.inputs[1], "indices")
    _scalar(op.inputs[2], "flow_in")
    return [n.concatenate(op.get_attr("element_shape"))]


def _scatter_shape(op):
    _vector(op.inputs[1], "indices")
    _at_least_vector(op.inputs[2], "value")
    _scalar(op.inputs[3], "flow_in")
    return [_SCALAR]


def _concat_shape(op):
    _scalar(op.inputs[1], "flow_in")
    return [_ts.TensorShape([None]).concatenate(op.get_attr("element_shape_except0")),
            _ts.TensorShape([None])]


def _split_shape(op):
    _at_least_vector(op.inputs[1], "value")
    _vector(op.inputs[2], "lengths")
    _scalar(op.inputs[3], "flow_in")
    return [_SCALAR]


def _size_shape(op):
    _scalar(op.inputs[1], "flow_in")
    return [_SCALAR]


def _grad_shape(op):
    _scalar(op.inputs[1], "flow_in")
    return [_SCALAR, _SCALAR]


register_op("TensorArrayV3", inputs=["size: int32"], outputs=["handle: resource", "flow: float"],
            attrs=["dtype: type", "element_shape: shape = unknown", "dynamic_size: bool = false",
                   "clear_after_read: bool = true", "identical_element_shapes: bool = false",
                   "tensor_array_name: string = ''"],
            shape_fn=_create_shape, stateful=True,
            doc="Creates a TensorArray of `size` elements of `dtype` for this step; returns its "
                "handle and a flow (0). `element_shape` constrains the elements; with "
                "`identical_element_shapes` the first write fixes it. `dynamic_size` lets writes "
                "grow the array; `clear_after_read` frees each element once read (a second read "
                "fails). `tensor_array_name` names it in errors (default: the node name).")
register_op("TensorArrayWriteV3", inputs=["handle: resource", "index: int32", "value: T",
                                          "flow_in: float"],
            outputs=["flow_out: float"], attrs=["T: type"], shape_fn=_write_shape, stateful=True,
            doc="Writes `value` at `index` (once; gradient arrays add repeated writes).")
register_op("TensorArrayReadV3", inputs=["handle: resource", "index: int32", "flow_in: float"],
            outputs=["value: dtype"], attrs=["dtype: type"], shape_fn=_read_shape, stateful=True,
            doc="Reads the element at `index` (zeros if unwritten and the element shape is fully "
                "known).")
register_op("TensorArrayGatherV3", inputs=["handle: resource", "indices: int32", "flow_in: float"],
            outputs=["value: dtype"], attrs=["dtype: type", "element_shape: shape = unknown"],
            shape_fn=_gather_shape, stateful=True,
            doc="Stacks the elements at `indices` (a vector) into one tensor [len(indices), ...]; "
                "they must have the same shape. `element_shape` gives the shape of an empty result.")
register_op("TensorArrayScatterV3", inputs=["handle: resource", "indices: int32", "value: T",
                                            "flow_in: float"],
            outputs=["flow_out: float"], attrs=["T: type"], shape_fn=_scatter_shape, stateful=True,
            doc="Writes `value[i]` at index `indices[i]` for each i.")
register_op("TensorArrayConcatV3", inputs=["handle: resource", "flow_in: float"],
            outputs=["value: dtype", "lengths: int64"],
            attrs=["dtype: type", "element_shape_except0: shape = unknown"],
            shape_fn=_concat_shape, stateful=True,
            doc="Concatenates all elements along their first dimension; `lengths` holds each "
                "element's first dimension. `element_shape_except0` gives the inner shape of an "
                "empty result.")
register_op("TensorArraySplitV3", inputs=["handle: resource", "value: T", "lengths: int64",
                                          "flow_in: float"],
            outputs=["flow_out: float"], attrs=["T: type"], shape_fn=_split_shape, stateful=True,
            doc="Splits `value` along its first dimension into pieces of `lengths` rows and writes "
                "piece i at index i.")
register_op("TensorArraySizeV3", inputs=["handle: resource", "flow_in: float"],
            outputs=["size: int32"], shape_fn=_size_shape, stateful=True,
            doc="Returns the current number of elements of the array.")
register_op("TensorArrayCloseV3", inputs=["handle: resource"], shape_fn=lambda op: [],
            stateful=True, doc="Closes the array, freeing its elements; later uses fail.")
register_op("TensorArrayGradV3", inputs=["handle: resource", "flow_in: float"],
            outputs=["grad_handle: resource", "flow_out: float"], attrs=["source: string"],
            shape_fn=_grad_shape, stateful=True,
            doc="Returns the gradient array of `handle` for the gradient computation `source`, "
                "created on first use with the same size and element shapes; writes to it add "
                "up. `flow_out` is `flow_in`.")

# Ops that pass a TensorArray handle on unchanged, walked back to find the op to colocate with.
_HANDLE_FORWARDING_OPS = ("Enter", "RefEnter", "Identity")


def _handle_root_op(handle):
    op = handle.op
    while op.type in _HANDLE_FORWARDING_OPS and op.inputs:
        op = op.inputs[0].op
    return op


class TensorArray:
    """TF1's graph-mode TensorArray: a list of tensors of one dtype, written and read by index.

    Methods that write (`write`, `scatter`, `unstack`, `split`, `identity`) return a new
    TensorArray sharing the handle, with the op's flow; keep using the returned object so later ops
    run after the write. All ops of one array are colocated with its handle op.
    """

    def __init__(self, dtype, size=None, dynamic_size=None, clear_after_read=None,
                 tensor_array_name=None, handle=None, flow=None, infer_shape=True,
                 element_shape=None, colocate_with_first_write_call=True, name=None):
        """Creates a TensorArray, or wraps an existing one given `handle` and `flow`.

        Args:
            dtype: the element dtype.
            size: int32 scalar, the initial number of elements (required without `handle`).
            dynamic_size: whether writes past the end grow the array (default False).
            clear_after_read: whether reading an element frees it (default True).
            tensor_array_name: the name used in error messages (default: the op name).
            handle: the resource handle of an existing array (with `flow`).
            flow: the flow of an existing array (float32 scalar).
            infer_shape: infer the element shape from the first write (and check later ones).
            element_shape: the known (possibly partial) shape of every element.
            colocate_with_first_write_call: place an unplaced array's ops on the device of the
                first value written.
            name: name scope of the created op.

        Raises:
            ValueError, TypeError: for inconsistent arguments (as TF).
        """
        if handle is not None:
            if not isinstance(handle, _ops.Tensor):
                raise TypeError(f"Handle must be a Tensor, got {type(handle).__name__}")
            for arg, what in ((tensor_array_name, "tensor_array_name"), (size, "size"),
                              (element_shape, "element_shape"), (dynamic_size, "dynamic_size"),
                              (clear_after_read, "clear_after_read")):
                if arg is not None:
                    raise ValueError(f"Cannot provide both a handle and {what} at the same time")
            if flow is None:
                raise ValueError("flow must not be None if handle is not None.")
        elif size is None:
            raise ValueError("Size must be provided if handle is not provided")
        if flow is not None and (not isinstance(flow, _ops.Tensor) or
                                 flow.dtype.base_dtype != _dtypes.float32):
            raise TypeError(f"flow must be a float32 Tensor, but saw: {flow!r}")
        self._dtype = _dtypes.as_dtype(dtype).base_dtype
        self._colocate_with_first_write_call = colocate_with_first_write_call
        # The first written value (a list shared by every TensorArray of this handle), or None
        # when not colocating with the first write.
        self._colocate_with = [] if colocate_with_first_write_call else None
        # [] while the element shape is unknown, else [TensorShape]; shared (and updated in
        # place) by every TensorArray object of one array.
        if element_shape is None:
            self._infer_shape = infer_shape
            self._element_shape = []
        else:
            self._infer_shape = True
            self._element_shape = [_ts.as_shape(element_shape)]
        if handle is not None:
            self._handle, self._flow = handle, flow
            return
        with _ops.name_scope(name, "TensorArray", [size]) as scope:
            op = apply_op("TensorArrayV3", [size], {
                "dtype": self._dtype,
                "element_shape": (self._element_shape[0] if self._element_shape
                                  else _ts.TensorShape(None)),
                "dynamic_size": bool(dynamic_size), "identical_element_shapes": bool(infer_shape),
                "clear_after_read": True if clear_after_read is None else bool(clear_after_read),
                "tensor_array_name": tensor_array_name or ""}, name=scope)
        self._handle, created_flow = op.outputs
        self._flow = created_flow if flow is None else flow

    # ---------------------------------------------------------------- properties
    @property
    def handle(self):
        """The resource handle of the array."""
        return self._handle

    @property
    def flow(self):
        """The flow tensor ordering the array's ops."""
        return self._flow

    @property
    def dtype(self):
        """The element dtype."""
        return self._dtype

    @property
    def element_shape(self):
        """The (possibly partial) TensorShape of the elements."""
        return self._element_shape[0] if self._element_shape else _ts.TensorShape(None)

    # ---------------------------------------------------------------- helpers
    def _with_flow(self, flow):
        ta = TensorArray(self._dtype, handle=self._handle, flow=flow,
                         infer_shape=self._infer_shape,
                         colocate_with_first_write_call=self._colocate_with_first_write_call)
        ta._colocate_with = self._colocate_with
        ta._element_shape = self._element_shape
        return ta

    def _merge_element_shape(self, shape):
        """Merges `shape` into the shared element shape.

        Raises:
            ValueError: if it is incompatible with the shape inferred so far.
        """
        shape = _ts.as_shape(shape)
        if self._element_shape:
            if not shape.is_compatible_with(self._element_shape[0]):
                raise ValueError(f"Inconsistent shapes: saw {shape} but expected "
                                 f"{self._element_shape[0]} (and infer_shape=True)")
            self._element_shape[0] = self._element_shape[0].merge_with(shape)
        else:
            self._element_shape.append(shape)

    def _colocate(self):
        return _ops.colocate_with(_handle_root_op(self._handle))

    def _note_first_write(self, value):
        """Places a still unplaced array where the first written value is (TF's retroactive
        device of colocate_with_first_write_call), keeping only the host part of accelerator
        devices: the array's kernels run on the host."""
        if self._colocate_with is None or self._colocate_with:
            return
        self._colocate_with.append(value)
        root = _handle_root_op(self._handle)
        if root.type != "TensorArrayV3" or root.device or not value.device:
            return
        spec = _device_spec.DeviceSpec.from_string(value.device)
        if spec.device_type not in (None, "CPU"):
            spec = spec.replace(device_type=None, device_index=None)
        root._set_device(spec.to_string())

    def _convert_value(self, value, strict=False):
        value = _ops.convert_to_tensor(value, dtype=self._dtype if strict else None,
                                       preferred_dtype=self._dtype, name="value")
        if value.dtype.base_dtype != self._dtype:
            raise errors.InvalidArgumentError(
                None, None, f"TensorArray dtype is {self._dtype.name} but Op is trying to write "
                            f"dtype {value.dtype.base_dtype.name}.")
        return value

    # ---------------------------------------------------------------- reading
    def read(self, index, name=None):
        """Returns the element at `index` (an int32 scalar)."""
        with _ops.name_scope(name, "TensorArrayRead", [self._handle, index]), self._colocate():
            value = apply_op("TensorArrayReadV3", [self._handle, index, self._flow],
                             {"dtype": self._dtype}).outputs[0]
        if self._element_shape:
            value.set_shape(self._element_shape[0])
        return value

    def gather(self, indices, name=None):
        """Returns the elements at `indices` (an int32 vector) stacked into one tensor."""
        with _ops.name_scope(name, "TensorArrayGather", [self._handle, indices]), self._colocate():
            return apply_op("TensorArrayGatherV3", [self._handle, indices, self._flow],
                            {"dtype": self._dtype, "element_shape": self.element_shape}).outputs[0]

    def stack(self, name=None):
        """Returns all elements stacked into one tensor [size, ...element_shape]."""
        with _ops.name_scope(name, "TensorArrayStack", [self._handle]):
            from kernflow.core.ops import array_ops
            return self.gather(array_ops.range(0, self.size()))

    def concat(self, name=None):
        """Returns all elements (at least vectors) concatenated along their first dimension."""
        shape = self.element_shape
        inner = shape[1:] if shape.rank else _ts.TensorShape(None)
        with _ops.name_scope(name, "TensorArrayConcat", [self._handle]), self._colocate():
            return apply_op("TensorArrayConcatV3", [self._handle, self._flow],
                            {"dtype": self._dtype, "element_shape_except0": inner}).outputs[0]

    def size(self, name=None):
        """Returns the current number of elements (an int32 scalar)."""
        with _ops.name_scope(name, "TensorArraySize", [self._handle]), self._colocate():
            return apply_op("TensorArraySizeV3", [self._handle, self._flow], {}).outputs[0]

    # ---------------------------------------------------------------- writing
    def write(self, index, value, name=None):
        """Writes `value` at `index`; returns the TensorArray to use afterwards.

        Raises:
            InvalidArgumentError: `value` does not have the array's dtype.
            ValueError: its shape conflicts with the inferred element shape.
        """
        with _ops.name_scope(name, "TensorArrayWrite", [self._handle, index, value]):
            value = self._convert_value(value)
            if self._infer_shape:
                self._merge_element_shape(value.shape)
            self._note_first_write(value)
            with self._colocate():
                flow = apply_op("TensorArrayWriteV3", [self._handle, index, value, self._flow],
                                {}).outputs[0]
        return self._with_flow(flow)

    def scatter(self, indices, value, name=None):
        """Writes `value[i]` at `indices[i]`; returns the TensorArray to use afterwards."""
        with _ops.name_scope(name, "TensorArrayScatter", [self._handle, value, indices]):
            value = self._convert_value(value)
            if self._infer_shape:
                vs = value.shape
                self._merge_element_shape(vs[1:] if vs.rank is not None else _ts.TensorShape(None))
            self._note_first_write(value)
            with self._colocate():
                flow = apply_op("TensorArrayScatterV3", [self._handle, indices, value, self._flow],
                                {}).outputs[0]
        return self._with_flow(flow)

    def unstack(self, value, name=None):
        """Writes `value[i]` at index i for every row of `value`; returns the new TensorArray."""
        with _ops.name_scope(name, "TensorArrayUnstack", [self._handle, value]):
            from kernflow.core.ops import array_ops
            value = self._convert_value(value)
            n = value.shape.dim_values[0] if value.shape.rank else None
            num = n if n is not None else array_ops.shape(value)[0]
            return self.scatter(array_ops.range(0, num), value)

    def split(self, value, lengths, name=None):
        """Splits `value` along dimension 0 into pieces of `lengths` rows, written at 0, 1, ...

        Returns:
            The TensorArray to use afterwards.
        """
        with _ops.name_scope(name, "TensorArraySplit", [self._handle, value, lengths]):
            from kernflow.core.ops import math_ops
            value = self._convert_value(value, strict=True)
            lengths = math_ops.cast(lengths, _dtypes.int64)
            if self._infer_shape and value.shape.rank is not None:
                lens = tensor_util.constant_value(lengths)
                if lens is not None and lens.size and lens.max() == lens.min():
                    self._merge_element_shape(
                        _ts.TensorShape([int(lens.reshape(-1)[0])]).concatenate(value.shape[1:]))
            self._note_first_write(value)
            with self._colocate():
                flow = apply_op("TensorArraySplitV3", [self._handle, value, lengths, self._flow],
                                {}).outputs[0]
        return self._with_flow(flow)

    def identity(self, name=None):
        """Returns a TensorArray with an identity of the flow (to hang control dependencies on)."""
        from kernflow.core.ops import array_ops
        with _ops.name_scope(name, "TensorArrayIdentity", [self._flow]):
            return self._with_flow(array_ops.identity(self._flow))

    def close(self, name=None):
        """Closes the array; returns the op."""
        with _ops.name_scope(name, "TensorArrayClose", [self._handle]), self._colocate():
            return apply_op("TensorArrayCloseV3", [self._handle], {})

    def grad(self, source, flow=None, name=None):
        """Returns the gradient TensorArray of this array for the gradient computation `source`.

        The gradient array is created on first use (same size and element shapes) and shared by
        every grad call with the same source; repeated writes to an index add up.

        Args:
            source: a string naming the gradient computation (e.g. "gradients").
            flow: the flow the gradient array is made after (default: this array's).
            name: name scope.
        """
        from kernflow.core.ops import array_ops
        flow = self._flow if flow is None else flow
        with _ops.name_scope(name, "TensorArrayGrad", [self._handle]), self._colocate():
            g_handle, _ = apply_op("TensorArrayGradV3", [self._handle, flow],
                                   {"source": source}).outputs
            with _ops.control_dependencies([g_handle]):
                g_flow = array_ops.identity(flow, name="gradient_flow")
        g = TensorArray(self._dtype, handle=g_handle, flow=g_flow, infer_shape=self._infer_shape,
                        colocate_with_first_write_call=False)
        g._element_shape = self._element_shape
        return g


def build_ta_with_new_flow(old_ta, flow):
    """The TensorArray `old_ta` seen through another flow tensor (while_loop and cond rebuild
    arrays from the flows they carry this way); shape and colocation state stay shared."""
    return old_ta._with_flow(flow)
