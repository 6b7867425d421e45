"""kf.map_fn, kf.foldl, kf.foldr and kf.scan: values against numpy, options, errors, gradients."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.testing.gradient_checker import compute_gradient_error

_r = np.random.RandomState(5)


@pytest.fixture(autouse=True)
def graph():
    with kf.Graph().as_default() as g:
        yield g


def _run(fetches, feed=None):
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        return sess.run(fetches, feed)


def _digits(fn_name, elems, **kw):
    """A non-commutative fold (a * 10 + x) over int32 elems, to check the order."""
    fn = getattr(kf, fn_name)
    return fn(lambda a, x: a * 10 + x, kf.constant(np.asarray(elems, np.int32)), **kw)


# ---------------------------------------------------------------------------- map_fn
def test_map_fn_values_and_static_shape():
    xv = _r.randn(4, 3).astype(np.float32)
    y = kf.map_fn(lambda v: kf.tanh(v) * 2.0, kf.constant(xv))
    assert y.shape.as_list() == [4, 3] and y.dtype == kf.float32
    np.testing.assert_allclose(_run(y), np.tanh(xv) * 2, rtol=1e-6)


def test_map_fn_dynamic_first_dimension():
    x = kf.placeholder(kf.float32, [None, 3])
    y = kf.map_fn(lambda v: kf.reduce_sum(v * v), x)
    assert y.shape.as_list() == [None]
    with kf.Session() as sess:
        for n in (1, 5):
            xv = _r.randn(n, 3).astype(np.float32)
            np.testing.assert_allclose(sess.run(y, {x: xv}), np.sum(xv * xv, 1), rtol=1e-5)
        assert sess.run(y, {x: np.zeros((0, 3), np.float32)}).shape == (0,)


def test_map_fn_first_dimension_from_any_element():
    x = kf.placeholder(kf.float32, [None, 2])
    y = kf.placeholder(kf.float32, [3])
    out = kf.map_fn(lambda p: p[0] * p[1], (x, y), dtype=kf.float32)
    assert out.shape.as_list() == [3, 2]


def test_map_fn_nested_elems_keep_their_structure():
    a, b = _r.randn(3, 2), _r.randn(3)
    seen = []

    def fn(item):
        seen.append(item)
        return {"x": item["x"] * item["y"][0], "y": (item["y"][0] + 1.0,)}
    out = kf.map_fn(fn, {"x": kf.constant(a), "y": (kf.constant(b),)})
    assert isinstance(seen[0], dict) and isinstance(seen[0]["y"], tuple)
    assert seen[0]["x"].shape.as_list() == [2] and seen[0]["y"][0].shape.as_list() == []
    v = _run(out)
    np.testing.assert_allclose(v["x"], a * b[:, None])
    np.testing.assert_allclose(v["y"][0], b + 1)


def test_map_fn_dtype_for_a_different_output_structure():
    a = _r.randn(4, 3).astype(np.float32)
    k = np.arange(4, dtype=np.int32)
    out = kf.map_fn(lambda p: (kf.reduce_max(p[0]), p[1] * 2, kf.cast(p[1], kf.float64)),
                    (kf.constant(a), kf.constant(k)), dtype=(kf.float32, kf.int32, kf.float64))
    assert [t.dtype for t in out] == [kf.float32, kf.int32, kf.float64]
    assert [t.shape.as_list() for t in out] == [[4], [4], [4]]
    mx, dbl, f = _run(out)
    np.testing.assert_allclose(mx, a.max(1))
    np.testing.assert_array_equal(dbl, 2 * k)
    np.testing.assert_array_equal(f, k.astype(np.float64))
    single = kf.map_fn(lambda p: kf.cast(p[1], kf.float32) + p[0][0], (kf.constant(a),
                                                                         kf.constant(k)),
                       dtype=kf.float32)
    np.testing.assert_allclose(_run(single), k + a[:, 0])


@pytest.mark.parametrize("parallel_iterations", [1, 4, None])
def test_map_fn_parallel_iterations_and_name(graph, parallel_iterations):
    x = kf.constant(np.arange(12.0).reshape(6, 2))
    y = kf.map_fn(lambda v: v + 1.0, x, parallel_iterations=parallel_iterations, name="mymap")
    assert y.op.name.startswith("mymap/")
    enters = [op for op in graph.get_operations() if op.type == "Enter"]
    assert enters and all(op.get_attr("parallel_iterations") == (parallel_iterations or 10)
                          for op in enters)
    np.testing.assert_allclose(_run(y), np.arange(12.0).reshape(6, 2) + 1)


def test_map_fn_infer_shape_false_allows_differently_shaped_outputs_until_stacked():
    x = kf.placeholder(kf.int32, [None])
    y = kf.map_fn(lambda v: kf.fill(kf.expand_dims(v, 0), 1.0), x, dtype=kf.float32,
                  infer_shape=False)
    with kf.Session() as sess:
        np.testing.assert_allclose(sess.run(y, {x: [2, 2]}), np.ones((2, 2)))
        with pytest.raises(errors.InvalidArgumentError):
            sess.run(y, {x: [1, 2]})


def test_map_fn_reads_captured_variables_and_tensors():
    w = kf.Variable([1.0, 2.0])
    c = kf.constant(3.0)
    y = kf.map_fn(lambda v: v * w + c, kf.constant([[1.0, 1.0], [2.0, 0.0]]))
    np.testing.assert_allclose(_run(y), [[4.0, 5.0], [5.0, 3.0]])


def test_map_fn_inside_cond_and_while_loop():
    x = kf.placeholder(kf.float32, [None, 2])
    in_cond = kf.cond(kf.reduce_sum(x) > 0, lambda: kf.map_fn(lambda v: v + 1.0, x), lambda: x)
    _, in_loop = kf.while_loop(
        lambda i, a: i < 3,
        lambda i, a: (i + 1, a + kf.reduce_sum(kf.map_fn(lambda v: v * kf.cast(i, kf.float32),
                                                         x))),
        [0, 0.0])
    xv = np.arange(6, dtype=np.float32).reshape(3, 2)
    c, w = _run([in_cond, in_loop], {x: xv})
    np.testing.assert_allclose(c, xv + 1)
    assert w == pytest.approx((0 + 1 + 2) * xv.sum())


def test_map_fn_errors():
    x = kf.constant([[1.0, 2.0]])
    with pytest.raises(TypeError, match="fn must be callable"):
        kf.map_fn(3, x)
    with pytest.raises(ValueError, match="1\\+ dimensional"):
        kf.map_fn(lambda v: v, kf.constant(1.0))
    with pytest.raises(ValueError, match="elems must be a Tensor"):
        kf.map_fn(lambda v: v, [])
    with pytest.raises(ValueError, match="same first dimension"):
        kf.map_fn(lambda p: p[0], (x, kf.constant([1.0, 2.0])))
    with pytest.raises(ValueError, match="structure of elems"):
        kf.map_fn(lambda v: (v, v), x)
    with pytest.raises(ValueError, match="structure of dtype"):
        kf.map_fn(lambda v: v, x, dtype=(kf.float32, kf.float32))
    with pytest.raises(errors.InvalidArgumentError, match="float32 but Op is trying to write "
                                                          "dtype int32"):
        kf.map_fn(lambda v: kf.cast(v, kf.int32), x)


# ---------------------------------------------------------------------------- foldl / foldr
def test_folds_order_with_and_without_initializer():
    digits = [1, 2, 3, 4]
    assert _run(_digits("foldl", digits)) == 1234
    assert _run(_digits("foldr", digits)) == 4321
    assert _run(_digits("foldl", digits, initializer=kf.constant(9))) == 91234
    assert _run(_digits("foldr", digits, initializer=kf.constant(9))) == 94321


def test_folds_over_float_rows_match_numpy():
    xv = _r.randn(5, 3)
    x = kf.placeholder(kf.float64, [None, 3])
    left = kf.foldl(lambda a, v: a * 0.5 + kf.sin(v), x)
    right = kf.foldr(lambda a, v: a * 0.5 + kf.sin(v), x, initializer=kf.zeros([3], kf.float64))
    assert left.shape.as_list() == [3] and right.shape.as_list() == [3]
    want_l = xv[0]
    for row in xv[1:]:
        want_l = want_l * 0.5 + np.sin(row)
    want_r = np.zeros(3)
    for row in xv[::-1]:
        want_r = want_r * 0.5 + np.sin(row)
    got_l, got_r = _run([left, right], {x: xv})
    np.testing.assert_allclose(got_l, want_l)
    np.testing.assert_allclose(got_r, want_r)


def test_folds_with_nested_elems_and_accumulators():
    a, b = _r.randn(4, 2), _r.randn(4)

    def fn(acc, item):
        total, prod = acc
        return total + item["a"] * item["b"], prod * item["b"]
    for fold, order in ((kf.foldl, slice(None)), (kf.foldr, slice(None, None, -1))):
        out = fold(fn, {"a": kf.constant(a), "b": kf.constant(b)},
                   initializer=(kf.zeros([2], kf.float64), kf.constant(1.0, kf.float64)))
        assert isinstance(out, tuple)
        total, prod = _run(out)
        np.testing.assert_allclose(total, (a * b[:, None])[order].sum(0))
        np.testing.assert_allclose(prod, np.prod(b))


def test_folds_on_one_element_and_name():
    one = kf.foldl(lambda a, x: a + x, kf.constant([7.0]), name="fl")
    empty_with_init = kf.foldr(lambda a, x: a + x, kf.zeros([0]), initializer=kf.constant(2.0))
    assert one.op.name.startswith("fl/")
    assert _run([one, empty_with_init]) == [7.0, 2.0]


def test_fold_errors():
    x = kf.constant([1.0, 2.0])
    with pytest.raises(TypeError, match="fn must be callable"):
        kf.foldl(None, x)
    with pytest.raises(ValueError, match="1\\+ dimensional"):
        kf.foldr(lambda a, v: a + v, kf.constant(1.0))
    with pytest.raises(ValueError):
        kf.foldl(lambda a, v: (a, a), x)                # changes the accumulator's structure
    with pytest.raises(TypeError):
        kf.foldl(lambda a, v: kf.cast(a, kf.int32), x)  # changes its dtype
    with pytest.raises(ValueError, match="enters the loop with shape"):
        kf.foldl(lambda a, v: kf.stack([a, v]), x)      # changes its shape


# ---------------------------------------------------------------------------- scan
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_without_initializer_is_a_cumulative_op(reverse):
    xv = _r.randn(5, 2)
    y = kf.scan(lambda a, v: a + v, kf.constant(xv), reverse=reverse)
    assert y.shape.as_list() == [5, 2]
    want = np.cumsum(xv[::-1], 0)[::-1] if reverse else np.cumsum(xv, 0)
    np.testing.assert_allclose(_run(y), want)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_with_initializer_orders_outputs_by_position(reverse):
    y = _digits("scan", [1, 2, 3], initializer=kf.constant(5), reverse=reverse)
    want = [5123 // 100, 5123 // 10, 5123] if not reverse else [5321, 532, 53]
    np.testing.assert_array_equal(_run(y), want)


def test_scan_nested_initializer_differs_from_elems():
    x = kf.placeholder(kf.float32, [None])
    out = kf.scan(lambda acc, v: {"sum": acc["sum"] + v, "n": acc["n"] + 1,
                                  "pair": kf.stack([v, acc["sum"]])},
                  x, initializer={"sum": kf.constant(0.0), "n": kf.constant(0),
                                  "pair": kf.zeros([2])})
    assert out["pair"].shape.as_list() == [None, 2] and out["n"].dtype == kf.int32
    xv = np.array([1.0, 2.0, 4.0], np.float32)
    v = _run(out, {x: xv})
    np.testing.assert_allclose(v["sum"], np.cumsum(xv))
    np.testing.assert_array_equal(v["n"], [1, 2, 3])
    np.testing.assert_allclose(v["pair"], [[1.0, 0.0], [2.0, 1.0], [4.0, 3.0]])


def test_scan_nested_elems_without_initializer():
    a, b = _r.randn(4), _r.randn(4)
    out = kf.scan(lambda acc, v: (acc[0] + v[0], acc[1] * v[1]), (kf.constant(a), kf.constant(b)))
    s, p = _run(out)
    np.testing.assert_allclose(s, np.cumsum(a))
    np.testing.assert_allclose(p, np.cumprod(b))


def test_scan_with_an_accumulator_of_unknown_shape():
    x = kf.constant([1.0, 2.0, 3.0])
    init = kf.placeholder_with_default(kf.constant([0.0, 0.0]), [None])
    y = kf.scan(lambda a, v: a + v, x, initializer=init, infer_shape=False)
    np.testing.assert_allclose(_run(y), [[1, 1], [3, 3], [6, 6]])


def test_scan_errors():
    x = kf.constant([1.0, 2.0])
    with pytest.raises(TypeError, match="fn must be callable"):
        kf.scan("f", x)
    with pytest.raises(ValueError, match="1\\+ dimensional"):
        kf.scan(lambda a, v: a + v, kf.constant(1.0))
    with pytest.raises(ValueError, match="structure of initializer"):
        kf.scan(lambda a, v: a[0] + v, x, initializer=(kf.constant(0.0), kf.constant(0.0)))
    with pytest.raises(ValueError, match="structure of elems"):
        kf.scan(lambda a, v: (a, v), x)


# ---------------------------------------------------------------------------- gradients
def _grad_errors(build, x_shape=(4, 3)):
    """Finite-difference checks of y = build(x, w) with respect to x and a captured variable w."""
    x = kf.placeholder(kf.float64, list(x_shape))
    w = kf.Variable(_r.rand(x_shape[-1]) + 0.5, dtype=kf.float64)
    y = build(x, w)
    y_shape = y.shape.as_list()
    xv = _r.rand(*x_shape) + 0.2
    with kf.Session() as sess:
        sess.run(w.initializer)
        ex = compute_gradient_error(x, list(x_shape), y, y_shape, x_init_value=xv)
        ew = compute_gradient_error(w, [x_shape[-1]], y, y_shape,
                                    x_init_value=_r.rand(x_shape[-1]) + 0.5,
                                    extra_feed_dict={x: xv})
    return ex, ew


_GRAD_CASES = {
    "map_fn": lambda x, w: kf.map_fn(lambda v: kf.sin(v) * w, x),
    "map_fn_nested": lambda x, w: kf.map_fn(
        lambda p: {"a": p[0] * p[1] * w, "b": kf.reduce_sum(p[0] * w)}, (x, kf.exp(x)),
        dtype={"a": kf.float64, "b": kf.float64})["a"],
    "map_fn_to_scalars": lambda x, w: kf.map_fn(lambda v: kf.reduce_sum(v * w * v), x),
    "foldl": lambda x, w: kf.foldl(lambda a, v: a * v + w, x),
    "foldl_init": lambda x, w: kf.foldl(lambda a, v: kf.tanh(a * w + v), x,
                                        initializer=kf.reduce_mean(x, 0)),
    "foldr": lambda x, w: kf.foldr(lambda a, v: a * v * w, x, initializer=kf.ones([3], kf.float64)),
    "foldr_no_init": lambda x, w: kf.foldr(lambda a, v: kf.sin(a) * w + v, x),
    "scan": lambda x, w: kf.scan(lambda a, v: kf.tanh(a * w + v), x),
    "scan_reverse": lambda x, w: kf.scan(lambda a, v: kf.tanh(a * w + v), x, reverse=True),
    "scan_nested_init": lambda x, w: kf.scan(
        lambda a, v: (a[0] * w + v, a[1] + kf.reduce_sum(a[0] * v)), x,
        initializer=(x[0], kf.constant(0.0, kf.float64)), reverse=True)[1],
}


@pytest.mark.parametrize("case", sorted(_GRAD_CASES))
def test_gradients_match_finite_differences(case):
    ex, ew = _grad_errors(_GRAD_CASES[case])
    assert ex < 1e-5 and ew < 1e-5, (ex, ew)


def test_gradient_of_a_sum_over_map_fn_matches_closed_form():
    x = kf.placeholder(kf.float32, [None, 2])
    w = kf.Variable([0.5, -1.0])
    loss = kf.reduce_sum(kf.map_fn(lambda v: kf.square(v * w), x))
    gx, gw = kf.gradients(loss, [x, w])
    xv = _r.randn(6, 2).astype(np.float32)
    gxv, gwv = _run([gx, gw], {x: xv})
    wv = np.array([0.5, -1.0])
    np.testing.assert_allclose(gxv, 2 * xv * wv * wv, rtol=1e-5)
    np.testing.assert_allclose(gwv, np.sum(2 * xv * xv * wv, 0), rtol=1e-5)


def test_no_gradient_without_back_prop():
    x = kf.placeholder(kf.float32, [3, 2])
    for y in (kf.map_fn(lambda v: v * 2.0, x, back_prop=False),
              kf.foldl(lambda a, v: a + v, x, back_prop=False),
              kf.scan(lambda a, v: a + v, x, back_prop=False)):
        assert kf.gradients(kf.reduce_sum(y), x) == [None]


def test_training_a_variable_through_scan():
    w = kf.Variable(0.0)
    x = kf.constant(np.ones(5, np.float32))
    y = kf.scan(lambda a, v: a * 0.5 + v * w, x, initializer=kf.constant(0.0))
    loss = kf.square(y[-1] - 3.0)
    train = kf.train.GradientDescentOptimizer(0.1).minimize(loss)
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        for _ in range(50):
            sess.run(train)
        # y[-1] = w * (1 + 1/2 + ... + 1/16)
        assert sess.run(w) == pytest.approx(3.0 / 1.9375, rel=1e-3)


def test_gradients_through_nested_map_fn():
    ex, ew = _grad_errors(lambda x, w: kf.map_fn(lambda row: kf.map_fn(lambda e: e * e, row) * w,
                                                 x))
    assert ex < 1e-5 and ew < 1e-5, (ex, ew)
