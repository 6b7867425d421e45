"""TensorArray (V3) and Stack (V2) kernels: per-step containers passed between kernels as objects.

The ``resource`` value a TensorArrayV3 or StackV2 kernel outputs is the container object itself,
created fresh by every run, so each step (TF's step container) gets its own. Flows are float32
zeros: they only order the ops in the graph.

Errors follow TF's (class and wording), each prefixed with the op type and node name.
"""

from __future__ import annotations

import itertools
import threading

import numpy as np

from kernflow.core.framework import dtypes
from kernflow.core.framework import errors
from kernflow.core.framework import tensor_shape as _ts

DEVICE = "CPU"

_ids = itertools.count()


def _shape_str(shape) -> str:
    if isinstance(shape, _ts.TensorShape):
        if shape.rank is None:
            return "<unknown>"
        return "[" + ",".join("?" if d is None else str(d) for d in shape.dim_values) + "]"
    return "[" + ",".join(str(d) for d in shape) + "]"


def _flow():
    return np.zeros((), np.float32)


class _Entry:
    """One element: its value, whether written, whether cleared by a read, and its shape (kept
    after clearing; for gradient arrays, the forward element's shape before any write)."""

    __slots__ = ("value", "written", "cleared", "shape")

    def __init__(self, shape=None):
        self.value = None
        self.written = False
        self.cleared = False
        self.shape = shape


class TensorArrayState:
    """A TensorArray of one step: the value of a TensorArrayV3 ``handle`` output.

    Invariants: ``entries`` has one `_Entry` per index (its length is the size); an entry is
    `written` once a value (or, for an unwritten read, zeros) was stored, `cleared` once read under
    `clear_after_read`; gradient arrays (`aggregate`) add repeated writes and read unwritten
    indices, even past their size, as zeros of the forward element's shape.
    """

    def __init__(self, name, dtype, size, element_shape, dynamic_size, clear_after_read,
                 identical_element_shapes, aggregate=False):
        self.name = name
        self.dtype = dtypes.as_dtype(dtype).base_dtype
        self.entries = [_Entry() for _ in range(size)]
        self.element_shape = _ts.as_shape(element_shape)
        self.dynamic_size = dynamic_size
        self.clear_after_read = clear_after_read
        self.identical_element_shapes = identical_element_shapes
        self.aggregate = aggregate
        self.closed = False
        self.grads: dict[str, TensorArrayState] = {}
        self.lock = threading.RLock()

    def __repr__(self):
        return f"<TensorArray {self.name} size={len(self.entries)} dtype={self.dtype.name}>"

    # ---------------------------------------------------------------- checks
    def _err(self, where, msg):
        return errors.InvalidArgumentError(None, None, f"{where}: TensorArray {self.name}: {msg}")

    def check_open(self, where):
        if self.closed:
            raise self._err(where, "has already been closed.")

    def check_dtype(self, where, dtype, writing):
        dtype = dtypes.as_dtype(dtype).base_dtype
        if dtype != self.dtype:
            verb = "is trying to write" if writing else "requested"
            raise self._err(where, f"TensorArray dtype is {self.dtype.name} but Op {verb} dtype "
                                   f"{dtype.name}.")

    # ---------------------------------------------------------------- element access (locked)
    def write(self, where, index, value):
        value = np.array(value, dtype=self.dtype.as_numpy_dtype, copy=True)
        n = len(self.entries)
        if index < 0 or (not self.dynamic_size and index >= n):
            raise self._err(where, f"Tried to write to index {index} but array is not resizeable "
                                   f"and size is: {n}")
        if not self.element_shape.is_compatible_with(value.shape):
            raise self._err(where, f"Could not write to TensorArray index {index} because the "
                                   f"value shape is {_shape_str(value.shape)} which is incompatible "
                                   f"with the TensorArray's inferred element shape: "
                                   f"{_shape_str(self.element_shape)} (consider setting "
                                   f"infer_shape=False).")
        e = self.entries[index] if index < n else None
        if e is not None and e.written:
            if e.cleared:
                raise self._err(where, f"Could not write to TensorArray index {index} because it "
                                       f"has already been read.")
            if not self.aggregate:
                raise self._err(where, f"Could not write to TensorArray index {index} because it "
                                       f"has already been written to.")
            if e.value.shape != value.shape:
                raise self._err(where, f"Could not aggregate to TensorArray index {index} because "
                                       f"the existing shape is {_shape_str(e.value.shape)} but the "
                                       f"new input shape is {_shape_str(value.shape)}.")
            value = e.value + value
        if e is None:
            self.entries.extend(_Entry() for _ in range(index + 1 - n))
            e = self.entries[index]
        if self.identical_element_shapes and not self.element_shape.is_fully_defined():
            self.element_shape = _ts.TensorShape(list(value.shape))
        e.value, e.written, e.shape = value, True, value.shape

    def read(self, where, index):
        n = len(self.entries)
        if index < 0 or (not self.aggregate and index >= n):
            raise self._err(where, f"Tried to read from index {index} but array size is: {n}")
        if index >= n:
            self.entries.extend(_Entry() for _ in range(index + 1 - n))
        e = self.entries[index]
        if not e.written:
            shape = e.shape if self.aggregate and e.shape is not None else None
            if shape is None:
                if not self.element_shape.is_fully_defined():
                    raise self._err(where, f"Could not read from TensorArray index {index} because "
                                           f"it has not yet been written to, and the element "
                                           f"shape is not fully defined: "
                                           f"{_shape_str(self.element_shape)} (with a fully "
                                           f"defined element_shape, unwritten elements read as "
                                           f"zeros).")
                shape = tuple(self.element_shape.as_list())
            e.value, e.written, e.shape = np.zeros(shape, self.dtype.as_numpy_dtype), True, shape
        if e.cleared:
            raise self._err(where, f"Could not read index {index} twice because it was cleared "
                                   f"after a previous read (perhaps try setting clear_after_read "
                                   f"= false?).")
        value = e.value
        if self.clear_after_read:
            e.value, e.cleared = None, True
        return value

    def read_many(self, where, indices):
        return [self.read(where, int(i)) for i in indices]

    def make_grad(self, source):
        """Returns the gradient array for `source`, creating it on first use."""
        g = self.grads.get(source)
        if g is None:
            g = TensorArrayState(f"{self.name}@{source}", self.dtype, 0, self.element_shape,
                                 False, True, self.identical_element_shapes, aggregate=True)
            g.entries = [_Entry(e.shape) for e in self.entries]
            self.grads[source] = g
        return g

    def close(self):
        self.closed = True
        self.entries = []
        self.grads = {}


def _where(ctx):
    return f"{ctx.op_type} {ctx.name}"


def _int_vector(where, x, what):
    x = np.asarray(x)
    if x.ndim != 1:
        raise errors.InvalidArgumentError(None, None, f"{where}: Expected {what} to be a vector, "
                                                      f"but received shape: {_shape_str(x.shape)}")
    return x


def _stack_same_shapes(where, values, except0=False):
    first = values[0].shape[1:] if except0 else values[0].shape
    for i, v in enumerate(values[1:], 1):
        s = v.shape[1:] if except0 else v.shape
        if s != first:
            what = "(excepting dimension 0) shape" if except0 else "shape"
            raise errors.InvalidArgumentError(
                None, None, f"{where}: TensorArray has inconsistent shapes.  Index 0 has {what}: "
                            f"{_shape_str(first)} but index {i} has {what}: {_shape_str(s)}")


def _empty_result(where, ta, attr_shape, concat):
    """The result of gathering (concatenating) no elements: [0] + the element shape (except its
    first dimension), from the op's attr or else the array's element shape."""
    shape, known = _ts.as_shape(attr_shape), ta.element_shape
    if concat and known.rank:
        known = known[1:]
    if concat and shape.rank is None:
        shape = known
    elif shape.is_compatible_with(known):
        shape = shape.merge_with(known)
    if not shape.is_fully_defined():
        what, verb = (("element_shape_except0", "concatenating") if concat
                      else ("element shape", "packing"))
        raise errors.UnimplementedError(
            None, None, f"{where}: TensorArray has size zero, but {what} {_shape_str(shape)} is "
                        f"not fully defined. Currently only static shapes are supported when "
                        f"{verb} zero-size TensorArrays.")
    return np.zeros([0] + shape.as_list(), ta.dtype.as_numpy_dtype)


# -------------------------------------------------------------------- TensorArray kernels
def _create(ctx):
    where = _where(ctx)
    base = ctx.get_attr("tensor_array_name") or ctx.name
    dtype, shape = ctx.get_attr("dtype"), ctx.get_attr("element_shape")
    dynamic, clear = ctx.get_attr("dynamic_size"), ctx.get_attr("clear_after_read")
    identical = ctx.get_attr("identical_element_shapes")

    def compute(size):
        size = int(size)
        if size < 0:
            raise errors.InvalidArgumentError(None, None, f"{where}: Size should be >= 0, got "
                                                          f"{size}.")
        ta = TensorArrayState(f"{base}_{next(_ids)}", dtype, size, shape, dynamic, clear, identical)
        return ta, _flow()
    return compute


def _write(ctx):
    where, dtype = _where(ctx), ctx.get_attr("T")

    def compute(ta, index, value, flow_in):
        with ta.lock:
            ta.check_open(where)
            ta.check_dtype(where, dtype, True)
            ta.write(where, int(index), value)
        return _flow()
    return compute


def _read(ctx):
    where, dtype = _where(ctx), ctx.get_attr("dtype")

    def compute(ta, index, flow_in):
        with ta.lock:
            ta.check_open(where)
            ta.check_dtype(where, dtype, False)
            return ta.read(where, int(index))
    return compute


def _gather(ctx):
    where, dtype, attr_shape = _where(ctx), ctx.get_attr("dtype"), ctx.get_attr("element_shape")

    def compute(ta, indices, flow_in):
        indices = _int_vector(where, indices, "indices")
        with ta.lock:
            ta.check_open(where)
            ta.check_dtype(where, dtype, False)
            if indices.size == 0:
                return _empty_result(where, ta, attr_shape, False)
            values = ta.read_many(where, indices)
        _stack_same_shapes(where, values)
        return np.stack(values)
    return compute


def _scatter(ctx):
    where, dtype = _where(ctx), ctx.get_attr("T")

    def compute(ta, indices, value, flow_in):
        indices = _int_vector(where, indices, "indices")
        value = np.asarray(value)
        if value.ndim < 1:
            raise errors.InvalidArgumentError(None, None, f"{where}: Expected value to be at least "
                                                          f"a vector, but received shape: "
                                                          f"{_shape_str(value.shape)}")
        if len(indices) != value.shape[0]:
            raise errors.InvalidArgumentError(None, None, f"{where}: Expected len(indices) == "
                                                          f"values.shape[0], but saw: "
                                                          f"{len(indices)} vs. {value.shape[0]}")
        with ta.lock:
            ta.check_open(where)
            ta.check_dtype(where, dtype, True)
            for i, row in zip(indices, value):
                ta.write(where, int(i), row)
        return _flow()
    return compute


def _concat(ctx):
    where, dtype = _where(ctx), ctx.get_attr("dtype")
    attr_shape = ctx.get_attr("element_shape_except0")

    def compute(ta, flow_in):
        with ta.lock:
            ta.check_open(where)
            ta.check_dtype(where, dtype, False)
            n = len(ta.entries)
            if n == 0:
                return (_empty_result(where, ta, attr_shape, True),
                        np.zeros([0], np.int64))
            values = ta.read_many(where, range(n))
        for i, v in enumerate(values):
            if v.ndim == 0:
                raise errors.InvalidArgumentError(
                    None, None, f"{where}: Concat saw a scalar shape at index {i} but requires at "
                                f"least vectors.  Did you mean to call stack instead?")
        _stack_same_shapes(where, values, except0=True)
        return np.concatenate(values), np.array([v.shape[0] for v in values], np.int64)
    return compute


def _split(ctx):
    where, dtype = _where(ctx), ctx.get_attr("T")

    def compute(ta, value, lengths, flow_in):
        value = np.asarray(value)
        lengths = _int_vector(where, lengths, "lengths")
        if value.ndim < 1:
            raise errors.InvalidArgumentError(None, None, f"{where}: Expected value to be at least "
                                                          f"a vector, but received shape: "
                                                          f"{_shape_str(value.shape)}")
        if (lengths < 0).any() or int(lengths.sum()) != value.shape[0]:
            raise errors.InvalidArgumentError(
                None, None, f"{where}: Expected sum of lengths to be equal to values.shape[0], but "
                            f"sum of lengths is: {int(lengths.sum())} and value's shape is: "
                            f"{_shape_str(value.shape)}")
        with ta.lock:
            ta.check_open(where)
            ta.check_dtype(where, dtype, True)
            n = len(ta.entries)
            if ta.identical_element_shapes and len(lengths) and lengths.min() != lengths.max():
                raise ta._err(where, f"Expected lengths to be equal: {int(lengths.min())} vs. "
                                     f"{int(lengths.max())} (the array was made with "
                                     f"infer_shape=True: consider infer_shape=False)")
            if not ta.dynamic_size and n != len(lengths):
                raise ta._err(where, f"TensorArray's size is not equal to the size of lengths "
                                     f"({n} vs. {len(lengths)}), and the TensorArray is not marked "
                                     f"as dynamically resizeable")
            start = 0
            for i, ln in enumerate(lengths):
                ta.write(where, i, value[start:start + int(ln)])
                start += int(ln)
        return _flow()
    return compute


def _size(ctx):
    where = _where(ctx)

    def compute(ta, flow_in):
        with ta.lock:
            ta.check_open(where)
            return np.array(len(ta.entries), np.int32)
    return compute


def _close(ctx):
    def compute(ta):
        with ta.lock:
            ta.close()
    return compute


def _grad(ctx):
    where, source = _where(ctx), ctx.get_attr("source")

    def compute(ta, flow_in):
        with ta.lock:
            ta.check_open(where)
            return ta.make_grad(source), np.array(flow_in, np.float32)
    return compute


# -------------------------------------------------------------------- Stack kernels
class StackState:
    """A LIFO stack of one step: the value of a StackV2 ``handle`` output."""

    def __init__(self, name, dtype, max_size):
        self.name = name
        self.dtype = dtypes.as_dtype(dtype).base_dtype
        self.max_size = max_size
        self.items: list = []
        self.closed = False
        self.lock = threading.Lock()

    def __repr__(self):
        return f"<Stack {self.name} depth={len(self.items)} dtype={self.dtype.name}>"

    def _err(self, where, msg):
        return errors.InvalidArgumentError(None, None, f"{where}: Stack[{self.name}] {msg}")

    def check(self, where, dtype, verb):
        if self.closed:
            raise self._err(where, "has already been closed.")
        if dtypes.as_dtype(dtype).base_dtype != self.dtype:
            raise self._err(where, f"holds {self.dtype.name} but the op {verb} "
                                   f"{dtypes.as_dtype(dtype).base_dtype.name}.")


def _stack(ctx):
    where = _where(ctx)
    base, dtype = ctx.get_attr("stack_name") or ctx.name, ctx.get_attr("elem_type")

    def compute(max_size):
        if np.ndim(max_size) != 0:
            raise errors.InvalidArgumentError(None, None, f"{where}: max_size must be a scalar, "
                                                          f"got shape {np.shape(max_size)}")
        return StackState(f"{base}_{next(_ids)}", dtype, int(max_size))
    return compute


def _push(ctx):
    where, dtype = _where(ctx), ctx.get_attr("T")
    # Handles (a TensorArray created inside a loop) are objects, kept as they are; tensors are
    # copied so a later in-place update cannot change the saved value.
    keep = (lambda e: e) if dtype.base_dtype.name == "resource" else (lambda e: np.array(e, copy=True))

    def compute(stack, elem):
        with stack.lock:
            stack.check(where, dtype, "pushes")
            if 0 <= stack.max_size <= len(stack.items):
                raise stack._err(where, f"overflowed its max_size ({stack.max_size})")
            stack.items.append(keep(elem))
        return elem
    return compute


def _pop(ctx):
    where, dtype = _where(ctx), ctx.get_attr("elem_type")

    def compute(stack):
        with stack.lock:
            stack.check(where, dtype, "pops")
            if not stack.items:
                raise stack._err(where, "is empty.")
            return stack.items.pop()
    return compute


def _stack_close(ctx):
    def compute(stack):
        with stack.lock:
            stack.closed = True
            stack.items = []
    return compute


KERNELS = {
    "TensorArrayV3": _create, "TensorArrayWriteV3": _write, "TensorArrayReadV3": _read,
    "TensorArrayGatherV3": _gather, "TensorArrayScatterV3": _scatter,
    "TensorArrayConcatV3": _concat, "TensorArraySplitV3": _split, "TensorArraySizeV3": _size,
    "TensorArrayCloseV3": _close, "TensorArrayGradV3": _grad,
    "StackV2": _stack, "StackPushV2": _push, "StackPopV2": _pop, "StackCloseV2": _stack_close,
}


def register(registry, device=DEVICE):
    # The op declarations live in kernflow.core; importing them makes the kernels' ops known.
    from kernflow.core.ops import stack_ops, tensor_array_ops  # noqa: F401
    for op_type, factory in KERNELS.items():
        registry.register(op_type, device, factory)
