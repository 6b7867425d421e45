"""The Stack ops (StackV2/StackPushV2/StackPopV2/StackCloseV2): LIFO order, per-step stacks, errors."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.framework.gradient_registry import gradient_status
from kernflow.core.ops import stack_ops


@pytest.fixture(autouse=True)
def graph():
    g = kf.Graph()
    with g.as_default():
        yield g


def _run(fetches, feed=None):
    with kf.Session() as sess:
        return sess.run(fetches, feed)


def _chain(*make):
    """Builds each op after the previous one (control dependencies) and returns them all."""
    out, prev = [], []
    for fn in make:
        with kf.control_dependencies(prev):
            t = fn()
        out.append(t)
        prev = [t]
    return out


def test_op_signatures(graph):
    h = stack_ops.stack_v2(5, kf.float32, stack_name="s")
    assert h.dtype == kf.resource and h.shape.as_list() == [] and h.op.type == "StackV2"
    assert h.op.get_attr("elem_type") == kf.float32 and h.op.get_attr("stack_name") == "s"
    x = kf.placeholder(kf.float32, [2, 3])
    push = stack_ops.stack_push_v2(h, x, swap_memory=True)
    assert push.dtype == kf.float32 and push.shape.as_list() == [2, 3]
    assert push.op.get_attr("swap_memory") is True and push.op.get_attr("T") == kf.float32
    pop = stack_ops.stack_pop_v2(h, kf.float32)
    assert pop.dtype == kf.float32 and pop.shape.rank is None
    close = stack_ops.stack_close_v2(h)
    assert close.type == "StackCloseV2" and close.outputs == []
    for op_type in ("StackV2", "StackPushV2", "StackPopV2", "StackCloseV2"):
        assert gradient_status(op_type) == "not_differentiable"
    assert not hasattr(kf, "stack_v2")
    with pytest.raises(ValueError, match="rank 0"):
        stack_ops.stack_v2([1, 2], kf.float32)


def test_push_returns_its_value_and_pops_are_lifo():
    h = stack_ops.stack_v2(-1, kf.int32)
    ops = _chain(lambda: stack_ops.stack_push_v2(h, 1),
                 lambda: stack_ops.stack_push_v2(h, [2, 3]),
                 lambda: stack_ops.stack_push_v2(h, 4),
                 lambda: stack_ops.stack_pop_v2(h, kf.int32),
                 lambda: stack_ops.stack_pop_v2(h, kf.int32),
                 lambda: stack_ops.stack_push_v2(h, 5),
                 lambda: stack_ops.stack_pop_v2(h, kf.int32),
                 lambda: stack_ops.stack_pop_v2(h, kf.int32))
    vals = _run(ops)
    assert vals[0] == 1 and list(vals[1]) == [2, 3] and vals[2] == 4
    assert vals[3] == 4 and list(vals[4]) == [2, 3] and vals[6] == 5 and vals[7] == 1


def test_pushed_values_are_copies():
    v = kf.Variable([1.0, 2.0])
    h = stack_ops.stack_v2(-1, kf.float32)
    push, _, pop = _chain(lambda: stack_ops.stack_push_v2(h, v.value()),
                          lambda: kf.assign_add(v, [10.0, 10.0]),
                          lambda: stack_ops.stack_pop_v2(h, kf.float32))
    with kf.Session() as sess:
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run([push, pop])[1], [1.0, 2.0])


def test_stacks_are_per_step():
    p = kf.placeholder(kf.float32, [])
    h = stack_ops.stack_v2(1, kf.float32)
    _, pop = _chain(lambda: stack_ops.stack_push_v2(h, p),
                    lambda: stack_ops.stack_pop_v2(h, kf.float32))
    with kf.Session() as sess:
        assert sess.run(pop, {p: 1.0}) == 1.0
        assert sess.run(pop, {p: 2.0}) == 2.0


def test_pop_of_an_empty_stack():
    h = stack_ops.stack_v2(-1, kf.float32, stack_name="foo")
    with pytest.raises(errors.InvalidArgumentError, match=r"StackPopV2 .*Stack\[foo_\d+\] is empty"):
        _run(stack_ops.stack_pop_v2(h, kf.float32))


def test_push_past_max_size():
    h = stack_ops.stack_v2(1, kf.float32)
    ops = _chain(lambda: stack_ops.stack_push_v2(h, 1.0), lambda: stack_ops.stack_push_v2(h, 2.0))
    with pytest.raises(errors.InvalidArgumentError, match=r"overflowed its max_size \(1\)"):
        _run(ops)


def test_dtype_mismatches():
    h = stack_ops.stack_v2(-1, kf.float32)
    with pytest.raises(errors.InvalidArgumentError, match="holds float32 but the op pushes int32"):
        _run(stack_ops.stack_push_v2(h, 1))
    ops = _chain(lambda: stack_ops.stack_push_v2(h, 1.0),
                 lambda: stack_ops.stack_pop_v2(h, kf.int32))
    with pytest.raises(errors.InvalidArgumentError, match="holds float32 but the op pops int32"):
        _run(ops)


def test_use_after_close():
    h = stack_ops.stack_v2(-1, kf.float32)
    ops = _chain(lambda: stack_ops.stack_push_v2(h, 1.0),
                 lambda: stack_ops.stack_close_v2(h),
                 lambda: stack_ops.stack_pop_v2(h, kf.float32))
    with pytest.raises(errors.InvalidArgumentError, match="has already been closed"):
        _run(ops[-1])


def test_gradient_does_not_flow_through_a_stack():
    x = kf.placeholder(kf.float32, [2])
    h = stack_ops.stack_v2(-1, kf.float32)
    push, pop = _chain(lambda: stack_ops.stack_push_v2(h, x * 2.0),
                       lambda: stack_ops.stack_pop_v2(h, kf.float32))
    assert kf.gradients(kf.reduce_sum(push), [x]) == [None]
