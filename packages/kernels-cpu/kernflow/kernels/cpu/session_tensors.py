"""CPU kernels of the session-tensor ops (kernflow.core.ops.session_ops).

They keep tensors in the session that runs them: the kernel factory finds the session's store as
``ctx.session_handle.session_tensors`` (the embedded runtime's `DirectSession.session_tensors`). A
runtime that hands its kernels no such store (a worker of a distributed master) cannot keep a
tensor between steps, and building the kernel fails with UnimplementedError naming the op.
GetSessionHandle stages its tensor for the running step; the session keeps it once the step has
succeeded and fetched the handle.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import errors

DEVICE = "CPU"


def _where(ctx) -> str:
    return f"{ctx.op_type} '{ctx.name}'"


def _store(ctx):
    store = getattr(ctx.session_handle, "session_tensors", None)
    if store is None:
        raise errors.UnimplementedError(
            None, ctx.name, f"{_where(ctx)}: this runtime keeps no tensors between steps; session "
            "tensors (get_session_handle, get_session_tensor, delete_session_tensor) need the "
            "embedded runtime, kf.Session('')")
    return store


def _handle(where: str, h) -> str:
    if np.ndim(h) != 0:
        raise errors.InvalidArgumentError(None, None, f"{where}: the handle must be a string scalar, "
                                                      f"got shape {np.shape(h)}")
    h = h[()] if isinstance(h, np.ndarray) else h
    return h.decode() if isinstance(h, bytes) else str(h)


def _get_session_handle(ctx):
    store, where, device = _store(ctx), _where(ctx), ctx.device.name

    def compute(step_ctx, value):
        # A copy: the value outlives the step, and its buffer may be a variable's.
        kept = np.array(value, copy=True) if isinstance(value, np.ndarray) else value
        return np.array(store.stage(step_ctx.step_id, ctx.name, device, kept).encode(), dtype=object)
    return compute


def _get_session_tensor(ctx):
    store, where = _store(ctx), _where(ctx)
    want = ctx.get_attr("dtype").base_dtype
    npdtype = np.dtype(want.as_numpy_dtype)

    def compute(handle):
        handle = _handle(where, handle)
        value = store.get(handle, where)
        have = getattr(value, "dtype", npdtype)
        if have != npdtype:
            raise errors.InvalidArgumentError(
                None, None, f"{where}: the tensor with handle {handle!r} is {have}, but the op "
                            f"reads {want.name}")
        return value
    return compute


def _delete_session_tensor(ctx):
    store, where = _store(ctx), _where(ctx)

    def compute(handle):
        store.delete(_handle(where, handle), where)
    return compute


def register(registry):
    """Registers the CPU kernels of the session-tensor family."""
    from kernflow.core.ops import session_ops  # noqa: F401 - declares the ops
    registry.register("GetSessionHandle", DEVICE, _get_session_handle, needs_ctx=True)
    registry.register("GetSessionTensor", DEVICE, _get_session_tensor)
    registry.register("DeleteSessionTensor", DEVICE, _delete_session_tensor)
