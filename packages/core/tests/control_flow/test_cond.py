"""kf.cond and kf.case (ops/control_flow_v1.py): TF1 semantics, values and errors."""

import collections

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors


def _run(fetches, feed=None):
    with kf.Session() as sess:
        return sess.run(fetches, feed)


# ---------------------------------------------------------------------------- only one branch runs
def test_pred_from_placeholder_switches_between_runs():
    p = kf.placeholder(kf.bool, [])
    x = kf.placeholder(kf.float32, [3])
    out = kf.cond(p, lambda: x * 2.0, lambda: x - 1.0)
    xv = np.array([1.0, 2.0, 3.0], np.float32)
    with kf.Session() as s:
        for pv in (True, False, False, True):
            np.testing.assert_allclose(s.run(out, {p: pv, x: xv}), xv * 2 if pv else xv - 1)


def test_python_bool_pred():
    x = kf.constant(3)
    assert _run(kf.cond(True, lambda: x + 1, lambda: x - 1)) == 4
    assert _run(kf.cond(False, lambda: x + 1, lambda: x - 1)) == 2


def test_untaken_branch_side_effects_do_not_happen():
    p = kf.placeholder(kf.bool, [])
    v = kf.Variable(0, name="v")
    w = kf.Variable(0, name="w")

    def true_fn():
        with kf.control_dependencies([kf.assign_add(v, 1)]):
            return kf.constant(1)

    def false_fn():
        with kf.control_dependencies([kf.assign_add(w, 10)]):
            return kf.constant(2)
    out = kf.cond(p, true_fn, false_fn)
    with kf.Session() as s:
        s.run([v.initializer, w.initializer])
        assert s.run(out, {p: True}) == 1
        assert s.run([v, w]) == [1, 0]
        assert s.run(out, {p: False}) == 2
        assert s.run([v, w]) == [1, 10]
        assert s.run(out, {p: True}) == 1
        assert s.run([v, w]) == [2, 10]


def test_op_created_outside_runs_even_if_only_the_untaken_branch_uses_it():
    # TF1's well-known gotcha: an op built outside the branch functions is not conditional.
    p = kf.placeholder(kf.bool, [])
    v = kf.Variable(0)
    bump = kf.assign_add(v, 1)

    def t():
        with kf.control_dependencies([bump]):
            return kf.constant(1)
    out = kf.cond(p, t, lambda: kf.constant(2))
    with kf.Session() as s:
        s.run(v.initializer)
        assert s.run(out, {p: False}) == 2
        assert s.run(v) == 1
        assert s.run(out, {p: True}) == 1
        assert s.run(v) == 2


def test_untaken_branch_stateless_ops_without_inputs_do_not_run():
    # A constant-only branch hangs on the pivot: a kernel that would fail must not run.
    p = kf.placeholder(kf.bool, [])
    bad = lambda: kf.gather(kf.constant([1, 2, 3]), kf.constant(7))  # noqa: E731
    out = kf.cond(p, lambda: kf.constant(5), bad)
    assert _run(out, {p: True}) == 5
    with pytest.raises(errors.InvalidArgumentError):
        _run(out, {p: False})


def test_untaken_branch_error_does_not_surface():
    p = kf.placeholder(kf.bool, [])
    idx = kf.placeholder(kf.int32, [])
    params = kf.constant([10, 20, 30])
    out = kf.cond(p, lambda: kf.gather(params, idx), lambda: kf.constant(-1))
    assert _run(out, {p: False, idx: 99}) == -1
    assert _run(out, {p: True, idx: 2}) == 30


def test_branch_returning_ops():
    p = kf.placeholder(kf.bool, [])
    v = kf.Variable(0)
    out = kf.cond(p, lambda: kf.assign_add(v, 1).op, lambda: kf.assign_add(v, 100).op)
    with kf.Session() as s:
        s.run(v.initializer)
        s.run(out, {p: True})
        assert s.run(v) == 1
        s.run(out, {p: False})
        assert s.run(v) == 101
        # as a target
        s.run(out.op if isinstance(out, kf.Tensor) else out, {p: True})
        assert s.run(v) == 102


def test_branch_returning_group_and_no_op():
    p = kf.placeholder(kf.bool, [])
    v = kf.Variable(0)
    out = kf.cond(p, lambda: kf.group(kf.assign_add(v, 1), kf.assign_add(v, 2)), kf.no_op)
    with kf.Session() as s:
        s.run(v.initializer)
        s.run(out, {p: True})
        assert s.run(v) == 3
        s.run(out, {p: False})
        assert s.run(v) == 3


def test_branch_returns_outside_tensor():
    x = kf.constant([1.0, 2.0])
    y = kf.constant([5.0, 6.0])
    p = kf.placeholder(kf.bool, [])
    out = kf.cond(p, lambda: x, lambda: y)
    np.testing.assert_allclose(_run(out, {p: True}), [1, 2])
    np.testing.assert_allclose(_run(out, {p: False}), [5, 6])
    same = kf.cond(p, lambda: x, lambda: x)
    np.testing.assert_allclose(_run(same, {p: False}), [1, 2])


def test_branch_returns_placeholder_fed():
    p = kf.placeholder(kf.bool, [])
    a = kf.placeholder(kf.int32, [])
    out = kf.cond(p, lambda: a, lambda: a * 3)
    assert _run(out, {p: True, a: 4}) == 4
    assert _run(out, {p: False, a: 4}) == 12


def test_nested_structures():
    P = collections.namedtuple("P", "a b")
    p = kf.placeholder(kf.bool, [])
    x = kf.constant(2.0)

    def branch(k):
        return lambda: {"s": x * k, "t": (kf.constant(k), [x + k]), "nt": P(x - k, kf.constant([k, k]))}
    out = kf.cond(p, branch(1), branch(3))
    assert isinstance(out, dict) and isinstance(out["t"], tuple) and isinstance(out["nt"], P)
    assert isinstance(out["t"][1], list)
    r = _run(out, {p: False})
    assert r["s"] == 6.0 and r["t"][0] == 3 and r["t"][1][0] == 5.0
    assert r["nt"].a == -1.0
    np.testing.assert_array_equal(r["nt"].b, [3, 3])
    r = _run(out, {p: True})
    assert r["s"] == 2.0 and r["t"][0] == 1


def test_strict_and_singleton_unpacking():
    p = kf.constant(True)
    x = kf.constant(1)
    out = kf.cond(p, lambda: [x], lambda: [x + 1])
    assert isinstance(out, kf.Tensor)
    out = kf.cond(p, lambda: (x,), lambda: (x + 1,))
    assert isinstance(out, kf.Tensor)
    out = kf.cond(p, lambda: [x], lambda: [x + 1], strict=True)
    assert isinstance(out, list) and len(out) == 1
    assert _run(out) == [1]
    out = kf.cond(p, lambda: x, lambda: x + 1, strict=True)
    assert isinstance(out, kf.Tensor)


def test_fn1_fn2_aliases():
    x = kf.constant(1)
    assert _run(kf.cond(kf.constant(False), fn1=lambda: x, fn2=lambda: x + 5)) == 6


def test_output_shape_is_the_merge_of_the_branches():
    p = kf.placeholder(kf.bool, [])
    a = kf.zeros([2, 3])
    b = kf.ones([2, 5])
    assert kf.cond(p, lambda: a, lambda: a).shape.as_list() == [2, 3]
    assert kf.cond(p, lambda: a, lambda: b).shape.as_list() == [2, None]
    assert kf.cond(p, lambda: a, lambda: kf.zeros([4])).shape.rank is None


def test_nested_conds():
    p = kf.placeholder(kf.bool, [])
    q = kf.placeholder(kf.bool, [])
    x = kf.placeholder(kf.int32, [])
    v = kf.Variable(0)

    def inner_true():
        with kf.control_dependencies([kf.assign_add(v, 1)]):
            return x * 10
    out = kf.cond(p, lambda: kf.cond(q, inner_true, lambda: x * 100),
                  lambda: kf.cond(q, lambda: x + 1, lambda: x + 2))
    with kf.Session() as s:
        s.run(v.initializer)
        for pv in (True, False):
            for qv in (True, False):
                got = s.run(out, {p: pv, q: qv, x: 3})
                want = (30 if qv else 300) if pv else (4 if qv else 5)
                assert got == want, (pv, qv)
        assert s.run(v) == 1


def test_inner_cond_pred_computed_in_outer_branch():
    x = kf.placeholder(kf.float32, [])

    def outer_true():
        y = x * 2.0
        return kf.cond(y > 5.0, lambda: y, lambda: -y)
    out = kf.cond(x > 0.0, outer_true, lambda: kf.constant(0.0))
    assert _run(out, {x: 3.0}) == 6.0
    assert _run(out, {x: 1.0}) == -2.0
    assert _run(out, {x: -1.0}) == 0.0


def test_cond_on_variables_reads_and_assigns():
    v = kf.Variable(5.0)
    p = kf.placeholder(kf.bool, [])
    read = kf.cond(p, lambda: v + 0.0, lambda: v * 2.0)
    ref = kf.cond(p, lambda: kf.identity(v), lambda: kf.constant(-1.0))
    assign = kf.cond(p, lambda: kf.assign(v, 7.0), lambda: kf.assign_sub(v, 1.0))
    with kf.Session() as s:
        s.run(v.initializer)
        assert s.run(read, {p: True}) == 5.0 and s.run(read, {p: False}) == 10.0
        assert s.run(ref, {p: True}) == 5.0
        assert s.run(assign, {p: False}) == 4.0
        assert s.run(v) == 4.0
        assert s.run(assign, {p: True}) == 7.0
        assert s.run(v) == 7.0


def test_variable_returned_directly_from_branch():
    v = kf.Variable(3.0)
    w = kf.Variable(4.0)
    p = kf.placeholder(kf.bool, [])
    out = kf.cond(p, lambda: v, lambda: w)
    with kf.Session() as s:
        s.run([v.initializer, w.initializer])
        assert s.run(out, {p: True}) == 3.0
        assert s.run(out, {p: False}) == 4.0


def test_pred_from_variable_read_each_run():
    v = kf.Variable(0)
    inc = kf.assign_add(v, 1)
    out = kf.cond(kf.equal(kf.mod(v, 2), 0), lambda: kf.constant("even"), lambda: kf.constant("odd"))
    with kf.Session() as s:
        s.run(v.initializer)
        got = []
        for _ in range(4):
            got.append(s.run(out))
            s.run(inc)
    assert [x.decode() if isinstance(x, bytes) else x for x in got] == ["even", "odd", "even", "odd"]


def test_fetching_untaken_branch_tensor_raises():
    p = kf.placeholder(kf.bool, [])
    x = kf.constant(2.0)
    inside = {}

    def t():
        inside["t"] = x * 3.0
        return inside["t"]

    def f():
        inside["f"] = x * 5.0
        return inside["f"]
    out = kf.cond(p, t, f)
    with kf.Session() as s:
        assert s.run(inside["t"], {p: True}) == 6.0
        assert s.run([out, inside["f"]], {p: False}) == [10.0, 10.0]
        with pytest.raises(errors.InvalidArgumentError, match="does not have value|untaken"):
            s.run(inside["t"], {p: False})
        with pytest.raises(errors.InvalidArgumentError):
            s.run([out, inside["f"]], {p: True})


def test_dead_branch_value_consumed_outside_is_dead_too():
    # A value computed from an untaken branch without a Merge is still not computed.
    p = kf.placeholder(kf.bool, [])
    x = kf.constant(1.0)
    inside = []
    kf.cond(p, lambda: inside.append(x + 1.0) or inside[-1], lambda: x)
    outside = inside[0] * 2.0
    assert _run(outside, {p: True}) == 4.0
    with pytest.raises(errors.InvalidArgumentError):
        _run(outside, {p: False})


# ---------------------------------------------------------------------------- cond x while
def test_cond_inside_while_loop():
    n = kf.placeholder(kf.int32, [])

    def body(i, acc):
        acc = kf.cond(kf.equal(kf.mod(i, 2), 0), lambda: acc + i, lambda: acc - 1)
        return i + 1, acc
    _, acc = kf.while_loop(lambda i, a: i < n, body, [kf.constant(0), kf.constant(0)])
    for nv in (0, 1, 5, 10):
        want = sum(i if i % 2 == 0 else -1 for i in range(nv))
        assert _run(acc, {n: nv}) == want


def test_cond_inside_while_side_effect_count():
    v = kf.Variable(0)

    def body(i):
        def t():
            with kf.control_dependencies([kf.assign_add(v, 1)]):
                return i + 1
        return kf.cond(i < 3, t, lambda: i + 1)
    out = kf.while_loop(lambda i: i < 10, body, [kf.constant(0)])
    with kf.Session() as s:
        s.run(v.initializer)
        assert s.run(out) == 10
        assert s.run(v) == 3


def test_while_loop_inside_cond():
    p = kf.placeholder(kf.bool, [])
    n = kf.placeholder(kf.int32, [])
    v = kf.Variable(0)

    def looping():
        def body(i):
            with kf.control_dependencies([kf.assign_add(v, 1)]):
                return i + 1
        return kf.while_loop(lambda i: i < n, body, [kf.constant(0)])
    out = kf.cond(p, looping, lambda: kf.constant(-1))
    with kf.Session() as s:
        s.run(v.initializer)
        assert s.run(out, {p: False, n: 5}) == -1
        assert s.run(v) == 0, "the loop in the untaken branch ran"
        assert s.run(out, {p: True, n: 5}) == 5
        assert s.run(v) == 5
        assert s.run(out, {p: False, n: 100}) == -1
        assert s.run(v) == 5


def test_while_loop_inside_cond_using_outer_values():
    p = kf.placeholder(kf.bool, [])
    x = kf.placeholder(kf.float32, [])

    def looping():
        return kf.while_loop(lambda i, a: i < 4, lambda i, a: (i + 1, a * x), [0, kf.constant(1.0)])[1]
    out = kf.cond(p, looping, lambda: x)
    assert _run(out, {p: True, x: 2.0}) == 16.0
    assert _run(out, {p: False, x: 2.0}) == 2.0


def test_while_loop_in_both_branches():
    p = kf.placeholder(kf.bool, [])
    up = lambda: kf.while_loop(lambda i: i < 10, lambda i: i + 1, [kf.constant(0)])  # noqa: E731
    down = lambda: kf.while_loop(lambda i: i > -3, lambda i: i - 1, [kf.constant(0)])  # noqa: E731
    out = kf.cond(p, up, down)
    assert _run(out, {p: True}) == 10
    assert _run(out, {p: False}) == -3


# ---------------------------------------------------------------------------- construction errors
def test_non_callable_branches():
    x = kf.constant(1)
    with pytest.raises(TypeError, match="true_fn"):
        kf.cond(kf.constant(True), x, lambda: x)
    with pytest.raises(TypeError, match="false_fn"):
        kf.cond(kf.constant(True), lambda: x, None)


def test_branch_without_return_value():
    x = kf.constant(1)
    with pytest.raises(ValueError, match="true_fn must have a return value"):
        kf.cond(kf.constant(True), lambda: None, lambda: x)
    with pytest.raises(ValueError, match="false_fn must have a return value"):
        kf.cond(kf.constant(True), lambda: x, lambda: None)


def test_non_bool_pred():
    x = kf.constant(1)
    with pytest.raises(TypeError):
        kf.cond(kf.constant(1.0), lambda: x, lambda: x)
    with pytest.raises(TypeError):
        kf.cond(kf.constant(1), lambda: x, lambda: x)


def test_non_scalar_pred():
    x = kf.constant(1)
    with pytest.raises(ValueError):
        kf.cond(kf.constant([True, False]), lambda: x, lambda: x)


def test_non_scalar_pred_fed_at_run_time():
    p = kf.placeholder(kf.bool)
    out = kf.cond(p, lambda: kf.constant(1), lambda: kf.constant(2))
    assert _run(out, {p: True}) == 1
    with pytest.raises(errors.InvalidArgumentError, match=r"scalar[\s\S]*cond/Switch"):
        _run(out, {p: [True, False]})


@pytest.mark.parametrize("t,f", [
    (lambda x: (x, x), lambda x: x),
    (lambda x: [x, x], lambda x: [x]),
    (lambda x: {"a": x}, lambda x: {"b": x}),
    (lambda x: (x, [x]), lambda x: (x, x)),
])
def test_mismatched_structures(t, f):
    x = kf.constant(1)
    with pytest.raises((ValueError, TypeError)):
        kf.cond(kf.constant(True), lambda: t(x), lambda: f(x))


def test_mismatched_dtypes():
    with pytest.raises(ValueError, match="same type.*int32.*float32|same type.*float32.*int32"):
        kf.cond(kf.constant(True), lambda: kf.constant(1), lambda: kf.constant(1.0))


# ---------------------------------------------------------------------------- case
def _case_graph(exclusive=False, with_default=True):
    a = kf.placeholder(kf.bool, [], name="a")
    b = kf.placeholder(kf.bool, [], name="b")
    c = kf.placeholder(kf.bool, [], name="c")
    pairs = [(a, lambda: kf.constant(1)), (b, lambda: kf.constant(2)), (c, lambda: kf.constant(3))]
    default = (lambda: kf.constant(-1)) if with_default else None
    return (a, b, c), kf.case(pairs, default=default, exclusive=exclusive)


def test_case_first_true_wins_and_default():
    (a, b, c), out = _case_graph()
    with kf.Session() as s:
        for bits in range(8):
            vals = [bool(bits & 1), bool(bits & 2), bool(bits & 4)]
            want = next((k + 1 for k, v in enumerate(vals) if v), -1)
            assert s.run(out, dict(zip((a, b, c), vals))) == want, vals


def test_case_only_selected_branch_runs():
    a = kf.placeholder(kf.bool, [])
    b = kf.placeholder(kf.bool, [])
    v = kf.Variable(0)

    def bump(k):
        def fn():
            with kf.control_dependencies([kf.assign_add(v, k)]):
                return kf.constant(k)
        return fn
    out = kf.case([(a, bump(1)), (b, bump(10))], default=bump(100))
    with kf.Session() as s:
        s.run(v.initializer)
        assert s.run(out, {a: True, b: True}) == 1
        assert s.run(v) == 1
        assert s.run(out, {a: False, b: True}) == 10
        assert s.run(v) == 11
        assert s.run(out, {a: False, b: False}) == 100
        assert s.run(v) == 111


def test_case_exclusive():
    (a, b, c), out = _case_graph(exclusive=True)
    with kf.Session() as s:
        assert s.run(out, {a: False, b: True, c: False}) == 2
        assert s.run(out, {a: False, b: False, c: False}) == -1
        with pytest.raises(errors.InvalidArgumentError, match="exclusive"):
            s.run(out, {a: True, b: False, c: True})


def test_case_without_default():
    (a, b, c), out = _case_graph(with_default=False)
    with kf.Session() as s:
        assert s.run(out, {a: True, b: True, c: False}) == 1
        assert s.run(out, {a: False, b: False, c: True}) == 3
        assert s.run(out, {a: False, b: True, c: True}) == 2
        with pytest.raises(errors.InvalidArgumentError, match="None of conditions evaluated as True"):
            s.run(out, {a: False, b: False, c: False})


def test_case_dict_input():
    a = kf.placeholder(kf.bool, [], name="a")
    b = kf.placeholder(kf.bool, [], name="b")
    out = kf.case({a: lambda: kf.constant(1.0), b: lambda: kf.constant(2.0)},
                  default=lambda: kf.constant(0.0), exclusive=True)
    with kf.Session() as s:
        assert s.run(out, {a: True, b: False}) == 1.0
        assert s.run(out, {a: False, b: True}) == 2.0
        assert s.run(out, {a: False, b: False}) == 0.0
        with pytest.raises(errors.InvalidArgumentError):
            s.run(out, {a: True, b: True})


def test_case_structures_and_single_pair():
    a = kf.placeholder(kf.bool, [])
    x = kf.constant(3)
    out = kf.case([(a, lambda: (x, {"k": x * 2}))], default=lambda: (x - 1, {"k": x - 2}))
    assert isinstance(out, tuple) and isinstance(out[1], dict)
    assert _run(out, {a: True}) == (3, {"k": 6})
    assert _run(out, {a: False}) == (2, {"k": 1})


def test_case_errors():
    x = kf.constant(1)
    with pytest.raises(TypeError, match="callable"):
        kf.case([(kf.constant(True), 1)])
    with pytest.raises(TypeError):
        kf.case([(kf.constant(1.0), lambda: x)], default=lambda: x)
    with pytest.raises((TypeError, ValueError)):
        kf.case([(kf.constant(True), lambda: x)], default=lambda: kf.constant(1.0))


def test_case_python_bool_pred_rejected():
    x = kf.constant(1)
    with pytest.raises(TypeError, match="Tensor"):
        kf.case([(True, lambda: x)], default=lambda: x)


def test_case_entry_not_a_pair():
    x = kf.constant(1)
    with pytest.raises(TypeError, match="2-tuple"):
        kf.case([kf.constant(True)], default=lambda: x)


def test_tensor_array_returned_from_branches():
    p = kf.placeholder(kf.bool, [])
    ta = kf.TensorArray(kf.float32, 2)
    out = kf.cond(p, lambda: ta.write(0, 1.0).write(1, 2.0), lambda: ta.write(0, 5.0).write(1, 6.0))
    assert isinstance(out, kf.TensorArray)
    np.testing.assert_allclose(_run(out.stack(), {p: True}), [1.0, 2.0])
    np.testing.assert_allclose(_run(out.stack(), {p: False}), [5.0, 6.0])


def test_case_exclusive_without_default():
    a = kf.placeholder(kf.bool, [])
    b = kf.placeholder(kf.bool, [])
    out = kf.case([(a, lambda: kf.constant(1)), (b, lambda: kf.constant(2))], exclusive=True)
    with kf.Session() as s:
        assert s.run(out, {a: True, b: False}) == 1
        assert s.run(out, {a: False, b: True}) == 2
        for av, bv in ((True, True), (False, False)):
            with pytest.raises(errors.InvalidArgumentError):
                s.run(out, {a: av, b: bv})
