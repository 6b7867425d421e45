"""kf.gradients through the nn ops: whole networks, unknown shapes, training, graph economy."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework.gradient_registry import gradient_status
from kernflow.core.ops import nn_ops_conv
from kernflow.core.testing.gradient_checker import compute_gradient

_r = np.random.RandomState(11)


def _run(fetches, feed=None):
    with kf.Session(graph=kf.get_default_graph()) as sess:
        return sess.run(fetches, feed)


def _grad_ops(g, scope="gradients"):
    return [op for op in g.get_operations() if op.name.startswith(scope + "/")]


@pytest.fixture(autouse=True)
def _fresh_graph():
    with kf.Graph().as_default() as g:
        yield g


# ------------------------------------------------------------------------- whole networks
def _conv_net(x, params, labels, data_format="NHWC"):
    """conv(3x3, SAME) + bias -> relu -> max_pool 2x2 -> avg_pool -> dense -> sparse xent."""
    w, b, w2, b2 = params
    h = kf.nn.relu(kf.nn.bias_add(kf.nn.conv2d(x, w, 1, "SAME", data_format=data_format), b,
                                  data_format=data_format))
    h = kf.nn.max_pool(h, 2, 2, "VALID", data_format=data_format)
    h = kf.nn.avg_pool(h, [2, 1], 1, "SAME", data_format=data_format)
    logits = kf.matmul(kf.reshape(h, [2, -1]), w2) + b2
    return kf.reduce_mean(kf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_conv_pool_dense_network_matches_finite_differences(data_format):
    shapes = [(3, 3, 2, 3), (3,), (27, 4), (4,)]
    values = [_r.randn(*s) * 0.5 for s in shapes]
    xshape = (2, 6, 6, 2) if data_format == "NHWC" else (2, 2, 6, 6)
    x = kf.constant(_r.randn(*xshape))
    params = [kf.placeholder(kf.float64, s) for s in shapes]
    loss = _conv_net(x, params, kf.constant([1, 3]), data_format)
    grads = compute_gradient(params, shapes, loss, [], x_init_value=values, delta=1e-5)
    for theoretical, numerical in grads:
        np.testing.assert_allclose(theoretical, numerical, rtol=1e-5, atol=1e-7)


def test_conv_net_gradient_wrt_input_keeps_static_shape_with_unknown_batch():
    x = kf.placeholder(kf.float32, [None, 6, 6, 2])
    w = kf.constant(_r.randn(3, 3, 2, 4).astype(np.float32))
    y = kf.nn.max_pool(kf.nn.relu(kf.nn.conv2d(x, w, 1, "SAME")), 2, 2, "SAME")
    y = kf.nn.avg_pool(y, 3, 1, "VALID")
    gx, gw = kf.gradients(kf.reduce_sum(y), [x, w])
    assert gx.shape.as_list() == [None, 6, 6, 2] and gx.dtype == kf.float32
    assert gw.shape.as_list() == [3, 3, 2, 4] and gw.dtype == kf.float32
    xv = _r.randn(5, 6, 6, 2).astype(np.float32)
    gxv, gwv = _run([gx, gw], {x: xv})
    assert gxv.shape == xv.shape and gwv.shape == (3, 3, 2, 4)
    assert gxv.dtype == np.float32


def test_conv_gradients_use_constant_shapes_when_static():
    g = kf.get_default_graph()
    x = kf.placeholder(kf.float32, [2, 5, 5, 3])
    w = kf.placeholder(kf.float32, [2, 2, 3, 4])
    y = kf.nn.avg_pool(kf.nn.conv2d(x, w, 2, "SAME"), 2, 1, "SAME")
    kf.gradients(kf.reduce_sum(y), [x, w])
    types = {op.type for op in _grad_ops(g)}
    assert {"Conv2DBackpropInput", "Conv2DBackpropFilter", "AvgPoolGrad"} <= types
    assert not types & {"Shape", "ShapeN"}


# ------------------------------------------------------------------------- cross entropy
def test_sparse_xent_gradient_shapes_with_unknown_batch():
    x = kf.placeholder(kf.float32, [None, 4])
    labels = kf.placeholder(kf.int64, [None])
    w = kf.Variable(_r.randn(4, 3).astype(np.float32))
    logits = kf.matmul(x, w)
    xent = kf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    loss = kf.reduce_mean(xent)
    g_logits, g_w, g_labels = kf.gradients(loss, [logits, w, labels])
    assert g_labels is None
    assert g_logits.shape.as_list() == [None, 3] and g_logits.dtype == kf.float32
    assert g_w.shape.as_list() == [4, 3] and g_w.dtype == kf.float32
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        for n in (1, 7):
            xv = _r.randn(n, 4).astype(np.float32)
            lv = _r.randint(0, 3, n).astype(np.int64)
            gl, gw, lg = sess.run([g_logits, g_w, logits], {x: xv, labels: lv})
            p = np.exp(lg - lg.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            p[np.arange(n), lv] -= 1
            assert gl.shape == (n, 3) and gw.shape == (4, 3)
            np.testing.assert_allclose(gl, p / n, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(gw, xv.T @ (p / n), rtol=1e-4, atol=1e-5)


def test_sparse_xent_rank3_logits_gradient():
    logits = kf.placeholder(kf.float64, [2, 3, 5])
    labels = kf.constant([[0, 4, 2], [1, 1, 3]])
    loss = kf.reduce_sum(kf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))
    theoretical, numerical = compute_gradient(logits, [2, 3, 5], loss, [],
                                              x_init_value=_r.randn(2, 3, 5))
    np.testing.assert_allclose(theoretical, numerical, rtol=1e-6, atol=1e-8)


def test_softmax_xent_v2_gradients_flow_to_labels_but_not_in_v1():
    logits = kf.placeholder(kf.float64, [3, 4])
    labels = kf.placeholder(kf.float64, [3, 4])
    v2 = kf.reduce_sum(kf.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits))
    v1 = kf.reduce_sum(kf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    assert kf.gradients(v1, labels) == [None]
    lv, pv = _r.randn(3, 4), _r.dirichlet(np.ones(4), 3)
    g_labels, g_logits = _run(kf.gradients(v2, [labels, logits]), {logits: lv, labels: pv})
    log_p = lv - np.log(np.exp(lv).sum(1, keepdims=True))
    np.testing.assert_allclose(g_labels, -log_p)
    np.testing.assert_allclose(g_logits, np.exp(log_p) - pv)


def test_second_derivative_of_sparse_xent_through_the_backprop_output():
    """Hessian-vector products need the gradient flowing into the backprop output."""
    logits = kf.placeholder(kf.float64, [2, 3])
    loss = kf.reduce_sum(kf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=kf.constant([2, 0]), logits=logits))
    (g,) = kf.gradients(loss, logits)
    v = _r.randn(2, 3)
    (hv,) = kf.gradients(kf.reduce_sum(g * v), logits)
    lv = _r.randn(2, 3)
    got = _run(hv, {logits: lv})
    p = np.exp(lv) / np.exp(lv).sum(1, keepdims=True)
    want = p * v - p * (p * v).sum(1, keepdims=True)  # the softmax Jacobian times v
    np.testing.assert_allclose(got, want, rtol=1e-10)


# ------------------------------------------------------------------------------ training
def test_training_a_tiny_mlp_reduces_the_loss():
    rng = np.random.RandomState(0)
    xv = rng.randn(64, 5).astype(np.float32)
    yv = (xv[:, 0] + xv[:, 1] > 0).astype(np.int32) + (xv[:, 2] > 1).astype(np.int32)
    x = kf.placeholder(kf.float32, [None, 5])
    y = kf.placeholder(kf.int32, [None])
    w1 = kf.Variable(rng.randn(5, 16).astype(np.float32) * 0.5)
    b1 = kf.Variable(np.zeros(16, np.float32))
    w2 = kf.Variable(rng.randn(16, 3).astype(np.float32) * 0.5)
    b2 = kf.Variable(np.zeros(3, np.float32))
    h = kf.nn.relu(kf.nn.bias_add(kf.matmul(x, w1), b1))
    logits = kf.nn.bias_add(kf.matmul(h, w2), b2)
    loss = kf.reduce_mean(kf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train = kf.train.GradientDescentOptimizer(0.5).minimize(loss)
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        feed = {x: xv, y: yv}
        first = sess.run(loss, feed)
        for _ in range(100):
            sess.run(train, feed)
        last = sess.run(loss, feed)
    assert last < 0.5 * first, (first, last)


def test_mlp_gradient_graph_is_lean():
    """The backward pass of a static-shape MLP has one op per forward op, and no shape plumbing."""
    g = kf.get_default_graph()
    x = kf.placeholder(kf.float32, [32, 20])
    y = kf.placeholder(kf.int32, [32])
    w1, b1 = kf.Variable(np.zeros((20, 8), np.float32)), kf.Variable(np.zeros(8, np.float32))
    w2, b2 = kf.Variable(np.zeros((8, 4), np.float32)), kf.Variable(np.zeros(4, np.float32))
    h = kf.nn.relu(kf.nn.bias_add(kf.matmul(x, w1), b1))
    logits = kf.nn.bias_add(kf.matmul(h, w2), b2)
    loss = kf.reduce_mean(kf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    grads = kf.gradients(loss, [w1, b1, w2, b2])
    types = [op.type for op in _grad_ops(g)]
    assert not set(types) & {"Shape", "ShapeN", "Reshape", "Tile", "BroadcastGradientArgs",
                             "Fill", "OneHot"}
    assert types.count("ReluGrad") == 1 and types.count("BiasAddGrad") == 2
    # Each op is named after the op it differentiates (TF's layout).
    assert grads[0].op.type == "MatMul" and grads[1].op.name == "gradients/BiasAdd_grad/BiasAddGrad"
    for gr, v in zip(grads, [w1, b1, w2, b2]):
        assert gr.shape == v.shape and gr.dtype == kf.float32


# -------------------------------------------------------------------- individual gradients
def test_activation_gradients_keep_dtype_and_shape():
    x = kf.placeholder(kf.float16, [None, 3])
    for fn in (kf.nn.relu, kf.nn.relu6, kf.nn.elu, kf.nn.selu, kf.nn.softplus, kf.nn.softsign,
               kf.nn.leaky_relu, kf.nn.softmax, kf.nn.log_softmax):
        (gx,) = kf.gradients(kf.reduce_sum(fn(x)), x)
        assert gx.dtype == kf.float16 and gx.shape.as_list() == [None, 3], fn.__name__


def test_leaky_relu_gradient_uses_alpha():
    x = kf.placeholder(kf.float64, [4])
    (gx,) = kf.gradients(kf.reduce_sum(kf.nn.leaky_relu(x, alpha=0.3)), x)
    assert gx.op.type == "LeakyReluGrad"
    np.testing.assert_allclose(_run(gx, {x: [-2.0, -0.5, 0.5, 2.0]}), [0.3, 0.3, 1.0, 1.0])


def test_relu_second_derivative_is_zero_and_first_is_a_mask():
    x = kf.placeholder(kf.float64, [5])
    (g,) = kf.gradients(kf.reduce_sum(kf.nn.relu(x) * x), x)
    (h,) = kf.gradients(kf.reduce_sum(g), x)
    xv = np.array([-2.0, -1.0, 0.5, 1.0, 3.0])
    gv, hv = _run([g, h], {x: xv})
    np.testing.assert_allclose(gv, 2 * np.maximum(xv, 0))
    np.testing.assert_allclose(hv, 2.0 * (xv > 0))


def test_top_k_gradient_goes_to_the_selected_entries():
    x = kf.placeholder(kf.float32, [None, None])
    values, _ = kf.nn.top_k(x, 2)
    (gx,) = kf.gradients(kf.reduce_sum(values * kf.constant([10.0, 1.0])), x)
    got = _run(gx, {x: [[1.0, 5.0, 3.0], [4.0, 0.0, 2.0]]})
    np.testing.assert_allclose(got, [[0, 10, 1], [10, 0, 1]])


def test_max_pool_second_derivative_routes_through_the_window_maxima():
    x = kf.constant(_r.permutation(16).reshape(1, 4, 4, 1).astype(np.float64))
    g = kf.placeholder(kf.float64, [1, 2, 2, 1])
    dx = nn_ops_conv.max_pool_grad(x, kf.nn.max_pool(x, 2, 2, "VALID"), g, [1, 2, 2, 1],
                                   [1, 2, 2, 1], "VALID")
    v = kf.constant(_r.randn(1, 4, 4, 1))
    (gg,) = kf.gradients(kf.reduce_sum(dx * v), g)
    assert gg.op.type == "MaxPoolGradGrad"
    xv = _run(x)
    want = np.zeros((1, 2, 2, 1))
    vv = _run(v)
    for i in range(2):
        for j in range(2):
            win = xv[0, 2 * i:2 * i + 2, 2 * j:2 * j + 2, 0]
            a, b = np.unravel_index(np.argmax(win), (2, 2))
            want[0, i, j, 0] = vv[0, 2 * i + a, 2 * j + b, 0]
    np.testing.assert_allclose(_run(gg, {g: np.ones((1, 2, 2, 1))}), want)


def test_fused_batch_norm_gradients_match_the_composite_formula():
    x = kf.placeholder(kf.float32, [4, 2, 2, 3])
    scale = kf.placeholder(kf.float32, [3])
    offset = kf.placeholder(kf.float32, [3])
    y, _, _ = kf.nn.fused_batch_norm(x, scale, offset, epsilon=0.001)
    mean, var = kf.nn.moments(x, [0, 1, 2])
    y_ref = kf.nn.batch_normalization(x, mean, var, offset, scale, 0.001)
    w = kf.constant(_r.randn(4, 2, 2, 3).astype(np.float32))
    got = kf.gradients(kf.reduce_sum(y * w), [x, scale, offset])
    want = kf.gradients(kf.reduce_sum(y_ref * w), [x, scale, offset])
    feed = {x: _r.randn(4, 2, 2, 3).astype(np.float32), scale: _r.rand(3).astype(np.float32) + 0.5,
            offset: _r.randn(3).astype(np.float32)}
    for a, b in zip(_run(got, feed), _run(want, feed)):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


def test_every_nn_op_has_a_gradient_or_is_marked():
    from kernflow.core.framework import op_def_registry
    nn = [n for n, o in op_def_registry.registered_ops().items() if "nn_ops" in o.site]
    assert nn and all(gradient_status(n) != "missing" for n in nn)
    assert gradient_status("InTopKV2") == "not_differentiable"
    assert gradient_status("MaxPoolGradGrad") == "gradient"
