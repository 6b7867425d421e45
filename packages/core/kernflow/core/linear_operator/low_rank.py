"""LinearOperatorLowRankUpdate: `A = L + U D V^H` with solves and determinants through the capacitance.

For square A the Woodbury identity gives `A^-1 = L^-1 - L^-1 U C^-1 V^H L^-1` and the matrix
determinant lemma `det A = det C det D det L`, where the K x K capacitance is `C = D^-1 + V^H L^-1 U`.
Only K x K systems are factored: a Cholesky factorization when U = V, D > 0 and L is positive definite
(C is then Hermitian positive definite), a general solve otherwise.
"""

from __future__ import annotations

import kernflow.core as kf  # partly imported here; its attributes are used only at call time
from kernflow.core.framework.tensor_shape import TensorShape, dimension_value
from kernflow.core.linear_operator.base import (LinearOperator, broadcast_matrix_batch, check_hint,
                                                conj_if, matrix_adjoint, to_tensor)
from kernflow.core.linear_operator.composite import with_matrix_shape

__all__ = ["LinearOperatorLowRankUpdate"]


def _check_factor(t, owner, what, base_dim, base_what):
    if t.shape.ndims is not None and t.shape.ndims < 2:
        raise ValueError("%s: %s must have rank >= 2; got shape %s" % (owner, what, t.shape))
    got, want = (dimension_value(t.shape[-2]) if t.shape.ndims else None), dimension_value(base_dim)
    if got is not None and want is not None and got != want:
        raise ValueError("%s: %s must have %d rows (the base operator's %s); got shape %s" % (
            owner, what, want, base_what, t.shape))


class LinearOperatorLowRankUpdate(LinearOperator):
    """A [batch] rank-K update `L + U D V^H` of an operator L (TF1 `tf.linalg.LinearOperatorLowRankUpdate`).

    Args:
        base_operator: the operator L, `[..., M, N]`.
        u: `[..., M, K]`. diag_update: the diagonal of D, `[..., K]` (None: the identity).
        v: `[..., N, K]`; None means `v = u`.
        is_diag_update_positive: hint that D > 0 (True when `diag_update` is None).

    Raises:
        TypeError: u, v or diag_update of another dtype than L. ValueError: shapes that do not fit L, or
            hints that contradict those derived from L and the update.
    """

    def __init__(self, base_operator, u, diag_update=None, v=None, is_diag_update_positive=None,
                 is_non_singular=None, is_self_adjoint=None, is_positive_definite=None, is_square=None,
                 name="LinearOperatorLowRankUpdate"):
        dtype = base_operator.dtype
        with kf.name_scope(name):
            self._u = to_tensor(u, "u")
            self._v = self._u if v is None else to_tensor(v, "v")
            self._diag_update = None if diag_update is None else to_tensor(diag_update, "diag_update")
        for t, what in ((self._u, "u"), (self._v, "v"), (self._diag_update, "diag_update")):
            if t is not None and t.dtype.base_dtype != dtype:
                raise TypeError("%s: %s must have dtype %s (the base operator's); found %s" % (
                    name, what, dtype.name, t.dtype.name))
        _check_factor(self._u, name, "u", base_operator.range_dimension, "range dimension")
        _check_factor(self._v, name, "v", base_operator.domain_dimension, "domain dimension")
        self._base = base_operator
        self._use_v = v is not None
        if diag_update is None:
            is_diag_update_positive = check_hint(is_diag_update_positive, True,
                                                 "Default diagonal is the identity, which is positive.")
        self._is_diag_update_positive = is_diag_update_positive
        symmetric = v is None and (is_diag_update_positive or not dtype.is_complex)
        if base_operator.is_self_adjoint and symmetric:
            is_self_adjoint = check_hint(is_self_adjoint, True,
                                         "A self-adjoint base plus U D U^H with real D is self-adjoint.")
        if base_operator.is_positive_definite and v is None and is_diag_update_positive:
            is_positive_definite = check_hint(
                is_positive_definite, True,
                "A positive definite base plus U D U^H with positive D is positive definite.")
        parents = base_operator.graph_parents + [t for t in (self._u, self._v, self._diag_update)
                                                  if t is not None]
        super().__init__(dtype, parents, is_non_singular, is_self_adjoint, is_positive_definite, is_square,
                         name)

    @property
    def base_operator(self):
        return self._base

    @property
    def u(self):
        return self._u

    @property
    def v(self):
        return self._v

    @property
    def diag_update(self):
        return self._diag_update

    @property
    def is_diag_update_positive(self):
        return self._is_diag_update_positive

    def _shape(self):
        batch = self._base.batch_shape
        for t in (self._u, self._v):
            if batch.ndims is None or t.shape.ndims is None:
                return TensorShape(None)
            batch = kf.broadcast_static_shape(batch, t.shape[:-2])
        if self._diag_update is not None and self._diag_update.shape.ndims is not None:
            batch = kf.broadcast_static_shape(batch, self._diag_update.shape[:-1])
        return with_matrix_shape(batch, self._base.range_dimension, self._base.domain_dimension)

    def _shape_tensor(self):
        batch = self._base.batch_shape_tensor()
        for t in (self._u, self._v):
            batch = kf.broadcast_dynamic_shape(batch, kf.shape(t)[:-2])
        if self._diag_update is not None:
            batch = kf.broadcast_dynamic_shape(batch, kf.shape(self._diag_update)[:-1])
        return kf.concat([batch, kf.stack([self._base.range_dimension_tensor(),
                                           self._base.domain_dimension_tensor()])], 0)

    def _d_times(self, x, adjoint=False):
        """D x (D^H x with adjoint) for x [..., K, R]."""
        if self._diag_update is None:
            return x
        return kf.expand_dims(conj_if(self._diag_update, adjoint), -1) * x

    def _matmul(self, x, adjoint=False, adjoint_arg=False):
        x = matrix_adjoint(x, adjoint_arg)
        left, right = (self._v, self._u) if adjoint else (self._u, self._v)
        low_rank = kf.matmul(left, self._d_times(kf.matmul(right, x, adjoint_a=True), adjoint))
        return self._base.matmul(x, adjoint=adjoint) + low_rank

    def _capacitance(self):
        """C = D^-1 + V^H L^-1 U, [..., K, K]."""
        linv_u = self._base.solve(self._u)
        vh_linv_u = kf.matmul(self._v, linv_u, adjoint_a=True)
        if self._diag_update is None:
            k = kf.shape(self._u)[-1]
            return vh_linv_u + kf.linalg.eye(k, dtype=self.dtype)
        return vh_linv_u + kf.matrix_diag(1. / self._diag_update)

    def _use_cholesky(self):
        return (not self._use_v and bool(self._is_diag_update_positive)
                and bool(self._base.is_positive_definite) and bool(self._base.is_self_adjoint))

    def _solve(self, rhs, adjoint=False, adjoint_arg=False):
        self._check_square_update()
        rhs = matrix_adjoint(rhs, adjoint_arg)
        left, right = (self._v, self._u) if adjoint else (self._u, self._v)
        linv_rhs = self._base.solve(rhs, adjoint=adjoint)
        vh_linv_rhs = kf.matmul(right, linv_rhs, adjoint_a=True)
        cap = self._capacitance()
        if self._use_cholesky():
            chol, vh_linv_rhs = broadcast_matrix_batch([kf.cholesky(cap), vh_linv_rhs])
            cinv = kf.cholesky_solve(chol, vh_linv_rhs)
        else:
            cap, vh_linv_rhs = broadcast_matrix_batch([cap, vh_linv_rhs])
            cinv = kf.matrix_solve(cap, vh_linv_rhs, adjoint=adjoint)
        return linv_rhs - self._base.solve(kf.matmul(left, cinv), adjoint=adjoint)

    def _check_square_update(self):
        if self._base.is_square is False:
            raise NotImplementedError("%s: the Woodbury solve needs a square base operator" % self.name)

    def _log_abs_det_capacitance(self):
        cap = self._capacitance()
        if self._use_cholesky():
            return 2. * kf.reduce_sum(kf.log(kf.abs(kf.matrix_diag_part(kf.cholesky(cap)))), axis=-1)
        return kf.linalg.slogdet(cap)[1]

    def _log_abs_determinant(self):
        self._check_square_update()
        result = self._base.log_abs_determinant() + self._log_abs_det_capacitance()
        if self._diag_update is not None:
            result = result + kf.reduce_sum(kf.log(kf.abs(self._diag_update)), axis=-1)
        return result

    def _determinant(self):
        self._check_square_update()
        if self._use_cholesky():
            return kf.exp(self._log_abs_determinant())
        result = self._base.determinant() * kf.matrix_determinant(self._capacitance())
        if self._diag_update is not None:
            result = result * kf.reduce_prod(self._diag_update, axis=-1)
        return result

    def _diag_part(self):
        if self._base.is_square is not True:
            return super()._diag_part()
        d = kf.ones([1], self.dtype) if self._diag_update is None else kf.expand_dims(self._diag_update, -2)
        return self._base.diag_part() + kf.reduce_sum(self._u * d * conj_if(self._v, True), axis=-1)

    def _to_dense(self):
        return self._base.to_dense() + kf.matmul(self._u, self._d_times(kf.linalg.adjoint(self._v)))
