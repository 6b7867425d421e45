"""Session tensors: GetSessionHandle, GetSessionTensor and DeleteSessionTensor (TF1's session_ops).

A step can leave a tensor in its session and hand back a handle string naming it; later steps read
the tensor by feeding the handle, until it is deleted or the session closes::

    h = sess.run(kf.get_session_handle(a * b))        # a TensorHandle
    p, x = kf.get_session_tensor(h.handle, kf.int32)
    sess.run(x * 10, feed_dict={p: h.handle})         # or feed_dict={p: h}

A handle is ``"<op name>;<id>;<device>"``. The tensor is kept only when the step that made it
succeeds and fetches the handle (TF's TensorStore): `Session.run` wraps such a fetch in a
`TensorHandle`. The session's runtime keeps the tensors (the embedded one: `DirectSession`'s
`SessionTensors`); the CPU kernels are in kernflow.kernels.cpu.session_tensors. A TensorHandle fed
for any other tensor stands for its stored value.
"""

from __future__ import annotations

import weakref

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework.gradient_registry import NotDifferentiable
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.op_def_registry import register_op

__all__ = ["get_session_handle", "get_session_tensor", "delete_session_tensor"]

# Op types of this module: host only (string handles; kernel_contract.HOST_ONLY_OPS), no gradient.
SESSION_OPS = ("GetSessionHandle", "GetSessionTensor", "DeleteSessionTensor")
HANDLE_OPS = frozenset({"GetSessionHandle"})


def _scalar_handle(op):
    op.inputs[0].shape.with_rank(0)
    return []


def _read_shape(op):
    op.inputs[0].shape.with_rank(0)
    return [_ts.TensorShape(None)]


register_op("GetSessionHandle", inputs=["value: T"], outputs=["handle: string"], attrs=["T: type"],
            shape_fn=lambda op: [_ts.TensorShape([])], stateful=True,
            doc="Keeps `value` in the session when the step succeeds and fetches `handle`, and "
                "returns the handle (a string scalar naming the tensor, its id and its device).")
register_op("GetSessionTensor", inputs=["handle: string"], outputs=["value: dtype"],
            attrs=["dtype: type"], shape_fn=_read_shape, stateful=True,
            doc="Returns the tensor the session keeps under `handle`; fails when there is none or "
                "when it is not of type `dtype`.")
register_op("DeleteSessionTensor", inputs=["handle: string"], shape_fn=_scalar_handle, stateful=True,
            doc="Removes the tensor kept under `handle` from the session; fails when there is none.")
for _op in SESSION_OPS:
    NotDifferentiable(_op)


def _handle_str(handle, op_type: str) -> str:
    """A handle given as a TensorHandle, str or bytes, as a str; checks its three fields."""
    if isinstance(handle, TensorHandle):
        handle = handle.handle
    if isinstance(handle, bytes):
        handle = handle.decode()
    if not isinstance(handle, str):
        raise TypeError(f"{op_type}: a session tensor handle must be a string, got "
                        f"{type(handle).__name__}")
    if handle.count(";") < 2:
        raise ValueError(f"{op_type}: expected a handle '<op name>;<id>;<device>', got {handle!r}")
    return handle


def _device_of(handle: str) -> str:
    return handle.rsplit(";", 1)[1]


# Per graph: the string placeholders that take handles (their op names -> the dtype they read), and
# the reader and deleter ops TensorHandle.eval/delete reuse.
_feeders: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_readers: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _handle_placeholder(graph, device: str, dtype):
    from kernflow.core.ops.array_ops import placeholder
    with _ops.device(device):
        holder = placeholder(_dtypes.string, shape=[])
    _feeders.setdefault(graph, {})[holder.op.name] = dtype
    return holder


def is_handle_feeder(tensor) -> bool:
    """True if `tensor` is a placeholder made by get_session_tensor/delete_session_tensor."""
    return tensor.op.name in _feeders.get(tensor.graph, ())


# ---------------------------------------------------------------------------- wrappers
def get_session_handle(data, name=None):
    """Returns the handle of `data` kept in the session by the step that fetches it.

    Args:
        data: a Tensor, kept between steps when the handle is fetched.
        name: op name.

    Returns:
        A string scalar Tensor; `Session.run` returns a `TensorHandle` for it.

    Raises:
        TypeError: when `data` is not a Tensor.
    """
    if not isinstance(data, _ops.Tensor):
        raise TypeError(f"get_session_handle: `data` must be of type Tensor, got {type(data).__name__}")
    return apply_op("GetSessionHandle", [data], {}, name=name).outputs[0]


def get_session_tensor(handle, dtype, name=None):
    """Returns ``(placeholder, tensor)``: feed a handle to the placeholder to read its tensor.

    Args:
        handle: a handle string (or `TensorHandle`); only its device is used here, to place the op.
        dtype: the dtype of the kept tensor.
        name: op name.

    Returns:
        A string placeholder taking a handle (or a `TensorHandle`), and the tensor it names.

    Raises:
        TypeError / ValueError: for a handle that is not a string of three ';'-separated fields.
    """
    device = _device_of(_handle_str(handle, "GetSessionTensor"))
    dtype = _dtypes.as_dtype(dtype)
    holder = _handle_placeholder(_ops.get_default_graph(), device, dtype)
    with _ops.device(device):
        tensor = apply_op("GetSessionTensor", [holder], {"dtype": dtype}, name=name).outputs[0]
    return holder, tensor


def delete_session_tensor(handle, name=None):
    """Returns ``(placeholder, op)``: running the op deletes the tensor whose handle is fed.

    Args:
        handle: a handle string (or `TensorHandle`); only its device is used here.
        name: op name.

    Raises:
        TypeError / ValueError: for a handle that is not a string of three ';'-separated fields.
    """
    device = _device_of(_handle_str(handle, "DeleteSessionTensor"))
    holder = _handle_placeholder(_ops.get_default_graph(), device, None)
    with _ops.device(device):
        deleter = apply_op("DeleteSessionTensor", [holder], {}, name=name)
    return holder, deleter


def _reader(graph, handle: str, dtype):
    """(placeholder, GetSessionTensor) reading handles of this handle's op and device, made once."""
    key = ("read", handle.split(";", 1)[0], _device_of(handle), dtype)
    cache = _readers.setdefault(graph, {})
    if key not in cache:
        with graph.as_default(), _ops.control_dependencies(None):
            cache[key] = get_session_tensor(handle, dtype)
    return cache[key]


def _deleter(graph, handle: str):
    key = ("delete", _device_of(handle))
    cache = _readers.setdefault(graph, {})
    if key not in cache:
        with graph.as_default(), _ops.control_dependencies(None):
            cache[key] = delete_session_tensor(handle)
    return cache[key]


# ---------------------------------------------------------------------------- TensorHandle
class TensorHandle:
    """A tensor kept in a session, as `Session.run` returns a fetched `get_session_handle`.

    ``str(h)`` and ``h.handle`` are the handle string. Feed either to the placeholder of
    `get_session_tensor`; fed for any other tensor, a TensorHandle stands for its stored value.
    When the object is garbage collected its tensor is deleted (after a few more have been, in
    one batch, as TF's), unless `delete` already did.
    """

    def __init__(self, handle, dtype, session):
        self._handle = handle.decode() if isinstance(handle, bytes) else str(handle)
        self._dtype = _dtypes.as_dtype(dtype)
        self._session = session
        self._auto_gc_enabled = True

    def __del__(self):
        if self._auto_gc_enabled:
            try:
                self._session._register_dead_handle(self._handle)
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass

    def __str__(self):
        return self._handle

    def __repr__(self):
        return f"<TensorHandle {self._handle!r} dtype={self._dtype.name}>"

    @property
    def handle(self) -> str:
        """The handle string, ``"<op name>;<id>;<device>"``."""
        return self._handle

    def get_raw_handle(self) -> str:
        """The handle string (TF's name for it)."""
        return self._handle

    def eval(self):
        """Returns the kept tensor's value (runs a GetSessionTensor step in its session)."""
        holder, reader = _reader(self._session.graph, self._handle, self._dtype)
        return self._session.run(reader, feed_dict={holder: self._handle})

    def delete(self) -> None:
        """Deletes the kept tensor from its session (a later read fails with InvalidArgumentError)."""
        self._auto_gc_enabled = False
        holder, deleter = _deleter(self._session.graph, self._handle)
        self._session.run(deleter, feed_dict={holder: self._handle})

    def _feed_value(self, tensor):
        """What feeding this handle to `tensor` feeds: the handle string to a handle placeholder,
        else the kept value."""
        return self._handle if is_handle_feeder(tensor) else self.eval()
