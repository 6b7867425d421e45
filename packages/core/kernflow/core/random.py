"""`kf.random`: TF1's `tf.random` namespace (tf.compat.v1.random).

The stateful samplers of kernflow.core.ops.random_ops and the candidate samplers are re-exported;
gamma, poisson, the stateless samplers, fold_in and split are defined here over OpDefs declared in
kernflow.core.ops.math_ops_more (kernels: kernflow.kernels.cpu.math_more).

Stateless samplers are deterministic functions of their `seed` (shape [2], int32 or int64): the
same seed gives the same values in any session and process. Their streams come from numpy's
Philox generator keyed by the seed, so the values do NOT match TensorFlow's bit for bit.

Not available: Algorithm, Generator, create_rng_state, get_global_generator,
set_global_generator and the `experimental` submodule.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework.op_def_library import apply_op
from kernflow.core.framework.random_seed import get_seed, set_random_seed
from kernflow.core.ops import math_ops_more as _more  # noqa: F401 - declares the OpDefs
from kernflow.core.ops.candidate_sampling_ops import (all_candidate_sampler,
                                                      fixed_unigram_candidate_sampler,
                                                      learned_unigram_candidate_sampler,
                                                      log_uniform_candidate_sampler,
                                                      uniform_candidate_sampler)
from kernflow.core.ops.random_ops import _float_dtype, _seed_attrs, _shape_tensor, categorical, multinomial
from kernflow.core.ops.random_ops import random_normal as normal
from kernflow.core.ops.random_ops import random_shuffle as shuffle
from kernflow.core.ops.random_ops import random_uniform as uniform
from kernflow.core.ops.random_ops import truncated_normal

__all__ = ["all_candidate_sampler", "categorical", "fixed_unigram_candidate_sampler", "fold_in", "gamma",
           "get_seed", "learned_unigram_candidate_sampler", "log_uniform_candidate_sampler", "multinomial",
           "normal", "poisson", "set_random_seed", "shuffle", "split", "stateless_binomial",
           "stateless_categorical", "stateless_gamma", "stateless_multinomial", "stateless_normal",
           "stateless_parameterized_truncated_normal", "stateless_poisson", "stateless_truncated_normal",
           "stateless_uniform", "truncated_normal", "uniform", "uniform_candidate_sampler"]

_NUMERIC = (_dtypes.float16, _dtypes.float32, _dtypes.float64, _dtypes.int32, _dtypes.int64)


def _out(op_type, inputs, attrs=None, name=None):
    return apply_op(op_type, inputs, attrs, name=name).outputs[0]


def _tiny_floor(x, dt, name):
    from kernflow.core.ops import math_ops
    tiny = _ops.convert_to_tensor(np.finfo(dt.as_numpy_dtype).tiny, dtype=dt)
    return math_ops.maximum(tiny, x, name=name)


def _check_dtype(dt, fn, allowed=_NUMERIC):
    dt = _dtypes.as_dtype(dt).base_dtype
    if dt not in allowed:
        raise ValueError(f"Invalid dtype {dt.name} for {fn}: expected one of "
                         f"{', '.join(d.name for d in allowed)}")
    return dt


def gamma(shape, alpha, beta=None, dtype=_dtypes.float32, seed=None, name=None):
    """Draws samples from Gamma(alpha, beta) distributions (rate parameterization).

    Args:
        shape: 1-D ints: the shape of the draws per distribution.
        alpha: the concentration(s), broadcasting with beta.
        beta: the rate(s) (default 1).
        dtype: float16, float32 or float64.
        seed: op-level seed (see `set_random_seed`).
        name: optional name scope (default "random_gamma").

    Returns:
        shape + broadcast(alpha, beta).shape samples, at least the smallest normal float. The
        samples are differentiable with respect to alpha and beta (implicit reparameterization).
    """
    from kernflow.core.ops import array_ops, math_ops
    dt = _float_dtype(dtype, "random_gamma")
    with _ops.name_scope(name, "random_gamma", [shape, alpha, beta]) as name:
        shape_t = _shape_tensor(shape)
        alpha = _ops.convert_to_tensor(alpha, dtype=dt, name="alpha")
        beta = _ops.convert_to_tensor(1 if beta is None else beta, dtype=dt, name="beta")
        alpha_b = math_ops.add(alpha, array_ops.zeros_like(beta))
        sample = _out("RandomGamma", [shape_t, alpha_b], _seed_attrs(seed))
        return _tiny_floor(math_ops.divide(sample, beta), dt, name)


def poisson(lam, shape, dtype=_dtypes.float32, seed=None, name=None):
    """Draws samples from Poisson(lam) distributions.

    Args:
        lam: the rate(s) (float or int).
        shape: 1-D ints: the shape of the draws per rate.
        dtype: float16, float32, float64, int32 or int64.
        seed: op-level seed (see `set_random_seed`).
        name: optional name scope (default "random_poisson").

    Returns:
        shape + lam.shape samples of `dtype`.
    """
    dt = _check_dtype(dtype, "random_poisson")
    with _ops.name_scope(name, "random_poisson", [lam, shape]) as name:
        lam = _ops.convert_to_tensor(lam, name="lam", preferred_dtype=_dtypes.float32)
        _check_dtype(lam.dtype, "random_poisson (lam)")
        return _out("RandomPoissonV2", [_shape_tensor(shape), lam], dict(_seed_attrs(seed), dtype=dt), name)


def random_crop(value, size, seed=None, name=None):
    """Randomly crops `value` to `size`: one uniformly chosen offset per call.

    Args:
        value: the Tensor to crop.
        size: 1-D ints, one per dimension of value, each at most value's.
        seed: op-level seed.
        name: optional name scope (default "random_crop").

    Raises:
        InvalidArgumentError (at run time): size exceeds value's shape.
    """
    from kernflow.core.ops import array_ops, check_ops, random_ops
    with _ops.name_scope(name, "random_crop", [value, size]) as name:
        value = _ops.convert_to_tensor(value, name="value")
        size = _ops.convert_to_tensor(size, dtype=_dtypes.int32, name="size")
        shape = array_ops.shape(value)
        check = check_ops.assert_less_equal(size, shape, message="Need value.shape >= size, got ")
        with _ops.control_dependencies([check]):
            limit = shape - size + 1
        offset = random_ops.random_uniform(array_ops.shape(size), dtype=_dtypes.int32,
                                           maxval=np.iinfo(np.int32).max, seed=seed) % limit
        return array_ops.slice(value, offset, size, name=name)


def _seed(seed):
    s = _ops.convert_to_tensor(seed, name="seed")
    if s.dtype.base_dtype not in (_dtypes.int32, _dtypes.int64):
        raise TypeError(f"seed must be int32 or int64, got {s.dtype.name}")
    s.shape.with_rank(1).merge_with([2])
    return s


def stateless_uniform(shape, seed, minval=0, maxval=None, dtype=_dtypes.float32, name=None,
                      alg="auto_select"):
    """Uniform values over [minval, maxval), a deterministic function of `seed`.

    Floats default to [0, 1). Integers need maxval, or both bounds None for the whole range of
    int32, int64, uint32 or uint64.

    Args:
        shape: 1-D ints.
        seed: shape [2] int32/int64.
        minval, maxval: the bounds.
        dtype: float16/32/64, int32/64 (uint32/64 only for the full range).
        name: optional name scope.
        alg: ignored (kernflow has one algorithm).

    Raises:
        ValueError: an integer dtype with maxval None and minval not None.
    """
    from kernflow.core.ops import math_ops
    dt = _dtypes.as_dtype(dtype).base_dtype
    with _ops.name_scope(name, "stateless_random_uniform", [shape, seed, minval, maxval]) as name:
        shape_t, s = _shape_tensor(shape), _seed(seed)
        if dt.is_integer:
            if minval is None and maxval is None:
                return _out("StatelessRandomUniformFullInt", [shape_t, s], {"dtype": dt}, name)
            if maxval is None:
                raise ValueError(f"Must specify maxval for integer dtype {dt.name}")
            _check_dtype(dt, "stateless_uniform", (_dtypes.int32, _dtypes.int64))
            lo = _ops.convert_to_tensor(minval, dtype=dt, name="min")
            hi = _ops.convert_to_tensor(maxval, dtype=dt, name="max")
            return _out("StatelessRandomUniformInt", [shape_t, s, lo, hi], None, name)
        dt = _float_dtype(dt, "stateless_uniform")
        rnd = _out("StatelessRandomUniform", [shape_t, s], {"dtype": dt})
        lo = _ops.convert_to_tensor(0 if minval is None else minval, dtype=dt, name="min")
        hi = _ops.convert_to_tensor(1 if maxval is None else maxval, dtype=dt, name="max")
        return math_ops.add(rnd * (hi - lo), lo, name=name)


def _stateless_scaled(op_type, default_name, shape, seed, mean, stddev, dtype, name):
    from kernflow.core.ops import math_ops
    dt = _float_dtype(dtype, default_name)
    with _ops.name_scope(name, default_name, [shape, seed, mean, stddev]) as name:
        rnd = _out(op_type, [_shape_tensor(shape), _seed(seed)], {"dtype": dt})
        mean = _ops.convert_to_tensor(mean, dtype=dt, name="mean")
        stddev = _ops.convert_to_tensor(stddev, dtype=dt, name="stddev")
        return math_ops.add(rnd * stddev, mean, name=name)


def stateless_normal(shape, seed, mean=0.0, stddev=1.0, dtype=_dtypes.float32, name=None, alg="auto_select"):
    """Normal(mean, stddev) values, a deterministic function of `seed` (shape [2])."""
    return _stateless_scaled("StatelessRandomNormal", "stateless_random_normal", shape, seed, mean, stddev,
                             dtype, name)


def stateless_truncated_normal(shape, seed, mean=0.0, stddev=1.0, dtype=_dtypes.float32, name=None,
                               alg="auto_select"):
    """Normal(mean, stddev) values within 2 stddev of the mean, a deterministic function of `seed`."""
    return _stateless_scaled("StatelessTruncatedNormal", "stateless_truncated_normal", shape, seed, mean,
                             stddev, dtype, name)


def stateless_parameterized_truncated_normal(shape, seed, means=0.0, stddevs=1.0, minvals=-2.0, maxvals=2.0,
                                             name=None):
    """Normal(means, stddevs) values truncated to [minvals, maxvals], a deterministic function of `seed`.

    Args:
        shape: 1-D ints: the output's shape.
        seed: shape [2] int32 or int64 Tensor.
        means, stddevs, minvals, maxvals: float16, float32 or float64 values (of the first one's
            type, float32 for Python numbers) that broadcast together to a shape `shape` dominates;
            stddevs > 0, minvals < maxvals (either may be infinite).
        name: optional name scope (default "stateless_parameterized_truncated_normal").

    Returns:
        A Tensor of `shape` and the parameters' dtype, differentiable with respect to the four
        parameters (implicit reparameterization, as TF's gradient).

    Raises:
        InvalidArgumentError (at run time): the parameters do not broadcast to shape, or are invalid.
    """
    with _ops.name_scope(name, "stateless_parameterized_truncated_normal",
                         [shape, means, stddevs, minvals, maxvals]) as name:
        first = _ops.convert_to_tensor(means, name="means", preferred_dtype=_dtypes.float32)
        dt = _float_dtype(first.dtype, "stateless_parameterized_truncated_normal")
        params = [first] + [_ops.convert_to_tensor(v, dtype=dt, name=n)
                            for v, n in ((stddevs, "stddevs"), (minvals, "minvals"), (maxvals, "maxvals"))]
        return _out("StatelessParameterizedTruncatedNormal", [_shape_tensor(shape), _seed(seed)] + params,
                    name=name)

def _stateless_multinomial(logits, num_samples, seed, dtype, name, default_name):
    with _ops.name_scope(name, default_name, [logits, seed]) as name:
        logits = _ops.convert_to_tensor(logits, name="logits")
        n = _ops.convert_to_tensor(num_samples, dtype=_dtypes.int32, name="num_samples")
        return _out("StatelessMultinomial", [logits, n, _seed(seed)],
                    {"output_dtype": _dtypes.as_dtype(dtype)}, name)


def stateless_categorical(logits, num_samples, seed, dtype=_dtypes.int64, name=None):
    """Class ids [batch_size, num_samples] drawn from logits [batch_size, num_classes], a
    deterministic function of `seed` (shape [2])."""
    return _stateless_multinomial(logits, num_samples, seed, dtype, name, "stateless_categorical")


def stateless_multinomial(logits, num_samples, seed, output_dtype=_dtypes.int64, name=None):
    """As `stateless_categorical` (TF1's name)."""
    return _stateless_multinomial(logits, num_samples, seed, output_dtype, name, "stateless_multinomial")


def stateless_binomial(shape, seed, counts, probs, output_dtype=_dtypes.int32, name=None):
    """Binomial(counts, probs) draws (both broadcast to `shape`), a deterministic function of `seed`.

    Args:
        shape: 1-D ints.
        seed: shape [2] int32/int64.
        counts: trial counts, probs: success probabilities (one float or int dtype).
        output_dtype: float16/32/64, int32 or int64.
        name: optional name scope.
    """
    dt = _check_dtype(output_dtype, "stateless_binomial")
    with _ops.name_scope(name, "stateless_random_binomial", [shape, seed, counts, probs]) as name:
        probs = _ops.convert_to_tensor(probs, name="probs", preferred_dtype=_dtypes.float32)
        counts = _ops.convert_to_tensor(counts, name="counts", dtype=probs.dtype.base_dtype)
        return _out("StatelessRandomBinomial", [_shape_tensor(shape), _seed(seed), counts, probs],
                    {"dtype": dt}, name)


def stateless_gamma(shape, seed, alpha, beta=None, dtype=_dtypes.float32, name=None):
    """Gamma(alpha, beta) draws (alpha and beta broadcast to `shape`), a deterministic function of
    `seed` (shape [2]); differentiable with respect to alpha and beta."""
    from kernflow.core.ops import array_ops, math_ops
    dt = _float_dtype(dtype, "stateless_gamma")
    with _ops.name_scope(name, "stateless_random_gamma", [shape, seed, alpha, beta]) as name:
        shape_t = _shape_tensor(shape)
        alpha = _ops.convert_to_tensor(alpha, dtype=dt, name="alpha")
        beta = _ops.convert_to_tensor(1 if beta is None else beta, dtype=dt, name="beta")
        alpha_b = array_ops.broadcast_to(alpha, shape_t)
        sample = _out("StatelessRandomGammaV2", [shape_t, _seed(seed), alpha_b])
        return _tiny_floor(math_ops.divide(sample, beta), dt, name)


def stateless_poisson(shape, seed, lam, dtype=_dtypes.int32, name=None):
    """Poisson(lam) draws (lam broadcasts to `shape`), a deterministic function of `seed`."""
    dt = _check_dtype(dtype, "stateless_poisson")
    with _ops.name_scope(name, "stateless_random_poisson", [shape, seed, lam]) as name:
        lam = _ops.convert_to_tensor(lam, name="lam", preferred_dtype=_dtypes.float32)
        return _out("StatelessRandomPoisson", [_shape_tensor(shape), _seed(seed), lam], {"dtype": dt}, name)


def split(seed, num=2, alg="auto_select"):
    """Returns `num` new seeds [num, 2] (seed's dtype), a deterministic function of `seed`."""
    s = _seed(seed)
    return _out("StatelessRandomUniformFullInt", [_shape_tensor([int(num), 2]), s],
                {"dtype": s.dtype.base_dtype})


def fold_in(seed, data, alg="auto_select"):
    """Returns the seed [2] derived from `seed` and the int scalar `data` (data's dtype): a new
    stream per data value, as for per-replica or per-step seeds."""
    from kernflow.core.ops import array_ops
    data = _ops.convert_to_tensor(data, name="data")
    if data.dtype.base_dtype not in (_dtypes.int32, _dtypes.int64):
        raise TypeError(f"fold_in: data must be int32 or int64, got {data.dtype.name}")
    first = _out("StatelessRandomUniformFullInt", [_shape_tensor([]), _seed(seed)],
                 {"dtype": data.dtype.base_dtype})
    return array_ops.stack([first, data])
