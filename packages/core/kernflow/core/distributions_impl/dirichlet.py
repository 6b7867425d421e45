"""The simplex families of `kf.distributions`: Dirichlet and DirichletMultinomial (TF1
`tf.distributions`), with the Dirichlet KL divergence.

The last axis of `concentration` indexes the K classes and is the event shape; the leading axes are
the batch shape.
"""

import kernflow.core as kf  # partly imported here; its attributes are used only at call time
from kernflow.core.distributions_impl import distribution as _d
from kernflow.core.distributions_impl.discrete import log_combinations, multinomial_counts
from kernflow.core.distributions_impl.kullback_leibler import RegisterKL

__all__ = ["Dirichlet", "DirichletMultinomial"]


def _concentration(concentration, validate_args):
    c = kf.convert_to_tensor(concentration, name="concentration")

    def checks():
        return [kf.assert_positive(c, message="Concentration parameter must be positive."),
                kf.assert_rank_at_least(c, 1, message="Concentration parameter must have >=1 dimensions."),
                kf.assert_less(1, kf.shape(c)[-1],
                               message="Concentration parameter must have event_size >= 2.")]
    return _d.with_checks(checks, validate_args, c)


class _Simplex(_d.Distribution):
    """Batch shape from `total_concentration`, event shape from the last axis of `concentration`."""

    @property
    def concentration(self):
        """The concentration parameters, ``[..., K]``."""
        return self._concentration

    @property
    def total_concentration(self):
        """The sum of `concentration` over the last axis."""
        return self._total_concentration

    def _batch_shape(self):
        return self._total_concentration.shape

    def _batch_shape_tensor(self):
        return kf.shape(self._total_concentration)

    def _event_shape(self):
        return self._concentration.shape.with_rank_at_least(1)[-1:]

    def _event_shape_tensor(self):
        return kf.shape(self._concentration)[-1:]

    def _k(self):
        return kf.cast(self.event_shape_tensor()[0], self.dtype)


class Dirichlet(_Simplex):
    """The Dirichlet distribution over probability vectors of K classes.

    Args:
        concentration: ``[..., K]`` positive concentrations (K >= 2).
    """

    def __init__(self, concentration, validate_args=False, allow_nan_stats=True, name="Dirichlet"):
        parameters = dict(locals())
        with kf.name_scope(name, values=[concentration]) as name:
            self._concentration = _concentration(concentration, validate_args)
            self._total_concentration = kf.reduce_sum(self._concentration, -1)
        super().__init__(dtype=self._concentration.dtype, reparameterization_type=_d.FULLY_REPARAMETERIZED,
                         validate_args=validate_args, allow_nan_stats=allow_nan_stats,
                         parameters=parameters,
                         graph_parents=[self._concentration, self._total_concentration], name=name)

    def _sample_n(self, n, seed=None):
        gamma = kf.random_gamma(kf.reshape(n, [1]), self._concentration, dtype=self.dtype, seed=seed)
        return gamma / kf.reduce_sum(gamma, -1, keepdims=True)

    def _check_sample(self, x):
        def checks():
            return [kf.assert_positive(x, message="samples must be positive"),
                    kf.assert_near(kf.ones([], self.dtype), kf.reduce_sum(x, -1),
                                   message="sample last-dimension must sum to `1`")]
        return _d.with_checks(checks, self.validate_args, x)

    def _log_prob(self, x):
        x = self._check_sample(x)
        return kf.reduce_sum(kf.math.xlogy(self._concentration - 1., x), -1) - kf.lbeta(self._concentration)

    def _entropy(self):
        c, total = self._concentration, self._total_concentration
        return (kf.lbeta(c) + (total - self._k()) * kf.digamma(total)
                - kf.reduce_sum((c - 1.) * kf.digamma(c), axis=-1))

    def _mean(self):
        return self._concentration / self._total_concentration[..., kf.newaxis]

    def _scaled_mean(self):
        return kf.rsqrt(1. + self._total_concentration[..., kf.newaxis]) * self._mean()

    def _variance(self):
        scale = kf.rsqrt(1. + self._total_concentration[..., kf.newaxis])
        x = scale * self._mean()
        return x * (scale - x)

    def _covariance(self):
        x = self._scaled_mean()
        return kf.matrix_set_diag(-kf.matmul(x[..., kf.newaxis], x[..., kf.newaxis, :]), self._variance())

    def _mode(self):
        mode = (self._concentration - 1.) / (self._total_concentration[..., kf.newaxis] - self._k())
        defined = kf.reduce_all(self._concentration > 1., axis=-1, keepdims=True)
        return _d.where_defined(defined, mode, self.allow_nan_stats,
                                "Mode undefined when any concentration <= 1")


class DirichletMultinomial(_Simplex):
    """Class counts of `total_count` draws with class probabilities drawn from a Dirichlet.

    Args:
        total_count: the number of draws (non-negative, integral, floating point).
        concentration: ``[..., K]`` positive concentrations.
    """

    def __init__(self, total_count, concentration, validate_args=False, allow_nan_stats=True,
                 name="DirichletMultinomial"):
        parameters = dict(locals())
        with kf.name_scope(name, values=[total_count, concentration]) as name:
            count = kf.convert_to_tensor(total_count, name="total_count")
            self._total_count = _d.with_checks(
                lambda: _d.integer_form_checks(count, "total_count must be a non-negative integer"),
                validate_args, count)
            self._concentration = _concentration(concentration, validate_args)
            self._total_concentration = kf.reduce_sum(self._concentration, -1)
        super().__init__(dtype=self._concentration.dtype, reparameterization_type=_d.NOT_REPARAMETERIZED,
                         validate_args=validate_args, allow_nan_stats=allow_nan_stats,
                         parameters=parameters, name=name,
                         graph_parents=[self._concentration, self._total_count])

    @property
    def total_count(self):
        """The number of draws."""
        return self._total_count

    def _sample_n(self, n, seed=None):
        k = self.event_shape_tensor()[0]
        gamma = kf.random_gamma(kf.reshape(n, [1]), self._concentration, dtype=self.dtype, seed=seed)
        logits = kf.reshape(kf.log(gamma), kf.stack([-1, k]))
        counts = kf.reshape(kf.ones_like(gamma[..., 0]) * self._total_count, [-1])
        x = multinomial_counts(logits, counts, k, _d.gen_new_seed(seed, "dirichlet_multinomial"))
        final_shape = kf.concat([kf.reshape(n, [1]), self.batch_shape_tensor(), kf.reshape(k, [1])], 0)
        return kf.cast(kf.reshape(x, final_shape), self.dtype)

    def _check_counts(self, counts):
        def checks():
            return (_d.integer_form_checks(counts, "counts must be non-negative integers")
                    + [kf.assert_equal(self._total_count, kf.reduce_sum(counts, -1),
                                       message="counts must sum to `self.total_count`")])
        return _d.with_checks(checks, self.validate_args, counts)

    def _log_prob(self, counts):
        counts = self._check_counts(counts)
        ordered = kf.lbeta(self._concentration + counts) - kf.lbeta(self._concentration)
        return ordered + log_combinations(self._total_count, counts)

    def _mean(self):
        n = self._total_count[..., kf.newaxis]
        return n * self._concentration / self._total_concentration[..., kf.newaxis]

    def _variance_scale_term(self):
        c0 = self._total_concentration[..., kf.newaxis]
        return kf.sqrt((1. + c0 / self._total_count[..., kf.newaxis]) / (1. + c0))

    def _variance(self):
        scale = self._variance_scale_term()
        x = scale * self._mean()
        return x * (self._total_count[..., kf.newaxis] * scale - x)

    def _covariance(self):
        x = self._variance_scale_term() * self._mean()
        return kf.matrix_set_diag(-kf.matmul(x[..., kf.newaxis], x[..., kf.newaxis, :]), self._variance())


# ---------------------------------------------------------------------------- KL divergences
@RegisterKL(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(d1, d2, name=None):
    with kf.name_scope(name, "kl_dirichlet_dirichlet", values=[d1.concentration, d2.concentration]):
        digamma_sum = kf.digamma(kf.reduce_sum(d1.concentration, axis=-1, keepdims=True))
        digamma_diff = kf.digamma(d1.concentration) - digamma_sum
        return (kf.reduce_sum((d1.concentration - d2.concentration) * digamma_diff, axis=-1)
                - kf.lbeta(d1.concentration) + kf.lbeta(d2.concentration))

