"""TF1 variable initializers (`tf.compat.v1.*_initializer` and `tf.compat.v1.initializers`).

An initializer is a callable ``init(shape, dtype=None, partition_info=None)`` that builds and
returns a Tensor of that shape in the current graph. Random initializers build random ops with the
initializer's op-level ``seed`` (TF1 seed rules apply, see `kf.set_random_seed`), so a fresh
session re-running the same graph reproduces the values.
"""

from __future__ import annotations

import math
import types

import numpy as np

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework import tensor_util
from kernflow.core.ops import array_ops, math_ops, random_ops, variables

__all__ = ["zeros_initializer", "ones_initializer", "constant_initializer",
           "random_normal_initializer", "truncated_normal_initializer",
           "random_uniform_initializer", "uniform_unit_scaling_initializer",
           "variance_scaling_initializer", "glorot_uniform_initializer",
           "glorot_normal_initializer", "orthogonal_initializer", "identity_initializer",
           "he_normal", "he_uniform", "lecun_normal", "lecun_uniform", "initializers"]

# Standard deviation of the standard normal truncated to [-2, 2].
_TRUNCATED_NORMAL_STDDEV = 0.87962566103423978


def _assert_float_dtype(dtype) -> _dtypes.DType:
    dtype = _dtypes.as_dtype(dtype)
    if not dtype.is_floating:
        raise ValueError(f"Expected floating point type, got {dtype}.")
    return dtype


def _shape_list(shape) -> list:
    """A static shape as a list of ints (a Tensor shape must have a constant value)."""
    if isinstance(shape, _ops.Tensor):
        value = tensor_util.constant_value(shape)
        if value is None:
            raise ValueError(f"The shape of an initializer must be static, got {shape}")
        return [int(d) for d in np.reshape(value, [-1])]
    if isinstance(shape, (int, np.integer)):
        return [int(shape)]
    return _ts.as_shape(shape).as_list()


def _compute_fans(shape) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight shape; conv kernels count the receptive field.

    A kernel of shape ``(..., input_depth, depth)`` has fan_in ``input_depth * prod(...)`` and
    fan_out ``depth * prod(...)``.
    """
    if len(shape) < 1:
        fan_in = fan_out = 1
    elif len(shape) == 1:
        fan_in = fan_out = shape[0]
    elif len(shape) == 2:
        fan_in, fan_out = shape[0], shape[1]
    else:
        receptive_field = 1
        for d in shape[:-2]:
            receptive_field *= d
        fan_in = shape[-2] * receptive_field
        fan_out = shape[-1] * receptive_field
    return int(fan_in), int(fan_out)


def _scale_shape(shape, partition_info):
    if partition_info is not None:
        return _shape_list(partition_info.full_shape)
    return _shape_list(shape)


class Initializer:
    """Base class of the initializers: ``init(shape, dtype=None, partition_info=None)``."""

    def __call__(self, shape, dtype=None, partition_info=None):
        raise NotImplementedError

    def get_config(self) -> dict:
        """The constructor arguments, such that ``cls.from_config(init.get_config())`` rebuilds it."""
        return {}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


class Zeros(Initializer):
    """Initializes to zeros (TF1 `tf.zeros_initializer`).

    Args:
        dtype: default element type of the result (overridden by the call's `dtype`).
    """

    def __init__(self, dtype=_dtypes.float32):
        self.dtype = _dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = self.dtype if dtype is None else _dtypes.as_dtype(dtype)
        return array_ops.zeros(shape, dtype)

    def get_config(self):
        return {"dtype": self.dtype.name}


class Ones(Initializer):
    """Initializes to ones (TF1 `tf.ones_initializer`).

    Args:
        dtype: default element type of the result (overridden by the call's `dtype`).
    """

    def __init__(self, dtype=_dtypes.float32):
        self.dtype = _dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = self.dtype if dtype is None else _dtypes.as_dtype(dtype)
        return array_ops.ones(shape, dtype)

    def get_config(self):
        return {"dtype": self.dtype.name}


class Constant(Initializer):
    """Initializes to a constant (TF1 `tf.constant_initializer`).

    A scalar `value` fills the whole tensor. A list/array gives the values in row-major order; if
    it has fewer elements than the shape, its last element fills the rest (TF1 `constant`). For a
    part of a partitioned variable (`partition_info` given) a list/array describes the *full*
    variable and the part gets its slice of it (a kernflow extension: TF1 errors instead).

    Args:
        value: a Python scalar, list or tuple of values, or a numpy array.
        dtype: default element type of the result.
        verify_shape: if True, `value`'s shape must equal the requested shape.

    Raises:
        TypeError: if `value` is not a scalar, list, tuple or ndarray.
    """

    def __init__(self, value=0, dtype=_dtypes.float32, verify_shape=False):
        if not (np.isscalar(value) or isinstance(value, (list, tuple, np.ndarray))):
            raise TypeError(f"Invalid type for initial value: {type(value)} (expected Python scalar, "
                            "list or tuple of values, or numpy.ndarray).")
        self.value = value
        self.dtype = _dtypes.as_dtype(dtype)
        self._verify_shape = verify_shape

    def __call__(self, shape, dtype=None, partition_info=None, verify_shape=None):
        dtype = self.dtype if dtype is None else _dtypes.as_dtype(dtype)
        if verify_shape is None:
            verify_shape = self._verify_shape
        dims = _shape_list(shape)
        arr = tensor_util.to_numpy(self.value, dtype)
        if partition_info is not None and arr.size > 1:
            arr = _part_of_value(arr, dims, partition_info)
        if verify_shape and list(arr.shape) != dims:
            raise TypeError(f"Expected Tensor's shape: {tuple(dims)}, got {arr.shape}.")
        size = int(np.prod(dims, dtype=np.int64))
        if size == 0:
            return array_ops.constant(np.zeros(dims, dtype=arr.dtype), dtype=dtype)
        if arr.size > size:
            raise ValueError(f"Too many elements provided. Needed at most {size}, but received "
                             f"{arr.size}")
        if arr.size != size:
            flat = arr.reshape([-1])
            if flat.size == 0:
                raise ValueError(f"Cannot fill a tensor of shape {tuple(dims)} from an empty value")
            arr = np.concatenate([flat, np.repeat(flat[-1:], size - flat.size)])
        return array_ops.constant(arr.reshape(dims), dtype=dtype)

    def get_config(self):
        return {"value": self.value, "dtype": self.dtype.name}


def _part_of_value(arr, dims, partition_info):
    """The part of a full-variable value at `partition_info`'s offset (the value's row-major
    elements, padded with its last one as `Constant` does, laid out in the full shape)."""
    full = _shape_list(partition_info.full_shape)
    size = int(np.prod(full, dtype=np.int64))
    if arr.size > size:
        raise ValueError(f"Too many elements provided. Needed at most {size}, but received "
                         f"{arr.size}")
    flat = arr.reshape([-1])
    if flat.size != size:
        flat = np.concatenate([flat, np.repeat(flat[-1:], size - flat.size)])
    idx = tuple(slice(o, o + d) for o, d in zip(partition_info.var_offset, dims))
    return flat.reshape(full)[idx]


class RandomUniform(Initializer):
    """Initializes with uniform random values in [minval, maxval) (TF1 `random_uniform_initializer`).

    Args:
        minval: lower bound (inclusive).
        maxval: upper bound (exclusive); None means 1 for floats (required for integer dtypes).
        seed: op-level seed of the random op.
        dtype: default element type (floats or int32/int64).
    """

    def __init__(self, minval=0, maxval=None, seed=None, dtype=_dtypes.float32):
        self.minval = minval
        self.maxval = maxval
        self.seed = seed
        self.dtype = _dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = self.dtype if dtype is None else _dtypes.as_dtype(dtype)
        return random_ops.random_uniform(shape, self.minval, self.maxval, dtype, seed=self.seed)

    def get_config(self):
        return {"minval": self.minval, "maxval": self.maxval, "seed": self.seed,
                "dtype": self.dtype.name}


class RandomNormal(Initializer):
    """Initializes with normal random values (TF1 `random_normal_initializer`).

    Args:
        mean: mean of the distribution.
        stddev: standard deviation of the distribution.
        seed: op-level seed of the random op.
        dtype: default floating point element type.
    """

    _sample = staticmethod(random_ops.random_normal)

    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=_dtypes.float32):
        self.mean = mean
        self.stddev = stddev
        self.seed = seed
        self.dtype = _assert_float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = self.dtype if dtype is None else _dtypes.as_dtype(dtype)
        return self._sample(shape, self.mean, self.stddev, dtype, seed=self.seed)

    def get_config(self):
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed,
                "dtype": self.dtype.name}


class TruncatedNormal(RandomNormal):
    """Initializes with a normal distribution truncated to mean ± 2 stddev.

    TF1 `truncated_normal_initializer`; `stddev` is that of the normal before truncation.

    Args:
        mean: mean of the distribution.
        stddev: standard deviation of the untruncated distribution.
        seed: op-level seed of the random op.
        dtype: default floating point element type.
    """

    _sample = staticmethod(random_ops.truncated_normal)


class UniformUnitScaling(Initializer):
    """Uniform in ±sqrt(3 / input_size) * factor, input_size the product of all dims but the last.

    TF1 `uniform_unit_scaling_initializer` (deprecated there in favour of variance scaling).

    Args:
        factor: multiplicative factor of the range.
        seed: op-level seed of the random op.
        dtype: default floating point element type.
    """

    def __init__(self, factor=1.0, seed=None, dtype=_dtypes.float32):
        self.factor = factor
        self.seed = seed
        self.dtype = _assert_float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = self.dtype if dtype is None else _dtypes.as_dtype(dtype)
        input_size = 1.0
        for d in _scale_shape(shape, partition_info)[:-1]:
            input_size *= float(d)
        max_val = math.sqrt(3 / max(input_size, 1.0)) * self.factor
        return random_ops.random_uniform(shape, -max_val, max_val, dtype, seed=self.seed)

    def get_config(self):
        return {"factor": self.factor, "seed": self.seed, "dtype": self.dtype.name}


class VarianceScaling(Initializer):
    """Scales its distribution to the shape of the weights (TF1 `variance_scaling_initializer`).

    With ``n`` the fan_in, fan_out or their average (per `mode`) and ``s = scale / max(1, n)``:
    "truncated_normal" (and its v1 alias "normal") draws a normal truncated to ±2 stddev with
    stddev ``sqrt(s) / 0.8796...`` (so the truncated result has variance ``s``);
    "untruncated_normal" a normal with stddev ``sqrt(s)``; "uniform" draws in ±``sqrt(3 s)``.

    Args:
        scale: positive scaling factor.
        mode: "fan_in", "fan_out" or "fan_avg".
        distribution: "truncated_normal", "normal", "untruncated_normal" or "uniform".
        seed: op-level seed of the random op.
        dtype: default floating point element type.

    Raises:
        ValueError: on a non-positive scale or an unknown mode or distribution.
    """

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None,
                 dtype=_dtypes.float32):
        if scale <= 0.0:
            raise ValueError("`scale` must be positive float.")
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(f"Invalid `mode` argument: {mode}")
        distribution = distribution.lower()
        if distribution not in ("normal", "uniform", "truncated_normal", "untruncated_normal"):
            raise ValueError(f"Invalid `distribution` argument: {distribution}")
        self.scale = scale
        self.mode = mode
        self.distribution = distribution
        self.seed = seed
        self.dtype = _assert_float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = self.dtype if dtype is None else _dtypes.as_dtype(dtype)
        fan_in, fan_out = _compute_fans(_scale_shape(shape, partition_info))
        scale = self.scale
        if self.mode == "fan_in":
            scale /= max(1.0, fan_in)
        elif self.mode == "fan_out":
            scale /= max(1.0, fan_out)
        else:
            scale /= max(1.0, (fan_in + fan_out) / 2.0)
        if self.distribution in ("normal", "truncated_normal"):
            stddev = math.sqrt(scale) / _TRUNCATED_NORMAL_STDDEV
            return random_ops.truncated_normal(shape, 0.0, stddev, dtype, seed=self.seed)
        if self.distribution == "untruncated_normal":
            return random_ops.random_normal(shape, 0.0, math.sqrt(scale), dtype, seed=self.seed)
        limit = math.sqrt(3.0 * scale)
        return random_ops.random_uniform(shape, -limit, limit, dtype, seed=self.seed)

    def get_config(self):
        return {"scale": self.scale, "mode": self.mode, "distribution": self.distribution,
                "seed": self.seed, "dtype": self.dtype.name}


class GlorotUniform(VarianceScaling):
    """Glorot (Xavier) uniform: uniform in ±sqrt(6 / (fan_in + fan_out)).

    Args:
        seed: op-level seed of the random op.
        dtype: default floating point element type.
    """

    def __init__(self, seed=None, dtype=_dtypes.float32):
        super().__init__(scale=1.0, mode="fan_avg", distribution="uniform", seed=seed, dtype=dtype)

    def get_config(self):
        return {"seed": self.seed, "dtype": self.dtype.name}


class GlorotNormal(VarianceScaling):
    """Glorot (Xavier) normal: truncated normal with variance 2 / (fan_in + fan_out).

    Args:
        seed: op-level seed of the random op.
        dtype: default floating point element type.
    """

    def __init__(self, seed=None, dtype=_dtypes.float32):
        super().__init__(scale=1.0, mode="fan_avg", distribution="truncated_normal", seed=seed,
                         dtype=dtype)

    def get_config(self):
        return {"seed": self.seed, "dtype": self.dtype.name}


def _kf_function(*names):
    """The first of `names` found in the `kf` namespace (ops other families may provide)."""
    import kernflow.core as kf
    for n in names:
        fn = getattr(kf, n, None)
        if fn is None and getattr(kf, "linalg", None) is not None:
            fn = getattr(kf.linalg, n, None)
        if fn is not None:
            return fn
    return None


class Orthogonal(Initializer):
    """A (semi-)orthogonal matrix from the QR decomposition of a normal random matrix.

    Shapes of rank > 2 are flattened to ``(prod(shape[:-1]), shape[-1])``. Needs `kf.qr`.

    Args:
        gain: multiplicative factor of the result.
        seed: op-level seed of the random op.
        dtype: default floating point element type.
    """

    def __init__(self, gain=1.0, seed=None, dtype=_dtypes.float32):
        self.gain = gain
        self.seed = seed
        self.dtype = _assert_float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = self.dtype if dtype is None else _dtypes.as_dtype(dtype)
        dims = _shape_list(shape)
        if len(dims) < 2:
            raise ValueError("The tensor to initialize must be at least two-dimensional")
        qr = _kf_function("qr")
        if qr is None:
            raise NotImplementedError("orthogonal_initializer needs the Qr op (kf.qr), which is "
                                      "not available")
        num_rows = int(np.prod(dims[:-1], dtype=np.int64))
        num_cols = int(dims[-1])
        flat = (num_cols, num_rows) if num_rows < num_cols else (num_rows, num_cols)
        a = random_ops.random_normal(flat, dtype=dtype, seed=self.seed)
        q, r = qr(a, full_matrices=False)
        k = min(flat)
        # diag(r) as a reduction against the identity, so no diag op is needed.
        d = math_ops.reduce_sum(r * array_ops.constant(np.eye(k), dtype=dtype), axis=0)
        q = q * math_ops.sign(d)
        if num_rows < num_cols:
            q = array_ops.transpose(q)
        return self.gain * array_ops.reshape(q, dims)

    def get_config(self):
        return {"gain": self.gain, "seed": self.seed, "dtype": self.dtype.name}


class Identity(Initializer):
    """The identity matrix times `gain` (2-D shapes only; TF1 `identity_initializer`).

    Args:
        gain: multiplicative factor of the identity.
        dtype: default element type.
    """

    def __init__(self, gain=1.0, dtype=_dtypes.float32):
        self.gain = gain
        self.dtype = _assert_float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dims = _scale_shape(shape, partition_info)
        if len(dims) != 2:
            raise ValueError("Identity matrix initializer can only be used for 2D matrices.")
        dtype = self.dtype if dtype is None else _dtypes.as_dtype(dtype)
        eye = np.eye(dims[0], dims[1])
        if partition_info is not None:
            off = list(partition_info.var_offset)
            part = _shape_list(shape)
            eye = eye[off[0]:off[0] + part[0], off[1]:off[1] + part[1]]
        return self.gain * array_ops.constant(eye, dtype=dtype)

    def get_config(self):
        return {"gain": self.gain, "dtype": self.dtype.name}


def he_normal(seed=None):
    """He normal: truncated normal with variance 2 / fan_in."""
    return VarianceScaling(scale=2.0, mode="fan_in", distribution="truncated_normal", seed=seed)


def he_uniform(seed=None):
    """He uniform: uniform in ±sqrt(6 / fan_in)."""
    return VarianceScaling(scale=2.0, mode="fan_in", distribution="uniform", seed=seed)


def lecun_normal(seed=None):
    """LeCun normal: truncated normal with variance 1 / fan_in."""
    return VarianceScaling(scale=1.0, mode="fan_in", distribution="truncated_normal", seed=seed)


def lecun_uniform(seed=None):
    """LeCun uniform: uniform in ±sqrt(3 / fan_in)."""
    return VarianceScaling(scale=1.0, mode="fan_in", distribution="uniform", seed=seed)


# TF1 exports the classes under these names.
zeros_initializer = Zeros
ones_initializer = Ones
constant_initializer = Constant
random_uniform_initializer = RandomUniform
random_normal_initializer = RandomNormal
truncated_normal_initializer = TruncatedNormal
uniform_unit_scaling_initializer = UniformUnitScaling
variance_scaling_initializer = VarianceScaling
glorot_uniform_initializer = GlorotUniform
glorot_normal_initializer = GlorotNormal
orthogonal_initializer = Orthogonal
identity_initializer = Identity

# `kf.initializers.*`: the names of tf.compat.v1.initializers.
initializers = types.SimpleNamespace(
    Initializer=Initializer, zeros=Zeros, ones=Ones, constant=Constant,
    random_uniform=RandomUniform, random_normal=RandomNormal, truncated_normal=TruncatedNormal,
    uniform_unit_scaling=UniformUnitScaling, variance_scaling=VarianceScaling,
    glorot_uniform=GlorotUniform, glorot_normal=GlorotNormal, orthogonal=Orthogonal,
    identity=Identity, he_normal=he_normal, he_uniform=he_uniform, lecun_normal=lecun_normal,
    lecun_uniform=lecun_uniform, global_variables=variables.global_variables_initializer,
    local_variables=variables.local_variables_initializer,
    variables=variables.variables_initializer)
