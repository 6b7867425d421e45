"""`kf.cond`, `kf.case` and `kf.while_loop`: TF1's control-flow builders over the primitives.

Graph construction follows the whitepaper (and TF1's control_flow_ops): while a branch or a loop
body is built, the graph's *control-flow context* (a `CondContext` or `WhileContext`) rewrites every
new op (`Graph.create_op` calls `prepare_op` and `add_op`):

* In a cond branch, an input produced outside the branch goes through a Switch on the predicate
  (created once per value), so a branch whose predicate is false gets dead inputs and none of its
  ops run; an op without inputs gets the branch pivot as a control input. Branch results meet in
  Merge nodes.
* In a loop, a value from outside enters through an Enter with is_constant (a loop invariant,
  delivered to every iteration); loop variables go Enter -> Merge -> Switch(LoopCond) -> body ->
  NextIteration -> back into the Merge, and leave through Exit. An op without inputs, or whose
  inputs are all loop invariants, gets the loop's control pivot as a control input so it runs
  exactly once per iteration; a control dependency on an op outside the loop becomes a dependency
  on an in-loop Identity of one of its outputs (entered as a loop invariant).
"""

from __future__ import annotations

import contextlib

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import nest
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.ops import array_ops
from kernflow.core.ops import control_flow_ops as _cf

__all__ = ["cond", "case", "while_loop", "CondContext", "WhileContext"]

_MERGE_TYPES = ("Merge", "RefMerge")
_NEXT_TYPES = ("NextIteration", "RefNextIteration")


def _is_loop_constant_enter(op) -> bool:
    return op.type in ("Enter", "RefEnter") and op.get_attr("is_constant")


def is_loop_exit(op) -> bool:
    return op.type in ("Exit", "RefExit")


def is_switch(op) -> bool:
    return op.type in ("Switch", "RefSwitch")


def get_while_context(op):
    """The innermost while loop `op` was built in, or None."""
    ctx = op._control_flow_context
    return ctx.get_while_context() if ctx is not None else None


def get_output_context(op):
    """The context `op`'s outputs belong to (an Exit's outputs leave its loop)."""
    ctx = op._control_flow_context
    if ctx is not None and is_loop_exit(op):
        ctx = ctx.outer_context
    return ctx


class ControlFlowContext:
    """Base of the cond and while contexts: the values known inside and their internal versions."""

    def __init__(self, outer_context):
        self.outer_context = outer_context
        self._values: set = set()       # tensors usable as they are inside this context
        self._external: dict = {}       # external tensor -> its Switch/Enter'd version inside
        self._raw = 0
        self._saved = []

    # ---------------------------------------------------------------- entering
    def enter(self) -> None:
        g = _ops.get_default_graph()
        self._saved.append(g._get_control_flow_context())
        g._set_control_flow_context(self)

    def exit(self) -> None:
        _ops.get_default_graph()._set_control_flow_context(self._saved.pop())

    @contextlib.contextmanager
    def _building(self):
        """Creates the context's own plumbing ops (Switch/Enter/Merge...) without rewriting them."""
        self.enter()
        self._raw += 1
        try:
            with _ops.control_dependencies(None):
                yield
        finally:
            self._raw -= 1
            self.exit()

    def _build_in(self, fn):
        """Returns fn() with fn's ops built as this context's plumbing."""
        with self._building():
            return fn()

    # ---------------------------------------------------------------- queries
    def get_while_context(self):
        ctx = self
        while ctx is not None and not isinstance(ctx, WhileContext):
            ctx = ctx.outer_context
        return ctx

    @property
    def grad_state(self):
        w = self.get_while_context()
        return w._grad_state if w is not None else None

    @property
    def back_prop(self) -> bool:
        w = self.get_while_context()
        return w._back_prop if w is not None else True

    def is_inside(self, other) -> bool:
        """True if this context is `other` or nested in it."""
        ctx = self
        while ctx is not None:
            if ctx is other:
                return True
            ctx = ctx.outer_context
        return False

    def control_pivot(self):
        raise NotImplementedError

    # ---------------------------------------------------------------- op rewriting
    def add_op(self, op) -> None:
        ctx = self
        while ctx is not None:
            ctx._values.update(op.outputs)
            ctx = ctx.outer_context

    def _in_context(self, op) -> bool:
        c = get_output_context(op)
        return c is not None and c.is_inside(self)

    def _external_control(self, ctrl):
        """Splits control inputs into those inside the enclosing loop and those outside it."""
        w = self.get_while_context()
        if w is None:
            return ctrl, []
        inside, outside = [], []
        for c in ctrl:
            cw = get_output_context(c)
            cw = cw.get_while_context() if cw is not None else None
            (inside if cw is w else outside).append(c)
        return inside, outside

    def _internal_inputs(self, op_type, inputs):
        """Each input as seen inside this context (a Merge's back edge stays as it is)."""
        return [x if op_type in _MERGE_TYPES and x.op.type in _NEXT_TYPES else self.add_value(x)
                for x in inputs]

    def _internal_control(self, ctrl):
        """Control inputs, with those from outside the enclosing loop replaced by in-loop proxies."""
        inside, outside = self._external_control(ctrl)
        return inside + self._loop_proxies(outside) if outside else inside

    def _loop_proxies(self, external):
        """In-loop ops standing for control dependencies on ops outside the loop."""
        w = self.get_while_context()
        out = []
        for c in external:
            if c.outputs:
                t = c.outputs[0]
            else:
                # An op without outputs (a group): a scalar computed after it stands for it.
                saved = _ops.get_default_graph()._get_control_flow_context()
                _ops.get_default_graph()._set_control_flow_context(w.outer_context)
                try:
                    with _ops.control_dependencies([c]):
                        from kernflow.core.ops import array_ops_shape
                        t = array_ops_shape.zeros([], name=f"{c.name.split('/')[-1]}_dep")
                finally:
                    _ops.get_default_graph()._set_control_flow_context(saved)
            with _ops.control_dependencies(None):
                out.append(array_ops.identity(t, name="control_dep").op)
        return out


class CondContext(ControlFlowContext):
    """The context of one branch of a `cond`."""

    def __init__(self, pred, pivot, branch, outer_context=None):
        super().__init__(outer_context)
        self.pred = pred
        self.pivot = pivot
        self.branch = branch
        self._values.update([pred, pivot])

    def control_pivot(self):
        return self.pivot

    def add_value(self, val):
        if val in self._values:
            return self._external.get(val, val)
        self._values.add(val)
        result = val
        if self.outer_context is not None:
            result = self.outer_context.add_value(val)
            self._values.add(result)
        with self._building():
            result = _cf.switch(result, self.pred)[self.branch]
        ctx = self
        while ctx is not None:
            ctx._values.add(result)
            ctx = ctx.outer_context
        self._external[val] = result
        return result

    def prepare_op(self, op_type, inputs, ctrl):
        if self._raw:
            return inputs, ctrl
        ctrl = self._internal_control(ctrl)
        if not inputs:
            if not any(self._in_context(c) for c in ctrl):
                ctrl = ctrl + [self.pivot.op]
            return inputs, ctrl
        return self._internal_inputs(op_type, inputs), ctrl

    def build_branch(self, fn):
        """Calls fn inside this branch; returns (its result, flat list of in-branch tensors)."""
        self.enter()
        try:
            original = fn()
            if original is None:
                return None, None
            tensor_array_ops = _ta_ops()

            def one(v):
                if isinstance(v, _ops.Operation):
                    with _ops.control_dependencies([v]):
                        return array_ops.identity(self.pivot)
                if isinstance(v, tensor_array_ops.TensorArray):
                    v = v.flow
                return self.add_value(_ops.convert_to_tensor(v))
            flat = [one(v) for v in nest.flatten(original)]
            return original, flat
        finally:
            self.exit()


class WhileContext(ControlFlowContext):
    """The context of one `while_loop` (its frame)."""

    def __init__(self, name, parallel_iterations=10, back_prop=True, swap_memory=False,
                 outer_context=None, grad_state=None):
        super().__init__(outer_context)
        self.name = name
        self.parallel_iterations = parallel_iterations
        self._back_prop = back_prop
        self.swap_memory = swap_memory
        self._grad_state = grad_state
        self.pivot = None
        self.pivot_for_pred = None
        self.pivot_for_body = None
        self.loop_enters: list = []
        self.loop_exits: list = []
        self.invariant_enters: list = []   # Enter outputs of values from outside (is_constant)
        self.body_inputs: list = []        # per loop variable: the body's view of it (Identity)
        self.body_outputs: list = []       # per loop variable: what the body returned
        self.plumbing: set = set()         # the loop's own Enter/Merge/Switch/LoopCond/Next/Exit ops

    def control_pivot(self):
        return self.pivot_for_body if self.pivot_for_body is not None else self.pivot_for_pred

    def add_value(self, val):
        if val in self._values:
            return self._external.get(val, val)
        gs = self._grad_state
        if gs is not None:
            # A forward loop's value read by the backprop loop: its per-iteration history.
            fwd = get_output_context(val.op)
            fwd = fwd.get_while_context() if fwd is not None else None
            if fwd is gs.forward_context:
                real = gs.get_real_value(val)
                self._values.add(val)
                self._external[val] = real
                return real
        self._values.add(val)
        result = val
        if self.outer_context is not None:
            result = self.outer_context.add_value(val)
        with self._building():
            enter = _cf.enter(result, self.name, is_constant=True,
                              parallel_iterations=self.parallel_iterations)
        self._values.add(enter)
        self._external[val] = enter
        self.invariant_enters.append(enter)
        self.plumbing.add(enter.op)
        return enter

    def prepare_op(self, op_type, inputs, ctrl):
        if self._raw:
            return inputs, ctrl
        ctrl = self._internal_control(ctrl)
        pivot = self.control_pivot()
        if not inputs:
            if not ctrl and pivot is not None:
                ctrl = [pivot.op]
            return inputs, ctrl
        new = self._internal_inputs(op_type, inputs)
        if not ctrl and pivot is not None and all(_is_loop_constant_enter(x.op) for x in new):
            ctrl = [pivot.op]   # only loop invariants: run once per iteration, not once more
        return new, ctrl

    # ---------------------------------------------------------------- building
    def build_loop(self, pred, body, loop_vars, shape_invariants):
        tensor_array_ops = _ta_ops()
        flat = nest.flatten(loop_vars)
        tas = [x if isinstance(x, tensor_array_ops.TensorArray) else None for x in flat]
        real = [x.flow if ta is not None else _ops.convert_to_tensor(x) for x, ta in zip(flat, tas)]
        invariants = nest.flatten(shape_invariants) if shape_invariants is not None else None
        if invariants is not None and len(invariants) != len(real):
            raise ValueError(f"shape_invariants has {len(invariants)} shapes for {len(real)} loop "
                             f"variables")
        self._values.update(real)
        if self.outer_context is not None:
            real = [self.outer_context.add_value(x) for x in real]
        with self._building():
            enters = [_cf.enter(x, self.name, is_constant=False,
                                parallel_iterations=self.parallel_iterations) for x in real]
        outer_pivot = None
        ctx = self.outer_context
        while ctx is not None and outer_pivot is None:
            outer_pivot = ctx.control_pivot()
            ctx = ctx.outer_context
        if outer_pivot is not None:
            for e, x in zip(enters, real):
                if _is_loop_constant_enter(x.op):
                    e.op._add_control_input(outer_pivot.op)
        if invariants is not None:
            for e, x, inv in zip(enters, real, invariants):
                inv = _ts.as_shape(inv) if inv is not None else _ts.TensorShape(None)
                if not inv.is_compatible_with(x.shape):
                    raise ValueError(f"The shape invariant specified for {x.name} is not compatible "
                                     f"with the initial shape of the loop variable. It enters the "
                                     f"loop with shape {x.shape}, but the specified shape invariant "
                                     f"is {inv}.")
                e._shape = inv
        # From here on only the Enters stand for the loop variables inside (TF's
        # _InitializeValues): a loop variable's initial tensor used again in the body enters the
        # loop as an invariant of its own.
        self._values = set(enters)
        self.loop_enters = enters
        with self._building():
            merges = [_cf.merge([e, e])[0] for e in enters]
        self.pivot_for_pred = merges[0]

        def repack(tensors):
            items = [tensor_array_ops.build_ta_with_new_flow(ta, t) if ta is not None else t
                     for ta, t in zip(tas, tensors)]
            return nest.pack_sequence_as(loop_vars, items)

        self.enter()
        try:
            packed = repack(merges)
            c = pred(*packed) if isinstance(loop_vars, (list, tuple)) else pred(packed)
            c = _ops.convert_to_tensor(c)
            if c.dtype.base_dtype != _dtypes.bool:
                raise TypeError(f"while_loop cond must return a boolean tensor, got {c.dtype.name}")
        finally:
            self.exit()
        with self._building():
            self.pivot = _cf.loop_cond(c, name="LoopCond")
            switches = [_cf.switch(m, self.pivot) for m in merges]
            body_vars = [array_ops.identity(sw[1]) for sw in switches]
        self.pivot_for_body = body_vars[0]
        self.enter()
        try:
            packed = repack(body_vars)
            result = body(*packed) if isinstance(loop_vars, (list, tuple)) else body(packed)
            if not nest.is_nested(result) and isinstance(loop_vars, (list, tuple)):
                result = [result]
            original_result = result
            try:
                nest.assert_same_structure(loop_vars, result, check_types=False)
            except (ValueError, TypeError) as e:
                raise ValueError(f"The body of while_loop must return the structure of its "
                                 f"loop_vars: {e}") from None
            flat_res = nest.flatten(result)
            if len(flat_res) != len(merges):
                raise ValueError(f"Number of inputs and outputs of body must match loop_vars: "
                                 f"{len(merges)}, {len(flat_res)}")
            flows = []
            for v in flat_res:
                if isinstance(v, tensor_array_ops.TensorArray):
                    v = v.flow
                v = self.add_value(_ops.convert_to_tensor(v))
                if _is_loop_constant_enter(v.op):
                    # A value from outside returned as is: pass it on once per iteration (behind
                    # the pivot), not once more after the loop ended.
                    v = array_ops.identity(v)
                flows.append(v)
            for m, v, x in zip(merges, flows, real):
                if v.dtype.base_dtype != m.dtype.base_dtype:
                    raise TypeError(f"Loop variable {x.name} enters the loop as {m.dtype.name} but "
                                    f"the body returns {v.dtype.name}")
                if not _shape_less_equal(v.shape, m.shape):
                    raise ValueError(f"Input tensor '{x.name}' enters the loop with shape {m.shape}, "
                                     f"but has shape {v.shape} after one iteration. To allow the "
                                     f"shape to vary across iterations, use the `shape_invariants` "
                                     f"argument of tf.while_loop to specify a less-specific shape.")
        finally:
            self.exit()
        with self._building():
            for m, v in zip(merges, flows):
                nxt = _cf.next_iteration(v)
                m.op._update_input(1, nxt)
            exits = [_cf.exit(sw[0]) for sw in switches]
        for e, m in zip(exits, merges):
            e._shape = m.shape
        self.loop_exits = exits
        self.body_inputs = body_vars
        self.body_outputs = flows
        self.plumbing.update(t.op for t in enters + merges + exits)
        self.plumbing.update(sw[0].op for sw in switches)
        self.plumbing.add(self.pivot.op)
        self.plumbing.update(m.op.inputs[1].op for m in merges)
        if self.outer_context is not None:
            ctx = self.outer_context
            while ctx is not None:
                ctx._values.update(exits)
                ctx = ctx.outer_context
        return original_result, [tensor_array_ops.build_ta_with_new_flow(ta, t) if ta is not None
                                 else t for ta, t in zip(tas, exits)]


class _NoTensorArrays:
    """Stands in for tensor_array_ops until that module is installed."""

    class TensorArray:  # nothing is an instance
        pass

    @staticmethod
    def build_ta_with_new_flow(ta, flow):
        return flow


def _ta_ops():
    try:
        from kernflow.core.ops import tensor_array_ops
    except ModuleNotFoundError as e:
        if e.name != "kernflow.core.ops.tensor_array_ops":
            raise
        return _NoTensorArrays
    return tensor_array_ops


def _shape_less_equal(a, b) -> bool:
    """True if shape a is at least as specific as shape b (b's known dims match a's)."""
    if b.rank is None:
        return True
    if a.rank is None or a.rank != b.rank:
        return False
    return all(y is None or x == y for x, y in zip(a.as_list(), b.as_list()))


# ---------------------------------------------------------------------------- user API
def cond(pred, true_fn=None, false_fn=None, strict=False, name=None, fn1=None, fn2=None):
    """Returns true_fn() if pred is true else false_fn(); only the taken branch runs (TF1 `tf.cond`).

    Args:
        pred: a scalar boolean Tensor.
        true_fn, false_fn: callables returning the same structure of tensors (or ops).
        strict: if False, a single-element list/tuple result is unpacked.

    Raises:
        TypeError: a missing or non-callable branch, or a non-boolean pred.
        ValueError: branches returning different structures or dtypes.
    """
    true_fn = true_fn if true_fn is not None else fn1
    false_fn = false_fn if false_fn is not None else fn2
    if true_fn is None or not callable(true_fn):
        raise TypeError("true_fn must be callable.")
    if false_fn is None or not callable(false_fn):
        raise TypeError("false_fn must be callable.")
    with _ops.name_scope(name, "cond", [pred]):
        pred = _ops.convert_to_tensor(pred)
        if pred.dtype.base_dtype != _dtypes.bool:
            raise TypeError(f"cond's pred must be a boolean tensor, got {pred.dtype.name}")
        if pred.shape.rank not in (None, 0):
            raise ValueError(f"cond's pred must be a scalar, got shape {pred.shape}")
        p_f, p_t = _cf.switch(pred, pred)
        pivot_t = array_ops.identity(p_t, name="switch_t")
        pivot_f = array_ops.identity(p_f, name="switch_f")
        pred = array_ops.identity(pred, name="pred_id")
        outer = _ops.get_default_graph()._get_control_flow_context()
        ctx_t = CondContext(pred, pivot_t, 1, outer)
        orig_t, res_t = ctx_t.build_branch(true_fn)
        ctx_f = CondContext(pred, pivot_f, 0, outer)
        orig_f, res_f = ctx_f.build_branch(false_fn)
        if orig_t is None:
            raise ValueError("true_fn must have a return value.")
        if orig_f is None:
            raise ValueError("false_fn must have a return value.")
        try:
            nest.assert_same_structure(orig_t, orig_f, check_types=False)
        except (ValueError, TypeError) as e:
            raise ValueError(f"Outputs of true_fn and false_fn must have the same structure: {e}") \
                from None
        for t, f in zip(res_t, res_f):
            if t.dtype.base_dtype != f.dtype.base_dtype:
                raise ValueError(f"Outputs of true_fn and false_fn must have the same type: "
                                 f"{t.dtype.name}, {f.dtype.name}")
        merges = [_cf.merge([f, t])[0] for f, t in zip(res_f, res_t)]
        tensor_array_ops = _ta_ops()
        flat_t = nest.flatten(orig_t)
        merges = [tensor_array_ops.build_ta_with_new_flow(o, m)
                  if isinstance(o, tensor_array_ops.TensorArray) else m
                  for o, m in zip(flat_t, merges)]
        if not nest.is_nested(orig_t):
            return merges[0]
        out = nest.pack_sequence_as(orig_t, merges)
        if not strict and isinstance(out, (list, tuple)) and len(out) == 1 and \
                not hasattr(out, "_fields"):
            return out[0]
        return out


def case(pred_fn_pairs, default=None, exclusive=False, strict=False, name="case"):
    """Runs the fn of the first pred that is true (TF1 `tf.case`).

    Args:
        pred_fn_pairs: list of (boolean scalar Tensor, callable) pairs (or a dict).
        default: callable run when no pred is true; if None, the last pair's fn is the default
            and an assertion fails at run time when no pred is true.
        exclusive: if True, an assertion fails at run time when more than one pred is true.
    """
    if isinstance(pred_fn_pairs, dict):
        pred_fn_pairs = list(pred_fn_pairs.items())
    if not isinstance(pred_fn_pairs, (list, tuple)):
        raise TypeError("pred_fn_pairs must be a list, tuple, or dict")
    pairs = list(pred_fn_pairs)
    if not pairs:
        raise ValueError("pred_fn_pairs must not be empty")
    for entry in pairs:
        if not isinstance(entry, (list, tuple)) or len(entry) != 2:
            raise TypeError("Each entry in pred_fn_pairs must be a 2-tuple")
        p, fn = entry
        if not isinstance(p, _ops.Tensor) or p.dtype.base_dtype != _dtypes.bool:
            raise TypeError(f"pred must be Tensor of type bool: {getattr(p, 'name', p)!r}")
        if not callable(fn):
            raise TypeError(f"fn for pred {p.name} must be callable.")
    with _ops.name_scope(name, "case", [p for p, _ in pairs]):
        preds = [_ops.convert_to_tensor(p) for p, _ in pairs]
        from kernflow.core.ops import math_ops
        checks = []
        if exclusive:
            count = math_ops.reduce_sum(math_ops.cast(array_ops.stack(preds), _dtypes.int32))
            checks.append(_cf.Assert(math_ops.less_equal(count, 1),
                                     ["Input error: exclusive=True and more than 1 conditions "
                                      "evaluated as True:", array_ops.stack(preds)], name="exclusive"))
        if default is None:
            last_fn = pairs[-1][1]
            any_true = math_ops.reduce_any(array_ops.stack(preds))
            checks.append(_cf.Assert(any_true, ["Input error: None of conditions evaluated as True:",
                                                array_ops.stack(preds)], name="none_true"))
            default = last_fn
            pairs = pairs[:-1]
            preds = preds[:-1]
        fn = default
        for p, (_, f) in reversed(list(zip(preds, pairs))):
            fn = (lambda p=p, f=f, rest=fn: cond(p, f, rest, strict=strict))
        if checks:
            with _ops.control_dependencies(checks):
                return nest.map_structure(
                    lambda t: array_ops.identity(t) if isinstance(t, _ops.Tensor) else t, fn())
        return fn()


def while_loop(cond, body, loop_vars, shape_invariants=None, parallel_iterations=10,  # noqa: A002
               back_prop=True, swap_memory=False, name=None, maximum_iterations=None,
               return_same_structure=False):
    """Repeats `body` while `cond` is true (TF1 `tf.while_loop`), as one dataflow loop.

    Args:
        cond: callable taking the loop variables, returning a boolean scalar Tensor.
        body: callable taking the loop variables, returning them updated (same structure).
        loop_vars: a (nested) list/tuple/dict of Tensors and TensorArrays, or one Tensor.
        shape_invariants: shapes the loop variables keep across iterations (default: their
            initial shapes).
        parallel_iterations: how many iterations may run at once.
        back_prop: whether gradients may flow through the loop.
        maximum_iterations: an optional bound on the number of iterations.

    Returns:
        The loop variables after the last iteration, in the structure of `loop_vars` (a
        single-element list comes back unpacked unless return_same_structure).

    Raises:
        TypeError: cond/body not callable, cond not boolean, body changing a dtype.
        ValueError: empty loop_vars, body changing the structure or a shape beyond its invariant.
    """
    if not callable(cond):
        raise TypeError("cond must be callable.")
    if not callable(body):
        raise TypeError("body must be callable.")
    if parallel_iterations < 1:
        raise TypeError("parallel_iterations must be a positive integer.")
    single = not isinstance(loop_vars, (list, tuple, dict))
    if nest.is_nested(loop_vars) and not nest.flatten(loop_vars):
        raise ValueError("No loop variables provided")
    with _ops.name_scope(name, "while", nest.flatten(loop_vars)) as scope:
        if maximum_iterations is not None:
            max_iter = _ops.convert_to_tensor(maximum_iterations, name="maximum_iterations")
            if max_iter.shape.rank not in (None, 0):
                raise ValueError(f"maximum_iterations must be a scalar, saw shape: {max_iter.shape}")
            from kernflow.core.ops import math_ops
            counter = array_ops.zeros([], dtype=max_iter.dtype, name="iteration_counter")
            orig_cond, orig_body = cond, body
            lv = [loop_vars] if single else loop_vars

            def cond(i, lv):  # noqa: F811
                inner = orig_cond(*lv) if isinstance(lv, (list, tuple)) else orig_cond(lv)
                return math_ops.logical_and(i < max_iter, inner)

            def body(i, lv):  # noqa: F811
                out = orig_body(*lv) if isinstance(lv, (list, tuple)) else orig_body(lv)
                if isinstance(lv, (list, tuple)) and not nest.is_nested(out):
                    out = [out]
                return (i + 1, out)
            loop_vars = (counter, lv)
            if shape_invariants is not None:
                shape_invariants = (_ts.TensorShape([]),
                                    [shape_invariants] if single else shape_invariants)
        elif single:
            loop_vars = [loop_vars]
            if shape_invariants is not None:
                shape_invariants = [shape_invariants]
        outer = _ops.get_default_graph()._get_control_flow_context()
        ctx = WhileContext(scope.rstrip("/"), parallel_iterations, back_prop, swap_memory, outer)
        _ops.get_default_graph().add_to_collection("while_context", ctx)
        original_result, exits = ctx.build_loop(cond, body, loop_vars, shape_invariants)
        result = nest.pack_sequence_as(original_result, exits)
        if maximum_iterations is not None:
            result = result[1]
        if single or (not return_same_structure and isinstance(result, (list, tuple)) and
                      not hasattr(result, "_fields") and len(result) == 1):
            return result[0] if isinstance(result, (list, tuple)) else result
        return result
