"""kf.gradients through the math ops: broadcasting, options of kf.gradients, graph economy."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework.indexed_slices import IndexedSlices
from kernflow.core.framework.op_def_registry import lookup, register_op
from kernflow.core.testing.gradient_checker import compute_gradient, compute_gradient_error

_r = np.random.RandomState(3)


def _run(fetches, feed=None, graph=None):
    with kf.Session(graph=graph or kf.get_default_graph()) as sess:
        return sess.run(fetches, feed)


def _grad_op_types(g, scope="gradients"):
    return sorted(op.type for op in g.get_operations() if op.name.startswith(scope + "/"))


@pytest.fixture(autouse=True)
def _fresh_graph():
    with kf.Graph().as_default() as g:
        yield g


# ---------------------------------------------------------------------------- broadcasting
def test_broadcast_with_unknown_batch_dim():
    x = kf.placeholder(kf.float64, [None, 3])
    b = kf.placeholder(kf.float64, [3])
    y = kf.reduce_sum(kf.square(x * b + b))
    gx, gb = kf.gradients(y, [x, b])
    assert gx.shape.as_list() == [None, 3] and gb.shape.as_list() == [3]
    xv, bv = _r.randn(4, 3), _r.randn(3)
    gxv, gbv = _run([gx, gb], {x: xv, b: bv})
    z = 2 * (xv * bv + bv)
    np.testing.assert_allclose(gxv, z * bv)
    np.testing.assert_allclose(gbv, np.sum(z * xv, 0) + np.sum(z, 0))


@pytest.mark.parametrize("xs,ys", [((2, 1, 3), (4, 1)), ((1,), (2, 3)), ((5, 1), (1, 4)),
                                   ((), (2, 2)), ((2, 3), (2, 3))])
def test_broadcast_with_unknown_rank_matches_static(xs, ys):
    xv, yv = np.asarray(_r.randn(*xs)), np.asarray(_r.randn(*ys))
    wv = _r.rand(*np.broadcast_shapes(xs, ys))
    results = []
    for static in (True, False):
        with kf.Graph().as_default():
            x = kf.placeholder(kf.float64, xs if static else None)
            y = kf.placeholder(kf.float64, ys if static else None)
            out = kf.reduce_sum((x - y) * wv)
            results.append(_run(kf.gradients(out, [x, y]), {x: xv, y: yv}))
    for s, d, v in zip(results[0], results[1], (xv, yv)):
        assert np.shape(s) == v.shape == np.shape(d)
        np.testing.assert_allclose(d, s)


def test_broadcast_gradients_with_random_partially_known_shapes():
    rng = np.random.RandomState(11)
    for _ in range(60):
        n = rng.randint(0, 4)
        full = rng.randint(2, 4, size=n)
        shapes = []
        for _side in range(2):
            s = [d if rng.rand() < 0.6 else 1 for d in full][rng.randint(0, n + 1):]
            shapes.append(s)
        xv, yv = np.asarray(rng.randn(*shapes[0])), np.asarray(rng.randn(*shapes[1]))
        static = [[d if rng.rand() < 0.5 else None for d in s] for s in shapes]
        with kf.Graph().as_default():
            x = kf.placeholder(kf.float64, static[0])
            y = kf.placeholder(kf.float64, static[1])
            up = np.asarray(rng.randn(*np.broadcast_shapes(xv.shape, yv.shape)))
            gx, gy = kf.gradients(x * y, [x, y], grad_ys=kf.constant(up))
            gxv, gyv = _run([gx, gy], {x: xv, y: yv})
        ex, ey = up * yv, up * xv
        ex = ex.sum(tuple(range(ex.ndim - xv.ndim))).sum(
            tuple(i for i, d in enumerate(xv.shape) if d == 1), keepdims=True)
        ey = ey.sum(tuple(range(ey.ndim - yv.ndim))).sum(
            tuple(i for i, d in enumerate(yv.shape) if d == 1), keepdims=True)
        np.testing.assert_allclose(gxv, ex, err_msg=f"{static}")
        np.testing.assert_allclose(gyv, ey, err_msg=f"{static}")


def test_partially_known_ambiguous_dims_use_broadcast_gradient_args():
    g = kf.get_default_graph()
    x = kf.placeholder(kf.float64, [None, 1])
    y = kf.placeholder(kf.float64, [None, 3])
    gx, gy = kf.gradients(kf.reduce_sum(x * y), [x, y])
    assert "BroadcastGradientArgs" in _grad_op_types(g)
    assert gx.shape.as_list() == [None, 1] and gy.shape.as_list() == [None, 3]
    xv, yv = _r.randn(2, 1), _r.randn(2, 3)
    gxv, gyv = _run([gx, gy], {x: xv, y: yv})
    np.testing.assert_allclose(gxv, yv.sum(1, keepdims=True))
    np.testing.assert_allclose(gyv, np.broadcast_to(xv, (2, 3)))
    # At run time x may also be broadcast along dim 0.
    gxv, gyv = _run([gx, gy], {x: xv[:1], y: yv})
    np.testing.assert_allclose(gxv, [[yv.sum()]])


@pytest.mark.parametrize("batch", [5, None])
def test_matmul_plus_bias_gradient_is_one_sum_and_no_reshape(batch):
    g = kf.get_default_graph()
    x = kf.placeholder(kf.float32, [batch, 4])
    w = kf.constant(_r.randn(4, 3).astype(np.float32))
    b = kf.placeholder(kf.float32, [3])
    h = kf.matmul(x, w) + b
    up = kf.placeholder(kf.float32, [batch, 3])
    gh, gb = kf.gradients(h, [h, b], grad_ys=up)
    add_grad_ops = [op for op in g.get_operations() if op.name.startswith("gradients/add_grad/")]
    assert sorted(op.type for op in add_grad_ops) == ["Const", "Sum"]
    axis = [op for op in add_grad_ops if op.type == "Const"][0]
    np.testing.assert_array_equal(axis.get_attr("value"), [0])
    assert gb.op.type == "Sum" and gb.dtype == kf.float32 and gb.shape.as_list() == [3]
    types = _grad_op_types(g)
    assert "BroadcastGradientArgs" not in types and "Shape" not in types and "Reshape" not in types
    upv = _r.randn(5, 3).astype(np.float32)
    np.testing.assert_allclose(_run(gb, {x: np.ones((5, 4), np.float32), b: np.ones(3, np.float32),
                                         up: upv}), upv.sum(0), rtol=1e-6)


def test_same_shape_add_passes_the_gradient_through():
    x = kf.placeholder(kf.float32, [2, 3])
    y = kf.placeholder(kf.float32, [2, 3])
    up = kf.placeholder(kf.float32, [2, 3])
    gx, gy = kf.gradients(x + y, [x, y], grad_ys=up)
    assert gx is up and gy is up


def test_static_reduce_all_gradient_uses_no_shape_ops():
    g = kf.get_default_graph()
    x = kf.placeholder(kf.float32, [3, 4])
    gx, = kf.gradients(kf.reduce_mean(x), x)
    types = set(_grad_op_types(g))
    assert types <= {"Const", "Fill", "OnesLike", "RealDiv", "BroadcastTo", "Reshape"}, types
    assert gx.dtype == kf.float32 and gx.shape.as_list() == [3, 4]
    np.testing.assert_allclose(_run(gx, {x: np.ones((3, 4), np.float32)}), np.full((3, 4), 1 / 12))


# ---------------------------------------------------------------------------- kf.gradients options
def test_grad_ys():
    x = kf.placeholder(kf.float64, [3])
    y = x * x
    gx, = kf.gradients(y, x, grad_ys=kf.constant([1.0, 2.0, 3.0], kf.float64))
    np.testing.assert_allclose(_run(gx, {x: [1.0, 1.0, 2.0]}), [2.0, 4.0, 12.0])


def test_stop_gradients_argument():
    x = kf.placeholder(kf.float64, [])
    h = x * x
    y = h * x
    gx, = kf.gradients(y, x, stop_gradients=[h])
    np.testing.assert_allclose(_run(gx, {x: 3.0}), 9.0)  # h held constant: d(h x)/dx = h


def test_stop_gradient_op():
    x = kf.placeholder(kf.float64, [])
    y = kf.stop_gradient(x * x) * x + x
    gx, = kf.gradients(y, x)
    np.testing.assert_allclose(_run(gx, {x: 3.0}), 10.0)


def test_unconnected_gradients():
    x = kf.placeholder(kf.float32, [2, 2])
    z = kf.placeholder(kf.float32, [2, 2])
    y = kf.reduce_sum(x * 2.0)
    assert kf.gradients(y, [x, z])[1] is None
    gx, gz = kf.gradients(y, [x, z], unconnected_gradients="zero")
    assert gz.dtype == kf.float32 and gz.shape.as_list() == [2, 2]
    gxv, gzv = _run([gx, gz], {x: np.ones((2, 2), np.float32), z: np.ones((2, 2), np.float32)})
    np.testing.assert_array_equal(gzv, np.zeros((2, 2)))
    np.testing.assert_array_equal(gxv, np.full((2, 2), 2.0))


def test_gradients_summed_over_paths():
    g = kf.get_default_graph()
    x = kf.placeholder(kf.float64, [4])
    y = x * x + kf.sin(x) + x
    gx, = kf.gradients(y, x)
    assert "AddN" in _grad_op_types(g)
    xv = _r.randn(4)
    np.testing.assert_allclose(_run(gx, {x: xv}), 2 * xv + np.cos(xv) + 1)


def test_several_ys_are_summed():
    x = kf.placeholder(kf.float64, [2])
    gx, = kf.gradients([kf.reduce_sum(kf.exp(x)), kf.reduce_sum(3.0 * x)], x)
    np.testing.assert_allclose(_run(gx, {x: [0.0, 1.0]}), np.exp([0.0, 1.0]) + 3)


def test_op_without_gradient_raises_lookup_error():
    name = "MathGradTestNoGradient"
    if lookup(name) is None:
        register_op(name, inputs=["x: T"], outputs=["y: T"], attrs=["T: {float, double}"],
                    shape_fn=lambda op: [op.inputs[0].shape], doc="Test-only op without a gradient.")
    from kernflow.core.framework.op_def_library import apply_op
    x = kf.placeholder(kf.float32, [2])
    y = apply_op(name, [x * 2.0], name="nograd").outputs[0]
    with pytest.raises(LookupError, match="nograd.*MathGradTestNoGradient"):
        kf.gradients(kf.reduce_sum(y), x)


# ---------------------------------------------------------------------------- a small network
def test_two_layer_mlp_matches_finite_differences():
    rng = np.random.RandomState(0)
    x = kf.constant(rng.randn(5, 4))
    target = kf.constant(rng.randn(5, 2))
    w1 = kf.placeholder(kf.float64, [4, 3])
    b1 = kf.placeholder(kf.float64, [3])
    w2 = kf.placeholder(kf.float64, [3, 2])
    b2 = kf.placeholder(kf.float64, [2])
    hidden = kf.tanh(kf.matmul(x, w1) + b1)
    out = kf.sigmoid(kf.matmul(hidden, w2) + b2)
    loss = kf.reduce_mean(kf.squared_difference(out, target))
    params = [w1, b1, w2, b2]
    values = [rng.randn(4, 3), rng.randn(3), rng.randn(3, 2), rng.randn(2)]
    grads = kf.gradients(loss, params)
    assert [gr.shape.as_list() for gr in grads] == [[4, 3], [3], [3, 2], [2]]
    feed = dict(zip(params, values))
    with kf.Session() as sess:
        sym = sess.run(grads, feed)
        for p, v, s in zip(params, values, sym):
            num = np.zeros_like(v)
            for i in range(v.size):
                for sign in (1, -1):
                    vv = v.copy()
                    vv.reshape(-1)[i] += sign * 1e-6
                    num.reshape(-1)[i] += sign * sess.run(loss, {**feed, p: vv}) / 2e-6
            np.testing.assert_allclose(s, num, rtol=1e-5, atol=1e-8)
        err = compute_gradient_error(params, [v.shape for v in values], loss, [], x_init_value=values)
    assert err < 1e-6


# ---------------------------------------------------------------------------- TF semantics
def test_dtypes_and_static_shapes_are_kept():
    x = kf.placeholder(kf.float32, [2, 3])
    y = kf.placeholder(kf.float32, [3])
    outs = [x * y, x / y, kf.maximum(x, y), kf.pow(kf.abs(x) + 1.0, y), kf.tanh(x), kf.sqrt(x * x),
            kf.reduce_prod(x, 1), kf.reduce_max(x, 0), kf.cumprod(x, 1), kf.rsqrt(x * x + 1.0),
            kf.sigmoid(x), kf.reciprocal(x), kf.squared_difference(x, y), kf.clip_by_value(x, -1.0, y)]
    for o in outs:
        gx, gy = kf.gradients(kf.reduce_sum(o), [x, y])
        assert gx.dtype == kf.float32 and gx.shape.as_list() == [2, 3], o.op.type
        if gy is not None:
            assert gy.dtype == kf.float32 and gy.shape.as_list() == [3], o.op.type


def test_pow_gradient_is_finite_at_zero_base():
    x = kf.placeholder(kf.float64, [3])
    y = kf.placeholder(kf.float64, [3])
    gx, gy = kf.gradients(kf.reduce_sum(kf.pow(x, y)), [x, y])
    gxv, gyv = _run([gx, gy], {x: [0.0, -2.0, 2.0], y: [2.0, 2.0, 3.0]})
    np.testing.assert_allclose(gxv, [0.0, -4.0, 12.0])
    np.testing.assert_allclose(gyv, [0.0, 0.0, 8 * np.log(2.0)])


def test_max_ties_split_evenly_and_maximum_ties_go_to_x():
    x = kf.placeholder(kf.float64, [2, 3])
    y = kf.placeholder(kf.float64, [2, 3])
    gmax, = kf.gradients(kf.reduce_max(x, 1), x)
    gx, gy = kf.gradients(kf.maximum(x, y), [x, y])
    gmin_x, gmin_y = kf.gradients(kf.minimum(x, y), [x, y])
    xv = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    vals = _run([gmax, gx, gy, gmin_x, gmin_y], {x: xv, y: np.full((2, 3), 2.0)})
    np.testing.assert_allclose(vals[0], [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    np.testing.assert_array_equal(vals[1], [[0, 1, 1], [1, 1, 1]])
    np.testing.assert_array_equal(vals[2], [[1, 0, 0], [0, 0, 0]])
    np.testing.assert_array_equal(vals[3], [[1, 0, 0], [1, 1, 1]])
    np.testing.assert_array_equal(vals[4], [[0, 1, 1], [0, 0, 0]])


def test_prod_gradient_with_zeros():
    x = kf.placeholder(kf.float64, [2, 3])
    gx, = kf.gradients(kf.reduce_prod(x, 1), x)
    gxv = _run(gx, {x: [[0.0, 2.0, 3.0], [0.0, 0.0, 5.0]]})
    np.testing.assert_allclose(gxv, [[6.0, 0.0, 0.0], [0.0, 0.0, 0.0]])


def test_piecewise_constant_and_index_ops_have_no_gradient():
    x = kf.placeholder(kf.float32, [3])
    y = kf.placeholder(kf.float32, [3])
    assert kf.gradients(kf.floor(x), x) == [None]
    assert kf.gradients(kf.ceil(x), x) == [None]
    assert kf.gradients(kf.round(x), x) == [None]
    assert kf.gradients(kf.floordiv(x, y), [x, y]) == [None, None]
    assert kf.gradients(kf.cast(kf.argmax(x, 0), kf.float32), x) == [None]
    assert kf.gradients(kf.cast(kf.cast(x, kf.int32), kf.float32), x) == [None]
    assert kf.gradients(kf.where(x > y, x, y), [x, y])[0] is not None
    gs, = kf.gradients(kf.sign(x), x)
    np.testing.assert_array_equal(_run(gs, {x: [1.0, -2.0, 0.5]}), [0.0, 0.0, 0.0])


def test_floormod_gradient():
    x = kf.placeholder(kf.float64, [3])
    y = kf.placeholder(kf.float64, [3])
    gx, gy = kf.gradients(kf.floormod(x, y), [x, y])
    gxv, gyv = _run([gx, gy], {x: [7.5, -7.5, 3.0], y: [2.0, 2.0, -2.0]})
    np.testing.assert_array_equal(gxv, [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(gyv, [-3.0, 4.0, 2.0])


def test_cast_gradient_casts_back():
    x = kf.placeholder(kf.float64, [2])
    gx, = kf.gradients(kf.cast(x, kf.float32) * 2.0, x)
    assert gx.dtype == kf.float64
    np.testing.assert_array_equal(_run(gx, {x: [1.0, 2.0]}), [2.0, 2.0])


def test_indexed_slices_pass_through_add_and_cast():
    x = kf.placeholder(kf.float64, [4, 2])
    z = kf.placeholder(kf.float64, [4, 2])
    y = kf.cast(x + z, kf.float32)
    up = IndexedSlices(kf.constant(np.ones((1, 2), np.float32)), kf.constant([2]),
                       kf.constant([4, 2]))
    gx, gz = kf.gradients(y, [x, z], grad_ys=up)
    assert isinstance(gx, IndexedSlices) and gx.dtype == kf.float64
    v = _run(gx.values)
    np.testing.assert_array_equal(v, np.ones((1, 2)))


def test_complex_abs_gradient():
    x = kf.placeholder(kf.complex128, [3])
    w = np.array([1.0, 2.0, 0.5])
    gx, = kf.gradients(kf.reduce_sum(kf.abs(x) * w), x)
    xv = np.array([3 + 4j, -1 + 0.5j, 0j])
    got = _run(gx, {x: xv})
    np.testing.assert_allclose(got, [w[0] * xv[0] / 5, w[1] * xv[1] / abs(xv[1]), 0])


def test_batch_matmul_broadcast_gradient_with_unknown_batch():
    a = kf.placeholder(kf.float64, [None, 2, 3])
    b = kf.placeholder(kf.float64, [3, 4])
    ga, gb = kf.gradients(kf.reduce_sum(kf.matmul(a, b)), [a, b])
    assert gb.shape.as_list() == [3, 4]
    av, bv = _r.randn(5, 2, 3), _r.randn(3, 4)
    gav, gbv = _run([ga, gb], {a: av, b: bv})
    np.testing.assert_allclose(gbv, np.broadcast_to(av.sum((0, 1))[:, None], (3, 4)))
    np.testing.assert_allclose(gav, np.broadcast_to(bv.sum(1), (5, 2, 3)))


def test_second_derivatives():
    x = kf.placeholder(kf.float64, [4])
    xv = np.array([-1.0, 0.2, 0.5, 1.5])
    checks = [(kf.tanh, lambda v: -2 * np.tanh(v) * (1 - np.tanh(v) ** 2)),
              (kf.sigmoid, lambda v: (lambda s: s * (1 - s) * (1 - 2 * s))(1 / (1 + np.exp(-v)))),
              (kf.sqrt, lambda v: -0.25 * v ** -1.5),
              (kf.rsqrt, lambda v: 0.75 * v ** -2.5),
              (kf.reciprocal, lambda v: 2 * v ** -3.0)]
    for fn, d2 in checks:
        v = np.abs(xv) if fn in (kf.sqrt, kf.rsqrt) else xv
        g1, = kf.gradients(kf.reduce_sum(fn(x)), x)
        g2, = kf.gradients(kf.reduce_sum(g1), x)
        np.testing.assert_allclose(_run(g2, {x: v}), d2(v), rtol=1e-10, err_msg=fn.__name__)


# ---------------------------------------------------------------------------- gradient_checker
def test_compute_gradient_jacobians():
    x = kf.placeholder(kf.float64, [2, 3])
    y = kf.reduce_sum(x * x, 1)
    xv = _r.randn(2, 3)
    with kf.Session():
        theoretical, numerical = compute_gradient(x, [2, 3], y, [2], x_init_value=xv)
    expected = np.zeros((6, 2))
    expected[:3, 0] = 2 * xv[0]
    expected[3:, 1] = 2 * xv[1]
    np.testing.assert_allclose(theoretical, expected)
    np.testing.assert_allclose(numerical, expected, atol=1e-6)


def test_compute_gradient_error_is_small_for_correct_gradients_and_lists():
    a = kf.placeholder(kf.float64, [3, 2])
    b = kf.placeholder(kf.float64, [2, 4])
    y = kf.tanh(kf.matmul(a, b))
    err = compute_gradient_error([a, b], [[3, 2], [2, 4]], y, [3, 4])  # default session made
    assert err < 1e-6
    pairs = compute_gradient([a, b], [(3, 2), (2, 4)], y, (3, 4))
    assert [p[0].shape for p in pairs] == [(6, 12), (8, 12)]


def test_compute_gradient_error_detects_a_wrong_gradient():
    x = kf.placeholder(kf.float64, [3])
    with kf.get_default_graph().gradient_override_map({"Sin": "Cos"}):
        y = kf.sin(x)
        err = compute_gradient_error(x, [3], y, [3], x_init_value=np.array([0.1, 0.5, 1.0]))
    assert err > 0.1


def test_compute_gradient_rejects_bad_arguments():
    x = kf.placeholder(kf.float64, [3])
    y = x * 2.0
    with pytest.raises(ValueError, match="x_shape"):
        compute_gradient(x, [4], y, [3])
    with pytest.raises(ValueError, match="y_shape"):
        compute_gradient(x, [3], y, [2])
    with pytest.raises(TypeError, match="floating"):
        compute_gradient(kf.placeholder(kf.int32, [3]), [3], y, [3])


def test_compute_gradient_with_a_variable():
    v = kf.Variable(np.array([1.0, 2.0]))
    y = kf.exp(v) * 3.0
    with kf.Session() as sess:
        sess.run(v.initializer)
        t, n = compute_gradient(v, [2], y, [2], x_init_value=np.array([0.5, -0.5]))
    np.testing.assert_allclose(np.diag(t), 3 * np.exp([0.5, -0.5]))
    np.testing.assert_allclose(n, t, atol=1e-5)


def test_gradient_override_map_survives_export_and_import():
    """As TF, the override is the node's `_gradient_op_type` attr: a re-imported graph keeps it."""
    name = "KfTestTimesTen"
    kf.RegisterGradient(name)(lambda op, grad: grad * 10.0)
    g = kf.Graph()
    with g.as_default():
        x = kf.placeholder(kf.float32, [2], name="x")
        with g.gradient_override_map({"Identity": name}):
            y = kf.identity(x, name="y")
        kf.reduce_sum(y * 2.0, name="z")
    gd = g.as_graph_def()
    assert next(n for n in gd.node if n.name == "y").attr["_gradient_op_type"].s == name.encode()
    g2 = kf.Graph()
    with g2.as_default():
        kf.import_graph_def(gd, name="")
        x2, z2 = g2.get_tensor_by_name("x:0"), g2.get_tensor_by_name("z:0")
        dx = kf.gradients(z2, x2)[0]
        with kf.Session() as s:
            assert s.run(dx, {x2: [1.0, 2.0]}).tolist() == [20.0, 20.0]
