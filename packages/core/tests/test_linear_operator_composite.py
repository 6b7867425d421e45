"""kf.linalg operators over operators and structured ones (linear_operator/composite.py, block.py,
low_rank.py, structured.py, circulant.py): every method against numpy on the dense matrix."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.testing.linear_operator_kit import check_operator, fresh_graph, well_conditioned

L = kf.linalg
_r = np.random.RandomState(11)

_fresh_graph = pytest.fixture(autouse=True)(fresh_graph)


def _well(*shape):
    return well_conditioned(_r, *shape)


def _block_diag(*ms):
    n = sum(m.shape[-1] for m in ms)
    out, i = np.zeros(np.broadcast_shapes(*[m.shape[:-2] for m in ms]) + (n, n)), 0
    for m in ms:
        k = m.shape[-1]
        out[..., i:i + k, i:i + k] = m
        i += k
    return out


def test_composition_adjoint_inversion():
    a, b = _well(2, 3, 3), _well(3, 3)
    A, B = L.LinearOperatorFullMatrix(a), L.LinearOperatorFullMatrix(b)
    comp = L.LinearOperatorComposition([A, B])
    assert comp.name == A.name + "_o_" + B.name
    check_operator(comp, a @ b, tol=1e-5)
    check_operator(A @ B, a @ b, tol=1e-5)
    check_operator(L.LinearOperatorAdjoint(A), np.swapaxes(a, -1, -2))
    inv = L.LinearOperatorInversion(A)
    assert inv.inverse() is A and L.LinearOperatorAdjoint(A).adjoint() is A
    check_operator(inv, np.linalg.inv(a), tol=1e-5)


def test_composition_of_rectangular_operators():
    a, b = _r.uniform(-1, 1, (4, 3)), _r.uniform(-1, 1, (3, 2))
    comp = L.LinearOperatorComposition([L.LinearOperatorFullMatrix(a), L.LinearOperatorFullMatrix(b)])
    assert comp.shape.as_list() == [4, 2] and comp.is_square is False
    check_operator(comp, a @ b, square=False, solve=False, det=False)


def test_block_diag_and_derived():
    a, c = _well(2, 3, 3), _well(2, 2)
    op = L.LinearOperatorBlockDiag([L.LinearOperatorFullMatrix(a), L.LinearOperatorFullMatrix(c)])
    assert op.shape.as_list() == [2, 5, 5]
    check_operator(op, _block_diag(a, np.broadcast_to(c, (2, 2, 2))), tol=1e-5)
    d1, d2 = _r.uniform(1, 2, 2), _r.uniform(1, 2, 3)
    pd = L.LinearOperatorBlockDiag([L.LinearOperatorDiag(d1, is_positive_definite=True),
                                    L.LinearOperatorDiag(d2, is_positive_definite=True)])
    assert pd.is_positive_definite and pd.is_self_adjoint
    check_operator(pd, np.diag(np.concatenate([d1, d2])), chol=True)


def test_block_lower_triangular_forward_substitution():
    a, c, e = _well(2, 3, 3), _well(2, 2), _well(2, 2)
    off, off2, off3 = _r.uniform(-1, 1, (2, 3)), _r.uniform(-1, 1, (2, 3)), _r.uniform(-1, 1, (2, 2))
    F = L.LinearOperatorFullMatrix
    op = L.LinearOperatorBlockLowerTriangular([[F(a)], [F(off), F(c)], [F(off2), F(off3), F(e)]])
    dense = _block_diag(a, np.broadcast_to(c, (2, 2, 2)), np.broadcast_to(e, (2, 2, 2)))
    dense[:, 3:5, :3], dense[:, 5:, :3], dense[:, 5:, 3:5] = off, off2, off3
    check_operator(op, dense, tol=1e-5)


def test_kronecker_factors_and_determinant():
    a, b, c = _well(2, 2, 2), _well(3, 3), _well(2, 2)
    ops = [L.LinearOperatorFullMatrix(m) for m in (a, b, c)]
    op = L.LinearOperatorKronecker(ops)
    assert op.shape.as_list() == [2, 12, 12]
    dense = np.stack([np.kron(np.kron(x, b), c) for x in a])
    check_operator(op, dense, tol=1e-5)
    pd = L.LinearOperatorKronecker([L.LinearOperatorDiag(_r.uniform(1, 2, 2), is_positive_definite=True),
                                    L.LinearOperatorDiag(_r.uniform(1, 2, 3), is_positive_definite=True)])
    assert pd.is_positive_definite
    got = check_operator(pd, np.kron(*[np.diag(v) for v in _kron_diags(pd)]), chol=True)
    assert got["chol"].shape == (6, 6)


def _kron_diags(op):
    with kf.Session() as s:
        return s.run([o.diag for o in op.operators])


def test_kronecker_rectangular_factors():
    a, b = _r.uniform(-1, 1, (3, 2)), _r.uniform(-1, 1, (2, 4))
    op = L.LinearOperatorKronecker([L.LinearOperatorFullMatrix(a), L.LinearOperatorFullMatrix(b)])
    check_operator(op, np.kron(a, b), square=False, solve=False, det=False)


def test_low_rank_update_woodbury_and_lemma():
    d, u, dd = _r.uniform(1, 2, (2, 4)), _r.uniform(-1, 1, (2, 4, 2)), _r.uniform(1, 2, (2, 2))
    base = L.LinearOperatorDiag(d, is_positive_definite=True)
    op = L.LinearOperatorLowRankUpdate(base, u, dd, is_diag_update_positive=True)
    assert op.is_self_adjoint and op.is_positive_definite
    dense = d[..., None] * np.eye(4) + u @ (dd[..., :, None] * np.swapaxes(u, -1, -2))
    check_operator(op, dense, chol=True, tol=1e-5)
    v = _r.uniform(-1, 1, (2, 4, 2))
    general = L.LinearOperatorLowRankUpdate(L.LinearOperatorFullMatrix(dense), u, v=v)
    assert general.is_self_adjoint is None
    check_operator(general, dense + u @ np.swapaxes(v, -1, -2), tol=1e-5)


def test_toeplitz_fft_matmul():
    col, row = _r.uniform(-1, 1, (2, 5)) + [3, 0, 0, 0, 0], _r.uniform(-1, 1, (2, 5))
    dense = np.stack([[[c[i - j] if i >= j else rw[j - i] for j in range(5)] for i in range(5)]
                      for c, rw in zip(col, row)])
    check_operator(L.LinearOperatorToeplitz(col, row), dense, tol=1e-5)
    assert "FFT" in {o.type for o in kf.get_default_graph().get_operations()}


def test_tridiag_formats():
    diags = _r.uniform(-1, 1, (2, 3, 4)) + [[0], [4], [0]]
    dense = np.stack([np.diag(x[1]) + np.diag(x[0][:-1], 1) + np.diag(x[2][1:], -1) for x in diags])
    check_operator(L.LinearOperatorTridiag(diags), dense)
    check_operator(L.LinearOperatorTridiag(dense, diagonals_format="matrix"), dense)
    check_operator(L.LinearOperatorTridiag([diags[:, 0], diags[:, 1], diags[:, 2]],
                                           diagonals_format="sequence"), dense)


def _circulant(spectrum, axes):
    n = spectrum.size
    eye = np.eye(n).reshape((n,) + spectrum.shape)
    return np.fft.ifftn(np.fft.fftn(eye, axes=axes) * spectrum, axes=axes).reshape(n, n).T


def test_circulants_1d_2d_3d():
    for cls, shape in ((L.LinearOperatorCirculant, (4,)), (L.LinearOperatorCirculant2D, (2, 3)),
                       (L.LinearOperatorCirculant3D, (2, 2, 2))):
        spectrum = _r.uniform(1, 2, shape) + 1j * _r.uniform(-1, 1, shape)
        axes = tuple(range(1, len(shape) + 1))
        op = cls(spectrum, input_output_dtype=kf.complex128)
        check_operator(op, _circulant(spectrum, axes))


def test_circulant_real_io_with_hermitian_spectrum_and_batch():
    kernel = _r.uniform(-1, 1, (2, 5))
    spectrum = np.fft.fft(kernel)
    op = L.LinearOperatorCirculant(spectrum, input_output_dtype=kf.float64)
    dense = np.stack([[[k[(i - j) % 5] for j in range(5)] for i in range(5)] for k in kernel])
    check_operator(op, dense, tol=1e-6)
    with kf.Session() as s:
        s.run(op.assert_hermitian_spectrum())
        np.testing.assert_allclose(s.run(op.convolution_kernel()), kernel, atol=1e-12)
