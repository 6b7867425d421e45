"""Gradients of the linear algebra ops (kernflow.core.ops.linalg_ops), with TF1's formulas."""

from __future__ import annotations

from kernflow.core.framework import tensor_shape as _ts
from kernflow.core.framework.gradient_registry import NotDifferentiable, RegisterGradient
from kernflow.core.grads.math_grad import _reduce_pair
from kernflow.core.ops import array_ops
from kernflow.core.ops import linalg_ops as la
from kernflow.core.ops import math_ops as mo

# Decompositions whose gradients kernflow does not implement yet (TF1 has them for Qr and Svd);
# MatrixSolveLs's gradient is left out too (see kernflow.core.linalg).
for _op in ("Qr", "Svd", "MatrixSolveLs"):
    NotDifferentiable(_op)


def _adjoint(x):
    return array_ops.matrix_transpose(x, conjugate=True)


def _expand2(x):
    return array_ops.expand_dims(array_ops.expand_dims(x, -1), -1)


@RegisterGradient("MatrixInverse")
def _matrix_inverse_grad(op, grad):
    ainv = op.outputs[0]
    if op.get_attr("adjoint"):
        return [-mo.matmul(ainv, mo.matmul(grad, ainv, adjoint_a=True))]
    return [-mo.matmul(ainv, mo.matmul(grad, ainv, adjoint_b=True), adjoint_a=True)]


@RegisterGradient("MatrixDeterminant")
def _matrix_determinant_grad(op, grad):
    a, c = op.inputs[0], op.outputs[0]
    return [_expand2(grad * c) * la.matrix_inverse(a, adjoint=True)]


@RegisterGradient("LogMatrixDeterminant")
def _log_matrix_determinant_grad(op, _, grad_b):
    return [_expand2(grad_b) * la.matrix_inverse(op.inputs[0], adjoint=True)]


@RegisterGradient("Cholesky")
def _cholesky_grad(op, grad):
    low = op.outputs[0]
    eye = la.matrix_set_diag(array_ops.zeros_like(low), array_ops.ones_like(la.matrix_diag_part(low)))
    l_inverse = la.matrix_triangular_solve(low, eye)
    middle = mo.matmul(low, grad, adjoint_a=True)
    middle = la.matrix_set_diag(middle, 0.5 * la.matrix_diag_part(middle))
    middle = la.matrix_band_part(middle, -1, 0)
    grad_a = mo.matmul(mo.matmul(l_inverse, middle, adjoint_a=True), l_inverse)
    grad_a += _adjoint(grad_a)
    return [grad_a * 0.5]


def _unbroadcast(op, grad_a, grad_b):
    """The solve gradients summed back over the batch dims its kernel broadcast."""
    a, b = op.inputs[:2]
    if a.shape.rank is not None and b.shape.rank is not None:
        ba, bb = _ts.TensorShape(a.shape.dim_values[:-2]), _ts.TensorShape(b.shape.dim_values[:-2])
    else:
        ba = bb = _ts.TensorShape(None)
    return list(_reduce_pair(a, b, grad_a, grad_b, batch_shapes=(ba, bb)))


@RegisterGradient("MatrixSolve")
def _matrix_solve_grad(op, grad):
    a, c = op.inputs[0], op.outputs[0]
    adjoint_a = op.get_attr("adjoint")
    grad_b = la.matrix_solve(a, grad, adjoint=not adjoint_a)
    if adjoint_a:
        return _unbroadcast(op, -mo.matmul(c, grad_b, adjoint_b=True), grad_b)
    return _unbroadcast(op, -mo.matmul(grad_b, c, adjoint_b=True), grad_b)


@RegisterGradient("MatrixTriangularSolve")
def _matrix_triangular_solve_grad(op, grad):
    a, c = op.inputs[0], op.outputs[0]
    adjoint_a, lower_a = op.get_attr("adjoint"), op.get_attr("lower")
    grad_b = la.matrix_triangular_solve(a, grad, lower=lower_a, adjoint=not adjoint_a)
    if adjoint_a:
        grad_a = -mo.matmul(c, grad_b, adjoint_b=True)
    else:
        grad_a = -mo.matmul(grad_b, c, adjoint_b=True)
    grad_a = la.matrix_band_part(grad_a, -1, 0) if lower_a else la.matrix_band_part(grad_a, 0, -1)
    return _unbroadcast(op, grad_a, grad_b)


@RegisterGradient("SelfAdjointEigV2")
def _self_adjoint_eig_grad(op, grad_e, grad_v):
    """The gradient w.r.t. the lower triangle the kernel reads (TF1's formula)."""
    e, v = op.outputs
    if not op.get_attr("compute_v"):
        v = la.self_adjoint_eig(op.inputs[0])[1]
        grad_a = mo.matmul(v, mo.matmul(la.matrix_diag(grad_e), v, adjoint_b=True))
    else:
        diff = array_ops.expand_dims(e, -2) - array_ops.expand_dims(e, -1)
        f = la.matrix_set_diag(mo.reciprocal(la.matrix_set_diag(diff, array_ops.ones_like(e))),
                               array_ops.zeros_like(e))
        inner = la.matrix_diag(grad_e) + f * mo.matmul(v, grad_v, adjoint_a=True)
        grad_a = mo.matmul(v, mo.matmul(inner, v, adjoint_b=True))
    grad_a = la.matrix_band_part(grad_a + _adjoint(grad_a), -1, 0)
    return [la.matrix_set_diag(grad_a, 0.5 * la.matrix_diag_part(grad_a))]


@RegisterGradient("MatrixDiag")
def _matrix_diag_grad(op, grad):
    return [la.matrix_diag_part(grad)]


@RegisterGradient("MatrixDiagPart")
def _matrix_diag_part_grad(op, grad):
    return [la.matrix_set_diag(array_ops.zeros_like(op.inputs[0]), grad)]


@RegisterGradient("MatrixSetDiag")
def _matrix_set_diag_grad(op, grad):
    diag = la.matrix_diag_part(grad)
    return [la.matrix_set_diag(grad, array_ops.zeros_like(diag)), diag]


@RegisterGradient("MatrixBandPart")
def _matrix_band_part_grad(op, grad):
    return [la.matrix_band_part(grad, op.inputs[1], op.inputs[2]), None, None]
