"""The `Distribution` base class of `kf.distributions` (TF1 `tf.distributions.Distribution`).

A distribution is a batch of independent distributions over events: `batch_shape` indexes the members
of the batch and `event_shape` is the shape of one draw of one member. `sample(sample_shape)` returns
a tensor of shape ``sample_shape + batch_shape + event_shape``; `log_prob(x)` and friends broadcast `x`
against ``batch_shape + event_shape`` and reduce the event dimensions away.

Subclasses implement the private half of each public method (`_log_prob`, `_sample_n`, `_mean`, ...);
the public method opens the name scope ``<distribution name>/<method name>/``, converts its argument
and falls back on a related method where one is implemented (`prob` from `_log_prob`, `stddev` from
`_variance`, `cdf` from `_log_cdf`, ...), as TF1 does.
"""

import contextlib
import hashlib

import numpy as np

import kernflow.core as kf  # partly imported here; its attributes are used only at call time

__all__ = ["Distribution", "ReparameterizationType", "FULLY_REPARAMETERIZED", "NOT_REPARAMETERIZED"]


class ReparameterizationType:
    """Whether samples of a distribution are a differentiable function of its parameters.

    Only the two instances `FULLY_REPARAMETERIZED` and `NOT_REPARAMETERIZED` exist; compare them with
    ``==`` (identity, as TF1).
    """

    def __init__(self, rep_type):
        self._rep_type = rep_type

    def __repr__(self):
        return f"<Reparameterization Type: {self._rep_type}>"

    def __eq__(self, other):
        return self is other

    __hash__ = object.__hash__


FULLY_REPARAMETERIZED = ReparameterizationType("FULLY_REPARAMETERIZED")
NOT_REPARAMETERIZED = ReparameterizationType("NOT_REPARAMETERIZED")


# ---------------------------------------------------------------------------- helpers for subclasses
def gen_new_seed(seed, salt):
    """A new op seed derived from `seed` and `salt` (None stays None), so two samplers differ."""
    if seed is None:
        return None
    digest = hashlib.md5((str(seed) + salt).encode("utf-8")).hexdigest()
    return int(digest[:8], 16) & 0x7FFFFFFF


def broadcast_all(*tensors):
    """The tensors, each broadcast to the shape of their sum."""
    zero = kf.zeros_like(tensors[0])
    for t in tensors[1:]:
        zero = zero + kf.zeros_like(t)
    return [t + zero for t in tensors]


def fill_like(t, value, name=None):
    """A tensor of `t`'s shape and dtype filled with the Python number `value`."""
    return kf.fill(kf.shape(t), np.array(value, dtype=t.dtype.as_numpy_dtype), name=name)


def where_defined(cond, value, allow_nan_stats, message, name="nan"):
    """`value` where `cond` holds and NaN elsewhere, or `value` guarded by an assertion on `cond`."""
    if allow_nan_stats:
        return kf.where_v2(cond, value, fill_like(value, np.nan, name=name))
    return kf.with_dependencies([kf.Assert(kf.reduce_all(cond), [message])], value)


def same_float_dtype(tensors, op):
    """The shared floating dtype of `tensors` (ValueError naming `op` when they differ or are not)."""
    dtypes = {t.dtype.base_dtype for t in tensors}
    if len(dtypes) != 1:
        raise ValueError(f"{op}: parameters must share one float dtype, got "
                         f"{[t.dtype.name for t in tensors]}.")
    dtype = dtypes.pop()
    if not dtype.is_floating:
        raise ValueError(f"{op}: expected floating point parameters, got {dtype.name}.")
    return dtype


def with_checks(checks, validate_args, *tensors):
    """`tensors` behind the assertions `checks()` builds (when `validate_args`), else unchanged."""
    if not validate_args:
        return tensors if len(tensors) > 1 else tensors[0]
    deps = checks()
    out = [kf.with_dependencies(deps, t) for t in tensors]
    return out if len(out) > 1 else out[0]


def integer_form_checks(x, message):
    """Assertions that `x` is non-negative and integral."""
    return [kf.assert_non_negative(x, message=message),
            kf.assert_equal(x, kf.round(x), message=message)]


def ndtr(x):
    """The standard normal CDF, accurate in both tails (TF1 `special_math.ndtr`)."""
    half_sqrt_2 = np.array(0.5 * np.sqrt(2.), dtype=x.dtype.as_numpy_dtype)
    w = x * half_sqrt_2
    z = kf.abs(w)
    y = kf.where_v2(z < half_sqrt_2, 1. + kf.erf(w), kf.where_v2(w > 0., 2. - kf.erfc(z), kf.erfc(z)))
    return 0.5 * y


def log_ndtr(x, series_order=3):
    """``log(ndtr(x))``, with an asymptotic series far in the lower tail (TF1 `special_math.log_ndtr`)."""
    lower, upper = (-20., 8.) if x.dtype.base_dtype == kf.float64 else (-10., 5.)
    lower_x = kf.minimum(x, lower)
    x_2 = kf.square(lower_x)
    series, x_2n = 1., x_2
    for n in range(1, series_order + 1):
        term = float(np.prod(np.arange(2 * n - 1, 0, -2))) / x_2n
        series = series + term if n % 2 == 0 else series - term
        x_2n = x_2n * x_2
    tail = -0.5 * x_2 - kf.log(-lower_x) - 0.5 * np.log(2. * np.pi) + kf.log(series)
    middle = kf.log(ndtr(kf.maximum(x, lower)))
    return kf.where_v2(x > upper, -ndtr(-x), kf.where_v2(x > lower, middle, tail))


def static_batch_shape(*tensors):
    """The broadcast static shape of `tensors`."""
    shape = tensors[0].shape
    for t in tensors[1:]:
        shape = kf.broadcast_static_shape(shape, t.shape)
    return shape


def dynamic_batch_shape(*tensors):
    """The broadcast shape of `tensors`, as an int32 tensor."""
    shape = kf.shape(tensors[0])
    for t in tensors[1:]:
        shape = kf.broadcast_dynamic_shape(shape, kf.shape(t))
    return shape


# ---------------------------------------------------------------------------- the base class
class Distribution:
    """A batch of probability distributions (TF1 `tf.distributions.Distribution`).

    Args:
        dtype: the dtype of samples (and of `log_prob`'s argument).
        reparameterization_type: `FULLY_REPARAMETERIZED` or `NOT_REPARAMETERIZED`.
        validate_args: when True, parameters and arguments are checked by assertions that raise
            `InvalidArgumentError` (at once when the values are known while building).
        allow_nan_stats: when True, undefined statistics are NaN; when False they raise.
        parameters: the constructor's arguments (``dict(locals())``), kept for `copy`.
        graph_parents: the tensors the distribution is built from.
        name: the name scope of the distribution's ops; made unique unless it ends with ``/``.

    Raises:
        ValueError: a graph parent is not a Tensor.
    """

    def __init__(self, dtype, reparameterization_type, validate_args, allow_nan_stats, parameters=None,
                 graph_parents=None, name=None):
        graph_parents = [] if graph_parents is None else list(graph_parents)
        for i, t in enumerate(graph_parents):
            if t is None or not kf.is_tensor(t):
                raise ValueError(f"Graph parent item {i} is not a Tensor; {t}.")
        if not name or name[-1] != "/":
            with kf.name_scope(name or type(self).__name__) as name:
                pass
        self._dtype = dtype
        self._reparameterization_type = reparameterization_type
        self._allow_nan_stats = allow_nan_stats
        self._validate_args = validate_args
        self._parameters = parameters or {}
        self._graph_parents = graph_parents
        self._name = name

    # -- properties
    @property
    def name(self):
        """The name scope of the distribution's ops (ends with ``/``)."""
        return self._name

    @property
    def dtype(self):
        """The dtype of samples."""
        return self._dtype

    @property
    def parameters(self):
        """The constructor's arguments, as a dict."""
        return {k: v for k, v in self._parameters.items() if not k.startswith("__") and k != "self"}

    @property
    def reparameterization_type(self):
        """`FULLY_REPARAMETERIZED` when gradients flow from samples to parameters."""
        return self._reparameterization_type

    @property
    def allow_nan_stats(self):
        """Whether undefined statistics are NaN (True) or raise (False)."""
        return self._allow_nan_stats

    @property
    def validate_args(self):
        """Whether arguments are checked by assertions."""
        return self._validate_args

    @property
    def batch_shape(self):
        """The static `TensorShape` of the batch."""
        return kf.TensorShape(self._batch_shape())

    @property
    def event_shape(self):
        """The static `TensorShape` of one event."""
        return kf.TensorShape(self._event_shape())

    def copy(self, **override_parameters_kwargs):
        """A new distribution of this type built from `parameters` updated by the keyword arguments."""
        return type(self)(**dict(self.parameters, **override_parameters_kwargs))

    # -- shapes
    def batch_shape_tensor(self, name="batch_shape_tensor"):
        """The batch shape as a 1-D int32 tensor."""
        with self._name_scope(name):
            if self.batch_shape.is_fully_defined():
                return kf.constant(self.batch_shape.as_list(), dtype=kf.int32, name="batch_shape")
            return self._batch_shape_tensor()

    def event_shape_tensor(self, name="event_shape_tensor"):
        """The event shape as a 1-D int32 tensor."""
        with self._name_scope(name):
            if self.event_shape.is_fully_defined():
                return kf.constant(self.event_shape.as_list(), dtype=kf.int32, name="event_shape")
            return self._event_shape_tensor()

    def is_scalar_event(self, name="is_scalar_event"):
        """A bool tensor: whether the event shape is ``[]``."""
        with self._name_scope(name):
            return self._is_scalar(self.event_shape, self._event_shape_tensor)

    def is_scalar_batch(self, name="is_scalar_batch"):
        """A bool tensor: whether the batch shape is ``[]``."""
        with self._name_scope(name):
            return self._is_scalar(self.batch_shape, self._batch_shape_tensor)

    @staticmethod
    def _is_scalar(static_shape, dynamic_fn):
        if static_shape.ndims is not None:
            return kf.constant(static_shape.ndims == 0)
        return kf.equal(kf.size(dynamic_fn()), 0)

    @classmethod
    def param_shapes(cls, sample_shape, name="DistributionParamShapes"):
        """The shapes of the parameters that give samples of shape `sample_shape`, as int32 tensors."""
        with kf.name_scope(name, values=[sample_shape]):
            return cls._param_shapes(sample_shape)

    @classmethod
    def param_static_shapes(cls, sample_shape):
        """`param_shapes` as `TensorShape`s (ValueError unless `sample_shape` is fully known)."""
        if isinstance(sample_shape, kf.TensorShape):
            if not sample_shape.is_fully_defined():
                raise ValueError(f"TensorShape sample_shape must be fully defined, got {sample_shape}.")
            sample_shape = sample_shape.as_list()
        static = {}
        for param, shape in cls.param_shapes(sample_shape).items():
            value = kf.get_static_value(shape)
            if value is None:
                raise ValueError(f"sample_shape must be a fully-defined TensorShape or list/tuple, "
                                 f"got {sample_shape}.")
            static[param] = kf.TensorShape(value)
        return static

    # -- sampling
    def sample(self, sample_shape=(), seed=None, name="sample"):
        """Samples of shape ``sample_shape + batch_shape + event_shape``.

        Args:
            sample_shape: an int or 1-D int32 shape of independent draws.
            seed: the op seed of the random ops.
            name: the name scope of the ops.
        """
        with self._name_scope(name, values=[sample_shape]):
            sample_shape = kf.convert_to_tensor(sample_shape, dtype=kf.int32, name="sample_shape")
            static = kf.get_static_value(sample_shape)
            if static is not None:
                static = np.reshape(static, [-1])
                n = kf.constant(int(np.prod(static)), dtype=kf.int32, name="n")
                sample_shape = kf.constant(static, dtype=kf.int32, name="sample_shape_vector")
            else:
                sample_shape = kf.reshape(sample_shape, [-1])
                n = kf.reduce_prod(sample_shape)
            samples = self._sample_n(n, seed)
            final_shape = kf.concat([sample_shape, kf.shape(samples)[1:]], 0)
            samples = kf.reshape(samples, final_shape)
            if static is not None:
                samples.set_shape(kf.TensorShape([int(d) for d in static]).concatenate(
                    samples.shape[len(static):]))
            return samples

    # -- probabilities
    def _convert_value(self, value):
        return kf.convert_to_tensor(value, name="value", preferred_dtype=self.dtype)

    def _dispatch(self, method, name, value, direct, fallbacks):
        with self._name_scope(name, values=[] if value is None else [value]):
            args = () if value is None else (self._convert_value(value),)
            if self._implements(direct):
                return getattr(self, direct)(*args)
            for private, transform in fallbacks:
                if self._implements(private):
                    return transform(getattr(self, private)(*args))
            raise NotImplementedError(f"{method} is not implemented: {type(self).__name__}")

    def _implements(self, private):
        return getattr(type(self), private, None) is not getattr(Distribution, private, None)

    def log_prob(self, value, name="log_prob"):
        """The log of the probability (density or mass) of `value`."""
        return self._dispatch("log_prob", name, value, "_log_prob", [("_prob", kf.log)])

    def prob(self, value, name="prob"):
        """The probability (density or mass) of `value`."""
        return self._dispatch("prob", name, value, "_prob", [("_log_prob", kf.exp)])

    def log_cdf(self, value, name="log_cdf"):
        """``log P[X <= value]``."""
        return self._dispatch("log_cdf", name, value, "_log_cdf", [("_cdf", kf.log)])

    def cdf(self, value, name="cdf"):
        """``P[X <= value]``."""
        return self._dispatch("cdf", name, value, "_cdf", [("_log_cdf", kf.exp)])

    def log_survival_function(self, value, name="log_survival_function"):
        """``log P[X > value]``."""
        return self._dispatch("log_survival_function", name, value, "_log_survival_function",
                              [("_survival_function", kf.log), ("_cdf", lambda c: kf.log1p(-c)),
                               ("_log_cdf", lambda lc: kf.log1p(-kf.exp(lc)))])

    def survival_function(self, value, name="survival_function"):
        """``P[X > value] = 1 - cdf(value)``."""
        return self._dispatch("survival_function", name, value, "_survival_function",
                              [("_log_survival_function", kf.exp), ("_cdf", lambda c: 1. - c),
                               ("_log_cdf", lambda lc: 1. - kf.exp(lc))])

    def quantile(self, value, name="quantile"):
        """The inverse CDF at probability `value`."""
        return self._dispatch("quantile", name, value, "_quantile", [])

    # -- statistics
    def entropy(self, name="entropy"):
        """The Shannon entropy in nats."""
        return self._dispatch("entropy", name, None, "_entropy", [])

    def mean(self, name="mean"):
        """The mean."""
        return self._dispatch("mean", name, None, "_mean", [])

    def variance(self, name="variance"):
        """The variance (element-wise over the event)."""
        return self._dispatch("variance", name, None, "_variance", [("_stddev", kf.square)])

    def stddev(self, name="stddev"):
        """The standard deviation (element-wise over the event)."""
        return self._dispatch("stddev", name, None, "_stddev", [("_variance", kf.sqrt)])

    def covariance(self, name="covariance"):
        """The covariance matrix of the event (shape ``batch_shape + [k, k]``)."""
        return self._dispatch("covariance", name, None, "_covariance", [])

    def mode(self, name="mode"):
        """The mode."""
        return self._dispatch("mode", name, None, "_mode", [])

    def cross_entropy(self, other, name="cross_entropy"):
        """``H[self, other] = entropy(self) + KL(self || other)``."""
        from kernflow.core.distributions_impl import kullback_leibler
        with self._name_scope(name):
            return kullback_leibler.cross_entropy(self, other, allow_nan_stats=self.allow_nan_stats)

    def kl_divergence(self, other, name="kl_divergence"):
        """``KL(self || other)``, from the registered KL function of the two types."""
        from kernflow.core.distributions_impl import kullback_leibler
        with self._name_scope(name):
            return kullback_leibler.kl_divergence(self, other, allow_nan_stats=self.allow_nan_stats)

    # -- the private protocol (subclasses override what they implement)
    def _batch_shape(self):
        return kf.TensorShape(None)

    def _event_shape(self):
        return kf.TensorShape(None)

    def _batch_shape_tensor(self):
        raise NotImplementedError(f"batch_shape_tensor is not implemented: {type(self).__name__}")

    def _event_shape_tensor(self):
        raise NotImplementedError(f"event_shape_tensor is not implemented: {type(self).__name__}")

    def _sample_n(self, n, seed=None):
        raise NotImplementedError(f"sample_n is not implemented: {type(self).__name__}")

    @classmethod
    def _param_shapes(cls, sample_shape):
        raise NotImplementedError(f"_param_shapes not implemented: {cls.__name__}")

    _log_prob = _prob = _log_cdf = _cdf = _log_survival_function = _survival_function = None
    _quantile = _entropy = _mean = _variance = _stddev = _covariance = _mode = None

    @contextlib.contextmanager
    def _name_scope(self, name=None, values=None):
        with kf.name_scope(self.name):
            values = [v for v in (values or []) if kf.is_tensor(v)] + self._graph_parents
            with kf.name_scope(name, values=values) as scope:
                yield scope

    def __str__(self):
        return (f'kf.distributions.{type(self).__name__}("{self.name}", batch_shape={self.batch_shape}, '
                f"event_shape={self.event_shape}, dtype={self.dtype.name})")

    def __repr__(self):
        return (f"<kf.distributions.{type(self).__name__} '{self.name}' batch_shape={self.batch_shape} "
                f"event_shape={self.event_shape} dtype={self.dtype.name}>")
