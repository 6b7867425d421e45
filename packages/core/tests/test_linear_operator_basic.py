"""kf.linalg LinearOperators defined by one tensor or a size (linear_operator/basic.py, identity.py):
every method against numpy, batch broadcasting and fed (unknown) shapes."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.testing.linear_operator_kit import check_operator, fresh_graph, well_conditioned

L = kf.linalg
_r = np.random.RandomState(7)

_fresh_graph = pytest.fixture(autouse=True)(fresh_graph)


def _well(*shape):
    return well_conditioned(_r, *shape)


def _diag_matrix(d):
    return d[..., :, None] * np.eye(d.shape[-1])


def test_full_matrix_batch_and_complex():
    a = _well(2, 3, 3)
    check_operator(L.LinearOperatorFullMatrix(a), a)
    c = (_well(3, 3) + 1j * _r.uniform(-1, 1, (3, 3))).astype(np.complex128)
    check_operator(L.LinearOperatorFullMatrix(c), c)


def test_full_matrix_self_adjoint_pd_uses_cholesky_and_non_square():
    a = _r.uniform(-1, 1, (2, 3, 3))
    spd = a @ np.swapaxes(a, -1, -2) + 3 * np.eye(3)
    check_operator(L.LinearOperatorFullMatrix(spd, is_self_adjoint=True, is_positive_definite=True), spd,
                   chol=True, tol=1e-5)
    rect = _r.uniform(-1, 1, (2, 4, 3))
    op = L.LinearOperatorFullMatrix(rect)
    assert op.is_square is False and op.shape.as_list() == [2, 4, 3]
    check_operator(op, rect, square=False, solve=False, det=False)


def test_diag_structure_and_derived_operators():
    d = _r.uniform(1, 2, (2, 3))
    op = L.LinearOperatorDiag(d, is_positive_definite=True)
    assert op.is_self_adjoint and op.is_square and op.is_non_singular
    got = check_operator(op, _diag_matrix(d), chol=True)
    assert isinstance(op.inverse(), L.LinearOperatorDiag) and isinstance(op.cholesky(), L.LinearOperatorDiag)
    assert op.adjoint() is op
    np.testing.assert_allclose(got["diag"], d)
    with kf.Session() as s:
        np.testing.assert_allclose(s.run(op.eigvals()), d)


def test_diag_broadcasts_against_the_argument_batch():
    d = _r.uniform(1, 2, (2, 1, 3))
    x = _r.uniform(-1, 1, (4, 3, 2))
    op = L.LinearOperatorDiag(d)
    y, z = op.matmul(x), op.solve(x)
    assert y.shape.as_list() == [2, 4, 3, 2] and z.shape.as_list() == [2, 4, 3, 2]
    with kf.Session() as s:
        gy, gz = s.run([y, z])
    np.testing.assert_allclose(gy, _diag_matrix(d) @ x)
    np.testing.assert_allclose(gz, np.linalg.solve(_diag_matrix(np.broadcast_to(d, (2, 4, 3))), x))


def test_lower_triangular_uses_lower_part_and_triangular_solve():
    a = _well(2, 4, 4)
    op = L.LinearOperatorLowerTriangular(a)
    check_operator(op, np.tril(a))
    assert "MatrixTriangularSolve" in {o.type for o in kf.get_default_graph().get_operations()}


def test_lower_triangular_broadcast_solve_static_shape():
    op = L.LinearOperatorLowerTriangular(_well(4, 4))
    rhs = _r.uniform(-1, 1, (3, 4, 2))
    out = op.solve(rhs)
    assert out.shape.as_list() == [3, 4, 2]
    with kf.Session() as s:
        np.testing.assert_allclose(s.run(out), np.linalg.solve(op_dense(op), rhs))


def op_dense(op):
    with kf.Session() as s:
        return s.run(op.to_dense())


def test_identity_with_batch_shape_and_placeholder_rows():
    check_operator(L.LinearOperatorIdentity(3, batch_shape=[2], dtype=kf.float64),
                   np.broadcast_to(np.eye(3), (2, 3, 3)), chol=True)
    n = kf.placeholder(kf.int32, [])
    op = L.LinearOperatorIdentity(n, dtype=kf.float64)
    assert op.shape.as_list() == [None, None] and op.domain_dimension.value is None
    check_operator(op, np.eye(4), feed={n: 4}, chol=True)
    x = kf.constant(_r.uniform(size=(2, 4, 1)))
    assert L.LinearOperatorIdentity(4, batch_shape=[3, 1], dtype=kf.float64).matmul(x).shape.as_list() == \
        [3, 2, 4, 1]


def test_scaled_identity_and_derived():
    m = np.array([2., -3.])
    op = L.LinearOperatorScaledIdentity(3, m)
    check_operator(op, m[:, None, None] * np.eye(3))
    pd = L.LinearOperatorScaledIdentity(2, 4., is_self_adjoint=True, is_positive_definite=True)
    check_operator(pd, 4. * np.eye(2), chol=True)
    assert isinstance(pd.cholesky(), L.LinearOperatorScaledIdentity)


def test_zeros_rectangular_batch():
    op = L.LinearOperatorZeros(3, 2, batch_shape=[2], dtype=kf.float64)
    assert op.is_square is False and op.shape.as_list() == [2, 3, 2]
    check_operator(op, np.zeros((2, 3, 2)), square=False, solve=False, det=False)
    sq = L.LinearOperatorZeros(3, dtype=kf.float64)
    got = check_operator(sq, np.zeros((3, 3)), solve=False, det=False)
    assert got["trace"] == 0
    with kf.Session() as s:
        assert s.run(sq.determinant()) == 0 and s.run(sq.log_abs_determinant()) == -np.inf
    with pytest.raises(NotImplementedError, match="singular"):
        sq.solve(np.eye(3))


def test_householder_reflection():
    v = _r.uniform(-1, 1, (2, 4))
    dense = np.eye(4) - 2 * v[:, :, None] * v[:, None, :] / np.sum(v * v, -1)[:, None, None]
    op = L.LinearOperatorHouseholder(v)
    check_operator(op, dense)
    assert op.inverse() is op and op.is_self_adjoint and op.is_positive_definite is False
    with pytest.raises(kf.errors.InvalidArgumentError, match="non-positive definite"):
        op.assert_positive_definite()


def test_permutation_gather_and_sign():
    perm = np.array([[2, 0, 3, 1], [0, 1, 3, 2], [1, 2, 3, 0]])
    dense = np.stack([np.eye(4)[p] for p in perm])
    op = L.LinearOperatorPermutation(perm, dtype=kf.float64)
    got = check_operator(op, dense)
    np.testing.assert_allclose(got["det"], [-1., -1., -1.])
    single = L.LinearOperatorPermutation([1, 2, 0], dtype=kf.float64)
    check_operator(single, np.eye(3)[[1, 2, 0]])
    with pytest.raises(TypeError, match="perm"):
        L.LinearOperatorPermutation([0.5, 1.])


def test_unknown_dims_from_placeholders():
    a = kf.placeholder(kf.float64, [None, None, 3])
    op = L.LinearOperatorFullMatrix(a)
    assert op.shape.as_list() == [None, None, 3] and op.batch_shape.as_list() == [None]
    assert op.range_dimension.value is None and op.domain_dimension.value == 3 and op.is_square is None
    value = _well(2, 3, 3)
    got = check_operator(op, value, feed={a: value})
    with kf.Session() as s:
        dyn = s.run([op.batch_shape_tensor(), op.range_dimension_tensor(), op.tensor_rank_tensor()],
                    {a: value})
    assert list(dyn[0]) == [2] and dyn[1] == 3 and dyn[2] == 3
    np.testing.assert_allclose(got["shape"], [2, 3, 3])
    unknown_rank = L.LinearOperatorDiag(kf.placeholder(kf.float64, None))
    assert unknown_rank.shape.ndims is None and unknown_rank.tensor_rank is None
