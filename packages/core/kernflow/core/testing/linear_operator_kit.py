"""A numpy contract check for LinearOperators: every method of one operator in one graph and one run.

`check_operator(op, dense)` builds to_dense, matmul (all four adjoint/adjoint_arg combinations), `@`,
matvec, diag_part, trace, add_to_tensor, adjoint, shape_tensor and, when asked, the determinants, the
solves, inverse and cholesky, runs them in a single Session.run and compares each with numpy on
`dense`. Used by the tests of kernflow.core.linear_operator.
"""

from __future__ import annotations

import numpy as np

import kernflow.core as kf


def _adj(a):
    return np.conj(np.swapaxes(a, -1, -2))


def _vec(a, v):
    return (a @ v[..., None])[..., 0]


def check_operator(op, dense, feed=None, square=True, solve=True, det=True, chol=False, tol=1e-6, seed=0):
    """Compares every method of `op` with numpy on its [batch] matrix `dense`; returns the fetched dict.

    Args:
        op: the LinearOperator under test.
        dense: the numpy [batch] matrix it should represent.
        feed: a feed_dict for placeholders the operator was built from.
        square, solve, det, chol: whether to check trace, the solves/inverse, the determinants, cholesky.
        tol: the rtol and atol of every comparison.
    """
    rng = np.random.RandomState(seed)
    m, n = dense.shape[-2:]
    dt = op.dtype.as_numpy_dtype

    def rand(*shape):
        x = rng.uniform(-1, 1, shape)
        if np.issubdtype(dt, np.complexfloating):
            x = x + 1j * rng.uniform(-1, 1, shape)
        return x.astype(dt)

    x, xa, xm, v, vm, plus = rand(n, 2), rand(2, n), rand(m, 2), rand(n), rand(m), rand(m, n)
    t = {"dense": op.to_dense(), "mm": op.matmul(x), "mm_aa": op.matmul(xa, adjoint_arg=True),
         "mm_a": op.matmul(xm, adjoint=True), "mm_a_aa": op.matmul(_adj(xm), adjoint=True, adjoint_arg=True),
         "mv": op.matvec(v), "mv_a": op.matvec(vm, adjoint=True), "adj": op.adjoint().to_dense(),
         "H": op.H.matmul(xm), "diag": op.diag_part(), "add": op.add_to_tensor(plus),
         "shape": op.shape_tensor(), "op_mm": op @ x}
    want = {"dense": dense, "mm": dense @ x, "mm_aa": dense @ _adj(xa), "mm_a": _adj(dense) @ xm,
            "mm_a_aa": _adj(dense) @ xm, "mv": _vec(dense, v), "mv_a": _vec(_adj(dense), vm),
            "adj": _adj(dense), "H": _adj(dense) @ xm, "diag": np.diagonal(dense, axis1=-2, axis2=-1),
            "add": dense + plus, "shape": dense.shape, "op_mm": dense @ x}
    if square:
        t["trace"] = op.trace()
        want["trace"] = np.trace(dense, axis1=-2, axis2=-1)
    if det:
        t["det"], t["lad"] = op.determinant(), op.log_abs_determinant()
        want["det"], want["lad"] = np.linalg.det(dense), np.linalg.slogdet(dense)[1]
    if solve:
        inv = np.linalg.inv(dense)
        t.update(sv=op.solve(xm), sv_a=op.solve(x, adjoint=True), sv_aa=op.solve(_adj(xm), adjoint_arg=True),
                 sv_a_aa=op.solve(_adj(x), adjoint=True, adjoint_arg=True), svv=op.solvevec(vm),
                 svv_a=op.solvevec(v, adjoint=True), inv=op.inverse().to_dense())
        want.update(sv=inv @ xm, sv_a=_adj(inv) @ x, sv_aa=inv @ xm, sv_a_aa=_adj(inv) @ x,
                    svv=_vec(inv, vm), svv_a=_vec(_adj(inv), v), inv=inv)
    if chol:
        t["chol"] = op.cholesky().to_dense()
        want["chol"] = np.linalg.cholesky(dense)
    with kf.Session() as s:
        got = s.run(t, feed)
    for k, w in want.items():
        np.testing.assert_allclose(got[k], w, rtol=tol, atol=tol, err_msg="%s: %s" % (op.name, k))
    return got


def fresh_graph():
    """A generator for an autouse pytest fixture: one small graph per test, so each run prunes only its ops.

    Use as ``_fresh_graph = pytest.fixture(autouse=True)(fresh_graph)``.
    """
    with kf.Graph().as_default():
        yield


def well_conditioned(rng, *shape):
    """A random float64 [batch] matrix with 3 added to its diagonal (well conditioned, non-singular)."""
    return rng.uniform(-1, 1, shape) + 3 * np.eye(shape[-1])
