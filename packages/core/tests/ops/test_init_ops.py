"""TF1 initializers: exact values, random statistics with seeds, fan computation, configs."""

import math

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.ops import init_ops


def _eval(init, shape, dtype=None, graph_seed=None, **kw):
    """Builds `init(shape, dtype)` in a fresh graph and returns its value from a Session."""
    g = kf.Graph()
    with g.as_default():
        if graph_seed is not None:
            kf.set_random_seed(graph_seed)
        t = init(shape, dtype, **kw) if dtype is not None else init(shape, **kw)
    with kf.Session(graph=g) as sess:
        return t, sess.run(t)


# ---------------------------------------------------------------------------- constant kinds
def test_zeros_initializer_values_and_dtypes():
    t, v = _eval(kf.zeros_initializer(), [2, 3])
    assert t.dtype == kf.float32 and t.shape.as_list() == [2, 3]
    np.testing.assert_array_equal(v, np.zeros([2, 3], np.float32))
    _, v = _eval(kf.zeros_initializer(dtype=kf.int32), [4])
    assert v.dtype == np.int32
    np.testing.assert_array_equal(v, [0, 0, 0, 0])
    # The call's dtype overrides the constructor's.
    t, v = _eval(kf.zeros_initializer(), [2], kf.bool)
    assert t.dtype == kf.bool and v.tolist() == [False, False]


def test_ones_initializer_values_and_large_shape():
    _, v = _eval(kf.ones_initializer(), (3, 2), kf.float64)
    assert v.dtype == np.float64
    np.testing.assert_array_equal(v, np.ones([3, 2]))
    _, v = _eval(kf.ones_initializer(kf.int64), kf.TensorShape([40, 30]))
    assert v.dtype == np.int64 and v.shape == (40, 30) and (v == 1).all()


def test_constant_initializer_scalar_fills():
    t, v = _eval(kf.constant_initializer(2.5), [2, 2])
    assert t.dtype == kf.float32
    np.testing.assert_array_equal(v, np.full([2, 2], 2.5, np.float32))


def test_constant_initializer_full_list_and_array():
    _, v = _eval(kf.constant_initializer([1, 2, 3, 4, 5, 6]), [2, 3])
    np.testing.assert_array_equal(v, np.arange(1, 7, dtype=np.float32).reshape(2, 3))
    _, v = _eval(kf.constant_initializer(np.arange(6).reshape(3, 2), dtype=kf.int32), [3, 2])
    assert v.dtype == np.int32
    np.testing.assert_array_equal(v, np.arange(6).reshape(3, 2))


def test_constant_initializer_short_list_repeats_last_element():
    _, v = _eval(kf.constant_initializer([1, 2]), [2, 3])
    np.testing.assert_array_equal(v, [[1, 2, 2], [2, 2, 2]])


def test_constant_initializer_errors():
    with pytest.raises(ValueError, match="Too many elements provided. Needed at most 2, but "
                                         "received 3"):
        _eval(kf.constant_initializer([1, 2, 3]), [2])
    with pytest.raises(TypeError, match=r"Expected Tensor's shape: \(2, 2\), got \(4,\)"):
        _eval(kf.constant_initializer([1, 2, 3, 4], verify_shape=True), [2, 2])
    with pytest.raises(TypeError, match="Invalid type for initial value"):
        kf.constant_initializer({"a": 1})
    _, v = _eval(kf.constant_initializer([[1, 2], [3, 4]]), [2, 2], verify_shape=True)
    np.testing.assert_array_equal(v, [[1, 2], [3, 4]])


def test_constant_initializer_empty_shape():
    t, v = _eval(kf.constant_initializer(3.0), [0, 4])
    assert v.shape == (0, 4) and t.shape.as_list() == [0, 4]


# ---------------------------------------------------------------------------- random kinds
N = 200_000


def test_random_normal_initializer_statistics():
    _, v = _eval(kf.random_normal_initializer(mean=1.5, stddev=2.0, seed=3), [N])
    assert v.dtype == np.float32
    assert abs(v.mean() - 1.5) < 0.03
    assert abs(v.std() - 2.0) < 0.03


def test_random_normal_initializer_float64_and_bad_dtype():
    t, v = _eval(kf.random_normal_initializer(seed=1, dtype=kf.float64), [100])
    assert t.dtype == kf.float64 and v.dtype == np.float64
    with pytest.raises(ValueError, match="Expected floating point type"):
        kf.random_normal_initializer(dtype=kf.int32)


def test_truncated_normal_initializer_bounds_and_std():
    _, v = _eval(kf.truncated_normal_initializer(mean=-1.0, stddev=0.5, seed=7), [N])
    assert v.min() >= -2.0 and v.max() <= 0.0
    assert abs(v.mean() + 1.0) < 0.01
    assert abs(v.std() - 0.5 * 0.87962566103423978) < 0.01


def test_random_uniform_initializer_defaults_and_range():
    _, v = _eval(kf.random_uniform_initializer(seed=5), [N])
    assert v.min() >= 0.0 and v.max() < 1.0 and abs(v.mean() - 0.5) < 0.01
    _, v = _eval(kf.random_uniform_initializer(-3.0, -1.0, seed=5), [N])
    assert v.min() >= -3.0 and v.max() < -1.0 and abs(v.mean() + 2.0) < 0.01


def test_random_uniform_initializer_integers():
    _, v = _eval(kf.random_uniform_initializer(2, 6, seed=1, dtype=kf.int32), [1000])
    assert v.dtype == np.int32
    assert set(np.unique(v).tolist()) == {2, 3, 4, 5}


def test_seeded_initializers_are_deterministic_across_graphs():
    for make in (lambda: kf.random_normal_initializer(seed=11),
                 lambda: kf.truncated_normal_initializer(seed=11),
                 lambda: kf.random_uniform_initializer(seed=11),
                 lambda: kf.glorot_uniform_initializer(seed=11),
                 lambda: kf.variance_scaling_initializer(seed=11)):
        _, a = _eval(make(), [20, 10])
        _, b = _eval(make(), [20, 10])
        np.testing.assert_array_equal(a, b)
    _, a = _eval(kf.random_normal_initializer(seed=1), [50])
    _, b = _eval(kf.random_normal_initializer(seed=2), [50])
    assert not np.array_equal(a, b)


def test_graph_seed_makes_unseeded_initializer_deterministic():
    _, a = _eval(kf.random_normal_initializer(), [50], graph_seed=4)
    _, b = _eval(kf.random_normal_initializer(), [50], graph_seed=4)
    np.testing.assert_array_equal(a, b)


def test_uniform_unit_scaling_limit():
    _, v = _eval(kf.uniform_unit_scaling_initializer(factor=2.0, seed=3), [3, 4, 500])
    limit = math.sqrt(3.0 / 12.0) * 2.0
    assert np.abs(v).max() <= limit
    assert np.abs(v).max() > 0.98 * limit


# ---------------------------------------------------------------------------- variance scaling
@pytest.mark.parametrize("shape,fans", [([], (1, 1)), ([7], (7, 7)), ([3, 5], (3, 5)),
                                        ([3, 3, 16, 32], (144, 288)), ([2, 4, 5, 6, 8], (240, 320))])
def test_compute_fans(shape, fans):
    assert init_ops._compute_fans(shape) == fans


@pytest.mark.parametrize("mode,n", [("fan_in", 144), ("fan_out", 288), ("fan_avg", 216)])
def test_variance_scaling_uniform_limit_by_mode(mode, n):
    shape = [3, 3, 16, 32]
    _, v = _eval(kf.variance_scaling_initializer(2.0, mode, "uniform", seed=1), shape)
    limit = math.sqrt(3.0 * 2.0 / n)
    assert v.shape == tuple(shape)
    assert np.abs(v).max() <= limit and np.abs(v).max() > 0.99 * limit
    assert abs(v.var() - 2.0 / n) < 0.05 * 2.0 / n


@pytest.mark.parametrize("distribution", ["truncated_normal", "normal"])
def test_variance_scaling_truncated_normal_has_the_target_variance(distribution):
    _, v = _eval(kf.variance_scaling_initializer(1.0, "fan_in", distribution, seed=2), [100, 2000])
    stddev = math.sqrt(1.0 / 100) / 0.87962566103423978
    assert np.abs(v).max() <= 2 * stddev * (1 + 1e-6)
    assert abs(v.var() - 0.01) < 0.0003


def test_variance_scaling_untruncated_normal():
    _, v = _eval(kf.variance_scaling_initializer(4.0, "fan_out", "untruncated_normal", seed=2),
                 [2000, 100])
    assert abs(v.std() - math.sqrt(4.0 / 100)) < 0.003
    assert np.abs(v).max() > 3 * math.sqrt(4.0 / 100)  # not truncated


def test_variance_scaling_argument_errors():
    with pytest.raises(ValueError, match="`scale` must be positive float"):
        kf.variance_scaling_initializer(scale=0.0)
    with pytest.raises(ValueError, match="Invalid `mode` argument"):
        kf.variance_scaling_initializer(mode="fan_max")
    with pytest.raises(ValueError, match="Invalid `distribution` argument"):
        kf.variance_scaling_initializer(distribution="cauchy")
    with pytest.raises(ValueError, match="Expected floating point type"):
        kf.variance_scaling_initializer(dtype=kf.int32)
    assert kf.variance_scaling_initializer(distribution="UNIFORM").distribution == "uniform"


@pytest.mark.parametrize("shape,fan_in,fan_out", [([30, 50], 30, 50), ([3, 3, 16, 32], 144, 288)])
def test_glorot_uniform_limit_by_fan(shape, fan_in, fan_out):
    t, v = _eval(kf.glorot_uniform_initializer(seed=9), shape)
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    assert t.dtype == kf.float32
    assert np.abs(v).max() <= limit and np.abs(v).max() > 0.95 * limit
    assert abs(v.mean()) < 0.05 * limit


def test_glorot_normal_std():
    _, v = _eval(kf.glorot_normal_initializer(seed=9), [300, 500])
    assert abs(v.var() - 2.0 / 800) < 0.03 * 2.0 / 800
    assert np.abs(v).max() <= 2 * math.sqrt(2.0 / 800) / 0.87962566103423978 * (1 + 1e-6)


@pytest.mark.parametrize("fn,scale,uniform", [(kf.he_normal, 2.0, False), (kf.he_uniform, 2.0, True),
                                              (kf.lecun_normal, 1.0, False),
                                              (kf.lecun_uniform, 1.0, True)])
def test_he_and_lecun(fn, scale, uniform):
    init = fn(seed=4)
    assert init.mode == "fan_in" and init.scale == scale
    _, v = _eval(init, [200, 400])
    assert abs(v.var() - scale / 200) < 0.04 * scale / 200
    if uniform:
        assert np.abs(v).max() <= math.sqrt(3 * scale / 200)


# ---------------------------------------------------------------------------- identity / orthogonal
def test_identity_initializer():
    _, v = _eval(kf.identity_initializer(gain=3.0), [3, 4])
    np.testing.assert_array_equal(v, 3.0 * np.eye(3, 4, dtype=np.float32))
    with pytest.raises(ValueError, match="only be used for 2D matrices"):
        _eval(kf.identity_initializer(), [3, 3, 3])


def test_orthogonal_initializer():
    if getattr(kf, "qr", None) is None:
        with pytest.raises(NotImplementedError, match="Qr"):
            _eval(kf.orthogonal_initializer(seed=1), [4, 6])
    else:
        _, v = _eval(kf.orthogonal_initializer(gain=2.0, seed=1), [4, 6])
        np.testing.assert_allclose(v @ v.T, 4.0 * np.eye(4), atol=1e-4)
        _, v = _eval(kf.orthogonal_initializer(seed=1), [2, 3, 5])
        flat = v.reshape(6, 5)
        np.testing.assert_allclose(flat.T @ flat, np.eye(5), atol=1e-4)
    with pytest.raises(ValueError, match="at least two-dimensional"):
        _eval(kf.orthogonal_initializer(), [5])


# ---------------------------------------------------------------------------- configs / names
def test_get_config_and_from_config_round_trip():
    cases = [kf.zeros_initializer(kf.int32), kf.ones_initializer(),
             kf.constant_initializer([1, 2], kf.float64),
             kf.random_normal_initializer(0.5, 2.0, seed=3),
             kf.truncated_normal_initializer(stddev=0.1, seed=1),
             kf.random_uniform_initializer(-1, 1, seed=2),
             kf.uniform_unit_scaling_initializer(1.5),
             kf.variance_scaling_initializer(2.0, "fan_avg", "uniform", seed=5),
             kf.glorot_uniform_initializer(seed=1), kf.glorot_normal_initializer(),
             kf.identity_initializer(2.0), kf.orthogonal_initializer(seed=3)]
    for init in cases:
        cfg = init.get_config()
        again = type(init).from_config(cfg)
        assert again.get_config() == cfg, type(init).__name__
    assert kf.random_normal_initializer(0.5, 2.0, seed=3).get_config() == {
        "mean": 0.5, "stddev": 2.0, "seed": 3, "dtype": "float32"}
    assert kf.glorot_uniform_initializer(seed=1).get_config() == {"seed": 1, "dtype": "float32"}
    assert kf.variance_scaling_initializer().get_config() == {
        "scale": 1.0, "mode": "fan_in", "distribution": "truncated_normal", "seed": None,
        "dtype": "float32"}
    assert kf.constant_initializer(7).get_config() == {"value": 7, "dtype": "float32"}


def test_initializers_namespace():
    ns = kf.initializers
    assert ns.zeros is kf.zeros_initializer and ns.ones is kf.ones_initializer
    assert ns.constant is kf.constant_initializer
    assert ns.random_normal is kf.random_normal_initializer
    assert ns.glorot_uniform is kf.glorot_uniform_initializer
    assert ns.variance_scaling is kf.variance_scaling_initializer
    assert ns.global_variables is kf.global_variables_initializer
    assert isinstance(kf.glorot_uniform_initializer(), ns.variance_scaling)
    assert isinstance(kf.zeros_initializer(), ns.Initializer)


def test_initializer_op_names_under_a_scope():
    g = kf.Graph()
    with g.as_default(), kf.name_scope("init"):
        z = kf.zeros_initializer()([2])
        c = kf.constant_initializer(1.0)([2])
        r = kf.random_uniform_initializer(seed=1)([2])
        n = kf.random_normal_initializer(seed=1)([2])
        t = kf.truncated_normal_initializer(seed=1)([2])
    assert z.op.name == "init/zeros" and z.op.type == "Const"
    assert c.op.name == "init/Const"
    assert r.op.type == "RandomUniform" and r.op.name.startswith("init/random_uniform")
    assert n.op.name == "init/random_normal"
    assert t.op.name == "init/truncated_normal"
    assert r.op.get_attr("seed2") == 1


def test_repr_shows_config():
    assert repr(kf.random_uniform_initializer(0, 2, seed=1)) == (
        "RandomUniform(minval=0, maxval=2, seed=1, dtype='float32')")
