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


class _Level:
    """The gradient graph at one loop level: ops of that level, and inner loops as single nodes.

    At the top level (`loop` None) every op outside loops is a node and each outermost while loop
    is one node (inputs: what enters it; outputs: its Exits), differentiated as a whole by
    control_flow_grad_state. Inside a loop's body (`loop` W) the ops built in W are nodes, W's own
    plumbing is outside, and loops nested in W are nodes again.
    """

    def __init__(self, loop):
        self.loop = loop

    def node(self, op):
        """`op` itself, the WhileContext standing for it, or None (outside this level)."""
        ctx = op._control_flow_context
        w = ctx.get_while_context() if ctx is not None else None
        if w is self.loop:
            if w is not None and op in w.plumbing:
                return None
            return op
        c = w
        while c is not None:
            outer = c.outer_context.get_while_context() if c.outer_context is not None else None
            if outer is self.loop:
                return c
            c = outer
        return None

    @staticmethod
    def inputs(n):
        if isinstance(n, _ops.Operation):
            return list(n.inputs)
        return [e.op.inputs[0] for e in n.loop_enters + n.invariant_enters]

    @staticmethod
    def outputs(n):
        if isinstance(n, _ops.Operation):
            return n.outputs
        return n.loop_exits


def _between_ops(ys, xs, stop_ops, level):
    """Nodes on a path from some x to some y (forward-reachable from xs, backward from ys)."""
    reach_fwd = set()
    queue = collections.deque()
    for x in xs:
        for c in x._consumers:
            n = level.node(c)
            if n is not None:
                queue.append(n)
    while queue:
        n = queue.popleft()
        if n in reach_fwd:
            continue
        reach_fwd.add(n)
        for out in level.outputs(n):
            for c in out._consumers:
                m = level.node(c)
                if m is not None and m not in reach_fwd:
                    queue.append(m)
    between = set()
    queue = collections.deque(n for n in (level.node(y.op) for y in ys) if n is not None)
    while queue:
        n = queue.popleft()
        if n in between or n not in reach_fwd:
            continue
        between.add(n)
        if n in stop_ops:
            continue
        for t in level.inputs(n):
            m = level.node(t.op)
            if m is not None:
                queue.append(m)
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
        for i, (y, gy) in enumerate(zip(ys, grad_ys)):
            if gy is None:
                if not y.dtype.is_floating and not y.dtype.is_complex:
                    raise TypeError(f"Gradients of non-float tensor {y.name} ({y.dtype.name}) need grad_ys")
                grad_ys[i] = array_ops.ones_like(y, name=f"grad_ys_{i}")
            else:
                grad_ys[i] = _to_tensor(gy)
        # Inside a loop body being built, the gradient is built there too (over that loop's ops).
        ctx = g._get_control_flow_context()
        level = ctx.get_while_context() if ctx is not None else None
        result = _backprop(ys, grad_ys, xs, level, stop_ops, gate_gradients, colocate_gradients_with_ops)
        out = []
        for x, gr in zip(xs, result):
            if gr is None and unconnected_gradients == "zero":
                gr = array_ops.zeros_like(x)
            out.append(gr)
        return out


def _backprop(ys, grad_ys, xs, loop, stop_ops=frozenset(), gate_gradients=False, colocate=False):
    """Gradients of xs given gradients of ys, over the nodes of one loop level (see `_Level`)."""
    from kernflow.core.ops import array_ops
    level = _Level(loop)
    xs_set = set(xs)
    between = _between_ops(ys, xs, stop_ops, level)
    pending = collections.Counter()
    for n in between:
        if n in stop_ops:
            continue
        for t in level.inputs(n):
            m = level.node(t.op)
            if m in between:
                pending[m] += 1
    grads: dict = collections.defaultdict(list)  # tensor -> list of gradients
    for y, gy in zip(ys, grad_ys):
        grads[y].append(gy)

    def wanted(t):
        return t in xs_set or level.node(t.op) in between

    ready = collections.deque(n for n in between if pending[n] == 0)
    done = set()
    while ready:
        n = ready.popleft()
        if n in done:
            continue
        done.add(n)
        outs = level.outputs(n)
        out_grads = [_aggregate(grads.get(t, [])) if grads.get(t) else None for t in outs]
        has_grad = any(gr is not None for gr in out_grads)
        inputs = level.inputs(n)
        if has_grad and n not in stop_ops and any(wanted(t) for t in inputs):
            if not isinstance(n, _ops.Operation):
                from kernflow.core.ops import control_flow_grad_state
                by_input = control_flow_grad_state.loop_gradients(
                    n, out_grads, lambda ys_, gys_, xs_, lvl: _backprop(ys_, gys_, xs_, lvl))
                for t in dict.fromkeys(inputs):
                    gr = by_input.get(t)
                    if gr is not None and wanted(t):
                        grads[t].append(gr)
            else:
                op = n
                fn = gradient_registry.get_gradient_function(op)
                if fn is not None:
                    if len(op.outputs) > 1:
                        switch = op.type in ("Switch", "RefSwitch")
                        out_grads = [gr if gr is not None else
                                     (array_ops.zeros_like(t, optimize=not switch)
                                      if t.dtype.is_floating else None)
                                     for gr, t in zip(out_grads, op.outputs)]
                    with _ops.name_scope(op.name + "_grad"):
                        ctx = _ops.colocate_with(op) if colocate else _null()
                        with ctx:
                            in_grads = _as_list(fn(op, *out_grads))
                    if len(in_grads) != len(op.inputs):
                        raise ValueError(f"Gradient function for {op.type} returned {len(in_grads)} "
                                         f"gradients, expected {len(op.inputs)} (op {op.name})")
                    # Gradients of inputs on no path to an x are never used: drop them before
                    # gating, so the step prunes their computation (e.g. MatMul's dx for a feed).
                    in_grads = [gr if wanted(t) else None for t, gr in zip(op.inputs, in_grads)]
                    if gate_gradients:
                        in_grads = _gate(in_grads, op)
                    for t, gr in zip(op.inputs, in_grads):
                        base = t.dtype.base_dtype
                        if gr is not None and wanted(t) and (base.is_floating or base.is_complex):
                            if isinstance(gr, _ops.Tensor) and not gr.dtype.is_compatible_with(base):
                                raise ValueError(f"Gradient for input {t.name} of {op.name} has dtype "
                                                 f"{gr.dtype.name}, expected {base.name}")
                            grads[t].append(gr)
        if n in stop_ops:
            continue
        for t in inputs:
            m = level.node(t.op)
            if m in between:
                pending[m] -= 1
                if pending[m] == 0:
                    ready.append(m)
    return [_aggregate(grads.get(x, [])) for x in xs]


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
