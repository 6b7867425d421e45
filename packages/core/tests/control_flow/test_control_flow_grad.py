"""kf.gradients through kf.cond and kf.while_loop (grads/control_flow_grad.py,
ops/control_flow_grad_state.py, the loop-level traversal of ops/gradients_impl.py)."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.testing.gradient_checker import compute_gradient_error

_r = np.random.RandomState(7)


def _grad_error(*args, **kw):
    """compute_gradient_error with a float64-sized finite-difference step."""
    kw.setdefault("delta", 1e-5)
    return compute_gradient_error(*args, **kw)


def _run(fetches, feed=None):
    with kf.Session() as sess:
        return sess.run(fetches, feed)


def _power_loop(x, n, pi=10, **kw):
    """x ** (2 ** n) by repeated squaring in a loop; returns (i, y)."""
    return kf.while_loop(lambda i, y: i < n, lambda i, y: (i + 1, y * y), [kf.constant(0), x],
                         parallel_iterations=pi, **kw)


# ---------------------------------------------------------------------------- cond
def test_cond_gradient_both_branches():
    p = kf.placeholder(kf.bool, [])
    x = kf.placeholder(kf.float64, [3])
    y = kf.cond(p, lambda: kf.square(x) * 3.0, lambda: kf.sin(x))
    gx, = kf.gradients(kf.reduce_sum(y), [x])
    xv = _r.randn(3)
    with kf.Session() as s:
        np.testing.assert_allclose(s.run(gx, {p: True, x: xv}), 6 * xv)
        np.testing.assert_allclose(s.run(gx, {p: False, x: xv}), np.cos(xv))
    for pv in (True, False):
        with kf.Session():
            err = _grad_error(x, [3], y, [3], x_init_value=xv, extra_feed_dict={p: pv})
        assert err < 1e-6, pv


def test_cond_gradient_with_respect_to_untaken_only_input_is_zero():
    p = kf.placeholder(kf.bool, [])
    a = kf.placeholder(kf.float32, [])
    b = kf.placeholder(kf.float32, [])
    y = kf.cond(p, lambda: a * 2.0, lambda: b * 3.0)
    ga, gb = kf.gradients(y, [a, b])
    assert _run([ga, gb], {p: True, a: 1.0, b: 1.0}) == [2.0, 0.0]
    assert _run([ga, gb], {p: False, a: 1.0, b: 1.0}) == [0.0, 3.0]


def test_cond_gradient_branch_returning_outside_tensor():
    p = kf.placeholder(kf.bool, [])
    x = kf.placeholder(kf.float32, [])
    y = kf.cond(p, lambda: x, lambda: x * x)
    gx, = kf.gradients(y, [x])
    assert _run(gx, {p: True, x: 3.0}) == 1.0
    assert _run(gx, {p: False, x: 3.0}) == 6.0


def test_nested_cond_gradient():
    p = kf.placeholder(kf.bool, [])
    q = kf.placeholder(kf.bool, [])
    x = kf.placeholder(kf.float64, [2])
    y = kf.cond(p, lambda: kf.cond(q, lambda: kf.exp(x), lambda: x * x * x),
                lambda: kf.cond(q, lambda: 2.0 * x, lambda: kf.tanh(x)))
    xv = _r.randn(2)
    for pv in (True, False):
        for qv in (True, False):
            with kf.Session():
                err = _grad_error(x, [2], y, [2], x_init_value=xv,
                                             extra_feed_dict={p: pv, q: qv})
            assert err < 1e-6, (pv, qv)


def test_cond_gradient_with_respect_to_variable():
    v = kf.Variable(2.0)
    p = kf.placeholder(kf.bool, [])
    y = kf.cond(p, lambda: v * v, lambda: v * 5.0)
    gv, = kf.gradients(y, [v])
    with kf.Session() as s:
        s.run(v.initializer)
        assert s.run(gv, {p: True}) == 4.0
        assert s.run(gv, {p: False}) == 5.0


def test_cond_gradient_multiple_outputs_one_used():
    p = kf.placeholder(kf.bool, [])
    x = kf.placeholder(kf.float32, [])
    a, b = kf.cond(p, lambda: (x * 2.0, x * 3.0), lambda: (x * 4.0, x * 5.0))
    gx, = kf.gradients(b, [x])
    assert _run(gx, {p: True, x: 1.0}) == 3.0
    assert _run(gx, {p: False, x: 1.0}) == 5.0
    gx2, = kf.gradients(a + b, [x])
    assert _run(gx2, {p: False, x: 1.0}) == 9.0


# ---------------------------------------------------------------------------- while_loop
@pytest.mark.parametrize("pi", [1, 10])
def test_while_gradient_wrt_initial_value(pi):
    x = kf.placeholder(kf.float64, [])
    _, y = _power_loop(x, 3, pi)
    gx, = kf.gradients(y, [x])
    assert _run(gx, {x: 1.1}) == pytest.approx(8 * 1.1 ** 7)
    with kf.Session():
        assert _grad_error(x, [], y, [], x_init_value=0.9) < 1e-5


@pytest.mark.parametrize("pi", [1, 10])
def test_while_gradient_wrt_loop_invariant_weight(pi):
    w = kf.placeholder(kf.float64, [3, 3])
    x = kf.placeholder(kf.float64, [1, 3])
    n = 4

    def body(i, h):
        return i + 1, kf.tanh(kf.matmul(h, w))
    _, h = kf.while_loop(lambda i, h: i < n, body, [kf.constant(0), x], parallel_iterations=pi)
    wv, xv = _r.randn(3, 3) * 0.5, _r.randn(1, 3)
    with kf.Session():
        err = _grad_error([w, x], [[3, 3], [1, 3]], h, [1, 3], x_init_value=[wv, xv])
    assert err < 1e-6
    # against an unrolled reference
    gw, gx = kf.gradients(kf.reduce_sum(h), [w, x])
    hh = x
    for _ in range(n):
        hh = kf.tanh(kf.matmul(hh, w))
    rw, rx = kf.gradients(kf.reduce_sum(hh), [w, x])
    got = _run([gw, gx, rw, rx], {w: wv, x: xv})
    np.testing.assert_allclose(got[0], got[2], rtol=1e-10)
    np.testing.assert_allclose(got[1], got[3], rtol=1e-10)


def test_while_gradient_wrt_variable_used_in_body():
    v = kf.Variable(1.5, dtype=kf.float64)
    _, y = kf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * v + 1.0),
                         [kf.constant(0), kf.constant(1.0, kf.float64)])
    gv, = kf.gradients(y, [v])
    # y = v^3 + v^2 + v + 1
    with kf.Session() as s:
        s.run(v.initializer)
        assert s.run(gv) == pytest.approx(3 * 1.5 ** 2 + 2 * 1.5 + 1)


def test_while_gradient_invariant_used_in_cond_and_body():
    x = kf.placeholder(kf.float64, [])
    a = kf.placeholder(kf.float64, [])
    _, y = kf.while_loop(lambda i, y: i < 5, lambda i, y: (i + 1, y + a * kf.sin(y)),
                         [kf.constant(0), x])
    with kf.Session():
        err = _grad_error([x, a], [[], []], y, [], x_init_value=[0.3, 0.7])
    assert err < 1e-6


def test_while_gradient_dynamic_trip_count():
    x = kf.placeholder(kf.float64, [])
    n = kf.placeholder(kf.int32, [])
    _, y = _power_loop(x, n)
    gx, = kf.gradients(y, [x])
    with kf.Session() as s:
        for nv in (0, 1, 2, 3):
            k = 2 ** nv
            assert s.run(gx, {x: 1.1, n: nv}) == pytest.approx(k * 1.1 ** (k - 1)), nv


def test_zero_iteration_loop_gradients():
    x = kf.placeholder(kf.float32, [2])
    w = kf.placeholder(kf.float32, [2])
    _, y = kf.while_loop(lambda i, y: i < 0, lambda i, y: (i + 1, y * w), [kf.constant(0), x])
    gx, gw = kf.gradients(kf.reduce_sum(y * 3.0), [x, w])
    gxv, gwv = _run([gx, gw], {x: [1.0, 2.0], w: [5.0, 6.0]})
    np.testing.assert_allclose(gxv, [3.0, 3.0])
    np.testing.assert_allclose(gwv, [0.0, 0.0])


def test_gradient_of_untouched_loop_var_is_identity():
    x = kf.placeholder(kf.float32, [])
    z = kf.placeholder(kf.float32, [])
    _, y, zz = kf.while_loop(lambda i, y, z: i < 3, lambda i, y, z: (i + 1, y * 2.0, z),
                             [kf.constant(0), x, z])
    gx, gz = kf.gradients(y + 5.0 * zz, [x, z])
    assert _run([gx, gz], {x: 1.0, z: 1.0}) == [8.0, 5.0]


def test_gradient_through_swapped_loop_vars():
    a = kf.placeholder(kf.float64, [])
    b = kf.placeholder(kf.float64, [])
    _, x, y = kf.while_loop(lambda i, x, y: i < 3, lambda i, x, y: (i + 1, y * 2.0, x * 3.0),
                            [kf.constant(0), a, b])
    # after 3 steps: x = 2*3*2 * b = 12 b, y = 3*2*3 * a = 18 a
    ga, gb = kf.gradients(x + 10.0 * y, [a, b])
    assert _run([ga, gb], {a: 1.0, b: 1.0}) == [180.0, 12.0]


def test_back_prop_false_gives_no_gradient():
    x = kf.placeholder(kf.float32, [])
    _, y = _power_loop(x, 2, back_prop=False)
    gx, = kf.gradients(y, [x])
    assert gx is None


def test_maximum_iterations_gradient():
    x = kf.placeholder(kf.float64, [])
    m = kf.placeholder(kf.int32, [])
    y = kf.while_loop(lambda y: y < 1e9, lambda y: y * 3.0, [x], maximum_iterations=m)
    gx, = kf.gradients(y, [x])
    with kf.Session() as s:
        for mv in (0, 1, 4):
            assert s.run(gx, {x: 2.0, m: mv}) == 3.0 ** mv


def test_gradient_wrt_integer_loop_counter_is_none():
    i0 = kf.placeholder(kf.int32, [])
    x = kf.placeholder(kf.float32, [])
    i, y = kf.while_loop(lambda i, y: i < 5, lambda i, y: (i + 1, y * kf.cast(i, kf.float32)), [i0, x])
    gi, gx = kf.gradients(y, [i0, x])
    assert gi is None
    assert _run(gx, {i0: 1, x: 1.0}) == 24.0


def test_gradient_of_loop_with_cond_inside():
    x = kf.placeholder(kf.float64, [])

    def body(i, y):
        y = kf.cond(kf.equal(kf.mod(i, 2), 0), lambda: y * y, lambda: kf.sin(y))
        return i + 1, y
    _, y = kf.while_loop(lambda i, y: i < 4, body, [kf.constant(0), x])
    xv = 0.8
    ref = xv
    dref = 1.0
    for k in range(4):
        if k % 2 == 0:
            dref *= 2 * ref
            ref = ref * ref
        else:
            dref *= np.cos(ref)
            ref = np.sin(ref)
    gx, = kf.gradients(y, [x])
    yv, gv = _run([y, gx], {x: xv})
    assert yv == pytest.approx(ref) and gv == pytest.approx(dref)
    with kf.Session():
        assert _grad_error(x, [], y, [], x_init_value=xv) < 1e-6


def test_gradient_of_cond_with_loop_inside():
    p = kf.placeholder(kf.bool, [])
    x = kf.placeholder(kf.float64, [])
    y = kf.cond(p, lambda: _power_loop(x, 2)[1], lambda: x * 7.0)
    gx, = kf.gradients(y, [x])
    assert _run(gx, {p: True, x: 1.5}) == pytest.approx(4 * 1.5 ** 3)
    assert _run(gx, {p: False, x: 1.5}) == 7.0


@pytest.mark.parametrize("pi", [1, 10])
def test_nested_loop_gradient(pi):
    x = kf.placeholder(kf.float64, [])
    w = kf.placeholder(kf.float64, [])

    def outer(i, y):
        _, yy = kf.while_loop(lambda j, z: j < i + 1, lambda j, z: (j + 1, kf.sin(z) * w),
                              [kf.constant(0), y], parallel_iterations=pi)
        return i + 1, yy
    _, y = kf.while_loop(lambda i, y: i < 3, outer, [kf.constant(0), x], parallel_iterations=pi)
    with kf.Session():
        err = _grad_error([x, w], [[], []], y, [], x_init_value=[0.5, 1.3])
    assert err < 1e-6


@pytest.mark.parametrize("pi", [1, 10])
def test_tensor_array_in_loop_gradient(pi):
    x = kf.placeholder(kf.float64, [4, 2])
    w = kf.placeholder(kf.float64, [2])
    xs = kf.TensorArray(kf.float64, 4).unstack(x)

    def body(i, h, ta):
        h = kf.tanh(h * w + xs.read(i))
        return i + 1, h, ta.write(i, h)
    _, _, ta = kf.while_loop(lambda i, h, ta: i < 4, body,
                             [kf.constant(0), kf.zeros([2], kf.float64), kf.TensorArray(kf.float64, 4)],
                             parallel_iterations=pi)
    out = ta.stack()
    with kf.Session():
        err = _grad_error([x, w], [[4, 2], [2]], out, [4, 2],
                                     x_init_value=[_r.randn(4, 2), _r.randn(2)])
    assert err < 1e-6


def test_gradient_with_respect_to_value_computed_before_loop():
    x = kf.placeholder(kf.float64, [])
    x2 = kf.exp(x)
    _, y = _power_loop(x2, 2)
    gx, = kf.gradients(y, [x])
    # y = exp(4x)
    assert _run(gx, {x: 0.1}) == pytest.approx(4 * np.exp(0.4))


def test_gradient_through_two_chained_loops():
    x = kf.placeholder(kf.float64, [])
    _, y = _power_loop(x, 1)
    _, z = kf.while_loop(lambda i, z: i < 3, lambda i, z: (i + 1, z * y), [kf.constant(0), y])
    gx, = kf.gradients(z, [x])
    # z = y^4 = x^8
    assert _run(gx, {x: 1.2}) == pytest.approx(8 * 1.2 ** 7)


def test_gradient_loop_output_used_twice():
    x = kf.placeholder(kf.float64, [])
    _, y = _power_loop(x, 1)
    gx, = kf.gradients(y * y + y, [x])
    # x^4 + x^2
    assert _run(gx, {x: 1.5}) == pytest.approx(4 * 1.5 ** 3 + 2 * 1.5)


def test_gradient_run_repeatedly_and_both_forward_and_backward_fetched():
    x = kf.placeholder(kf.float64, [])
    n = kf.placeholder(kf.int32, [])
    _, y = _power_loop(x, n)
    gx, = kf.gradients(y, [x])
    with kf.Session() as s:
        for _ in range(3):
            for nv in (3, 0, 2):
                k = 2 ** nv
                yv, gv = s.run([y, gx], {x: 1.05, n: nv})
                assert yv == pytest.approx(1.05 ** k) and gv == pytest.approx(k * 1.05 ** (k - 1))


def test_minimize_loss_computed_by_while_loop():
    w = kf.Variable(np.array([[0.5, -0.3], [0.2, 0.4]], np.float32))
    x = kf.constant(np.array([[1.0, 2.0]], np.float32))
    target = kf.constant(np.array([[0.3, -0.2]], np.float32))

    def body(i, h):
        return i + 1, kf.tanh(kf.matmul(h, w))
    _, h = kf.while_loop(lambda i, h: i < 3, body, [kf.constant(0), x])
    loss = kf.reduce_sum(kf.square(h - target))
    train = kf.train.GradientDescentOptimizer(0.2).minimize(loss)
    with kf.Session() as s:
        s.run(w.initializer)
        losses = [s.run(loss)]
        for _ in range(15):
            s.run(train)
            losses.append(s.run(loss))
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    assert losses[-1] < 0.5 * losses[0]


def test_grad_ys_through_loop():
    x = kf.placeholder(kf.float32, [2])
    _, y = kf.while_loop(lambda i, y: i < 2, lambda i, y: (i + 1, y * 3.0), [kf.constant(0), x])
    gx, = kf.gradients(y, [x], grad_ys=kf.constant([1.0, -2.0]))
    np.testing.assert_allclose(_run(gx, {x: [1.0, 1.0]}), [9.0, -18.0])


def test_stop_gradient_inside_body():
    x = kf.placeholder(kf.float64, [])
    _, y = kf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y + kf.stop_gradient(y * y)),
                         [kf.constant(0), x])
    gx, = kf.gradients(y, [x])
    assert _run(gx, {x: 0.5}) == 1.0


def test_initial_value_also_used_as_invariant():
    x = kf.placeholder(kf.float64, [])
    _, y = kf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * x), [kf.constant(0), x])
    gx, = kf.gradients(y, [x])
    assert _run(gx, {x: 2.0}) == 32.0   # x^4


def test_loop_vars_from_distinct_tensors_of_one_value():
    x = kf.placeholder(kf.float64, [])
    _, a, b = kf.while_loop(lambda i, a, b: i < 3, lambda i, a, b: (i + 1, a * 2.0, b * a),
                            [kf.constant(0), x, kf.identity(x)])
    ga, = kf.gradients(a, [x])
    gb, = kf.gradients(b, [x])
    assert _run([ga, gb], {x: 1.0}) == [8.0, 32.0]   # a = 8x, b = 8x^4


def test_loop_vars_sharing_one_initial_tensor():
    x = kf.placeholder(kf.float64, [])
    _, a, b = kf.while_loop(lambda i, a, b: i < 3, lambda i, a, b: (i + 1, a * 2.0, b * a),
                            [kf.constant(0), x, x])
    ga, = kf.gradients(a, [x])
    gb, = kf.gradients(b, [x])
    assert _run([ga, gb], {x: 1.0}) == [8.0, 32.0]


def test_gather_of_loop_var_gradient():
    h0 = kf.placeholder(kf.float64, [3, 2])
    _, h = kf.while_loop(lambda i, h: i < 2,
                         lambda i, h: (i + 1, h + kf.reduce_sum(kf.gather(h, [0, 0]))),
                         [kf.constant(0), h0])
    with kf.Session():
        assert _grad_error(h0, [3, 2], h, [3, 2], x_init_value=_r.randn(3, 2)) < 1e-6


def test_gather_of_loop_invariant_gradient():
    params = kf.placeholder(kf.float64, [5, 2])
    _, acc = kf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a + kf.gather(params, i)),
                           [kf.constant(0), kf.zeros([2], kf.float64)])
    gp, = kf.gradients(kf.reduce_sum(acc), [params])
    want = np.zeros((5, 2))
    want[:3] = 1.0
    np.testing.assert_allclose(_run(kf.convert_to_tensor(gp), {params: np.ones((5, 2))}), want)


def test_maximum_iterations_gradient_wrt_invariant():
    x = kf.placeholder(kf.float64, [])
    w = kf.placeholder(kf.float64, [])
    _, z = kf.while_loop(lambda i, z: True, lambda i, z: (i + 1, z * w), [kf.constant(0), x],
                         maximum_iterations=3)
    gw, = kf.gradients(z, [w])
    assert _run(gw, {x: 1.0, w: 2.0}) == 12.0


def test_unconnected_gradient_zero_next_to_a_loop():
    x = kf.placeholder(kf.float64, [])
    q = kf.placeholder(kf.float64, [])
    _, y = _power_loop(x, 2)
    gx, gq = kf.gradients(y, [x, q], unconnected_gradients="zero")
    assert _run([gx, gq], {x: 1.0, q: 3.0}) == [4.0, 0.0]


@pytest.mark.parametrize("pi", [1, 10])
def test_cond_in_while_gradient_wrt_invariant(pi):
    x = kf.placeholder(kf.float64, [])
    w = kf.placeholder(kf.float64, [])

    def body(i, y):
        return i + 1, kf.cond(y > 1.0, lambda: y * w, lambda: y + w)
    _, y = kf.while_loop(lambda i, y: i < 4, body, [kf.constant(0), x], parallel_iterations=pi)
    with kf.Session():
        err = _grad_error([x, w], [[], []], y, [], x_init_value=[0.5, 1.5])
    assert err < 1e-6
    assert _run(kf.gradients(y, [x, w]), {x: 0.5, w: 1.5}) == pytest.approx([3.375, 16.875])


def test_adam_minimizes_a_loop_loss():
    v = kf.Variable(0.5, dtype=kf.float64)
    _, out = kf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * v),
                           [kf.constant(0), kf.constant(2.0, kf.float64)])
    loss = kf.square(out - 1.0)
    train = kf.train.AdamOptimizer(0.05).minimize(loss)
    with kf.Session() as s:
        s.run(kf.global_variables_initializer())
        first = s.run(loss)
        for _ in range(30):
            s.run(train)
        assert s.run(loss) < 0.1 * first


def test_gradients_inside_the_body():
    x = kf.placeholder(kf.float64, [])

    def body(i, h):
        gh, = kf.gradients(h * h * h, [h])
        assert gh is not None
        return i + 1, gh
    _, h = kf.while_loop(lambda i, h: i < 2, body, [kf.constant(0), x])
    assert _run(h, {x: 1.0}) == 27.0   # 3 (3 x^2)^2


def test_cond_in_while_returning_an_invariant_gradient():
    w = kf.placeholder(kf.float64, [])
    x = kf.placeholder(kf.float64, [])

    def body(i, y):
        return i + 1, kf.cond(i < 2, lambda: w, lambda: y * w)
    _, y = kf.while_loop(lambda i, y: i < 4, body, [kf.constant(0), x])
    assert _run(kf.gradients(y, [w, x]), {w: 2.0, x: 5.0}) == [12.0, 0.0]   # y = w^3


def test_gradient_wrt_variable_as_initial_loop_value():
    v = kf.Variable(3.0)
    out = kf.while_loop(lambda z: z < 100.0, lambda z: z * 2.0, [v])
    gv, = kf.gradients(out, [v])
    with kf.Session() as s:
        s.run(v.initializer)
        assert s.run(gv) == 64.0


def test_cond_gather_gradient_sparse_in_both_branches():
    p = kf.placeholder(kf.bool, [])
    params = kf.placeholder(kf.float64, [4, 2])
    y = kf.cond(p, lambda: kf.gather(params, [0, 1]), lambda: kf.gather(params, [2, 2]) * 2.0)
    gp, = kf.gradients(kf.reduce_sum(y), [params])
    gp = kf.convert_to_tensor(gp)
    one = np.ones((4, 2))
    np.testing.assert_allclose(_run(gp, {p: True, params: one}), [[1, 1], [1, 1], [0, 0], [0, 0]])
    np.testing.assert_allclose(_run(gp, {p: False, params: one}), [[0, 0], [0, 0], [4, 4], [0, 0]])


@pytest.mark.parametrize("kw", [{"colocate_gradients_with_ops": True}, {"gate_gradients": True},
                                {"aggregation_method": kf.AggregationMethod.EXPERIMENTAL_TREE}])
def test_gradients_options_through_a_loop(kw):
    x = kf.placeholder(kf.float64, [])
    _, z = kf.while_loop(lambda i, z: i < 3, lambda i, z: (i + 1, z * x),
                         [kf.constant(0), kf.constant(1.0, kf.float64)])
    gx, = kf.gradients(z + z, [x], **kw)
    assert _run(gx, {x: 2.0}) == 24.0


def test_nested_cond_in_while_gradient():
    x = kf.placeholder(kf.float64, [])
    q = kf.placeholder(kf.bool, [])

    def body(i, y):
        return i + 1, kf.cond(q, lambda: kf.cond(i > 1, lambda: y * x, lambda: y + x), lambda: y)
    _, y = kf.while_loop(lambda i, y: i < 4, body, [kf.constant(0), x])
    gx, = kf.gradients(y, [x])
    assert _run(gx, {x: 2.0, q: True}) == 36.0     # y = 3 x^3
    assert _run(gx, {x: 2.0, q: False}) == 1.0


def test_swap_memory_gradient():
    x = kf.placeholder(kf.float64, [])
    _, z = kf.while_loop(lambda i, z: i < 3, lambda i, z: (i + 1, z * x), [0, x], swap_memory=True)
    assert _run(kf.gradients(z, [x]), {x: 2.0}) == [32.0]
