"""Operators that need no matrix entries: Identity, ScaledIdentity and Zeros.

Their size comes from `num_rows` (and `num_columns`, `batch_shape`), scalars or 1-D int tensors that
may be fed at run time. Every method is O(size of the argument) or O(batch size).
"""

from __future__ import annotations

import kernflow.core as kf  # partly imported here; its attributes are used only at call time
from kernflow.core.framework.tensor_shape import TensorShape
from kernflow.core.linear_operator.base import (LinearOperator, batch_eye, check_hint, conj_if,
                                                dynamic_batch_broadcast, matrix_adjoint,
                                                static_batch_broadcast, to_tensor)

__all__ = ["LinearOperatorIdentity", "LinearOperatorScaledIdentity", "LinearOperatorZeros"]


def _size_argument(value, rank, owner, what, assert_proper_shapes):
    """`value` as an int32 tensor of the given rank whose entries are >= 0, and its static value."""
    t = to_tensor(value, what, dtype=kf.int32 if not kf.is_tensor(value) else None)
    if not t.dtype.is_integer:
        raise TypeError("%s: argument %s must be integer type; found %s" % (owner, what, t.dtype.name))
    if t.shape.ndims is not None and t.shape.ndims != rank:
        raise ValueError("%s: argument %s must be a %d-D Tensor; got shape %s" % (owner, what, rank, t.shape))
    static = kf.get_static_value(t)
    if static is not None and (static < 0).any():
        raise ValueError("%s: argument %s must be non-negative; got %s" % (owner, what, static))
    t = kf.cast(t, kf.int32)
    if static is None and assert_proper_shapes:
        check = kf.assert_non_negative(t, message="%s: argument %s must be non-negative" % (owner, what))
        with kf.control_dependencies([check]):
            t = kf.identity(t)
    return t, static


class _SizedOperator(LinearOperator):
    """Shared by the operators whose shape is `batch_shape + [num_rows, num_columns]`."""

    def _init_sizes(self, num_rows, num_columns, batch_shape, assert_proper_shapes, name):
        self._assert_proper_shapes = assert_proper_shapes
        self._num_rows, self._num_rows_static = _size_argument(num_rows, 0, name, "num_rows",
                                                               assert_proper_shapes)
        if num_columns is None:
            self._num_columns, self._num_columns_static = self._num_rows, self._num_rows_static
        else:
            self._num_columns, self._num_columns_static = _size_argument(
                num_columns, 0, name, "num_columns", assert_proper_shapes)
        self._batch_shape_arg, self._batch_shape_static = None, None
        if batch_shape is not None:
            self._batch_shape_arg, self._batch_shape_static = _size_argument(
                batch_shape, 1, name, "batch_shape", assert_proper_shapes)

    def _static_batch(self):
        if self._batch_shape_arg is None:
            return TensorShape([])
        if self._batch_shape_static is not None:
            return TensorShape([int(d) for d in self._batch_shape_static])
        n = self._batch_shape_arg.shape.ndims and self._batch_shape_arg.shape[0]
        return TensorShape(None) if n is None or n.value is None else TensorShape([None] * n.value)

    def _shape(self):
        def dim(v):
            return None if v is None else int(v)
        return self._static_batch().concatenate([dim(self._num_rows_static), dim(self._num_columns_static)])

    def _shape_tensor(self):
        rows_cols = kf.stack([self._num_rows, self._num_columns])
        if self._batch_shape_arg is None:
            return rows_cols
        return kf.concat([self._batch_shape_arg, rows_cols], 0)

    def _batch_broadcast(self, x, rows=None):
        """`x` (or a zero tensor with `rows` rows and x's columns) broadcast against the batch shape."""
        if self._batch_shape_arg is None and rows is None:
            return x
        x_batch = kf.shape(x)[:-2]
        batch = x_batch if self._batch_shape_arg is None else dynamic_batch_broadcast(
            self._batch_shape_arg, x_batch)
        tail = kf.shape(x)[-2:] if rows is None else kf.stack([rows, kf.shape(x)[-1]])
        out = kf.broadcast_to(x, kf.concat([batch, tail], 0)) if rows is None else \
            kf.zeros(kf.concat([batch, tail], 0), dtype=self.dtype)
        if x.shape.ndims is not None:
            static = static_batch_broadcast(self._static_batch(), x.shape[:-2])
            static_rows = x.shape[-2] if rows is None else self._rows_static_for(rows)
            out.set_shape(static.concatenate([static_rows, x.shape[-1]]))
        return out

    def _rows_static_for(self, rows):
        return self._num_rows_static if rows is self._num_rows else self._num_columns_static

    def _batch_ones(self, dtype=None, tail=()):
        shape = kf.concat([self.batch_shape_tensor(), list(tail)], 0) if tail else self.batch_shape_tensor()
        return kf.ones(shape, dtype=dtype or self.dtype)

    def _check_rows(self, x):
        known = x.shape.ndims is not None and x.shape[-2].value is not None
        if not self._assert_proper_shapes or (self._num_rows_static is not None and known):
            return x
        check = kf.assert_equal(kf.shape(x)[-2], self._num_rows,
                                message="%s: argument rows do not match num_rows" % self.name)
        with kf.control_dependencies([check]):
            return kf.identity(x)


class LinearOperatorIdentity(_SizedOperator):
    """A [batch] square identity matrix (TF1 `tf.linalg.LinearOperatorIdentity`).

    matmul returns its argument (broadcast against `batch_shape`); nothing is materialized.

    Raises:
        ValueError: a hint is not True, or `num_rows`/`batch_shape` is negative or of the wrong rank.
    """

    def __init__(self, num_rows, batch_shape=None, dtype=None, is_non_singular=True, is_self_adjoint=True,
                 is_positive_definite=True, is_square=True, assert_proper_shapes=False,
                 name="LinearOperatorIdentity"):
        for hint, what in ((is_non_singular, "non-singular"), (is_self_adjoint, "self-adjoint"),
                           (is_positive_definite, "positive definite"), (is_square, "square")):
            if not hint:
                raise ValueError("An identity operator is always %s." % what)
        with kf.name_scope(name):
            self._init_sizes(num_rows, None, batch_shape, assert_proper_shapes, name)
        super().__init__(dtype or kf.float32, [self._num_rows], True, True, True, True, name)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        return self._batch_broadcast(self._check_rows(matrix_adjoint(x, adjoint_arg)))

    def _matvec(self, x, adjoint=False):
        return kf.squeeze(self._matmul(kf.expand_dims(x, -1)), [-1])

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return self._matmul(rhs, adjoint_arg=adjoint_arg)

    def _determinant(self):
        return self._batch_ones()

    def _log_abs_determinant(self):
        return kf.zeros(self.batch_shape_tensor(), dtype=self.dtype.real_dtype)

    def _diag_part(self):
        return self._batch_ones(tail=[self._num_rows])

    def _trace(self):
        return kf.cast(self._num_rows, self.dtype) * self._batch_ones()

    def _to_dense(self):
        return batch_eye(self._num_rows, self._batch_shape_arg, self.dtype)

    def _add_to_tensor(self, x):
        return x + self._to_dense()

    def _inverse(self):
        return self

    def _cholesky(self):
        return self

    def _eigvals(self):
        return self._diag_part()

    def _assert_non_singular(self):
        return kf.no_op("assert_non_singular")

    def _assert_positive_definite(self):
        return kf.no_op("assert_positive_definite")

    def _assert_self_adjoint(self):
        return kf.no_op("assert_self_adjoint")


class LinearOperatorScaledIdentity(_SizedOperator):
    """A [batch] scaled identity `c I` with `multiplier` c of shape batch_shape (TF1 name).

    matmul multiplies and solve divides by the multiplier; det = c**N.

    Raises:
        ValueError: `is_square` is False, or `num_rows` is negative or not a scalar.
    """

    def __init__(self, num_rows, multiplier, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=True, assert_proper_shapes=False,
                 name="LinearOperatorScaledIdentity"):
        is_square = check_hint(is_square, True, "A ScaledIdentity operator is always square.")
        with kf.name_scope(name):
            self._multiplier = to_tensor(multiplier, "multiplier")
            self._init_sizes(num_rows, None, None, assert_proper_shapes, name)
        super().__init__(self._multiplier.dtype, [self._multiplier, self._num_rows], is_non_singular,
                         is_self_adjoint, is_positive_definite, is_square, name)

    @property
    def multiplier(self):
        return self._multiplier

    def _static_batch(self):
        return self._multiplier.shape

    def _shape_tensor(self):
        return kf.concat([kf.shape(self._multiplier), kf.stack([self._num_rows, self._num_rows])], 0)

    def _m(self, adjoint=False):
        return kf.expand_dims(kf.expand_dims(conj_if(self._multiplier, adjoint), -1), -1)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        return self._check_rows(matrix_adjoint(x, adjoint_arg)) * self._m(adjoint)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return self._check_rows(matrix_adjoint(rhs, adjoint_arg)) / self._m(adjoint)

    def _determinant(self):
        return self._multiplier ** kf.cast(self._num_rows, self.dtype)

    def _log_abs_determinant(self):
        n = kf.cast(self._num_rows, self.dtype.real_dtype)
        return n * kf.log(kf.abs(self._multiplier))

    def _diag_part(self):
        return kf.expand_dims(self._multiplier, -1) * kf.ones(kf.stack([self._num_rows]), dtype=self.dtype)

    def _trace(self):
        return self._multiplier * kf.cast(self._num_rows, self.dtype)

    def _to_dense(self):
        return self._m() * kf.linalg.eye(self._num_rows, dtype=self.dtype)

    def _add_to_tensor(self, x):
        return x + self._to_dense()

    def _scaled(self, multiplier, suffix, **hints):
        return LinearOperatorScaledIdentity(self._num_rows, multiplier, name=self.name + suffix, **hints)

    def _adjoint(self):
        return self._scaled(kf.math.conj(self._multiplier), "_adjoint", is_non_singular=self.is_non_singular,
                            is_self_adjoint=self.is_self_adjoint,
                            is_positive_definite=self.is_positive_definite)

    def _inverse(self):
        return self._scaled(1. / self._multiplier, "_inverse", is_non_singular=self.is_non_singular,
                            is_self_adjoint=self.is_self_adjoint,
                            is_positive_definite=self.is_positive_definite)

    def _cholesky(self):
        return self._scaled(kf.sqrt(self._multiplier), "_cholesky", is_non_singular=True,
                            is_self_adjoint=True, is_positive_definite=True)

    def _eigvals(self):
        return self._diag_part()

    def _assert_non_singular(self):
        return kf.assert_positive(kf.abs(self._multiplier),
                                  message="%s: the multiplier was zero, thus the operator is singular"
                                          % self.name)

    def _assert_positive_definite(self):
        return kf.assert_positive(kf.math.real(self._multiplier),
                                  message="%s: the multiplier had non-positive real part" % self.name)

    def _assert_self_adjoint(self):
        if not self.dtype.is_complex:
            return kf.no_op("assert_self_adjoint")
        return kf.assert_equal(kf.math.imag(self._multiplier), kf.zeros([], self.dtype.real_dtype),
                               message="%s: the multiplier had non-zero imaginary part" % self.name)


class LinearOperatorZeros(_SizedOperator):
    """A [batch] zero matrix `[..., num_rows, num_columns]` (TF `tf.linalg.LinearOperatorZeros`).

    Raises:
        ValueError: a hint says it is non-singular or positive definite, or a square one is hinted not
            self-adjoint.
    """

    def __init__(self, num_rows, num_columns=None, batch_shape=None, dtype=None, is_non_singular=False,
                 is_self_adjoint=True, is_positive_definite=False, is_square=True,
                 assert_proper_shapes=False, name="LinearOperatorZeros"):
        if is_non_singular:
            raise ValueError("A Zeros operator is always singular.")
        if is_positive_definite:
            raise ValueError("A Zeros operator is always not positive definite.")
        with kf.name_scope(name):
            self._init_sizes(num_rows, num_columns, batch_shape, assert_proper_shapes, name)
        rows, cols = self._num_rows_static, self._num_columns_static
        if rows is not None and cols is not None and rows != cols:
            if num_columns is not None and is_square and is_self_adjoint:
                is_square, is_self_adjoint = False, False  # the defaults, for a matrix that cannot be square
        elif is_square and is_self_adjoint is False:
            raise ValueError("A square Zeros operator is always self-adjoint.")
        super().__init__(dtype or kf.float32, [self._num_rows], False, is_self_adjoint, False, is_square,
                         name)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        x = matrix_adjoint(x, adjoint_arg)
        return self._batch_broadcast(x, rows=self._num_columns if adjoint else self._num_rows)

    def _determinant(self):
        return kf.zeros(self.batch_shape_tensor(), dtype=self.dtype)

    def _log_abs_determinant(self):
        return kf.log(kf.zeros(self.batch_shape_tensor(), dtype=self.dtype.real_dtype))

    def _diag_part(self):
        n = kf.minimum(self._num_rows, self._num_columns)
        return kf.zeros(kf.concat([self.batch_shape_tensor(), kf.stack([n])], 0), dtype=self.dtype)

    def _trace(self):
        return kf.zeros(self.batch_shape_tensor(), dtype=self.dtype)

    def _to_dense(self):
        return kf.zeros(self.shape_tensor(), dtype=self.dtype)

    def _add_to_tensor(self, x):
        return self._batch_broadcast(x)

    def _adjoint(self):
        return LinearOperatorZeros(self._num_columns, self._num_rows, self._batch_shape_arg, self.dtype,
                                   is_self_adjoint=self.is_self_adjoint, is_square=self.is_square,
                                   name=self.name + "_adjoint")

    def _eigvals(self):
        return self._diag_part()

    def _assert_self_adjoint(self):
        return kf.no_op("assert_self_adjoint")
