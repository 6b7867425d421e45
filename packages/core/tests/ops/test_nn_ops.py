"""Python-level behaviour of the kf.nn wrappers: names, argument handling, shapes, errors."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors


@pytest.fixture(autouse=True)
def _fresh_graph():
    g = kf.Graph()
    with g.as_default():
        yield g


def _run(fetches, feed=None):
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        return sess.run(fetches, feed)


def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


# ---------------------------------------------------------------------------------- names
def test_default_op_names_follow_tf():
    x = kf.constant(np.ones((2, 3), np.float32))
    img = kf.constant(np.ones((1, 4, 4, 2), np.float32))
    w = kf.constant(np.ones((2, 2, 2, 3), np.float32))
    labels = kf.constant([0, 1])
    got = {
        "Relu": kf.nn.relu(x), "Relu6": kf.nn.relu6(x), "Elu": kf.nn.elu(x),
        "LeakyRelu": kf.nn.leaky_relu(x), "Softmax": kf.nn.softmax(x),
        "LogSoftmax": kf.nn.log_softmax(x), "BiasAdd": kf.nn.bias_add(x, [1.0, 2.0, 3.0]),
        "L2Loss": kf.nn.l2_loss(x), "Conv2D": kf.nn.conv2d(img, w, 1, "SAME"),
        "MaxPool": kf.nn.max_pool(img, 2, 2, "VALID"), "AvgPool": kf.nn.avg_pool(img, 2, 2, "VALID"),
        "TopKV2": kf.nn.top_k(x, 2)[0], "in_top_k/InTopKV2": kf.nn.in_top_k(x, labels, 1),
        "SparseSoftmaxCrossEntropyWithLogits/SparseSoftmaxCrossEntropyWithLogits":
            kf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=x),
        "softmax_cross_entropy_with_logits_sg":
            kf.nn.softmax_cross_entropy_with_logits(labels=x, logits=x),
        "softmax_cross_entropy_with_logits":
            kf.nn.softmax_cross_entropy_with_logits_v2(labels=x, logits=x),
        "logistic_loss": kf.nn.sigmoid_cross_entropy_with_logits(labels=x, logits=x),
        "l2_normalize": kf.nn.l2_normalize(x, 1),
        "conv2d_transpose": kf.nn.conv2d_transpose(
            kf.constant(np.ones((1, 4, 4, 3), np.float32)), w, [1, 4, 4, 2], [1, 1, 1, 1]),
    }
    for want, t in got.items():
        assert t.op.name == want, (want, t.op.name)


def test_explicit_names_and_scoped_composites():
    x = kf.constant(np.ones((2, 3), np.float32))
    assert kf.nn.relu(x, name="act").op.name == "act"
    assert kf.nn.relu6(x, name="r6").op.name == "r6"
    assert kf.nn.softmax(x, name="probs").op.name == "probs"
    wx = kf.nn.xw_plus_b(x, kf.ones([3, 4]), kf.zeros([4]))
    assert wx.op.name == "xw_plus_b" and wx.op.type == "BiasAdd"
    rl = kf.nn.relu_layer(x, kf.ones([3, 4]), kf.zeros([4]))
    assert rl.op.name == "relu_layer" and rl.op.type == "Relu"
    mean, var = kf.nn.moments(x, [0])
    assert mean.op.name.startswith("moments/") and var.op.name.startswith("moments/")
    assert kf.nn.dropout(x, 0.5).op.name.startswith("dropout/")


def test_public_names_under_kf_nn():
    for n in ["relu", "conv2d", "max_pool", "avg_pool", "moments", "batch_normalization",
              "dropout", "embedding_lookup", "top_k", "in_top_k", "sigmoid", "tanh",
              "sparse_softmax_cross_entropy_with_logits", "l2_loss", "xw_plus_b", "bias_add"]:
        assert callable(getattr(kf.nn, n)), n


# ------------------------------------------------------------------------------ activations
def test_leaky_relu_casts_integers_and_uses_alpha():
    y = kf.nn.leaky_relu(kf.constant([-10, 5]), alpha=0.5)
    assert y.dtype == kf.float32
    np.testing.assert_allclose(_run(y), [-5.0, 5.0])
    assert kf.nn.leaky_relu(kf.constant([1.0]), alpha=0.3).op.get_attr("alpha") == \
        pytest.approx(0.3)


def test_activations_keep_float32():
    x = kf.constant(np.linspace(-3, 3, 7, dtype=np.float32))
    outs = [kf.nn.relu(x), kf.nn.elu(x), kf.nn.selu(x), kf.nn.softplus(x), kf.nn.softsign(x),
            kf.nn.relu6(x), kf.nn.sigmoid(x), kf.nn.tanh(x), kf.nn.swish(x)]
    for v in _run(outs):
        assert v.dtype == np.float32


def test_relu_rejects_bool():
    with pytest.raises(TypeError, match="Relu"):
        kf.nn.relu(kf.constant([True]))


# ---------------------------------------------------------------------------------- softmax
def test_softmax_along_other_axes_and_dim_alias():
    x = np.random.RandomState(0).randn(2, 3, 4).astype(np.float32)
    t = kf.constant(x)
    a0, a1, d1, neg = _run([kf.nn.softmax(t, axis=0), kf.nn.softmax(t, 1),
                            kf.nn.softmax(t, dim=1), kf.nn.log_softmax(t, axis=-2)])
    np.testing.assert_allclose(a0, _softmax(x, 0), rtol=1e-5)
    np.testing.assert_allclose(a1, _softmax(x, 1), rtol=1e-5)
    np.testing.assert_allclose(d1, a1)
    np.testing.assert_allclose(neg, np.log(_softmax(x, 1)), rtol=1e-5, atol=1e-6)
    assert kf.nn.softmax(t, axis=0).shape.as_list() == [2, 3, 4]


def test_softmax_bad_axis_and_scalar():
    with pytest.raises(errors.InvalidArgumentError, match="must be in the range"):
        kf.nn.softmax(kf.zeros([2, 3]), axis=2)
    with pytest.raises(ValueError, match="at least rank 1"):
        kf.nn.softmax(kf.constant(1.0))


def test_softmax_is_stable_for_large_logits():
    v = _run(kf.nn.softmax(kf.constant([[1e4, 1e4 - 1.0, -1e4]], kf.float32)))
    assert np.all(np.isfinite(v))
    np.testing.assert_allclose(v[0], _softmax(np.array([1.0, 0.0, -2e4])), rtol=1e-6)


# --------------------------------------------------------------------------------- bias_add
def test_bias_add_shapes_and_errors():
    v = kf.placeholder(kf.float32, [None, 5, 5, 3])
    assert kf.nn.bias_add(v, kf.zeros([3])).shape.as_list() == [None, 5, 5, 3]
    u = kf.placeholder(kf.float32, [None, None])
    assert kf.nn.bias_add(u, kf.zeros([4])).shape.as_list() == [None, 4]
    with pytest.raises(ValueError, match="BiasAdd"):
        kf.nn.bias_add(v, kf.zeros([4]))
    with pytest.raises(ValueError, match="rank"):
        kf.nn.bias_add(kf.zeros([3]), kf.zeros([3]))
    nchw = kf.nn.bias_add(kf.zeros([2, 3, 4, 4]), [1.0, 2.0, 3.0], data_format="NCHW")
    assert nchw.op.get_attr("data_format") == "NCHW"
    np.testing.assert_allclose(_run(nchw)[:, :, 0, 0], [[1, 2, 3]] * 2)


def test_bias_add_runtime_mismatch_names_op():
    v = kf.placeholder(kf.float32, None)
    out = kf.nn.bias_add(v, kf.zeros([3]), name="badd")
    with pytest.raises(errors.InvalidArgumentError, match="BiasAdd badd.*biases"):
        _run(out, {v: np.zeros((2, 4), np.float32)})


# ----------------------------------------------------------------------------- cross entropy
def test_xent_requires_keyword_arguments():
    x = kf.zeros([2, 3])
    with pytest.raises(ValueError, match="Only call `sparse_softmax_cross_entropy_with_logits`"):
        kf.nn.sparse_softmax_cross_entropy_with_logits(kf.constant([0, 1]), x)
    with pytest.raises(ValueError, match="Only call `softmax_cross_entropy_with_logits`"):
        kf.nn.softmax_cross_entropy_with_logits(x, x)
    with pytest.raises(ValueError, match="Both labels and logits"):
        kf.nn.sigmoid_cross_entropy_with_logits(logits=x)


def test_sparse_xent_out_of_range_label():
    logits = kf.zeros([3, 10])
    labels = kf.placeholder(kf.int32, [3])
    loss = kf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"Received a label value of 10 which is outside the valid range "
                             r"of \[0, 10\)"):
        _run(loss, {labels: [1, 10, 3]})
    with pytest.raises(errors.InvalidArgumentError, match="label value of -1"):
        _run(loss, {labels: [-1, 0, 3]})


def test_sparse_xent_rank_checks_and_higher_rank():
    with pytest.raises(ValueError, match="Rank mismatch"):
        kf.nn.sparse_softmax_cross_entropy_with_logits(labels=kf.constant([[0]]),
                                                       logits=kf.zeros([1, 3]))
    with pytest.raises(ValueError, match="Shape mismatch"):
        kf.nn.sparse_softmax_cross_entropy_with_logits(labels=kf.constant([0, 1, 2]),
                                                       logits=kf.zeros([2, 3]))
    x = np.random.RandomState(1).randn(2, 3, 4).astype(np.float32)
    lab = np.array([[0, 1, 3], [2, 2, 0]], np.int64)
    loss = kf.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=x)
    assert loss.shape.as_list() == [2, 3] and loss.dtype == kf.float32
    want = -np.log(np.take_along_axis(_softmax(x), lab[..., None], -1))[..., 0]
    np.testing.assert_allclose(_run(loss), want, rtol=1e-5)


def test_softmax_xent_v1_and_v2_agree_and_axis():
    rs = np.random.RandomState(2)
    x = rs.randn(3, 5).astype(np.float32)
    p = _softmax(rs.randn(3, 5)).astype(np.float32)
    v1 = kf.nn.softmax_cross_entropy_with_logits(labels=p, logits=x)
    v2 = kf.nn.softmax_cross_entropy_with_logits_v2(labels=p, logits=x)
    ax0 = kf.nn.softmax_cross_entropy_with_logits_v2(labels=p.T, logits=x.T, axis=0)
    want = -(p * np.log(_softmax(x))).sum(-1)
    a, b, c = _run([v1, v2, ax0])
    for v in (a, b, c):
        np.testing.assert_allclose(v, want, rtol=1e-5)
    assert ax0.shape.as_list() == [3]
    big = kf.nn.softmax_cross_entropy_with_logits_v2(labels=[[0.0, 1.0]], logits=[[1e4, -1e4]])
    np.testing.assert_allclose(_run(big), [2e4], rtol=1e-6)


def test_sigmoid_and_weighted_cross_entropy():
    x = np.array([-50.0, -1.0, 0.5, 3.0, 60.0], np.float32)
    z = np.array([0.0, 1.0, 0.3, 1.0, 0.0], np.float32)
    sce = kf.nn.sigmoid_cross_entropy_with_logits(labels=z, logits=x)
    wce = kf.nn.weighted_cross_entropy_with_logits(labels=z, logits=x, pos_weight=2.0)
    a, b = _run([sce, wce])
    x64, z64 = x.astype(np.float64), z.astype(np.float64)
    want = np.maximum(x64, 0) - x64 * z64 + np.log1p(np.exp(-np.abs(x64)))
    np.testing.assert_allclose(a, want, rtol=1e-5)
    lw = 1 + z64
    np.testing.assert_allclose(b, (1 - z64) * x64 + lw * (np.log1p(np.exp(-np.abs(x64)))
                                                          + np.maximum(-x64, 0)), rtol=1e-5)
    with pytest.raises(ValueError, match="same shape"):
        kf.nn.sigmoid_cross_entropy_with_logits(labels=kf.zeros([2]), logits=kf.zeros([3]))


def test_l2_loss_is_scalar_half_sum_of_squares():
    t = kf.placeholder(kf.float32, [None, 3])
    loss = kf.nn.l2_loss(t)
    assert loss.shape.as_list() == []
    assert _run(loss, {t: [[1, 2, 3], [1, 1, 1]]}) == pytest.approx(8.5)


# ------------------------------------------------------------------------------ convolution
def test_conv2d_static_shapes():
    x = kf.placeholder(kf.float32, [None, 28, 27, 3])
    w = kf.zeros([5, 5, 3, 8])
    assert kf.nn.conv2d(x, w, [1, 1, 1, 1], "SAME").shape.as_list() == [None, 28, 27, 8]
    assert kf.nn.conv2d(x, w, [1, 2, 2, 1], "SAME").shape.as_list() == [None, 14, 14, 8]
    assert kf.nn.conv2d(x, w, 2, "VALID").shape.as_list() == [None, 12, 12, 8]
    assert kf.nn.conv2d(x, w, 1, "VALID", dilations=2).shape.as_list() == [None, 20, 19, 8]
    assert kf.nn.conv2d(x, filters=w, strides=[1, 1], padding=[[0, 0], [2, 2], [1, 1], [0, 0]]) \
        .shape.as_list() == [None, 28, 25, 8]
    nchw = kf.placeholder(kf.float32, [4, 3, None, 10])
    assert kf.nn.conv2d(nchw, w, [1, 1, 2, 2], "SAME", data_format="NCHW").shape.as_list() == \
        [4, 8, None, 5]
    unknown = kf.nn.conv2d(kf.placeholder(kf.float32), w, 1, "SAME")
    assert unknown.shape.as_list() == [None, None, None, 8]


def test_conv2d_argument_errors():
    x, w = kf.zeros([1, 5, 5, 3]), kf.zeros([3, 3, 3, 2])
    with pytest.raises(ValueError, match="Depth of input"):
        kf.nn.conv2d(x, kf.zeros([3, 3, 4, 2]), 1, "SAME")
    with pytest.raises(ValueError, match="strides should be of length 1, 2 or 4 but was 3"):
        kf.nn.conv2d(x, w, [1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="batch and depth"):
        kf.nn.conv2d(x, w, [2, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="EXPLICIT"):
        kf.nn.conv2d(x, w, 1, "EXPLICIT")
    with pytest.raises(ValueError, match="negative"):
        kf.nn.conv2d(kf.zeros([1, 1, 1, 3]), w, 1, "VALID")
    assert kf.nn.conv2d(kf.zeros([1, 2, 2, 3]), w, 1, "VALID").shape.as_list() == [1, 0, 0, 2]
    with pytest.raises(ValueError, match="Cannot specify both"):
        kf.nn.conv2d(x, w, 1, "SAME", filters=w)


def test_conv2d_runtime_channel_mismatch_names_op():
    x = kf.placeholder(kf.float32)
    y = kf.nn.conv2d(x, kf.zeros([3, 3, 3, 2]), 1, "SAME", name="c1")
    with pytest.raises(errors.InvalidArgumentError, match="Conv2D c1.*depth"):
        _run(y, {x: np.zeros((1, 4, 4, 2), np.float32)})


def test_conv2d_matches_transpose_relationship():
    """<conv2d(x, w), dy> == <x, conv2d_backprop_input(dy)> == <w, backprop_filter(dy)>."""
    rs = np.random.RandomState(3)
    x, w = rs.randn(2, 9, 8, 3), rs.randn(3, 4, 3, 5)
    y = kf.nn.conv2d(x, w, [1, 2, 3, 1], "SAME", dilations=1)
    dy = rs.randn(*y.shape.as_list())
    dx = kf.nn.conv2d_backprop_input([2, 9, 8, 3], w, dy, [1, 2, 3, 1], "SAME")
    dw = kf.nn.conv2d_backprop_filter(x, [3, 4, 3, 5], dy, [1, 2, 3, 1], "SAME")
    yv, dxv, dwv = _run([y, dx, dw])
    np.testing.assert_allclose(np.sum(yv * dy), np.sum(x * dxv), rtol=1e-10)
    np.testing.assert_allclose(np.sum(yv * dy), np.sum(w * dwv), rtol=1e-10)
    assert dx.shape.as_list() == [2, 9, 8, 3] and dw.shape.as_list() == [3, 4, 3, 5]


def test_conv2d_transpose_checks_and_shape():
    v = kf.zeros([1, 4, 4, 6])
    with pytest.raises(ValueError, match="input channels"):
        kf.nn.conv2d_transpose(v, kf.zeros([3, 3, 2, 5]), [1, 8, 8, 2], [1, 2, 2, 1])
    with pytest.raises(ValueError, match="output_shape"):
        kf.nn.conv2d_transpose(v, kf.zeros([3, 3, 2, 6]), [1, 8, 8], [1, 2, 2, 1])
    out = kf.nn.conv2d_transpose(v, kf.zeros([3, 3, 2, 6]), [1, 8, 8, 2], [1, 2, 2, 1])
    assert out.shape.as_list() == [1, 8, 8, 2]


def test_conv1d():
    rs = np.random.RandomState(4)
    x, w = rs.randn(2, 10, 3).astype(np.float32), rs.randn(3, 3, 4).astype(np.float32)
    y = kf.nn.conv1d(x, w, 1, "VALID")
    assert y.shape.as_list() == [2, 8, 4]
    want = np.stack([np.einsum("bkc,kco->bo", x[:, i:i + 3], w) for i in range(8)], 1)
    np.testing.assert_allclose(_run(y), want, rtol=1e-4, atol=1e-5)


def test_conv_kernels_are_marked_expensive_for_large_work():
    from kernflow.kernels.cpu import nn as cpu_nn
    small = [np.zeros((1, 4, 4, 2), np.float32), np.zeros((3, 3, 2, 2), np.float32)]
    big = [np.zeros((8, 64, 64, 32), np.float32), np.zeros((3, 3, 32, 32), np.float32)]
    assert not cpu_nn._conv2d_expensive(small)
    assert cpu_nn._conv2d_expensive(big)


# ---------------------------------------------------------------------------------- pooling
def test_pool_ksize_forms_and_shapes():
    x = kf.placeholder(kf.float32, [None, 7, 6, 3])
    for k in (2, [2], [2, 2], [1, 2, 2, 1]):
        p = kf.nn.max_pool(x, k, k, "VALID")
        assert p.op.get_attr("ksize") == [1, 2, 2, 1]
        assert p.shape.as_list() == [None, 3, 3, 3]
    assert kf.nn.avg_pool(x, 3, 2, "SAME").shape.as_list() == [None, 4, 3, 3]
    assert kf.nn.max_pool(None, input=x, ksize=2, strides=1, padding="SAME").shape.as_list() \
        == [None, 7, 6, 3]
    nchw = kf.nn.max_pool(kf.placeholder(kf.float32, [2, 3, 8, 8]), 2, 2, "VALID",
                          data_format="NCHW")
    assert nchw.op.get_attr("ksize") == [1, 1, 2, 2] and nchw.shape.as_list() == [2, 3, 4, 4]
    with pytest.raises(ValueError, match="ksize should be of length 1, 2 or 4 but was 3"):
        kf.nn.max_pool(x, [1, 2, 2], 1, "SAME")
    with pytest.raises(ValueError, match="batch dimension"):
        kf.nn.avg_pool(x, [2, 2, 2, 1], 1, "SAME")
    with pytest.raises(ValueError, match="ksize cannot be zero"):
        kf.nn.max_pool(x, 0, 1, "SAME")
    with pytest.raises(ValueError, match="padding"):
        kf.nn.max_pool(x, 2, 1, "FULL")


def test_avg_pool_same_averages_valid_elements_only():
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    v = _run(kf.nn.avg_pool(x, 3, 2, "SAME"))
    # One row/col of padding, after the input: window (1, 1) covers rows and cols 2-3 only.
    assert v.shape == (1, 2, 2, 1)
    assert v[0, 0, 0, 0] == pytest.approx(np.mean([0, 1, 2, 4, 5, 6, 8, 9, 10]))
    assert v[0, 1, 1, 0] == pytest.approx(np.mean([10, 11, 14, 15]))


def test_max_pool_grad_routes_to_first_max():
    x = np.array([[1, 3], [3, 2]], np.float32).reshape(1, 2, 2, 1)
    from kernflow.core.ops import nn_ops_conv
    y = kf.nn.max_pool(x, 2, 2, "VALID")
    g = nn_ops_conv.max_pool_grad(x, y, [[[[5.0]]]], [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    np.testing.assert_array_equal(_run(g).reshape(2, 2), [[0, 5], [0, 0]])


def test_max_pool_grad_grad_shapes_and_errors():
    from kernflow.core.ops import nn_ops_conv
    x = kf.placeholder(kf.float32, [None, 5, 4, 2])
    y = kf.nn.max_pool(x, 2, 2, "SAME")
    gg = nn_ops_conv.max_pool_grad_grad(x, y, kf.placeholder(kf.float32, [3, None, None, 2]),
                                        [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
    assert gg.op.type == "MaxPoolGradGrad" and gg.op.name == "MaxPoolGradGrad"
    assert gg.shape.as_list() == [3, 3, 2, 2]
    with pytest.raises(ValueError, match="orig_output"):
        nn_ops_conv.max_pool_grad_grad(x, kf.placeholder(kf.float32, [None, 2, 2, 2]), x,
                                       [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
    xv = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    bad = nn_ops_conv.max_pool_grad_grad(
        kf.placeholder(kf.float32), kf.placeholder(kf.float32), kf.placeholder(kf.float32),
        [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    with pytest.raises(errors.InvalidArgumentError, match="MaxPoolGradGrad.*grad has shape"):
        _run(bad, {bad.op.inputs[0]: xv, bad.op.inputs[1]: np.zeros((1, 2, 2, 1), np.float32),
                   bad.op.inputs[2]: np.zeros((1, 2, 2, 1), np.float32)})


# ------------------------------------------------------------------------------------ top-k
def test_top_k_ties_shapes_and_errors():
    x = kf.constant([[1.0, 3.0, 3.0, 2.0, 3.0]])
    vals, idx = kf.nn.top_k(x, 3)
    assert idx.dtype == kf.int32 and vals.shape.as_list() == [1, 3]
    v, i = _run([vals, idx])
    np.testing.assert_array_equal(i, [[1, 2, 4]])
    np.testing.assert_array_equal(v, [[3, 3, 3]])
    with pytest.raises(ValueError, match="last dimension >= k"):
        kf.nn.top_k(x, 6)
    k = kf.placeholder(kf.int32, [])
    dyn = kf.nn.top_k(kf.placeholder(kf.float32, [None, 4]), k)[0]
    assert dyn.shape.as_list() == [None, None]
    with pytest.raises(errors.InvalidArgumentError, match="at least k columns"):
        _run(kf.nn.top_k(x, k)[0], {k: 7})


def test_in_top_k_ties_and_non_finite():
    pred = kf.constant([[0.1, 0.3, 0.3, 0.2], [0.1, np.inf, 0.2, 0.3], [0.5, 0.2, 0.2, 0.1]])
    got = _run(kf.nn.in_top_k(pred, [2, 3, 2], 1))
    np.testing.assert_array_equal(got, [True, False, False])
    got2 = _run(kf.nn.in_top_k(pred, kf.constant([1, 0, 2], kf.int64), 2))
    np.testing.assert_array_equal(got2, [True, False, True])
    assert kf.nn.in_top_k(pred, [0, 0, 0], 1).shape.as_list() == [3]


# ------------------------------------------------------------------------------- composites
def test_moments_and_keepdims():
    x = np.random.RandomState(5).randn(4, 3, 2).astype(np.float32)
    m, v = kf.nn.moments(kf.constant(x), [0, 1])
    mk, vk = kf.nn.moments(kf.constant(x), [0, 1], keep_dims=True)
    assert m.shape.as_list() == [2] and mk.shape.as_list() == [1, 1, 2]
    mv, vv, mkv = _run([m, v, mk])
    np.testing.assert_allclose(mv, x.mean((0, 1)), rtol=1e-5)
    np.testing.assert_allclose(vv, x.var((0, 1)), rtol=1e-4)
    np.testing.assert_allclose(mkv.reshape(-1), mv)
    h = kf.nn.moments(kf.constant(x.astype(np.float16)), [0])[0]
    assert h.dtype == kf.float16


def test_batch_normalization_matches_formula():
    rs = np.random.RandomState(6)
    x = rs.randn(5, 3).astype(np.float32)
    mean, var = x.mean(0), x.var(0)
    off, sc = rs.randn(3).astype(np.float32), rs.rand(3).astype(np.float32)
    y = kf.nn.batch_normalization(x, mean, var, off, sc, 1e-3)
    y2 = kf.nn.batch_normalization(x, mean, var, None, None, 1e-3)
    a, b = _run([y, y2])
    np.testing.assert_allclose(a, sc * (x - mean) / np.sqrt(var + 1e-3) + off, rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(b, (x - mean) / np.sqrt(var + 1e-3), rtol=1e-4, atol=1e-5)


def test_dropout_scaling_identity_and_errors():
    x = kf.ones([200, 50])
    assert kf.nn.dropout(x, keep_prob=1.0) is x
    assert kf.nn.dropout(x, rate=0.0) is x
    v = _run(kf.nn.dropout(x, keep_prob=0.25, seed=3))
    kept = v[v != 0]
    np.testing.assert_allclose(kept, 4.0)
    assert 0.2 < kept.size / v.size < 0.3
    rate = kf.placeholder(kf.float32, [])
    t = kf.nn.dropout(x, rate=rate, seed=1)
    assert t.shape.as_list() == [200, 50]
    w = _run(t, {rate: 0.5})
    np.testing.assert_allclose(w[w != 0], 2.0)
    ns = _run(kf.nn.dropout(x, 0.5, noise_shape=[200, 1], seed=4))
    assert np.all((ns == 0).all(1) | (ns == 2).all(1))
    with pytest.raises(ValueError, match="range"):
        kf.nn.dropout(x, rate=1.0)
    with pytest.raises(ValueError, match="floating point"):
        kf.nn.dropout(kf.constant([1, 2]), rate=0.5)
    with pytest.raises(ValueError, match="provide a rate"):
        kf.nn.dropout(x)


def test_l2_normalize():
    x = np.array([[3.0, 4.0], [0.0, 0.0]], np.float32)
    v = _run(kf.nn.l2_normalize(x, axis=1))
    np.testing.assert_allclose(v, [[0.6, 0.8], [0.0, 0.0]], rtol=1e-6)
    np.testing.assert_allclose(_run(kf.nn.l2_normalize(x, dim=0)), [[1.0, 1.0], [0.0, 0.0]])


def test_embedding_lookup_single_and_partitioned():
    table = np.arange(22, dtype=np.float32).reshape(11, 2)
    ids = np.array([[0, 3], [10, 7]], np.int32)
    single = kf.nn.embedding_lookup(kf.Variable(table), ids)
    assert single.shape.as_list() == [2, 2, 2]
    # "mod": row i lives in partition i % 3 at position i // 3.
    mod_parts = [table[p::3] for p in range(3)]
    # "div": 11 ids over 3 partitions -> sizes 4, 4, 3.
    div_parts = [table[0:4], table[4:8], table[8:11]]
    mod = kf.nn.embedding_lookup([kf.constant(p) for p in mod_parts], ids)
    div = kf.nn.embedding_lookup([kf.Variable(p) for p in div_parts], ids,
                                 partition_strategy="div")
    assert mod.shape.as_list() == [2, 2, 2]
    for v in _run([single, mod, div]):
        np.testing.assert_array_equal(v, table[ids])
    with pytest.raises(ValueError, match="Need at least one param"):
        kf.nn.embedding_lookup([], ids)
    with pytest.raises(ValueError, match="partition strategy"):
        kf.nn.embedding_lookup(mod_parts, ids, partition_strategy="xyz")


def test_embedding_lookup_max_norm():
    table = np.array([[3.0, 4.0], [0.3, 0.4]], np.float32)
    v = _run(kf.nn.embedding_lookup(table, [0, 1], max_norm=1.0))
    np.testing.assert_allclose(v, [[0.6, 0.8], [0.3, 0.4]], rtol=1e-6)


def test_zero_fraction():
    assert _run(kf.nn.zero_fraction(kf.constant([0, 1, 0, 2]))) == pytest.approx(0.5)
