"""Gradient clipping: clip_by_global_norm, clip_by_norm, global_norm."""

from __future__ import annotations

from kernflow.core.framework import ops as _ops
from kernflow.core.framework.indexed_slices import IndexedSlices

__all__ = ["clip_by_global_norm", "clip_by_norm", "global_norm"]


def _values(t):
    return t.values if isinstance(t, IndexedSlices) else t


def global_norm(t_list, name=None):
    """sqrt(sum of squared elements over every tensor in t_list) (None entries ignored)."""
    from kernflow.core.ops import math_ops, nn_ops
    ts = [_values(t) for t in t_list if t is not None]
    with _ops.name_scope(name, "global_norm", ts) as scope:
        if not ts:
            return _ops.convert_to_tensor(0.0, name=scope)
        half = [nn_ops.l2_loss(_ops.convert_to_tensor(t)) for t in ts]
        return math_ops.sqrt(math_ops.add_n(half) * 2.0, name=scope)


def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """Scales every tensor by clip_norm / max(global_norm, clip_norm) (TF1 semantics).

    Returns:
        (list of clipped tensors, the global norm before clipping).
    """
    from kernflow.core.ops import array_ops, math_ops
    if not isinstance(t_list, (list, tuple)):
        raise TypeError("t_list should be a sequence")
    t_list = list(t_list)
    with _ops.name_scope(name, "clip_by_global_norm", [t for t in t_list if t is not None]) as scope:
        norm = use_norm if use_norm is not None else global_norm(t_list, "global_norm")
        dt = norm.dtype.base_dtype
        clip = math_ops.cast(clip_norm, dt)
        scale = clip * math_ops.minimum(1.0 / norm, 1.0 / clip)
        out = []
        for i, t in enumerate(t_list):
            if t is None:
                out.append(None)
                continue
            with _ops.colocate_with(_values(t)):
                if isinstance(t, IndexedSlices):
                    out.append(IndexedSlices(array_ops.identity(t.values * math_ops.cast(scale, t.dtype),
                                                                name=f"{scope}{i}"),
                                             t.indices, t.dense_shape))
                else:
                    t = _ops.convert_to_tensor(t)
                    out.append(array_ops.identity(t * math_ops.cast(scale, t.dtype), name=f"{scope}{i}"))
        return out, norm


def clip_by_norm(t, clip_norm, axes=None, name=None):
    """Scales t so its L2 norm (over `axes`) is at most clip_norm."""
    from kernflow.core.ops import math_ops
    with _ops.name_scope(name, "clip_by_norm", [t]) as scope:
        t = _ops.convert_to_tensor(t)
        l2sum = math_ops.reduce_sum(t * t, axes, keepdims=True)
        pred = l2sum > 0
        safe = math_ops.where(pred, l2sum, math_ops.ones_like(l2sum) if hasattr(math_ops, "ones_like")
                              else l2sum * 0 + 1)
        norm = math_ops.where(pred, math_ops.sqrt(safe), l2sum)
        clip = math_ops.cast(clip_norm, t.dtype)
        return math_ops.multiply(t, clip / math_ops.maximum(norm, clip), name=scope)
