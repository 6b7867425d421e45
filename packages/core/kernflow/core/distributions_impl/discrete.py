"""The discrete families of `kf.distributions`: Bernoulli, Categorical and Multinomial (TF1
`tf.distributions`), with the Bernoulli and Categorical KL divergences.

Each is parameterized by exactly one of `logits` and `probs`; the other is derived (sigmoid/logit for
Bernoulli, softmax/log for the categorical families, whose last parameter axis indexes the classes).
"""

import kernflow.core as kf  # partly imported here; its attributes are used only at call time
from kernflow.core.distributions_impl import distribution as _d
from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.distributions_impl.kullback_leibler import RegisterKL

__all__ = ["Bernoulli", "Categorical", "Multinomial", "get_logits_and_probs", "multinomial_counts",
           "log_combinations"]


def _probs_checks(probs, multidimensional):
    def checks():
        deps = [kf.assert_non_negative(probs)]
        if multidimensional:
            deps.append(kf.assert_near(kf.reduce_sum(probs, -1), kf.constant(1., probs.dtype),
                                       message="probs does not sum to 1."))
        else:
            deps.append(kf.assert_less_equal(probs, kf.constant(1., probs.dtype),
                                             message="probs has components greater than 1."))
        return deps
    return checks


def get_logits_and_probs(logits=None, probs=None, multidimensional=False, validate_args=False,
                         name="GetLogitsAndProbs", dtype=None):
    """``(logits, probs)`` from exactly one of them.

    Raises:
        ValueError: both or neither are given.
        TypeError: the given one is not floating point.
    """
    with kf.name_scope(name, values=[probs, logits]):
        if (probs is None) == (logits is None):
            raise ValueError("Must pass probs or logits, but not both.")
        if probs is None:
            logits = kf.convert_to_tensor(logits, name="logits", dtype=dtype)
            if not logits.dtype.is_floating:
                raise TypeError(f"logits must having floating type, got {logits.dtype.name}.")
            if multidimensional:
                return logits, kf.nn.softmax(logits, name="probs")
            return logits, kf.sigmoid(logits, name="probs")
        probs = kf.convert_to_tensor(probs, name="probs", dtype=dtype)
        if not probs.dtype.is_floating:
            raise TypeError(f"probs must having floating type, got {probs.dtype.name}.")
        if validate_args:
            with kf.name_scope("validate_probs"):
                probs = _d.with_checks(_probs_checks(probs, multidimensional), True, probs)
        with kf.name_scope("logits"):
            if multidimensional:
                return kf.log(probs), probs
            return kf.log(probs) - kf.log1p(-probs), probs


def log_combinations(n, counts):
    """``log(n! / prod(counts!))`` over the last axis of `counts`."""
    return kf.lgamma(n + 1.) - kf.reduce_sum(kf.lgamma(counts + 1.), axis=-1)


def multinomial_counts(logits_2d, n_draws, k, seed):
    """Per row of `logits_2d` ([rows, k]), the class counts of `n_draws[row]` categorical draws.

    All rows draw ``max(n_draws)`` times and the draws past a row's own count are masked away.
    """
    n_draws = kf.cast(n_draws, kf.int32)
    max_draws = kf.reduce_max(kf.concat([n_draws, kf.zeros([1], kf.int32)], 0))
    draws = kf.multinomial(logits_2d, max_draws, seed=seed, output_dtype=kf.int32)
    keep = kf.cast(kf.sequence_mask(n_draws, max_draws), logits_2d.dtype)
    return kf.reduce_sum(kf.one_hot(draws, k, dtype=logits_2d.dtype) * keep[..., kf.newaxis], axis=-2)


def _broadcast_event_and_params(event, params, base_dtype):
    """Integer class labels `event` and `params` ([..., k]) broadcast to a common batch shape."""
    if event.dtype.is_floating:
        event = kf.cast(event, kf.int32)
    elif not event.dtype.is_integer:
        raise TypeError(f"`value` should have integer `dtype` or `self.dtype` ({base_dtype.name}), "
                        f"got {event.dtype.name}.")
    known = (params.shape.ndims is not None and params.shape[:-1].is_fully_defined()
             and event.shape.is_fully_defined())
    if not known or params.shape[:-1] != event.shape:
        params = params * kf.ones_like(event[..., kf.newaxis], dtype=params.dtype)
        event = event * kf.ones(kf.shape(params)[:-1], dtype=event.dtype)
        if params.shape.ndims is not None:
            event.set_shape(params.shape[:-1])
    return event, params


class Bernoulli(_d.Distribution):
    """The Bernoulli distribution over {0, 1} with ``P[1] = probs = sigmoid(logits)``.

    Args:
        logits: log-odds of a 1 (give exactly one of `logits` and `probs`).
        probs: probability of a 1.
        dtype: the dtype of samples (int32 by default).
    """

    def __init__(self, logits=None, probs=None, dtype=_dtypes.int32, validate_args=False,
                 allow_nan_stats=True, name="Bernoulli"):
        parameters = dict(locals())
        with kf.name_scope(name) as name:
            self._logits, self._probs = get_logits_and_probs(logits=logits, probs=probs,
                                                             validate_args=validate_args, name=name)
        super().__init__(dtype=dtype, reparameterization_type=_d.NOT_REPARAMETERIZED,
                         validate_args=validate_args, allow_nan_stats=allow_nan_stats,
                         parameters=parameters, graph_parents=[self._logits, self._probs], name=name)

    @staticmethod
    def _param_shapes(sample_shape):
        return {"logits": kf.convert_to_tensor(sample_shape, dtype=kf.int32)}

    @property
    def logits(self):
        """Log-odds of drawing a 1."""
        return self._logits

    @property
    def probs(self):
        """Probability of drawing a 1."""
        return self._probs

    def _batch_shape(self):
        return self._logits.shape

    def _batch_shape_tensor(self):
        return kf.shape(self._logits)

    def _event_shape(self):
        return kf.TensorShape([])

    def _event_shape_tensor(self):
        return kf.constant([], dtype=kf.int32)

    def _sample_n(self, n, seed=None):
        shape = kf.concat([kf.reshape(n, [1]), self.batch_shape_tensor()], 0)
        u = kf.random_uniform(shape, seed=seed, dtype=self._probs.dtype)
        return kf.cast(kf.less(u, self._probs), self.dtype)

    def _log_prob(self, event):
        if self.validate_args:
            event = _d.with_checks(lambda: [kf.assert_less_equal(kf.cast(event, kf.float64), 1.)]
                                   + _d.integer_form_checks(kf.cast(event, kf.float64),
                                                            "event must be 0 or 1"), True, event)
        event = kf.cast(event, self._logits.dtype)
        logits, event = kf.ones_like(event) * self._logits, kf.ones_like(self._logits) * event
        return -kf.nn.sigmoid_cross_entropy_with_logits(labels=event, logits=logits)

    def _entropy(self):
        return -self._logits * (kf.sigmoid(self._logits) - 1.) + kf.nn.softplus(-self._logits)

    def _mean(self):
        return kf.identity(self._probs)

    def _variance(self):
        return self._probs * (1. - self._probs)

    def _mode(self):
        return kf.cast(self._probs > 0.5, self.dtype)


class _Categorical(_d.Distribution):
    """Shared by the categorical families: logits/probs over the last axis of the parameters."""

    def _init_logits(self, logits, probs, validate_args):
        self._logits, self._probs = get_logits_and_probs(logits=logits, probs=probs, multidimensional=True,
                                                         validate_args=validate_args)
        static = self._logits.shape.with_rank_at_least(1)
        k = kf.dimension_value(static[-1])
        self._event_size = (kf.constant(k, dtype=kf.int32, name="event_size") if k is not None
                            else kf.shape(self._logits)[-1])

    @property
    def logits(self):
        """Log-probabilities of the classes (up to a constant)."""
        return self._logits

    @property
    def probs(self):
        """Probabilities of the classes."""
        return self._probs

    @property
    def event_size(self):
        """The number of classes, as a scalar int32 tensor."""
        return self._event_size

    def _logits_2d(self):
        return kf.reshape(self._logits, kf.stack([-1, self._event_size]))


class Categorical(_Categorical):
    """The categorical distribution over the classes ``0 .. K-1`` of the last axis of the parameters.

    Args:
        logits: ``[..., K]`` log-probabilities up to a constant (give exactly one of logits/probs).
        probs: ``[..., K]`` probabilities.
        dtype: the dtype of samples (int32 by default).
    """

    def __init__(self, logits=None, probs=None, dtype=_dtypes.int32, validate_args=False,
                 allow_nan_stats=True, name="Categorical"):
        parameters = dict(locals())
        with kf.name_scope(name, values=[logits, probs]) as name:
            self._init_logits(logits, probs, validate_args)
        super().__init__(dtype=dtype, reparameterization_type=_d.NOT_REPARAMETERIZED,
                         validate_args=validate_args, allow_nan_stats=allow_nan_stats,
                         parameters=parameters, graph_parents=[self._logits, self._probs], name=name)

    def _batch_shape(self):
        return self._logits.shape.with_rank_at_least(1)[:-1]

    def _batch_shape_tensor(self):
        return kf.shape(self._logits)[:-1]

    def _event_shape(self):
        return kf.TensorShape([])

    def _event_shape_tensor(self):
        return kf.constant([], dtype=kf.int32)

    def _sample_n(self, n, seed=None):
        sample_dtype = kf.int64 if self.dtype.size > 4 else kf.int32
        draws = kf.multinomial(self._logits_2d(), n, seed=seed, output_dtype=sample_dtype)
        shape = kf.concat([kf.reshape(n, [1]), self.batch_shape_tensor()], 0)
        return kf.cast(kf.reshape(kf.transpose(draws), shape), self.dtype)

    def _cdf(self, k):
        # TF1's definition: the mass of the classes below k (classes < k).
        k, probs = _broadcast_event_and_params(k, self._probs, self.dtype.base_dtype)
        flat_probs = kf.reshape(probs, kf.stack([-1, self._event_size]))
        below = kf.sequence_mask(kf.reshape(k, [-1]), self._event_size)
        flat_cdf = kf.reduce_sum(kf.where(below, flat_probs, kf.zeros_like(flat_probs)), axis=-1)
        return kf.reshape(flat_cdf, kf.shape(k))

    def _log_prob(self, k):
        k, logits = _broadcast_event_and_params(k, self._logits, self.dtype.base_dtype)
        return -kf.nn.sparse_softmax_cross_entropy_with_logits(labels=k, logits=logits)

    def _entropy(self):
        return -kf.reduce_sum(kf.nn.log_softmax(self._logits) * self._probs, axis=-1)

    def _mode(self):
        mode = kf.cast(kf.argmax(self._logits, axis=-1), self.dtype)
        mode.set_shape(self.batch_shape)
        return mode


class Multinomial(_Categorical):
    """The multinomial distribution: class counts of `total_count` categorical draws.

    Args:
        total_count: the number of draws (non-negative, integral, floating point), broadcast against
            the batch shape of the class parameters.
        logits: ``[..., K]`` log-probabilities up to a constant (give exactly one of logits/probs).
        probs: ``[..., K]`` probabilities.
    """

    def __init__(self, total_count, logits=None, probs=None, validate_args=False, allow_nan_stats=True,
                 name="Multinomial"):
        parameters = dict(locals())
        with kf.name_scope(name, values=[total_count, logits, probs]) as name:
            count = kf.convert_to_tensor(total_count, name="total_count")
            self._total_count = _d.with_checks(
                lambda: _d.integer_form_checks(count, "total_count must be a non-negative integer"),
                validate_args, count)
            self._init_logits(logits, probs, validate_args)
            self._mean_val = self._total_count[..., kf.newaxis] * self._probs
        super().__init__(dtype=self._probs.dtype, reparameterization_type=_d.NOT_REPARAMETERIZED,
                         validate_args=validate_args, allow_nan_stats=allow_nan_stats,
                         parameters=parameters,
                         graph_parents=[self._total_count, self._logits, self._probs], name=name)

    @property
    def total_count(self):
        """The number of draws."""
        return self._total_count

    def _batch_shape(self):
        return self._mean_val.shape.with_rank_at_least(1)[:-1]

    def _batch_shape_tensor(self):
        return kf.shape(self._mean_val)[:-1]

    def _event_shape(self):
        return self._mean_val.shape.with_rank_at_least(1)[-1:]

    def _event_shape_tensor(self):
        return kf.shape(self._mean_val)[-1:]

    def _sample_n(self, n, seed=None):
        k = self._event_size
        ones = kf.ones_like(self._mean_val)
        logits = kf.reshape(ones * self._logits, kf.stack([1, -1, k]))
        counts = kf.reshape(ones[..., 0] * self._total_count, [1, -1])
        reps = kf.stack([n, 1, 1])
        logits = kf.reshape(kf.tile(logits, reps), kf.stack([-1, k]))
        counts = kf.reshape(kf.tile(counts, reps[:2]), [-1])
        x = multinomial_counts(logits, counts, k, seed)
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
        return (kf.reduce_sum(counts * kf.nn.log_softmax(self._logits), -1)
                + log_combinations(self._total_count, counts))

    def _mean(self):
        return kf.identity(self._mean_val)

    def _variance(self):
        p = self._probs * kf.ones_like(self._total_count)[..., kf.newaxis]
        return self._mean_val - self._mean_val * p

    def _covariance(self):
        p = self._probs * kf.ones_like(self._total_count)[..., kf.newaxis]
        outer = -kf.matmul(self._mean_val[..., kf.newaxis], p[..., kf.newaxis, :])
        return kf.matrix_set_diag(outer, self._variance())


# ---------------------------------------------------------------------------- KL divergences
@RegisterKL(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(a, b, name=None):
    with kf.name_scope(name, "kl_bernoulli_bernoulli", values=[a.logits, b.logits]):
        delta_probs0 = kf.nn.softplus(-b.logits) - kf.nn.softplus(-a.logits)
        delta_probs1 = kf.nn.softplus(b.logits) - kf.nn.softplus(a.logits)
        return kf.sigmoid(a.logits) * delta_probs0 + kf.sigmoid(-a.logits) * delta_probs1


@RegisterKL(Categorical, Categorical)
def _kl_categorical_categorical(a, b, name=None):
    with kf.name_scope(name, "kl_categorical_categorical", values=[a.logits, b.logits]):
        delta_log_probs = kf.nn.log_softmax(a.logits) - kf.nn.log_softmax(b.logits)
        return kf.reduce_sum(kf.nn.softmax(a.logits) * delta_log_probs, axis=-1)
