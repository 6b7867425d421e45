"""Math functions composed exactly from existing ops: safe products, moments and norms, counting
(bincount, confusion_matrix), segment means, monotonicity tests and polynomials.

They add no op types (so no kernels or gradient functions of their own): their gradients are
those of the ops they emit. The TF1 top-level names in ``__all__`` become kf.<name>;
kernflow.core.math re-exports the rest.
"""

from __future__ import annotations

from kernflow.core.framework import dtypes as _dtypes
from kernflow.core.framework import ops as _ops
from kernflow.core.ops import array_ops as _array
from kernflow.core.ops import math_ops as _math
from kernflow.core.ops import math_ops_special as _special
from kernflow.core.ops import segment_ops as _segment

__all__ = ["accumulate_n", "bincount", "confusion_matrix", "unsorted_segment_mean", "real", "imag", "angle",
           "unsorted_segment_sqrt_n", "is_non_decreasing", "is_strictly_increasing"]


def _zero(x):
    return _array.zeros([], x.dtype.base_dtype)


def multiply_no_nan(x, y, name=None):
    """Returns x * y elementwise, with 0 where y == 0 even if x is inf or nan.

    Args:
        x: a floating Tensor.
        y: a Tensor of x's dtype.
        name: optional name scope (default "multiply_no_nan").
    """
    with _ops.name_scope(name, "multiply_no_nan", [x, y]) as name:
        x = _ops.convert_to_tensor(x, name="x")
        y = _ops.convert_to_tensor(y, name="y", dtype=x.dtype.base_dtype)
        zero = _math.equal(y, _zero(y))
        safe_x = _math.where_v2(zero, _array.zeros_like(x), x)
        return _math.where_v2(zero, _zero(x), safe_x * y, name=name)


def reciprocal_no_nan(x, name=None):
    """Returns 1 / x elementwise, with 0 where x == 0 (op `DivNoNan`)."""
    with _ops.name_scope(name, "reciprocal_no_nan", [x]) as name:
        x = _ops.convert_to_tensor(x, name="x")
        return _special.div_no_nan(_array.ones([], x.dtype.base_dtype), x, name=name)


def xlog1py(x, y, name=None):
    """Returns x * log1p(y) elementwise, with 0 where x == 0."""
    with _ops.name_scope(name, "xlog1py", [x, y]) as name:
        x = _ops.convert_to_tensor(x, name="x")
        y = _ops.convert_to_tensor(y, name="y", dtype=x.dtype.base_dtype)
        zero = _math.equal(x, _zero(x))
        safe_y = _math.where_v2(zero, _array.zeros_like(y), y)
        return _math.where_v2(zero, _zero(x), x * _math.log1p(safe_y), name=name)


def accumulate_n(inputs, shape=None, tensor_dtype=None, name=None):
    """Adds a list of tensors elementwise (TF1's accumulate_n; here the same as `add_n`).

    Args:
        inputs: a non-empty list of Tensors of one shape and dtype.
        shape: an optional expected shape of the inputs.
        tensor_dtype: an optional expected dtype of the inputs.
        name: optional op name.

    Raises:
        ValueError: if inputs is empty, or the shapes or dtypes differ from those given.
    """
    if not inputs or not isinstance(inputs, (list, tuple)):
        raise ValueError("inputs must be a list of at least one Tensor with the same dtype and shape")
    inputs = [_ops.convert_to_tensor(t) for t in inputs]
    if tensor_dtype is not None and any(t.dtype.base_dtype != _dtypes.as_dtype(tensor_dtype)
                                        for t in inputs):
        raise TypeError(f"tensor_dtype is {_dtypes.as_dtype(tensor_dtype).name}, but the input "
                        f"dtypes are {[t.dtype.name for t in inputs]}")
    if shape is not None:
        for t in inputs:
            t.shape.assert_is_compatible_with(shape)
    return _math.add_n(inputs, name=name)


def _moment_input(x):
    x = _ops.convert_to_tensor(x, name="input_tensor")
    if x.dtype.is_integer or x.dtype.is_bool:
        raise TypeError(f"Input must be either real or complex, got {x.dtype.name}")
    return x


def reduce_variance(input_tensor, axis=None, keepdims=False, name=None):
    """Computes the variance (mean squared deviation) of the elements across `axis`.

    Args:
        input_tensor: a floating Tensor.
        axis: the axes to reduce (default: all).
        keepdims: keep the reduced axes with length 1.
        name: optional name scope (default "reduce_variance").
    """
    with _ops.name_scope(name, "reduce_variance", [input_tensor]) as name:
        x = _moment_input(input_tensor)
        means = _math.reduce_mean(x, axis, keepdims=True)
        sq = _math.square(_math.abs(x - means))
        return _math.reduce_mean(sq, axis, keepdims=keepdims, name=name)


def reduce_std(input_tensor, axis=None, keepdims=False, name=None):
    """Computes the standard deviation (sqrt of `reduce_variance`) of the elements across `axis`."""
    with _ops.name_scope(name, "reduce_std", [input_tensor]) as name:
        return _math.sqrt(reduce_variance(input_tensor, axis, keepdims), name=name)


def reduce_euclidean_norm(input_tensor, axis=None, keepdims=False, name=None):
    """Computes sqrt(sum(|x| ** 2)) of the elements across `axis`."""
    with _ops.name_scope(name, "reduce_euclidean_norm", [input_tensor]) as name:
        x = _ops.convert_to_tensor(input_tensor, name="input_tensor")
        if x.dtype.is_integer:  # TF truncates the root back to the integer type
            f = _math.cast(x, _dtypes.float64)
            return _math.cast(_math.sqrt(_math.reduce_sum(f * f, axis, keepdims=keepdims)),
                              x.dtype.base_dtype, name=name)
        a = _math.abs(x)
        return _math.sqrt(_math.reduce_sum(a * a, axis, keepdims=keepdims), name=name)


def cumulative_logsumexp(x, axis=0, exclusive=False, reverse=False, name=None):
    """Computes log(cumsum(exp(x))) along `axis`, shifted by the maximum to avoid overflow.

    Args:
        x: a floating Tensor.
        axis: the scan axis (a Python int).
        exclusive: leave each element out of its own sum (the first is then -inf).
        reverse: scan from the end.
        name: optional name scope (default "CumulativeLogsumexp").
    """
    with _ops.name_scope(name, "CumulativeLogsumexp", [x]) as name:
        x = _ops.convert_to_tensor(x, name="x")
        m = _array.stop_gradient(_math.reduce_max(x))
        s = _math.cumsum(_math.exp(x - m), axis=axis, exclusive=exclusive, reverse=reverse)
        return _math.add(_math.log(s), m, name=name)


def polyval(coeffs, x, name=None):
    """Evaluates the polynomial coeffs[0] * x**(n-1) + ... + coeffs[n-1] by Horner's rule.

    Args:
        coeffs: a list of Tensors (or numbers) that broadcast with x, highest degree first.
        x: a Tensor.
        name: optional name scope (default "polyval").

    Raises:
        ValueError: if coeffs is not a list.
    """
    if not isinstance(coeffs, (list, tuple)):
        raise ValueError(f"Argument coeffs must be list type, found {type(coeffs)}.")
    with _ops.name_scope(name, "polyval", list(coeffs) + [x]) as name:
        x = _ops.convert_to_tensor(x, name="x")
        if not coeffs:
            return _array.zeros_like(x, name=name)
        coeffs = [_ops.convert_to_tensor(c, dtype=x.dtype.base_dtype, name=f"coeff_{i}")
                  for i, c in enumerate(coeffs)]
        p = coeffs[0]
        for c in coeffs[1:]:
            p = c + p * x
        return _array.identity(p, name=name)


def _as_int32(x):
    return _math.cast(x, _dtypes.int32)


def bincount(arr, weights=None, minlength=None, maxlength=None, dtype=_dtypes.int32, name=None):
    """Counts the occurrences of each value in the int32 tensor `arr` (TF1 `tf.math.bincount`).

    Args:
        arr: a non-negative int32 Tensor.
        weights: optional Tensor of arr's shape; bin i then holds the sum of the weights at i.
        minlength: the output has at least this many bins.
        maxlength: values >= maxlength are dropped, and there are at most this many bins.
        dtype: the output type without weights (with weights, the weights' type).
        name: optional name scope (default "bincount").

    Returns:
        A 1-D Tensor of length max(max(arr) + 1, minlength) (clipped to maxlength), 0 for empty arr.
    """
    with _ops.name_scope(name, "bincount", [arr, weights, minlength, maxlength]) as name:
        arr = _ops.convert_to_tensor(arr, name="arr", dtype=_dtypes.int32)
        flat = _array.reshape(arr, [-1])
        size = _math.reduce_max(_array.concat([flat + 1, _array.zeros([1], _dtypes.int32)], 0))
        if minlength is not None:
            size = _math.maximum(_as_int32(minlength), size)
        if maxlength is not None:
            size = _math.minimum(_as_int32(maxlength), size)
            flat = _math.where_v2(flat < _as_int32(maxlength), flat, -_array.ones_like(flat))
        if weights is None:
            w = _array.ones_like(flat, dtype=dtype)
        else:
            w = _array.reshape(_ops.convert_to_tensor(weights, name="weights"), [-1])
        return _segment.unsorted_segment_sum(w, flat, size, name=name)


def confusion_matrix(labels, predictions, num_classes=None, dtype=_dtypes.int32, name=None,
                     weights=None):
    """Computes the confusion matrix [num_classes, num_classes]: rows are labels, columns predictions.

    Args:
        labels: a 1-D int Tensor of real labels.
        predictions: a 1-D int Tensor of predicted labels, of labels' length.
        num_classes: the number of classes (default: max(labels, predictions) + 1).
        dtype: the output type.
        name: optional name scope (default "confusion_matrix").
        weights: optional 1-D Tensor of labels' length: each pair adds its weight rather than 1.
    """
    with _ops.name_scope(name, "confusion_matrix", [labels, predictions, num_classes, weights]) as name:
        labels = _math.cast(_ops.convert_to_tensor(labels, name="labels"), _dtypes.int32)
        predictions = _math.cast(_ops.convert_to_tensor(predictions, name="predictions"), _dtypes.int32)
        if num_classes is None:
            num_classes = _math.maximum(_math.reduce_max(predictions), _math.reduce_max(labels)) + 1
        else:
            num_classes = _as_int32(num_classes)
        cells = labels * num_classes + predictions
        if weights is None:
            w = _array.ones_like(cells, dtype=dtype)
        else:
            w = _math.cast(_ops.convert_to_tensor(weights, name="weights"), dtype)
        counts = _segment.unsorted_segment_sum(w, cells, num_classes * num_classes)
        return _array.reshape(counts, _array.stack([num_classes, num_classes]), name=name)


def _segment_counts(data, segment_ids, num_segments):
    ids_rank = _array.rank(segment_ids) if segment_ids.shape.rank is None else segment_ids.shape.rank
    ones = _array.ones_like(segment_ids, dtype=data.dtype.base_dtype)
    n = _segment.unsorted_segment_sum(ones, segment_ids, num_segments)
    # Broadcast the counts over data's trailing (non-segmented) dimensions.
    trailing = _array.rank(data) - ids_rank
    shape = _array.concat([_array.shape(n), _array.ones(_array.reshape(trailing, [1]), _dtypes.int32)], 0)
    return _array.reshape(_math.maximum(n, _array.ones([], n.dtype.base_dtype)), shape)


def unsorted_segment_mean(data, segment_ids, num_segments, name=None):
    """Computes the mean of the rows of `data` in each segment (0 for empty segments).

    Args:
        data: a floating Tensor.
        segment_ids: an int Tensor whose shape is a prefix of data's; negative ids are dropped.
        num_segments: the number of segments (a scalar int).
        name: optional name scope (default "UnsortedSegmentMean").
    """
    with _ops.name_scope(name, "UnsortedSegmentMean", [data, segment_ids, num_segments]) as name:
        data = _ops.convert_to_tensor(data, name="data")
        segment_ids = _ops.convert_to_tensor(segment_ids, name="segment_ids")
        n = _segment_counts(data, segment_ids, num_segments)
        total = _segment.unsorted_segment_sum(data, segment_ids, num_segments)
        return _math.truediv(total, n, name=name)


def unsorted_segment_sqrt_n(data, segment_ids, num_segments, name=None):
    """Computes the sum of the rows of `data` in each segment divided by sqrt(count) (0 if empty)."""
    with _ops.name_scope(name, "UnsortedSegmentSqrtN", [data, segment_ids, num_segments]) as name:
        data = _ops.convert_to_tensor(data, name="data")
        segment_ids = _ops.convert_to_tensor(segment_ids, name="segment_ids")
        n = _segment_counts(data, segment_ids, num_segments)
        total = _segment.unsorted_segment_sum(data, segment_ids, num_segments)
        return _math.truediv(total, _math.sqrt(n), name=name)


def _monotone(x, strict, name, scope):
    with _ops.name_scope(name, scope, [x]) as name:
        x = _ops.convert_to_tensor(x, name="x")
        flat = _array.reshape(x, [-1])
        head, tail = flat[:-1], flat[1:]
        ok = _math.less(head, tail) if strict else _math.less_equal(head, tail)
        return _math.reduce_all(ok, name=name)


def is_non_decreasing(x, name=None):
    """Returns True if x (read in row-major order) is non-decreasing; True for fewer than 2 elements.

    Args:
        x: a numeric Tensor.
        name: optional name scope (default "is_non_decreasing").
    """
    return _monotone(x, False, name, "is_non_decreasing")


def is_strictly_increasing(x, name=None):
    """Returns True if x (read in row-major order) is strictly increasing; True for fewer than 2
    elements."""
    return _monotone(x, True, name, "is_strictly_increasing")


def real(input, name=None):  # noqa: A002 - TF's argument name
    """Returns the real part of complex `input` (a cast keeps it); a real tensor is returned as is."""
    with _ops.name_scope(name, "Real", [input]) as name:
        x = _ops.convert_to_tensor(input, name="input")
        if x.dtype.is_complex:
            return _math.cast(x, x.dtype.real_dtype, name=name)
        return x


def imag(input, name=None):  # noqa: A002
    """Returns the imaginary part of complex `input`; zeros for a real tensor."""
    with _ops.name_scope(name, "Imag", [input]) as name:
        x = _ops.convert_to_tensor(input, name="input")
        if x.dtype.is_complex:  # Im(x) = Re(-i x), exactly
            minus_i = _ops.convert_to_tensor(-1j, dtype=x.dtype.base_dtype)
            return _math.cast(x * minus_i, x.dtype.real_dtype, name=name)
        return _array.zeros_like(x, name=name)


def angle(input, name=None):  # noqa: A002
    """Returns the argument atan2(imag, real) of complex `input`; pi or 0 by sign for reals."""
    import math
    with _ops.name_scope(name, "Angle", [input]) as name:
        x = _ops.convert_to_tensor(input, name="input")
        if x.dtype.is_complex:
            return _special.atan2(imag(x), real(x), name=name)
        pi = _ops.convert_to_tensor(math.pi, dtype=x.dtype.base_dtype)
        return _math.where_v2(x < _zero(x), pi * _array.ones_like(x), _array.zeros_like(x), name=name)
