"""Operators defined by one tensor: FullMatrix, Diag, LowerTriangular, Householder, Permutation.

Each uses its structure where TF does: a diagonal solve is a division, a triangular one a
triangular solve, a Householder reflection is its own inverse, a permutation is a gather.
"""

from __future__ import annotations

import kernflow.core as kf  # partly imported here; its attributes are used only at call time
from kernflow.core.framework import errors
from kernflow.core.framework.tensor_shape import TensorShape
from kernflow.core.linear_operator.base import (LinearOperator, broadcast_matrix_batch, check_dtype,
                                                check_hint, conj_if, float_or_complex, matrix_adjoint,
                                                to_tensor)

__all__ = ["LinearOperatorFullMatrix", "LinearOperatorDiag", "LinearOperatorLowerTriangular",
           "LinearOperatorHouseholder", "LinearOperatorPermutation"]


def _with_rank_at_least(t, rank, owner, what):
    if t.shape.ndims is not None and t.shape.ndims < rank:
        raise ValueError("%s: %s must have rank >= %d; got shape %s" % (owner, what, rank, t.shape))
    return t


def assert_nonzero(diag, owner):
    """An op that fails when a diagonal entry is zero (the operator is then singular)."""
    return kf.assert_positive(kf.abs(diag), message="%s: singular operator: diagonal contained zero values."
                              % owner)


def _square_shape(vector_shape):
    """`batch + [n, n]` from the static shape `batch + [n]` of a vector-backed operator."""
    if vector_shape.ndims is None:
        return TensorShape(None)
    return vector_shape.concatenate(vector_shape[-1:])


def _square_shape_tensor(vector):
    s = kf.shape(vector)
    return kf.concat([s, s[-1:]], 0)


class LinearOperatorFullMatrix(LinearOperator):
    """An operator that wraps a [batch] matrix `[..., M, N]` (TF1 `tf.linalg.LinearOperatorFullMatrix`).

    Raises:
        TypeError: the matrix is not float16/32/64 or complex64/128. ValueError: its rank is below 2.
    """

    def __init__(self, matrix, is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=None, name="LinearOperatorFullMatrix"):
        with kf.name_scope(name):
            self._matrix = _with_rank_at_least(to_tensor(matrix, "matrix"), 2, name, "matrix")
        check_dtype(self._matrix, float_or_complex(), "%s: matrix" % name)
        super().__init__(self._matrix.dtype, [self._matrix], is_non_singular, is_self_adjoint,
                         is_positive_definite, is_square, name)

    def _shape(self):
        return self._matrix.shape

    def _shape_tensor(self):
        return kf.shape(self._matrix)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        return kf.matmul(self._matrix, x, adjoint_a=adjoint, adjoint_b=adjoint_arg)

    def _to_dense(self):
        return self._matrix


class LinearOperatorDiag(LinearOperator):
    """A [batch] square diagonal matrix from `diag` `[..., N]` (TF1 `tf.linalg.LinearOperatorDiag`).

    matmul and solve are elementwise (O(N R)); the determinant is a product of the diagonal.

    Raises:
        ValueError: `diag` has rank 0, `is_square` is False, or a real `diag` is hinted not self-adjoint.
    """

    def __init__(self, diag, is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=None, name="LinearOperatorDiag"):
        with kf.name_scope(name):
            self._diag = _with_rank_at_least(to_tensor(diag, "diag"), 1, name, "diag")
        check_dtype(self._diag, float_or_complex(), "%s: diag" % name)
        if not self._diag.dtype.is_complex:
            is_self_adjoint = check_hint(is_self_adjoint, True,
                                         "A real diagonal operator is always self adjoint.")
        is_square = check_hint(is_square, True, "Only square diagonal operators currently supported.")
        super().__init__(self._diag.dtype, [self._diag], is_non_singular, is_self_adjoint,
                         is_positive_definite, is_square, name)

    @property
    def diag(self):
        return self._diag

    def _shape(self):
        return _square_shape(self._diag.shape)

    def _shape_tensor(self):
        return _square_shape_tensor(self._diag)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        return kf.expand_dims(conj_if(self._diag, adjoint), -1) * matrix_adjoint(x, adjoint_arg)

    def _matvec(self, x, adjoint=False):
        return conj_if(self._diag, adjoint) * x

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return matrix_adjoint(rhs, adjoint_arg) / kf.expand_dims(conj_if(self._diag, adjoint), -1)

    def _solvevec(self, rhs, adjoint=False):
        return rhs / conj_if(self._diag, adjoint)

    def _determinant(self):
        return kf.reduce_prod(self._diag, axis=-1)

    def _log_abs_determinant(self):
        return kf.reduce_sum(kf.log(kf.abs(self._diag)), axis=-1)

    def _diag_part(self):
        return kf.identity(self._diag)

    def _to_dense(self):
        return kf.matrix_diag(self._diag)

    def _add_to_tensor(self, x):
        return x + kf.matrix_diag(self._diag)

    def _adjoint(self):
        return LinearOperatorDiag(kf.math.conj(self._diag), self.is_non_singular, self.is_self_adjoint,
                                  self.is_positive_definite, True, self.name + "_adjoint")

    def _inverse(self):
        return LinearOperatorDiag(1. / self._diag, self.is_non_singular, self.is_self_adjoint,
                                  self.is_positive_definite, True, self.name + "_inverse")

    def _cholesky(self):
        return LinearOperatorDiag(kf.sqrt(self._diag), True, True, True, True, self.name + "_cholesky")

    def _eigvals(self):
        return kf.identity(self._diag)

    def _assert_non_singular(self):
        return assert_nonzero(self._diag, self.name)

    def _assert_positive_definite(self):
        return kf.assert_positive(kf.math.real(self._diag),
                                  message="%s: diagonal operator had diagonal entries with non-positive "
                                          "real part, thus was not positive definite." % self.name)

    def _assert_self_adjoint(self):
        if not self._diag.dtype.is_complex:
            return kf.no_op("assert_self_adjoint")
        return kf.assert_equal(kf.math.imag(self._diag), kf.zeros([], self._diag.dtype.real_dtype),
                               message="%s: diagonal had non-zero imaginary part, thus was not self "
                                       "adjoint." % self.name)


class LinearOperatorLowerTriangular(LinearOperator):
    """A [batch] square lower-triangular matrix (TF1 `tf.linalg.LinearOperatorLowerTriangular`).

    Only the lower triangle of `tril` `[..., N, N]` is used. solve is a triangular solve (O(N^2 R)) and
    the determinant the product of the diagonal.

    Raises:
        ValueError: `is_square` is False or `tril` has rank below 2.
    """

    def __init__(self, tril, is_non_singular=None, is_self_adjoint=None, is_positive_definite=None,
                 is_square=None, name="LinearOperatorLowerTriangular"):
        is_square = check_hint(is_square, True,
                               "Only square lower triangular operators supported at this time.")
        with kf.name_scope(name):
            tril = _with_rank_at_least(to_tensor(tril, "tril"), 2, name, "tril")
            check_dtype(tril, float_or_complex(), "%s: tril" % name)
            self._tril = kf.matrix_band_part(tril, -1, 0)
        super().__init__(tril.dtype, [tril], is_non_singular, is_self_adjoint, is_positive_definite,
                         is_square, name)

    def _shape(self):
        return self._tril.shape

    def _shape_tensor(self):
        return kf.shape(self._tril)

    def _diag(self):
        return kf.matrix_diag_part(self._tril)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        return kf.matmul(self._tril, x, adjoint_a=adjoint, adjoint_b=adjoint_arg)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        tril, rhs = broadcast_matrix_batch([self._tril, matrix_adjoint(rhs, adjoint_arg)])
        return kf.matrix_triangular_solve(tril, rhs, lower=True, adjoint=adjoint)

    def _determinant(self):
        return kf.reduce_prod(self._diag(), axis=-1)

    def _log_abs_determinant(self):
        return kf.reduce_sum(kf.log(kf.abs(self._diag())), axis=-1)

    def _diag_part(self):
        return self._diag()

    def _to_dense(self):
        return self._tril

    def _assert_non_singular(self):
        return assert_nonzero(self._diag(), self.name)


class LinearOperatorHouseholder(LinearOperator):
    """A [batch] Householder reflection `I - 2 v v^H / (v^H v)` (TF `tf.linalg.LinearOperatorHouseholder`).

    Applying it costs O(N R); it is self-adjoint, its own inverse, and has determinant -1.

    Raises:
        ValueError: a hint says it is not self-adjoint, singular or positive definite.
    """

    def __init__(self, reflection_axis, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None, name="LinearOperatorHouseholder"):
        is_self_adjoint = check_hint(is_self_adjoint, True, "A Householder operator is always self adjoint.")
        is_non_singular = check_hint(is_non_singular, True, "A Householder operator is always non-singular.")
        if is_positive_definite:
            raise ValueError("A Householder operator is always non-positive definite.")
        is_square = check_hint(is_square, True, "A Householder operator is always square.")
        with kf.name_scope(name):
            self._axis = _with_rank_at_least(to_tensor(reflection_axis, "reflection_axis"), 1, name,
                                             "reflection_axis")
        check_dtype(self._axis, float_or_complex(), "%s: reflection_axis" % name)
        super().__init__(self._axis.dtype, [self._axis], is_non_singular, is_self_adjoint, False,
                         is_square, name)

    @property
    def reflection_axis(self):
        return self._axis

    def _shape(self):
        return _square_shape(self._axis.shape)

    def _shape_tensor(self):
        return _square_shape_tensor(self._axis)

    def _unit_axis(self):
        norm2 = kf.reduce_sum(kf.math.real(kf.math.conj(self._axis) * self._axis), axis=-1, keepdims=True)
        return self._axis / kf.cast(kf.sqrt(norm2), self.dtype)

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        x = matrix_adjoint(x, adjoint_arg)
        u = kf.expand_dims(self._unit_axis(), -1)
        return x - 2. * u * kf.matmul(u, x, adjoint_a=True)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return self._matmul(rhs, adjoint, adjoint_arg)

    def _determinant(self):
        return -kf.ones(self.batch_shape_tensor(), dtype=self.dtype)

    def _log_abs_determinant(self):
        return kf.zeros(self.batch_shape_tensor(), dtype=self.dtype.real_dtype)

    def _diag_part(self):
        u = self._unit_axis()
        return 1. - 2. * u * kf.math.conj(u)

    def _trace(self):
        n = kf.cast(self.domain_dimension_tensor(), self.dtype)
        return (n - 2.) * kf.ones(self.batch_shape_tensor(), dtype=self.dtype)

    def _to_dense(self):
        u = kf.expand_dims(self._unit_axis(), -1)
        eye = kf.linalg.eye(self.domain_dimension_tensor(), dtype=self.dtype)
        return eye - 2. * kf.matmul(u, u, adjoint_b=True)

    def _inverse(self):
        return self

    def _assert_non_singular(self):
        return kf.no_op("assert_non_singular")

    def _assert_self_adjoint(self):
        return kf.no_op("assert_self_adjoint")

    def _assert_positive_definite(self):
        raise errors.InvalidArgumentError(
            None, None, "%s: Householder operators are always non-positive definite." % self.name)


class LinearOperatorPermutation(LinearOperator):
    """A [batch] permutation matrix `P[i, perm[i]] = 1` (TF `tf.linalg.LinearOperatorPermutation`).

    matmul is a gather of rows (O(N R)), its adjoint the gather by the inverse permutation; the
    determinant is the permutation's sign.

    Raises:
        TypeError: `perm` is not int32/int64. ValueError: `perm` has rank 0, or a hint says it is singular.
    """

    def __init__(self, perm, dtype=None, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None, name="LinearOperatorPermutation"):
        is_non_singular = check_hint(is_non_singular, True, "A Permutation operator is always non-singular.")
        is_square = check_hint(is_square, True, "A Permutation operator is always square.")
        with kf.name_scope(name):
            self._perm = _with_rank_at_least(to_tensor(perm, "perm"), 1, name, "perm")
        check_dtype(self._perm, (kf.int32, kf.int64), "%s: perm" % name)
        super().__init__(dtype or kf.float32, [self._perm], is_non_singular, is_self_adjoint,
                         is_positive_definite, is_square, name)

    @property
    def perm(self):
        return self._perm

    def _shape(self):
        return _square_shape(self._perm.shape)

    def _shape_tensor(self):
        return _square_shape_tensor(self._perm)

    def _inverse_perm(self):
        return kf.cast(kf.argsort(self._perm, axis=-1), self._perm.dtype)

    def _gather_rows(self, x, perm):
        if perm.shape.ndims == 1:
            rank = x.shape.ndims
            return kf.gather(x, perm, axis=rank - 2) if rank is not None else \
                kf.linalg.matrix_transpose(kf.gather(kf.linalg.matrix_transpose(x), perm, axis=-1))
        perm_m, x = broadcast_matrix_batch([kf.expand_dims(perm, -1), x])
        return kf.batch_gather(x, kf.squeeze(perm_m, [-1]))

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        perm = self._inverse_perm() if adjoint else self._perm
        return self._gather_rows(matrix_adjoint(x, adjoint_arg), perm)

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        return self._matmul(rhs, adjoint=not adjoint, adjoint_arg=adjoint_arg)

    def _determinant(self):
        # sign(perm) = prod over pairs i < j of sign(perm[j] - perm[i]): O(N^2) elements, no factorization.
        p = self._perm
        n = kf.shape(p)[-1]
        idx = kf.range(n)
        upper = kf.less(kf.expand_dims(idx, -1), kf.expand_dims(idx, 0))
        diffs = kf.sign(kf.expand_dims(p, -2) - kf.expand_dims(p, -1))
        signs = kf.where(kf.broadcast_to(upper, kf.shape(diffs)), diffs, kf.ones_like(diffs))
        return kf.cast(kf.reduce_prod(signs, axis=[-2, -1]), self.dtype)

    def _log_abs_determinant(self):
        return kf.zeros(self.batch_shape_tensor(), dtype=self.dtype.real_dtype)

    def _diag_part(self):
        n = kf.shape(self._perm, out_type=self._perm.dtype)[-1]
        return kf.cast(kf.equal(self._perm, kf.range(n)), self.dtype)

    def _to_dense(self):
        return kf.one_hot(self._perm, kf.shape(self._perm)[-1], dtype=self.dtype)

    def _inverse(self):
        return LinearOperatorPermutation(self._inverse_perm(), dtype=self.dtype, name=self.name + "_inverse")

    def _adjoint(self):
        return self._inverse()

    def _assert_non_singular(self):
        return kf.no_op("assert_non_singular")
