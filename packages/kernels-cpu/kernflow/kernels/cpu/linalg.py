"""Numpy kernels of the linear algebra ops (kernflow.core.ops.linalg_ops).

numpy.linalg broadcasts over leading (batch) dimensions, as TF's batched kernels do. Singular
matrices raise InvalidArgumentError with TF's messages.
"""

from __future__ import annotations

import numpy as np

from kernflow.core.framework import errors

DEVICE = "CPU"


def _error(op_type, name, msg):
    return errors.InvalidArgumentError(None, None, f"{op_type} {name}: {msg}")


def _check(op_type, name, x, square=True):
    if np.ndim(x) < 2:
        raise _error(op_type, name, f"Input must have rank >= 2, got {np.ndim(x)}")
    if square and x.shape[-1] != x.shape[-2]:
        raise _error(op_type, name, f"Input matrix must be square, got shape {list(x.shape)}")


def _adj(x):
    x = np.swapaxes(x, -1, -2)
    return np.conjugate(x) if x.dtype.kind == "c" else x


def _cast(v, like):
    return np.asarray(v).astype(like.dtype, copy=False)


def _wide(x):
    """numpy.linalg lacks float16: compute it in float32."""
    return x.astype(np.float32) if x.dtype == np.float16 else x


def _kernel(op_type, body, square=True):
    """A factory whose kernel checks the first input's matrices, then runs body(ctx, name, *xs)."""
    def factory(ctx):
        name = ctx.name

        def compute(x, *rest):
            _check(op_type, name, x, square)
            with np.errstate(all="ignore"):
                return body(ctx, name, x, *rest)
        return compute
    return factory


def _inverse(ctx, name, x):
    a = _adj(x) if ctx.get_attr("adjoint") else x
    try:
        return _cast(np.linalg.inv(_wide(a)), x)
    except np.linalg.LinAlgError:
        raise _error("MatrixInverse", name, "Input is not invertible.") from None


def _det(ctx, name, x):
    return _cast(np.linalg.det(_wide(x)), x)


def _log_det(ctx, name, x):
    sign, logabs = np.linalg.slogdet(_wide(x))
    return _cast(sign, x), _cast(logabs, x)


def _cholesky(ctx, name, x):
    low = np.tril(_wide(x))
    herm = low + np.tril(low, -1).swapaxes(-1, -2).conj()
    try:
        return _cast(np.linalg.cholesky(herm), x)
    except np.linalg.LinAlgError:
        raise _error("Cholesky", name, "Cholesky decomposition was not successful. The input might "
                                       "not be valid.") from None


def _solve_check(op_type, name, a, b, rows=-1):
    """Checks that b is a batch of right-hand sides for the matrices a (`rows`: a's dim they
    match): as many rows, batch dims that broadcast (see linalg_ops._batch_broadcast)."""
    if np.ndim(b) < 2 or b.shape[-2] != a.shape[rows]:
        raise _error(op_type, name, f"Input matrix and right-hand side must have the same number of "
                                    f"rows, got {list(a.shape)} and {list(np.shape(b))}")
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise _error(op_type, name, f"Batch dimensions of the matrix and the right-hand side do not "
                                    f"broadcast: {list(a.shape)} and {list(b.shape)}") from None


def _solve(ctx, name, a, b):
    _solve_check("MatrixSolve", name, a, b)
    m = _adj(a) if ctx.get_attr("adjoint") else a
    try:
        return _cast(np.linalg.solve(_wide(m), _wide(b)), b)
    except np.linalg.LinAlgError:
        raise _error("MatrixSolve", name, "Input matrix is not invertible.") from None


def _triangular_solve(ctx, name, a, b):
    _solve_check("MatrixTriangularSolve", name, a, b)
    m = np.tril(a) if ctx.get_attr("lower") else np.triu(a)
    if ctx.get_attr("adjoint"):
        m = _adj(m)
    if np.any(np.diagonal(m, axis1=-2, axis2=-1) == 0):
        raise _error("MatrixTriangularSolve", name, "Input matrix is not invertible.")
    return _cast(np.linalg.solve(_wide(m), _wide(b)), b)


def _solve_ls(ctx, name, a, b, l2):
    _solve_check("MatrixSolveLs", name, a, b, rows=-2)
    wa, wb, lam = _wide(a), _wide(b), float(l2)
    ah = _adj(wa)
    n = a.shape[-1]
    if lam == 0 and wa.ndim == 2:
        return _cast(np.linalg.lstsq(wa, wb, rcond=None)[0], b)
    gram = ah @ wa + lam * np.eye(n, dtype=wa.dtype)
    return _cast(np.linalg.solve(gram, ah @ wb), b)


def _qr(ctx, name, x):
    q, r = np.linalg.qr(_wide(x), mode="complete" if ctx.get_attr("full_matrices") else "reduced")
    return _cast(q, x), _cast(r, x)


def _svd(ctx, name, x):
    if not ctx.get_attr("compute_uv"):
        s = np.linalg.svd(_wide(x), compute_uv=False)
        empty = np.zeros([0], x.dtype)
        return _cast(s, x), empty, empty
    u, s, vh = np.linalg.svd(_wide(x), full_matrices=ctx.get_attr("full_matrices"))
    return _cast(s, x), _cast(u, x), _cast(_adj(vh), x)


def _eigh(ctx, name, x):
    if not ctx.get_attr("compute_v"):
        return _cast(np.linalg.eigvalsh(_wide(x), UPLO="L"), x), np.zeros([0], x.dtype)
    e, v = np.linalg.eigh(_wide(x), UPLO="L")
    return _cast(e, x), _cast(v, x)


def _matrix_diag(d):
    d = np.asarray(d)
    if d.ndim < 1:
        raise errors.InvalidArgumentError(None, None, "MatrixDiag: input must be at least 1-dim")
    n = d.shape[-1]
    out = np.zeros(d.shape + (n,), d.dtype)
    idx = np.arange(n)
    out[..., idx, idx] = d
    return out


def _diag_part(ctx, name, x):
    return np.diagonal(x, axis1=-2, axis2=-1).copy()


def _set_diag(ctx, name, x, d):
    k = min(x.shape[-2:])
    if np.shape(d) != x.shape[:-2] + (k,):
        raise _error("MatrixSetDiag", name, f"diagonal must have shape {list(x.shape[:-2] + (k,))}, "
                                            f"got {list(np.shape(d))}")
    out = np.array(x, copy=True)
    idx = np.arange(k)
    out[..., idx, idx] = d
    return out


def _band_part(ctx, name, x, lower, upper):
    m, n = x.shape[-2:]
    lower, upper = int(lower), int(upper)
    if lower > m or upper > n:
        raise _error("MatrixBandPart", name, f"num_lower ({lower}) must not exceed the rows ({m}) "
                                             f"and num_upper ({upper}) the columns ({n})")
    i, j = np.arange(m)[:, None], np.arange(n)[None, :]
    keep = ((lower < 0) | (i - j <= lower)) & ((upper < 0) | (j - i <= upper))
    return np.where(keep, x, np.zeros((), x.dtype))


KERNELS = {  # op type -> (body, the first input must be square)
    "MatrixInverse": (_inverse, True),
    "MatrixDeterminant": (_det, True),
    "LogMatrixDeterminant": (_log_det, True),
    "Cholesky": (_cholesky, True),
    "MatrixSolve": (_solve, True),
    "MatrixTriangularSolve": (_triangular_solve, True),
    "MatrixSolveLs": (_solve_ls, False),
    "Qr": (_qr, False),
    "Svd": (_svd, False),
    "SelfAdjointEigV2": (_eigh, True),
    "MatrixDiagPart": (_diag_part, False),
    "MatrixSetDiag": (_set_diag, False),
    "MatrixBandPart": (_band_part, False),
}


def register(registry, device=DEVICE):
    for op, (body, square) in KERNELS.items():
        registry.register(op, device, _kernel(op, body, square), host_memory=(
            ("num_lower", "num_upper") if op == "MatrixBandPart" else
            ("l2_regularizer",) if op == "MatrixSolveLs" else ()))
    registry.register_simple("MatrixDiag", device, _matrix_diag, fresh=True)
