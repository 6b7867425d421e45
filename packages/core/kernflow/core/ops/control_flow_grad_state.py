"""Gradients of while loops: the backprop loop and the forward values it needs, per iteration.

`loop_gradients(W, exit_grads, backprop)` builds, for a forward `WhileContext` W, a second loop
G that runs W's iterations in reverse (TF1's design, own code):

* A counter added to W counts its iterations (n); G counts down from n.
* Each float loop variable's gradient is a loop variable of G: it enters with the gradient of W's
  Exit, each G iteration runs the gradient of W's body for one forward iteration, and G's Exit
  is the gradient of the value that entered W.
* A forward value the body's gradient needs (an op input or output inside W) is pushed on a stack
  in every forward iteration and popped in the matching backward iteration. Pushes are ordered by
  W's counter (each push runs after the iteration's counter value and before the counter
  advances, through a ControlTrigger that tolerates dead pushes inside conds), pops by G's, so
  the stack order holds with parallel iterations and nested loops. A value inside a cond of the
  body is pushed only when its branch runs and popped only when the popped predicate says so.
* Loop invariants (values from outside W) are read directly; their gradients are summed over
  the iterations in accumulator loop variables of G.
"""

from __future__ import annotations

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework.indexed_slices import IndexedSlices
from kernflow.core.ops import array_ops
from kernflow.core.ops import control_flow_ops as _cf
from kernflow.core.ops import control_flow_v1 as _v1

__all__ = ["loop_gradients"]


def _in_context(ctx, fn):
    """Runs fn() with the graph's control-flow context set to ctx and no control dependencies."""
    g = _ops.get_default_graph()
    saved = g._get_control_flow_context()
    g._set_control_flow_context(ctx)
    try:
        with _ops.control_dependencies(None):
            return fn()
    finally:
        g._set_control_flow_context(saved)


def _dense(g):
    if isinstance(g, IndexedSlices):
        return _ops.convert_to_tensor(g)
    return g


def _trainable(t) -> bool:
    d = t.dtype.base_dtype
    return d.is_floating or d.is_complex


class GradLoopState:
    """Ties a forward loop to its backprop loop: counters, syncs and value histories."""

    def __init__(self, forward_context, outer_grad_state):
        self.forward_context = forward_context
        self.outer_grad_state = outer_grad_state
        self.grad_context = None
        self.history: dict = {}
        self._add_forward_counter()

    # ---------------------------------------------------------------- forward side
    def _add_forward_counter(self):
        w = self.forward_context
        zero = _in_context(w.outer_context, lambda: array_ops.zeros([], _dtypes.int32, name="f_count"))
        outer = self.outer_grad_state
        from kernflow.core.ops import math_ops
        with _ops.name_scope(None), _ops.name_scope(w.name + "/"):
            self.forward_index, self.forward_sync, self.forward_count, ops = w._build_in(
                lambda: _counter(w, zero, "f", lambda i: math_ops.add(i, 1, name="f_count_add"),
                                 after=outer.forward_index.op if outer is not None else None))
        w.plumbing.update(ops)
        ctx = w.outer_context
        while ctx is not None:
            ctx._values.add(self.forward_count)
            ctx = ctx.outer_context
        if outer is not None:
            outer.forward_sync._add_control_input(self.forward_count.op)

    # ---------------------------------------------------------------- backward side
    def build_grad_context(self, outer_ctx, name):
        """Creates G (frame `name`) and its counter; returns G."""
        w = self.forward_context
        G = _v1.WhileContext(name, w.parallel_iterations, back_prop=False, outer_context=outer_ctx,
                             grad_state=self)
        self.grad_context = G
        n = self.forward_count
        n = outer_ctx.add_value(n) if outer_ctx is not None else n
        outer = self.outer_grad_state
        from kernflow.core.ops import math_ops
        self.grad_index, self.grad_sync, exit_, _ = G._build_in(
            lambda: _counter(G, n, "b", lambda i: math_ops.subtract(i, 1, name="b_count_sub"),
                             pred=lambda m: math_ops.greater(m, 0)))
        if outer is not None and outer.grad_context is not None:
            outer.grad_sync._add_control_input(exit_.op)
        return G

    def get_real_value(self, val):
        """The value `val` (inside the forward loop) had in the forward iteration that the
        current backprop iteration reverses."""
        op = val.op
        if op.type in ("Enter", "RefEnter") and op.get_attr("is_constant") and \
                op._control_flow_context is self.forward_context:
            return self.grad_context.add_value(op.inputs[0])   # a loop invariant: read it as is
        real = self.history.get(val)
        if real is not None:
            return real
        w = self.forward_context
        g = _ops.get_default_graph()
        vctx = _v1.get_output_context(op)
        if isinstance(vctx, _v1.CondContext) and _v1.is_switch(op) and val.value_index != vctx.branch:
            # The Switch output that leaves this branch lives in the other branch.
            sibling = _v1.CondContext(vctx.pred, vctx.pivot, 1 - vctx.branch, vctx.outer_context)
            sibling._values.add(val)
            vctx = sibling
        base = val.op.name.replace("/", "_")

        def make_stack():
            from kernflow.core.ops import stack_ops
            return stack_ops.stack_v2(-1, val.dtype.base_dtype, stack_name=f"{base}_history",
                                      name=f"{base}_stack")
        stack = _in_context(None, make_stack)   # in the root frame: one stack per step

        def push():
            from kernflow.core.ops import stack_ops
            with _ops.control_dependencies([self.forward_index.op]):
                return stack_ops.stack_push_v2(stack, val, swap_memory=w.swap_memory,
                                               name=f"{base}_push")
        saved = g._get_control_flow_context()
        g._set_control_flow_context(vctx)
        try:
            p = push()
        finally:
            g._set_control_flow_context(saved)
        self.forward_sync._add_control_input(p.op)
        G = self.grad_context
        ctrl = [self.grad_index.op]
        if isinstance(vctx, _v1.CondContext):
            pred = G.add_value(vctx.pred)
            guard = G._build_in(lambda: array_ops.identity(_cf.switch(pred, pred)[vctx.branch],
                                                           name=f"{base}_guard"))
            ctrl = [guard.op]
        g._set_control_flow_context(G)
        try:
            from kernflow.core.ops import stack_ops
            with _ops.control_dependencies(ctrl):
                real = stack_ops.stack_pop_v2(stack, val.dtype.base_dtype, name=f"{base}_pop")
        finally:
            g._set_control_flow_context(saved)
        real.set_shape(val.shape)
        self.grad_sync._add_control_input(real.op)
        self.history[val] = real
        return real


def _counter(ctx, init, prefix, step, pred=None, after=None):
    """Builds (as `ctx`'s plumbing) a counter loop variable of `ctx`'s frame: Enter(init) -> Merge
    -> Switch(pivot) -> Identity `index` -> step(index) -> NextIteration, and its Exit. With `pred`,
    `pred(merge)` becomes the loop's predicate (the backprop loop); otherwise it follows the
    existing pivot (the forward loop). `step` waits for a ControlTrigger `sync` that ordered ops
    (stack pushes or pops) add themselves to, so the counter advances only after them.

    Returns:
        (index, sync, exit, the ops built).
    """
    e = _cf.enter(init, ctx.name, is_constant=False, parallel_iterations=ctx.parallel_iterations,
                  name=f"{prefix}_count_enter")
    if after is not None:
        e.op._add_control_input(after)
    m = _cf.merge([e, e], name=f"{prefix}_count_merge")[0]
    if pred is not None:
        ctx.pivot_for_pred = m
        ctx.pivot = _cf.loop_cond(pred(m), name=f"{prefix}_count_cond")
    sw = _cf.switch(m, ctx.pivot)
    idx = array_ops.identity(sw[1], name=f"{prefix}_index")
    if pred is not None:
        ctx.pivot_for_body = idx
    sync = _cf.control_trigger(name=f"{prefix}_sync")
    sync._add_control_input(idx.op)
    nxt = step(idx)
    nxt.op._add_control_input(sync)
    back = _cf.next_iteration(nxt)
    m.op._update_input(1, back)
    ex = _cf.exit(sw[0], name=f"{prefix}_count_exit")
    return idx, sync, ex, [e.op, m.op, sw[0].op, idx.op, sync, nxt.op, back.op, ex.op]


def loop_gradients(W, exit_grads, backprop):
    """Builds the backprop loop of W; returns {tensor entering W: its gradient}.

    Args:
        W: the forward `WhileContext`.
        exit_grads: gradient (or None) per `W.loop_exits` entry.
        backprop: ``backprop(ys, grad_ys, xs, level)`` -> list of gradients of xs, the
            gradient machinery run over W's body (level W).
    """
    if not W._back_prop or all(g is None for g in exit_grads):
        return {}
    g = _ops.get_default_graph()
    outer_ctx = g._get_control_flow_context()
    outer_gs = outer_ctx.grad_state if outer_ctx is not None else None
    with _ops.name_scope(W.name.replace("/", "_") + "_grad") as scope:
        state = GradLoopState(W, outer_gs)
        G = state.build_grad_context(outer_ctx, scope.rstrip("/"))
        var_ids = [k for k, x in enumerate(W.loop_exits) if _trainable(x)]
        chains = {}
        for k in var_ids:
            g0 = exit_grads[k]
            if g0 is None:
                g0 = array_ops.zeros_like(W.loop_exits[k])
            g0 = _dense(g0)

            def chain(g0=g0, k=k):
                e = _cf.enter(g0, G.name, is_constant=False, parallel_iterations=G.parallel_iterations,
                              name=f"b_enter_{k}")
                m = _cf.merge([e, e], name=f"b_merge_{k}")[0]
                sw = _cf.switch(m, G.pivot)
                return m, sw, array_ops.identity(sw[1], name=f"b_var_{k}")
            chains[k] = G._build_in(chain)
        invariants = [e for e in W.invariant_enters if _trainable(e)]
        xs = [W.body_inputs[k] for k in var_ids] + invariants
        ys = [W.body_outputs[k] for k in var_ids]
        G.enter()
        try:
            grads = backprop(ys, [chains[k][2] for k in var_ids], xs, W)
        finally:
            G.exit()
        result = {}

        def add(src, g):
            prev = result.get(src)   # one tensor may enter the loop several times
            result[src] = g if prev is None else prev + g
        G.enter()
        try:   # dense versions of IndexedSlices gradients are computed inside the backprop loop
            grads = [_dense(d) for d in grads]
        finally:
            G.exit()
        for pos, k in enumerate(var_ids):
            m, sw, ident = chains[k]
            d = grads[pos]
            if d is None:
                d = G._build_in(lambda ident=ident: array_ops.zeros_like(ident))

            def close(m=m, sw=sw, d=d, k=k):
                m.op._update_input(1, _cf.next_iteration(d))
                return _cf.exit(sw[0], name=f"b_exit_{k}")
            ex = G._build_in(close)
            add(W.loop_enters[k].op.inputs[0], ex)
        for inv, d in zip(invariants, grads[len(var_ids):]):
            if d is None:
                continue
            src = inv.op.inputs[0]
            init = array_ops.zeros_like(src)

            def acc_chain(init=init):
                e = _cf.enter(init, G.name, is_constant=False, parallel_iterations=G.parallel_iterations,
                              name="b_acc_enter")
                m = _cf.merge([e, e], name="b_acc_merge")[0]
                sw = _cf.switch(m, G.pivot)
                return m, sw, array_ops.identity(sw[1])
            m, sw, ident = G._build_in(acc_chain)
            G.enter()
            try:
                from kernflow.core.ops import math_ops
                total = math_ops.add(ident, d, name="b_acc_add")
            finally:
                G.exit()

            def close_acc(m=m, sw=sw, total=total):
                m.op._update_input(1, _cf.next_iteration(total))
                return _cf.exit(sw[0], name="b_acc_exit")
            add(src, G._build_in(close_acc))
        ctx = outer_ctx
        while ctx is not None:
            ctx._values.update(result.values())
            ctx = ctx.outer_context
    return result
