"""kf.linalg (kernflow/core/linalg.py and ops/linalg_ops.py): batched values, gradients, errors."""

import json
import os

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core import linalg as kl
from kernflow.core.testing.gradient_checker import compute_gradient_error

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
NOT_PROVIDED_PREFIXES = ()
NOT_PROVIDED = {"experimental"}

_r = np.random.RandomState(3)


def _run(t, feed=None):
    with kf.Session() as s:
        return s.run(t, feed)


def _well(*shape):
    return _r.uniform(-1, 1, shape) + 3 * np.eye(shape[-1])


def _spd(*shape):
    a = _r.uniform(-1, 1, shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def test_every_tf1_linalg_name_is_provided_or_listed():
    with open(os.path.join(ROOT, "tools", "tf1_api_names.json")) as f:
        names = json.load(f)["linalg"]
    missing = {n for n in names if not hasattr(kl, n)}
    listed = {n for n in missing if n in NOT_PROVIDED or n.startswith(NOT_PROVIDED_PREFIXES)}
    assert missing == listed


def test_top_level_aliases():
    assert kf.matrix_inverse is kl.inv and kf.matrix_determinant is kl.det
    assert kf.matrix_solve is kl.solve and kf.matrix_triangular_solve is kl.triangular_solve
    assert kf.self_adjoint_eig is kl.eigh and kf.matrix_band_part is kl.band_part
    for n in ("cholesky", "svd", "qr", "matrix_diag", "matrix_diag_part", "matrix_set_diag", "trace",
              "norm", "eye", "cholesky_solve", "matrix_solve_ls", "self_adjoint_eigvals", "cross"):
        assert getattr(kf, n) is getattr(kl, {"matrix_diag": "diag", "matrix_diag_part": "diag_part",
                                              "matrix_set_diag": "set_diag", "matrix_solve_ls": "lstsq",
                                              "self_adjoint_eigvals": "eigvalsh"}.get(n, n)), n


def test_batched_values_against_numpy():
    a, b = _well(2, 3, 4, 4), _r.randn(2, 3, 4, 2)
    spd = _spd(2, 4, 4)
    np.testing.assert_allclose(_run(kl.inv(a)), np.linalg.inv(a), rtol=1e-10)
    np.testing.assert_allclose(_run(kl.det(a)), np.linalg.det(a), rtol=1e-10)
    sign, logabs = _run(kl.slogdet(a))
    np.testing.assert_allclose(sign * np.exp(logabs), np.linalg.det(a), rtol=1e-10)
    np.testing.assert_allclose(_run(kl.logdet(spd)), np.linalg.slogdet(spd)[1], rtol=1e-10)
    np.testing.assert_allclose(_run(kl.solve(a, b)), np.linalg.solve(a, b), rtol=1e-10)
    chol = np.linalg.cholesky(spd)
    np.testing.assert_allclose(_run(kl.cholesky(spd)), chol, rtol=1e-10)
    rhs = _r.randn(2, 4, 3)
    np.testing.assert_allclose(_run(kl.cholesky_solve(chol, rhs)), np.linalg.solve(spd, rhs), rtol=1e-9)
    np.testing.assert_allclose(_run(kl.trace(a)), np.trace(a, axis1=-2, axis2=-1), rtol=1e-12)
    e, v = _run(kl.eigh(spd))
    np.testing.assert_allclose(e, np.linalg.eigvalsh(spd), rtol=1e-10)
    np.testing.assert_allclose((v * e[..., None, :]) @ np.swapaxes(v, -1, -2), spd, atol=1e-10)
    np.testing.assert_allclose(_run(kl.eigvalsh(spd)), np.linalg.eigvalsh(spd), rtol=1e-10)
    m = _r.randn(2, 5, 3)
    s, u, vv = _run(kl.svd(m))
    np.testing.assert_allclose((u * s[..., None, :]) @ np.swapaxes(vv, -1, -2), m, atol=1e-10)
    q, r = _run(kl.qr(m))
    np.testing.assert_allclose(q @ r, m, atol=1e-10)
    assert q.shape == (2, 5, 3) and r.shape == (2, 3, 3)
    rhs_ls = _r.randn(5, 2)
    np.testing.assert_allclose(_run(kl.lstsq(m[0], rhs_ls)), np.linalg.lstsq(m[0], rhs_ls, rcond=None)[0],
                               rtol=1e-9)
    np.testing.assert_allclose(_run(kl.pinv(m)), np.linalg.pinv(m), atol=1e-10)
    assert _run(kl.matrix_rank(np.array([[1.0, 2.0], [2.0, 4.0]]))) == 1


def test_structure_ops():
    x = _r.randn(2, 3, 4)
    d = _run(kl.diag_part(x))
    np.testing.assert_array_equal(d, np.diagonal(x, axis1=-2, axis2=-1))
    np.testing.assert_array_equal(_run(kl.diag([[1, 2], [3, 4]])), [[[1, 0], [0, 2]], [[3, 0], [0, 4]]])
    z = _run(kl.set_diag(x, np.zeros([2, 3])))
    assert np.all(np.diagonal(z, axis1=-2, axis2=-1) == 0) and z[0, 0, 1] == x[0, 0, 1]
    np.testing.assert_array_equal(_run(kl.band_part(np.ones([3, 3]), 0, -1)), np.triu(np.ones([3, 3])))
    np.testing.assert_array_equal(_run(kl.eye(2, 3, batch_shape=[2])),
                                  np.broadcast_to(np.eye(2, 3), (2, 2, 3)))
    np.testing.assert_array_equal(_run(kl.eye(3, dtype=kf.int32)), np.eye(3, dtype=np.int32))
    np.testing.assert_allclose(_run(kl.adjoint(np.array([[1 + 1j, 2]]))), [[1 - 1j], [2]])
    np.testing.assert_allclose(_run(kl.matvec(x[0], np.ones(4))), x[0].sum(1))
    np.testing.assert_allclose(_run(kl.cross([1.0, 0, 0], [0.0, 1, 0])), [0, 0, 1])


@pytest.mark.parametrize("ord_, axis", [("euclidean", None), (1, 1), (np.inf, 0), (3, -1), (1, (0, 1)),
                                        (np.inf, (0, 1)), ("fro", (0, 1))])
def test_norm(ord_, axis):
    x = _r.randn(3, 4)
    expected = np.linalg.norm(x.ravel() if axis is None else x, ord=None if ord_ in ("euclidean", "fro")
                              else ord_, axis=axis)
    np.testing.assert_allclose(_run(kl.norm(x, ord=ord_, axis=axis)), expected, rtol=1e-10)


def test_norm_rejects_bad_ord():
    with pytest.raises(ValueError, match="'ord' must be a supported matrix norm"):
        kl.norm(np.ones([2, 2]), ord=2, axis=(0, 1))


@pytest.mark.parametrize("fn, make", [
    (kl.inv, lambda: _well(2, 3, 3)), (kl.det, lambda: _well(2, 3, 3)),
    (lambda a: kl.slogdet(a)[1], lambda: _well(3, 3)), (kl.trace, lambda: _r.randn(2, 3, 4)),
    (lambda a: kl.cholesky(0.5 * (a + kl.adjoint(a))), lambda: _spd(2, 3, 3)),
    (lambda a: kl.solve(a, np.ones([3, 2])), lambda: _well(3, 3)),
    (lambda a: kl.triangular_solve(a, np.ones([3, 2]), lower=False), lambda: _well(3, 3)),
    (lambda a: kl.band_part(a, 0, 1), lambda: _r.randn(3, 3)),
    (kl.diag_part, lambda: _r.randn(2, 3, 3)), (kl.diag, lambda: _r.randn(2, 3)),
    (lambda a: kl.logdet(0.5 * (a + kl.adjoint(a))), lambda: _spd(3, 3)),
    (lambda a: kl.norm(a, ord=1, axis=(-2, -1)), lambda: _r.randn(3, 3)),
])
def test_gradients_by_finite_differences(fn, make):
    kf.reset_default_graph()
    xv = make()
    x = kf.placeholder(kf.float64, xv.shape)
    y = fn(x)
    with kf.Session():
        err = compute_gradient_error(x, list(xv.shape), y, y.shape.as_list(), x_init_value=xv, delta=1e-6)
    assert err < 1e-5


def test_solve_rhs_gradient():
    kf.reset_default_graph()
    a = kf.constant(_well(3, 3))
    b = kf.placeholder(kf.float64, [3, 2])
    with kf.Session():
        err = compute_gradient_error(b, [3, 2], kl.solve(a, b), [3, 2], x_init_value=np.ones([3, 2]))
    assert err < 1e-8


def test_non_square_is_rejected_statically_and_at_run_time():
    with pytest.raises(ValueError, match="must be square"):
        kl.inv(np.ones([2, 3]))
    x = kf.placeholder(kf.float64)
    for fn, op_type in ((kl.inv, "MatrixInverse"), (kl.det, "MatrixDeterminant"),
                        (kl.cholesky, "Cholesky"), (kl.eigvalsh, "SelfAdjointEigV2")):
        with pytest.raises(kf.errors.InvalidArgumentError, match=f"{op_type}.*must be square"):
            _run(fn(x), {x: np.ones([2, 3])})


def test_singular_matrices():
    x = kf.placeholder(kf.float64)
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    with pytest.raises(kf.errors.InvalidArgumentError, match="MatrixInverse.*Input is not invertible"):
        _run(kl.inv(x), {x: singular})
    with pytest.raises(kf.errors.InvalidArgumentError, match="MatrixSolve.*not invertible"):
        _run(kl.solve(x, np.ones([2, 1])), {x: singular})
    with pytest.raises(kf.errors.InvalidArgumentError, match="Cholesky.*not successful"):
        _run(kl.cholesky(x), {x: -np.eye(2)})
    assert _run(kl.det(x), {x: singular}) == 0.0


def test_solve_shape_mismatch():
    with pytest.raises(ValueError):
        kl.solve(np.eye(3), np.ones([2, 1]))


@pytest.mark.parametrize("kind", ["solve", "triangular", "lstsq"])
def test_solves_broadcast_batch_dims_with_static_shapes_and_gradients_to_match(kind):
    # The kernels broadcast the batch dims (numpy's rules; TF1 requires them equal): the static
    # shape is the broadcast one, and each gradient is summed back to its input's shape.
    solve = {"solve": kl.solve, "triangular": lambda a, b: kl.triangular_solve(a, b, lower=True),
             "lstsq": lambda a, b: kl.lstsq(a, b, l2_regularizer=0.1)}[kind]
    kf.reset_default_graph()
    av, bv = _well(2, 3, 3), _r.randn(4, 1, 3, 2)
    a, b = kf.placeholder(kf.float64, av.shape), kf.placeholder(kf.float64, bv.shape)
    x = solve(a, b)
    assert x.shape.as_list() == [4, 2, 3, 2]
    out = _run(x, {a: av, b: bv})
    assert out.shape == (4, 2, 3, 2)
    if kind == "lstsq":   # (no gradient, as in TF1)
        return
    np.testing.assert_allclose(out, np.linalg.solve(av if kind == "solve" else np.tril(av), bv),
                               rtol=1e-10)
    with kf.Session():
        for t, x in ((a, solve(a, kf.constant(bv))), (b, solve(kf.constant(av), b))):
            v = av if t is a else bv
            err = compute_gradient_error(t, list(v.shape), x, [4, 2, 3, 2], x_init_value=v, delta=1e-6)
            assert err < 1e-6


def test_solve_batch_dims_that_do_not_broadcast():
    with pytest.raises(ValueError, match=r"Batch dimensions \(2,\) and \(3,\) do not broadcast"):
        kl.solve(np.ones([2, 3, 3]), np.ones([3, 3, 1]))
    a, b = kf.placeholder(kf.float64, [None, 3, 3]), kf.placeholder(kf.float64, [None, 3, 1])
    with pytest.raises(kf.errors.InvalidArgumentError, match="MatrixSolve.*do not broadcast"):
        _run(kl.solve(a, b), {a: _well(2, 3, 3), b: np.ones([3, 3, 1])})
