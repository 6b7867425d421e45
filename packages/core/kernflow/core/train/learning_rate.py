"""Learning-rate schedules and the global step (TF1's tf.train helpers)."""

from __future__ import annotations

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops

__all__ = ["exponential_decay", "piecewise_constant", "get_global_step", "create_global_step",
           "get_or_create_global_step", "global_step"]


def exponential_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None):
    """learning_rate * decay_rate ** (global_step / decay_steps) (floored when `staircase`).

    Raises:
        ValueError: if global_step is None.
    """
    from kernflow.core.ops import math_ops
    if global_step is None:
        raise ValueError("global_step is required for exponential_decay.")
    with _ops.name_scope(name, "ExponentialDecay", [learning_rate, global_step]) as scope:
        lr = _ops.convert_to_tensor(learning_rate, name="learning_rate")
        dt = lr.dtype
        step = math_ops.cast(global_step, dt)
        p = step / math_ops.cast(decay_steps, dt)
        if staircase:
            p = math_ops.floor(p)
        return math_ops.multiply(lr, math_ops.pow(math_ops.cast(decay_rate, dt), p), name=scope)


def piecewise_constant(x, boundaries, values, name=None):
    """values[0] while x <= boundaries[0], values[1] while x <= boundaries[1], ..., values[-1] after.

    Raises:
        ValueError: if len(values) != len(boundaries) + 1.
    """
    from kernflow.core.ops import math_ops
    if len(values) != len(boundaries) + 1:
        raise ValueError("The length of boundaries should be 1 less than the length of values")
    with _ops.name_scope(name, "PiecewiseConstant", [x]) as scope:
        x = _ops.convert_to_tensor(x)
        vals = [_ops.convert_to_tensor(v) for v in values]
        bounds = [math_ops.cast(b, x.dtype) if isinstance(b, _ops.Tensor) else
                  _ops.convert_to_tensor(b, dtype=x.dtype.base_dtype) for b in boundaries]
        out = vals[-1]
        for b, v in reversed(list(zip(bounds, vals[:-1]))):
            out = math_ops.where(math_ops.less_equal(x, b), v, out)
        from kernflow.core.ops import array_ops
        return array_ops.identity(out, name=scope)


def get_global_step(graph=None):
    """Returns the global step variable of `graph`, or None."""
    g = graph or _ops.get_default_graph()
    coll = g.get_collection(_ops.GraphKeys.GLOBAL_STEP)
    if len(coll) > 1:
        raise TypeError("There should be only one global step variable.")
    if coll:
        return coll[0]
    try:
        return g.get_tensor_by_name("global_step:0")
    except KeyError:
        return None


def create_global_step(graph=None):
    """Creates the int64 global step variable ("global_step", initial 0, not trainable).

    Raises:
        ValueError: if it already exists.
    """
    from kernflow.core.ops.variables import Variable
    g = graph or _ops.get_default_graph()
    if get_global_step(g) is not None:
        raise ValueError("\"global_step\" already exists.")
    with g.as_default(), _ops.init_scope(), _ops.name_scope(None):
        return Variable(0, dtype=_dtypes.int64, name="global_step", trainable=False,
                        collections=[_ops.GraphKeys.GLOBAL_VARIABLES, _ops.GraphKeys.GLOBAL_STEP])


def get_or_create_global_step(graph=None):
    """Returns the global step variable of `graph`, creating it if needed."""
    step = get_global_step(graph)
    return step if step is not None else create_global_step(graph)


def global_step(sess, global_step_tensor):
    """Returns the current value of the global step as a Python int."""
    return int(sess.run(global_step_tensor))
