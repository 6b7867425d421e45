"""Contract cases of the linear algebra ops (kernflow.core.ops.linalg_ops): batched numpy references."""

import numpy as np

from kernflow.core.ops import linalg_ops as la
from kernflow.core.testing.kernel_contract import OpCase

_r = np.random.RandomState(5)


def _f(*shape, dtype=np.float64):
    return _r.uniform(-1.0, 1.0, size=shape).astype(dtype)


def _well(*shape, dtype=np.float64):
    """Well-conditioned square matrices: random plus a dominant diagonal."""
    n = shape[-1]
    return (_f(*shape) + 3.0 * np.eye(n)).astype(dtype)


def _spd(*shape):
    a = _f(*shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def _sym(*shape):
    a = _f(*shape)
    return a + np.swapaxes(a, -1, -2)


def _adj(x):
    return np.conjugate(np.swapaxes(x, -1, -2))


def _diag(d):
    n = d.shape[-1]
    out = np.zeros(d.shape + (n,), d.dtype)
    out[..., np.arange(n), np.arange(n)] = d
    return out


def _set_diag(x, d):
    out = x.copy()
    k = min(x.shape[-2:])
    out[..., np.arange(k), np.arange(k)] = d
    return out


def _band(x, lo, up):
    m, n = x.shape[-2:]
    i, j = np.arange(m)[:, None], np.arange(n)[None, :]
    keep = ((lo < 0) | (i - j <= lo)) & ((up < 0) | (j - i <= up))
    return np.where(keep, x, 0)


def _tril_solve(a, b):
    return np.linalg.solve(np.tril(a), b)


def _chol_of_lower(x):
    """Cholesky reading x's lower triangle only (x's strict upper triangle is ignored)."""
    low = np.tril(x)
    return np.linalg.cholesky(low + np.swapaxes(np.tril(x, -1), -1, -2))


def _sym_chol(x):
    return la.cholesky(0.5 * (x + la.adjoint(x)))


def _sym_eigvals(x):
    return la.self_adjoint_eigvals(0.5 * (x + la.adjoint(x)))


def _sign_invariant_eigh(x):
    """Eigen-decomposition outputs that do not depend on the eigenvectors' signs: e and V diag(e) V^T."""
    e, v = la.self_adjoint_eig(x)
    return [e, (v * e[..., None, :]) @ la.adjoint(v)]


def _qr_product(x):
    q, r = la.qr(x)
    return [q @ r, la.adjoint(q) @ q]


def _svd_values(x):
    s, u, v = la.svd(x)
    return [s, (u * s[..., None, :]) @ la.adjoint(v)]


_sq = _well(2, 3, 3)
_rhs = _f(2, 3, 2)

CASES = [
    OpCase("MatrixInverse", la.matrix_inverse, [_sq], np.linalg.inv, grad=True, name="batched"),
    OpCase("MatrixInverse", lambda x: la.matrix_inverse(x, adjoint=True), [_well(3, 3)],
           lambda x: np.linalg.inv(_adj(x)), grad=True, name="adjoint"),
    OpCase("MatrixInverse", la.matrix_inverse, [_well(4, 4, dtype=np.float32)], np.linalg.inv,
           rtol=1e-4, atol=1e-5, name="float32"),
    OpCase("MatrixDeterminant", la.matrix_determinant, [_sq], np.linalg.det, grad=True),
    OpCase("MatrixDeterminant", la.matrix_determinant, [_f(4, 4, dtype=np.float32)], np.linalg.det,
           rtol=1e-4, atol=1e-5, name="float32"),
    OpCase("LogMatrixDeterminant", lambda x: list(la.log_matrix_determinant(x)), [_f(3, 4, 4)],
           lambda x: list(np.linalg.slogdet(x)), grad=True),
    OpCase("Cholesky", _sym_chol, [_spd(2, 3, 3)], np.linalg.cholesky, grad=True, name="batched"),
    OpCase("Cholesky", la.cholesky, [_spd(4, 4) + np.triu(_f(4, 4), 1)], _chol_of_lower,
           name="reads_lower"),
    OpCase("MatrixSolve", la.matrix_solve, [_sq, _rhs], np.linalg.solve, grad=True),
    OpCase("MatrixSolve", lambda a, b: la.matrix_solve(a, b, adjoint=True), [_well(3, 3), _f(3, 1)],
           lambda a, b: np.linalg.solve(_adj(a), b), grad=True, name="adjoint"),
    OpCase("MatrixTriangularSolve", la.matrix_triangular_solve, [_sq, _rhs], _tril_solve, grad=True),
    OpCase("MatrixTriangularSolve", lambda a, b: la.matrix_triangular_solve(a, b, lower=False,
                                                                            adjoint=True),
           [_well(3, 3), _f(3, 2)], lambda a, b: np.linalg.solve(_adj(np.triu(a)), b), grad=True,
           name="upper_adjoint"),
    OpCase("MatrixSolveLs", la.matrix_solve_ls, [_f(5, 3), _f(5, 2)],
           lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0]),
    OpCase("MatrixSolveLs", lambda a, b: la.matrix_solve_ls(a, b, l2_regularizer=0.5),
           [_f(2, 5, 3), _f(2, 5, 2)],
           lambda a, b: np.linalg.solve(_adj(a) @ a + 0.5 * np.eye(3), _adj(a) @ b), name="l2_batched"),
    OpCase("Qr", _qr_product, [_f(2, 4, 3)], lambda x: [x, np.broadcast_to(np.eye(3), (2, 3, 3))]),
    OpCase("Qr", lambda x: list(la.qr(x, full_matrices=True)), [_f(4, 3)],
           lambda x: list(np.linalg.qr(x, mode="complete")), name="full"),
    OpCase("Svd", _svd_values, [_f(2, 4, 3)], lambda x: [np.linalg.svd(x, compute_uv=False), x]),
    OpCase("Svd", lambda x: la.svd(x, compute_uv=False), [_f(3, 5)],
           lambda x: np.linalg.svd(x, compute_uv=False), name="values_only"),
    OpCase("SelfAdjointEigV2", _sign_invariant_eigh, [_sym(2, 3, 3)],
           lambda x: [np.linalg.eigvalsh(x), x], grad=True),
    OpCase("SelfAdjointEigV2", _sym_eigvals, [_sym(3, 3)], np.linalg.eigvalsh, grad=True,
           name="values_only"),
    OpCase("MatrixDiag", la.matrix_diag, [_f(2, 3)], _diag, grad=True),
    OpCase("MatrixDiag", la.matrix_diag, [np.array([1, 2], np.int32)], _diag, name="int32"),
    OpCase("MatrixDiagPart", la.matrix_diag_part, [_f(2, 3, 4)],
           lambda x: np.diagonal(x, axis1=-2, axis2=-1), grad=True),
    OpCase("MatrixSetDiag", la.matrix_set_diag, [_f(2, 4, 3), _f(2, 3)], _set_diag, grad=True),
    OpCase("MatrixBandPart", lambda x: la.matrix_band_part(x, 1, 0), [_f(2, 4, 4)],
           lambda x: _band(x, 1, 0), grad=True),
    OpCase("MatrixBandPart", lambda x: la.matrix_band_part(x, -1, 1), [_f(3, 5)],
           lambda x: _band(x, -1, 1), name="whole_lower"),
]
