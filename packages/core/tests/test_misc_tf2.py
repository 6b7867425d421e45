"""GradientTape, Module, function, conv, approx_top_k and the TypeSpecs, in graph mode (TF-observed
behaviour noted where it matters)."""

import numpy as np
import pytest

import kernflow.core as kf


def _run(fetches, feed=None):
    with kf.Session() as s:
        s.run(kf.global_variables_initializer())
        return s.run(fetches, feed)


def test_tape_differentiates_recorded_ops_and_watches_trainable_variables():
    with kf.Graph().as_default():
        x = kf.placeholder(kf.float32, [3])
        w = kf.Variable([1., 2., 3.])
        z = x * 2.                                  # built before the tape: not recorded
        with kf.GradientTape() as tape:
            y = kf.reduce_sum(z * w)
        gw = tape.gradient(y, w)
        assert tape.watched_variables() == (w,)
        with kf.GradientTape() as tape:
            tape.watch(x)
            y = kf.reduce_sum(z * w)
        # TF: x is watched but its only path runs through z, built outside the tape.
        assert tape.gradient(y, x) is None
        with kf.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y2 = kf.reduce_sum(x * x * w)
            with tape.stop_recording():
                c = x * 10.                          # not recorded: contributes no gradient
            y3 = kf.reduce_sum(c * x)
        gx, gw2 = tape.gradient(y2, [x, w])
        g3 = tape.gradient(y3, x)
        jac = tape.jacobian(x * w, x)
        z0 = tape.gradient(y2, kf.constant(1.), unconnected_gradients="zero")
        got = _run([gw, gx, gw2, g3, jac, z0], {x: [1., 2., 3.]})
    np.testing.assert_allclose(got[0], [2., 4., 6.])            # dy/dw = z = 2x
    np.testing.assert_allclose(got[1], [2., 8., 18.])
    np.testing.assert_allclose(got[2], [1., 4., 9.])
    np.testing.assert_allclose(got[3], [10., 20., 30.])      # d(c*x)/dx with c constant
    np.testing.assert_allclose(got[4], np.diag([1., 2., 3.]))
    assert got[5] == 0.0


def test_non_persistent_tape_gives_one_set_of_gradients():
    with kf.Graph().as_default():
        w = kf.Variable(2.)
        with kf.GradientTape() as tape:
            y = w * w
        tape.gradient(y, w)
        with pytest.raises(RuntimeError, match="non-persistent"):
            tape.gradient(y, w)


def test_module_collects_variables_and_submodules_under_its_name_scope():
    class Dense(kf.Module):
        def __init__(self, n, name=None):
            super().__init__(name=name)
            with self.name_scope:
                self.w = kf.Variable(np.ones([2, n], np.float32), name="w")
                self.b = kf.Variable(np.zeros([n], np.float32), name="b", trainable=False)

        @kf.Module.with_name_scope
        def __call__(self, x):
            return kf.matmul(x, self.w) + self.b

    class MLP(kf.Module):
        def __init__(self):
            super().__init__()
            self.layers = [Dense(2, name="d1"), Dense(2, name="d2")]

    with kf.Graph().as_default():
        m = MLP()
        assert m.name == "mlp"
        # TF walks attributes in name order.
        assert [v.name for v in m.variables] == ["d1/b:0", "d1/w:0", "d2/b:0", "d2/w:0"]
        assert [v.name for v in m.trainable_variables] == ["d1/w:0", "d2/w:0"]
        assert [s.name for s in m.submodules] == ["d1", "d2"]
        y = m.layers[0](kf.ones([1, 2]))
        assert y.op.name.startswith("d1/")
        np.testing.assert_allclose(_run(y), [[2., 2.]])
    with pytest.raises(ValueError, match="valid module name"):
        kf.Module(name="not valid!")


def test_function_inlines_and_checks_its_input_signature():
    with kf.Graph().as_default():
        @kf.function(input_signature=[kf.TensorSpec([None], kf.float32)])
        def double(t):
            return t * 2.

        @kf.function
        def add(a, b):
            return a + b
        assert double.python_function(3.) == 6.
        got = _run([double([1., 2.]), add(1., 2.)])
        np.testing.assert_allclose(got[0], [2., 4.])
        assert got[1] == 3.0
        with pytest.raises(ValueError, match="input_signature"):
            double(kf.zeros([2, 2]))
        with pytest.raises(TypeError, match="positional"):
            double(1., 2.)
        assert double.get_concrete_function().input_signature == double.input_signature


def test_conv_with_batch_dims_groups_and_channels_first():
    rng = np.random.RandomState(0)
    x = rng.rand(2, 3, 8, 8, 4).astype(np.float32)
    w = rng.rand(3, 3, 2, 6).astype(np.float32)
    with kf.Graph().as_default():
        y = kf.conv(x, w, [1, 1, 1, 1], "SAME", batch_dims=2, groups=2)
        flat = x.reshape(6, 8, 8, 4)
        ref = kf.concat([kf.nn.conv2d(flat[..., :2], w[..., :3], [1, 1, 1, 1], "SAME"),
                         kf.nn.conv2d(flat[..., 2:], w[..., 3:], [1, 1, 1, 1], "SAME")], -1)
        xf = x[0].transpose(0, 3, 1, 2)                      # NCHW
        w1 = rng.rand(3, 3, 4, 5).astype(np.float32)
        yf = kf.conv(xf, w1, [1, 1, 2, 2], "VALID", data_format="CHANNELS_FIRST")
        reff = kf.nn.conv2d(x[0], w1, [1, 2, 2, 1], "VALID")
        x1 = rng.rand(2, 10, 3).astype(np.float32)
        w1d = rng.rand(3, 3, 4).astype(np.float32)
        y1 = kf.conv(x1, w1d, [1, 1, 1], "SAME")
        ref1 = kf.nn.conv1d(x1, w1d, 1, "SAME")
        a, b, c, d, e, f = _run([y, ref, yf, reff, y1, ref1])
    assert a.shape == (2, 3, 8, 8, 6)
    np.testing.assert_allclose(a.reshape(b.shape), b, rtol=1e-5)
    np.testing.assert_allclose(c, d.transpose(0, 3, 1, 2), rtol=1e-5)
    np.testing.assert_allclose(e, f, rtol=1e-5)
    with pytest.raises(ValueError, match="rank"):
        kf.conv(np.zeros([2, 4, 4, 1], np.float32), np.zeros([3, 3, 1, 1], np.float32), [1, 1, 1, 1],
                "SAME", batch_dims=2)


def test_approx_top_k_is_exact():
    x = np.array([[3., 1., 2.], [0., 5., 4.]], np.float32)
    with kf.Graph().as_default():
        got = _run([kf.approx_top_k(x, 2), kf.approx_top_k(x, 2, reduction_dimension=0, is_max_k=False)])
    np.testing.assert_array_equal(got[0][0], [[3., 2.], [5., 4.]])
    np.testing.assert_array_equal(got[0][1], [[0, 2], [1, 2]])
    np.testing.assert_array_equal(got[1][0], [[0., 1., 2.], [3., 5., 4.]])
    np.testing.assert_array_equal(got[1][1], [[1, 0, 0], [0, 1, 1]])



def test_nn_approx_max_k_and_min_k_are_exact_with_tf_gradients():
    x = np.random.RandomState(0).permutation(60).reshape(3, 4, 5).astype(np.float64)
    with kf.Graph().as_default():
        xt = kf.constant(x)
        vmax, imax = kf.nn.approx_max_k(xt, 3, recall_target=0.5, aggregate_to_topk=False)
        vmin, imin = kf.nn.approx_min_k(xt, 2, reduction_dimension=1)
        assert vmax.shape.as_list() == [3, 4, 3] and vmin.shape.as_list() == [3, 2, 5]
        assert imin.dtype == kf.int32
        got = _run([vmax, imax, vmin, imin])
        errs = [kf.test.compute_gradient_error(xt, x.shape, v, v.shape.as_list(), x_init_value=x)
                for v in (vmax, vmin)]
        g = _run(kf.gradients(vmin, xt)[0])
    np.testing.assert_array_equal(got[0], -np.sort(-x, -1)[..., :3])
    np.testing.assert_array_equal(got[1], np.argsort(-x, -1)[..., :3])
    np.testing.assert_array_equal(got[2], np.sort(x, 1)[:, :2])
    np.testing.assert_array_equal(got[3], np.argsort(x, 1)[:, :2])
    assert max(errs) < 1e-6
    # the gradient scatters ones into the operand's shape at the selected places
    np.testing.assert_array_equal(g, (x <= np.sort(x, 1)[:, 1:2]).astype(np.float64))
    with pytest.raises(kf.errors.InvalidArgumentError, match="TopKV2"):
        with kf.Graph().as_default():
            _run(kf.nn.approx_max_k(kf.placeholder_with_default(x, [3, 4, None]), 9)[0])

def test_type_specs():
    s = kf.IndexedSlicesSpec([None, 4], kf.float32)
    assert s == kf.IndexedSlicesSpec([None, 4], kf.float32) and s != kf.IndexedSlicesSpec([None, 5])
    with kf.Graph().as_default():
        sl = kf.IndexedSlices(kf.zeros([2, 4]), kf.constant([0, 1], kf.int64))
        assert s.is_compatible_with(sl)
        assert not kf.IndexedSlicesSpec([None, 3]).is_compatible_with(sl)
        assert s.value_type is kf.IndexedSlices
        ta = kf.TensorArray(kf.float32, size=2, element_shape=[3])
        spec = kf.TensorArraySpec.from_value(ta)
        assert spec == kf.TensorArraySpec([3], kf.float32)
        assert kf.TensorArraySpec([None], kf.float32).is_compatible_with(ta)
        assert not kf.TensorArraySpec([3], kf.int32).is_compatible_with(ta)
    o = kf.OptionalSpec(kf.TensorSpec([2], kf.int32))
    assert o.is_compatible_with(kf.OptionalSpec(kf.TensorSpec([None], kf.int32)))
    assert not o.is_compatible_with(kf.OptionalSpec(kf.TensorSpec([2], kf.float32)))
    assert kf.NoneTensorSpec().is_compatible_with(None) and kf.NoneTensorSpec() == kf.NoneTensorSpec()
