"""kf.linalg.LinearOperator base behaviour (linear_operator/base.py): hint consistency, argument errors,
operator algebra, run-time asserts and gradients through operators."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.testing.gradient_checker import compute_gradient_error
from kernflow.core.testing.linear_operator_kit import fresh_graph

L = kf.linalg
_r = np.random.RandomState(5)

_fresh_graph = pytest.fixture(autouse=True)(fresh_graph)


def _eye(n=3):
    return np.eye(n) + 0.1 * _r.uniform(-1, 1, (n, n))


@pytest.mark.parametrize("build, message", [
    (lambda: L.LinearOperatorFullMatrix(_eye(), is_positive_definite=True, is_non_singular=False),
     "positive definite matrix is always non-singular"),
    (lambda: L.LinearOperatorFullMatrix(_eye(), is_non_singular=True, is_square=False),
     "non-singular matrix is always square"),
    (lambda: L.LinearOperatorFullMatrix(_eye(), is_self_adjoint=True, is_square=False),
     "self-adjoint matrix is always square"),
    (lambda: L.LinearOperatorDiag([1., 2.], is_self_adjoint=False), "real diagonal operator is always self"),
    (lambda: L.LinearOperatorDiag([1., 2.], is_square=False), "square diagonal"),
    (lambda: L.LinearOperatorIdentity(2, is_self_adjoint=False), "identity operator is always self-adjoint"),
    (lambda: L.LinearOperatorIdentity(-1), "non-negative"),
    (lambda: L.LinearOperatorIdentity([2, 2]), "0-D"),
    (lambda: L.LinearOperatorScaledIdentity(2, 1., is_square=False), "always square"),
    (lambda: L.LinearOperatorZeros(2, is_non_singular=True), "always singular"),
    (lambda: L.LinearOperatorLowerTriangular(_eye(), is_square=False), "square lower triangular"),
    (lambda: L.LinearOperatorHouseholder([1., 0.], is_positive_definite=True), "non-positive definite"),
    (lambda: L.LinearOperatorInversion(L.LinearOperatorZeros(2)), "non-singular"),
    (lambda: L.LinearOperatorAdjoint(L.LinearOperatorDiag([1., 2.]), is_self_adjoint=False),
     "self-adjoint if and only if its adjoint"),
    (lambda: L.LinearOperatorComposition([L.LinearOperatorIdentity(2), L.LinearOperatorIdentity(2)],
                                         is_non_singular=False), "composition of non-singular"),
    (lambda: L.LinearOperatorComposition([]), ">=1 operators"),
    (lambda: L.LinearOperatorComposition([L.LinearOperatorFullMatrix(np.ones((2, 3))),
                                          L.LinearOperatorFullMatrix(np.ones((2, 3)))]), "incompatible"),
    (lambda: L.LinearOperatorBlockDiag([L.LinearOperatorFullMatrix(np.ones((2, 3)))]), "must be square"),
    (lambda: L.LinearOperatorBlockLowerTriangular([[L.LinearOperatorIdentity(2)], []]), "row 1 must hold"),
    (lambda: L.LinearOperatorKronecker([L.LinearOperatorDiag([1., 2.], is_positive_definite=True)],
                                       is_positive_definite=False), "positive-definite"),
    (lambda: L.LinearOperatorTridiag(np.ones((3, 3)), diagonals_format="banded"), "diagonals_format"),
    (lambda: L.LinearOperatorLowRankUpdate(L.LinearOperatorIdentity(3), np.ones((4, 1), np.float32)),
     "must have 3 rows"),
    (lambda: L.LinearOperatorToeplitz([1., 2.], [1., 2., 3.]), "same length"),
])
def test_inconsistent_hints_and_shapes_raise_value_error(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_hints_are_derived():
    op = L.LinearOperatorFullMatrix(_eye(), is_positive_definite=True)
    assert op.is_non_singular is True and op.is_square is True
    assert L.LinearOperatorInversion(op).is_positive_definite is True
    assert L.LinearOperatorDiag([1., 2.]).is_self_adjoint is True
    assert L.LinearOperatorDiag(np.array([1j, 2.])).is_self_adjoint is None


def test_dtype_and_shape_errors_name_the_operator():
    op = L.LinearOperatorFullMatrix(np.ones((3, 2), np.float32), name="A")
    with pytest.raises(TypeError, match="A: expected argument to have dtype float32; found float64"):
        op.matmul(kf.constant(np.ones((2, 1))))
    with pytest.raises(ValueError, match="A: matmul expected .* dimension -2 to be 2; got shape \\(4, 1\\)"):
        op.matmul(np.ones((4, 1), np.float32))
    with pytest.raises(NotImplementedError, match="not be square"):
        op.solve(np.ones((3, 1), np.float32))
    with pytest.raises(NotImplementedError, match="not be square"):
        op.determinant()
    with pytest.raises(ValueError, match="non square"):
        op.inverse()
    with pytest.raises(ValueError, match="Cholesky"):
        L.LinearOperatorFullMatrix(_eye()).cholesky()
    with pytest.raises(NotImplementedError, match="self-adjoint"):
        L.LinearOperatorFullMatrix(_eye()).eigvals()
    with pytest.raises(TypeError, match="same dtype"):
        L.LinearOperatorComposition([L.LinearOperatorIdentity(2),
                                     L.LinearOperatorIdentity(2, dtype=kf.float64)])
    with pytest.raises(TypeError, match="matrix must have dtype"):
        L.LinearOperatorFullMatrix(np.ones((2, 2), np.int32))


def test_operator_algebra_returns_operators():
    a = L.LinearOperatorFullMatrix(_eye(), name="a")
    b = L.LinearOperatorDiag(np.array([1., 2., 3.]), name="b")
    comp = a @ b
    assert isinstance(comp, L.LinearOperatorComposition) and comp.operators == [a, b]
    assert isinstance(a.adjoint(), L.LinearOperatorAdjoint) and a.H.operator is a
    assert isinstance(a.inverse(), L.LinearOperatorInversion)
    solved = b.solve(a)
    with kf.Session() as s:
        np.testing.assert_allclose(s.run(solved.to_dense()), s.run(a.to_dense()) / [[1.], [2.], [3.]])


def test_static_shape_properties():
    op = L.LinearOperatorDiag(np.ones((2, 4)))
    assert op.shape.as_list() == [2, 4, 4] and op.batch_shape.as_list() == [2]
    assert op.domain_dimension.value == 4 and op.range_dimension.value == 4 and op.tensor_rank == 3
    assert op.graph_parents == [op.diag] and op.dtype == kf.float64


def test_run_time_asserts():
    d = kf.placeholder(kf.float64, [3])
    op = L.LinearOperatorDiag(d)
    with kf.Session() as s:
        s.run(op.assert_non_singular(), {d: [1., 2., 3.]})
        with pytest.raises(errors.InvalidArgumentError):
            s.run(op.assert_non_singular(), {d: [1., 0., 3.]})
        with pytest.raises(errors.InvalidArgumentError):
            s.run(op.assert_positive_definite(), {d: [1., -2., 3.]})
    m = kf.placeholder(kf.float64, [2, 2])
    full = L.LinearOperatorFullMatrix(m)
    with kf.Session() as s:
        s.run(full.assert_self_adjoint(), {m: [[1., 2.], [2., 1.]]})
        with pytest.raises(errors.InvalidArgumentError):
            s.run(full.assert_self_adjoint(), {m: [[1., 2.], [3., 1.]]})


def test_gradients_flow_through_operators():
    d = kf.constant([1.5, 2., 2.5], dtype=kf.float64)
    u = kf.constant(_r.uniform(-1, 1, (3, 1)))
    a = kf.constant(_eye())
    rhs = np.ones((3, 2))
    low_rank = L.LinearOperatorLowRankUpdate(L.LinearOperatorDiag(d, is_positive_definite=True), u)
    tril = L.LinearOperatorLowerTriangular(a)
    kron = L.LinearOperatorKronecker([L.LinearOperatorFullMatrix(a), L.LinearOperatorDiag(d)])
    losses = [kf.reduce_sum(low_rank.solve(rhs)) + low_rank.log_abs_determinant(),
              kf.reduce_sum(tril.solve(rhs)) + tril.log_abs_determinant(), kron.log_abs_determinant()]
    grads = [kf.gradients(loss, [d, u, a]) for loss in losses]
    assert all(g is not None for g in grads[0][:2]) and grads[1][2] is not None and grads[2][0] is not None
    with kf.Session():
        err = compute_gradient_error([d, u], [[3], [3, 1]], losses[0], [], delta=1e-6)
    assert err < 1e-6


def test_eigvals_and_cond():
    op = L.LinearOperatorFullMatrix(np.diag([1., 4.]), is_self_adjoint=True)
    with kf.Session() as s:
        np.testing.assert_allclose(s.run(op.eigvals()), [1., 4.])
        np.testing.assert_allclose(s.run(op.cond()), 4.)
