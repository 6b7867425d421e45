"""kf.layers (kernflow/core/layers/): values against numpy, TF1 naming, reuse and collections."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core import layers


@pytest.fixture(autouse=True)
def graph():
    with kf.Graph().as_default() as g:
        yield g


def run(fetches, feed=None):
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        return sess.run(fetches, feed)


def np_conv2d(x, w, stride=1, padding="VALID"):
    kh, kw = w.shape[:2]
    if padding == "SAME":
        oh, ow = -(-x.shape[1] // stride), -(-x.shape[2] // stride)
        ph = max((oh - 1) * stride + kh - x.shape[1], 0)
        pw = max((ow - 1) * stride + kw - x.shape[2], 0)
        x = np.pad(x, [(0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)])
    oh = (x.shape[1] - kh) // stride + 1
    ow = (x.shape[2] - kw) // stride + 1
    out = np.zeros((x.shape[0], oh, ow, w.shape[3]), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :]
            out[:, i, j, :] = np.tensordot(patch, w, axes=([1, 2, 3], [0, 1, 2]))
    return out


# ------------------------------------------------------------------------------ dense
def test_dense_values_names_and_static_shape():
    x = kf.placeholder(kf.float32, [None, 3])
    y = layers.dense(x, 4, activation=kf.nn.relu, bias_initializer=kf.constant_initializer(0.5))
    assert y.shape.as_list() == [None, 4]
    names = [v.op.name for v in kf.trainable_variables()]
    assert names == ["dense/kernel", "dense/bias"]
    xv = np.random.RandomState(0).randn(5, 3).astype(np.float32)
    out, k = run([y, kf.trainable_variables()[0]], {x: xv})
    np.testing.assert_allclose(out, np.maximum(xv @ k + 0.5, 0), rtol=1e-5, atol=1e-6)


def test_dense_glorot_uniform_default_range():
    layers.dense(kf.placeholder(kf.float32, [None, 30]), 20)
    k = run(kf.trainable_variables()[0])
    limit = np.sqrt(6.0 / 50)
    assert np.abs(k).max() <= limit and np.abs(k).max() > limit * 0.8


def test_dense_rank3_input():
    x = kf.placeholder(kf.float32, [None, 2, 3])
    layer = layers.Dense(5, use_bias=False)
    y = layer(x)
    assert y.shape.as_list() == [None, 2, 5]
    xv = np.random.RandomState(1).randn(4, 2, 3).astype(np.float32)
    out, k = run([y, layer.kernel], {x: xv})
    np.testing.assert_allclose(out, xv @ k, rtol=1e-5, atol=1e-6)


def test_dense_requires_defined_last_dim():
    with pytest.raises(ValueError, match="last dimension"):
        layers.dense(kf.placeholder(kf.float32, [None, None]), 2)


def test_unnamed_layers_get_unique_scopes():
    x = kf.placeholder(kf.float32, [None, 3])
    layers.dense(x, 2)
    layers.dense(x, 2)
    layers.conv2d(kf.placeholder(kf.float32, [None, 4, 4, 1]), 2, 3)
    assert [v.op.name for v in kf.global_variables()] == [
        "dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias", "conv2d/kernel",
        "conv2d/bias"]


def test_reuse_argument_and_variable_scope_reuse():
    x = kf.placeholder(kf.float32, [None, 3])
    a = layers.dense(x, 2, name="fc")
    b = layers.dense(x, 2, name="fc", reuse=True)
    with kf.variable_scope("outer"):
        c = layers.dense(x, 2, name="fc")
    with kf.variable_scope("outer", reuse=True):
        d = layers.dense(x, 2, name="fc")
    assert [v.op.name for v in kf.global_variables()] == [
        "fc/kernel", "fc/bias", "outer/fc/kernel", "outer/fc/bias"]
    with pytest.raises(ValueError):
        layers.dense(x, 2, name="fc")  # exists and no reuse
    xv = np.ones((1, 3), np.float32)
    av, bv, cv, dv = run([a, b, c, d], {x: xv})
    np.testing.assert_allclose(av, bv)
    np.testing.assert_allclose(cv, dv)


def test_layer_object_shares_variables_across_calls():
    layer = layers.Dense(3, name="shared")
    x1 = kf.placeholder(kf.float32, [None, 2])
    x2 = kf.placeholder(kf.float32, [None, 2])
    y1, y2 = layer(x1), layer(x2)
    assert len(kf.global_variables()) == 2
    assert layer.scope_name == "shared"
    assert y1.op.name.startswith("shared/") and y2.op.name.startswith("shared/")
    v = np.ones((1, 2), np.float32)
    a, b = run([y1, y2], {x1: v, x2: v})
    np.testing.assert_allclose(a, b)
    with pytest.raises(ValueError, match="incompatible"):
        layer(kf.placeholder(kf.float32, [None, 4]))


def test_layer_properties_and_unique_name():
    first = layers.Dense(2)
    assert first.name == "dense_1"  # TF1: unique_object_name is not zero-based
    first(kf.placeholder(kf.float32, [None, 3]))
    assert first.scope_name == "dense"
    assert [v.op.name for v in first.trainable_weights] == ["dense/kernel", "dense/bias"]
    assert first.non_trainable_weights == [] and len(first.variables) == 2
    assert first.count_params() == 8


def test_trainable_false():
    layers.dense(kf.placeholder(kf.float32, [None, 3]), 2, trainable=False)
    assert kf.trainable_variables() == []
    assert len(kf.global_variables()) == 2


# ------------------------------------------------------------------------------ regularizers
def test_regularization_losses_collection():
    x = kf.placeholder(kf.float32, [None, 3])
    reg = lambda w: 0.1 * kf.reduce_sum(kf.square(w))  # noqa: E731
    y = layers.dense(x, 2, kernel_regularizer=reg, bias_regularizer=reg,
                     bias_initializer=kf.ones_initializer(), name="r")
    layers.dense(x, 2, kernel_regularizer=reg, name="r", reuse=True)  # no second loss
    losses = kf.get_collection(kf.GraphKeys.REGULARIZATION_LOSSES)
    assert len(losses) == 2
    assert losses[0].op.name.startswith("r/kernel/Regularizer/")
    lv, k = run([losses, kf.trainable_variables()[0]])
    np.testing.assert_allclose(lv[0], 0.1 * (k ** 2).sum(), rtol=1e-5)
    np.testing.assert_allclose(lv[1], 0.2, rtol=1e-5)
    del y


def test_activity_regularizer_averaged_over_batch():
    x = kf.placeholder(kf.float32, [None, 2])
    layer = layers.Dense(2, use_bias=False, kernel_initializer=kf.ones_initializer(),
                         activity_regularizer=lambda o: kf.reduce_sum(o))
    layer(x)
    (loss,) = layer.losses
    assert loss in kf.get_collection(kf.GraphKeys.REGULARIZATION_LOSSES)
    np.testing.assert_allclose(run(loss, {x: np.ones((4, 2), np.float32)}), 16.0 / 4)


# ------------------------------------------------------------------------------ convolutions
@pytest.mark.parametrize("padding,stride", [("valid", 1), ("SAME", 2), ("Same", 1)])
def test_conv2d_against_numpy(padding, stride):
    x = kf.placeholder(kf.float32, [None, 6, 5, 2])
    layer = layers.Conv2D(3, (3, 2), strides=stride, padding=padding,
                          bias_initializer=kf.constant_initializer(0.25))
    y = layer(x)
    xv = np.random.RandomState(2).randn(2, 6, 5, 2).astype(np.float32)
    out, k = run([y, layer.kernel], {x: xv})
    want = np_conv2d(xv, k, stride, padding.upper()) + 0.25
    assert y.shape.as_list() == [None] + list(want.shape[1:])
    assert k.shape == (3, 2, 2, 3)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_conv2d_channels_first_matches_channels_last():
    xv = np.random.RandomState(3).randn(2, 5, 5, 2).astype(np.float32)
    init = kf.constant_initializer(np.random.RandomState(4).randn(3, 3, 2, 4))
    a = layers.conv2d(xv, 4, 3, kernel_initializer=init, bias_initializer=kf.ones_initializer())
    b = layers.conv2d(np.transpose(xv, [0, 3, 1, 2]), 4, 3, data_format="channels_first",
                      kernel_initializer=init, bias_initializer=kf.ones_initializer())
    assert b.shape.as_list() == [2, 4, 3, 3]
    av, bv = run([a, b])
    np.testing.assert_allclose(np.transpose(bv, [0, 2, 3, 1]), av, rtol=1e-4, atol=1e-5)


def test_conv1d_against_numpy_with_dilation():
    x = kf.placeholder(kf.float32, [None, 9, 2])
    layer = layers.Conv1D(3, 3, dilation_rate=2, use_bias=False)
    y = layer(x)
    assert y.shape.as_list() == [None, 5, 3]
    xv = np.random.RandomState(5).randn(2, 9, 2).astype(np.float32)
    out, k = run([y, layer.kernel], {x: xv})
    want = np.stack([sum(xv[:, t + 2 * i, :] @ k[i] for i in range(3)) for t in range(5)], 1)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_conv2d_transpose_is_conv_gradient():
    x = kf.placeholder(kf.float32, [None, 3, 3, 2])
    layer = layers.Conv2DTranspose(4, 3, strides=2, use_bias=False)
    y = layer(x)
    assert y.shape.as_list() == [None, 7, 7, 4]
    assert layer.kernel.shape.as_list() == [3, 3, 4, 2]
    xv = np.random.RandomState(6).randn(2, 3, 3, 2).astype(np.float32)
    out, k = run([y, layer.kernel], {x: xv})
    want = np.zeros((2, 7, 7, 4))
    for i in range(3):
        for j in range(3):
            want[:, 2 * i:2 * i + 3, 2 * j:2 * j + 3, :] += np.einsum(
                "nc,hwoc->nhwo", xv[:, i, j, :], k)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    same = layers.conv2d_transpose(x, 1, 3, strides=2, padding="same")
    assert same.shape.as_list() == [None, 6, 6, 1]
    assert run(same, {x: xv}).shape == (2, 6, 6, 1)


def test_separable_conv2d_against_numpy():
    x = kf.placeholder(kf.float32, [None, 5, 5, 3])
    layer = layers.SeparableConv2D(4, 3, depth_multiplier=2, use_bias=False)
    y = layer(x)
    assert y.shape.as_list() == [None, 3, 3, 4]
    assert [v.op.name for v in layer.weights] == ["separable_conv2d/depthwise_kernel",
                                                   "separable_conv2d/pointwise_kernel"]
    xv = np.random.RandomState(7).randn(2, 5, 5, 3).astype(np.float32)
    out, dw, pw = run([y, layer.depthwise_kernel, layer.pointwise_kernel], {x: xv})
    mid = np.concatenate([np_conv2d(xv[..., c:c + 1], dw[:, :, c:c + 1, :]) for c in range(3)],
                         -1)
    np.testing.assert_allclose(out, mid @ pw[0, 0], rtol=1e-4, atol=1e-5)


def test_separable_conv1d_shapes():
    y = layers.separable_conv1d(kf.placeholder(kf.float32, [None, 8, 2]), 3, 3, strides=2,
                                padding="same")
    assert y.shape.as_list() == [None, 4, 3]
    assert run(y, {"Placeholder:0": np.ones((1, 8, 2), np.float32)}).shape == (1, 4, 3)


# ------------------------------------------------------------------------------ pooling, flatten
def test_pooling_2d_and_1d():
    xv = np.arange(32, dtype=np.float32).reshape(1, 4, 4, 2)
    mp = layers.max_pooling2d(xv, 2, 2)
    ap = layers.average_pooling2d(xv, 2, 2)
    want_max = xv.reshape(1, 2, 2, 2, 2, 2).max(axis=(2, 4))
    want_avg = xv.reshape(1, 2, 2, 2, 2, 2).mean(axis=(2, 4))
    seq = np.arange(14, dtype=np.float32).reshape(1, 7, 2)
    mp1 = layers.max_pooling1d(seq, 2, 2)
    ap1 = layers.average_pooling1d(seq, 3, 2, padding="same")
    assert mp1.shape.as_list() == [1, 3, 2] and ap1.shape.as_list() == [1, 4, 2]
    m, a, m1, a1 = run([mp, ap, mp1, ap1])
    np.testing.assert_allclose(m, want_max)
    np.testing.assert_allclose(a, want_avg)
    np.testing.assert_allclose(m1[0, :, 0], [2, 6, 10])
    np.testing.assert_allclose(a1[0, :, 0], [1, 4, 8, 11])  # SAME: padding not counted


def test_pooling_channels_first():
    xv = np.random.RandomState(8).randn(2, 3, 4, 4).astype(np.float32)
    y = layers.MaxPooling2D(2, 2, data_format="channels_first")(xv)
    assert y.shape.as_list() == [2, 3, 2, 2]
    np.testing.assert_allclose(run(y), xv.reshape(2, 3, 2, 2, 2, 2).max(axis=(3, 5)))


def test_flatten():
    x = kf.placeholder(kf.float32, [None, 2, 3])
    y = layers.flatten(x)
    assert y.shape.as_list() == [None, 6]
    xv = np.arange(12, dtype=np.float32).reshape(2, 2, 3)
    np.testing.assert_allclose(run(y, {x: xv}), xv.reshape(2, 6))
    cf = layers.flatten(x, data_format="channels_first")
    np.testing.assert_allclose(run(cf, {x: xv}), xv.transpose(0, 2, 1).reshape(2, 6))


# ------------------------------------------------------------------------------ dropout
def test_dropout_scaling_and_identity():
    x = kf.ones([200, 50])
    off = layers.dropout(x, rate=0.3)
    on = layers.dropout(x, rate=0.3, training=True)
    t = kf.placeholder(kf.bool, [])
    dyn = layers.Dropout(0.3)(x, training=t)
    o, n = run([off, on])
    np.testing.assert_allclose(o, 1.0)
    assert set(np.unique(n)).issubset({0.0, np.float32(1 / 0.7)})
    assert 0.25 < (n == 0).mean() < 0.35
    with kf.Session() as sess:
        np.testing.assert_allclose(sess.run(dyn, {t: False}), 1.0)
        assert (sess.run(dyn, {t: True}) == 0).any()


# ------------------------------------------------------------------------------ batch norm
@pytest.mark.parametrize("shape,axis", [((8, 3), -1), ((4, 3, 3, 2), -1), ((4, 2, 3, 3), 1),
                                        ((4, 3, 2), 1)])
def test_batch_norm_training_and_inference(shape, axis):
    xv = np.random.RandomState(9).randn(*shape).astype(np.float32) * 2 + 1
    x = kf.placeholder(kf.float32, shape)
    t = kf.placeholder(kf.bool, [])
    layer = layers.BatchNormalization(axis=axis, momentum=0.9, epsilon=1e-3)
    y = layer(x, training=t)
    assert y.shape.as_list() == list(shape)
    names = [v.op.name for v in layer.weights]
    assert names == ["batch_normalization/gamma", "batch_normalization/beta",
                     "batch_normalization/moving_mean", "batch_normalization/moving_variance"]
    assert [v.op.name for v in kf.trainable_variables()] == names[:2]
    updates = kf.get_collection(kf.GraphKeys.UPDATE_OPS)
    assert len(updates) == 2 and layer.updates == updates
    ax = axis % len(shape)
    red = tuple(i for i in range(len(shape)) if i != ax)
    bshape = [shape[i] if i == ax else 1 for i in range(len(shape))]
    mean, var = xv.mean(red), xv.var(red)
    n = xv.size / shape[ax]
    var_update = var * n / (n - 1) if layer.fused else var
    assert layer.fused == (len(shape) == 4)
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        out = sess.run(y, {x: xv, t: False})  # moving stats are 0 / 1
        np.testing.assert_allclose(out, xv / np.sqrt(1 + 1e-3), rtol=1e-4, atol=1e-5)
        out, _ = sess.run([y, updates], {x: xv, t: True})
        want = (xv - mean.reshape(bshape)) / np.sqrt(var.reshape(bshape) + 1e-3)
        np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-4)
        mm, mv = sess.run([layer.moving_mean, layer.moving_variance])
        np.testing.assert_allclose(mm, 0.1 * mean, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(mv, 0.9 + 0.1 * var_update, rtol=1e-4, atol=1e-5)
        sess.run(updates, {x: xv, t: False})  # training=False: momentum 1, no change
        np.testing.assert_allclose(sess.run(layer.moving_mean), mm, rtol=1e-6)


def test_batch_norm_static_training_false_adds_no_updates():
    x = kf.placeholder(kf.float32, [None, 3])
    layers.batch_normalization(x, training=False)
    assert kf.get_collection(kf.GraphKeys.UPDATE_OPS) == []
    layers.batch_normalization(x, training=True, center=False, scale=False, name="bn")
    assert len(kf.get_collection(kf.GraphKeys.UPDATE_OPS)) == 2
    assert [v.op.name for v in kf.global_variables()][-2:] == ["bn/moving_mean",
                                                               "bn/moving_variance"]


def test_batch_norm_multi_axis():
    xv = np.random.RandomState(10).randn(5, 2, 3).astype(np.float32)
    y = layers.batch_normalization(xv, axis=[1, 2], training=True, epsilon=0.0)
    want = (xv - xv.mean(0)) / np.sqrt(xv.var(0))
    np.testing.assert_allclose(run(y), want, rtol=1e-3, atol=1e-4)


# ------------------------------------------------------------------------------ training
def test_tiny_model_trains():
    kf.set_random_seed(1)
    rng = np.random.RandomState(11)
    xv = rng.randn(64, 4, 4, 1).astype(np.float32)
    yv = (xv.sum(axis=(1, 2, 3)) > 0).astype(np.float32)[:, None]
    x = kf.placeholder(kf.float32, [None, 4, 4, 1])
    y = kf.placeholder(kf.float32, [None, 1])
    t = kf.placeholder_with_default(True, [])
    h = layers.conv2d(x, 4, 3, padding="same", activation=kf.nn.relu)
    h = layers.batch_normalization(h, training=t)
    h = layers.max_pooling2d(h, 2, 2)
    h = layers.dropout(layers.flatten(h), 0.1, training=t)
    logits = layers.dense(h, 1, kernel_regularizer=lambda w: 1e-4 * kf.reduce_sum(w * w))
    loss = kf.reduce_mean(kf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits))
    loss += kf.add_n(kf.get_collection(kf.GraphKeys.REGULARIZATION_LOSSES))
    with kf.control_dependencies(kf.get_collection(kf.GraphKeys.UPDATE_OPS)):
        train = kf.train.AdamOptimizer(0.05).minimize(loss)
    grads = kf.gradients(loss, kf.trainable_variables())
    assert all(g is not None for g in grads)
    with kf.Session() as sess:
        sess.run(kf.global_variables_initializer())
        first = sess.run(loss, {x: xv, y: yv, t: False})
        for _ in range(100):
            sess.run(train, {x: xv, y: yv})
        last = sess.run(loss, {x: xv, y: yv, t: False})
    assert last < first * 0.7


def test_kernel_initializer_defaults_to_variable_scope_initializer():
    with kf.variable_scope("s", initializer=kf.constant_initializer(3.0)):
        layer = layers.Dense(2, name="d")
        layer(kf.placeholder(kf.float32, [None, 2]))
    k, b = run([layer.kernel, layer.bias])
    np.testing.assert_allclose(k, 3.0)
    np.testing.assert_allclose(b, 0.0)  # the bias initializer is zeros explicitly, as TF1
    assert layer.kernel.op.name == "s/d/kernel"


def test_custom_getter_of_enclosing_scope_is_used():
    calls = []

    def getter(getter, name, *args, **kwargs):
        calls.append(name)
        return getter(name, *args, **kwargs)
    with kf.variable_scope("g", custom_getter=getter):
        layers.dense(kf.placeholder(kf.float32, [None, 2]), 2)
    assert calls == ["g/dense/kernel", "g/dense/bias"]


def test_partitioned_kernel_under_scope_partitioner():
    x = kf.placeholder(kf.float32, [None, 4])
    with kf.variable_scope("p", partitioner=kf.fixed_size_partitioner(2)):
        layer = layers.Dense(3, kernel_regularizer=lambda w: kf.reduce_sum(kf.square(w)))
        y = layer(x)
    assert [v.op.name for v in kf.global_variables()][:2] == ["p/dense/kernel/part_0",
                                                              "p/dense/kernel/part_1"]
    assert len(kf.get_collection(kf.GraphKeys.REGULARIZATION_LOSSES)) == 1
    assert layer.count_params() == 15
    assert run(y, {x: np.ones((1, 4), np.float32)}).shape == (1, 3)
