"""Numpy kernels of the linear algebra ops of kernflow.core.ops.math_ops_more: Lu, MatrixSquareRoot
(Denman-Beavers), MatrixExponential (scaling and squaring with a Pade 13 approximant),
MatrixLogarithm, TridiagonalMatMul and TridiagonalSolve. They compute in float64/complex128 and
return the input's dtype; a matrix that is not square, or not invertible where it must be, is an
InvalidArgumentError naming the node.
"""

from __future__ import annotations

import numpy as np

from kernflow.kernels.cpu.math_more import _TINY, _invalid

DEVICE = "CPU"


def _square(ctx, x):
    x = np.asarray(x)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise _invalid(ctx, f"input must be square matrices [..., M, M], got shape {list(x.shape)}")
    return x


def _work(x):
    return x.astype(np.float64) if x.dtype in (np.float16, np.float32) else \
        x.astype(np.complex128) if x.dtype == np.complex64 else x


def _lu_factory(ctx):
    idx_dtype = ctx.output_dtypes[1].as_numpy_dtype

    def compute(x):
        x = _square(ctx, x)
        n = x.shape[-1]
        a = _work(x).reshape((-1, n, n)).copy()
        perm = np.tile(np.arange(n), (a.shape[0], 1))
        rows = np.arange(a.shape[0])
        for k in range(n):
            piv = k + np.argmax(np.abs(a[:, k:, k]), axis=1)
            a[rows, k], a[rows, piv] = a[rows, piv].copy(), a[rows, k].copy()
            perm[rows, k], perm[rows, piv] = perm[rows, piv].copy(), perm[rows, k].copy()
            pivot = a[:, k, k]
            if np.any(pivot == 0) or not np.all(np.isfinite(pivot)):
                raise _invalid(ctx, "Input is not invertible.")
            a[:, k + 1:, k] /= pivot[:, None]
            a[:, k + 1:, k + 1:] -= a[:, k + 1:, k, None] * a[:, None, k, k + 1:]
        return [a.reshape(x.shape).astype(x.dtype), perm.reshape(x.shape[:-1]).astype(idx_dtype)]
    return compute


def _eig_fn(a, fn):
    """V fn(w) V^-1 for diagonalizable a (complex); also the relative residual check's inputs."""
    w, v = np.linalg.eig(a)
    return (v * fn(w)[..., None, :]) @ np.linalg.inv(v)


def _denman_beavers(a, iters=60):
    """sqrtm by the scaled Denman-Beavers iteration (for defective but nonsingular matrices)."""
    y, z = a.copy(), np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape).copy()
    for _ in range(iters):
        det_scale = np.abs(np.linalg.det(y) * np.linalg.det(z)) ** (-1.0 / (2 * a.shape[-1]))
        g = det_scale[..., None, None]
        y, z = 0.5 * (g * y + np.linalg.inv(g * z)), 0.5 * (g * z + np.linalg.inv(g * y))
    return y


def _sqrtm64(a):
    with np.errstate(all="ignore"):
        x = _eig_fn(a, lambda w: np.sqrt(w.astype(np.complex128)))
        scale = np.linalg.norm(a, axis=(-2, -1)) + _TINY
        bad = ~(np.linalg.norm(x @ x - a, axis=(-2, -1)) <= 1e-8 * scale)
        if np.any(bad):
            try:
                x[bad] = _denman_beavers(a[bad].astype(np.complex128))
            except np.linalg.LinAlgError:
                pass
    return x


def _sqrtm_factory(ctx):
    def compute(x):
        x = _square(ctx, x)
        if x.shape[-1] == 0:
            return x.copy()
        r = _sqrtm64(_work(x))
        if x.dtype.kind != "c":
            r = np.where(np.abs(r.imag) <= 1e-8 * (np.abs(r.real) + 1), r.real, np.nan)
        return r.astype(x.dtype)
    return compute


_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800., 129060195264000.,
           10559470521600., 670442572800., 33522128640., 1323241920., 40840800., 960960., 16380., 182., 1.)


def _expm64(a):
    """Scaling and squaring with the [13/13] Pade approximant (Higham 2005)."""
    n = a.shape[-1]
    eye = np.broadcast_to(np.eye(n, dtype=a.dtype), a.shape)
    norm = np.abs(a).sum(axis=-2).max(axis=-1) if n else np.zeros(a.shape[:-2])
    s = np.maximum(0, np.ceil(np.log2(np.maximum(norm, _TINY) / 5.371920351148152))).astype(int)
    a = a / (2.0 ** s)[..., None, None]
    b = _PADE13
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
    r = np.linalg.solve(v - u, v + u)
    for i in range(int(s.max()) if s.size else 0):
        r = np.where((i < s)[..., None, None], r @ r, r)
    return r


def _expm_factory(ctx):
    def compute(x):
        x = _square(ctx, x)
        with np.errstate(all="ignore"):
            return _expm64(_work(x)).astype(x.dtype)
    return compute


def _logm_factory(ctx):
    def compute(x):
        x = _square(ctx, x)
        if x.shape[-1] == 0:
            return x.copy()
        a = _work(x)
        with np.errstate(all="ignore"):
            r = _eig_fn(a, np.log)
            scale = np.linalg.norm(a, axis=(-2, -1)) + _TINY
            bad = ~(np.linalg.norm(_expm64(r) - a, axis=(-2, -1)) <= 1e-8 * scale)
            if np.any(bad):
                r[bad] = _logm_by_roots(a[bad])
        return r.astype(x.dtype)
    return compute


def _logm_by_roots(a):
    """Inverse scaling and squaring: log(A) = 2^k log(A^(1/2^k)), the last by the Mercator series."""
    eye = np.eye(a.shape[-1], dtype=a.dtype)
    k = 0
    while k < 40 and np.max(np.linalg.norm(a - eye, axis=(-2, -1))) > 0.1:
        a = _denman_beavers(a)
        k += 1
    x = a - eye
    term, total = x.copy(), x.copy()
    for j in range(2, 40):
        term = term @ x
        total = total + ((-1) ** (j + 1) / j) * term
    return total * 2.0 ** k


def _tridiag_matmul_factory(ctx):
    def compute(sup, main, sub, rhs):
        rhs = np.asarray(rhs)
        m = rhs.shape[-2] if rhs.ndim >= 2 else -1
        for what, d in (("superdiag", sup), ("maindiag", main), ("subdiag", sub)):
            if np.ndim(d) < 2 or np.shape(d)[-2:] != (1, m):
                raise _invalid(ctx, f"{what} must have shape [..., 1, {m}] to match rhs {list(rhs.shape)}, "
                                    f"got {list(np.shape(d))}")
        sup, main, sub = (np.swapaxes(np.asarray(d), -1, -2) for d in (sup, main, sub))
        out = main * rhs
        out[..., :-1, :] += sup[..., :-1, :] * rhs[..., 1:, :]
        out[..., 1:, :] += sub[..., 1:, :] * rhs[..., :-1, :]
        return out.astype(rhs.dtype, copy=False)
    return compute


def _tridiag_solve_factory(ctx):
    perturb = bool(ctx.get_attr("perturb_singular"))

    def compute(diagonals, rhs):
        d, rhs = np.asarray(diagonals), np.asarray(rhs)
        if d.ndim < 2 or d.shape[-2] != 3 or rhs.ndim < 2 or rhs.shape[-2] != d.shape[-1]:
            raise _invalid(ctx, f"diagonals must be [..., 3, M] and rhs [..., M, K], got {list(d.shape)} and "
                                f"{list(rhs.shape)}")
        m = d.shape[-1]
        if m == 0 or rhs.shape[-1] == 0:
            return np.zeros(rhs.shape, rhs.dtype)
        a = _work(d)
        dense = np.zeros(a.shape[:-2] + (m, m), a.dtype)
        i = np.arange(m)
        dense[..., i, i] = a[..., 1, :]
        dense[..., i[:-1], i[1:]] = a[..., 0, :-1]
        dense[..., i[1:], i[:-1]] = a[..., 2, 1:]
        singular = np.abs(np.linalg.det(dense)) <= _TINY
        if np.any(singular):
            if not perturb:
                raise _invalid(ctx, "The matrix is not invertible.")
            eps = np.finfo(d.dtype).eps * np.abs(dense).max(axis=(-2, -1), keepdims=True)
            dense = dense + np.where(singular[..., None, None], eps, 0) * np.eye(m)
        return np.linalg.solve(dense, _work(rhs)).astype(rhs.dtype)
    return compute


FACTORIES = {
    "Lu": _lu_factory, "MatrixSquareRoot": _sqrtm_factory, "MatrixExponential": _expm_factory,
    "MatrixLogarithm": _logm_factory, "TridiagonalMatMul": _tridiag_matmul_factory,
    "TridiagonalSolve": _tridiag_solve_factory,
}


def register(registry, device=DEVICE):
    """Registers this family's CPU kernels."""
    for op, factory in FACTORIES.items():
        registry.register(op, device, factory)
