"""`kf.gradients`: extends the graph backwards from ys to xs (the whitepaper's section 4.1).

The gradient of each op is built by its registered gradient function, in reverse topological order
over the ops on some path from xs to ys. Gradients reaching a tensor along several paths are summed
(AddN; IndexedSlices are concatenated while every contribution is sparse).
"""

from __future__ import annotations

import collections

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import gradient_registry
from kernflow.core.framework import ops as _ops
from kernflow.core.framework.indexed_slices import IndexedSlices

__all__ = ["gradients", "AggregationMethod", "RegisterGradient", "NotDifferentiable", "NoGradient",
           "IndexedSlices"]

RegisterGradient = gradient_registry.RegisterGradient
NotDifferentiable = gradient_registry.NotDifferentiable
NoGradient = gradient_registry.NoGradient


class AggregationMethod:
    ADD_N = 0
    DEFAULT = ADD_N
    EXPERIMENTAL_TREE = 1
    EXPERIMENTAL_ACCUMULATE_N = 2


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _to_tensor(x, as_ref=False):
    if isinstance(x, (_ops.Tensor, IndexedSlices)):
        return x
    return _ops.convert_to_tensor(x, as_ref=as_ref)


def _between_ops(ys, xs, stop_ops):
    """Ops on a path from some x to some y (forward-reachable from xs, backward from ys)."""
    reach_fwd = set()
    queue = collections.deque(x.op for x in xs)
    while queue:
        op = queue.popleft()
        if op in reach_fwd:
            continue
        reach_fwd.add(op)
        for out in op.outputs:
            for c in out._consumers:
                if c not in reach_fwd:
                    queue.append(c)
    between = set()
    queue = collections.deque(y.op for y in ys)
    while queue:
        op = queue.popleft()
        if op in between or op not in reach_fwd:
            continue
        between.add(op)
        if op in stop_ops:
            continue
        for t in op.inputs:
            queue.append(t.op)
    return between


def _aggregate(grads, name=None):
    grads = [g for g in grads if g is not None]
    if not grads:
        return None
    if len(grads) == 1:
        return grads[0]
    from kernflow.core.ops import array_ops, math_ops
    if all(isinstance(g, IndexedSlices) for g in grads):
        return IndexedSlices(array_ops.concat([g.values for g in grads], 0),
                             array_ops.concat([g.indices for g in grads], 0), grads[0].dense_shape)
    dense = [_ops.convert_to_tensor(g) for g in grads]
    return math_ops.add_n(dense, name=name)


def gradients(ys, xs, grad_ys=None, name="gradients", colocate_gradients_with_ops=False,
              gate_gradients=False, aggregation_method=None, stop_gradients=None,
              unconnected_gradients="none"):
    """Returns d(sum(ys))/dx for each x in xs, as TF1's `tf.gradients`.

    Args:
        ys: a Tensor or list of Tensors to differentiate.
        xs: Tensors or Variables to differentiate with respect to.
        grad_ys: initial gradients for ys (default: ones shaped like each y).
        stop_gradients: Tensors treated as constants (no gradient flows through them).
        unconnected_gradients: "none" (None for an x no y depends on) or "zero".

    Returns:
        A list with one gradient (Tensor, IndexedSlices or None) per x.

    Raises:
        LookupError: an op on the path has no registered gradient.
        ValueError: mismatched grad_ys, or a bad unconnected_gradients value.
    """
    if unconnected_gradients not in ("none", "zero"):
        raise ValueError(f"Unknown value for unconnected_gradients: {unconnected_gradients!r}")
    ys = [_to_tensor(y) for y in _as_list(ys)]
    xs = [_to_tensor(x, as_ref=True) for x in _as_list(xs)]
    grad_ys = _as_list(grad_ys) if grad_ys is not None else [None] * len(ys)
    if len(grad_ys) != len(ys):
        raise ValueError(f"Passed {len(grad_ys)} grad_ys for {len(ys)} ys")
    stop_ops = {_to_tensor(s).op for s in _as_list(stop_gradients)} if stop_gradients else set()
    from kernflow.core.ops import array_ops
    g = ys[0].graph
    with g.as_default(), _ops.name_scope(name, "gradients", ys + xs):
        between = _between_ops(ys, xs, stop_ops)
        # Pending counts: consumers inside `between` of each op's outputs.
        pending = collections.Counter()
        for op in between:
            if op in stop_ops:
                continue
            for t in op.inputs:
                if t.op in between:
                    pending[t.op] += 1
        grads: dict = collections.defaultdict(list)  # tensor -> list of gradients
        for y, gy in zip(ys, grad_ys):
            if gy is None:
                if not y.dtype.is_floating and not y.dtype.is_complex:
                    raise TypeError(f"Gradients of non-float tensor {y.name} ({y.dtype.name}) need grad_ys")
                gy = array_ops.ones_like(y, name=f"grad_ys_{len(grads)}")
            else:
                gy = _to_tensor(gy)
            grads[y].append(gy)
        ready = collections.deque(op for op in between if pending[op] == 0)
        done = set()
        while ready:
            op = ready.popleft()
            if op in done:
                continue
            done.add(op)
            out_grads = [_aggregate(grads.get(t, [])) if grads.get(t) else None for t in op.outputs]
            has_grad = any(gr is not None for gr in out_grads)
            # Only ops with an input on some path from an x need their gradient built.
            if has_grad and op not in stop_ops and any(t.op in between for t in op.inputs):
                fn = gradient_registry.get_gradient_function(op)
                if fn is not None:
                    if len(op.outputs) > 1:
                        out_grads = [gr if gr is not None else
                                     (array_ops.zeros_like(t) if t.dtype.is_floating else None)
                                     for gr, t in zip(out_grads, op.outputs)]
                    with _ops.name_scope(op.name + "_grad"):
                        ctx = _ops.colocate_with(op) if colocate_gradients_with_ops else _null()
                        with ctx:
                            in_grads = _as_list(fn(op, *out_grads))
                    if len(in_grads) != len(op.inputs):
                        raise ValueError(f"Gradient function for {op.type} returned {len(in_grads)} "
                                         f"gradients, expected {len(op.inputs)} (op {op.name})")
                    # Gradients of inputs on no path to an x are never used: drop them before
                    # gating, so the step prunes their computation (e.g. MatMul's dx for a feed).
                    in_grads = [gr if t.op in between else None for t, gr in zip(op.inputs, in_grads)]
                    if gate_gradients:
                        in_grads = _gate(in_grads, op)
                    for t, gr in zip(op.inputs, in_grads):
                        base = t.dtype.base_dtype
                        if gr is not None and t.op in between and (base.is_floating or base.is_complex):
                            if isinstance(gr, _ops.Tensor) and not gr.dtype.is_compatible_with(t.dtype.base_dtype):
                                raise ValueError(f"Gradient for input {t.name} of {op.name} has dtype "
                                                 f"{gr.dtype.name}, expected {t.dtype.base_dtype.name}")
                            grads[t].append(gr)
            for t in op.inputs:
                if t.op in between and op not in stop_ops:
                    pending[t.op] -= 1
                    if pending[t.op] == 0:
                        ready.append(t.op)
        result = []
        for x in xs:
            gr = _aggregate(grads.get(x, []))
            if gr is None and unconnected_gradients == "zero":
                gr = array_ops.zeros_like(x)
            result.append(gr)
        return result


def _gate(grads, op):
    """Makes all of an op's input gradients available together (TF's GATE_OP).

    With reference variables updated in place this is what keeps an update from running before
    every gradient that reads the variable (e.g. MatMul's dx, which reads w) has been computed.
    """
    live = [g for g in grads if isinstance(g, _ops.Tensor)]
    if len(live) < 2:
        return grads
    from kernflow.core.ops import control_flow_ops
    with _ops.name_scope(None), _ops.name_scope(op.name + "_grad/tuple"):
        gated = iter(control_flow_ops.tuple(live))
    return [next(gated) if isinstance(g, _ops.Tensor) else g for g in grads]


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False
