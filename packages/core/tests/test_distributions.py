"""kf.distributions: values against scipy.stats, shapes and broadcasting, sampling, reparameterized
gradients, the KL registry and argument validation (TF1 `tf.distributions` semantics)."""

import numpy as np
import pytest
from scipy import integrate, special, stats

import kernflow.core as kf
from kernflow.core.framework import errors

td = kf.distributions
f32 = np.float32


@pytest.fixture
def sess():
    with kf.Graph().as_default(), kf.Session() as s:
        yield s


def _run(sess, d, names, x=None):
    """The values of the methods `names` of `d` (with argument `x` where they take one)."""
    takes_x = {"log_prob", "prob", "cdf", "log_cdf", "survival_function", "log_survival_function",
               "quantile"}
    return dict(zip(names, sess.run([getattr(d, m)(x) if m in takes_x else getattr(d, m)()
                                     for m in names])))


def test_namespace_has_the_tf1_names():
    names = ["Bernoulli", "Beta", "Categorical", "Dirichlet", "DirichletMultinomial", "Distribution",
             "Exponential", "FULLY_REPARAMETERIZED", "Gamma", "Laplace", "Multinomial", "NOT_REPARAMETERIZED",
             "Normal", "RegisterKL", "ReparameterizationType", "StudentT", "Uniform", "kl_divergence"]
    assert all(hasattr(td, n) for n in names)
    assert repr(td.FULLY_REPARAMETERIZED) == "<Reparameterization Type: FULLY_REPARAMETERIZED>"
    assert td.FULLY_REPARAMETERIZED != td.NOT_REPARAMETERIZED
    assert isinstance(td.NOT_REPARAMETERIZED, td.ReparameterizationType)


# ---------------------------------------------------------------------------- Normal
def test_normal_matches_scipy_and_broadcasts(sess):
    loc, scale = np.array([0., 1.5], f32), np.array([[1.], [2.5]], f32)
    x = np.array([0.3, -40.], f32)
    d = td.Normal(loc=loc, scale=scale)
    assert d.batch_shape.as_list() == [2, 2] and d.event_shape.as_list() == []
    assert d.dtype == kf.float32 and d.reparameterization_type == td.FULLY_REPARAMETERIZED
    ref = stats.norm(loc, scale)
    got = _run(sess, d, ["log_prob", "prob", "cdf", "log_cdf", "survival_function", "log_survival_function",
                         "entropy", "mean", "stddev", "variance", "mode"], x)
    want = dict(log_prob=ref.logpdf(x), prob=ref.pdf(x), cdf=ref.cdf(x), log_cdf=ref.logcdf(x),
                survival_function=ref.sf(x), log_survival_function=ref.logsf(x), entropy=ref.entropy(),
                mean=ref.mean(), stddev=ref.std(), variance=ref.var(), mode=ref.mean())
    for k, v in want.items():
        assert got[k].shape == (2, 2), k
        np.testing.assert_allclose(got[k], v, rtol=1e-4, atol=1e-6, err_msg=k)
    q = sess.run(td.Normal(1., 2.).quantile([0.1, 0.5, 0.9]))
    np.testing.assert_allclose(q, stats.norm(1., 2.).ppf([0.1, 0.5, 0.9]), rtol=1e-5)


def test_normal_names_parameters_and_copy(sess):
    a, b = td.Normal(0., 1.), td.Normal(loc=[0., 1.], scale=2.)
    assert (a.name, b.name) == ("Normal/", "Normal_1/")
    assert b.parameters == {"loc": [0., 1.], "scale": 2., "validate_args": False, "allow_nan_stats": True,
                            "name": "Normal"}
    assert b.log_prob(0.).op.name == "Normal_1/log_prob/sub"
    assert b.loc.op.name == "Normal_1/loc" and b.scale.op.name == "Normal_1/scale"
    assert str(b) == 'kf.distributions.Normal("Normal_1/", batch_shape=(2,), event_shape=(), dtype=float32)'
    c = b.copy(scale=3.)
    assert isinstance(c, td.Normal) and c.parameters["scale"] == 3.
    np.testing.assert_allclose(sess.run(c.stddev()), [3., 3.])
    assert sess.run(b.batch_shape_tensor()).tolist() == [2]
    assert sess.run(b.event_shape_tensor()).tolist() == []
    assert sess.run([b.is_scalar_batch(), b.is_scalar_event(), a.is_scalar_batch()]) == [False, True, True]
    shapes = td.Normal.param_static_shapes([5, 2])
    assert {k: v.as_list() for k, v in shapes.items()} == {"loc": [5, 2], "scale": [5, 2]}
    with pytest.raises(NotImplementedError):
        td.Categorical.param_static_shapes([3])


def test_normal_rejects_mixed_or_integer_dtypes():
    with kf.Graph().as_default():
        with pytest.raises(ValueError, match="float"):
            td.Normal(kf.constant(0., kf.float64), 1.)
        with pytest.raises(ValueError, match="float"):
            td.Normal(0, 1)


def test_normal_with_unknown_batch_shape(sess):
    loc = kf.placeholder(kf.float32, [None])
    d = td.Normal(loc, 1.)
    assert d.batch_shape.as_list() == [None]
    n = kf.placeholder(kf.int32, [])
    s = d.sample([n, 2], seed=1)
    shape, bst = sess.run([kf.shape(s), d.batch_shape_tensor()], {loc: [0., 1., 2.], n: 4})
    assert shape.tolist() == [4, 2, 3] and bst.tolist() == [3]


def test_normal_sample_shapes_and_moments(sess):
    d = td.Normal(loc=[1., -2.], scale=[0.5, 3.])
    assert d.sample(seed=1).shape.as_list() == [2]
    assert d.sample(4, seed=1).shape.as_list() == [4, 2]
    assert d.sample([2, 3], seed=1).shape.as_list() == [2, 3, 2]
    x = sess.run(d.sample(20000, seed=5))
    np.testing.assert_allclose(x.mean(0), [1., -2.], atol=0.08)
    np.testing.assert_allclose(x.std(0), [0.5, 3.], rtol=0.03)


def test_normal_sample_is_reparameterized(sess):
    loc, scale = kf.constant([0.5, -1.]), kf.constant([2., 0.5])
    x = td.Normal(loc, scale).sample(4000, seed=3)
    g_loc, g_scale = kf.gradients(kf.reduce_sum(x), [loc, scale])
    assert g_loc is not None and g_scale is not None
    xv, gl, gs = sess.run([x, g_loc, g_scale])
    np.testing.assert_allclose(gl, [4000., 4000.])
    np.testing.assert_allclose(gs, ((xv - [0.5, -1.]) / [2., 0.5]).sum(0), rtol=1e-4, atol=1e-2)
    # d/dtheta E[x^2] = d/dtheta (loc^2 + scale^2) = 2 theta
    m_loc, m_scale = kf.gradients(kf.reduce_mean(kf.square(x), axis=0), [loc, scale])
    gl, gs = sess.run([m_loc, m_scale])
    np.testing.assert_allclose(gl, [1., -2.], atol=0.15)
    np.testing.assert_allclose(gs, [4., 1.], rtol=0.1)


def test_normal_validate_args(sess):
    scale = kf.placeholder(kf.float32, [])
    d = td.Normal(0., scale, validate_args=True)
    lp = d.log_prob(1.)
    np.testing.assert_allclose(sess.run(lp, {scale: 2.}), stats.norm(0, 2).logpdf(1.), rtol=1e-5)
    with pytest.raises(errors.InvalidArgumentError):
        sess.run(lp, {scale: -1.})
    with pytest.raises(errors.InvalidArgumentError):
        sess.run(td.Normal(0., -1., validate_args=True).log_prob(1.))
    assert np.isnan(sess.run(td.Normal(0., -1.).log_prob(1.)))


# ---------------------------------------------------------------------------- other scalar families
_SCALAR_CASES = [
    ("laplace", lambda: td.Laplace(loc=[0., 1.5], scale=[1., 2.5]),
     stats.laplace(loc=[0., 1.5], scale=[1., 2.5]), [0.3, -4.]),
    ("uniform", lambda: td.Uniform(low=[0., 1.5], high=[1., 2.5]),
     stats.uniform(loc=[0., 1.5], scale=[1., 1.]), [0.3, 2.]),
    ("student_t", lambda: td.StudentT(df=[3., 4.5], loc=0.5, scale=2.),
     stats.t(df=[3., 4.5], loc=0.5, scale=2.), [0.3, -4.]),
    ("gamma", lambda: td.Gamma(concentration=[1.5, 3.], rate=2.),
     stats.gamma(a=[1.5, 3.], scale=0.5), [0.3, 2.]),
    ("exponential", lambda: td.Exponential(rate=[0.5, 3.]),
     stats.expon(scale=[2., 1. / 3.]), [0.3, 2.]),
    ("beta", lambda: td.Beta(concentration1=[1.5, 3.], concentration0=2.),
     stats.beta(a=[1.5, 3.], b=2.), [0.3, 0.9]),
]


@pytest.mark.parametrize("make,ref,x", [c[1:] for c in _SCALAR_CASES], ids=[c[0] for c in _SCALAR_CASES])
def test_scalar_families_match_scipy(sess, make, ref, x):
    d = make()
    x = np.array(x, f32)
    got = _run(sess, d, ["log_prob", "prob", "cdf", "survival_function", "entropy", "mean", "variance",
                         "stddev"], x)
    want = dict(log_prob=ref.logpdf(x), prob=ref.pdf(x), cdf=ref.cdf(x), survival_function=ref.sf(x),
                entropy=ref.entropy(), mean=ref.mean(), variance=ref.var(), stddev=ref.std())
    for k, v in want.items():
        np.testing.assert_allclose(got[k], v, rtol=2e-4, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("make,ref,x", [c[1:] for c in _SCALAR_CASES], ids=[c[0] for c in _SCALAR_CASES])
def test_scalar_families_sample_moments(sess, make, ref, x):
    d = make()
    s = d.sample([2, 3], seed=11)
    assert s.shape.as_list() == [2, 3, 2] and s.dtype == kf.float32
    draws = sess.run(d.sample(20000, seed=7)).astype(np.float64)
    assert draws.shape == (20000, 2)
    se = np.sqrt(ref.var() / 20000)
    np.testing.assert_array_less(np.abs(draws.mean(0) - ref.mean()), 5 * se + 1e-6)
    assert np.all(ref.pdf(draws) > 0)  # every draw lies in the support


def test_log_cdf_and_modes(sess):
    lap = td.Laplace(0., 2.)
    x = np.array([-3., 0.5, 30.], f32)
    got = sess.run([lap.log_cdf(x), lap.log_survival_function(x), lap.mode()])
    np.testing.assert_allclose(got[0], stats.laplace(0, 2).logcdf(x), rtol=1e-5)
    np.testing.assert_allclose(got[1], stats.laplace(0, 2).logsf(x), rtol=1e-5)
    assert got[2] == 0.
    exp = td.Exponential([0.5, 3.])
    np.testing.assert_allclose(sess.run(exp.log_survival_function(2.)),
                               stats.expon(scale=[2., 1 / 3]).logsf(2.), rtol=1e-5)
    modes = sess.run([td.Gamma([0.5, 3.], 2.).mode(), td.Beta([0.5, 3.], 2.).mode(),
                      td.StudentT(3., [1., 2.], 1.).mode()])
    np.testing.assert_allclose(modes[0], [np.nan, 1.], equal_nan=True)
    np.testing.assert_allclose(modes[1], [np.nan, 2. / 3.], equal_nan=True, rtol=1e-6)
    np.testing.assert_allclose(modes[2], [1., 2.])


def test_undefined_statistics(sess):
    t = td.StudentT(df=[0.5, 1.5, 3.], loc=0., scale=1.)
    mean, var = sess.run([t.mean(), t.variance()])
    np.testing.assert_allclose(mean, [np.nan, 0., 0.], equal_nan=True)
    np.testing.assert_allclose(var, [np.nan, np.inf, 3.], equal_nan=True)
    strict = td.Beta(0.5, 2., allow_nan_stats=False)
    with pytest.raises(errors.InvalidArgumentError, match="Mode undefined"):
        sess.run(strict.mode())
    with pytest.raises(errors.InvalidArgumentError, match="mean not defined"):
        sess.run(td.StudentT(0.5, 0., 1., allow_nan_stats=False).mean())


def test_gamma_and_beta_samples_carry_gradients(sess):
    conc = kf.constant([2., 5.])
    for d in (td.Gamma(conc, 1.), td.Beta(conc, 3.), td.Dirichlet(conc)):
        assert d.reparameterization_type == td.FULLY_REPARAMETERIZED
        (g,) = kf.gradients(kf.reduce_sum(d.sample(50, seed=1)), [conc])
        assert g is not None and np.all(np.isfinite(sess.run(g)))
    # E[Gamma(a, 1)] = a, so d/da of the sample mean is about 1.
    (g,) = kf.gradients(kf.reduce_mean(td.Gamma(conc, 1.).sample(4000, seed=2), axis=0), [conc])
    np.testing.assert_allclose(sess.run(g), [1., 1.], atol=0.1)


# ---------------------------------------------------------------------------- discrete families
def test_bernoulli_matches_scipy(sess):
    logits = np.array([0.5, -1.5, 3.], f32)
    p = special.expit(logits)
    for d in (td.Bernoulli(logits=logits), td.Bernoulli(probs=p)):
        assert d.dtype == kf.int32 and d.reparameterization_type == td.NOT_REPARAMETERIZED
        got = _run(sess, d, ["log_prob", "prob", "entropy", "mean", "variance", "mode"],
                   np.array([1, 0, 1], np.int32))
        ref = stats.bernoulli(p)
        want = dict(log_prob=ref.logpmf([1, 0, 1]), prob=ref.pmf([1, 0, 1]), entropy=ref.entropy(),
                    mean=p, variance=p * (1 - p), mode=[1, 0, 1])
        for k, v in want.items():
            np.testing.assert_allclose(got[k], v, rtol=1e-4, err_msg=k)
        np.testing.assert_allclose(sess.run(d.logits), logits, rtol=1e-4)
    # event [2, 1] against batch [3] broadcasts to [2, 3]
    lp = sess.run(td.Bernoulli(logits=logits).log_prob([[0], [1]]))
    np.testing.assert_allclose(lp, stats.bernoulli(p).logpmf([[0], [1]]), rtol=1e-5)
    with pytest.raises(ValueError, match="not both"):
        td.Bernoulli(logits=0., probs=0.5)


def test_bernoulli_samples(sess):
    d = td.Bernoulli(probs=[0.2, 0.9], dtype=kf.float32)
    s = d.sample([3, 4], seed=1)
    assert s.shape.as_list() == [3, 4, 2] and s.dtype == kf.float32
    x = sess.run(d.sample(20000, seed=2))
    assert set(np.unique(x)) <= {0., 1.}
    np.testing.assert_allclose(x.mean(0), [0.2, 0.9], atol=0.015)


def test_categorical(sess):
    logits = np.array([[0.5, -1.5, 3.], [0., 1., 2.]], f32)
    p = special.softmax(logits, axis=-1)
    d = td.Categorical(logits=logits)
    assert d.batch_shape.as_list() == [2] and d.event_shape.as_list() == [] and d.dtype == kf.int32
    assert sess.run(d.event_size) == 3
    k = np.array([[1], [2], [0]], np.int32)  # [3, 1] against batch [2] -> [3, 2]
    lp, ent, mode, cdf = sess.run([d.log_prob(k), d.entropy(), d.mode(), d.cdf(k)])
    picked = np.take_along_axis(p, np.broadcast_to(k, (3, 2)).T, 1).T
    np.testing.assert_allclose(lp, np.log(picked), rtol=1e-5)
    np.testing.assert_allclose(ent, [stats.entropy(r) for r in p], rtol=1e-5)
    assert mode.tolist() == [2, 2]
    # TF1's Categorical.cdf(k) sums the classes below k.
    np.testing.assert_allclose(cdf, np.stack([p[b, :kk].sum(-1) for kk in k[:, 0] for b in range(2)])
                               .reshape(3, 2), rtol=1e-5)
    with pytest.raises(NotImplementedError, match="mean is not implemented: Categorical"):
        d.mean()
    s = d.sample([2, 5], seed=1)
    assert s.shape.as_list() == [2, 5, 2] and s.dtype == kf.int32
    x = sess.run(td.Categorical(probs=p).sample(20000, seed=4))
    freq = np.stack([np.bincount(x[:, b], minlength=3) / 20000. for b in range(2)])
    np.testing.assert_allclose(freq, p, atol=0.015)


def test_multinomial_matches_scipy(sess):
    probs = np.array([0.2, 0.3, 0.5], f32)
    d = td.Multinomial(total_count=[3., 4.], probs=probs)
    assert d.batch_shape.as_list() == [2] and d.event_shape.as_list() == [3]
    counts = np.array([[1., 1., 1.], [0., 1., 3.]], f32)
    lp, mean, var, cov = sess.run([d.log_prob(counts), d.mean(), d.variance(), d.covariance()])
    refs = [stats.multinomial(n, probs) for n in (3, 4)]
    np.testing.assert_allclose(lp, [r.logpmf(c) for r, c in zip(refs, counts)], rtol=1e-5)
    np.testing.assert_allclose(mean, [r.mean() for r in refs], rtol=1e-5)
    np.testing.assert_allclose(cov, [r.cov() for r in refs], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(var, [np.diag(r.cov()) for r in refs], rtol=1e-5)
    x = sess.run(d.sample(5000, seed=3))
    assert x.shape == (5000, 2, 3)
    np.testing.assert_array_equal(x.sum(-1), np.broadcast_to([3., 4.], (5000, 2)))
    np.testing.assert_allclose(x.mean(0), mean, atol=0.06)


def test_dirichlet_and_dirichlet_multinomial_match_scipy(sess):
    alpha = np.array([[0.5, 1.5, 3.], [2., 2., 2.]], f32)
    d = td.Dirichlet(alpha)
    assert d.batch_shape.as_list() == [2] and d.event_shape.as_list() == [3]
    x = np.array([0.2, 0.3, 0.5], f32)
    lp, ent, mean, var, mode = sess.run([d.log_prob(x), d.entropy(), d.mean(), d.variance(), d.mode()])
    refs = [stats.dirichlet(a) for a in alpha]
    np.testing.assert_allclose(lp, [r.logpdf(x) for r in refs], rtol=1e-5)
    np.testing.assert_allclose(ent, [r.entropy() for r in refs], rtol=1e-5)
    np.testing.assert_allclose(mean, [r.mean() for r in refs], rtol=1e-5)
    np.testing.assert_allclose(var, [r.var() for r in refs], rtol=1e-5)
    np.testing.assert_allclose(mode, [[np.nan] * 3, [1 / 3] * 3], rtol=1e-5, equal_nan=True)
    draws = sess.run(d.sample(20000, seed=5))
    assert draws.shape == (20000, 2, 3)
    np.testing.assert_allclose(draws.sum(-1), 1., rtol=1e-5)
    np.testing.assert_allclose(draws.mean(0), mean, atol=0.01)

    dm = td.DirichletMultinomial(total_count=4., concentration=alpha[0])
    counts = np.array([[1., 1., 2.], [0., 1., 3.]], f32)
    lp, mean, var = sess.run([dm.log_prob(counts), dm.mean(), dm.variance()])
    ref = stats.dirichlet_multinomial(alpha[0], 4)
    np.testing.assert_allclose(lp, ref.logpmf(counts), rtol=1e-5)
    np.testing.assert_allclose(mean, ref.mean(), rtol=1e-5)
    np.testing.assert_allclose(var, ref.var(), rtol=1e-5)
    draws = sess.run(dm.sample(5000, seed=6))
    assert draws.shape == (5000, 3)
    np.testing.assert_array_equal(draws.sum(-1), 4.)
    np.testing.assert_allclose(draws.mean(0), ref.mean(), atol=0.08)


# ---------------------------------------------------------------------------- KL divergence
def _quad_kl(p, q, lo, hi):
    return integrate.quad(lambda t: p.pdf(t) * (p.logpdf(t) - q.logpdf(t)), lo, hi)[0]


def test_registered_kl_pairs(sess):
    kls = sess.run([
        td.kl_divergence(td.Normal([0., 1.], [1., 2.]), td.Normal(0.5, 1.5)),
        td.Bernoulli(probs=[0.2, 0.7]).kl_divergence(td.Bernoulli(probs=0.4)),
        td.kl_divergence(td.Categorical(probs=[0.2, 0.3, 0.5]), td.Categorical(probs=[0.1, 0.6, 0.3])),
        td.kl_divergence(td.Gamma([1.5, 3.], 2.), td.Gamma(2., 1.)),
        td.kl_divergence(td.Exponential([0.5, 3.]), td.Exponential(1.5)),
        td.kl_divergence(td.Beta([1.5, 3.], 2.), td.Beta(2.5, 1.5)),
        td.kl_divergence(td.Dirichlet([[1.5, 2.], [3., 2.]]), td.Dirichlet([2.5, 1.5])),
    ])
    norm = [_quad_kl(stats.norm(m, s), stats.norm(0.5, 1.5), -30, 30) for m, s in [(0, 1), (1, 2)]]
    bern = [p * np.log(p / 0.4) + (1 - p) * np.log((1 - p) / 0.6) for p in (0.2, 0.7)]
    cat = stats.entropy([0.2, 0.3, 0.5], [0.1, 0.6, 0.3])
    gam = [_quad_kl(stats.gamma(a, scale=0.5), stats.gamma(2.), 0, 60) for a in (1.5, 3.)]
    expo = [np.log(r / 1.5) + 1.5 / r - 1 for r in (0.5, 3.)]
    beta = [_quad_kl(stats.beta(a, 2.), stats.beta(2.5, 1.5), 0, 1) for a in (1.5, 3.)]
    for got, want in zip(kls, [norm, bern, cat, gam, expo, beta, beta]):  # Dirichlet(K=2) == Beta
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_kl_registry_lookup_and_errors(sess):
    class MyNormal(td.Normal):
        pass

    kl = td.kl_divergence(MyNormal(1., 2.), td.Normal(0., 1.))
    assert kl.op.name.startswith("KullbackLeibler/kl_normal_normal")
    np.testing.assert_allclose(sess.run(kl), _quad_kl(stats.norm(1, 2), stats.norm(0, 1), -40, 40),
                               rtol=1e-5)
    with pytest.raises(ValueError, match="already been registered"):
        td.RegisterKL(td.Normal, td.Normal)(lambda a, b, name=None: None)
    with pytest.raises(TypeError, match="callable"):
        td.RegisterKL(MyNormal, MyNormal)(3)
    with pytest.raises(NotImplementedError, match="No KL"):
        td.kl_divergence(td.Normal(0., 1.), td.Laplace(0., 1.))

    @td.RegisterKL(MyNormal, td.Laplace)
    def _kl(a, b, name=None):
        return kf.constant(7.)

    assert sess.run(td.kl_divergence(MyNormal(0., 1.), td.Laplace(0., 1.))) == 7.
    nan_kl = td.kl_divergence(td.Gamma(1., -1.), td.Gamma(1., 1.), allow_nan_stats=False)
    with pytest.raises(errors.InvalidArgumentError, match="NaN"):
        sess.run(nan_kl)


def test_cross_entropy_is_entropy_plus_kl(sess):
    a, b = td.Normal(0., 1.), td.Normal(1., 2.)
    ce, ent, kl = sess.run([a.cross_entropy(b), a.entropy(), a.kl_divergence(b)])
    np.testing.assert_allclose(ce, ent + kl, rtol=1e-6)
    np.testing.assert_allclose(ce, -integrate.quad(lambda t: stats.norm.pdf(t) * stats.norm(1, 2).logpdf(t),
                                                   -30, 30)[0], rtol=1e-5)


# ---------------------------------------------------------------------------- validation
def test_validate_args_of_other_families(sess):
    p = kf.placeholder(kf.float32, [None])
    cases = [
        (lambda: td.Bernoulli(probs=p, validate_args=True).mean(), [0.5], [1.5]),
        (lambda: td.Categorical(probs=p, validate_args=True).entropy(), [0.5, 0.5], [0.5, 0.6]),
        (lambda: td.Uniform(low=p, high=1., validate_args=True).mean(), [0.5], [2.]),
        (lambda: td.Gamma(p, 1., validate_args=True).mean(), [0.5], [-1.]),
        (lambda: td.Dirichlet(p, validate_args=True).mean(), [0.5, 1.], [0.5, -1.]),
        (lambda: td.Beta(2., 1., validate_args=True).log_prob(p), [0.5], [1.5]),
    ]
    for build, good, bad in cases:
        t = build()
        if good is not None:
            sess.run(t, {p: good})
        with pytest.raises(errors.InvalidArgumentError):
            sess.run(t, {p: bad})


# ---------------------------------------------------------------------------- the base class
def test_distribution_subclass_fallbacks(sess):
    class Coin(td.Distribution):
        def __init__(self):
            super().__init__(dtype=kf.float32, reparameterization_type=td.NOT_REPARAMETERIZED,
                             validate_args=False, allow_nan_stats=True, name="Coin")

        def _log_prob(self, x):
            return kf.zeros_like(x) + np.log(0.5)

        def _variance(self):
            return kf.constant(0.25)

    c = Coin()
    assert c.name == "Coin/" and c.parameters == {}
    assert c.batch_shape.ndims is None
    prob, std = sess.run([c.prob([0., 1.]), c.stddev()])
    np.testing.assert_allclose(prob, [0.5, 0.5])
    assert std == pytest.approx(0.5)
    with pytest.raises(NotImplementedError, match="cdf is not implemented: Coin"):
        c.cdf(0.)
    with pytest.raises(NotImplementedError, match="sample_n is not implemented: Coin"):
        c.sample()
    with pytest.raises(ValueError, match="Graph parent"):
        td.Distribution(kf.float32, td.NOT_REPARAMETERIZED, False, True, graph_parents=[1.])
