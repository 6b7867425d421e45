"""kf.while_loop (ops/control_flow_v1.py): loop structures, shapes, iterations, state and errors."""

import collections
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors


def _run(fetches, feed=None):
    with kf.Session() as sess:
        return sess.run(fetches, feed)


def _count_to(n, **kw):
    return kf.while_loop(lambda i: i < n, lambda i: i + 1, [kf.constant(0)], **kw)


# ---------------------------------------------------------------------------- loop variable structures
def test_single_tensor_loop_var():
    out = kf.while_loop(lambda x: x < 100.0, lambda x: x * 2.0, kf.constant(3.0))
    assert isinstance(out, kf.Tensor) and out.dtype == kf.float32
    assert _run(out) == 192.0


def test_single_element_list_is_unpacked_unless_return_same_structure():
    out = _count_to(5)
    assert isinstance(out, kf.Tensor)
    assert _run(out) == 5
    out = _count_to(5, return_same_structure=True)
    assert isinstance(out, list) and len(out) == 1
    assert _run(out) == [5]


def test_body_may_return_a_bare_tensor_for_one_var():
    out = kf.while_loop(lambda i: i < 3, lambda i: i + 1, [kf.constant(0)])
    assert _run(out) == 3
    out = kf.while_loop(lambda i: i < 3, lambda i: [i + 1], [kf.constant(0)])
    assert _run(out) == 3


def test_list_and_tuple_loop_vars():
    def body(i, a, b):
        return i + 1, a + b, a

    out = kf.while_loop(lambda i, a, b: i < 10, body, [kf.constant(0), kf.constant(1), kf.constant(0)])
    assert len(out) == 3
    i, a, b = _run(out)
    fib = [0, 1]
    for _ in range(11):
        fib.append(fib[-1] + fib[-2])
    assert (i, a, b) == (10, fib[11], fib[10])
    out = kf.while_loop(lambda i, a: i < 4, lambda i, a: (i + 1, a * 2.0), (kf.constant(0), kf.constant(1.5)))
    assert isinstance(out, tuple)
    assert _run(out) == (4, 24.0)


def test_single_element_tuple_is_unpacked():
    out = kf.while_loop(lambda i: i < 5, lambda i: (i + 1,), (kf.constant(0),))
    assert isinstance(out, kf.Tensor)


def test_namedtuple_loop_vars():
    State = collections.namedtuple("State", "step total")
    out = kf.while_loop(lambda step, total: step < 5,
                        lambda step, total: State(step + 1, total + kf.cast(step, kf.float32)),
                        State(kf.constant(0), kf.constant(0.0)))
    assert isinstance(out, State)
    r = _run(out)
    assert r.step == 5 and r.total == 10.0


def test_namedtuple_inside_list():
    State = collections.namedtuple("State", "step total")
    out = kf.while_loop(lambda s: s.step < 3, lambda s: [State(s.step + 1, s.total * 3)],
                        [State(kf.constant(0), kf.constant(1))])
    assert isinstance(out, State)
    assert _run(out) == State(3, 27)


def test_dict_loop_vars():
    out = kf.while_loop(lambda d: d["i"] < 4,
                        lambda d: {"i": d["i"] + 1, "x": d["x"] * 2.0},
                        {"i": kf.constant(0), "x": kf.constant(1.0)})
    assert isinstance(out, dict)
    assert _run(out) == {"i": 4, "x": 16.0}


def test_nested_loop_var_structure():
    out = kf.while_loop(lambda i, pair: i < 3,
                        lambda i, pair: (i + 1, (pair[0] + 1.0, [pair[1][0] * 2])),
                        (kf.constant(0), (kf.constant(0.0), [kf.constant(1)])))
    assert isinstance(out[1], tuple) and isinstance(out[1][1], list)
    assert _run(out) == (3, (3.0, [8]))


def test_python_values_as_loop_vars():
    out = kf.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x + 0.5), [0, 1.0])
    i, x = _run(out)
    assert i == 3 and x == 2.5


# ---------------------------------------------------------------------------- shapes
def test_shape_invariants_allow_a_growing_vector():
    def body(i, v):
        return i + 1, kf.concat([v, kf.expand_dims(i, 0)], 0)
    i0 = kf.constant(0)
    v0 = kf.constant([7])
    _, v = kf.while_loop(lambda i, v: i < 5, body, [i0, v0],
                         shape_invariants=[i0.shape, kf.TensorShape([None])])
    assert v.shape.as_list() == [None]
    np.testing.assert_array_equal(_run(v), [7, 0, 1, 2, 3, 4])


def test_shape_changing_without_invariant_is_an_error():
    with pytest.raises(ValueError, match=r"shape \(1,\).*shape \(2,\).*shape_invariants"):
        kf.while_loop(lambda v: kf.size(v) < 5, lambda v: kf.concat([v, v], 0), [kf.constant([1])])


def test_shape_invariant_incompatible_with_initial_shape():
    with pytest.raises(ValueError, match="shape invariant"):
        kf.while_loop(lambda v: True, lambda v: v, [kf.constant([1, 2])],
                      shape_invariants=[kf.TensorShape([3])])


def test_loop_vars_keep_their_shapes():
    x = kf.zeros([2, 3])
    i, y = kf.while_loop(lambda i, y: i < 2, lambda i, y: (i + 1, y + 1.0), [0, x])
    assert y.shape.as_list() == [2, 3] and i.shape.as_list() == []
    np.testing.assert_allclose(_run(y), np.full([2, 3], 2.0))


def test_unknown_shape_loop_var_from_placeholder():
    x = kf.placeholder(kf.float32, None)
    out = kf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2.0), [0, x])[1]
    np.testing.assert_allclose(_run(out, {x: [[1.0], [2.0]]}), [[8.0], [16.0]])


# ---------------------------------------------------------------------------- iteration counts
@pytest.mark.parametrize("max_iter,want", [(0, 0), (1, 1), (3, 3), (10, 7), (100, 7)])
def test_maximum_iterations(max_iter, want):
    out = _count_to(7, maximum_iterations=max_iter)
    assert _run(out) == want


def test_maximum_iterations_from_placeholder_and_structures():
    m = kf.placeholder(kf.int32, [])
    i, x = kf.while_loop(lambda i, x: True, lambda i, x: (i + 1, x * 2.0), [0, kf.constant(1.0)],
                         maximum_iterations=m)
    with kf.Session() as s:
        for mv in (0, 1, 5):
            assert s.run([i, x], {m: mv}) == [mv, 2.0 ** mv]


def test_maximum_iterations_non_scalar():
    with pytest.raises(ValueError, match="scalar"):
        _count_to(5, maximum_iterations=[1, 2])


def test_zero_iteration_loop():
    v = kf.Variable(0)

    def body(i, x):
        with kf.control_dependencies([kf.assign_add(v, 1)]):
            return i + 1, x * 2.0
    n = kf.placeholder(kf.int32, [])
    i, x = kf.while_loop(lambda i, x: i < n, body, [kf.constant(0), kf.constant(3.0)])
    with kf.Session() as s:
        s.run(v.initializer)
        assert s.run([i, x], {n: 0}) == [0, 3.0]
        assert s.run(v) == 0
        assert s.run([i, x], {n: -5}) == [0, 3.0]
        assert s.run(v) == 0


@pytest.mark.parametrize("pi", [1, 2, 10, 32])
def test_parallel_iterations_same_results(pi):
    n = 25
    w = kf.constant(np.arange(n, dtype=np.float32))

    def body(i, acc, prod):
        xi = kf.gather(w, i)
        return i + 1, acc + kf.square(xi), prod * 1.01 + xi

    out = kf.while_loop(lambda i, a, p: i < n, body, [0, kf.constant(0.0), kf.constant(1.0)],
                        parallel_iterations=pi)
    i, acc, prod = _run(out)
    ref_p = np.float32(1.0)
    for k in range(n):
        ref_p = ref_p * np.float32(1.01) + np.float32(k)
    assert i == n and acc == float(np.sum(np.arange(n) ** 2))
    np.testing.assert_allclose(prod, ref_p, rtol=1e-5)


def test_parallel_iterations_must_be_positive():
    with pytest.raises(TypeError, match="parallel_iterations"):
        _count_to(3, parallel_iterations=0)


def test_ten_thousand_iterations_finish_quickly():
    n = 10000
    i, acc = kf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a + kf.cast(i, kf.int64)),
                           [kf.constant(0), kf.constant(0, kf.int64)])
    with kf.Session() as s:
        s.run([i, acc])   # warm the compiled plan
        t0 = time.perf_counter()
        assert s.run([i, acc]) == [n, n * (n - 1) // 2]
        elapsed = time.perf_counter() - t0
    assert elapsed < 15.0, f"10000 iterations took {elapsed:.1f}s"


def test_long_loop_memory_stays_bounded():
    # Each iteration carries a 1 MB tensor; 2000 iterations would be 2 GB if they were kept.
    import tracemalloc
    n = 2000
    _, x = kf.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x + 1.0),
                         [kf.constant(0), kf.zeros([256, 1024])])
    with kf.Session() as s:
        s.run(x)
        tracemalloc.start()
        try:
            out = s.run(x)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert out[0, 0] == n
    assert peak < 200 * 2 ** 20, f"peak {peak / 2 ** 20:.0f} MiB"


# ---------------------------------------------------------------------------- nested loops
def test_nested_loop_inner_trip_count_depends_on_outer():
    n = kf.placeholder(kf.int32, [])

    def outer_body(i, total):
        _, inner_total = kf.while_loop(lambda j, t: j < i, lambda j, t: (j + 1, t + j),
                                       [kf.constant(0), total])
        return i + 1, inner_total
    _, total = kf.while_loop(lambda i, t: i < n, outer_body, [kf.constant(0), kf.constant(0)])
    with kf.Session() as s:
        for nv in (0, 1, 4, 7):
            assert s.run(total, {n: nv}) == sum(j for i in range(nv) for j in range(i))


@pytest.mark.parametrize("pi", [1, 10])
def test_triple_nested_loops(pi):
    def level(depth, acc):
        if depth == 0:
            return acc + 1
        return kf.while_loop(lambda k, a: k < depth + 1,
                             lambda k, a: (k + 1, level(depth - 1, a)),
                             [kf.constant(0), acc], parallel_iterations=pi)[1]
    out = level(3, kf.constant(0))
    assert _run(out) == 4 * 3 * 2


def test_nested_loop_stateful_count():
    v = kf.Variable(0)

    def inner(j):
        with kf.control_dependencies([kf.assign_add(v, 1)]):
            return j + 1

    def outer(i):
        j = kf.while_loop(lambda j: j < i, inner, [kf.constant(0)])
        return i + 1 + 0 * j
    out = kf.while_loop(lambda i: i < 5, outer, [kf.constant(0)])
    with kf.Session() as s:
        s.run(v.initializer)
        assert s.run(out) == 5
        assert s.run(v) == 0 + 1 + 2 + 3 + 4


# ---------------------------------------------------------------------------- loop invariants
def test_loop_invariants_placeholder_variable_constant():
    p = kf.placeholder(kf.float32, [])
    var = kf.Variable(2.0)
    c = kf.constant(0.5)

    def body(i, x):
        return i + 1, x * var + p - c
    _, x = kf.while_loop(lambda i, x: i < 3, body, [0, kf.constant(1.0)])
    with kf.Session() as s:
        s.run(var.initializer)
        ref = 1.0
        for _ in range(3):
            ref = ref * 2.0 + 1.5 - 0.5
        assert s.run(x, {p: 1.5}) == ref
        var.load(3.0, s)
        ref = 1.0
        for _ in range(3):
            ref = ref * 3.0 + 0.0 - 0.5
        assert s.run(x, {p: 0.0}) == ref


def test_initial_value_reused_as_invariant_in_body():
    x0 = kf.constant(10)
    out = kf.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x + x0), [kf.constant(0), x0])
    assert tuple(_run(out)) == (3, 40)


def test_constant_created_in_body():
    out = kf.while_loop(lambda i, x: i < 4, lambda i, x: (i + 1, x + kf.constant(2.0)), [0, 0.0])
    assert tuple(_run(out)) == (4, 8.0)


def test_body_op_on_invariants_only_runs_per_iteration():
    c = kf.constant(3)

    def body(i, acc):
        return i + 1, acc + c * 2   # c * 2 depends on invariants only
    out = kf.while_loop(lambda i, a: i < 5, body, [0, kf.constant(0)])
    assert tuple(_run(out)) == (5, 30)


# ---------------------------------------------------------------------------- stateful ops
@pytest.mark.parametrize("n", [0, 1, 7])
def test_assign_add_in_body_runs_exactly_n_times(n):
    v = kf.Variable(0)

    def body(i):
        with kf.control_dependencies([kf.assign_add(v, 1)]):
            return i + 1
    out = kf.while_loop(lambda i: i < n, body, [kf.constant(0)])
    with kf.Session() as s:
        s.run(v.initializer)
        assert s.run(out) == n
        assert s.run(v) == n
        s.run(out)
        assert s.run(v) == 2 * n


def test_body_op_not_feeding_the_outputs_is_pruned():
    # As in TF1, an op of the body that no loop output depends on is not run.
    v = kf.Variable(0)

    def body(i):
        kf.assign_add(v, 1)
        return i + 1
    out = kf.while_loop(lambda i: i < 4, body, [kf.constant(0)])
    with kf.Session() as s:
        s.run(v.initializer)
        assert s.run(out) == 4
        assert s.run(v) == 0


def test_accumulating_into_variable_reads_updates():
    v = kf.Variable(1.0)

    def body(i):
        upd = kf.assign(v, v * 2.0)
        with kf.control_dependencies([upd]):
            return i + 1
    out = kf.while_loop(lambda i: i < 5, body, [kf.constant(0)], parallel_iterations=1)
    with kf.Session() as s:
        s.run(v.initializer)
        s.run(out)
        assert s.run(v) == 32.0


def test_control_dependency_on_outside_op_inside_body():
    outside = kf.Variable(0)
    bump = kf.assign_add(outside, 1)
    inside = kf.Variable(0)

    def body(i):
        with kf.control_dependencies([bump]):
            step = kf.assign_add(inside, 1)
        with kf.control_dependencies([step]):
            return i + 1
    out = kf.while_loop(lambda i: i < 5, body, [kf.constant(0)])
    with kf.Session() as s:
        s.run([outside.initializer, inside.initializer])
        assert s.run(out) == 5
        assert s.run([outside, inside]) == [1, 5]


def test_control_dependency_on_outside_group_inside_body():
    a = kf.Variable(0)
    grp = kf.group(kf.assign_add(a, 1), kf.assign_add(a, 10))

    def body(i):
        with kf.control_dependencies([grp]):
            return i + 1
    out = kf.while_loop(lambda i: i < 3, body, [kf.constant(0)])
    with kf.Session() as s:
        s.run(a.initializer)
        assert s.run(out) == 3
        assert s.run(a) == 11


def test_outer_control_dependencies_on_while_loop():
    v = kf.Variable(0)
    bump = kf.assign(v, 42)
    with kf.control_dependencies([bump]):
        out = kf.while_loop(lambda i: i < 3, lambda i: i + 1, [kf.constant(0)])
    with kf.Session() as s:
        s.run(v.initializer)
        assert s.run(out) == 3
        assert s.run(v) == 42


def test_random_op_in_body_draws_per_iteration():
    def body(i, ta):
        return i + 1, ta.write(i, kf.random_uniform([]))
    _, ta = kf.while_loop(lambda i, ta: i < 6, body, [0, kf.TensorArray(kf.float32, 6)])
    vals = _run(ta.stack())
    assert len(set(vals.tolist())) == 6


# ---------------------------------------------------------------------------- TensorArrays
@pytest.mark.parametrize("pi", [1, 10])
def test_tensor_array_written_per_iteration_then_stacked(pi):
    x = kf.placeholder(kf.float32, [5, 3])
    ta_in = kf.TensorArray(kf.float32, 5).unstack(x)
    ta_out = kf.TensorArray(kf.float32, 5)

    def body(i, ta):
        return i + 1, ta.write(i, ta_in.read(i) * kf.cast(i, kf.float32))
    _, ta_final = kf.while_loop(lambda i, ta: i < 5, body, [0, ta_out], parallel_iterations=pi)
    assert isinstance(ta_final, kf.TensorArray)
    xv = np.random.RandomState(0).randn(5, 3).astype(np.float32)
    np.testing.assert_allclose(_run(ta_final.stack(), {x: xv}), xv * np.arange(5)[:, None], rtol=1e-6)


def test_dynamic_size_tensor_array_in_loop():
    n = kf.placeholder(kf.int32, [])
    ta = kf.TensorArray(kf.int32, 0, dynamic_size=True)
    _, ta = kf.while_loop(lambda i, ta: i < n, lambda i, ta: (i + 1, ta.write(i, i * i)), [0, ta])
    np.testing.assert_array_equal(_run(ta.stack(), {n: 6}), [0, 1, 4, 9, 16, 25])
    assert _run(ta.size(), {n: 3}) == 3


def test_tensor_array_single_loop_var_and_read_back():
    ta = kf.TensorArray(kf.float32, 3, clear_after_read=False)
    ta = ta.write(0, 1.0)

    def body(i, t):
        return i + 1, t.write(i, t.read(i - 1) * 3.0)
    _, ta = kf.while_loop(lambda i, t: i < 3, body, [kf.constant(1), ta])
    np.testing.assert_allclose(_run(ta.stack()), [1.0, 3.0, 9.0])


# ---------------------------------------------------------------------------- run-time errors
def test_error_inside_body_names_the_node():
    params = kf.constant([1, 2, 3])

    def body(i, acc):
        return i + 1, acc + kf.gather(params, i, name="bad_gather")
    out = kf.while_loop(lambda i, a: i < 5, body, [0, kf.constant(0)], name="erring")
    with kf.Session() as s:
        with pytest.raises(errors.InvalidArgumentError, match="erring/bad_gather"):
            s.run(out)
        # the session is still usable after the failed step
        assert s.run(_count_to(3)) == 3


def test_assert_inside_body_fails_the_step():
    def body(i):
        check = kf.Assert(i < 3, [i], name="small")
        with kf.control_dependencies([check]):
            return i + 1
    n = kf.placeholder(kf.int32, [])
    out = kf.while_loop(lambda i: i < n, body, [kf.constant(0)])
    assert _run(out, {n: 3}) == 3
    with pytest.raises(errors.InvalidArgumentError):
        _run(out, {n: 5})


def test_error_in_loop_cond_surfaces():
    params = kf.constant([1, 2, 3])
    out = kf.while_loop(lambda i: kf.gather(params, i) > 0, lambda i: i + 1, [kf.constant(0)])
    with pytest.raises(errors.InvalidArgumentError):
        _run(out)


def test_non_scalar_loop_cond_at_run_time():
    x = kf.placeholder(kf.bool)
    out = kf.while_loop(lambda i: kf.logical_and(x, i < 3), lambda i: i + 1, [kf.constant(0)])
    assert _run(out, {x: True}) == 3
    with pytest.raises(errors.InvalidArgumentError):
        _run(out, {x: [True, True]})


def test_non_scalar_loop_cond_error_names_the_switch():
    x = kf.placeholder(kf.bool)
    out = kf.while_loop(lambda i: kf.logical_and(x, i < 3), lambda i: i + 1, [kf.constant(0)],
                        name="myloop")
    with pytest.raises(errors.InvalidArgumentError, match=r"scalar[\s\S]*myloop/Switch"):
        _run(out, {x: [True, True]})


# ---------------------------------------------------------------------------- construction errors
def test_body_returns_wrong_number_of_vars():
    with pytest.raises(ValueError):
        kf.while_loop(lambda i, j: i < 3, lambda i, j: i + 1, [kf.constant(0), kf.constant(0)])
    with pytest.raises(ValueError):
        kf.while_loop(lambda i: i < 3, lambda i: (i + 1, i), [kf.constant(0)])


def test_body_returns_wrong_nesting():
    with pytest.raises(ValueError):
        kf.while_loop(lambda i, j: i < 3, lambda i, j: (i + 1, (j,)), [kf.constant(0), kf.constant(0)])


def test_body_returns_wrong_dtype():
    with pytest.raises((TypeError, ValueError), match="int32.*float32|float32.*int32"):
        kf.while_loop(lambda i: i < 3, lambda i: kf.cast(i, kf.float32), [kf.constant(0)])


def test_cond_returning_non_bool():
    with pytest.raises(TypeError):
        kf.while_loop(lambda i: i, lambda i: i + 1, [kf.constant(0)])
    with pytest.raises(TypeError):
        kf.while_loop(lambda i: kf.cast(i, kf.float32), lambda i: i + 1, [kf.constant(0)])


def test_cond_returning_non_scalar():
    with pytest.raises(ValueError):
        kf.while_loop(lambda i: kf.stack([i < 3, i < 2]), lambda i: i + 1, [kf.constant(0)])


def test_not_callable_and_empty_loop_vars():
    with pytest.raises(TypeError, match="cond must be callable"):
        kf.while_loop(1, lambda i: i, [kf.constant(0)])
    with pytest.raises(TypeError, match="body must be callable"):
        kf.while_loop(lambda i: i < 1, None, [kf.constant(0)])
    with pytest.raises(ValueError, match="No loop variables"):
        kf.while_loop(lambda: True, lambda: [], [])


def _loop_with_inside(name="wl"):
    inside = []

    def body(i):
        y = i * 2
        inside.append(y)
        return i + 1
    out = kf.while_loop(lambda i: i < 3, body, [kf.constant(0)], name=name)
    return out, inside[0]


def test_fetching_a_tensor_inside_the_loop_raises_a_clear_error():
    out, inside = _loop_with_inside()
    with kf.Session() as s:
        assert s.run(out) == 3
        with pytest.raises((errors.InvalidArgumentError, ValueError), match="wl/mul.*loop|loop.*wl/mul"):
            s.run(inside)
        with pytest.raises((errors.InvalidArgumentError, ValueError), match="loop"):
            s.run([out, inside])
        # still usable
        assert s.run(out) == 3


def test_fetching_a_tensor_inside_the_loop_is_a_value_error():
    _, inside = _loop_with_inside()
    with kf.Session() as s:
        with pytest.raises(ValueError, match="fetchable"):
            s.run(inside)


def test_running_an_op_inside_the_loop_as_target_is_refused():
    _, inside = _loop_with_inside()
    with kf.Session() as s:
        with pytest.raises(ValueError):
            s.run(inside.op)


def test_feeding_a_tensor_inside_the_loop_is_refused_clearly():
    inside = []

    def body(i):
        inside.append(i + 1)
        return inside[-1]
    out = kf.while_loop(lambda i: i < 3, body, [kf.constant(0)])
    with kf.Session() as s:
        with pytest.raises(ValueError, match="fed"):
            s.run(out, {inside[0]: 5})


# ---------------------------------------------------------------------------- more loop shapes
def test_body_returns_a_new_constant_or_invariant_expression():
    ph = kf.placeholder(kf.int32, [])
    out = kf.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, kf.constant(5)), [0, 0])
    assert tuple(_run(out)) == (3, 5)
    out = kf.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, ph * 2), [0, 0])
    assert tuple(_run(out, {ph: 4})) == (3, 8)


def _in_subprocess(code, timeout=20):
    """Runs code in a fresh interpreter (a hang cannot stall the suite); returns its stdout."""
    code = "import kernflow.core as kf\n" + textwrap.dedent(code)
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return "TIMEOUT"
    return proc.stdout.strip() or proc.stderr[-1000:]


def test_body_returns_an_outside_tensor():
    out = _in_subprocess("""
        c = kf.constant(7)
        i, x = kf.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, c), [0, 0])
        with kf.Session() as s:
            print(s.run([i, x]))
    """, timeout=5)
    assert out.replace("np.int32(", "").replace(")", "") == "[3, 7]"


def test_cond_reads_a_variable_the_body_updates():
    v = kf.Variable(0)

    def body(i):
        with kf.control_dependencies([kf.assign_add(v, 1)]):
            return i + 1
    out = kf.while_loop(lambda i: v < 5, body, [kf.constant(0)], parallel_iterations=1)
    with kf.Session() as s:
        s.run(v.initializer)
        assert s.run(out) == 5
        assert s.run(v) == 5


def test_two_independent_loops_in_one_step():
    a = _count_to(1000)
    b = _count_to(777)
    c = kf.cond(a > 500, lambda: kf.constant(1), lambda: kf.constant(2))
    assert _run([a, b, c]) == [1000, 777, 1]


def test_inner_loop_exit_used_by_a_cond_in_the_outer_body():
    def outer(i, t):
        inner = kf.while_loop(lambda j: j < i, lambda j: j + 1, [kf.constant(0)])
        return i + 1, kf.cond(inner > 2, lambda: t + inner, lambda: t)
    assert tuple(_run(kf.while_loop(lambda i, t: i < 5, outer, [0, 0]))) == (5, 7)


def test_variable_as_initial_loop_value():
    v = kf.Variable(3.0)
    out = kf.while_loop(lambda z: z < 100.0, lambda z: z * 2.0, [v])
    with kf.Session() as s:
        s.run(v.initializer)
        assert s.run(out) == 192.0


def test_large_parallel_iterations_with_tensor_array():
    _, ta = kf.while_loop(lambda i, ta: i < 200, lambda i, ta: (i + 1, ta.write(i, kf.fill([3], i))),
                          [0, kf.TensorArray(kf.int32, 200)], parallel_iterations=64)
    np.testing.assert_array_equal(_run(ta.stack()), np.repeat(np.arange(200)[:, None], 3, 1))


def test_string_and_bool_loop_vars():
    out = kf.while_loop(lambda i, s, b: i < 3,
                        lambda i, s, b: (i + 1, s, kf.logical_not(b)),
                        [0, kf.constant("ab"), kf.constant(True)])
    i, s, b = _run(out)
    assert i == 3 and s == b"ab" and not b


def test_int64_counter_with_int64_maximum_iterations():
    out = kf.while_loop(lambda i: True, lambda i: i + 1, [kf.constant(0, kf.int64)],
                        maximum_iterations=kf.constant(4, kf.int64))
    assert _run(out) == 4


def test_maximum_iterations_with_shape_invariants():
    out = kf.while_loop(lambda v: True, lambda v: kf.concat([v, v], 0), [kf.constant([1])],
                        maximum_iterations=3, shape_invariants=[kf.TensorShape([None])])
    np.testing.assert_array_equal(_run(out), [1] * 8)


def test_chained_loops():
    a = _count_to(3)
    b = kf.while_loop(lambda i: i < a * 2, lambda i: i + 1, [a])
    assert _run(b) == 6


def test_nested_loop_reads_a_value_from_outside_both():
    x = kf.placeholder(kf.int32, [])

    def outer(i, t):
        return i + 1, kf.while_loop(lambda j, u: j < 2, lambda j, u: (j + 1, u + x), [0, t])[1]
    out = kf.while_loop(lambda i, t: i < 3, outer, [0, 0])[1]
    assert _run(out, {x: 5}) == 30


def test_loop_initial_value_from_a_cond():
    p = kf.placeholder(kf.bool, [])
    init = kf.cond(p, lambda: kf.constant(1), lambda: kf.constant(5))
    out = kf.while_loop(lambda i: i < 10, lambda i: i * 2, [init])
    assert _run(out, {p: True}) == 16
    assert _run(out, {p: False}) == 10


def test_cond_graph_round_trips_through_import_graph_def(g):
    n = kf.placeholder(kf.int32, [], name="n")
    p = kf.placeholder(kf.bool, [], name="p")
    c = kf.cond(p, lambda: n + 1, lambda: n - 1, name="C")
    gd = g.as_graph_def()
    with kf.Graph().as_default():
        kf.import_graph_def(gd, name="imp")
        with kf.Session() as s:
            assert s.run("imp/" + c.name, {"imp/n:0": 3, "imp/p:0": True}) == 4
            assert s.run("imp/" + c.name, {"imp/n:0": 3, "imp/p:0": False}) == 2


def test_while_graph_round_trips_through_import_graph_def(g):
    n = kf.placeholder(kf.int32, [], name="n")
    i, a = kf.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a + i), [0, 0], name="L")
    gd = g.as_graph_def()
    with kf.Graph().as_default():
        kf.import_graph_def(gd, name="imp")
        with kf.Session() as s:
            assert s.run(["imp/" + i.name, "imp/" + a.name], {"imp/n:0": 5}) == [5, 10]
