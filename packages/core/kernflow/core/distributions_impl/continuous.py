"""The real-valued families of `kf.distributions`: Normal, Uniform, Laplace, StudentT, Gamma,
Exponential and Beta (TF1 `tf.distributions`), with their registered KL divergences.

Each family has scalar events; its batch shape is the broadcast shape of its parameters. Samplers are
reparameterized (a differentiable function of the parameters and of parameter-free noise), as TF1's.
"""

import math

import numpy as np

import kernflow.core as kf  # partly imported here; its attributes are used only at call time
from kernflow.core.distributions_impl import distribution as _d
from kernflow.core.distributions_impl.kullback_leibler import RegisterKL

__all__ = ["Normal", "Uniform", "Laplace", "StudentT", "Gamma", "Exponential", "Beta"]


def _positive_checks(*tensors):
    return lambda: [kf.assert_positive(t) for t in tensors]


class _ScalarEvent(_d.Distribution):
    """Scalar events; the batch shape broadcasts the tensors `_batch_params` returns."""

    def _batch_params(self):
        raise NotImplementedError

    def _batch_shape(self):
        return _d.static_batch_shape(*self._batch_params())

    def _batch_shape_tensor(self):
        return _d.dynamic_batch_shape(*self._batch_params())

    def _event_shape(self):
        return kf.TensorShape([])

    def _event_shape_tensor(self):
        return kf.constant([], dtype=kf.int32)

    def _noise_shape(self, n):
        return kf.concat([kf.reshape(n, [1]), self.batch_shape_tensor()], 0)


class _LocScale(_ScalarEvent):
    """A location-scale family: ``x = loc + scale * z`` with `z` drawn from a standard member."""

    def __init__(self, loc, scale, validate_args, allow_nan_stats, name, parameters):
        with kf.name_scope(name, values=[loc, scale]) as name:
            with kf.control_dependencies([kf.assert_positive(scale)] if validate_args else []):
                self._loc = kf.identity(loc, name="loc")
                self._scale = kf.identity(scale, name="scale")
            dtype = _d.same_float_dtype([self._loc, self._scale], type(self).__name__)
        super().__init__(dtype=dtype, reparameterization_type=_d.FULLY_REPARAMETERIZED,
                         validate_args=validate_args, allow_nan_stats=allow_nan_stats,
                         parameters=parameters, graph_parents=[self._loc, self._scale], name=name)

    @staticmethod
    def _param_shapes(sample_shape):
        shape = kf.convert_to_tensor(sample_shape, dtype=kf.int32)
        return {"loc": shape, "scale": shape}

    @property
    def loc(self):
        """The location parameter."""
        return self._loc

    @property
    def scale(self):
        """The scale parameter."""
        return self._scale

    def _batch_params(self):
        return [self._loc, self._scale]

    def _z(self, x):
        with kf.name_scope("standardize", values=[x]):
            return (x - self._loc) / self._scale

    def _mean(self):
        return self._loc * kf.ones_like(self._scale)

    def _mode(self):
        return self._mean()


class Normal(_LocScale):
    """The normal distribution with mean `loc` and standard deviation `scale`.

    Samples are ``loc + scale * random_normal()``, so gradients flow to `loc` and `scale`.
    """

    def __init__(self, loc, scale, validate_args=False, allow_nan_stats=True, name="Normal"):
        parameters = dict(locals())
        super().__init__(loc, scale, validate_args, allow_nan_stats, name, parameters)

    def _sample_n(self, n, seed=None):
        noise = kf.random_normal(self._noise_shape(n), dtype=self.dtype, seed=seed)
        return noise * self._scale + self._loc

    def _log_prob(self, x):
        return -0.5 * kf.square(self._z(x)) - (0.5 * math.log(2. * math.pi) + kf.log(self._scale))

    def _log_cdf(self, x):
        return _d.log_ndtr(self._z(x))

    def _cdf(self, x):
        return _d.ndtr(self._z(x))

    def _log_survival_function(self, x):
        return _d.log_ndtr(-self._z(x))

    def _survival_function(self, x):
        return _d.ndtr(-self._z(x))

    def _quantile(self, p):
        return kf.math.ndtri(p) * self._scale + self._loc

    def _entropy(self):
        scale = self._scale * kf.ones_like(self._loc)
        return 0.5 * math.log(2. * math.pi * math.e) + kf.log(scale)

    def _stddev(self):
        return self._scale * kf.ones_like(self._loc)


class Laplace(_LocScale):
    """The Laplace distribution: density ``exp(-|x - loc| / scale) / (2 scale)``."""

    def __init__(self, loc, scale, validate_args=False, allow_nan_stats=True, name="Laplace"):
        parameters = dict(locals())
        super().__init__(loc, scale, validate_args, allow_nan_stats, name, parameters)

    def _sample_n(self, n, seed=None):
        np_dtype = self.dtype.as_numpy_dtype
        # The open interval (-1, 1): the smallest usable value above -1 is -1 + eps/2.
        u = kf.random_uniform(self._noise_shape(n), minval=np.nextafter(np_dtype(-1.), np_dtype(0.)),
                              maxval=1., dtype=self.dtype, seed=seed)
        return self._loc - self._scale * kf.sign(u) * kf.log1p(-kf.abs(u))

    def _log_prob(self, x):
        return -kf.abs(self._z(x)) - kf.log(2. * self._scale)

    def _prob(self, x):
        return kf.exp(self._log_prob(x))

    @staticmethod
    def _log_cdf_laplace(z):
        return kf.where_v2(z < 0., -np.log(2.) + z, kf.log1p(-0.5 * kf.exp(-kf.abs(z))))

    def _log_cdf(self, x):
        return self._log_cdf_laplace(self._z(x))

    def _log_survival_function(self, x):
        return self._log_cdf_laplace(-self._z(x))

    def _cdf(self, x):
        z = self._z(x)
        return 0.5 + 0.5 * kf.sign(z) * (1. - kf.exp(-kf.abs(z)))

    def _entropy(self):
        return kf.log(2. * math.e * (self._scale + kf.zeros_like(self._loc)))

    def _mean(self):
        return self._loc + kf.zeros_like(self._scale)

    def _stddev(self):
        return math.sqrt(2.) * self._scale + kf.zeros_like(self._loc)


class Uniform(_ScalarEvent):
    """The uniform distribution on ``[low, high)``."""

    def __init__(self, low=0., high=1., validate_args=False, allow_nan_stats=True, name="Uniform"):
        parameters = dict(locals())
        with kf.name_scope(name, values=[low, high]) as name:
            checks = ([kf.assert_less(low, high, message="uniform not defined when low >= high.")]
                      if validate_args else [])
            with kf.control_dependencies(checks):
                self._low = kf.identity(low, name="low")
                self._high = kf.identity(high, name="high")
            dtype = _d.same_float_dtype([self._low, self._high], "Uniform")
        super().__init__(dtype=dtype, reparameterization_type=_d.FULLY_REPARAMETERIZED,
                         validate_args=validate_args, allow_nan_stats=allow_nan_stats,
                         parameters=parameters, graph_parents=[self._low, self._high], name=name)

    @property
    def low(self):
        """The lower bound (inclusive)."""
        return self._low

    @property
    def high(self):
        """The upper bound (exclusive)."""
        return self._high

    def range(self, name="range"):
        """``high - low``."""
        with self._name_scope(name):
            return self._high - self._low

    def _batch_params(self):
        return [self._low, self._high]

    def _sample_n(self, n, seed=None):
        u = kf.random_uniform(self._noise_shape(n), dtype=self.dtype, seed=seed)
        return self._low + self.range() * u

    def _prob(self, x):
        x, low, high = _d.broadcast_all(x, self._low, self._high)
        outside = kf.logical_or(x < low, x >= high)
        return kf.where_v2(outside, kf.zeros_like(x), 1. / (high - low))

    def _log_prob(self, x):
        return kf.log(self._prob(x))

    def _cdf(self, x):
        x, low, high = _d.broadcast_all(x, self._low, self._high)
        inside = (x - low) / (high - low)
        return kf.where_v2(x < low, kf.zeros_like(x), kf.where_v2(x >= high, kf.ones_like(x), inside))

    def _entropy(self):
        return kf.log(self.range())

    def _mean(self):
        return (self._low + self._high) / 2.

    def _variance(self):
        return kf.square(self.range()) / 12.

    def _stddev(self):
        return self.range() / math.sqrt(12.)


class StudentT(_ScalarEvent):
    """Student's t distribution with `df` degrees of freedom, location `loc` and scale `scale`."""

    def __init__(self, df, loc, scale, validate_args=False, allow_nan_stats=True, name="StudentT"):
        parameters = dict(locals())
        with kf.name_scope(name, values=[df, loc, scale]) as name:
            with kf.control_dependencies([kf.assert_positive(df)] if validate_args else []):
                self._df = kf.identity(df, name="df")
                self._loc = kf.identity(loc, name="loc")
                self._scale = kf.identity(scale, name="scale")
            dtype = _d.same_float_dtype([self._df, self._loc, self._scale], "StudentT")
        super().__init__(dtype=dtype, reparameterization_type=_d.FULLY_REPARAMETERIZED,
                         validate_args=validate_args, allow_nan_stats=allow_nan_stats,
                         parameters=parameters, graph_parents=[self._df, self._loc, self._scale],
                         name=name)

    @staticmethod
    def _param_shapes(sample_shape):
        shape = kf.convert_to_tensor(sample_shape, dtype=kf.int32)
        return {"df": shape, "loc": shape, "scale": shape}

    @property
    def df(self):
        """Degrees of freedom."""
        return self._df

    @property
    def loc(self):
        """The location (the mean where `df > 1`)."""
        return self._loc

    @property
    def scale(self):
        """The scale."""
        return self._scale

    def _batch_params(self):
        return [self._df, self._loc, self._scale]

    def _ones(self):
        return kf.ones(self.batch_shape_tensor(), dtype=self.dtype)

    def _sample_n(self, n, seed=None):
        # X ~ Normal(0, 1) and Z ~ Chi2(df) = Gamma(df / 2, rate 1/2) give X / sqrt(Z / df) ~ t(df).
        normal = kf.random_normal(self._noise_shape(n), dtype=self.dtype, seed=seed)
        df = self._df * self._ones()
        gamma = kf.random_gamma(kf.reshape(n, [1]), 0.5 * df, beta=0.5, dtype=self.dtype,
                                seed=_d.gen_new_seed(seed, "student_t"))
        return normal * kf.rsqrt(gamma / df) * self._scale + self._loc

    def _log_prob(self, x):
        y = (x - self._loc) / self._scale
        log_unnormalized = -0.5 * (self._df + 1.) * kf.log1p(kf.square(y) / self._df)
        log_normalization = (kf.log(kf.abs(self._scale)) + 0.5 * kf.log(self._df) + 0.5 * np.log(np.pi)
                             + kf.lgamma(0.5 * self._df) - kf.lgamma(0.5 * (self._df + 1.)))
        return log_unnormalized - log_normalization

    def _cdf(self, x):
        y = (x - self._loc) / kf.abs(self._scale)
        x_t = self._df / (kf.square(y) + self._df)
        half_df, x_t = _d.broadcast_all(0.5 * self._df, x_t)
        neg_cdf = 0.5 * kf.betainc(half_df, 0.5 * kf.ones_like(x_t), x_t)
        return kf.where_v2(y < 0., neg_cdf, 1. - neg_cdf)

    def _entropy(self):
        v = self._ones()[..., kf.newaxis]
        beta_arg = kf.concat([v * self._df[..., kf.newaxis], v], -1) / 2.
        return (kf.log(kf.abs(self._scale)) + 0.5 * kf.log(self._df) + kf.lbeta(beta_arg)
                + 0.5 * (self._df + 1.) * (kf.digamma(0.5 * (self._df + 1.)) - kf.digamma(0.5 * self._df)))

    def _mean(self):
        return _d.where_defined(self._df * self._ones() > 1., self._loc * self._ones(),
                                self.allow_nan_stats, "mean not defined for components of df <= 1")

    def _variance(self):
        # The inner where keeps df - 2 <= 0 out of the division, so gradients stay finite.
        denom = kf.where_v2(self._df > 2., self._df - 2., kf.ones_like(self._df))
        var = self._ones() * kf.square(self._scale) * self._df / denom
        df = self._df * self._ones()
        defined = kf.where_v2(df > 2., var, _d.fill_like(var, np.inf, name="inf"))
        return _d.where_defined(df > 1., defined, self.allow_nan_stats,
                                "variance not defined for components of df <= 1")

    def _mode(self):
        return kf.identity(self._loc)


class Gamma(_ScalarEvent):
    """The gamma distribution with shape `concentration` and inverse scale `rate`."""

    def __init__(self, concentration, rate, validate_args=False, allow_nan_stats=True, name="Gamma"):
        parameters = dict(locals())
        with kf.name_scope(name, values=[concentration, rate]) as name:
            checks = [kf.assert_positive(concentration), kf.assert_positive(rate)] if validate_args else []
            with kf.control_dependencies(checks):
                self._concentration = kf.identity(concentration, name="concentration")
                self._rate = kf.identity(rate, name="rate")
            dtype = _d.same_float_dtype([self._concentration, self._rate], type(self).__name__)
        super().__init__(dtype=dtype, reparameterization_type=_d.FULLY_REPARAMETERIZED,
                         validate_args=validate_args, allow_nan_stats=allow_nan_stats,
                         parameters=parameters, graph_parents=[self._concentration, self._rate],
                         name=name)

    @staticmethod
    def _param_shapes(sample_shape):
        shape = kf.convert_to_tensor(sample_shape, dtype=kf.int32)
        return {"concentration": shape, "rate": shape}

    @property
    def concentration(self):
        """The shape parameter (alpha)."""
        return self._concentration

    @property
    def rate(self):
        """The inverse scale (beta)."""
        return self._rate

    def _batch_params(self):
        return [self._concentration, self._rate]

    def _sample_n(self, n, seed=None):
        return kf.random_gamma(kf.reshape(n, [1]), self._concentration, beta=self._rate, dtype=self.dtype,
                               seed=seed)

    def _check_sample(self, x):
        return _d.with_checks(lambda: [kf.assert_positive(x)], self.validate_args, x)

    def _log_prob(self, x):
        x = self._check_sample(x)
        log_unnormalized = kf.math.xlogy(self._concentration - 1., x) - self._rate * x
        return log_unnormalized - (kf.lgamma(self._concentration) - self._concentration * kf.log(self._rate))

    def _cdf(self, x):
        x = self._check_sample(x)
        a, rx = _d.broadcast_all(self._concentration, self._rate * x)
        return kf.igamma(a, rx)

    def _entropy(self):
        c = self._concentration
        return c - kf.log(self._rate) + kf.lgamma(c) + (1. - c) * kf.digamma(c)

    def _mean(self):
        return self._concentration / self._rate

    def _variance(self):
        return self._concentration / kf.square(self._rate)

    def _stddev(self):
        return kf.sqrt(self._concentration) / self._rate

    def _mode(self):
        mode = (self._concentration - 1.) / self._rate
        cond = self._concentration + kf.zeros_like(mode) > 1.
        return _d.where_defined(cond, mode, self.allow_nan_stats,
                                "mode not defined when any concentration <= 1")


class Exponential(Gamma):
    """The exponential distribution with rate `rate` (a `Gamma` with concentration 1)."""

    def __init__(self, rate, validate_args=False, allow_nan_stats=True, name="Exponential"):
        parameters = dict(locals())
        with kf.name_scope(name, values=[rate]) as name:
            rate = kf.convert_to_tensor(rate, name="rate")
        super().__init__(concentration=kf.ones([], dtype=rate.dtype), rate=rate,
                         validate_args=validate_args, allow_nan_stats=allow_nan_stats, name=name)
        self._parameters = parameters

    @staticmethod
    def _param_shapes(sample_shape):
        return {"rate": kf.convert_to_tensor(sample_shape, dtype=kf.int32)}

    def _log_survival_function(self, x):
        return self._log_prob(x) - kf.log(self._rate)

    def _sample_n(self, n, seed=None):
        shape = kf.concat([kf.reshape(n, [1]), kf.shape(self._rate)], 0)
        u = kf.random_uniform(shape, minval=np.finfo(self.dtype.as_numpy_dtype).tiny, maxval=1.,
                              dtype=self.dtype, seed=seed)
        return -kf.log(u) / self._rate


class Beta(_ScalarEvent):
    """The beta distribution on ``(0, 1)`` with concentrations `concentration1` (alpha) and
    `concentration0` (beta)."""

    def __init__(self, concentration1=None, concentration0=None, validate_args=False, allow_nan_stats=True,
                 name="Beta"):
        parameters = dict(locals())
        with kf.name_scope(name, values=[concentration1, concentration0]) as name:
            c1 = kf.convert_to_tensor(concentration1, name="concentration1")
            c0 = kf.convert_to_tensor(concentration0, name="concentration0")
            self._concentration1, self._concentration0 = _d.with_checks(
                _positive_checks(c1, c0), validate_args, c1, c0)
            dtype = _d.same_float_dtype([c1, c0], "Beta")
            self._total_concentration = self._concentration1 + self._concentration0
        super().__init__(dtype=dtype, reparameterization_type=_d.FULLY_REPARAMETERIZED,
                         validate_args=validate_args, allow_nan_stats=allow_nan_stats,
                         parameters=parameters, name=name,
                         graph_parents=[self._concentration1, self._concentration0,
                                        self._total_concentration])

    @staticmethod
    def _param_shapes(sample_shape):
        shape = kf.convert_to_tensor(sample_shape, dtype=kf.int32)
        return {"concentration1": shape, "concentration0": shape}

    @property
    def concentration1(self):
        """The concentration of the 1 outcome (alpha)."""
        return self._concentration1

    @property
    def concentration0(self):
        """The concentration of the 0 outcome (beta)."""
        return self._concentration0

    @property
    def total_concentration(self):
        """``concentration1 + concentration0``."""
        return self._total_concentration

    def _batch_params(self):
        return [self._total_concentration]

    def _sample_n(self, n, seed=None):
        ones = kf.ones_like(self._total_concentration)
        shape = kf.reshape(n, [1])
        g1 = kf.random_gamma(shape, ones * self._concentration1, dtype=self.dtype, seed=seed)
        g0 = kf.random_gamma(shape, ones * self._concentration0, dtype=self.dtype,
                             seed=_d.gen_new_seed(seed, "beta"))
        return g1 / (g1 + g0)

    def _check_sample(self, x):
        return _d.with_checks(lambda: [kf.assert_positive(x, message="sample must be positive"),
                                       kf.assert_less(x, kf.ones([], self.dtype),
                                                      message="sample must be less than `1`.")],
                              self.validate_args, x)

    def _log_normalization(self):
        return (kf.lgamma(self._concentration1) + kf.lgamma(self._concentration0)
                - kf.lgamma(self._total_concentration))

    def _log_prob(self, x):
        x = self._check_sample(x)
        log_unnormalized = (kf.math.xlogy(self._concentration1 - 1., x)
                            + (self._concentration0 - 1.) * kf.log1p(-x))
        return log_unnormalized - self._log_normalization()

    def _cdf(self, x):
        x = self._check_sample(x)
        return kf.betainc(*_d.broadcast_all(self._concentration1, self._concentration0, x))

    def _log_cdf(self, x):
        return kf.log(self._cdf(x))

    def _entropy(self):
        c1, c0, total = self._concentration1, self._concentration0, self._total_concentration
        return (self._log_normalization() - (c1 - 1.) * kf.digamma(c1) - (c0 - 1.) * kf.digamma(c0)
                + (total - 2.) * kf.digamma(total))

    def _mean(self):
        return self._concentration1 / self._total_concentration

    def _variance(self):
        mean = self._mean()
        return mean * (1. - mean) / (1. + self._total_concentration)

    def _mode(self):
        mode = (self._concentration1 - 1.) / (self._total_concentration - 2.)
        defined = kf.logical_and(self._concentration1 + kf.zeros_like(mode) > 1.,
                                 self._concentration0 + kf.zeros_like(mode) > 1.)
        return _d.where_defined(defined, mode, self.allow_nan_stats,
                                "Mode undefined for concentration1 <= 1 or concentration0 <= 1.")


# ---------------------------------------------------------------------------- KL divergences
@RegisterKL(Normal, Normal)
def _kl_normal_normal(a, b, name=None):
    with kf.name_scope(name, "kl_normal_normal", [a.loc, b.loc]):
        ratio = kf.square(a.scale) / kf.square(b.scale)
        return (kf.squared_difference(a.loc, b.loc) / (2. * kf.square(b.scale))
                + 0.5 * (ratio - 1. - kf.log(ratio)))


@RegisterKL(Gamma, Gamma)
def _kl_gamma_gamma(g0, g1, name=None):
    with kf.name_scope(name, "kl_gamma_gamma", [g0.concentration, g0.rate, g1.concentration, g1.rate]):
        c0, r0, c1, r1 = g0.concentration, g0.rate, g1.concentration, g1.rate
        return ((c0 - c1) * kf.digamma(c0) + kf.lgamma(c1) - kf.lgamma(c0) + c1 * kf.log(r0)
                - c1 * kf.log(r1) + c0 * (r1 / r0 - 1.))


@RegisterKL(Beta, Beta)
def _kl_beta_beta(d1, d2, name=None):
    with kf.name_scope(name, "kl_beta_beta", [d1.concentration1, d1.concentration0,
                                               d2.concentration1, d2.concentration0]):
        return (d2._log_normalization() - d1._log_normalization()
                - kf.digamma(d1.concentration1) * (d2.concentration1 - d1.concentration1)
                - kf.digamma(d1.concentration0) * (d2.concentration0 - d1.concentration0)
                + kf.digamma(d1.total_concentration) * (d2.total_concentration - d1.total_concentration))
